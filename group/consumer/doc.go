// Package consumer owns the decisions of Kafka's group coordinator for
// consumer groups of the consumer group protocol (KIP-848): members join,
// heartbeat and leave with ConsumerGroupHeartbeat; the coordinator keeps
// the group epoch, computes a target assignment with a server-side
// assignor (uniform or range) whenever the group epoch passes the
// assignment epoch, and reconciles each member towards its target: a
// member first revokes the partitions it must give up, and only then do
// others get them, so that no partition is ever owned by two members.
// It follows Kafka 4's GroupMetadataManager, ConsumerGroup,
// ConsumerGroupMember and CurrentAssignmentBuilder.
//
// A Group is a deterministic state machine like group.Group: events go in
// through methods, which return what they decided (the response and an
// Output: the __consumer_offsets records to write, in Kafka's schemas for
// consumer groups, and the next deadline). It does no I/O, reads no clock
// (time is an argument) and knows the cluster's topics only through the
// Metadata the caller passes in. Loader rebuilds groups from the records
// a coordinator reads back when it loads a __consumer_offsets partition.
//
// # Wiring it into the broker
//
//   - ConsumerGroupHeartbeat: ValidateHeartbeat, then Heartbeat on the
//     group (New for a member joining with epoch 0 a group that does not
//     exist); write Output.Records to the group's __consumer_offsets
//     partition and answer once they are replicated.
//   - Output.Deadline: call Tick at or after it; a later Output's
//     Deadline replaces an earlier one's.
//   - OffsetCommit and OffsetFetch: ValidateCommit and ValidateFetch.
//   - ConsumerGroupDescribe: Describe.
//
// # Classic members and online migration
//
// A group may also have classic members (KIP-848's online migration,
// classic.go): FromClassic converts a classic group with members for a
// ConsumerGroupHeartbeat that joins it; JoinGroup, SyncGroup, Heartbeat
// and LeaveGroup of a classic member go to JoinClassic, SyncClassic,
// HeartbeatClassic and LeaveClassic, answered once Output.Records are
// written; an Output with Downgrade set may be acted on with
// ClassicSnapshot (for group.FromConsumer) and Tombstones.
package consumer
