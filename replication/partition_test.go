package replication

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/replication/log"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		key    string
	}{
		{"default", func(*Config) {}, ""},
		{"lag zero", func(c *Config) { c.ReplicaLagTimeMax = 0 }, "replica.lag.time.max.ms"},
		{"lag below a millisecond", func(c *Config) { c.ReplicaLagTimeMax = time.Microsecond }, "replica.lag.time.max.ms"},
		{"min isr zero", func(c *Config) { c.MinInsyncReplicas = 0 }, "min.insync.replicas"},
		{"truncation hw", func(c *Config) { c.Truncation = TruncateHW }, ""},
		{"truncation unknown", func(c *Config) { c.Truncation = "leader" }, "replication.truncation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.change(&cfg)
			err := cfg.Validate()
			switch {
			case tc.key == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.key != "" && (err == nil || !strings.Contains(err.Error(), tc.key)):
				t.Fatalf("got %v, want an error naming %s", err, tc.key)
			}
		})
	}
	if _, err := New(Config{}, 1); err == nil {
		t.Fatal("New with a zero Config: got nil error, want one")
	}
}

// newLeader returns replica 1 leading replicas 1..3 with ISR isr at leader
// epoch 5, with logEnd records and HW hw.
func newLeader(t *testing.T, cfg Config, isr []ReplicaID, logEnd, hw int64) *Partition {
	t.Helper()
	p, err := New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := State{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7, Replicas: []ReplicaID{1, 2, 3}, ISR: isr}
	if err := p.BecomeLeader(st, logEnd, hw, t0); err != nil {
		t.Fatal(err)
	}
	p.Ready()
	return p
}

// TestFollowerFetchCaughtUpTime checks Kafka's Replica.updateFetchState:
// when a fetch makes a follower caught up, and as of which time.
func TestFollowerFetchCaughtUpTime(t *testing.T) {
	lag := 10 * time.Second
	cfg := DefaultConfig()
	cfg.ReplicaLagTimeMax = lag
	for _, tc := range []struct {
		name string
		// fetches are (offset, seconds after t0, leader LEO before it).
		fetches [][3]int64
		// at is when to check, in seconds after t0; out says the follower
		// should be proposed out of the ISR then.
		at  int64
		out bool
	}{
		{"at the leader's LEO is caught up now", [][3]int64{{10, 8, 10}}, 40, false},
		{"behind and never caught up since becoming leader", [][3]int64{{5, 5, 10}}, 11, true},
		{"reaching the previous fetch's LEO counts from that fetch", [][3]int64{{5, 5, 10}, {10, 9, 12}}, 15, false},
		{"previous-fetch credit is that fetch's time, not now", [][3]int64{{5, 5, 10}, {10, 9, 12}}, 16, true},
		{"behind the previous fetch's LEO earns nothing", [][3]int64{{5, 5, 10}, {8, 9, 12}}, 11, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLeader(t, cfg, []ReplicaID{1, 2}, 0, 0)
			for _, f := range tc.fetches {
				if err := p.Appended(f[2], t0.Add(time.Duration(f[1])*time.Second)); err != nil {
					t.Fatal(err)
				}
				if err := p.FollowerFetch(2, f[0], -1, t0.Add(time.Duration(f[1])*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			p.Tick(t0.Add(time.Duration(tc.at) * time.Second))
			pr := p.InFlight()
			gotOut := pr != nil && !slices.Contains(pr.ISR, 2)
			if gotOut != tc.out {
				t.Fatalf("proposed out by %ds: got %t, want %t (proposal %+v)", tc.at, gotOut, tc.out, pr)
			}
		})
	}
}

// TestInFlightAlterPartition checks Kafka's pending AlterPartition state:
// one proposal at a time, the HW over the maximal ISR while an expansion
// is in flight, the committed ISR for min.insync.replicas, and the two
// failure outcomes.
func TestInFlightAlterPartition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReplicaLagTimeMax = 10 * time.Second
	cfg.MinInsyncReplicas = 2
	p := newLeader(t, cfg, []ReplicaID{1, 2}, 10, 10)

	// Replica 3 fetches at the HW: an expansion to {1, 2, 3} is proposed.
	if err := p.FollowerFetch(3, 10, -1, t0); err != nil {
		t.Fatal(err)
	}
	rd := p.Ready()
	if rd.Proposal == nil || !slices.Equal(rd.Proposal.ISR, []ReplicaID{1, 2, 3}) || rd.Proposal.PartitionEpoch != 7 || rd.Proposal.LeaderEpoch != 5 {
		t.Fatalf("proposal: got %+v, want ISR [1 2 3] at leader epoch 5, partition epoch 7", rd.Proposal)
	}
	if got := p.MaximalISR(); !slices.Equal(got, []ReplicaID{1, 2, 3}) {
		t.Fatalf("maximal ISR: got %v, want [1 2 3]", got)
	}

	// While in flight, the HW waits for replica 3 too.
	if err := p.Appended(20, t0); err != nil {
		t.Fatal(err)
	}
	if err := p.FollowerFetch(2, 20, -1, t0); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 10 {
		t.Fatalf("HW with 3 in the maximal ISR at 10: got %d, want 10", hw)
	}

	// No second proposal while one is in flight, though 3 falls behind.
	p.Tick(t0.Add(time.Minute))
	if rd := p.Ready(); rd.Proposal != nil {
		t.Fatalf("second proposal while one is in flight: %+v", rd.Proposal)
	}

	// A fenced answer keeps it in flight until the next LeaderAndIsr.
	p.AlterPartitionFailed(AlterAwaitLeaderAndIsr, t0.Add(time.Minute))
	if p.InFlight() == nil {
		t.Fatal("after a fenced answer: nothing in flight, want the proposal kept")
	}
	p.Tick(t0.Add(2 * time.Minute))
	if rd := p.Ready(); rd.Proposal != nil {
		t.Fatalf("proposal while awaiting LeaderAndIsr: %+v", rd.Proposal)
	}
	st := State{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8, Replicas: []ReplicaID{1, 2, 3}, ISR: []ReplicaID{1, 2}}
	if err := p.BecomeLeader(st, 20, 0, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The LeaderAndIsr cleared it; replica 3, behind for a minute, is not
	// in the ISR and the HW moves over {1, 2}.
	if p.InFlight() != nil {
		t.Fatalf("in flight after LeaderAndIsr: %+v", p.InFlight())
	}
	if hw := p.HighWatermark(); hw != 20 {
		t.Fatalf("HW over {1, 2}: got %d, want 20", hw)
	}

	// Replica 2, last caught up two minutes ago, is behind the next
	// append: the shrink is proposed, and a retriable failure clears it so
	// that the next tick proposes again.
	if err := p.Appended(30, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	rd = p.Ready()
	if rd.Proposal == nil || !slices.Equal(rd.Proposal.ISR, []ReplicaID{1}) {
		t.Fatalf("shrink proposal: got %+v, want ISR [1]", rd.Proposal)
	}
	// While the shrink is in flight, min.insync.replicas counts the
	// committed ISR {1, 2}.
	if err := p.CheckAcksAll(); err != nil {
		t.Fatalf("acks=all with committed ISR {1, 2} and a shrink in flight: %v", err)
	}
	p.AlterPartitionFailed(AlterRetry, t0.Add(3*time.Minute))
	if p.InFlight() != nil {
		t.Fatal("after a retriable failure: proposal still in flight")
	}
	// Not again within AlterRetryBackoff of the failure.
	p.Tick(t0.Add(3*time.Minute + AlterRetryBackoff/2))
	if rd = p.Ready(); rd.Proposal != nil {
		t.Fatalf("proposal %+v within %v of the failure, want none", rd.Proposal, AlterRetryBackoff)
	}
	p.Tick(t0.Add(3*time.Minute + time.Second))
	rd = p.Ready()
	if rd.Proposal == nil || rd.Proposal.PartitionEpoch != 8 {
		t.Fatalf("proposal again: got %+v, want ISR [1] at partition epoch 8", rd.Proposal)
	}
	if err := p.AlterPartitionCommitted(5, 9, []ReplicaID{1}, t0.Add(3*time.Minute+time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckAcksAll(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR {1}, min.insync.replicas 2: got %v, want NOT_ENOUGH_REPLICAS", err)
	}
	// A late commit of an older partition epoch is refused.
	if err := p.AlterPartitionCommitted(5, 8, []ReplicaID{1, 2}, t0); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("commit at an older partition epoch: got %v, want ErrStaleEpoch", err)
	}
}

// TestExpansionNeedsLeaderEpochStartOffset: a follower whose LEO reached
// the HW but not the offset where the leader's epoch began does not rejoin
// (Kafka's isFollowerInSync).
func TestExpansionNeedsLeaderEpochStartOffset(t *testing.T) {
	p := newLeader(t, DefaultConfig(), []ReplicaID{1}, 10, 4)
	if err := p.FollowerFetch(3, 6, -1, t0); err != nil {
		t.Fatal(err)
	}
	if rd := p.Ready(); rd.Proposal != nil {
		t.Fatalf("follower at 6 below epoch start 10: got proposal %+v, want none", rd.Proposal)
	}
	if err := p.FollowerFetch(3, 10, -1, t0); err != nil {
		t.Fatal(err)
	}
	if rd := p.Ready(); rd.Proposal == nil || !slices.Equal(rd.Proposal.ISR, []ReplicaID{1, 3}) {
		t.Fatalf("follower at 10: got %+v, want ISR [1 3]", rd.Proposal)
	}
}

// TestLeaderErrors checks the requests a leader refuses.
func TestLeaderErrors(t *testing.T) {
	p := newLeader(t, DefaultConfig(), []ReplicaID{1, 2, 3}, 10, 0)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"fetch from a non-replica", p.FollowerFetch(9, 0, -1, t0), ErrUnknownReplica},
		{"fetch above the LEO", p.FollowerFetch(2, 11, -1, t0), ErrOffsetOutOfRange},
		{"older leader epoch", p.BecomeLeader(State{Leader: 1, LeaderEpoch: 4, Replicas: []ReplicaID{1}}, 0, 0, t0), ErrStaleEpoch},
		{"older partition epoch", p.BecomeLeader(State{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 6, Replicas: []ReplicaID{1}}, 0, 0, t0), ErrStaleEpoch},
		{"epoch answer at a leader", func() error { _, err := p.EpochEndOffset(5, 10); return err }(), ErrNotTruncating},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if err := p.BecomeLeader(State{Leader: 2, LeaderEpoch: 6}, 0, 0, t0); err == nil {
		t.Error("BecomeLeader naming another leader: got nil, want an error")
	}
}

// TestLeaderChangeFailsPendingAcks: acks=all produces pending when the
// leader becomes a follower fail with NOT_LEADER_OR_FOLLOWER, and a
// follower refuses leader calls.
func TestLeaderChangeFailsPendingAcks(t *testing.T) {
	p := newLeader(t, DefaultConfig(), []ReplicaID{1, 2}, 10, 0)
	if err := p.Await(7, 9, t0.Add(time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	st := State{Leader: 2, LeaderEpoch: 6, PartitionEpoch: 8, Replicas: []ReplicaID{1, 2, 3}, ISR: []ReplicaID{1, 2}}
	if _, err := p.BecomeFollower(st, 10, 0, nil); err != nil {
		t.Fatal(err)
	}
	rd := p.Ready()
	if len(rd.Acks) != 1 || rd.Acks[0].ID != 7 || !errors.Is(rd.Acks[0].Err, ErrNotLeader) {
		t.Fatalf("acks after losing leadership: got %+v, want ack 7 with ErrNotLeader", rd.Acks)
	}
	for name, err := range map[string]error{
		"Appended":      p.Appended(11, t0),
		"CheckAcksAll":  p.CheckAcksAll(),
		"Await":         p.Await(8, 10, t0, t0),
		"FollowerFetch": p.FollowerFetch(3, 0, -1, t0),
	} {
		if !errors.Is(err, ErrNotLeader) {
			t.Errorf("%s on a follower: got %v, want ErrNotLeader", name, err)
		}
	}
}

// TestTruncationDecisions runs a new follower's truncation against a
// leader's epochs to the end, as the broker would, and checks where it
// cuts and how many OffsetForLeaderEpoch requests it sends.
func TestTruncationDecisions(t *testing.T) {
	type epochs = []log.EpochEntry
	for _, tc := range []struct {
		name           string
		mode           TruncationMode
		follower       epochs
		followerEnd    int64
		followerHW     int64
		leader         epochs
		leaderEnd      int64
		want           int64
		wantRequests   int
		leaderUnknowns bool // the leader answers -1, -1
	}{
		{"hw mode cuts to the HW", TruncateHW, ep(0, 0), 10, 4, ep(0, 0), 10, 4, 0, false},
		{"hw mode never above the LEO", TruncateHW, ep(0, 0), 3, 4, ep(0, 0), 10, 3, 0, false},
		{"epoch mode keeps what the leader has", TruncateEpoch, ep(0, 0), 10, 4, ep(0, 0, 1, 12), 15, 10, 1, false},
		{"epoch mode cuts where the epoch ended at the leader", TruncateEpoch, ep(0, 0), 10, 4, ep(0, 0, 1, 6), 15, 6, 1, false},
		{"same latest epoch: the shorter log wins", TruncateEpoch, ep(0, 0, 3, 5), 10, 4, ep(0, 0, 3, 5), 8, 8, 1, false},
		{"KIP-279: the leader never saw the follower's epoch 2", TruncateEpoch,
			ep(0, 0, 2, 5), 10, 3, ep(0, 0, 1, 7, 3, 9), 12, 5, 2, false},
		{"KIP-279: two epochs walked back", TruncateEpoch,
			ep(0, 0, 2, 4, 4, 6), 10, 3, ep(0, 0, 1, 3, 3, 8, 5, 9), 12, 3, 3, false},
		{"follower has no epochs: the HW", TruncateEpoch, nil, 10, 4, ep(0, 0), 10, 4, 0, false},
		{"leader knows nothing: the HW", TruncateEpoch, ep(2, 0), 10, 4, ep(2, 0), 10, 4, 1, true},
		{"leader's first epoch above the asked one", TruncateEpoch, ep(1, 0), 10, 4, ep(3, 2), 10, 2, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Truncation = tc.mode
			p, err := New(cfg, 2)
			if err != nil {
				t.Fatal(err)
			}
			st := State{Leader: 1, LeaderEpoch: 9, PartitionEpoch: 1, Replicas: []ReplicaID{1, 2}, ISR: []ReplicaID{1, 2}}
			tr, err := p.BecomeFollower(st, tc.followerEnd, tc.followerHW, tc.follower)
			if err != nil {
				t.Fatal(err)
			}
			requests := 0
			for !tr.Done {
				if requests++; requests > 10 {
					t.Fatalf("more than 10 OffsetForLeaderEpoch requests; last %+v", tr)
				}
				epoch, end := EndOffsetForEpoch(tc.leader, tc.leaderEnd, tr.Epoch)
				if tc.leaderUnknowns {
					epoch, end = -1, -1
				}
				if tr, err = p.EpochEndOffset(epoch, end); err != nil {
					t.Fatal(err)
				}
			}
			if tr.Offset != tc.want || requests != tc.wantRequests {
				t.Fatalf("truncation: got offset %d after %d requests, want %d after %d", tr.Offset, requests, tc.want, tc.wantRequests)
			}
			if p.LogEnd() != tc.want || p.HighWatermark() > tc.want {
				t.Fatalf("after truncation: LEO %d HW %d, want LEO %d and HW at most that", p.LogEnd(), p.HighWatermark(), tc.want)
			}
			if hw, err := p.FollowerFetched(tc.want+2, tc.want+1); err != nil || hw != tc.want+1 {
				t.Fatalf("follower HW after a fetch: got %d (%v), want %d", hw, err, tc.want+1)
			}
		})
	}
}

// ep returns the epoch entries given as epoch, start offset pairs.
func ep(pairs ...int64) []log.EpochEntry {
	var out []log.EpochEntry
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, log.EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

// TestFollowerHWIsCappedByItsLEO: a follower's HW is the leader's HW but
// never above its own LEO.
func TestFollowerHWIsCappedByItsLEO(t *testing.T) {
	p, _ := New(DefaultConfig(), 2)
	st := State{Leader: 1, LeaderEpoch: 1, Replicas: []ReplicaID{1, 2}, ISR: []ReplicaID{1, 2}}
	if _, err := p.BecomeFollower(st, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ logEnd, leaderHW, want int64 }{{5, 10, 5}, {10, 7, 7}, {12, 12, 12}} {
		if got, err := p.FollowerFetched(tc.logEnd, tc.leaderHW); err != nil || got != tc.want {
			t.Errorf("LEO %d, leader HW %d: got %d (%v), want %d", tc.logEnd, tc.leaderHW, got, err, tc.want)
		}
	}
	tr, err := p.FetchOutOfRange(8)
	if err != nil || tr.Offset != 8 || !tr.Done {
		t.Fatalf("out of range with leader LEO 8: got %+v (%v), want Done at 8", tr, err)
	}
}

// TestEndOffsetForEpoch checks the OffsetForLeaderEpoch answer over an
// epoch list, the rule log.Log.EndOffsetForEpoch implements.
func TestEndOffsetForEpoch(t *testing.T) {
	epochs := ep(1, 0, 3, 5, 6, 9)
	for _, tc := range []struct {
		asked     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{6, 6, 12},   // latest: the LEO
		{3, 3, 9},    // known: the next epoch's start
		{4, 3, 9},    // unknown, between: the largest below and its end
		{0, 0, 0},    // below every epoch: itself and the first start
		{7, -1, -1},  // above the latest: undefined
		{-1, -1, -1}, // no epoch asked
	} {
		e, end := EndOffsetForEpoch(epochs, 12, tc.asked)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("epoch %d: got (%d, %d), want (%d, %d)", tc.asked, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
	if e, end := EndOffsetForEpoch(nil, 12, 1); e != -1 || end != -1 {
		t.Errorf("no epochs: got (%d, %d), want (-1, -1)", e, end)
	}
}

// TestSetConfig: a raised min.insync.replicas refuses acks=all at once,
// a lowered one accepts it again, and an invalid config is refused with
// the partition's config kept.
func TestSetConfig(t *testing.T) {
	cfg := DefaultConfig()
	p := newLeader(t, cfg, []ReplicaID{1, 2}, 10, 10)
	if err := p.CheckAcksAll(); err != nil {
		t.Fatalf("ISR 2, min.insync.replicas 1: got %v, want nil", err)
	}
	raised := cfg
	raised.MinInsyncReplicas = 3
	if err := p.SetConfig(raised); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	if err := p.CheckAcksAll(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("ISR 2, min.insync.replicas 3: got %v, want ErrNotEnoughReplicas", err)
	}
	bad := cfg
	bad.MinInsyncReplicas = 0
	if err := p.SetConfig(bad); err == nil {
		t.Fatalf("SetConfig with min.insync.replicas 0: got nil, want an error")
	}
	if err := p.CheckAcksAll(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("after a refused SetConfig: got %v, want ErrNotEnoughReplicas (min.insync.replicas 3 kept)", err)
	}
	if err := p.SetConfig(cfg); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	if err := p.CheckAcksAll(); err != nil {
		t.Fatalf("ISR 2, min.insync.replicas 1 again: got %v, want nil", err)
	}
}
