// Package group owns the decisions of Kafka's group coordinator for classic
// consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): a group's
// state (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), its
// members and their sessions, the generation, the chosen protocol and
// leader, the initial rebalance delay, the rebalance and pending-sync
// timeouts, static membership (KIP-345), and which member/generation may
// commit offsets. It follows Kafka 3.x's GroupCoordinator.scala and
// GroupMetadata.scala. The same package holds the __consumer_offsets record
// codec (records.go), the committed offsets (offsets.go) and the mapping of
// a group to its partition (partition.go).
//
// A Group is a deterministic state machine in the style of etcd-io/raft's
// Ready pattern: events go in through methods, every method returns what it
// decided as an Output. It does no I/O, starts no goroutines, holds no locks
// and reads no clock (time is an argument); it imports neither broker nor coord,
// and of replication only the log's batch framing (to read records). Member ids come from Config.NewMemberID (by default
// crypto/rand UUIDs, Kafka's format).
//
// # Wiring it into the broker
//
// The broker keeps one *Group per group it coordinates, guarded by a lock,
// and applies every Output as follows.
//
//   - Output.Replies: answer each held request named by Reply.To with the
//     JoinGroup or SyncGroup response it carries (the request just passed
//     in may be among them). A Waiter is the broker's own id for one held
//     request; the group answers each exactly once, so a held request is
//     answered only through a Reply (or dropped with its connection).
//   - Output.Store: append the GroupMetadataValue under the group's key to
//     __consumer_offsets (acks=all), then call Stored(now, Store.Generation,
//     code) with 0 or the Kafka error code for the members (StoreError maps
//     an append's error as Kafka does). Call Stored once per Store, in the
//     order the Stores came.
//   - Output.Deadline: call Tick(now) at or after it (a zero Deadline needs
//     no timer). A later Output's Deadline replaces an earlier one's.
//
// The requests map to calls: JoinGroup -> Join (held until a Reply),
// SyncGroup -> Sync (held until a Reply), Heartbeat -> Heartbeat,
// LeaveGroup -> Leave, OffsetCommit -> ValidateCommit before storing,
// TxnOffsetCommit -> ValidateTxnCommit, OffsetFetch -> ValidateFetch,
// DescribeGroups -> Describe, DeleteGroups -> Deletable. KIP-848's online
// migration hands a group to package group/consumer with Snapshot and
// HandOver, and takes one back with FromConsumer (convert.go). A broker that
// becomes coordinator of a __consumer_offsets partition rebuilds each group
// from its latest metadata record with Restore (a group without one is New
// when a member first joins or commits); one that stops being coordinator
// calls Unload and drops the group. A group in Dead answers
// COORDINATOR_NOT_AVAILABLE; the broker drops it and creates a New one.
//
// Outputs share byte slices (metadata, assignments) with the group: the
// broker encodes them and must not modify them.
package group
