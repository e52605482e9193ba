// Package controller is tripod's one controller, written once against
// the coordination contract (package coord) and run unchanged on
// ZooKeeper, etcd and embedded Raft by the broker that wins the
// controller election, for the duration of its Term.
//
// It is two parts. The decisions (State and its methods, with the pure
// helpers AssignReplicas and ElectLeader) take the controller's
// knowledge of the cluster (the metadata, the live brokers and their
// epochs, the brokers in controlled shutdown, the offline replicas) and
// an event (a membership change, CreateTopics, AlterPartition,
// ControlledShutdown, ElectLeaders, a rebalance tick, ...) and return a
// Plan: the ops to commit and the requests to send once they are
// committed. They do no I/O, read no clock and start no goroutine, so
// each rule has a millisecond table test. The Controller is the thin
// actor around them: one goroutine that takes events in order, asks the
// State, commits the plan through the backend, sends its requests
// through a Sender, and handles every commit failure the same way.
//
// controller owns the partition leadership and replica placement rules
// (Kafka's assignment, R11's election, ISR changes, controlled shutdown,
// the preferred-leader rebalance) and the wire-free requests it sends to
// brokers. It imports coord and nothing of tripod besides; it must not
// import a backend, broker or replication, and it performs no Kafka
// protocol I/O: the broker encodes and delivers its requests.
package controller
