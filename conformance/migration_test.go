package conformance_test

import (
	"os"
	"testing"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// TestMigration moves a cluster's coordination state in all six
// directions between ZooKeeper, etcd and embedded Raft.
func TestMigration(t *testing.T) {
	zkSrv := zkserver.StartForTest(t, 1)
	dir := t.TempDir()
	etcdSrv, err := etcdserver.Start(dir)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { etcdSrv.Close(); os.RemoveAll(dir) })
	harnesses := []conformance.Harness{
		conformance.NewZKHarness(zkSrv.Connect(), nil, controllerSessionTimeout),
		conformance.NewEtcdHarness(etcdSrv.Endpoints(), nil, controllerSessionTimeout),
		conformance.NewRaftHarness(controllerSessionTimeout),
	}
	for _, src := range harnesses {
		for _, dst := range harnesses {
			if src.Name() == dst.Name() {
				continue
			}
			t.Run(src.Name()+"-to-"+dst.Name(), func(t *testing.T) { conformance.RunMigration(t, src, dst) })
		}
	}
}
