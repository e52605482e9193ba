package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestControlledShutdown: leadership moves to the first other live ISR
// member, the leaving broker leaves every ISR it is not the last member
// of, a partition with no other live ISR member stays led by it (and is
// reported remaining), and from then on it is ineligible.
func TestControlledShutdown(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2, 3),
		part{topic: "t", p: 0, replicas: ids(2, 3, 1), leader: 2, isr: ids(2, 3, 1), leaderEpoch: 4, partitionEpoch: 9},
		part{topic: "t", p: 1, replicas: ids(3, 2), leader: 3, isr: ids(3, 2), leaderEpoch: 1, partitionEpoch: 2},
		part{topic: "t", p: 2, replicas: ids(2, 3), leader: 2, isr: ids(2), leaderEpoch: 6, partitionEpoch: 7},
		part{topic: "t", p: 3, replicas: ids(1, 3), leader: 1, isr: ids(1, 3)},
		part{topic: "t", p: 4, replicas: ids(3, 2), leader: 3, isr: ids(3)},
	)
	plan, err := s.ControlledShutdown(2, brokerEpoch(2))
	if err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	checkLines(t, render(t, s, plan), []string{
		"set t-0 leader 3 epoch 5 isr [3 1] if 9",
		"set t-1 leader 3 epoch 1 isr [3] if 2",
		"to 1: LeaderAndIsr t-0 leader 3 epoch 5 isr [3 1]",
		"to 1: UpdateMetadata live [1 2 3] t-0 t-1",
		"to 2: LeaderAndIsr t-0 leader 3 epoch 5 isr [3 1], t-1 leader 3 epoch 1 isr [3]",
		"to 2: UpdateMetadata live [1 2 3] t-0 t-1",
		"to 3: LeaderAndIsr t-0 leader 3 epoch 5 isr [3 1], t-1 leader 3 epoch 1 isr [3]",
		"to 3: UpdateMetadata live [1 2 3] t-0 t-1",
	})
	commitAll(s, plan)
	if got, want := s.LedBy(2), []coord.TopicPartition{{Topic: "t", Partition: 2}}; !slices.Equal(got, want) {
		t.Errorf("remaining: got %v, want %v (its only ISR member)", got, want)
	}
	// Asked again, nothing more moves.
	again, err := s.ControlledShutdown(2, brokerEpoch(2))
	if err != nil || !again.Empty() {
		t.Errorf("asked again: got %v, %v; want nothing to do", render(t, s, again), err)
	}
	// Shutting down, it gets no new replica and joins no ISR.
	if _, _, err := s.CreateTopic(TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 3}, Seed{}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Errorf("create topic of RF 3 with one of 3 brokers shutting down: got %v, want %v", err, ErrInvalidReplicationFactor)
	}
	_, res := s.AlterPartitions([]AlterPartitionRequest{{BrokerID: 3, BrokerEpoch: brokerEpoch(3),
		Partition: coord.TopicPartition{Topic: "t", Partition: 1}, LeaderEpoch: 1, PartitionEpoch: 3, ISR: ids(3, 2)}})
	if !errors.Is(res[0].Err, ErrIneligibleReplica) {
		t.Errorf("adding the broker shutting down to an ISR: got %v, want %v", res[0].Err, ErrIneligibleReplica)
	}
	// When it dies, the partition it still led loses its leader (R11).
	plan = s.Members([]coord.Broker{testBroker(1), testBroker(3)})
	checkLines(t, opLines(render(t, s, plan)), []string{"drop 2", "--", "set t-2 leader -1 epoch 7 isr [2] if 7"})
}

// TestControlledShutdownStaleEpoch: only the live incarnation may shut
// down.
func TestControlledShutdownStaleEpoch(t *testing.T) {
	s := newTestState(Policy{}, ids(1, 2), part{topic: "t", p: 0, replicas: ids(2, 1), leader: 2, isr: ids(2, 1)})
	for _, tc := range []struct {
		id    coord.BrokerID
		epoch int64
	}{{2, brokerEpoch(2) - 1}, {3, brokerEpoch(3)}} {
		if _, err := s.ControlledShutdown(tc.id, tc.epoch); !errors.Is(err, ErrStaleBrokerEpoch) {
			t.Errorf("broker %d epoch %d: got %v, want %v", tc.id, tc.epoch, err, ErrStaleBrokerEpoch)
		}
	}
	if s.shuttingDown[2] || s.shuttingDown[3] {
		t.Errorf("got brokers marked shutting down by stale requests, want none")
	}
}

// TestElectLeaders checks ElectLeaders' outcome for each case, preferred
// and unclean.
func TestElectLeaders(t *testing.T) {
	parts := []part{
		// t-0: the preferred replica 1 leads.
		{topic: "t", p: 0, replicas: ids(1, 2), leader: 1, isr: ids(1, 2), leaderEpoch: 3, partitionEpoch: 5},
		// t-1: 2 leads, the preferred replica 1 is in the ISR.
		{topic: "t", p: 1, replicas: ids(1, 2), leader: 2, isr: ids(2, 1), leaderEpoch: 3, partitionEpoch: 5},
		// t-2: 2 leads, the preferred replica 1 is out of sync.
		{topic: "t", p: 2, replicas: ids(1, 2), leader: 2, isr: ids(2), leaderEpoch: 3, partitionEpoch: 5},
		// t-3: the preferred replica 4 is not live.
		{topic: "t", p: 3, replicas: ids(4, 2), leader: 2, isr: ids(2, 4), leaderEpoch: 3, partitionEpoch: 5},
		// t-4: no leader; the ISR member 4 is not live, 2 is out of sync.
		{topic: "t", p: 4, replicas: ids(4, 2), leader: coord.NoBroker, isr: ids(4), leaderEpoch: 3, partitionEpoch: 5},
		// t-5: no leader and no replica live.
		{topic: "t", p: 5, replicas: ids(4, 5), leader: coord.NoBroker, isr: ids(4), leaderEpoch: 3, partitionEpoch: 5},
	}
	tp := func(p int32) coord.TopicPartition { return coord.TopicPartition{Topic: "t", Partition: p} }
	tests := []struct {
		name      string
		preferred bool
		partition coord.TopicPartition
		want      error
		wantOps   []string
	}{
		{"preferred: the preferred replica leads already", true, tp(0), ErrElectionNotNeeded, nil},
		{"preferred: elected", true, tp(1), nil, []string{"set t-1 leader 1 epoch 4 isr [2 1] if 5"}},
		{"preferred: out of sync", true, tp(2), ErrPreferredLeaderNotAvailable, nil},
		{"preferred: not live", true, tp(3), ErrPreferredLeaderNotAvailable, nil},
		{"preferred: no such partition", true, tp(9), coord.ErrNotFound, nil},
		{"unclean: a live leader exists", false, tp(1), ErrElectionNotNeeded, nil},
		{"unclean: an out-of-sync replica is elected", false, tp(4), nil, []string{"set t-4 leader 2 epoch 4 isr [2] if 5"}},
		{"unclean: no replica live", false, tp(5), ErrEligibleLeadersNotAvailable, nil},
		{"unclean: no such topic", false, coord.TopicPartition{Topic: "u"}, coord.ErrNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{}, ids(1, 2, 3), parts...)
			plan, results := s.ElectLeaders(tt.preferred, []coord.TopicPartition{tt.partition})
			if err, ok := results[tt.partition]; !ok || !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("got %v (present %v), want %v", err, ok, tt.want)
			}
			checkLines(t, opLines(render(t, s, plan)), tt.wantOps)
		})
	}
	t.Run("all partitions when none are named, in one commit", func(t *testing.T) {
		s := newTestState(Policy{}, ids(1, 2, 3), parts...)
		plan, results := s.ElectLeaders(false, nil)
		if len(results) != len(parts) {
			t.Errorf("got %d results, want %d", len(results), len(parts))
		}
		checkLines(t, opLines(render(t, s, plan)), []string{"set t-4 leader 2 epoch 4 isr [2] if 5"})
	})
}

// TestRebalanceThresholds: a broker leading too few of the partitions it
// is preferred for (more than leader.imbalance.per.broker.percentage of
// them not led) gets them back where it is in the ISR; at or below the
// threshold nothing moves.
func TestRebalanceThresholds(t *testing.T) {
	// Broker 1 is preferred for 10 partitions and leads 10-notLed of them;
	// broker 2 leads the others, with 1 in the ISR unless outOfSync.
	build := func(notLed int, outOfSync bool) []part {
		var parts []part
		for p := range 10 {
			pt := part{topic: "t", p: int32(p), replicas: ids(1, 2), leader: 1, isr: ids(1, 2)}
			if p < notLed {
				pt.leader, pt.isr = 2, ids(2, 1)
				if outOfSync {
					pt.isr = ids(2)
				}
			}
			parts = append(parts, pt)
		}
		return parts
	}
	tests := []struct {
		name       string
		percentage int
		notLed     int
		outOfSync  bool
		shutting   bool
		wantMoved  int
	}{
		{"balanced", 10, 0, false, false, 0},
		{"exactly at 10 %: left alone", 10, 1, false, false, 0},
		{"above 10 %: both moved back", 10, 2, false, false, 2},
		{"20 % allowed, 2 of 10 not led: left alone", 20, 2, false, false, 0},
		{"20 % allowed, 3 of 10 not led: moved back", 20, 3, false, false, 3},
		{"0 % allowed: one is enough", 0, 1, false, false, 1},
		{"100 % allowed: never", 100, 10, false, false, 0},
		{"above the threshold but out of sync: nothing to elect", 10, 5, true, false, 0},
		{"above the threshold but shutting down: left alone", 10, 5, false, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(Policy{LeaderImbalancePerBrokerPercentage: tt.percentage}, ids(1, 2), build(tt.notLed, tt.outOfSync)...)
			if tt.shutting {
				s.shuttingDown[1] = true
			}
			var want []string
			for p := range tt.wantMoved {
				want = append(want, fmt.Sprintf("set t-%d leader 1 epoch 1 isr [2 1] if 0", p))
			}
			checkLines(t, opLines(render(t, s, s.Rebalance())), want)
		})
	}
}
