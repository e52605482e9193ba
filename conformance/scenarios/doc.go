// Package scenarios proves, with brokers as real `tripod serve` processes
// on ZooKeeper, etcd and embedded Raft, the controller's scenarios of the
// source documents: leaders spread at topic creation, a new leader from
// the ISR when a leader or the controller crashes, leader -1 and back when
// every replica goes and one returns, a zombie controller fenced, a
// controlled shutdown, and the preferred-leader rebalance. Each scenario is
// one test whose steps are the scenario's steps, run once per backend;
// the Raft quorum's scenarios (raft_quorum_test.go: retiring, adding and
// losing brokers, voters added and removed) run on Raft alone, the one
// backend whose quorum lives in the brokers.
//
// The package holds only tests; the processes are run by internal/cluster.
package scenarios
