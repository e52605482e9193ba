package controller

import (
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// Election is the outcome of a partition leader election: the new leader
// (coord.NoBroker when no replica is eligible) and the new ISR.
type Election struct {
	Leader coord.BrokerID
	ISR    []coord.BrokerID
	// Unclean is true when the leader was not in the ISR (possible loss).
	Unclean bool
}

// ElectLeader applies R11 to one partition whose leader must be (re)chosen:
// the first replica, in assignment order, that is live and in the ISR
// wins; when no ISR member is live and unclean is true, the first live
// replica wins and the ISR becomes just that leader; otherwise there is no
// leader.
//
// The new ISR drops every replica that is not live, except that it is
// never shrunk to empty: when no ISR member is live the last ISR is kept,
// so that the first of them to return may lead again without an unclean
// election (as Kafka keeps the last in-sync replica).
func ElectLeader(assignment, isr []coord.BrokerID, live func(coord.BrokerID) bool, unclean bool) Election {
	liveISR := make([]coord.BrokerID, 0, len(isr))
	for _, id := range assignment {
		if slices.Contains(isr, id) && live(id) {
			liveISR = append(liveISR, id)
		}
	}
	if len(liveISR) > 0 {
		return Election{Leader: liveISR[0], ISR: liveISR}
	}
	if unclean {
		for _, id := range assignment {
			if live(id) {
				return Election{Leader: id, ISR: []coord.BrokerID{id}, Unclean: true}
			}
		}
	}
	return Election{Leader: coord.NoBroker, ISR: append([]coord.BrokerID(nil), isr...)}
}

// ElectPreferred returns the preferred leader (the first assigned replica)
// when it is live and in the ISR, and ok false otherwise.
func ElectPreferred(assignment, isr []coord.BrokerID, live func(coord.BrokerID) bool) (coord.BrokerID, bool) {
	if len(assignment) == 0 {
		return coord.NoBroker, false
	}
	preferred := assignment[0]
	if live(preferred) && slices.Contains(isr, preferred) {
		return preferred, true
	}
	return coord.NoBroker, false
}

// ElectForShutdown chooses a leader other than the broker shutting down:
// the first live ISR member, in assignment order, that is not leaving. The
// leaving broker is dropped from the ISR. ok is false when no other ISR
// member is live; the leadership then stays where it is.
func ElectForShutdown(assignment, isr []coord.BrokerID, live func(coord.BrokerID) bool, leaving coord.BrokerID) (Election, bool) {
	e := ElectLeader(assignment, isr, func(id coord.BrokerID) bool { return id != leaving && live(id) }, false)
	if e.Leader == coord.NoBroker {
		return Election{}, false
	}
	return e, true
}
