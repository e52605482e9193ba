package scenarios

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestLeadersSpreadAtCreation: 3 brokers, a topic of 6 partitions with
// replication factor 3, created through kadm: each broker leads 2, and
// every partition has 3 distinct replicas, all in the ISR.
func TestLeadersSpreadAtCreation(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		createTopic(t, c, "orders", 6, 3)
		waitEvery(t, c, settle, "each broker to lead 2 partitions of orders", func(md *cluster.Metadata) error {
			for _, p := range md.Partitions["orders"] {
				distinct := slices.Compact(slices.Sorted(slices.Values(p.Replicas)))
				if len(distinct) != 3 || len(p.ISR) != 3 {
					return fmt.Errorf("orders/%d: replicas %v isr %v, want 3 distinct replicas all in the ISR", p.Partition, p.Replicas, p.ISR)
				}
				if p.Leader != p.Replicas[0] {
					return fmt.Errorf("orders/%d: leader %d, want the preferred replica %d", p.Partition, p.Leader, p.Replicas[0])
				}
			}
			counts := md.LeaderCounts("orders")
			for _, id := range []int32{1, 2, 3} {
				if counts[id] != 2 {
					return fmt.Errorf("leaders per broker %v, want 2 each", counts)
				}
			}
			return nil
		}, "orders")
	})
}

// TestLeaderKilled: SIGKILL the broker leading partition 0; within the
// session timeout + 2 s every partition it led has a new leader from its
// ISR, Metadata from every live broker says so, and a producer that was
// producing to partition 0 carries on after its retries.
func TestLeaderKilled(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		createTopic(t, c, "orders", 6, 3)
		p0, _ := metadata(t, c, 1, "orders").Partition("orders", 0)
		failover(t, c, p0.Leader, 0)
	})
}

// TestControllerKilled: SIGKILL the controller; a new controller is
// elected, and it does what TestLeaderKilled asks for the partitions the
// old controller led.
func TestControllerKilled(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		createTopic(t, c, "orders", 6, 3)
		old := controller(t, c)
		led := metadata(t, c, old, "orders").LedBy("orders", old)
		if len(led) == 0 {
			t.Fatalf("controller %d leads no partition of orders, want 2", old)
		}
		killedAt := failover(t, c, old, led[0])
		waitEvery(t, c, settle, "a new controller", func(md *cluster.Metadata) error {
			if md.ControllerID == old || c.Broker(md.ControllerID) == nil || !c.Broker(md.ControllerID).Running() {
				return fmt.Errorf("controller %d, want a live broker other than %d", md.ControllerID, old)
			}
			return nil
		})
		t.Logf("%s: broker %d took over as controller; %v after the kill every live broker names it", backend, controller(t, c), time.Since(killedAt).Round(time.Millisecond))
	})
}

// failover kills victim while a producer produces to partition produceTo
// of orders (one victim leads), and checks R11 and the producer. It
// returns when the victim was killed.
func failover(t *testing.T, c *cluster.Cluster, victim, produceTo int32) time.Time {
	t.Helper()
	before := metadata(t, c, victim, "orders")
	led := before.LedBy("orders", victim)
	if !slices.Contains(led, produceTo) {
		t.Fatalf("broker %d leads %v of orders, want it to lead partition %d", victim, led, produceTo)
	}
	prod := startProducer(t, c, "orders", produceTo)
	prod.waitAcked(t, time.Time{}, settle)

	killedAt := time.Now()
	if err := c.Broker(victim).Kill(); err != nil {
		t.Fatalf("kill broker %d: %v", victim, err)
	}
	bound := sessionTimeout + 2*time.Second
	moved := func(md *cluster.Metadata) error {
		for _, p := range led {
			now, _ := md.Partition("orders", p)
			was, _ := before.Partition("orders", p)
			if now.Leader == victim || now.Leader < 0 {
				return fmt.Errorf("orders/%d: leader %d, want a live ISR member", p, now.Leader)
			}
			if !slices.Contains(was.ISR, now.Leader) {
				return fmt.Errorf("orders/%d: leader %d not in the ISR %v it had", p, now.Leader, was.ISR)
			}
			if slices.Contains(now.ISR, victim) {
				return fmt.Errorf("orders/%d: ISR %v still holds dead broker %d", p, now.ISR, victim)
			}
		}
		return nil
	}
	ctx := context.Background()
	err := cluster.WaitFor(ctx, bound-time.Since(killedAt), func() error { return c.EveryLive(ctx, moved, "orders") })
	if err != nil {
		// Measure how long it does take, for the failure message.
		late := cluster.WaitFor(ctx, settle, func() error { return c.EveryLive(ctx, moved, "orders") })
		t.Fatalf("broker %d (controller: %v) killed: new leaders from the ISR for %v not within %v (%v); every live broker named them after %v (still failing: %v)",
			victim, before.ControllerID == victim, led, bound, err, time.Since(killedAt).Round(time.Millisecond), late)
	}
	t.Logf("broker %d (controller: %v) killed: every live broker names new leaders for %v after %v (bound %v)",
		victim, before.ControllerID == victim, led, time.Since(killedAt).Round(time.Millisecond), bound)

	got := prod.waitAcked(t, killedAt, settle)
	t.Logf("producer to orders/%d: first record sent after the kill acknowledged %v after the kill (offset %d)",
		produceTo, got.acked.Sub(killedAt).Round(time.Millisecond), got.offset)
	prod.stop()
	return killedAt
}

// TestAllReplicasDown: a partition on two brokers (neither the
// controller; 5 brokers keep a Raft majority with two down). Kill the
// leader, then the other replica: leader -1 (LEADER_NOT_AVAILABLE) in
// every live broker's Metadata. The replica that left the ISR first comes
// back: still no leader (unclean election is off). The last ISR member
// comes back: it leads.
func TestAllReplicasDown(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 5)
		ctrl := controller(t, c)
		replicas := others(c, ctrl)[:2]
		first, last := replicas[0], replicas[1]
		createAssigned(t, c, "ledger", [][]int32{{first, last}})
		waitPartition(t, c, "ledger", 0, first, []int32{first, last})

		if err := c.Broker(first).Kill(); err != nil {
			t.Fatal(err)
		}
		waitPartition(t, c, "ledger", 0, last, []int32{last})

		if err := c.Broker(last).Kill(); err != nil {
			t.Fatal(err)
		}
		waitEvery(t, c, sessionTimeout+settle, "ledger/0 to have no leader", func(md *cluster.Metadata) error {
			p, ok := md.Partition("ledger", 0)
			if !ok {
				return errors.New("ledger/0 missing")
			}
			if p.Leader != -1 || !errors.Is(p.Err, kerr.LeaderNotAvailable) {
				return fmt.Errorf("ledger/0: leader %d error %v, want -1 and LEADER_NOT_AVAILABLE", p.Leader, p.Err)
			}
			return nil
		}, "ledger")
		// kadm reads the same answer through a client's metadata.
		td, err := admin(t, c).ListTopics(context.Background(), "ledger")
		if err != nil {
			t.Fatalf("kadm list topics: %v", err)
		}
		if p := td["ledger"].Partitions[0]; p.Leader != -1 {
			t.Fatalf("kadm: ledger/0 leader %d, want -1", p.Leader)
		}

		if err := c.Broker(first).Start(); err != nil {
			t.Fatal(err)
		}
		waitRejoined(t, c, first, "ledger")
		if p, _ := metadata(t, c, ctrl, "ledger").Partition("ledger", 0); p.Leader != -1 {
			t.Fatalf("ledger/0: leader %d after broker %d, out of the ISR, came back; want -1 (unclean election is off)", p.Leader, first)
		}

		if err := c.Broker(last).Start(); err != nil {
			t.Fatal(err)
		}
		waitPartition(t, c, "ledger", 0, last, nil)
	})
}

// waitPartition waits until every live broker says topic/partition is led
// by leader with the ISR isr (any ISR when isr is nil).
func waitPartition(t *testing.T, c *cluster.Cluster, topic string, partition, leader int32, isr []int32) {
	t.Helper()
	waitEvery(t, c, sessionTimeout+settle, fmt.Sprintf("%s/%d to be led by %d with ISR %v", topic, partition, leader, isr), func(md *cluster.Metadata) error {
		p, ok := md.Partition(topic, partition)
		if !ok {
			return fmt.Errorf("%s/%d missing", topic, partition)
		}
		if p.Leader != leader || (isr != nil && !slices.Equal(p.ISR, isr)) {
			return fmt.Errorf("%s/%d: leader %d ISR %v", topic, partition, p.Leader, p.ISR)
		}
		return nil
	}, topic)
}
