package replication

import (
	errorsStd "errors"
	"testing"
	"time"
)

// The scenarios of the source documents (DESIGN §1, R2–R8) and of KIP-101,
// each as a run of the state machines over in-memory logs. Their steps are
// the scenarios' steps.

func lagConfig(mode TruncationMode) Config {
	cfg := DefaultConfig()
	cfg.ReplicaLagTimeMax = 10 * time.Second
	cfg.Truncation = mode
	return cfg
}

// TestScenarioFollowerNotCaughtUpForLagTimeLeavesISR: "a follower that has
// not caught up for replica.lag.time.max.ms leaves the ISR" (R3), and
// acks=all carries on without it.
func TestScenarioFollowerNotCaughtUpForLagTimeLeavesISR(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 3)

	// Replicas 2 and 3 are in sync.
	c.produce("m0", -1)
	c.replicate()
	c.mustISR(1, 2, 3)

	// Replica 3 stops fetching (paused); replica 2 keeps up.
	id, _ := c.produce("m1", -1)
	c.fetch(2, false)
	c.fetch(2, false)
	c.mustPending(id)

	// Just under replica.lag.time.max.ms it is still in the ISR and the
	// ack still waits for it.
	c.advance(10 * time.Second)
	c.mustISR(1, 2, 3)
	c.mustPending(id)

	// Past replica.lag.time.max.ms it leaves the ISR; the HW moves over
	// {1, 2} and the ack completes.
	c.advance(time.Millisecond)
	c.mustISR(1, 2)
	c.mustHW(1, 2)
	c.mustAck(id, nil)

	// acks=all carries on without it.
	id2, _ := c.produce("m2", -1)
	c.fetch(2, false)
	c.fetch(2, false)
	c.mustAck(id2, nil)

	// Resumed, it catches up and rejoins once its LEO reaches the HW.
	c.fetch(3, false) // fetches m1, m2 from offset 1
	c.mustISR(1, 2)
	c.fetch(3, false) // reports LEO 3 = HW
	c.mustISR(1, 2, 3)
}

// TestScenarioCaughtUpFollowerStaysWhileLeaderIsIdle: a follower at the
// leader's LEO is caught up however long nothing is produced (Kafka's
// isCaughtUp), so an idle partition keeps its ISR.
func TestScenarioCaughtUpFollowerStaysWhileLeaderIsIdle(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 2)
	c.produce("m0", 1)
	c.replicate()
	c.advance(time.Hour)
	c.mustISR(1, 2)
}

// TestScenarioFollowerFetchingBehindButSteadilyStaysInSync: a follower that
// reaches, at each fetch, the leader's LEO of its previous fetch counts as
// caught up at that previous fetch, so a busy partition with a follower
// one fetch behind keeps it.
func TestScenarioFollowerFetchingBehindButSteadilyStaysInSync(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 2)
	for i := range 50 {
		c.produce("m", 1)
		c.fetch(2, false) // always one record behind when it fetches
		c.advance(time.Second)
		if i == 49 {
			c.mustISR(1, 2)
		}
	}
}

// TestScenarioAcksAllCompletesOnlyWhenEveryISRMemberHasTheBatch: "acks=all
// completes only when every ISR member has the batch" (R2, R4), not a
// majority.
func TestScenarioAcksAllCompletesOnlyWhenEveryISRMemberHasTheBatch(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 3)
	id, _ := c.produce("m0", -1)

	// The leader has it: not enough.
	c.mustPending(id)

	// A majority (leader and replica 2) has it: still not enough.
	c.fetch(2, false)
	c.fetch(2, false)
	c.mustPending(id)

	// Replica 3 fetches it, but the leader learns so only from its next
	// fetch offset.
	c.fetch(3, false)
	c.mustPending(id)
	c.fetch(3, false)
	c.mustAck(id, nil)
	for _, r := range []ReplicaID{1, 2, 3} {
		c.mustValues(r, "m0")
	}

	// acks=1 completes on the leader's write alone: nothing waits.
	c.produce("m1", 1)
	if n := c.leader().p.PendingAcks(); n != 0 {
		t.Fatalf("pending acks after acks=1: got %d, want 0", n)
	}
}

// TestScenarioHWIsMinimumLEOOverISRAndConsumersSeeOnlyBelowIt: "HW is the
// minimum LEO over the ISR and consumers see only below it" (R6), and
// followers learn it from fetch responses.
func TestScenarioHWIsMinimumLEOOverISRAndConsumersSeeOnlyBelowIt(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 3)
	for _, v := range []string{"m0", "m1", "m2"} {
		c.produce(v, 1)
	}
	// LEOs: leader 3, replica 2 fetched everything (reports 3 next time),
	// replica 3 only m0.
	c.fetch(2, false)
	c.fetch(2, false)
	c.node(3).log = append(c.node(3).log, c.leader().log[0])
	c.fetch(3, false) // reports LEO 1; gets m1, m2
	c.mustHW(1, 1)
	// A consumer reading at the leader sees offsets below 1: m0 only.
	if hw := c.leader().p.HighWatermark(); hw != 1 {
		t.Fatalf("consumer-visible offsets: below %d, want below 1", hw)
	}
	c.fetch(3, false) // reports LEO 3
	c.mustHW(1, 3)
	// Followers learn the HW from the next response, capped by their LEO.
	c.mustHW(3, 3)
	c.mustHW(2, 0) // its last response came before the HW moved
	c.fetch(2, false)
	c.mustHW(2, 3)
}

// TestScenarioMinInsyncReplicas2WithOneReplicaInSync:
// "min.insync.replicas=2 with one replica in sync: NOT_ENOUGH_REPLICAS"
// (R4); acks=1 still works.
func TestScenarioMinInsyncReplicas2WithOneReplicaInSync(t *testing.T) {
	cfg := lagConfig(TruncateEpoch)
	cfg.MinInsyncReplicas = 2
	c := newCluster(t, cfg, 3)

	// Replicas 2 and 3 stop fetching and leave the ISR.
	c.advance(11 * time.Second)
	c.produce("m0", 1)
	c.advance(11 * time.Second)
	c.mustISR(1)

	// acks=all is refused before the append; nothing is written.
	if _, err := c.produce("m1", -1); !errorsIs(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR {1}: got %v, want NOT_ENOUGH_REPLICAS", errString(err))
	}
	c.mustValues(1, "m0")

	// acks=1 still works.
	if _, err := c.produce("m2", 1); err != nil {
		t.Fatalf("acks=1 with ISR {1}: got %v, want success", err)
	}
	c.mustValues(1, "m0", "m2")
}

// TestScenarioISRShrinksBelowMinInsyncWhileWaiting: an acks=all produce
// accepted with ISR {1, 2} whose HW passes it only after the ISR shrank
// to {1} fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's
// checkEnoughReplicasReachOffset.
func TestScenarioISRShrinksBelowMinInsyncWhileWaiting(t *testing.T) {
	cfg := lagConfig(TruncateEpoch)
	cfg.MinInsyncReplicas = 2
	c := newCluster(t, cfg, 2)
	id, err := c.produce("m0", -1)
	if err != nil {
		t.Fatal(err)
	}
	c.advance(11 * time.Second)
	c.mustISR(1)
	c.mustAck(id, ErrNotEnoughReplicasAfterAppend)
}

// TestScenarioPendingAckTimesOut: an acks=all produce whose HW does not
// pass it by the request timeout fails with REQUEST_TIMED_OUT, and one
// that completes earlier is not failed later.
func TestScenarioPendingAckTimesOut(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 2)
	c.timeout = 5 * time.Second
	slow, _ := c.produce("m0", -1)
	if d, ok := c.leader().p.NextDeadline(); !ok || !d.Equal(c.now.Add(5*time.Second)) {
		t.Fatalf("next deadline: got %v %t, want %v", d, ok, c.now.Add(5*time.Second))
	}
	c.advance(4999 * time.Millisecond)
	c.mustPending(slow)
	c.advance(time.Millisecond)
	c.mustAck(slow, ErrRequestTimedOut)
	if _, ok := c.leader().p.NextDeadline(); ok {
		t.Fatal("next deadline with no produce waiting: got one, want none")
	}

	fast, _ := c.produce("m1", -1)
	c.replicate()
	c.mustAck(fast, nil)
	c.advance(time.Minute) // settled once only (drain fails the test otherwise)
}

// TestScenarioFollowerFailure: "follower failure: truncates to its HW,
// catches up, rejoins" (R7), in both truncation modes.
func TestScenarioFollowerFailure(t *testing.T) {
	for _, mode := range []TruncationMode{TruncateHW, TruncateEpoch} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t, lagConfig(mode), 3)
			c.produce("m0", -1)
			c.replicate()

			// Replica 3 fetches m1 but dies before it learns the HW, with m1
			// above its checkpointed HW (1).
			c.produce("m1", -1)
			c.fetch(3, false)
			c.kill(3, 2)

			// It leaves the ISR (its session ended); the others carry on.
			c.mustISR(1, 2)
			c.produce("m2", -1)
			c.replicate()

			// It comes back and truncates: hw mode to its HW (1), dropping
			// m1; epoch mode keeps m1, which the leader has in epoch 0.
			c.restart(3)
			if mode == TruncateHW {
				c.mustValues(3, "m0")
			} else {
				c.mustValues(3, "m0", "m1")
			}

			// It fetches from there, catches up and rejoins when its LEO
			// reaches the HW.
			c.fetch(3, false)
			c.mustValues(3, "m0", "m1", "m2")
			c.fetch(3, false)
			c.mustISR(1, 2, 3)
		})
	}
}

// TestScenarioLeaderFailureKIP101Scenario1: "leader failure: followers
// truncate above the HW" (R8), which in KIP-101's scenario 1 loses an
// acknowledged record in hw mode, while epoch mode keeps it. A leads, B
// follows; B fetches m2 and A acks it, B restarts before it learns the new
// HW, then A dies.
func TestScenarioLeaderFailureKIP101Scenario1(t *testing.T) {
	for _, tc := range []struct {
		mode TruncationMode
		want []string
	}{
		{TruncateHW, []string{"m1"}},
		{TruncateEpoch, []string{"m1", "m2"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			const a, b = 1, 2
			c := newCluster(t, lagConfig(tc.mode), 2)
			id1, _ := c.produce("m1", -1)
			c.replicate()
			c.mustAck(id1, nil)

			// B fetches m2; its next fetch lets A's HW pass m2 and A acks it,
			// but B restarts before reading that response: its HW stays 1.
			id2, _ := c.produce("m2", -1)
			c.fetch(b, false)
			c.fetch(b, true)
			c.mustAck(id2, nil)
			c.mustHW(b, 1)
			c.bounce(b)

			// A dies; B, in the ISR, leads.
			c.kill(a, 2)
			if c.state.Leader != b {
				t.Fatalf("leader after A died: got %d, want %d", c.state.Leader, b)
			}
			c.mustValues(b, tc.want...)

			// A comes back as a follower and ends with B's log.
			c.restart(a)
			c.fetch(a, false)
			c.fetch(a, false)
			c.mustValues(a, tc.want...)
			c.mustISR(a, b)
		})
	}
}

// TestScenarioLeaderFailureKIP101Scenario2: KIP-101's scenario 2, replica
// divergence after both replicas fail: A had m2 (flushed, below its HW), B
// lost it (not flushed). B returns first and leads, writing m3 at offset
// 1. A returns: in hw mode it keeps m2 below its HW and the replicas
// diverge; in epoch mode it asks B where epoch 0 ended, cuts m2 and
// fetches m3.
func TestScenarioLeaderFailureKIP101Scenario2(t *testing.T) {
	for _, tc := range []struct {
		mode  TruncationMode
		wantA []string
	}{
		{TruncateHW, []string{"m1", "m2"}},
		{TruncateEpoch, []string{"m1", "m3"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			const a, b = 1, 2
			c := newCluster(t, lagConfig(tc.mode), 2)
			c.produce("m1", -1)
			c.produce("m2", -1)
			c.replicate()
			c.mustHW(a, 2)
			c.mustHW(b, 2)

			// Power fails: both die; B loses m2, which it had not flushed.
			c.powerFailure(map[ReplicaID]int{a: 2, b: 1})
			if c.state.Leader != NoReplica {
				t.Fatalf("leader with every replica down: got %d, want none", c.state.Leader)
			}

			// B returns first, leads in epoch 1 and takes m3 at offset 1.
			c.restart(b)
			if c.state.Leader != b {
				t.Fatalf("leader after B returned: got %d, want %d", c.state.Leader, b)
			}
			c.produce("m3", 1)

			// A returns as a follower.
			c.restart(a)
			c.fetch(a, false)
			c.fetch(a, false)
			c.mustValues(a, tc.wantA...)
			c.mustValues(b, "m1", "m3")
		})
	}
}

// TestScenarioFollowersRejoinAcrossLeaderChanges: three leader changes
// (one unclean), each follower returning truncates by epoch against the
// current leader and ends with its log.
func TestScenarioFollowersRejoinAcrossLeaderChanges(t *testing.T) {
	c := newCluster(t, lagConfig(TruncateEpoch), 3)
	c.unclean = true
	c.produce("a0", 1)
	c.replicate() // all have a0 (epoch 0)
	c.kill(2, 1)
	c.produce("a1", 1)
	c.fetch(3, false) // 3 has a0, a1 (epoch 0)
	c.kill(1, 2)      // 3 leads epoch 1
	c.produce("b0", 1)
	c.restart(2)
	c.fetch(2, false)
	c.fetch(2, false)
	c.mustValues(2, "a0", "a1", "b0")
	c.kill(3, 3) // 2, back in the ISR, leads epoch 2
	c.produce("c0", 1)
	c.restart(3)
	c.fetch(3, false)
	c.mustValues(3, "a0", "a1", "b0", "c0")
	c.restart(1)
	c.fetch(1, false)
	c.mustValues(1, "a0", "a1", "b0", "c0")
}

func errorsIs(err, target error) bool {
	return err != nil && errorsStd.Is(err, target)
}

// TestScenarioLeaderFailureNewLeaderFromISR: "leader failure: the
// controller picks a new leader from the ISR; the other followers truncate
// above their HW and fetch from the new leader" (R8). Replica 3 has m1,
// which replica 2 (the new leader) never fetched and nobody acknowledged:
// in both modes it is cut, and the replicas agree again.
func TestScenarioLeaderFailureNewLeaderFromISR(t *testing.T) {
	for _, mode := range []TruncationMode{TruncateHW, TruncateEpoch} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t, lagConfig(mode), 3)
			c.produce("m0", -1)
			c.replicate()
			id, _ := c.produce("m1", -1)
			c.fetch(3, false)
			c.mustValues(3, "m0", "m1")
			c.mustHW(3, 1)

			// The leader fails; the first live ISR member leads.
			c.kill(1, 2)
			if c.state.Leader != 2 {
				t.Fatalf("new leader: got %d, want 2", c.state.Leader)
			}
			// Replica 3 truncates above the HW: m1 goes.
			c.mustValues(3, "m0")
			c.mustISR(2, 3)

			// It fetches from the new leader.
			c.produce("m2", -1)
			c.replicate()
			c.mustValues(2, "m0", "m2")
			c.mustValues(3, "m0", "m2")
			c.mustPending(id) // the old leader's produce got no ack: its client retries (R1)
		})
	}
}
