// Package txncoord is tripod's transaction coordinator (KIP-98, KIP-360,
// KIP-447, KIP-890 part 1): the I/O around package txn's decisions. It
// coordinates the transactional ids that map to the __transaction_state
// partitions this broker leads, one shard per partition: a shard is
// loaded when the broker becomes the partition's leader (each id's
// latest record restored with txn.Restore) and unloaded when it stops
// leading it. Every change of a transactional id is appended to its
// partition and applied once replicated, as Kafka's TransactionStateManager
// does; the end of a transaction is then written to each of its
// partitions with WriteTxnMarkers, sent to their leaders, and completed
// once all are written. One goroutine aborts the transactions past their
// timeout and removes the expired ids.
//
// The broker answers the Kafka APIs (InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions) with
// the Coordinator's methods, and gives it what it needs through Deps: the
// partitions' logs (StateLog), the cluster's metadata (Cluster) and the
// sending of markers (Markers).
package txncoord
