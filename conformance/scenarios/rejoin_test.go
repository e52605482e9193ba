package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
)

// rejoinSessionTimeout is the session timeout of the rejoin scenario: long
// enough that a rejoin within half of it cannot have waited for the crashed
// incarnation's registration to expire.
const rejoinSessionTimeout = 10 * time.Second

// TestCrashedBrokerRejoinsWithoutExpiry is KRaft's incarnation rule: a
// broker killed with SIGKILL and started again on its data dir holds the
// dir's lock, which proves its previous incarnation dead, so it replaces
// that incarnation's registration at once instead of waiting a session
// timeout for it to expire, and is back in the ISR of every partition of
// an RF 3 topic well within half the session timeout.
func TestCrashedBrokerRejoinsWithoutExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startClusterWith(t, backend, 3, func(cfg *cluster.Config) { cfg.SessionTimeout = rejoinSessionTimeout })
		const topic = "rejoin"
		const partitions = 6
		createTopic(t, c, topic, partitions, 3)
		inEveryISR := func(id int32) func(*cluster.Metadata) error {
			return func(md *cluster.Metadata) error {
				parts := md.Partitions[topic]
				if len(parts) != partitions {
					return fmt.Errorf("broker %d: topic %s: got %d partitions, want %d (topic error %v)", md.From, topic, len(parts), partitions, md.TopicErrs[topic])
				}
				for _, p := range parts {
					if p.Leader < 0 || !slices.Contains(p.ISR, id) {
						return fmt.Errorf("broker %d: %s/%d: leader %d, ISR %v, want a leader and broker %d in the ISR", md.From, topic, p.Partition, p.Leader, p.ISR, id)
					}
				}
				return nil
			}
		}

		// The broker that crashes is not the controller, so that the
		// rejoin measures the registration alone, not an election.
		ctl := controller(t, c)
		b := c.Broker(others(c, ctl)[0])
		waitEvery(t, c, settle, fmt.Sprintf("broker %d in the ISR of every partition", b.ID), inEveryISR(b.ID), topic)

		if err := b.Kill(); err != nil {
			t.Fatalf("kill %s: %v", b, err)
		}
		restarted := time.Now()
		if err := b.Start(); err != nil {
			t.Fatalf("start %s: %v", b, err)
		}
		bound := rejoinSessionTimeout / 2
		waitEvery(t, c, bound, fmt.Sprintf("%s back in the ISR of every partition within %v of its restart (half the %v session timeout)", b, bound, rejoinSessionTimeout),
			func(md *cluster.Metadata) error {
				if !slices.Contains(md.Brokers, b.ID) {
					return fmt.Errorf("broker %d: live brokers %v, want %d among them", md.From, md.Brokers, b.ID)
				}
				return inEveryISR(b.ID)(md)
			}, topic)
		// The restarted broker knows the topic only once the controller
		// has sent it the cluster's state for its new registration: its own
		// Metadata is in the check above, as one of the live brokers.
		took := time.Since(restarted)
		t.Logf("%s: broker %d back in the ISR of all %d partitions %v after its restart (session timeout %v)",
			backend, b.ID, partitions, took.Round(time.Millisecond), rejoinSessionTimeout)

		const want = "replaced the previous registration of this broker"
		if log := b.LogTail(1 << 20); !strings.Contains(log, want) {
			t.Fatalf("log of %s after its restart: got no %q\n%s", b, want, b.LogTail(4096))
		}
	})
}
