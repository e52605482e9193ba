// Package txn owns the decisions of Kafka's transaction coordinator
// (KIP-98, KIP-360): a transactional id's state (Empty, Ongoing,
// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
// PrepareEpochFence) and which state may follow which, its producer id
// and epoch (bumped by InitProducerId, fenced by a newer producer or a
// timeout), the partitions of its open transaction, and what
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn decide
// about it. It follows Kafka 3.x's TransactionCoordinator.scala and
// TransactionMetadata.scala. The same package holds the __transaction_state
// record codec (records.go) and the mapping of a transactional id to its
// partition.
//
// A Metadata changes in two steps, as Kafka's does: a Prepare method checks
// the transition and returns a Transit (the record to store) with the
// Metadata's pending state set; once the Transit is stored in
// __transaction_state (acks=all) the broker calls Complete, or Abandon if
// the write failed. While a transition is pending, every request of the
// transactional id is answered CONCURRENT_TRANSACTIONS, which clients
// retry. The package does no I/O, starts no goroutines, holds no locks and
// reads no clock (time is an argument in milliseconds); it imports neither
// broker nor coord.
//
// # Wiring it into the broker
//
// broker/txncoord does what follows. The broker keeps one *Metadata per transactional id whose
// __transaction_state partition it leads, guarded by a lock, and:
//
//   - InitProducerId with a transactional id: InitProducerID, then store
//     the Transit and Complete it (a new Metadata starts with New and a
//     producer id from the broker's blocks). Decision.AbortFirst means an
//     open transaction must be aborted first (the old producer is fenced):
//     end it as EndTxn(abort) does, from the coordinator, and answer the
//     client CONCURRENT_TRANSACTIONS, which it retries.
//   - AddPartitionsToTxn and AddOffsetsToTxn: AddPartitions (the offsets
//     topic's partition of the group for AddOffsetsToTxn).
//   - EndTxn: EndTxn; store the Prepare Transit, answer the client, send
//     WriteTxnMarkers to the leaders of every partition of the
//     transaction, acting on each partition's answer as MarkerOutcome
//     says, and when all are written Complete the transaction with
//     PrepareComplete.
//   - ListTransactions: ParseStates and a ListFilter's Matches.
//   - Every transaction.abort.timed.out.transaction.cleanup.interval.ms:
//     TimedOut names the transactions to abort (fence and abort); every
//     transactional.id.expiration.ms check, Expired the ids to forget
//     (PrepareDead, a tombstone).
//
// A broker that becomes the leader of a __transaction_state partition
// rebuilds each Metadata from its latest record with Restore; a
// transaction left in PrepareCommit or PrepareAbort has its markers sent
// again.
package txn
