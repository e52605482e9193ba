package consumer

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/replication/log"
)

// The record types (key versions) of consumer groups in
// __consumer_offsets, Kafka's (group-coordinator's
// ConsumerGroup*Key.json). Every value is version 0 in Kafka's flexible
// encoding; every key is the type then the group id (and member id).
const (
	// KeyGroupMetadata is ConsumerGroupMetadataKey: the group epoch.
	KeyGroupMetadata int16 = 3
	// KeyPartitionMetadata is ConsumerGroupPartitionMetadataKey: the
	// subscribed topics' ids and partition counts.
	KeyPartitionMetadata int16 = 4
	// KeyMemberMetadata is ConsumerGroupMemberMetadataKey: a member and
	// its subscription.
	KeyMemberMetadata int16 = 5
	// KeyTargetAssignmentMetadata is
	// ConsumerGroupTargetAssignmentMetadataKey: the assignment epoch.
	KeyTargetAssignmentMetadata int16 = 6
	// KeyTargetAssignmentMember is ConsumerGroupTargetAssignmentMemberKey:
	// a member's target assignment.
	KeyTargetAssignmentMember int16 = 7
	// KeyCurrentMemberAssignment is
	// ConsumerGroupCurrentMemberAssignmentKey: a member's epochs, state,
	// assigned partitions and partitions pending revocation.
	KeyCurrentMemberAssignment int16 = 8
)

// IsConsumerGroupKey reports whether a __consumer_offsets key is one of a
// consumer group's records (key versions 3 to 8).
func IsConsumerGroupKey(key []byte) bool {
	if len(key) < 2 {
		return false
	}
	v := int16(binary.BigEndian.Uint16(key))
	return v >= KeyGroupMetadata && v <= KeyCurrentMemberAssignment
}

// ErrRecord is a consumer group record that cannot be read.
var ErrRecord = errors.New("malformed consumer group record")

// groupKey encodes a key of type typ for group (and member, if not "").
func groupKey(typ int16, group, member string, withMember bool) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, group)
	if withMember {
		b = kbin.AppendString(b, member)
	}
	return b
}

// GroupKeys returns the keys of a group's own records (types 3, 4 and
// 6), whose tombstones remove a group without members.
func GroupKeys(group string) [][]byte {
	return [][]byte{
		groupKey(KeyPartitionMetadata, group, "", false),
		groupKey(KeyTargetAssignmentMetadata, group, "", false),
		groupKey(KeyGroupMetadata, group, "", false),
	}
}

// value starts a version 0 value.
func value() []byte { return kbin.AppendInt16(nil, 0) }

// endTags ends a flexible struct with no tagged fields.
func endTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

func (g *Group) emit(key, val []byte) {
	g.out.Records = append(g.out.Records, log.KV{Key: key, Value: val})
}

// writeEpoch stores the group epoch (ConsumerGroupMetadataValue).
func (g *Group) writeEpoch() {
	v := kbin.AppendInt32(value(), g.epoch)
	g.emit(groupKey(KeyGroupMetadata, g.id, "", false), endTags(v))
}

// writePartitionMetadata stores the subscription metadata
// (ConsumerGroupPartitionMetadataValue, without partition racks).
func (g *Group) writePartitionMetadata() {
	names := make([]string, 0, len(g.subscribed))
	for n := range g.subscribed {
		names = append(names, n)
	}
	sort.Strings(names)
	v := kbin.AppendCompactArrayLen(value(), len(names))
	for _, n := range names {
		tm := g.subscribed[n]
		v = kbin.AppendUuid(v, tm.id)
		v = kbin.AppendCompactString(v, n)
		v = kbin.AppendInt32(v, tm.partitions)
		v = kbin.AppendCompactArrayLen(v, 0) // PartitionMetadata (racks)
		v = endTags(v)
	}
	g.emit(groupKey(KeyPartitionMetadata, g.id, "", false), endTags(v))
}

// writeMemberMetadata stores m (ConsumerGroupMemberMetadataValue); a
// classic member's ClassicMemberMetadata is its tagged field 0.
func (g *Group) writeMemberMetadata(m *Member) {
	v := kbin.AppendCompactNullableString(value(), m.InstanceID)
	v = kbin.AppendCompactNullableString(v, m.RackID)
	v = kbin.AppendCompactString(v, m.ClientID)
	v = kbin.AppendCompactString(v, m.ClientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.SubscribedTopicNames))
	for _, n := range m.SubscribedTopicNames {
		v = kbin.AppendCompactString(v, n)
	}
	v = kbin.AppendCompactNullableString(v, nonEmpty(m.SubscribedTopicRegex))
	v = kbin.AppendInt32(v, int32(m.RebalanceTimeout.Milliseconds()))
	v = kbin.AppendCompactNullableString(v, nonEmpty(m.ServerAssignor))
	if m.Classic == nil {
		v = endTags(v)
	} else {
		c := appendClassicMetadata(nil, m.Classic)
		v = kbin.AppendUvarint(v, 1) // one tagged field
		v = kbin.AppendUvarint(v, 0) // tag 0: ClassicMemberMetadata
		v = kbin.AppendUvarint(v, uint32(1+len(c)))
		v = kbin.AppendUvarint(v, 1) // a nullable struct that is not null
		v = append(v, c...)
	}
	g.emit(groupKey(KeyMemberMetadata, g.id, m.ID, true), v)
}

// appendClassicMetadata appends c as Kafka's ClassicMemberMetadata
// (SessionTimeoutMs, SupportedProtocols of Name and Metadata).
func appendClassicMetadata(b []byte, c *ClassicMetadata) []byte {
	b = kbin.AppendInt32(b, int32(c.SessionTimeout.Milliseconds()))
	b = kbin.AppendCompactArrayLen(b, len(c.Protocols))
	for _, p := range c.Protocols {
		b = kbin.AppendCompactString(b, p.Name)
		b = kbin.AppendCompactBytes(b, p.Metadata)
		b = endTags(b)
	}
	return endTags(b)
}

// readClassicMetadata reads the value of tag 0 of a member's metadata:
// nil for a null struct, or a ClassicMetadata, or false if it does not
// decode.
func readClassicMetadata(b []byte) (*ClassicMetadata, bool) {
	r := kbin.Reader{Src: b}
	if r.Int8() < 0 {
		return nil, r.Ok()
	}
	c := &ClassicMetadata{SessionTimeout: time.Duration(r.Int32()) * time.Millisecond}
	for range max(r.CompactArrayLen(), 0) {
		p := kmsg.JoinGroupRequestProtocol{Name: r.CompactString(), Metadata: bytes.Clone(r.CompactBytes())}
		skipTags(&r)
		c.Protocols = append(c.Protocols, p)
	}
	skipTags(&r)
	return c, r.Ok() && len(c.Protocols) > 0
}

// writeTargetMember stores a member's target assignment
// (ConsumerGroupTargetAssignmentMemberValue).
func (g *Group) writeTargetMember(id string, a Assignment) {
	v := appendTopicPartitions(value(), a)
	g.emit(groupKey(KeyTargetAssignmentMember, g.id, id, true), endTags(v))
}

// writeTargetMetadata stores the assignment epoch
// (ConsumerGroupTargetAssignmentMetadataValue).
func (g *Group) writeTargetMetadata() {
	v := kbin.AppendInt32(value(), g.assignmentEpoch)
	g.emit(groupKey(KeyTargetAssignmentMetadata, g.id, "", false), endTags(v))
}

// writeCurrent stores m's epochs, state and partitions
// (ConsumerGroupCurrentMemberAssignmentValue).
func (g *Group) writeCurrent(m *Member) {
	v := kbin.AppendInt32(value(), m.Epoch)
	v = kbin.AppendInt32(v, m.PreviousEpoch)
	v = kbin.AppendInt8(v, int8(m.State))
	v = appendTopicPartitions(v, m.Assigned)
	v = appendTopicPartitions(v, m.PendingRevocation)
	g.emit(groupKey(KeyCurrentMemberAssignment, g.id, m.ID, true), endTags(v))
}

// removeRecords writes the tombstones of a member's records, in Kafka's
// order: current assignment, target assignment, metadata.
func (g *Group) removeRecords(id string) {
	g.emit(groupKey(KeyCurrentMemberAssignment, g.id, id, true), nil)
	g.emit(groupKey(KeyTargetAssignmentMember, g.id, id, true), nil)
	g.emit(groupKey(KeyMemberMetadata, g.id, id, true), nil)
}

func appendTopicPartitions(b []byte, a Assignment) []byte {
	topics := a.topics()
	b = kbin.AppendCompactArrayLen(b, len(topics))
	for _, t := range topics {
		b = kbin.AppendUuid(b, t)
		b = kbin.AppendCompactArrayLen(b, len(a[t]))
		for _, p := range a[t] {
			b = kbin.AppendInt32(b, p)
		}
		b = endTags(b)
	}
	return b
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// newMemberID makes a member id for a v0 join that came without one, as
// Kafka does (a random UUID, base64url).
func newMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// ---------------------------------------------------------------------------
// Loading

// Loader rebuilds consumer groups from the records a coordinator reads
// back from a __consumer_offsets partition, oldest first.
type Loader struct {
	groups map[string]*loading
}

// loading is one group being read back.
type loading struct {
	exists          bool
	epoch           int32
	assignmentEpoch int32
	subscribed      map[string]topicMeta
	members         map[string]*Member
	targets         map[string]Assignment
	current         map[string]*Member
}

// NewLoader returns an empty Loader.
func NewLoader() *Loader { return &Loader{groups: map[string]*loading{}} }

// Apply reads one record (a nil value is a tombstone) whose key
// IsConsumerGroupKey. A value of another version than 0 is an error
// wrapping ErrRecord naming it, as is a value that does not decode.
func (l *Loader) Apply(key, val []byte) error {
	r := kbin.Reader{Src: key}
	typ := r.Int16()
	group := r.String()
	member := ""
	if typ == KeyMemberMetadata || typ == KeyTargetAssignmentMember || typ == KeyCurrentMemberAssignment {
		member = r.String()
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: key of type %d: %v", ErrRecord, typ, err)
	}
	lg := l.groups[group]
	if lg == nil {
		lg = &loading{subscribed: map[string]topicMeta{}, members: map[string]*Member{}, targets: map[string]Assignment{}, current: map[string]*Member{}}
		l.groups[group] = lg
	}
	if val == nil {
		switch typ {
		case KeyGroupMetadata:
			delete(l.groups, group)
		case KeyPartitionMetadata:
			lg.subscribed = map[string]topicMeta{}
		case KeyMemberMetadata:
			delete(lg.members, member)
		case KeyTargetAssignmentMember:
			delete(lg.targets, member)
		case KeyCurrentMemberAssignment:
			delete(lg.current, member)
		}
		return nil
	}
	v := kbin.Reader{Src: val}
	if version := v.Int16(); version != 0 {
		return fmt.Errorf("%w: group %q: value of type %d has version %d", ErrRecord, group, typ, version)
	}
	switch typ {
	case KeyGroupMetadata:
		lg.exists = true
		lg.epoch = v.Int32()
	case KeyPartitionMetadata:
		lg.subscribed = map[string]topicMeta{}
		for range max(v.CompactArrayLen(), 0) {
			id := v.Uuid()
			name := v.CompactString()
			parts := v.Int32()
			for range max(v.CompactArrayLen(), 0) {
				v.Int32()
				for range max(v.CompactArrayLen(), 0) {
					v.CompactString()
				}
				skipTags(&v)
			}
			skipTags(&v)
			lg.subscribed[name] = topicMeta{id, parts}
		}
	case KeyMemberMetadata:
		m := &Member{ID: member}
		m.InstanceID = v.CompactNullableString()
		m.RackID = v.CompactNullableString()
		m.ClientID = v.CompactString()
		m.ClientHost = v.CompactString()
		for range max(v.CompactArrayLen(), 0) {
			m.SubscribedTopicNames = append(m.SubscribedTopicNames, v.CompactString())
		}
		if re := v.CompactNullableString(); re != nil {
			m.SubscribedTopicRegex = *re
			m.regex = subscriptionRegex(*re)
		}
		m.RebalanceTimeout = time.Duration(v.Int32()) * time.Millisecond
		if a := v.CompactNullableString(); a != nil {
			m.ServerAssignor = *a
		}
		for range v.Uvarint() {
			tag, data := v.Uvarint(), v.Span(int(v.Uvarint()))
			if tag != 0 {
				continue
			}
			c, ok := readClassicMetadata(data)
			if !ok {
				return fmt.Errorf("%w: group %q: member %q: ClassicMemberMetadata does not decode", ErrRecord, group, member)
			}
			m.Classic = c
		}
		if !v.Ok() {
			return fmt.Errorf("%w: group %q: value of type %d is truncated", ErrRecord, group, typ)
		}
		lg.members[member] = m
		return nil
	case KeyTargetAssignmentMetadata:
		lg.assignmentEpoch = v.Int32()
	case KeyTargetAssignmentMember:
		lg.targets[member] = readTopicPartitions(&v)
	case KeyCurrentMemberAssignment:
		m := &Member{}
		m.Epoch = v.Int32()
		m.PreviousEpoch = v.Int32()
		m.State = MemberState(v.Int8())
		m.Assigned = readTopicPartitions(&v)
		m.PendingRevocation = readTopicPartitions(&v)
		lg.current[member] = m
	}
	skipTags(&v)
	if !v.Ok() {
		return fmt.Errorf("%w: group %q: value of type %d is truncated", ErrRecord, group, typ)
	}
	return nil
}

func readTopicPartitions(v *kbin.Reader) Assignment {
	a := Assignment{}
	for range max(v.CompactArrayLen(), 0) {
		t := v.Uuid()
		for range max(v.CompactArrayLen(), 0) {
			a.add(t, v.Int32())
		}
		skipTags(v)
	}
	return a
}

// skipTags skips a flexible struct's tagged fields.
func skipTags(v *kbin.Reader) {
	for range v.Uvarint() {
		v.Uvarint()
		v.Span(int(v.Uvarint()))
	}
}

// Groups returns the groups read, each member's session starting at now.
func (l *Loader) Groups(cfg Config, now time.Time) []*Group {
	ids := make([]string, 0, len(l.groups))
	for id, lg := range l.groups {
		if lg.exists {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []*Group
	for _, id := range ids {
		lg := l.groups[id]
		g := New(id, cfg)
		g.epoch, g.assignmentEpoch, g.subscribed = lg.epoch, lg.assignmentEpoch, lg.subscribed
		memberIDs := make([]string, 0, len(lg.members))
		for mid := range lg.members {
			memberIDs = append(memberIDs, mid)
		}
		sort.Strings(memberIDs)
		for _, mid := range memberIDs {
			m := lg.members[mid]
			m.Assigned, m.PendingRevocation = Assignment{}, Assignment{}
			if c := lg.current[mid]; c != nil {
				m.Epoch, m.PreviousEpoch, m.State = c.Epoch, c.PreviousEpoch, c.State
				m.Assigned, m.PendingRevocation = c.Assigned, c.PendingRevocation
			}
			m.sessionDeadline = now.Add(g.sessionTimeout(m))
			if m.State == UnrevokedPartitions {
				m.revocationDeadline = now.Add(m.RebalanceTimeout)
			}
			g.members[mid] = m
			if m.InstanceID != nil {
				g.static[*m.InstanceID] = mid
			}
			g.claim(m)
			if t, ok := lg.targets[mid]; ok {
				g.target[mid] = t
			}
		}
		out = append(out, g)
	}
	return out
}

// Deadline returns when Tick must first be called on a loaded group.
func (g *Group) Deadline() time.Time { return g.deadline() }
