// Package conformance is the one suite that every coordination backend
// must pass: the same cases, grouped by capability, run against ZooKeeper,
// etcd and embedded Raft from `go test` (each backend's _test.go) and from
// `tripod conformance`, and the controller's cases, which run the one
// controller (package controller) on each backend. It depends on coord,
// controller and the backends' harnesses; it never mocks a backend.
package conformance

import (
	"time"

	"github.com/tripodmq/tripod/coord"
)

// T is what the suite needs of a test: *testing.T satisfies it, and so
// does the runner of `tripod conformance`.
type T interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	TempDir() string
}

// Harness builds fresh, isolated clusters of one backend for the suite.
// Each backend provides one (harness_zk.go, harness_etcd.go,
// harness_raft.go).
type Harness interface {
	// Name is the backend's name: "zk", "etcd" or "raft".
	Name() string

	// SessionTimeout is the session timeout the harness opens backends
	// with. Cases use it as the detection bound (timeout + 1 s).
	SessionTimeout() time.Duration

	// NewCluster returns a cluster of n backends sharing one fresh,
	// namespaced coordination state (a new ZooKeeper chroot, a new etcd
	// prefix, a new n-node Raft cluster), as n broker processes would open
	// them, backend i for broker i+1. The cluster is closed by t.Cleanup.
	NewCluster(t T, n int) Cluster
}

// HarnessOption adjusts the Config of every backend a harness opens, after
// the harness has set its own fields: the credentials, ACLs and TLS of a
// secured backend, for instance.
type HarnessOption func(cfg *coord.Config)

// configure applies opts to cfg.
func configure(cfg *coord.Config, opts []HarnessOption) {
	for _, o := range opts {
		o(cfg)
	}
}

// Cluster is n backends of one namespace, with fault hooks.
type Cluster interface {
	// Backend returns backend i (0-based), opened for broker i+1.
	Backend(i int) coord.Backend

	// Crash cuts backend i off from the coordination service as a SIGKILL
	// or a partition would: its connections drop, it renews nothing, and
	// it sends no goodbye. The backend object stays usable for Close.
	Crash(i int)

	// Heal undoes Crash: backend i may reach the service again. Sessions
	// the service expired meanwhile stay expired.
	Heal(i int)

	// Restart closes backend i as a stopping broker does and opens it again
	// with the same configuration (the same namespace; on Raft the same
	// directory and address), as the broker's next run would. Backend(i)
	// returns the new backend afterwards. It fails t when the backend
	// cannot be opened again.
	Restart(t T, i int)
}

// ServiceRestarter is a Cluster whose coordination service runs apart from
// the brokers (ZooKeeper, etcd) and can be stopped and started again.
type ServiceRestarter interface {
	// StopService stops the service (all members), keeping its data.
	StopService(t T)
	// StartService starts it again on the same addresses and data.
	StartService(t T)
}

// QuorumLoser is a Cluster whose coordination service is the brokers
// themselves (Raft): losing a majority of them stops it.
type QuorumLoser interface {
	// StopNode stops backend i's node as a crash would, keeping its data.
	StopNode(t T, i int)
	// StartNode restarts backend i's node from its data; Backend(i)
	// returns the new backend afterwards.
	StartNode(t T, i int)
}
