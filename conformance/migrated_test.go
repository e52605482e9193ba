package conformance

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// TestMigratedHarnessCrashAndRestart runs, on clusters migrated from
// ZooKeeper to etcd, the backend's cases that crash a broker and restart
// one (no controller case restarts a broker): a crash ends the session
// on the target within the detection bound, and a broker restarted
// after the switch opens the target, where its state is, while the
// backend it closed refuses every call.
func TestMigratedHarnessCrashAndRestart(t *testing.T) {
	zkSrv := zkserver.StartForTest(t, 1)
	dir := t.TempDir()
	etcdSrv, err := etcdserver.Start(dir)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { etcdSrv.Close(); os.RemoveAll(dir) })
	const sessionTimeout = 2 * time.Second
	h := MigratedHarness(NewZKHarness(zkSrv.Connect(), nil, sessionTimeout), NewEtcdHarness(etcdSrv.Endpoints(), nil, sessionTimeout))
	run := []string{
		"Sessions/ExpiryWithinBounds",
		"Sessions/ReRegistrationNewEpoch",
		"Sessions/BackendCloseEndsAll",
		"Election/CampaignEndsWithCtxOrSession",
		"Election/CrashedControllerReplaced",
		"Election/DeposedCommitFenced",
		"ProducerIDs/RestartedBrokerContinuesAbove",
		"Security/SurvivesRestart",
		"Configs/SurviveRestart",
	}
	for _, tc := range cases() {
		if slices.Contains(run, tc.fullName()) {
			t.Run(tc.fullName(), func(t *testing.T) { tc.run(t, h) })
		}
	}
}
