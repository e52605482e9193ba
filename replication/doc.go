// Package replication owns the replication decisions of a partition: the
// leader's view of each follower's log end offset (LEO) and when it last
// caught up, the high watermark (HW = min LEO over the ISR), when the ISR
// shrinks and grows, which acks=all produces complete or fail, where a
// new follower truncates its log, and where DeleteRecords moves the log
// start offset and when every ISR member has followed it; and, for
// transactions (Txns), which offsets are decided: the last stable offset
// and the aborted-transaction index entries. It is a
// deterministic state machine in the style of etcd-io/raft's
// Ready/Advance: events go in through methods, decisions come out as
// return values and as a Ready. It does no I/O, starts no goroutines and
// reads no clock (time is an argument); it must not import coord or
// broker. replication/log stores the records.
//
// # Wiring it into the broker
//
// The broker keeps one *Partition per hosted partition, guarded by the
// partition's lock, and calls it as follows. After every call that takes a
// now it takes Ready() and acts on it.
//
//   - LeaderAndIsr naming this broker leader: BecomeLeader(state, log
//     EndOffset, checkpointed HW, now). Same leader epoch and a newer
//     partition epoch updates the ISR only (the controller's answer to an
//     AlterPartition also arrives this way).
//   - LeaderAndIsr naming another leader: BecomeFollower(state, log
//     EndOffset, checkpointed HW, log Epochs()). It returns a Truncation:
//     cut the log to Truncation.Offset (log.TruncateTo); if not Done, send
//     OffsetForLeaderEpoch for Truncation.Epoch to the leader and feed the
//     answer to EpochEndOffset, which returns the next Truncation. When
//     Done, the fetcher fetches from Truncation.Offset.
//   - Produce, acks=all: CheckAcksAll() before appending (an error is the
//     partition's error code, nothing is written); after log.Append,
//     Appended(end offset, now), then Await(id, lastOffset, deadline,
//     now); the ack arrives in a later Ready.Acks with the same id.
//     acks=0 and acks=1 call Appended only.
//   - Fetch from a follower (replica id set): FollowerFetch(id, fetch
//     offset, the fetch's log start offset, now) before reading; answer
//     with HighWatermark().
//   - Fetch from a consumer: read below HighWatermark() only.
//   - Fetch response at a follower: after log.AppendAsFollower,
//     FollowerFetched(log EndOffset, response HW); it returns the
//     follower's HW. Then LeaderLogStart(response log start offset): if
//     it advances, log.AdvanceStartOffset to it and SetLogStart.
//   - The local log's start offset moved (retention, DeleteRecords, a
//     follower following its leader's), and after BecomeLeader:
//     SetLogStart(log StartOffset, now).
//   - DeleteRecords: DeleteRecordsOffset(offset) (an error is the
//     partition's error code, nothing moves), log.AdvanceStartOffset to
//     the answer, SetLogStart, then AwaitLowWatermark(id, answer,
//     deadline, now); the low watermark arrives in a later
//     Ready.Deletes with the same id.
//   - A timer every ReplicaLagTimeMax/2 and at NextDeadline():
//     Tick(now) (ISR shrink, ack timeouts).
//   - Ready.Proposal: send controller.AlterPartitionRequest{LeaderEpoch,
//     PartitionEpoch, ISR} (converting ReplicaID to coord.BrokerID, with
//     the broker's id and epoch) and feed the outcome back: on success
//     AlterPartitionCommitted with the committed coord.PartitionState's
//     LeaderEpoch, PartitionEpoch and ISR; on controller.ErrFencedLeaderEpoch,
//     ErrInvalidUpdateVersion or coord.ErrNotFound,
//     AlterPartitionFailed(AlterAwaitLeaderAndIsr) (the proposal stays in
//     flight until the next BecomeLeader or BecomeFollower); on any other
//     error (ErrIneligibleReplica, ErrNotController, unavailable)
//     AlterPartitionFailed(AlterRetry) and the next Tick or fetch proposes
//     again.
//   - Ready.HighWatermark with HighWatermarkChanged: store it for the HW
//     checkpoint file (Kafka writes that file every
//     replica.high.watermark.checkpoint.interval.ms; it need not be
//     synchronous) and wake long-polling fetches.
//   - Ready.Acks: answer each produce with its error (nil is success).
//   - Ready.Deletes: answer each DeleteRecords with its low watermark
//     and error.
//
// The broker persists the HW checkpoint and the log (with its
// leader-epoch checkpoint, which replication/log keeps); the state machine
// is rebuilt from them and the next LeaderAndIsr after a restart.
package replication
