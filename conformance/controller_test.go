package conformance_test

import (
	"os"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
	_ "github.com/tripodmq/tripod/coord/etcd"
	_ "github.com/tripodmq/tripod/coord/raft"
	_ "github.com/tripodmq/tripod/coord/zk"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// controllerSessionTimeout keeps the controller cases quick.
const controllerSessionTimeout = 2 * time.Second

// TestController runs the one controller on each backend: the same cases,
// the same expectations.
func TestController(t *testing.T) {
	t.Run("zk", func(t *testing.T) {
		srv := zkserver.StartForTest(t, 1)
		conformance.RunController(t, conformance.NewZKHarness(srv.Connect(), srv, controllerSessionTimeout))
	})
	t.Run("etcd", func(t *testing.T) {
		dir := t.TempDir()
		srv, err := etcdserver.Start(dir)
		if err != nil {
			t.Fatalf("start embedded etcd: %v", err)
		}
		t.Cleanup(func() { srv.Close(); os.RemoveAll(dir) })
		conformance.RunController(t, conformance.NewEtcdHarness(srv.Endpoints(), srv, controllerSessionTimeout))
	})
	t.Run("raft", func(t *testing.T) {
		conformance.RunController(t, conformance.NewRaftHarness(controllerSessionTimeout))
	})
}
