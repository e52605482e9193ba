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

// TestControllerAfterMigration runs the controller cases on clusters that
// started on one backend and were migrated to another (MigratedHarness):
// the controller on the target, through the brokers' migration.Backend,
// with the epochs the target carries over from the source and a topic
// copied from it. Two of the six directions, which between them have
// every backend on one side or the other, keep `make test` within its
// time: with -race on 2 cores zk-to-etcd takes about 19 s and
// etcd-to-raft 22 s (raft-to-zk 28 s, etcd-to-zk 13 s, zk-to-raft 22 s,
// raft-to-etcd 33 s; the plain zk and etcd runs of TestController take
// 16 s and 19 s).
func TestControllerAfterMigration(t *testing.T) {
	zkSrv := zkserver.StartForTest(t, 1)
	dir := t.TempDir()
	etcdSrv, err := etcdserver.Start(dir)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { etcdSrv.Close(); os.RemoveAll(dir) })
	zk := conformance.NewZKHarness(zkSrv.Connect(), nil, controllerSessionTimeout)
	etcd := conformance.NewEtcdHarness(etcdSrv.Endpoints(), nil, controllerSessionTimeout)
	raft := conformance.NewRaftHarness(controllerSessionTimeout)
	for _, h := range []conformance.Harness{conformance.MigratedHarness(zk, etcd), conformance.MigratedHarness(etcd, raft)} {
		t.Run(h.Name(), func(t *testing.T) { conformance.RunController(t, h) })
	}
}
