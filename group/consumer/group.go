package consumer

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/replication/log"
)

// Member epochs with a meaning of their own (KIP-848).
const (
	// JoinEpoch is the epoch a member joins (or rejoins) with.
	JoinEpoch int32 = 0
	// LeaveEpoch is the epoch a member leaves with.
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch is the epoch a static member leaves with, meaning
	// it will be back: it keeps its assignment for the session timeout.
	StaticLeaveEpoch int32 = -2
)

// ---------------------------------------------------------------------------
// Configuration

// Config holds the coordinator's consumer group properties, under Kafka's
// names. The broker's configuration checks the min and max bounds Kafka
// has for them; Validate checks what this package needs.
type Config struct {
	// SessionTimeout is how long a member may go without a heartbeat
	// before it is removed (group.consumer.session.timeout.ms, default
	// 45 s).
	SessionTimeout time.Duration
	// HeartbeatInterval is how often members are told to heartbeat
	// (group.consumer.heartbeat.interval.ms, default 5 s); below
	// SessionTimeout.
	HeartbeatInterval time.Duration
	// Assignors are the server-side assignors members may pick
	// (group.consumer.assignors, default uniform, range); the first is
	// the one used when no member picks one. Each is a key of Assignors.
	Assignors []string
	// MaxSize is the most members a group may have
	// (group.consumer.max.size, default MaxInt32).
	MaxSize int
	// MigrationPolicy says which of KIP-848's online conversions
	// between classic and consumer groups the coordinator makes
	// (group.consumer.migration.policy, default bidirectional).
	MigrationPolicy MigrationPolicy
}

// MigrationPolicy is a value of group.consumer.migration.policy (Kafka's
// ConsumerGroupMigrationPolicy).
type MigrationPolicy string

const (
	// MigrationDisabled: a group keeps the protocol it was created with
	// while it has members.
	MigrationDisabled MigrationPolicy = "disabled"
	// MigrationUpgrade: a classic group becomes a consumer group when a
	// member of the consumer protocol joins it (FromClassic).
	MigrationUpgrade MigrationPolicy = "upgrade"
	// MigrationDowngrade: a consumer group left with classic members
	// only becomes a classic group (Output.Downgrade).
	MigrationDowngrade MigrationPolicy = "downgrade"
	// MigrationBidirectional: both.
	MigrationBidirectional MigrationPolicy = "bidirectional"
)

// MigrationPolicies are the values of group.consumer.migration.policy.
var MigrationPolicies = []MigrationPolicy{MigrationDisabled, MigrationUpgrade, MigrationDowngrade, MigrationBidirectional}

// Upgrades reports whether classic groups are converted to consumer
// groups.
func (p MigrationPolicy) Upgrades() bool { return p == MigrationUpgrade || p == MigrationBidirectional }

// Downgrades reports whether consumer groups are converted back to
// classic groups.
func (p MigrationPolicy) Downgrades() bool {
	return p == MigrationDowngrade || p == MigrationBidirectional
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SessionTimeout:    45 * time.Second,
		HeartbeatInterval: 5 * time.Second,
		Assignors:         []string{UniformAssignor, RangeAssignor},
		MaxSize:           math.MaxInt32,
		MigrationPolicy:   MigrationBidirectional,
	}
}

// Validate checks the configuration and names the bad key.
func (c Config) Validate() error {
	switch {
	case c.SessionTimeout < time.Millisecond:
		return fmt.Errorf("group.consumer.session.timeout.ms %d: must be at least 1", c.SessionTimeout.Milliseconds())
	case c.HeartbeatInterval < time.Millisecond || c.HeartbeatInterval >= c.SessionTimeout:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %d: must be at least 1 and below group.consumer.session.timeout.ms (%d)",
			c.HeartbeatInterval.Milliseconds(), c.SessionTimeout.Milliseconds())
	case len(c.Assignors) == 0:
		return fmt.Errorf("group.consumer.assignors: must name at least one of %s, %s", UniformAssignor, RangeAssignor)
	case c.MaxSize < 1 || c.MaxSize > math.MaxInt32:
		return fmt.Errorf("group.consumer.max.size %d: must be between 1 and %d", c.MaxSize, math.MaxInt32)
	}
	if !slices.Contains(MigrationPolicies, c.MigrationPolicy) {
		return fmt.Errorf("group.consumer.migration.policy %q: must be one of %s, %s, %s, %s",
			c.MigrationPolicy, MigrationDisabled, MigrationUpgrade, MigrationDowngrade, MigrationBidirectional)
	}
	for _, a := range c.Assignors {
		if Assignors[a] == nil {
			return fmt.Errorf("group.consumer.assignors %q: unknown assignor; tripod has %s and %s", a, UniformAssignor, RangeAssignor)
		}
	}
	return nil
}

// Metadata is what a group needs to know of the cluster's topics: the
// broker answers from its metadata image as of the call.
type Metadata interface {
	// Topic returns the id and partition count of the topic named name,
	// and false if there is none.
	Topic(name string) (TopicID, int32, bool)
	// TopicNames returns the name of every topic (regex subscriptions
	// are matched against them).
	TopicNames() []string
	// TopicName returns the name of the topic id, "" if none.
	TopicName(id TopicID) string
}

// Output is what an event decided besides its response.
type Output struct {
	// Records are the __consumer_offsets records to write, in order,
	// before the response is sent (Kafka's consumer group records).
	Records []log.KV
	// Deadline is when Tick must next be called; zero if never.
	Deadline time.Time
	// Downgrade says that the group's last member of the consumer
	// protocol was removed, its members left all use the classic
	// protocol and the migration policy downgrades: the caller may
	// replace the group with the classic group of ClassicSnapshot,
	// writing Tombstones (Kafka's convertToClassicGroup), or keep it.
	Downgrade bool
}

// ---------------------------------------------------------------------------
// Members

// MemberState is where a member is in its reconciliation, Kafka's
// MemberState (its byte values are the ones stored).
type MemberState int8

const (
	// Stable: the member owns its target assignment at its epoch.
	Stable MemberState = 0
	// UnrevokedPartitions: the member must revoke partitions before it
	// may move to the next epoch.
	UnrevokedPartitions MemberState = 1
	// UnreleasedPartitions: the member is at the target epoch but waits
	// for partitions that other members have not revoked yet.
	UnreleasedPartitions MemberState = 2
)

// String returns Kafka's name of the state.
func (s MemberState) String() string {
	switch s {
	case Stable:
		return "stable"
	case UnrevokedPartitions:
		return "unrevoked_partitions"
	case UnreleasedPartitions:
		return "unreleased_partitions"
	}
	return "unknown"
}

// Member is one member of a consumer group (Kafka's ConsumerGroupMember).
type Member struct {
	ID         string
	InstanceID *string
	RackID     *string
	ClientID   string
	ClientHost string
	// RebalanceTimeout bounds how long the member may take to revoke
	// partitions.
	RebalanceTimeout time.Duration
	// SubscribedTopicNames and SubscribedTopicRegex are the member's
	// subscription: the topics named and those the regex matches, as in
	// Kafka ("" regex: none).
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	// ServerAssignor is the assignor the member asked for, "" if none.
	ServerAssignor string

	State         MemberState
	Epoch         int32
	PreviousEpoch int32
	// Assigned are the partitions the member owns; PendingRevocation
	// those it must give up before its epoch advances (it still owns
	// them until it says it has revoked them).
	Assigned          Assignment
	PendingRevocation Assignment

	// Classic is the classic protocol's metadata of a member that joined
	// with JoinGroup (a classic member of the group, KIP-848's online
	// migration), nil for a member of the consumer protocol.
	Classic *ClassicMetadata

	// regex is SubscribedTopicRegex compiled, anchored at both ends.
	regex *regexp.Regexp
	// sessionDeadline is when the member is removed unless it
	// heartbeats; revocationDeadline, when not zero, when it is removed
	// unless it has revoked PendingRevocation.
	sessionDeadline    time.Time
	revocationDeadline time.Time
	// joinDeadline, when not zero, is when a classic member that was
	// told to join again is removed unless it has; syncDeadline, when
	// not zero, when one that joined is removed unless it has sent
	// SyncGroup (Kafka's consumer group join and sync timeouts).
	joinDeadline time.Time
	syncDeadline time.Time
}

// sessionTimeout returns how long m may go without a heartbeat: the
// group's session timeout, or a classic member's own.
func (g *Group) sessionTimeout(m *Member) time.Duration {
	if m.Classic != nil {
		return m.Classic.SessionTimeout
	}
	return g.cfg.SessionTimeout
}

// owned returns every partition the member owns: assigned and pending
// revocation.
func (m *Member) owned() Assignment {
	out := m.Assigned.clone()
	for t, ps := range m.PendingRevocation {
		for _, p := range ps {
			out.add(t, p)
		}
	}
	return out
}

// CompileRegex compiles a SubscribedTopicRegex as Kafka matches it: against
// the whole topic name. Go's regexp is RE2, as Kafka's RE2/J; see the
// package documentation of the broker for where they differ.
func CompileRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + re + `)$`)
}

// subscriptionRegex returns a member's SubscribedTopicRegex compiled, or
// nil for "": an empty regex subscribes to no topic, as in Kafka, and is
// what librdkafka sends beside its topic names to say it has none. re
// must have passed ValidateHeartbeat.
func subscriptionRegex(re string) *regexp.Regexp {
	if re == "" {
		return nil
	}
	compiled, _ := CompileRegex(re)
	return compiled
}

// ---------------------------------------------------------------------------
// The group

// Group is one consumer group. It is not safe for concurrent use.
type Group struct {
	id  string
	cfg Config

	// epoch is the group epoch, bumped by every change of membership or
	// subscriptions; assignmentEpoch is the epoch of the target
	// assignment.
	epoch           int32
	assignmentEpoch int32
	members         map[string]*Member
	static          map[string]string // instance id -> member id
	target          map[string]Assignment
	// subscribed is the subscription metadata: every topic some member
	// subscribes to that exists, by name.
	subscribed map[string]topicMeta
	// owners is, for every partition a member owns (assigned or pending
	// revocation), that member: never two.
	owners map[topicPartition]string
	// downgradeEpoch is the group epoch before the removal that set
	// Output.Downgrade: the classic group's generation, as Kafka's
	// downgrade does not move the epoch on for the member leaving, so
	// that classic members at that epoch keep committing.
	downgradeEpoch int32

	out Output
}

// topicMeta is a subscribed topic's id and partition count.
type topicMeta struct {
	id         TopicID
	partitions int32
}

// New returns an empty group of epoch 0.
func New(id string, cfg Config) *Group {
	return &Group{
		id: id, cfg: cfg,
		members:    map[string]*Member{},
		static:     map[string]string{},
		target:     map[string]Assignment{},
		subscribed: map[string]topicMeta{},
		owners:     map[topicPartition]string{},
	}
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// Epoch returns the group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// AssignmentEpoch returns the epoch of the target assignment.
func (g *Group) AssignmentEpoch() int32 { return g.assignmentEpoch }

// NumMembers returns the number of members.
func (g *Group) NumMembers() int { return len(g.members) }

// Member returns the member with id, nil if none. The caller must not
// modify it.
func (g *Group) Member(id string) *Member { return g.members[id] }

// Target returns a member's target assignment. The caller must not
// modify it.
func (g *Group) Target(id string) Assignment { return g.target[id] }

// State returns the group's state under Kafka's names: Empty without
// members, Assigning while the group epoch is ahead of the target
// assignment's, Reconciling while a member has not reached its target,
// else Stable.
func (g *Group) State() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.Epoch != g.assignmentEpoch || m.State != Stable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// SubscribedTo reports whether a member subscribes to topic: by name
// (whether or not the topic exists) or through its regex, as Kafka's
// ConsumerGroup.isSubscribedToTopic, which keeps OffsetDelete from
// deleting the offsets of a topic the group consumes.
func (g *Group) SubscribedTo(topic string) bool {
	for _, m := range g.members {
		if slices.Contains(m.SubscribedTopicNames, topic) || m.regex != nil && m.regex.MatchString(topic) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// ConsumerGroupHeartbeat

// ValidateHeartbeat checks a ConsumerGroupHeartbeat before any group is
// looked at, as Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid:
// it returns INVALID_REQUEST, UNSUPPORTED_ASSIGNOR or
// INVALID_REGULAR_EXPRESSION with a message, or 0.
func ValidateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, cfg Config) (int16, string) {
	invalid := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return invalid("MemberId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e == JoinEpoch:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case len(req.Topics) > 0 || req.Topics == nil:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case e > 0 || e == LeaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	case e == StaticLeaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	default:
		return invalid(fmt.Sprintf("MemberEpoch %d is invalid.", e))
	}
	if a := req.ServerAssignor; a != nil && !slices.Contains(cfg.Assignors, *a) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *a, cfg.Assignors)
	}
	if re := req.SubscribedTopicRegex; re != nil {
		if _, err := CompileRegex(*re); err != nil {
			return kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex %q is not a valid regular expression: %v.", *re, err)
		}
	}
	return 0, ""
}

// Heartbeat handles a ConsumerGroupHeartbeat that ValidateHeartbeat
// passed: a join (epoch 0), a heartbeat, or a leave (epoch -1, or -2 for
// a static member that will be back). clientID and clientHost are the
// connection's.
//
// A member that joins with epoch 0 under a member id the group knows
// rejoins: it has abandoned its partitions (a join owns none) and is
// reconciled again from its target. Kafka fences such a join unless the
// member is still at epoch 0; tripod takes it, as the Java client and
// franz-go rejoin that way after FENCED_MEMBER_EPOCH and would otherwise
// wait for their old session to expire.
func (g *Group) Heartbeat(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, md Metadata) (*kmsg.ConsumerGroupHeartbeatResponse, Output) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(g.cfg.HeartbeatInterval.Milliseconds())
	fail := func(code int16, msg string) (*kmsg.ConsumerGroupHeartbeatResponse, Output) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, g.flush()
	}
	if req.MemberEpoch == LeaveEpoch || req.MemberEpoch == StaticLeaveEpoch {
		code, msg := g.leave(req)
		if code != 0 {
			return fail(code, msg)
		}
		resp.MemberID = &req.MemberID
		resp.MemberEpoch = req.MemberEpoch
		return resp, g.flush()
	}

	m, isNew, code, msg := g.memberFor(req)
	if code != 0 {
		return fail(code, msg)
	}
	var owned Assignment
	if req.Topics != nil {
		owned = Assignment{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				owned.add(t.TopicID, p)
			}
		}
	}
	if !isNew && req.MemberEpoch != JoinEpoch {
		if code, msg := checkEpoch(m, req.MemberEpoch, owned); code != 0 {
			return fail(code, msg)
		}
	}
	before := *m
	before.Assigned = m.Assigned.clone()
	if m.Classic != nil {
		// A classic member (or the static member it replaces) joins
		// with the consumer protocol now.
		m.Classic = nil
		m.joinDeadline, m.syncDeadline = time.Time{}, time.Time{}
	}

	// 1. The member and its subscription; the group epoch moves on with
	// any change to who subscribes to what.
	changed := isNew
	if req.MemberEpoch == JoinEpoch && !isNew && m.Epoch != JoinEpoch {
		// A rejoin: the member abandoned what it owned.
		g.release(m)
		m.Assigned, m.PendingRevocation = Assignment{}, Assignment{}
		m.State, m.PreviousEpoch, m.Epoch = Stable, JoinEpoch, JoinEpoch
		m.revocationDeadline = time.Time{}
		g.writeCurrent(m)
	}
	if g.updateMember(m, req, clientID, clientHost) {
		changed = true
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

	// 3. The member's reconciliation towards its target.
	g.reconcile(now, m, owned)
	m.sessionDeadline = now.Add(g.cfg.SessionTimeout)

	resp.MemberID = &m.ID
	resp.MemberEpoch = m.Epoch
	full := req.MemberEpoch == JoinEpoch ||
		(req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !m.Assigned.Equal(before.Assigned) || isNew {
		resp.Assignment = responseAssignment(m.Assigned)
	}
	return resp, g.flush()
}

// memberFor finds the member a heartbeat is from, or creates it for a
// join: (member, whether it is new, error code and message).
func (g *Group) memberFor(req *kmsg.ConsumerGroupHeartbeatRequest) (*Member, bool, int16, string) {
	join := req.MemberEpoch == JoinEpoch
	memberID := req.MemberID
	if memberID == "" {
		memberID = newMemberID()
	}
	newMember := func() (*Member, bool, int16, string) {
		if len(g.members) >= g.cfg.MaxSize {
			return nil, false, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
		}
		m := &Member{ID: memberID, RebalanceTimeout: -1, Assigned: Assignment{}, PendingRevocation: Assignment{}}
		g.members[m.ID] = m
		return m, true, 0, ""
	}
	if m := g.members[memberID]; m != nil && m.Classic != nil && !join {
		return nil, false, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s uses the classic protocol.", memberID)
	}
	if req.InstanceID == nil {
		if m := g.members[memberID]; m != nil {
			return m, false, 0, ""
		}
		if !join {
			return nil, false, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.id)
		}
		return newMember()
	}
	instance := *req.InstanceID
	old := g.members[g.static[instance]]
	switch {
	case !join && old == nil:
		return nil, false, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", instance)
	case !join && old.ID != memberID:
		return nil, false, kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", memberID, instance, old.ID)
	case !join:
		return old, false, 0, ""
	case old == nil:
		m, isNew, code, msg := newMember()
		if code == 0 {
			g.static[instance] = m.ID
		}
		return m, isNew, code, msg
	case old.ID == memberID:
		return old, false, 0, ""
	case old.Epoch != StaticLeaveEpoch && old.Classic == nil:
		return nil, false, kerr.UnreleasedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, instance, old.ID)
	}
	return g.replaceStatic(old, memberID), false, 0, ""
}

// replaceStatic gives a static member back under a new member id the
// old one's place: the new member takes over the old one's assignment
// at epoch 0 (Kafka's replaceMember).
func (g *Group) replaceStatic(old *Member, memberID string) *Member {
	instance := *old.InstanceID
	m := &Member{}
	*m = *old
	m.ID = memberID
	m.Epoch, m.PreviousEpoch = JoinEpoch, JoinEpoch
	m.Assigned, m.PendingRevocation = old.Assigned.clone(), old.PendingRevocation.clone()
	target := g.target[old.ID]
	g.release(old)
	g.removeRecords(old.ID)
	delete(g.members, old.ID)
	delete(g.target, old.ID)
	g.members[m.ID] = m
	g.static[instance] = m.ID
	if target != nil {
		g.target[m.ID] = target
		g.writeTargetMember(m.ID, target)
	}
	g.claim(m)
	g.writeMemberMetadata(m)
	g.writeCurrent(m)
	return m
}

// checkEpoch fences a heartbeat whose epoch is not the member's, except
// the previous epoch with owned partitions among those assigned: the
// response that moved the member on may have been lost (Kafka's
// throwIfConsumerGroupMemberEpochIsInvalid).
func checkEpoch(m *Member, epoch int32, owned Assignment) (int16, string) {
	switch {
	case epoch > m.Epoch:
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	case epoch < m.Epoch && (epoch != m.PreviousEpoch || owned == nil || !subset(owned, m.Assigned)):
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	}
	return 0, ""
}

// subset reports whether every partition of a is in b.
func subset(a, b Assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.Has(t, p) {
				return false
			}
		}
	}
	return true
}

// updateMember applies a heartbeat's fields (those not null) to m and
// reports whether its subscription changed.
func (g *Group) updateMember(m *Member, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) bool {
	changed := false
	if req.InstanceID != nil {
		m.InstanceID = cloneString(req.InstanceID)
	}
	if req.RackID != nil {
		m.RackID = cloneString(req.RackID)
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.ServerAssignor {
		m.ServerAssignor = *req.ServerAssignor
		changed = true
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.SubscribedTopicNames) {
			m.SubscribedTopicNames = names
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.SubscribedTopicRegex {
		m.SubscribedTopicRegex = *req.SubscribedTopicRegex
		m.regex = subscriptionRegex(m.SubscribedTopicRegex)
		changed = true
	}
	m.ClientID, m.ClientHost = clientID, clientHost
	return changed
}

// sameMetadata reports whether a and b have the same stored member
// metadata.
func sameMetadata(a, b *Member) bool {
	return eqString(a.InstanceID, b.InstanceID) && eqString(a.RackID, b.RackID) &&
		a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		a.RebalanceTimeout == b.RebalanceTimeout && a.ServerAssignor == b.ServerAssignor &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames) && a.SubscribedTopicRegex == b.SubscribedTopicRegex &&
		a.Classic.equal(b.Classic)
}

// subscribes lists the existing topics m subscribes to, by name.
func (m *Member) subscribes(md Metadata, names []string) []string {
	out := slices.Clone(m.SubscribedTopicNames)
	if m.regex != nil {
		for _, n := range names {
			if m.regex.MatchString(n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// refreshSubscriptions recomputes the subscription metadata from the
// members' subscriptions and md, stores it if it changed and reports
// whether it did: a topic created, deleted or grown that a member
// subscribes to moves the group epoch on.
func (g *Group) refreshSubscriptions(md Metadata) bool {
	var names []string
	for _, m := range g.members {
		if m.regex != nil {
			names = md.TopicNames()
			break
		}
	}
	subscribed := map[string]topicMeta{}
	for _, m := range g.members {
		for _, n := range m.subscribes(md, names) {
			if id, parts, ok := md.Topic(n); ok {
				subscribed[n] = topicMeta{id, parts}
			}
		}
	}
	if mapsEqual(subscribed, g.subscribed) {
		return false
	}
	g.subscribed = subscribed
	g.writePartitionMetadata()
	return true
}

// MetadataChanged tells the group that the cluster's topics changed: if
// its subscriptions resolve differently now, the group epoch moves on and
// a new target assignment is computed (members learn of it at their next
// heartbeat).
func (g *Group) MetadataChanged(md Metadata) Output {
	if len(g.members) > 0 && g.refreshSubscriptions(md) {
		g.epoch++
		g.writeEpoch()
		g.assign()
	}
	return g.flush()
}

// assignor returns the assignor the group uses: the one most members ask
// for, ties broken by the configured order, else the first configured.
func (g *Group) assignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.ServerAssignor != "" {
			votes[m.ServerAssignor]++
		}
	}
	best := g.cfg.Assignors[0]
	for _, a := range g.cfg.Assignors {
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// assign computes the target assignment of the group epoch and stores
// what changed of it.
func (g *Group) assign() {
	var names []string
	for _, m := range g.members {
		if m.regex != nil {
			names = make([]string, 0, len(g.subscribed))
			for n := range g.subscribed {
				names = append(names, n)
			}
			sort.Strings(names)
			break
		}
	}
	partitions := map[TopicID]int32{}
	for _, tm := range g.subscribed {
		partitions[tm.id] = tm.partitions
	}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	members := make([]AssignMember, 0, len(ids))
	for _, id := range ids {
		m := g.members[id]
		am := AssignMember{ID: id, Current: g.target[id]}
		for _, n := range m.SubscribedTopicNames {
			if tm, ok := g.subscribed[n]; ok {
				am.Topics = append(am.Topics, tm.id)
			}
		}
		if m.regex != nil {
			for _, n := range names {
				if m.regex.MatchString(n) {
					am.Topics = append(am.Topics, g.subscribed[n].id)
				}
			}
		}
		members = append(members, am)
	}
	result := Assignors[g.assignor()](members, partitions)
	for _, id := range ids {
		a := result[id]
		if a == nil {
			a = Assignment{}
		}
		if old, ok := g.target[id]; !ok || !old.Equal(a) {
			g.target[id] = a
			g.writeTargetMember(id, a)
		}
	}
	g.assignmentEpoch = g.epoch
	g.writeTargetMetadata()
}

// reconcile moves m towards its target assignment (Kafka's
// CurrentAssignmentBuilder): a member that must give partitions up first
// keeps its epoch with them pending revocation, and moves to the target
// epoch only once a heartbeat's owned partitions no longer hold them; a
// member takes a partition of its target only once no other member owns
// it. owned is nil when the heartbeat did not say.
func (g *Group) reconcile(now time.Time, m *Member, owned Assignment) {
	switch m.State {
	case Stable:
		if m.Epoch == g.assignmentEpoch {
			return
		}
	case UnrevokedPartitions:
		if owned == nil || ownsAny(owned, m.PendingRevocation) {
			return
		}
	}
	before := Member{State: m.State, Epoch: m.Epoch, PreviousEpoch: m.PreviousEpoch, Assigned: m.Assigned, PendingRevocation: m.PendingRevocation}
	target := g.target[m.ID]
	kept, revoke := Assignment{}, Assignment{}
	for t, ps := range m.Assigned {
		for _, p := range ps {
			if target.Has(t, p) {
				kept.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
	}
	g.release(m)
	if len(revoke) > 0 {
		m.State = UnrevokedPartitions
		m.Assigned, m.PendingRevocation = kept, revoke
		if m.revocationDeadline.IsZero() {
			m.revocationDeadline = now.Add(m.RebalanceTimeout)
		}
	} else {
		unreleased := false
		for t, ps := range target {
			for _, p := range ps {
				if kept.Has(t, p) {
					continue
				}
				if owner := g.owners[topicPartition{t, p}]; owner == "" {
					kept.add(t, p)
				} else {
					unreleased = true
				}
			}
		}
		m.State = Stable
		if unreleased {
			m.State = UnreleasedPartitions
		}
		if m.Epoch != g.assignmentEpoch {
			m.PreviousEpoch, m.Epoch = m.Epoch, g.assignmentEpoch
		}
		m.Assigned, m.PendingRevocation = kept, Assignment{}
		m.revocationDeadline = time.Time{}
	}
	g.claim(m)
	if m.State == UnrevokedPartitions && owned != nil && !ownsAny(owned, m.PendingRevocation) {
		// The heartbeat says the member owns none of what it must
		// revoke (a static member back in a new process owns nothing):
		// it has revoked them already, and moves to the target epoch
		// now. Its epoch is behind the target's, as every member's
		// with partitions to revoke.
		g.release(m)
		m.PendingRevocation, m.State = Assignment{}, Stable
		m.revocationDeadline = time.Time{}
		g.claim(m)
		g.reconcile(now, m, owned)
	}
	if m.State != before.State || m.Epoch != before.Epoch || m.PreviousEpoch != before.PreviousEpoch ||
		!m.Assigned.Equal(before.Assigned) || !m.PendingRevocation.Equal(before.PendingRevocation) {
		g.writeCurrent(m)
	}
}

// ownsAny reports whether owned holds any partition of pending.
func ownsAny(owned, pending Assignment) bool {
	for t, ps := range pending {
		for _, p := range ps {
			if owned.Has(t, p) {
				return true
			}
		}
	}
	return false
}

// release forgets that m owns its partitions.
func (g *Group) release(m *Member) {
	for t, ps := range m.owned() {
		for _, p := range ps {
			if g.owners[topicPartition{t, p}] == m.ID {
				delete(g.owners, topicPartition{t, p})
			}
		}
	}
}

// claim records that m owns its partitions. A partition another member
// owns stays that member's: the reconciliation never hands one out, and
// a store that says otherwise is not believed.
func (g *Group) claim(m *Member) {
	for t, ps := range m.owned() {
		for _, p := range ps {
			tp := topicPartition{t, p}
			if o := g.owners[tp]; o == "" || o == m.ID {
				g.owners[tp] = m.ID
			}
		}
	}
}

// Owner returns the member that owns partition p of topic t, "" if none.
func (g *Group) Owner(t TopicID, p int32) string { return g.owners[topicPartition{t, p}] }

// leave handles a leave heartbeat (epoch -1 or -2).
func (g *Group) leave(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	var m *Member
	if req.InstanceID != nil {
		m = g.members[g.static[*req.InstanceID]]
		switch {
		case m == nil:
			return kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)
		case m.ID != req.MemberID:
			return kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, m.ID)
		}
	} else if m = g.members[req.MemberID]; m == nil {
		return kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	if req.MemberEpoch == StaticLeaveEpoch && m.InstanceID != nil {
		// A static member will be back: it keeps its partitions, and
		// its session timeout still runs.
		g.release(m)
		m.Epoch = StaticLeaveEpoch
		m.PendingRevocation = Assignment{}
		m.State = Stable
		m.revocationDeadline = time.Time{}
		g.claim(m)
		g.writeCurrent(m)
		return 0, ""
	}
	g.remove(m)
	return 0, ""
}

// remove takes m out of the group and moves the group epoch on. When m
// was the last member of the consumer protocol, the members left use the
// classic protocol and the policy says so, the Output says the group may
// downgrade.
func (g *Group) remove(m *Member) {
	defer func(epoch int32) {
		if m.Classic == nil && len(g.members) > 0 && g.cfg.MigrationPolicy.Downgrades() && g.allClassic() {
			g.out.Downgrade = true
			g.downgradeEpoch = epoch
		}
	}(g.epoch)
	g.release(m)
	g.removeRecords(m.ID)
	delete(g.members, m.ID)
	delete(g.target, m.ID)
	if m.InstanceID != nil && g.static[*m.InstanceID] == m.ID {
		delete(g.static, *m.InstanceID)
	}
	g.epoch++
	g.writeEpoch()
}

// ---------------------------------------------------------------------------
// Timers

// Tick removes the members whose session expired, and those that did not
// revoke their partitions within their rebalance timeout, as Kafka's
// session and rebalance timers do.
func (g *Group) Tick(now time.Time) Output {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		due := func(t time.Time) bool { return !t.IsZero() && !now.Before(t) }
		expired := due(m.sessionDeadline) || due(m.joinDeadline) || due(m.syncDeadline)
		late := m.State == UnrevokedPartitions && due(m.revocationDeadline)
		if expired || late {
			g.remove(m)
		}
	}
	return g.flush()
}

// deadline is the earliest member timer.
func (g *Group) deadline() time.Time {
	var next time.Time
	for _, m := range g.members {
		for _, t := range []time.Time{m.sessionDeadline, m.revocationDeadline, m.joinDeadline, m.syncDeadline} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// flush returns the event's Output and starts the next.
func (g *Group) flush() Output {
	out := g.out
	g.out = Output{}
	out.Deadline = g.deadline()
	return out
}

// ---------------------------------------------------------------------------
// Offsets

// ValidateCommit checks an OffsetCommit (or, transactional, a
// TxnOffsetCommit) against the group as Kafka's ConsumerGroup
// validateOffsetCommit: a commit without member (epoch < 0) only to an
// empty group; a member's commit needs OffsetCommit v9+ and the member's
// current epoch (STALE_MEMBER_EPOCH otherwise); a classic member's, any
// version and its epoch as generation (ILLEGAL_GENERATION otherwise); an
// unknown member is UNKNOWN_MEMBER_ID.
func (g *Group) ValidateCommit(memberID string, epoch int32, transactional bool, version int16) int16 {
	if epoch < 0 && len(g.members) == 0 {
		return 0
	}
	if transactional && epoch < 0 && memberID == "" {
		return 0
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case m.Classic != nil && epoch != m.Epoch:
		return kerr.IllegalGeneration.Code
	case m.Classic != nil:
		return 0
	case !transactional && version < 9:
		return kerr.UnsupportedVersion.Code
	case epoch != m.Epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ValidateFetch checks an OffsetFetch v9+'s member as Kafka's
// ConsumerGroup validateOffsetFetch: none (epoch < 0, no member id)
// passes; else the member must exist (UNKNOWN_MEMBER_ID) at that epoch
// (STALE_MEMBER_EPOCH).
func (g *Group) ValidateFetch(memberID string, epoch int32) int16 {
	if epoch < 0 && memberID == "" {
		return 0
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.Epoch && m.Classic != nil:
		return kerr.IllegalGeneration.Code
	case epoch != m.Epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ---------------------------------------------------------------------------
// Describe

// Describe returns the group for ConsumerGroupDescribe. The caller sets
// AuthorizedOperations.
func (g *Group) Describe(md Metadata) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = g.id
	d.State = g.State()
	d.Epoch = g.epoch
	d.AssignmentEpoch = g.assignmentEpoch
	d.AssignorName = g.assignor()
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.ID
		dm.InstanceID = cloneString(m.InstanceID)
		dm.RackID = cloneString(m.RackID)
		dm.MemberEpoch = m.Epoch
		dm.ClientID = m.ClientID
		dm.ClientHost = m.ClientHost
		dm.SubscribedTopics = slices.Clone(m.SubscribedTopicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.SubscribedTopicRegex != "" {
			re := m.SubscribedTopicRegex
			dm.SubscribedTopicRegex = &re
		}
		dm.Assignment = describeAssignment(m.Assigned, md)
		dm.TargetAssignment = describeAssignment(g.target[id], md)
		dm.MemberType = 1 // consumer protocol (KIP-1099)
		if m.Classic != nil {
			dm.MemberType = 0 // classic protocol
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// describeAssignment converts a to ConsumerGroupDescribe's form.
func describeAssignment(a Assignment, md Metadata) kmsg.Assignment {
	var out kmsg.Assignment
	for _, t := range a.topics() {
		tp := kmsg.AssignmentTopicPartition{TopicID: t, Topic: md.TopicName(t), Partitions: slices.Clone(a[t])}
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	if out.TopicPartitions == nil {
		out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	}
	return out
}

// responseAssignment converts a to ConsumerGroupHeartbeat's form.
func responseAssignment(a Assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}}
	for _, t := range a.topics() {
		out.Topics = append(out.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

// ---------------------------------------------------------------------------
// Helpers

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

func eqString(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func mapsEqual(a, b map[string]topicMeta) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
