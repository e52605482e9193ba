package controller

import "github.com/tripodmq/tripod/coord"

// Crashed brokers, told apart from slow ones. A broker's session expires
// only after the session timeout, whatever the failure; but when a
// broker's process is gone, the kernel of its host refuses connections to
// its listener at once, which it does not for a process that is paused,
// overloaded or cut off by the network. The broker running the controller
// probes every live broker's listener and reports a refusal
// (Unreachable): that incarnation then counts as not live, exactly as
// after its session expired, until it leaves, comes back as a new
// incarnation, or answers again (Reachable).
//
// The signal is safe to trust because a broker wrongly presumed dead
// loses nothing acknowledged: its leaderships move at a new leader epoch,
// so its followers stop fetching from it and no acks=all write it takes
// is acknowledged, and the ISR changes it may ask for are refused by
// epoch. It does not cover a host lost whole (no kernel answers, so
// nothing is refused): the session timeout applies then.

// Unreachable records that the live incarnation of broker b refused a
// connection to its listener, and returns the plan that follows: its
// queued requests are dropped, it loses its leaderships and ISR places
// (Reconcile, as if it had left), and every broker learns the live set
// without it. A report about another incarnation than the live one, the
// controller's own broker, or a broker known unreachable changes
// nothing.
func (s *State) Unreachable(b coord.Broker) Plan {
	cur, ok := s.live[b.ID]
	if !ok || cur.Epoch != b.Epoch || b.ID == s.controller || s.unreachable[b.ID] {
		return Plan{}
	}
	s.markUnreachable(b)
	var plan Plan
	plan.add(Step{Drops: []coord.BrokerID{b.ID}})
	plan.Steps = append(plan.Steps, s.Reconcile().Steps...)
	return plan
}

// Crashed records, before the first member set is taken in (Members),
// the incarnations already found crashed (their listeners refuse
// connections): those the first Members finds live at the same broker
// epoch count unreachable at once, as Unreachable would make them. A
// controller whose term starts because the previous controller's broker
// crashed then moves that broker's partitions in its first plan, rather
// than first sending it its full state and planning every partition for
// a live set it is not part of. A broker not in the first member set, or
// at another epoch, is not marked; a call after the first Members does
// nothing.
func (s *State) Crashed(bs []coord.Broker) {
	if s.membersSeen {
		return
	}
	if s.crashedAtStart == nil {
		s.crashedAtStart = map[coord.BrokerID]int64{}
	}
	for _, b := range bs {
		s.crashedAtStart[b.ID] = b.Epoch
	}
}

// markUnreachable makes live incarnation b count unreachable.
func (s *State) markUnreachable(b coord.Broker) {
	s.log.Warn("broker unreachable: its listener refuses connections, so its process is gone; fencing it before its session expires",
		"broker", b.ID, "broker_epoch", b.Epoch)
	s.unreachable[b.ID] = true
	s.liveChanged = true
}

// Reachable records that broker b, known unreachable at the same
// incarnation, answers again (it was presumed dead wrongly, or its
// listener was down for a while): it counts as live again, gets its full
// state, and every broker learns the live set with it. Anything else
// changes nothing.
func (s *State) Reachable(b coord.Broker) Plan {
	cur, ok := s.live[b.ID]
	if !ok || cur.Epoch != b.Epoch || !s.unreachable[b.ID] {
		return Plan{}
	}
	s.log.Info("broker reachable again", "broker", b.ID, "broker_epoch", b.Epoch)
	delete(s.unreachable, b.ID)
	s.unsynced[b.ID] = true
	s.liveChanged = true
	return s.Reconcile()
}
