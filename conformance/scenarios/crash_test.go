package scenarios

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
)

// crashSession is the session timeout of the crash scenarios: long, so
// that what they see happen is the crash probes' doing
// (broker.crash.probe.interval.ms), not a session's expiry.
const crashSession = 20 * time.Second

// TestCrashedBrokerFencedPausedBrokerKept: one broker is frozen (SIGSTOP)
// and another crashed (SIGKILL) at the same moment, with a session
// timeout of 20 s. Long before the sessions expire the crashed broker is
// fenced (its listener refuses connections): it leads nothing, is in no
// ISR and is not in the live set. At that moment the frozen broker, whose
// kernel still accepts connections, still leads its partitions and is in
// every ISR: a pause is left to its session's expiry. Once thawed, it
// goes on serving.
func TestCrashedBrokerFencedPausedBrokerKept(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startClusterWith(t, backend, brokersFor(backend, true), func(cfg *cluster.Config) { cfg.SessionTimeout = crashSession })
		createTopic(t, c, "crash", 6, 3)
		waitLed(t, c, "crash", 6)
		ctrl := controller(t, c)
		victim, frozen := others(c, ctrl)[0], others(c, ctrl)[1]
		before := metadata(t, c, ctrl, "crash")
		frozenLeads := before.LedBy("crash", frozen)

		if err := c.Broker(frozen).Pause(); err != nil {
			t.Fatal(err)
		}
		defer c.Broker(frozen).Resume()
		crashedAt := time.Now()
		if err := c.Broker(victim).Kill(); err != nil {
			t.Fatal(err)
		}
		waitEvery(t, c, crashSession/2, fmt.Sprintf("crashed broker %d fenced", victim), func(md *cluster.Metadata) error {
			if slices.Contains(md.Brokers, victim) {
				return fmt.Errorf("live brokers %v still list the crashed %d", md.Brokers, victim)
			}
			for _, p := range md.Partitions["crash"] {
				if p.Leader == victim || p.Leader < 0 || slices.Contains(p.ISR, victim) {
					return fmt.Errorf("crash/%d: leader %d ISR %v, want neither to hold crashed broker %d", p.Partition, p.Leader, p.ISR, victim)
				}
			}
			return nil
		}, "crash")
		fenced := time.Since(crashedAt)
		md := metadata(t, c, ctrl, "crash")
		for _, p := range md.Partitions["crash"] {
			if slices.Contains(frozenLeads, p.Partition) && p.Leader != frozen {
				t.Errorf("crash/%d: leader %d, want the frozen broker %d still (a pause is not a crash)", p.Partition, p.Leader, frozen)
			}
			if slices.Contains(p.Replicas, frozen) && !slices.Contains(p.ISR, frozen) {
				t.Errorf("crash/%d: ISR %v lost the frozen broker %d, want it kept until its session expires", p.Partition, p.ISR, frozen)
			}
		}
		t.Logf("%s: crashed broker %d fenced %v after SIGKILL (session timeout %v); frozen broker %d kept its %d leaderships",
			backend, victim, fenced.Round(time.Millisecond), crashSession, frozen, len(frozenLeads))

		if err := c.Broker(frozen).Resume(); err != nil {
			t.Fatal(err)
		}
		produceValues(t, kafkaClient(t, c), "crash", frozenLeads[0], "after the thaw")
	})
}

// TestCrashedControllerReplacedBeforeSessionExpiry: the controller
// crashes (SIGKILL) with a session timeout of 20 s. Long before its
// session expires another broker is controller (on ZooKeeper and etcd a
// survivor evicts the crashed controller's election node once its
// listener refuses connections; on Raft the Raft election follows) and
// has moved the crashed broker's leaderships.
func TestCrashedControllerReplacedBeforeSessionExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startClusterWith(t, backend, 3, func(cfg *cluster.Config) { cfg.SessionTimeout = crashSession })
		createTopic(t, c, "ctrlcrash", 6, 3)
		waitLed(t, c, "ctrlcrash", 6)
		old := controller(t, c)
		crashedAt := time.Now()
		if err := c.Broker(old).Kill(); err != nil {
			t.Fatal(err)
		}
		waitEvery(t, c, crashSession/2, fmt.Sprintf("a new controller that moved crashed controller %d's leaderships", old), func(md *cluster.Metadata) error {
			if md.ControllerID == old || md.ControllerID < 0 {
				return fmt.Errorf("controller %d, want another than the crashed %d", md.ControllerID, old)
			}
			for _, p := range md.Partitions["ctrlcrash"] {
				if p.Leader == old || p.Leader < 0 || slices.Contains(p.ISR, old) {
					return fmt.Errorf("ctrlcrash/%d: leader %d ISR %v, want neither to hold crashed broker %d", p.Partition, p.Leader, p.ISR, old)
				}
			}
			return nil
		}, "ctrlcrash")
		t.Logf("%s: crashed controller %d replaced by %d, its leaderships moved, %v after SIGKILL (session timeout %v)",
			backend, old, controller(t, c), time.Since(crashedAt).Round(time.Millisecond), crashSession)
	})
}
