// Package replica owns the on-disk state of the partitions a broker holds
// beside their logs: the lock on each log dir, the high watermark
// checkpoint (replication-offset-checkpoint), each partition directory's
// partition.metadata (its topic ID), and the atomic file replacement they
// are written with. It is the home the broker's replica manager grows
// into; it must not import the broker, the controller or a coordination
// backend, and it keeps no state a caller did not hand it.
package replica
