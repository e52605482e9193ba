package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestHandOver: a group that becomes a consumer group while it
// rebalances hands over its members, with their protocols and last
// assignments, at its generation; the join it held is answered
// REBALANCE_IN_PROGRESS so that the member joins the consumer group, and
// the group is Dead.
func TestHandOver(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "cooperative-sticky"), newClient("b", "cooperative-sticky")
	h.stable(a, b)
	gen := h.g.Generation()
	w := h.join(a) // a rejoins: a rebalance starts, its join is held
	h.wantState(PreparingRebalance, gen)

	s := h.g.Snapshot()
	if s.Generation != gen || s.ProtocolType != "consumer" || s.Protocol != "cooperative-sticky" || len(s.Members) != 2 {
		t.Fatalf("got snapshot %+v, want generation %d, consumer, cooperative-sticky, a and b", s, gen)
	}
	for i, c := range []*client{a, b} {
		m := s.Members[i]
		if m.ID != c.memberID || m.SessionTimeout != c.session || m.RebalanceTimeout != c.rebalance ||
			len(m.Protocols) != 1 || string(m.Protocols[0].Metadata) != string(c.protocols[0].Metadata) || string(m.Assignment) != c.name+"-assignment" {
			t.Fatalf("member %d: got %+v, want %s with its protocol and assignment", i, m, c.name)
		}
	}
	h.apply(h.g.HandOver())
	if code := h.joinCode(w); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's held join: got %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	if h.g.State() != Dead || h.g.NumMembers() != 0 {
		t.Fatalf("after the hand-over: got %v with %d members, want Dead and none", h.g.State(), h.g.NumMembers())
	}
}

// TestFromConsumer: a classic group rebuilt from a consumer group's
// classic members stores them with their assignments at the generation,
// then rebalances: heartbeats at that generation are told to rejoin, a
// commit at it is still taken, and once both rejoined the generation
// moves on.
func TestFromConsumer(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range", "cooperative-sticky"), newClient("b", "cooperative-sticky")
	h.stable(a, b)
	s := h.g.Snapshot()
	s.Generation = 7
	s.Protocol = "" // a consumer group has none: the members' vote picks it

	g, v, out := FromConsumer("g", testConfig(), s, h.now)
	h.g = g
	h.apply(out)
	h.wantState(PreparingRebalance, 7)
	if g.Protocol() != "cooperative-sticky" || g.ProtocolType() != "consumer" {
		t.Fatalf("got protocol %q type %q, want cooperative-sticky (the one both support) and consumer", g.Protocol(), g.ProtocolType())
	}
	if v.Generation != 7 || len(v.Members) != 2 || *v.Protocol != "cooperative-sticky" || string(v.Members[1].Assignment) != "b-assignment" {
		t.Fatalf("got stored metadata %+v, want generation 7, both members and their assignments", v)
	}
	a.generation, b.generation = 7, 7
	if code := h.heartbeat(a); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's heartbeat at generation 7: got %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	if code := h.commit(b); code != 0 {
		t.Fatalf("b's commit at generation 7: got %v, want none", kerr.ErrorForCode(code))
	}
	h.rebalance([]*client{a, b}, []Waiter{h.join(a), h.join(b)})
	h.syncAll([]*client{a, b})
	h.wantState(Stable, 8)
}
