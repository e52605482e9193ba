package consumer

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/replication/log"
)

// KIP-848's online migration (Kafka's GroupMetadataManager
// classicGroup*ToConsumerGroup, convertToConsumerGroup and
// convertToClassicGroup): a consumer group may have classic members,
// consumers that speak JoinGroup, SyncGroup, Heartbeat and LeaveGroup.
// The coordinator computes their assignments with the group's
// server-side assignor like everyone's and hands them over in SyncGroup;
// their generation is their member epoch. A classic member is reconciled
// only when it joins: its JoinGroup carries what it owns (the
// subscription's owned partitions), so a member with partitions to give
// up is told its assignment without them, and its Heartbeat answers
// REBALANCE_IN_PROGRESS until it has joined again at the group's epoch.

// ConsumerProtocolType is the protocol type of classic consumers, the
// only one a consumer group takes (Kafka's ConsumerProtocol.PROTOCOL_TYPE).
const ConsumerProtocolType = "consumer"

// ClassicMetadata is what a consumer group keeps of a classic member
// (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata).
type ClassicMetadata struct {
	// SessionTimeout is the member's session timeout, from its JoinGroup.
	SessionTimeout time.Duration
	// Protocols are the member's protocols (assignor names, each with a
	// ConsumerProtocolSubscription) in its order of preference.
	Protocols []kmsg.JoinGroupRequestProtocol
}

// equal reports whether c and o are the same (both nil included).
func (c *ClassicMetadata) equal(o *ClassicMetadata) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.SessionTimeout == o.SessionTimeout && slices.EqualFunc(c.Protocols, o.Protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// supports reports whether the classic member supports protocol.
func (c *ClassicMetadata) supports(protocol string) bool {
	return slices.ContainsFunc(c.Protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol })
}

// ---------------------------------------------------------------------------
// Conversions

// FromClassic converts a classic group to a consumer group, as Kafka's
// convertToConsumerGroup and ConsumerGroup.fromClassicGroup when a member
// of the consumer protocol joins a classic group that has members: each
// member stays, as a classic member, Stable at the group's generation
// with the assignment it has, which is also its target; the group epoch
// and assignment epoch are the generation. The Output holds the new
// group's records (to write with the classic group's tombstone) and its
// first deadline. It fails, and the group stays classic, when the
// migration policy does not upgrade, the members' protocol type is not
// "consumer", the group has more members than MaxSize, or a member's
// subscription or assignment does not decode.
func FromClassic(id string, cfg Config, s group.Snapshot, md Metadata, now time.Time) (*Group, Output, error) {
	switch {
	case !cfg.MigrationPolicy.Upgrades():
		return nil, Output{}, fmt.Errorf("group %s is a classic group and group.consumer.migration.policy %s does not upgrade it", id, cfg.MigrationPolicy)
	case s.ProtocolType != ConsumerProtocolType:
		return nil, Output{}, fmt.Errorf("group %s is a classic group of protocol type %q, not %q", id, s.ProtocolType, ConsumerProtocolType)
	case len(s.Members) > cfg.MaxSize:
		return nil, Output{}, fmt.Errorf("group %s has %d members, more than group.consumer.max.size %d", id, len(s.Members), cfg.MaxSize)
	}
	g := New(id, cfg)
	g.epoch, g.assignmentEpoch = s.Generation, s.Generation
	for _, sm := range s.Members {
		meta := protocolMetadata(sm.Protocols, s.Protocol)
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(meta); err != nil {
			return nil, Output{}, fmt.Errorf("group %s: the subscription of member %s does not decode: %v", id, sm.ID, err)
		}
		assigned, err := decodeAssignment(sm.Assignment, md)
		if err != nil {
			return nil, Output{}, fmt.Errorf("group %s: the assignment of member %s does not decode: %v", id, sm.ID, err)
		}
		m := &Member{
			ID: sm.ID, InstanceID: cloneString(sm.InstanceID), RackID: cloneString(sub.Rack),
			ClientID: sm.ClientID, ClientHost: sm.ClientHost, RebalanceTimeout: sm.RebalanceTimeout,
			SubscribedTopicNames: sortedTopics(sub.Topics),
			State:                Stable, Epoch: s.Generation, PreviousEpoch: s.Generation,
			Assigned: assigned, PendingRevocation: Assignment{},
			Classic: &ClassicMetadata{SessionTimeout: sm.SessionTimeout, Protocols: cloneProtocols(sm.Protocols)},
		}
		m.sessionDeadline = now.Add(sm.SessionTimeout)
		g.members[m.ID] = m
		if m.InstanceID != nil {
			g.static[*m.InstanceID] = m.ID
		}
		g.claim(m)
		g.target[m.ID] = m.owned()
	}
	// Kafka's createConsumerGroupRecords, then the subscription
	// metadata, which Kafka computes at the next heartbeat.
	ids := g.memberIDs()
	for _, mid := range ids {
		g.writeMemberMetadata(g.members[mid])
	}
	g.writeEpoch()
	for _, mid := range ids {
		g.writeTargetMember(mid, g.target[mid])
	}
	g.writeTargetMetadata()
	for _, mid := range ids {
		g.writeCurrent(g.members[mid])
	}
	g.refreshSubscriptions(md)
	return g, g.flush(), nil
}

// ClassicSnapshot returns the group as a classic group would have it
// after Output.Downgrade (Kafka's ClassicGroup.fromConsumerGroup): its
// classic members, each with its target assignment, at the group epoch
// from before the removal that downgrades it.
func (g *Group) ClassicSnapshot(md Metadata) group.Snapshot {
	s := group.Snapshot{Generation: g.epoch, ProtocolType: ConsumerProtocolType}
	if g.downgradeEpoch > 0 {
		s.Generation = g.downgradeEpoch
	}
	for _, id := range g.memberIDs() {
		m := g.members[id]
		if m.Classic == nil {
			continue
		}
		s.Members = append(s.Members, group.SnapshotMember{
			ID: m.ID, InstanceID: cloneString(m.InstanceID), ClientID: m.ClientID, ClientHost: m.ClientHost,
			SessionTimeout: m.Classic.SessionTimeout, RebalanceTimeout: m.RebalanceTimeout,
			Protocols:  cloneProtocols(m.Classic.Protocols),
			Assignment: encodeAssignment(g.target[id], m.Classic.Protocols[0].Metadata, md),
		})
	}
	return s
}

// Tombstones returns the tombstones of every record of the group, its
// members' and its own, for a group that is converted to a classic one.
func (g *Group) Tombstones() []log.KV {
	for _, id := range g.memberIDs() {
		g.removeRecords(id)
	}
	for _, k := range GroupKeys(g.id) {
		g.emit(k, nil)
	}
	kvs := g.out.Records
	g.out.Records = nil
	return kvs
}

// allClassic reports whether every member uses the classic protocol.
func (g *Group) allClassic() bool {
	for _, m := range g.members {
		if m.Classic == nil {
			return false
		}
	}
	return true
}

// memberIDs returns the member ids, sorted.
func (g *Group) memberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// ---------------------------------------------------------------------------
// JoinGroup, SyncGroup, Heartbeat, LeaveGroup

// supportsClassic reports whether a classic member of protocolType with
// protocols may join (Kafka's supportsClassicProtocols): the "consumer"
// type, with a protocol every classic member supports (any, when there
// is none).
func (g *Group) supportsClassic(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != ConsumerProtocolType || len(protocols) == 0 {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if m.Classic != nil && !m.Classic.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// JoinClassic handles a JoinGroup to the group (Kafka's
// classicGroupJoinToConsumerGroup): the member joins or rejoins as a
// classic member with the subscription of its first protocol; the group
// epoch moves on if its subscription changed, a new target assignment
// is computed, and the member is reconciled from the partitions the
// subscription says it owns. It is answered at once, once Output.Records
// are written: generation = the member epoch, protocol = the member's
// first, and no leader (the coordinator assigns). The member must then
// send SyncGroup within its rebalance timeout.
//
// Errors: GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL (another
// protocol type, no protocol the classic members share, or a
// subscription that does not decode), MEMBER_ID_REQUIRED (v4+, no member
// id, not static: the response carries the id to join with).
func (g *Group) JoinClassic(now time.Time, req *kmsg.JoinGroupRequest, clientID, clientHost string, md Metadata) (*kmsg.JoinGroupResponse, Output) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16, memberID string) (*kmsg.JoinGroupResponse, Output) {
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, memberID
		return resp, g.flush()
	}
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = newMemberID()
	}
	known := g.members[memberID] != nil || (req.InstanceID != nil && g.static[*req.InstanceID] != "")
	if !known && len(g.members) >= g.cfg.MaxSize {
		return fail(kerr.GroupMaxSizeReached.Code, req.MemberID)
	}
	if !g.supportsClassic(req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}
	if unknown && req.InstanceID == nil && req.Version >= 4 {
		return fail(kerr.MemberIDRequired.Code, memberID)
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}

	m, isNew := g.members[memberID], false
	if req.InstanceID != nil {
		switch old := g.members[g.static[*req.InstanceID]]; {
		case old == nil:
			m = nil
		case old.ID == memberID:
			m = old
		default:
			m = g.replaceStatic(old, memberID)
		}
	}
	if m == nil {
		m = &Member{ID: memberID, Assigned: Assignment{}, PendingRevocation: Assignment{}}
		g.members[m.ID] = m
		if req.InstanceID != nil {
			g.static[*req.InstanceID] = m.ID
		}
		isNew = true
	}
	before := *m

	// 1. The member and its subscription.
	changed := isNew
	m.InstanceID = cloneString(req.InstanceID)
	if sub.Rack != nil {
		m.RackID = cloneString(sub.Rack)
	}
	m.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		m.RebalanceTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	}
	if m.ServerAssignor != "" || m.SubscribedTopicRegex != "" {
		m.ServerAssignor, m.SubscribedTopicRegex, m.regex = "", "", nil
		changed = true
	}
	if names := sortedTopics(sub.Topics); !slices.Equal(names, m.SubscribedTopicNames) {
		m.SubscribedTopicNames = names
		changed = true
	}
	m.ClientID, m.ClientHost = clientID, clientHost
	m.Classic = &ClassicMetadata{
		SessionTimeout: time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		Protocols:      cloneProtocols(req.Protocols),
	}
	if isNew || !sameMetadata(&before, m) {
		g.writeMemberMetadata(m)
	}
	bump := g.epoch == 0 || changed
	if g.refreshSubscriptions(md) {
		bump = true
	}
	if bump {
		g.epoch++
		g.writeEpoch()
	}

	// 2. The target assignment, when the group epoch passed it.
	if g.epoch > g.assignmentEpoch {
		g.assign()
	}

	// 3. The member's reconciliation from what it says it owns.
	owned := Assignment{}
	for _, t := range sub.OwnedPartitions {
		if id, _, ok := md.Topic(t.Topic); ok {
			for _, p := range t.Partitions {
				owned.add(id, p)
			}
		}
	}
	g.reconcile(now, m, owned)
	m.sessionDeadline = now.Add(m.Classic.SessionTimeout)
	m.joinDeadline = time.Time{}
	m.syncDeadline = now.Add(m.RebalanceTimeout)

	resp.MemberID = m.ID
	resp.Generation = m.Epoch
	resp.ProtocolType = kmsg.StringPtr(ConsumerProtocolType)
	resp.Protocol = kmsg.StringPtr(m.Classic.Protocols[0].Name)
	return resp, g.flush()
}

// classicMember finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup is from: UNKNOWN_MEMBER_ID if there is none (or it uses the
// consumer protocol), FENCED_INSTANCE_ID if its instance id is another
// member's.
func (g *Group) classicMember(memberID string, instanceID *string) (*Member, int16) {
	var m *Member
	if instanceID == nil {
		m = g.members[memberID]
	} else if m = g.members[g.static[*instanceID]]; m != nil && memberID != "" && m.ID != memberID {
		return nil, kerr.FencedInstanceID.Code
	}
	if m == nil || m.Classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// rejoinNeeded reports whether a classic member must join again (Kafka's
// classicGroupHeartbeatToConsumerGroup): the group epoch passed its
// epoch, it has partitions to revoke, or partitions it waits for are
// free now.
func (g *Group) rejoinNeeded(m *Member) bool {
	return m.Epoch < g.epoch || m.State == UnrevokedPartitions ||
		(m.State == UnreleasedPartitions && !g.waitsOnOthers(m))
}

// waitsOnOthers reports whether a partition of m's target that m does
// not have is owned by another member.
func (g *Group) waitsOnOthers(m *Member) bool {
	for t, ps := range g.target[m.ID] {
		for _, p := range ps {
			if o := g.owners[topicPartition{t, p}]; !m.Assigned.Has(t, p) && o != "" && o != m.ID {
				return true
			}
		}
	}
	return false
}

// askRejoin arms m's join timer, unless it runs already.
func (g *Group) askRejoin(now time.Time, m *Member) {
	if m.joinDeadline.IsZero() {
		m.joinDeadline = now.Add(m.RebalanceTimeout)
	}
}

// SyncClassic handles a SyncGroup from a classic member (Kafka's
// classicGroupSyncToConsumerGroup): it answers the member's current
// assignment, in the ConsumerProtocolAssignment version of its
// subscription. Errors: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
// ILLEGAL_GENERATION (not the member epoch), INCONSISTENT_GROUP_PROTOCOL
// (another protocol type or name than its join's),
// REBALANCE_IN_PROGRESS (the group moved on since it joined: it must
// join again).
func (g *Group) SyncClassic(now time.Time, req *kmsg.SyncGroupRequest, md Metadata) (*kmsg.SyncGroupResponse, Output) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) (*kmsg.SyncGroupResponse, Output) {
		resp.ErrorCode = code
		return resp, g.flush()
	}
	m, code := g.classicMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
		return fail(code)
	case req.Generation != m.Epoch:
		return fail(kerr.IllegalGeneration.Code)
	case req.ProtocolType != nil && *req.ProtocolType != ConsumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.Classic.Protocols[0].Name:
		return fail(kerr.InconsistentGroupProtocol.Code)
	case g.epoch > m.Epoch && m.State != UnrevokedPartitions:
		g.askRejoin(now, m)
		return fail(kerr.RebalanceInProgress.Code)
	}
	m.syncDeadline = time.Time{}
	m.sessionDeadline = now.Add(m.Classic.SessionTimeout)
	resp.ProtocolType = req.ProtocolType
	resp.Protocol = req.Protocol
	resp.MemberAssignment = encodeAssignment(m.Assigned, m.Classic.Protocols[0].Metadata, md)
	return resp, g.flush()
}

// HeartbeatClassic handles a Heartbeat from a classic member: it renews
// its session and answers REBALANCE_IN_PROGRESS when the member must
// join again (then within its rebalance timeout). Errors:
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION.
func (g *Group) HeartbeatClassic(now time.Time, req *kmsg.HeartbeatRequest) (int16, Output) {
	m, code := g.classicMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
		return code, g.flush()
	case req.Generation != m.Epoch:
		return kerr.IllegalGeneration.Code, g.flush()
	}
	m.sessionDeadline = now.Add(m.Classic.SessionTimeout)
	if g.rejoinNeeded(m) {
		g.askRejoin(now, m)
		return kerr.RebalanceInProgress.Code, g.flush()
	}
	return 0, g.flush()
}

// LeaveClassic handles a LeaveGroup to the group (Kafka's
// classicGroupLeaveToConsumerGroup): each classic member named leaves
// (by instance id too, member id "" being an administrative removal),
// and the group epoch moves on. v0–v2 name one member and answer its
// error at the top level.
func (g *Group) LeaveClassic(now time.Time, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, Output) {
	r := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if req.Version <= 2 {
		_, r.ErrorCode = g.leaveClassic(req.MemberID, nil)
		return r, g.flush()
	}
	for _, lm := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.InstanceID = lm.InstanceID
		rm.MemberID, rm.ErrorCode = g.leaveClassic(lm.MemberID, lm.InstanceID)
		r.Members = append(r.Members, rm)
	}
	return r, g.flush()
}

// leaveClassic removes one classic member and returns its id and code.
func (g *Group) leaveClassic(memberID string, instanceID *string) (string, int16) {
	m, code := g.classicMember(memberID, instanceID)
	if code != 0 {
		return memberID, code
	}
	g.remove(m)
	return m.ID, 0
}

// ---------------------------------------------------------------------------
// The embedded consumer protocol

// protocolMetadata returns the metadata of protocol among protocols, or
// of the first when protocol is "" or not among them (every protocol of
// a consumer carries the same subscription).
func protocolMetadata(protocols []kmsg.JoinGroupRequestProtocol, protocol string) []byte {
	for _, p := range protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	if len(protocols) == 0 {
		return nil
	}
	return protocols[0].Metadata
}

// decodeAssignment reads a ConsumerProtocolAssignment into topic ids;
// topics md does not know are left out, an empty one is no partitions.
func decodeAssignment(b []byte, md Metadata) (Assignment, error) {
	a := Assignment{}
	if len(b) == 0 {
		return a, nil
	}
	var ca kmsg.ConsumerMemberAssignment
	if err := ca.ReadFrom(b); err != nil {
		return nil, err
	}
	for _, t := range ca.Topics {
		if id, _, ok := md.Topic(t.Topic); ok {
			for _, p := range t.Partitions {
				a.add(id, p)
			}
		}
	}
	return a, nil
}

// encodeAssignment writes a as a ConsumerProtocolAssignment of the
// version of the subscription sub (at most 3, Kafka's latest), topics by
// name; a topic md no longer knows is left out.
func encodeAssignment(a Assignment, sub []byte, md Metadata) []byte {
	ca := kmsg.NewConsumerMemberAssignment()
	if len(sub) >= 2 {
		ca.Version = min(max(int16(sub[0])<<8|int16(sub[1]), 0), 3)
	}
	for _, t := range a.topics() {
		name := md.TopicName(t)
		if name == "" {
			continue
		}
		ca.Topics = append(ca.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Clone(a[t])})
	}
	return ca.AppendTo(nil)
}

// sortedTopics returns names sorted without duplicates, never nil.
func sortedTopics(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func cloneProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, 0, len(ps))
	for _, p := range ps {
		out = append(out, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	return out
}
