package group

import (
	"bytes"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848's online migration: a classic group whose members use the
// consumer protocol type becomes a consumer group of the consumer
// protocol when a ConsumerGroupHeartbeat member joins it, its members
// staying as classic members of that group (package group/consumer owns
// them then); a consumer group left with classic members only becomes a
// classic group again. This file is the classic side of both
// conversions: what a group hands over, and a group rebuilt from what a
// consumer group hands back.

// Snapshot is what a classic group is made of, as a conversion carries
// it from one protocol's group to the other's.
type Snapshot struct {
	// Generation is the group's generation (a consumer group's epoch).
	Generation int32
	// ProtocolType is the members' protocol type ("consumer" for groups
	// that may convert); Protocol the chosen protocol, "" if none.
	ProtocolType string
	Protocol     string
	Members      []SnapshotMember
}

// SnapshotMember is one member of a Snapshot.
type SnapshotMember struct {
	ID         string
	InstanceID *string
	ClientID   string
	ClientHost string
	// SessionTimeout and RebalanceTimeout are the member's, from its
	// JoinGroup.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Protocols are the member's protocols in its order of preference,
	// each with its metadata (a ConsumerProtocolSubscription).
	Protocols []kmsg.JoinGroupRequestProtocol
	// Assignment is the member's assignment of the generation (a
	// ConsumerProtocolAssignment), empty if it has none.
	Assignment []byte
}

// Snapshot returns the group's members, generation and protocol, in the
// order the members joined. It shares no memory with the group.
func (g *Group) Snapshot() Snapshot {
	s := Snapshot{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol}
	for _, m := range g.order {
		sm := SnapshotMember{
			ID: m.id, InstanceID: cloneString(m.instanceID), ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeout: m.sessionTimeout, RebalanceTimeout: m.rebalanceTimeout,
			Assignment: bytes.Clone(m.assignment),
		}
		for _, p := range m.protocols {
			sm.Protocols = append(sm.Protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
		}
		s.Members = append(s.Members, sm)
	}
	return s
}

// HandOver ends a group that has become a consumer group (Kafka's
// convertToConsumerGroup): its held JoinGroup and SyncGroup requests are
// answered REBALANCE_IN_PROGRESS, so that their members join again, now
// as classic members of the consumer group, and the group is Dead,
// without members or timers. The caller drops it.
func (g *Group) HandOver() Output {
	for _, m := range g.order {
		if m.join != nil {
			g.replyJoin(m.join.waiter, joinError(m.join.version, m.id, kerr.RebalanceInProgress.Code))
			m.join = nil
		}
		if m.sync != nil {
			g.replySync(m.sync.waiter, syncError(m.sync.version, kerr.RebalanceInProgress.Code))
			m.sync = nil
		}
	}
	return g.Unload()
}

// FromConsumer rebuilds a classic group from a consumer group whose
// members all use the classic protocol (Kafka's
// ClassicGroup.fromConsumerGroup): the members with their protocols,
// sessions and assignments, at generation s.Generation, with the
// protocol the members vote for. The group then rebalances at once, as
// Kafka's downgrade does: members learn of it at their next heartbeat
// and join again. It returns the group, the metadata to store with the
// consumer group's tombstones (before the rebalance: the members and
// their assignments), and the Output of the rebalance's start. s has at
// least one member.
func FromConsumer(id string, cfg Config, s Snapshot, now time.Time) (*Group, *kmsg.GroupMetadataValue, Output) {
	g := New(id, cfg)
	g.generation = s.Generation
	g.protocolType = s.ProtocolType
	for _, sm := range s.Members {
		m := &member{
			id: sm.ID, instanceID: cloneString(sm.InstanceID), clientID: sm.ClientID, clientHost: sm.ClientHost,
			sessionTimeout: sm.SessionTimeout, rebalanceTimeout: sm.RebalanceTimeout,
			protocols:  slices.Clone(sm.Protocols),
			assignment: bytes.Clone(sm.Assignment),
		}
		m.expires = now.Add(m.sessionTimeout)
		g.add(m)
	}
	g.protocol = s.Protocol
	if g.protocol == "" || g.numSupporting(g.protocol) != len(g.order) {
		g.protocol = g.selectProtocol()
	}
	g.transition(now, Stable)
	v := g.metadataValue(func(m *member) []byte { return m.assignment })
	g.prepareRebalance(now)
	return g, v, g.flush()
}
