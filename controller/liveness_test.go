package controller

import (
	"strings"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestUnreachableBroker checks that a broker whose listener refuses
// connections is fenced as if its session had expired (leaderships move,
// it leaves ISRs and the live set, its queue is dropped) while its
// session lives on; that reports about another incarnation, the
// controller itself or a broker already fenced change nothing; that it
// stays fenced through membership updates that still list it, and that
// it is live again when it answers, or as a new incarnation.
func TestUnreachableBroker(t *testing.T) {
	parts := []part{
		{topic: "t", p: 0, replicas: ids(2, 3, 1), leader: 2, isr: ids(2, 3, 1), leaderEpoch: 4, partitionEpoch: 9},
		{topic: "t", p: 1, replicas: ids(3, 2, 1), leader: 3, isr: ids(3, 2, 1), leaderEpoch: 1, partitionEpoch: 2},
	}
	s := newTestState(Policy{}, ids(1, 2, 3), parts...)
	plan := s.Unreachable(testBroker(2))
	lines := render(t, s, plan)
	checkLines(t, opLines(lines), []string{
		"drop 2",
		"--",
		"set t-0 leader 3 epoch 5 isr [3 1] if 9",
		"set t-1 leader 3 epoch 1 isr [3 1] if 2",
	})
	for _, want := range []string{"to 3: UpdateMetadata live [1 3] t-0 t-1", "to 1: UpdateMetadata live [1 3]"} {
		if !contains(lines, want) {
			t.Errorf("plan lacks %q:\n%v", want, lines)
		}
	}
	for _, l := range lines {
		if len(l) > 5 && l[:5] == "to 2:" {
			t.Errorf("plan sends to the unreachable broker 2: %q", l)
		}
	}
	commitAll(s, plan)

	for name, b := range map[string]coord.Broker{
		"again":                 testBroker(2),
		"another incarnation":   {ID: 3, Epoch: brokerEpoch(3) - 1},
		"the controller's own":  testBroker(1),
		"a broker that is gone": testBroker(7),
		"reachable, not fenced": testBroker(3),
	} {
		var p Plan
		if name == "reachable, not fenced" {
			p = s.Reachable(b)
		} else {
			p = s.Unreachable(b)
		}
		if !p.Empty() {
			t.Errorf("%s: got plan %v, want nothing", name, render(t, s, p))
		}
	}

	// The session still lists broker 2 at the same epoch: it stays out.
	plan = s.Members([]coord.Broker{testBroker(1), testBroker(2), testBroker(3)})
	if ops := opLines(render(t, s, plan)); len(ops) != 0 {
		t.Errorf("members still listing the fenced broker: got %v, want nothing", ops)
	}
	if _, err := s.ControlledShutdown(1, brokerEpoch(1)); err != nil {
		t.Fatal(err)
	}
	if got := s.eligible(); len(got) != 1 || got[0] != 3 {
		t.Errorf("eligible for new replicas: got %v, want [3] (1 shuts down, 2 is unreachable)", got)
	}
	s.shuttingDown = map[coord.BrokerID]bool{}

	// It answers again: live, told its full state, back in the live set;
	// it rejoins ISRs as its leader asks.
	plan = s.Reachable(testBroker(2))
	lines = render(t, s, plan)
	for _, want := range []string{"to 2: UpdateMetadata live [1 2 3] t-0 t-1", "to 2: LeaderAndIsr t-0 leader 3 epoch 5 isr [3 1], t-1 leader 3 epoch 1 isr [3 1]", "to 1: UpdateMetadata live [1 2 3]"} {
		if !contains(lines, want) {
			t.Errorf("reachable again: plan lacks %q:\n%v", want, lines)
		}
	}
	commitAll(s, plan)

	// Fenced again, then back as a new incarnation: the new one is live.
	commitAll(s, s.Unreachable(testBroker(2)))
	restarted := coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9002, Epoch: brokerEpoch(2) + 50}
	plan = s.Members([]coord.Broker{testBroker(1), restarted, testBroker(3)})
	if lines := render(t, s, plan); !contains(lines, "to 2: UpdateMetadata live [1 2 3] t-0 t-1") {
		t.Errorf("a new incarnation of the fenced broker is not told its state: %v", lines)
	}
}

// TestCrashedAtStart checks that brokers found crashed before a new
// controller's first member set are fenced in its first plan: their
// leaderships move and they leave ISRs in the first commit, and they are
// sent nothing; that a broker found crashed at another incarnation than
// the live one, or not in the first member set, is not fenced (the latter
// is live once it joins); and that Crashed after the first member set
// does nothing.
func TestCrashedAtStart(t *testing.T) {
	parts := []part{
		{topic: "t", p: 0, replicas: ids(2, 3, 1), leader: 2, isr: ids(2, 3, 1), leaderEpoch: 4, partitionEpoch: 9},
		{topic: "t", p: 1, replicas: ids(3, 2, 1), leader: 3, isr: ids(3, 2, 1), leaderEpoch: 1, partitionEpoch: 2},
	}
	s := newTestState(Policy{}, nil, parts...)
	s.membersSeen = false
	s.Crashed([]coord.Broker{testBroker(2), {ID: 3, Epoch: brokerEpoch(3) - 1}, testBroker(4)})
	plan := s.Members([]coord.Broker{testBroker(1), testBroker(2), testBroker(3)})
	lines := render(t, s, plan)
	checkLines(t, opLines(lines), []string{
		"set t-0 leader 3 epoch 5 isr [3 1] if 9",
		"set t-1 leader 3 epoch 1 isr [3 1] if 2",
	})
	for _, want := range []string{"to 3: UpdateMetadata live [1 3] t-0 t-1", "to 1: UpdateMetadata live [1 3] t-0 t-1"} {
		if !contains(lines, want) {
			t.Errorf("first plan lacks %q:\n%v", want, lines)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "to 2:") {
			t.Errorf("first plan sends to the crashed broker 2: %q", l)
		}
	}
	commitAll(s, plan)

	// Broker 4, reported crashed before it was a member, joins: it is
	// live.
	plan = s.Members([]coord.Broker{testBroker(1), testBroker(2), testBroker(3), testBroker(4)})
	if lines := render(t, s, plan); !contains(lines, "to 4: UpdateMetadata live [1 3 4] t-0 t-1") {
		t.Errorf("broker 4 joining after it was reported crashed is not taken in: %v", lines)
	}
	commitAll(s, plan)
	s.Crashed([]coord.Broker{testBroker(3)})
	if !s.isLive(3) {
		t.Errorf("Crashed after the first member set fenced broker 3")
	}
}
