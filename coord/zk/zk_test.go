package zk_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
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
func server(t *testing.T) *zkserver.Server {
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
