package zk_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// srv is the ZooKeeper every test of the package shares (each under its own
// chroot); nil when ZooKeeper is not installed outside CI.
var srv *zkserver.Server

// unavailable says why srv is nil.
var unavailable error

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if unavailable = zkserver.Available(); unavailable == nil {
		dir, err := os.MkdirTemp("", "tripod-zk-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "temp dir:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		srv, err = zkserver.Start(dir, zkserver.DefaultConfig())
		if err != nil {
			fmt.Fprintln(os.Stderr, "start zookeeper:", err)
			return 1
		}
		defer srv.Close()
	}
	return m.Run()
}

// server returns the shared ZooKeeper, skipping t (failing it under CI)
// when there is none.
func server(t testing.TB) *zkserver.Server {
	t.Helper()
	if srv == nil {
		zkserver.Require(t)
		t.Fatalf("zookeeper unavailable: %v", unavailable)
	}
	return srv
}

func TestConformance(t *testing.T) {
	s := server(t)
	conformance.Run(t, conformance.NewZKHarness(s.Addr(), s, 2*time.Second))
}

// TestHarnessRemovesItsChroot checks what `tripod conformance` relies on
// against a user's ZooKeeper (no server handle): each cluster's chroot,
// here under a chroot of the connect string, is deleted when it closes.
func TestHarnessRemovesItsChroot(t *testing.T) {
	s := server(t)
	h := conformance.NewZKHarness(s.Addr()+"/users-kafka", nil, 2*time.Second)
	t.Run("cluster", func(t *testing.T) {
		c := h.NewCluster(t, 1)
		if _, ok := c.(conformance.ServiceRestarter); ok {
			t.Fatalf("cluster without a server handle: got a ServiceRestarter, want none")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess, err := c.Backend(0).Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
		if err != nil {
			t.Fatalf("register: %v", err)
		}
		defer sess.Close()
	})
	conn := raw(t, s.Addr())
	children, _, err := conn.Children("/users-kafka/tripod-conformance")
	if err != nil || len(children) != 0 {
		t.Fatalf("/users-kafka/tripod-conformance after the cluster closed: got %v, %v; want no chroot left", children, err)
	}
}
