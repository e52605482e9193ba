package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestZombieControllerChangesNothing: the controller is frozen (SIGSTOP)
// past the session timeout; another controller is elected while it is
// stopped and moves its leaderships. After SIGCONT the zombie's requests
// are refused by epoch and its commits by the backend: every broker,
// the zombie included, names the new controller and keeps the new
// controller's leaders and ISRs.
func TestZombieControllerChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		createTopic(t, c, "orders", 6, 3)
		zombie := controller(t, c)
		led := metadata(t, c, zombie, "orders").LedBy("orders", zombie)

		if err := c.Broker(zombie).Pause(); err != nil {
			t.Fatal(err)
		}
		pausedAt := time.Now()
		waitEvery(t, c, sessionTimeout+settle, "a new controller that moves the zombie's leaderships", func(md *cluster.Metadata) error {
			if md.ControllerID == zombie || md.ControllerID < 0 {
				return fmt.Errorf("controller %d, want another than the frozen %d", md.ControllerID, zombie)
			}
			for _, p := range md.Partitions["orders"] {
				if p.Leader == zombie || p.Leader < 0 || slices.Contains(p.ISR, zombie) {
					return fmt.Errorf("orders/%d: leader %d ISR %v, want neither to hold frozen broker %d", p.Partition, p.Leader, p.ISR, zombie)
				}
			}
			return nil
		}, "orders")
		successor := controller(t, c)
		t.Logf("%s: broker %d frozen; broker %d is controller and moved %v after %v",
			backend, zombie, successor, led, time.Since(pausedAt).Round(time.Millisecond))
		want := leadership(metadata(t, c, successor, "orders"), zombie)

		if err := c.Broker(zombie).Resume(); err != nil {
			t.Fatal(err)
		}
		waitZombie := func(md *cluster.Metadata) error {
			if md.ControllerID != successor {
				return fmt.Errorf("controller %d, want %d", md.ControllerID, successor)
			}
			if got := leadership(md, zombie); !maps.Equal(got, want) {
				return fmt.Errorf("leaders and ISRs %v, want the new controller's %v", got, want)
			}
			if len(md.Brokers) != 3 {
				return fmt.Errorf("live brokers %v, want all 3", md.Brokers)
			}
			return nil
		}
		// The zombie answers again once it has caught up with the new
		// controller; until then it may serve its stale cache.
		waitEvery(t, c, settle, "the zombie to follow the new controller", waitZombie, "orders")
		// A request from the zombie's term is refused by every broker: its
		// epoch is older than the new controller's. (The zombie's own epoch
		// is not visible from outside; 0 is older than any term.) This one
		// would make the zombie leader of every partition.
		for _, b := range c.Live() {
			req := zombieUpdate(zombie, metadata(t, c, successor, "orders"))
			resp, err := c.Request(context.Background(), b.ID, req)
			if err != nil {
				t.Fatalf("UpdateMetadata from the zombie to broker %d: %v", b.ID, err)
			}
			if got := kerr.ErrorForCode(resp.(*kmsg.UpdateMetadataResponse).ErrorCode); !errors.Is(got, kerr.StaleControllerEpoch) {
				t.Fatalf("UpdateMetadata from the zombie's epoch to broker %d: got %v, want STALE_CONTROLLER_EPOCH", b.ID, got)
			}
		}
		// Then nothing the zombie tried while it thought itself controller
		// may take effect: the state holds for a whole session timeout on
		// every broker, checked every 100 ms.
		holdUntil := time.Now().Add(sessionTimeout)
		for time.Now().Before(holdUntil) {
			if err := c.EveryLive(context.Background(), waitZombie, "orders"); err != nil {
				t.Fatalf("after the zombie %d resumed: %v", zombie, err)
			}
		}
		if fenced := grepLogs(c, "stale", "fenced", "refused"); len(fenced) > 0 {
			t.Logf("fencing seen in the logs:\n%s", strings.Join(fenced, "\n"))
		}
	})
}

// zombieUpdate is an UpdateMetadata from controller zombie at controller
// epoch 0 that names it leader of every partition of orders in md.
func zombieUpdate(zombie int32, md *cluster.Metadata) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.Version = 7
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = zombie, 0, -1
	ts := kmsg.NewUpdateMetadataRequestTopicState()
	ts.Topic = "orders"
	for _, p := range md.Partitions["orders"] {
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch = "orders", p.Partition, zombie, p.LeaderEpoch+1
		ps.ISR, ps.Replicas = []int32{zombie}, p.Replicas
		ts.PartitionStates = append(ts.PartitionStates, ps)
	}
	req.TopicStates = append(req.TopicStates, ts)
	return req
}

// leadership maps each partition of orders to its leader, leader epoch
// and ISR without the zombie: once resumed, the zombie catches up as a
// follower and its leaders put it back in the ISR, which is replication
// working, not the zombie acting.
func leadership(md *cluster.Metadata, zombie int32) map[int32]string {
	out := map[int32]string{}
	for _, p := range md.Partitions["orders"] {
		isr := slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return id == zombie })
		out[p.Partition] = fmt.Sprintf("leader %d epoch %d isr %v", p.Leader, p.LeaderEpoch, isr)
	}
	return out
}

// grepLogs returns the lines of every broker's log (its tail) holding
// any of words, compared in lower case.
func grepLogs(c *cluster.Cluster, words ...string) []string {
	var out []string
	for _, b := range c.Brokers() {
		for _, line := range strings.Split(b.LogTail(64<<10), "\n") {
			lower := strings.ToLower(line)
			for _, w := range words {
				if strings.Contains(lower, w) {
					out = append(out, fmt.Sprintf("broker %d: %s", b.ID, line))
					break
				}
			}
		}
	}
	return out
}

// TestControlledShutdownMovesLeadership: a broker leading 1 000
// partitions (replication factor 2, a manual assignment on two brokers,
// neither the controller) gets SIGTERM: every leadership moves to the
// other ISR member before it exits, and it exits 0. The time it took is
// logged.
func TestControlledShutdownMovesLeadership(t *testing.T) {
	const partitions = 1000
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		ctrl := controller(t, c)
		pair := others(c, ctrl)
		leaving, staying := pair[0], pair[1]
		assignment := make([][]int32, partitions)
		for i := range assignment {
			assignment[i] = []int32{leaving, staying}
		}
		created := time.Now()
		createAssigned(t, c, "bulk", assignment)
		t.Logf("%s: topic bulk of %d partitions led on every broker after %v", backend, partitions, time.Since(created).Round(time.Millisecond))

		// A watcher asks the staying broker, every 100 ms, whether it leads
		// all of them yet, and records when it first does.
		ctx, cancel := context.WithCancel(context.Background())
		var (
			wg      sync.WaitGroup
			movedAt time.Time
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cluster.WaitFor(ctx, time.Minute, func() error {
				md, err := c.Metadata(ctx, staying, "bulk")
				if err != nil {
					return err
				}
				if n := len(md.LedBy("bulk", staying)); n != partitions {
					return fmt.Errorf("broker %d leads %d", staying, n)
				}
				movedAt = time.Now()
				return nil
			})
		}()
		stoppedAt := time.Now()
		err := c.Broker(leaving).Stop(time.Minute)
		exitedAt := time.Now()
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("SIGTERM broker %d: %v", leaving, err)
		}
		waitEvery(t, c, settle, fmt.Sprintf("broker %d to lead all %d partitions with ISR [%d]", staying, partitions, staying), func(md *cluster.Metadata) error {
			for _, p := range md.Partitions["bulk"] {
				if p.Leader != staying || !slices.Equal(p.ISR, []int32{staying}) {
					return fmt.Errorf("bulk/%d: leader %d ISR %v", p.Partition, p.Leader, p.ISR)
				}
			}
			return nil
		}, "bulk")
		wg.Wait()
		cancel()
		t.Logf("%s: controlled shutdown of broker %d leading %d partitions: broker %d leads them all %v after SIGTERM; the broker exited %v after SIGTERM",
			backend, leaving, partitions, staying, movedAt.Sub(stoppedAt).Round(time.Millisecond), exitedAt.Sub(stoppedAt).Round(time.Millisecond))
		// The watcher polls every 100 ms and a 1 000-partition Metadata
		// takes some, so allow it a second to see what happened before
		// the exit.
		if movedAt.After(exitedAt.Add(time.Second)) {
			t.Fatalf("leaderships moved %v after broker %d exited: want them moved before it exits", movedAt.Sub(exitedAt), leaving)
		}
	})
}

// TestPreferredLeaderRebalance: with auto.leader.rebalance.enable and a
// 1 s check interval, a broker that is killed loses its leaderships. It
// comes back out of the ISR: a preferred election (kadm ElectLeaders) of
// its partitions is refused with PREFERRED_LEADER_NOT_AVAILABLE (unless it
// has already rejoined), and the rebalance leaves them be. It catches up through replication and its
// leaders take it back into the ISR (AlterPartition); then the
// controller gives its preferred partitions back to it.
func TestPreferredLeaderRebalance(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3,
			"auto.leader.rebalance.enable=true", "leader.imbalance.check.interval.seconds=1")
		createTopic(t, c, "orders", 6, 3)
		ctrl := controller(t, c)
		victim := others(c, ctrl)[0]
		preferred := metadata(t, c, ctrl, "orders").LedBy("orders", victim)
		if len(preferred) != 2 {
			t.Fatalf("broker %d leads %v of orders, want 2 partitions", victim, preferred)
		}

		if err := c.Broker(victim).Kill(); err != nil {
			t.Fatal(err)
		}
		waitEvery(t, c, sessionTimeout+settle, fmt.Sprintf("leaders of %v other than the killed broker %d", preferred, victim), func(md *cluster.Metadata) error {
			for _, p := range preferred {
				if now, _ := md.Partition("orders", p); now.Leader == victim || now.Leader < 0 {
					return fmt.Errorf("orders/%d: leader %d", p, now.Leader)
				}
			}
			return nil
		}, "orders")

		if err := c.Broker(victim).Start(); err != nil {
			t.Fatal(err)
		}
		waitRejoined(t, c, victim, "orders")
		returned := time.Now()
		inISR := func(md *cluster.Metadata) error {
			for _, p := range preferred {
				if now, _ := md.Partition("orders", p); !slices.Contains(now.ISR, victim) {
					return fmt.Errorf("orders/%d: ISR %v without broker %d", p, now.ISR, victim)
				}
			}
			return nil
		}
		if err := inISR(metadata(t, c, ctrl, "orders")); err != nil {
			for p, err := range electPreferred(t, c, "orders", preferred...) {
				if errors.Is(err, kerr.PreferredLeaderNotAvailable) {
					t.Logf("%s: preferred election of orders/%d with broker %d out of the ISR: refused", backend, p, victim)
					continue
				}
				// Replication brings a returning broker back into the ISR
				// within milliseconds: it may have rejoined before the
				// election, which then is not refused.
				now, _ := metadata(t, c, ctrl, "orders").Partition("orders", p)
				if (err != nil && !errors.Is(err, kerr.ElectionNotNeeded)) || !slices.Contains(now.ISR, victim) {
					t.Fatalf("preferred election of orders/%d: got %v with ISR %v, want PREFERRED_LEADER_NOT_AVAILABLE while broker %d is out of the ISR", p, err, now.ISR, victim)
				}
			}
		}
		// Replication brings the broker back into the ISR once it has
		// caught up with each leader.
		waitEvery(t, c, settle, fmt.Sprintf("broker %d back in the ISR of %v", victim, preferred), inISR, "orders")
		t.Logf("%s: broker %d back in the ISR of %v %v after it was back", backend, victim, preferred, time.Since(returned).Round(time.Millisecond))
		waitEvery(t, c, settle, fmt.Sprintf("broker %d to lead %v again", victim, preferred), func(md *cluster.Metadata) error {
			for _, p := range preferred {
				now, _ := md.Partition("orders", p)
				if now.Leader != victim {
					return fmt.Errorf("orders/%d: leader %d ISR %v, want preferred leader %d", p, now.Leader, now.ISR, victim)
				}
			}
			return nil
		}, "orders")
		t.Logf("%s: broker %d leads %v again %v after it was back", backend, victim, preferred, time.Since(returned).Round(time.Millisecond))
	})
}

// electPreferred runs a preferred election of topic's partitions through
// kadm and returns each partition's error.
func electPreferred(t *testing.T, c *cluster.Cluster, topic string, partitions ...int32) map[int32]error {
	t.Helper()
	set := kadm.TopicsSet{}
	set.Add(topic, partitions...)
	res, err := admin(t, c).ElectLeaders(context.Background(), kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatalf("elect preferred leaders of %s %v: %v", topic, partitions, err)
	}
	out := map[int32]error{}
	for p, r := range res[topic] {
		out[p] = r.Err
	}
	if len(out) != len(partitions) {
		t.Fatalf("elect preferred leaders of %s %v: results for %d partitions", topic, partitions, len(out))
	}
	return out
}

// TestTopicTooLargeForZooKeeper: on ZooKeeper, where a topic's znode holds
// its whole assignment and one request may carry 1 MB, CreateTopics of a
// 100 000-partition topic is answered INVALID_PARTITIONS at once, with a
// message that says why, and nothing is created; the cluster goes on
// creating topics.
func TestTopicTooLargeForZooKeeper(t *testing.T) {
	c := startCluster(t, "zk", 1)
	adm := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 100000, 1, nil, "huge")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidPartitions) || !strings.Contains(resp.ErrMessage, "jute.maxbuffer") {
		t.Fatalf("create a 100 000-partition topic: got %v (message %q), want INVALID_PARTITIONS naming ZooKeeper's limit", err, resp.ErrMessage)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("huge") {
		t.Fatalf("topic huge listed after its creation was refused")
	}
	createTopic(t, c, "fits", 3, 1)
}
