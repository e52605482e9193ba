// Package replica is a broker's replica manager (Manager): it owns the
// partitions the broker holds (Partition), their logs and roles, the
// application of the controller's LeaderAndIsr, StopReplica and
// UpdateMetadata, appends and the acks=all and DeleteRecords waits, the
// fetchers that follow leaders, the ISR changes it reports, retention,
// producer snapshots and the log cleaner. Beside the logs it keeps the
// log dirs (the lock on each, the dirs gone offline and the replicas
// offline until restart, where a new partition's log is placed), the high
// watermark checkpoint (replication-offset-checkpoint), each partition
// directory's partition.metadata (its topic ID) and the atomic file
// replacement they are written with; and the replication throttles
// (Kafka's ReplicationQuotaManager): the leader's and the follower's
// byte-rate quotas. It reaches the rest of the broker only through the
// interfaces of Deps; it imports no broker package but broker/config,
// uses the coordination service only through coord's interfaces, and
// touches no file outside the log dirs it is given.
package replica
