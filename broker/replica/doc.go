// Package replica owns what the partitions a broker holds keep beside
// their logs: the log dirs (the lock on each, the dirs gone offline and the
// replicas offline until restart, where a new partition's log is placed),
// the high watermark checkpoint (replication-offset-checkpoint), each
// partition directory's partition.metadata (its topic ID) and the atomic
// file replacement they are written with; and the replication throttles
// (Kafka's ReplicationQuotaManager): the leader's and the follower's
// byte-rate quotas and the format of the throttled replicas configs. It is
// the home the broker's replica manager grows into. It must not import the
// broker, the controller or a coordination backend, and it touches no file
// outside the log dirs it is given.
package replica
