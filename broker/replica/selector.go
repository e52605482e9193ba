package replica

import (
	"slices"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// ReadReplica is a replica of a partition as its leader sees it when it
// chooses where a consumer reads from (Kafka's ReplicaView): the broker,
// its rack, whether it is registered now and in the ISR, and its log's
// range and last catch-up as its fetches told the leader.
type ReadReplica struct {
	ID     coord.BrokerID
	Rack   string
	Live   bool
	InSync bool
	// LogStart and LogEnd are the replica's log start and end offsets
	// as its fetches reported them, -1 before they did.
	LogStart, LogEnd int64
	// LastCaughtUp is when the replica was last caught up with the
	// leader (Kafka's lastCaughtUpTimeMs).
	LastCaughtUp time.Time
}

// PreferredReadReplica decides which follower a consumer in clientRack
// fetching from fetchOffset reads from, as Kafka's
// ReplicaManager.findPreferredReadReplica does with its
// RackAwareReplicaSelector: coord.NoBroker (the leader serves) when the
// client names no rack or the leader is in its rack; else, among the
// followers in the client's rack that are live, in the ISR and hold
// fetchOffset, the most caught up (the highest log end, then the latest
// catch-up, then the highest id); coord.NoBroker when there is none.
func PreferredReadReplica(clientRack string, fetchOffset int64, leaderRack string, followers []ReadReplica) coord.BrokerID {
	if clientRack == "" || leaderRack == clientRack {
		return coord.NoBroker
	}
	var best *ReadReplica
	for i := range followers {
		f := &followers[i]
		if f.Rack != clientRack || !f.Live || !f.InSync || f.LogEnd < fetchOffset || f.LogStart > fetchOffset {
			continue
		}
		if best == nil || moreCaughtUp(f, best) {
			best = f
		}
	}
	if best == nil {
		return coord.NoBroker
	}
	return best.ID
}

// moreCaughtUp orders replicas as Kafka's ReplicaView.comparator does:
// by log end, then by last catch-up, then by id.
func moreCaughtUp(a, b *ReadReplica) bool {
	switch {
	case a.LogEnd != b.LogEnd:
		return a.LogEnd > b.LogEnd
	case !a.LastCaughtUp.Equal(b.LastCaughtUp):
		return a.LastCaughtUp.After(b.LastCaughtUp)
	}
	return a.ID > b.ID
}

// PreferredReadReplica returns the follower of p, which this broker
// leads, that a consumer in clientRack fetching from fetchOffset should
// read from, or coord.NoBroker for this broker (see the function
// PreferredReadReplica). The followers' positions are the leader's
// replication state's; their liveness and racks the metadata cache's.
func (m *Manager) PreferredReadReplica(p *Partition, clientRack string, fetchOffset int64) coord.BrokerID {
	if clientRack == "" || m.cfg.Rack == clientRack {
		return coord.NoBroker
	}
	self := coord.BrokerID(m.cfg.BrokerID)
	var followers []ReadReplica
	p.repMu.Lock()
	if coord.BrokerID(p.rep.Leader()) != self {
		p.repMu.Unlock()
		return coord.NoBroker
	}
	isr := p.rep.ISR()
	for _, id := range p.rep.Replicas() {
		if coord.BrokerID(id) == self {
			continue
		}
		f := ReadReplica{ID: coord.BrokerID(id), InSync: slices.Contains(isr, id)}
		f.LogEnd, _ = p.rep.FollowerLogEnd(id)
		f.LogStart, _ = p.rep.FollowerLogStart(id)
		f.LastCaughtUp, _ = p.rep.FollowerLastCaughtUp(id)
		followers = append(followers, f)
	}
	p.repMu.Unlock()
	for i := range followers {
		b, ok := m.cache.Broker(followers[i].ID)
		followers[i].Live, followers[i].Rack = ok, b.Rack
	}
	return PreferredReadReplica(clientRack, fetchOffset, m.cfg.Rack, followers)
}
