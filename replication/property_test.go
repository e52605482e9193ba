package replication

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPropertyInvariants drives three replicas with random produces,
// fetches (some responses lost), time and broker failures, from fixed
// seeds, and checks after every decision that:
//   - a leader's HW never decreases within its leader epoch;
//   - when a leader advances its HW, the HW is at most the LEO it knows
//     of every maximal-ISR member (a new leader starts from its
//     checkpointed HW, and in hw mode a follower that truncated to its own
//     HW may sit below it until it fetches again: R8's rule, not a
//     decision of the leader);
//   - a completed acks=all produce's offset is below the HW;
//   - when an acks=all produce completes, every ISR member's log holds its
//     record, the same as the leader's.
func TestPropertyInvariants(t *testing.T) {
	for _, mode := range []TruncationMode{TruncateFetch, TruncateEpoch, TruncateHW} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", mode, seed), func(t *testing.T) {
				runProperty(t, mode, seed, 1500)
			})
		}
	}
}

func runProperty(t *testing.T, mode TruncationMode, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	cfg := lagConfig(mode)
	cfg.MinInsyncReplicas = 2
	c := newCluster(t, cfg, 3)
	type epochKey struct {
		id    ReplicaID
		epoch int32
	}
	lastHW := map[epochKey]int64{}
	completed := 0
	c.onReady = func(n *node, rd Ready) {
		t.Helper()
		if n.p.Role() != RoleLeader {
			return
		}
		k := epochKey{n.id, n.p.LeaderEpoch()}
		prev, seen := lastHW[k]
		if seen && rd.HighWatermark < prev {
			t.Fatalf("leader %d epoch %d: HW went from %d to %d", n.id, k.epoch, prev, rd.HighWatermark)
		}
		lastHW[k] = rd.HighWatermark
		for _, id := range n.p.MaximalISR() {
			if id == n.id || !seen || rd.HighWatermark == prev {
				continue
			}
			if leo, _ := n.p.FollowerLogEnd(id); leo < rd.HighWatermark {
				t.Fatalf("leader %d: HW advanced from %d to %d, above ISR member %d's LEO %d", n.id, prev, rd.HighWatermark, id, leo)
			}
		}
		for _, a := range rd.Acks {
			if a.Err != nil {
				continue
			}
			completed++
			off := c.ackOffset[a.ID]
			if off >= rd.HighWatermark {
				t.Fatalf("ack %d completed at offset %d, HW %d", a.ID, off, rd.HighWatermark)
			}
			for _, id := range n.p.ISR() {
				m := c.node(id)
				if int64(len(m.log)) <= off || m.log[off] != n.log[off] {
					t.Fatalf("ack %d completed at offset %d while ISR member %d's log is %v (leader %v)", a.ID, off, id, m.values(), n.values())
				}
			}
		}
	}
	live := func() []ReplicaID {
		var out []ReplicaID
		for _, n := range c.nodes {
			if n.live {
				out = append(out, n.id)
			}
		}
		return out
	}
	for step := range steps {
		hasLeader := c.state.Leader != NoReplica
		switch r := rng.IntN(100); {
		case r < 30 && hasLeader:
			if _, err := c.produce(fmt.Sprintf("v%d", step), -1); err != nil && !errors.Is(err, ErrNotEnoughReplicas) {
				t.Fatalf("step %d: produce: %v", step, err)
			}
		case r < 40 && hasLeader:
			c.produce(fmt.Sprintf("v%d", step), 1)
		case r < 75 && hasLeader:
			ids := live()
			id := ids[rng.IntN(len(ids))]
			if id != c.state.Leader && !c.node(id).p.truncating {
				c.fetch(id, rng.IntN(10) == 0)
			}
		case r < 90:
			c.advance(time.Duration(rng.IntN(6000)) * time.Millisecond)
		case r < 95:
			if ids := live(); len(ids) > 1 {
				c.kill(ids[rng.IntN(len(ids))], 1<<30)
			}
		default:
			for _, n := range c.nodes {
				if !n.live {
					c.restart(n.id)
					break
				}
			}
		}
	}
	if completed == 0 {
		t.Fatal("no acks=all produce completed: the run checked nothing")
	}
	if mode == TruncateFetch && c.diverging == 0 {
		t.Fatal("no fetch was answered with a diverging epoch: fetch mode's truncation was not exercised")
	}
	t.Logf("%d steps, %d acks=all completed, %d settled in all, %d diverging fetches", steps, completed, len(c.acked), c.diverging)
}
