package group

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newMemberJoinTimeout bounds how long a new member's first JoinGroup may
// be held (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs): a client that
// gave up on it would otherwise stay a defunct member of a long rebalance.
const newMemberJoinTimeout = 5 * time.Minute

// metadataStoreVersion is the GroupMetadataValue version Output.Store
// carries, the one Kafka 2.3+ writes.
const metadataStoreVersion = 3

// ---------------------------------------------------------------------------
// Configuration

// Config holds the coordinator's group properties, under Kafka's names.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member asks for in JoinGroup (group.min.session.timeout.ms, default
	// 6 s; group.max.session.timeout.ms, default 30 min); a join outside
	// them gets INVALID_SESSION_TIMEOUT. Min at least 1 ms, Max at least
	// Min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an Empty
	// group waits for more members (group.initial.rebalance.delay.ms,
	// default 3 s; at least 0). While a brand-new group (generation
	// 0) waits, each window in which a new member joined is followed by
	// another of the same length, never beyond the rebalance timeout
	// (Kafka's InitialDelayedJoin).
	InitialRebalanceDelay time.Duration
	// MaxSize is the most members a group may have (group.max.size,
	// default MaxInt32; 1 .. MaxInt32); a join beyond it gets
	// GROUP_MAX_SIZE_REACHED.
	MaxSize int
	// NewMemberID makes a member id from a prefix: the client id, or the
	// group.instance.id of a static member (as Kafka). Nil means prefix +
	// "-" + a random UUID (crypto/rand), Kafka's format.
	NewMemberID func(clientID string) string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second,
		MaxSize:               math.MaxInt32,
	}
}

// Validate checks ranges and names the bad key. The session timeouts
// and the initial delay have no upper bound, as the broker's
// configuration has always taken them.
func (c Config) Validate() error {
	switch {
	case c.MinSessionTimeout < time.Millisecond:
		return fmt.Errorf("group.min.session.timeout.ms %d: must be at least 1", c.MinSessionTimeout.Milliseconds())
	case c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("group.max.session.timeout.ms %d: must be at least group.min.session.timeout.ms (%d)",
			c.MaxSessionTimeout.Milliseconds(), c.MinSessionTimeout.Milliseconds())
	case c.InitialRebalanceDelay < 0:
		return fmt.Errorf("group.initial.rebalance.delay.ms %d: must be at least 0", c.InitialRebalanceDelay.Milliseconds())
	case c.MaxSize < 1 || c.MaxSize > math.MaxInt32:
		return fmt.Errorf("group.max.size %d: must be between 1 and %d", c.MaxSize, math.MaxInt32)
	}
	return nil
}

// StoreError maps the error code of a failed __consumer_offsets append of
// group metadata to the code Stored takes, as Kafka's
// GroupMetadataManager.storeGroup does: a missing partition or too few
// replicas is COORDINATOR_NOT_AVAILABLE, a lost leadership or a storage
// error NOT_COORDINATOR, a timeout REBALANCE_IN_PROGRESS, a too large
// record UNKNOWN_SERVER_ERROR; other codes pass through. 0 stays 0.
func StoreError(appendCode int16) int16 {
	switch appendCode {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.RequestTimedOut.Code:
		return kerr.RebalanceInProgress.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return kerr.UnknownServerError.Code
	}
	return appendCode
}

// ---------------------------------------------------------------------------
// States and outputs

// State is a group's state, Kafka's GroupState.
type State int

const (
	// Empty has no members: offsets only, or a group whose members all
	// left. A join starts a rebalance (after the initial delay).
	Empty State = iota
	// PreparingRebalance holds JoinGroups until every member has rejoined
	// or the rebalance timeout passes; heartbeats and syncs get
	// REBALANCE_IN_PROGRESS.
	PreparingRebalance
	// CompletingRebalance has answered the joins of a new generation and
	// holds SyncGroups until the leader's assignment is stored.
	CompletingRebalance
	// Stable has a stored assignment; members heartbeat.
	Stable
	// Dead is a group the coordinator no longer owns (unloaded); the
	// broker drops it.
	Dead
)

// String returns Kafka's name of the state.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Waiter identifies a JoinGroup or SyncGroup request that the broker holds
// until the group answers it.
type Waiter uint64

// Reply answers a held request: exactly one of Join or Sync is set.
type Reply struct {
	// To is the request answered.
	To Waiter
	// Join is the JoinGroup response, of the request's version.
	Join *kmsg.JoinGroupResponse
	// Sync is the SyncGroup response, of the request's version.
	Sync *kmsg.SyncGroupResponse
}

// Output is what an event decided.
type Output struct {
	// Replies answer held requests (some may be the request just passed
	// in, answered at once).
	Replies []Reply
	// Store, if not nil, is the group's metadata to append to
	// __consumer_offsets (a GroupMetadataValue, version 3); the broker
	// appends it, waits until it is replicated, then calls Stored with the
	// generation it carries and the outcome. Kafka stores when the
	// leader's SyncGroup arrives (assignments known), when a group becomes
	// Empty, and when a static member rejoins a Stable group with a new
	// member id; the held SyncGroups (or the static member's JoinGroup) are
	// answered only after Stored succeeds.
	Store *kmsg.GroupMetadataValue
	// Deadline is when Tick must next be called; zero means no timer is
	// needed.
	Deadline time.Time
}

// ---------------------------------------------------------------------------
// The group

// Group is one classic group: Kafka's GroupMetadata with the coordinator's
// rules for it. It is not safe for concurrent use.
type Group struct {
	id  string
	cfg Config

	state        State
	stateSince   time.Time
	generation   int32
	protocolType string // "" before the first member
	protocol     string // "" if none chosen
	leader       string // "" if no members

	members map[string]*member
	order   []*member         // members in the order they joined
	static  map[string]string // group.instance.id -> member id
	// pending holds the member ids handed out with MEMBER_ID_REQUIRED that
	// have not joined yet, and when each expires.
	pending map[string]time.Time
	// newMemberAdded says a member joined a brand-new group during its
	// initial delay, which extends the delay (Kafka's flag of that name).
	newMemberAdded bool

	// The join timer runs in PreparingRebalance: Kafka's DelayedJoin, or
	// its InitialDelayedJoin when initialDelay is set (the rebalance of an
	// Empty group), whose current window is initialWindow long with
	// initialRemaining of the rebalance timeout left after it.
	joinDeadline     time.Time
	initialDelay     bool
	initialWindow    time.Duration
	initialRemaining time.Duration

	// The pending-sync timer (Kafka's DelayedSync) removes the members of
	// syncGeneration that have not sent SyncGroup by syncDeadline.
	syncArmed      bool
	syncDeadline   time.Time
	syncGeneration int32

	// stores are the Output.Stores not yet Stored, oldest first.
	stores []storeIntent

	// out collects the current event's Output.
	out Output
}

// member is one member of the group (Kafka's MemberMetadata).
type member struct {
	id               string
	instanceID       *string // static members only
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	// protocols are the member's protocols in its order of preference.
	protocols  []kmsg.JoinGroupRequestProtocol
	assignment []byte
	// join and sync are the member's held JoinGroup and SyncGroup.
	join, sync *heldRequest
	// isNew is set from the member's first join until that rebalance
	// completes; its held join then expires newMemberJoinTimeout after
	// it was made.
	isNew bool
	// expires is when the session ends, unless a join or sync is held for
	// a member that is not new (those members are waiting on the group).
	expires time.Time
	// syncPending says the member has not sent SyncGroup since the join
	// of this generation completed.
	syncPending bool
}

// heldRequest is a held JoinGroup or SyncGroup.
type heldRequest struct {
	waiter  Waiter
	version int16
}

// storeKind says what an Output.Store was for.
type storeKind int

const (
	// storeAssignment stores the leader's assignment of a generation.
	storeAssignment storeKind = iota
	// storeStaticRejoin stores a static member's new member id.
	storeStaticRejoin
	// storeEmpty stores a group that became Empty; its outcome is ignored.
	storeEmpty
)

// storeIntent is an Output.Store awaiting Stored.
type storeIntent struct {
	kind       storeKind
	generation int32
	// assignment is the leader's assignment by member id (storeAssignment).
	assignment map[string][]byte
	// rejoin is what a failed static rejoin restores (storeStaticRejoin).
	rejoin *staticRejoin
}

// staticRejoin is a static member's replacement of its member id, kept to
// answer its JoinGroup when stored or to undo it when the store fails.
type staticRejoin struct {
	instanceID       string
	oldID, newID     string
	leader           string // the leader before the replacement
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
}

// New returns an Empty group of generation 0. cfg should be valid.
func New(id string, cfg Config) *Group {
	return &Group{
		id:      id,
		cfg:     cfg,
		state:   Empty,
		members: make(map[string]*member),
		static:  make(map[string]string),
		pending: make(map[string]time.Time),
	}
}

// Restore rebuilds a group from its latest stored metadata (when a broker
// becomes coordinator and loads __consumer_offsets): Stable with its
// members if it has members (each member's session restarts at now), else
// Empty. A restored group with more members than MaxSize rebalances at
// once, as Kafka's onGroupLoaded. It returns the Output with the first
// Deadline.
func Restore(id string, cfg Config, v *kmsg.GroupMetadataValue, now time.Time) (*Group, Output) {
	g := New(id, cfg)
	g.generation = v.Generation
	g.protocolType = v.ProtocolType
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.CurrentStateTimestamp >= 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for i := range v.Members {
		vm := &v.Members[i]
		m := &member{
			id:               vm.MemberID,
			instanceID:       cloneString(vm.InstanceID),
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: bytes.Clone(vm.Subscription)}},
			assignment:       bytes.Clone(vm.Assignment),
		}
		m.expires = now.Add(m.sessionTimeout)
		g.add(m)
	}
	// A stored leader that is not a member would lead nobody: Kafka keeps
	// it and fails later; the first member leads instead.
	g.leader = ""
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	} else if len(g.order) > 0 {
		g.leader = g.order[0].id
	}
	if len(g.order) > 0 {
		g.state = Stable
		if len(g.order) > g.cfg.MaxSize {
			g.prepareRebalance(now)
		}
	}
	return g, g.flush()
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// State returns the group's state.
func (g *Group) State() State { return g.state }

// Generation returns the group's generation.
func (g *Group) Generation() int32 { return g.generation }

// ProtocolType returns the protocol type of the group's members ("" before
// the first member joined).
func (g *Group) ProtocolType() string { return g.protocolType }

// Protocol returns the chosen protocol's name, "" if none.
func (g *Group) Protocol() string { return g.protocol }

// Leader returns the leader's member id, "" if none.
func (g *Group) Leader() string { return g.leader }

// NumMembers returns the number of members (not counting the pending ones
// that were told MEMBER_ID_REQUIRED and have not rejoined).
func (g *Group) NumMembers() int { return len(g.order) }

// StateSince is when the group entered its current state (Kafka's
// currentStateTimestamp), used for the offset expiry of Empty groups. It
// is the zero Time if unknown: a New group that never changed state, or
// one restored from metadata without a timestamp (value version 0 or 1).
func (g *Group) StateSince() time.Time { return g.stateSince }

// ---------------------------------------------------------------------------
// JoinGroup

// joinRequest is a JoinGroup with its version's defaults applied.
type joinRequest struct {
	waiter           Waiter
	version          int16
	memberID         string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
}

// Join handles a JoinGroup (any version v0–v9; req.Version says which)
// from a client. The reply to w comes in this Output or a later one; a v0
// join's rebalance timeout is its session timeout, and v9's SkipAssignment
// is never set.
func (g *Group) Join(now time.Time, w Waiter, req *kmsg.JoinGroupRequest, clientID, clientHost string) Output {
	j := joinRequest{
		waiter:         w,
		version:        req.Version,
		memberID:       req.MemberID,
		clientID:       clientID,
		clientHost:     clientHost,
		sessionTimeout: time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		protocolType:   req.ProtocolType,
	}
	j.rebalanceTimeout = j.sessionTimeout
	if req.Version >= 1 {
		j.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Version >= 5 {
		j.instanceID = cloneString(req.InstanceID)
	}
	seen := make(map[string]bool, len(req.Protocols))
	for _, p := range req.Protocols {
		if !seen[p.Name] {
			seen[p.Name] = true
			j.protocols = append(j.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
		}
	}
	g.join(now, j)
	return g.flush()
}

// join is Kafka's handleJoinGroup.
func (g *Group) join(now time.Time, j joinRequest) {
	switch {
	case j.sessionTimeout < g.cfg.MinSessionTimeout || j.sessionTimeout > g.cfg.MaxSessionTimeout:
		g.replyJoin(j.waiter, joinError(j.version, j.memberID, kerr.InvalidSessionTimeout.Code))
	case !g.acceptsJoin(j.memberID):
		g.dropQuietly(now, j.memberID)
		g.replyJoin(j.waiter, joinError(j.version, "", kerr.GroupMaxSizeReached.Code))
	case j.memberID == "":
		g.joinNewMember(now, j)
	default:
		g.joinCurrentMember(now, j)
	}
	g.maybeCompleteJoin(now)
}

// acceptsJoin says whether the group has room for a join from memberID
// (Kafka's acceptJoiningMember): in PreparingRebalance the members already
// rejoined are counted, so that the last to rejoin of an oversized group
// are turned away; otherwise the members.
func (g *Group) acceptsJoin(memberID string) bool {
	m := g.members[memberID]
	switch g.state {
	case PreparingRebalance:
		return (m != nil && m.join != nil) || g.numAwaitingJoin() < g.cfg.MaxSize
	case CompletingRebalance, Stable:
		return m != nil || len(g.order) < g.cfg.MaxSize
	}
	return true
}

// joinNewMember handles a join without a member id (Kafka's
// doNewMemberJoinGroup).
func (g *Group) joinNewMember(now time.Time, j joinRequest) {
	switch {
	case g.state == Dead:
		g.replyJoin(j.waiter, joinError(j.version, "", kerr.CoordinatorNotAvailable.Code))
		return
	case !g.supportsProtocols(j.protocolType, j.protocols):
		g.replyJoin(j.waiter, joinError(j.version, "", kerr.InconsistentGroupProtocol.Code))
		return
	}
	if j.instanceID != nil {
		newID := g.newMemberID(*j.instanceID)
		if oldID, ok := g.static[*j.instanceID]; ok {
			g.rejoinStatic(now, j, oldID, newID)
		} else {
			g.addMemberAndRebalance(now, j, newID)
		}
		return
	}
	newID := g.newMemberID(j.clientID)
	if j.version >= 4 {
		// KIP-394: the member must come back with its id, so that a
		// client that gives up on its join leaves no member behind.
		g.pending[newID] = now.Add(j.sessionTimeout)
		g.replyJoin(j.waiter, joinError(j.version, newID, kerr.MemberIDRequired.Code))
		return
	}
	g.addMemberAndRebalance(now, j, newID)
}

// joinCurrentMember handles a join with a member id (Kafka's
// doCurrentMemberJoinGroup).
func (g *Group) joinCurrentMember(now time.Time, j joinRequest) {
	switch {
	case g.state == Dead:
		g.replyJoin(j.waiter, joinError(j.version, j.memberID, kerr.CoordinatorNotAvailable.Code))
		return
	case !g.supportsProtocols(j.protocolType, j.protocols):
		g.replyJoin(j.waiter, joinError(j.version, j.memberID, kerr.InconsistentGroupProtocol.Code))
		return
	}
	if _, ok := g.pending[j.memberID]; ok && j.instanceID == nil {
		g.addMemberAndRebalance(now, j, j.memberID)
		return
	}
	if code := g.validateMember(j.memberID, j.instanceID); code != 0 {
		g.replyJoin(j.waiter, joinError(j.version, j.memberID, code))
		return
	}
	m := g.members[j.memberID]
	switch g.state {
	case PreparingRebalance:
		g.updateMember(m, j)
	case CompletingRebalance:
		if m.matches(j.protocols) {
			// The member lost the join response: the same again.
			m.expires = now.Add(m.sessionTimeout)
			g.replyJoin(j.waiter, g.joinResult(j.version, m.id, g.leader, m.id == g.leader))
		} else {
			g.updateMember(m, j)
			g.maybePrepareRebalance(now)
		}
	case Stable:
		// The leader's join rebalances even with unchanged metadata: it
		// is how a consumer leader asks for a new assignment (topic
		// metadata changed).
		if m.id == g.leader || !m.matches(j.protocols) {
			g.updateMember(m, j)
			g.maybePrepareRebalance(now)
		} else {
			m.expires = now.Add(m.sessionTimeout)
			g.replyJoin(j.waiter, g.joinResult(j.version, m.id, g.leader, false))
		}
	}
}

// addMemberAndRebalance adds a member whose join is held and starts a
// rebalance if none is under way.
func (g *Group) addMemberAndRebalance(now time.Time, j joinRequest, id string) {
	m := &member{
		id:               id,
		instanceID:       j.instanceID,
		clientID:         j.clientID,
		clientHost:       j.clientHost,
		sessionTimeout:   j.sessionTimeout,
		rebalanceTimeout: j.rebalanceTimeout,
		protocols:        j.protocols,
		join:             &heldRequest{waiter: j.waiter, version: j.version},
		isNew:            true,
		expires:          now.Add(newMemberJoinTimeout),
	}
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	if len(g.order) == 0 {
		// The first member sets the type the others must have.
		g.protocolType = j.protocolType
	}
	g.add(m)
	g.maybePrepareRebalance(now)
}

// updateMember takes a rejoining member's protocols and timeouts and holds
// its join; a join it held before is answered REBALANCE_IN_PROGRESS (the
// client gave up on it).
func (g *Group) updateMember(m *member, j joinRequest) {
	m.protocols = j.protocols
	m.sessionTimeout = j.sessionTimeout
	m.rebalanceTimeout = j.rebalanceTimeout
	if m.join != nil {
		g.replyJoin(m.join.waiter, joinError(m.join.version, m.id, kerr.RebalanceInProgress.Code))
	}
	m.join = &heldRequest{waiter: j.waiter, version: j.version}
}

// rejoinStatic gives a static member that joined without a member id the
// new member id newID in place of oldID (Kafka's
// updateStaticMemberAndRebalance). The old id's held requests get
// FENCED_INSTANCE_ID. In Stable, unless the new protocols change the
// group's protocol, there is no rebalance: the new id is stored and the
// join answered with the current generation once Stored; the leader id in
// that answer is the one before the replacement, so that a replaced leader
// does not compute an assignment a Stable group would not hand out.
func (g *Group) rejoinStatic(now time.Time, j joinRequest, oldID, newID string) {
	m := g.members[oldID]
	leader := g.leader
	if m.join != nil {
		g.replyJoin(m.join.waiter, joinError(m.join.version, oldID, kerr.FencedInstanceID.Code))
		m.join = nil
	}
	if m.sync != nil {
		g.replySync(m.sync.waiter, syncError(m.sync.version, kerr.FencedInstanceID.Code))
		m.sync = nil
	}
	undo := &staticRejoin{
		instanceID:       *j.instanceID,
		oldID:            oldID,
		newID:            newID,
		leader:           leader,
		protocols:        m.protocols,
		sessionTimeout:   m.sessionTimeout,
		rebalanceTimeout: m.rebalanceTimeout,
	}
	g.rename(m, newID)
	g.updateMember(m, j)
	m.expires = now.Add(m.sessionTimeout)
	if m.syncPending {
		// The new instance learns the generation from this join; the old
		// one's missing SyncGroup is no reason to remove it.
		g.synced(m)
	}
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			g.emitStore(storeIntent{kind: storeStaticRejoin, generation: g.generation, rejoin: undo},
				g.metadataValue(func(m *member) []byte { return m.assignment }))
		} else {
			g.prepareRebalance(now)
		}
	case CompletingRebalance:
		// The leader may be assigning to the old id: rebalance.
		g.prepareRebalance(now)
	}
}

// supportsProtocols says whether a member of protocolType with protocols
// may join: into an Empty group with any non-empty type and protocols,
// else with the group's type and a protocol every member supports.
func (g *Group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType == "" || protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.numSupporting(p.Name) == len(g.order) {
			return true
		}
	}
	return false
}

// numSupporting returns how many members support protocol.
func (g *Group) numSupporting(protocol string) int {
	n := 0
	for _, m := range g.order {
		if m.supports(protocol) {
			n++
		}
	}
	return n
}

// selectProtocol chooses the group's protocol (Kafka's selectProtocol):
// among the protocols every member supports, each member votes for the
// first in its order of preference, and the most votes win; a tie goes to
// the one the longest-standing member prefers. The group has members.
func (g *Group) selectProtocol() string {
	votes := make(map[string]int)
	for _, m := range g.order {
		for _, p := range m.protocols {
			if g.numSupporting(p.Name) == len(g.order) {
				votes[p.Name]++
				break
			}
		}
	}
	best, most := "", 0
	for _, p := range g.order[0].protocols {
		if votes[p.Name] > most {
			best, most = p.Name, votes[p.Name]
		}
	}
	return best
}

// maybeCompleteJoin completes the rebalance under way once every member
// has rejoined and no pending member is outstanding (Kafka's DelayedJoin
// tryComplete); the initial delay is always waited out.
func (g *Group) maybeCompleteJoin(now time.Time) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		g.completeJoin(now)
	}
}

// allJoined says whether every member has a held join and no pending
// member is outstanding.
func (g *Group) allJoined() bool {
	return len(g.pending) == 0 && g.numAwaitingJoin() == len(g.order)
}

// numAwaitingJoin returns how many members have a held join.
func (g *Group) numAwaitingJoin() int {
	n := 0
	for _, m := range g.order {
		if m.join != nil {
			n++
		}
	}
	return n
}

// completeJoin ends PreparingRebalance (Kafka's onCompleteJoin): dynamic
// members that did not rejoin are removed (static ones stay until their
// session expires, KIP-345), the next generation begins with the chosen protocol
// and every held join is answered, the leader's with the members and their
// metadata; the group waits in CompletingRebalance for the syncs. Without
// members the group becomes Empty and is stored. If members remain but
// none rejoined, the rebalance waits another rebalance timeout.
func (g *Group) completeJoin(now time.Time) {
	for _, m := range append([]*member(nil), g.order...) {
		if m.join == nil && m.instanceID == nil {
			g.drop(now, m)
		}
	}
	g.initialDelay = false
	if !g.electJoinedLeader() && len(g.order) > 0 {
		g.joinDeadline = now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.clearPendingSync()
	if len(g.order) == 0 {
		g.protocol = ""
		g.transition(now, Empty)
		g.emitStore(storeIntent{kind: storeEmpty, generation: g.generation}, g.metadataValue(nil))
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(now, CompletingRebalance)
	for _, m := range g.order {
		if m.join != nil {
			g.replyJoin(m.join.waiter, g.joinResult(m.join.version, m.id, g.leader, m.id == g.leader))
			m.join = nil
		}
		m.expires = now.Add(m.sessionTimeout)
		m.isNew = false
		m.syncPending = true
	}
	g.syncArmed = true
	g.syncDeadline = now.Add(g.rebalanceTimeout())
	g.syncGeneration = g.generation
}

// electJoinedLeader keeps the leader if it rejoined, else makes the first
// member that rejoined the leader (Kafka's maybeElectNewJoinedLeader); it
// reports false if there is no leader or no member rejoined.
func (g *Group) electJoinedLeader() bool {
	l := g.members[g.leader]
	if l == nil {
		return false
	}
	if l.join != nil {
		return true
	}
	for _, m := range g.order {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// joinResult is a successful JoinGroup response of the current generation
// for memberID; the leader's lists the members.
func (g *Group) joinResult(version int16, memberID, leader string, withMembers bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.LeaderID = leader
	r.MemberID = memberID
	if withMembers {
		for _, m := range g.order {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = m.id
			rm.InstanceID = m.instanceID
			rm.ProtocolMetadata = m.metadata(g.protocol)
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

// joinError is a failed JoinGroup response (generation -1, no protocol).
func joinError(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.MemberID = memberID
	return r
}

// ---------------------------------------------------------------------------
// SyncGroup

// Sync handles a SyncGroup v0–v5. In CompletingRebalance it is held: the
// leader's assignment goes to Output.Store, and every held sync is
// answered once Stored succeeds. In Stable it is answered at once with the
// member's assignment.
func (g *Group) Sync(now time.Time, w Waiter, req *kmsg.SyncGroupRequest) Output {
	var instanceID, protocolType, protocol *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	if req.Version >= 5 {
		protocolType, protocol = req.ProtocolType, req.Protocol
		if protocolType == nil || protocol == nil {
			// Mandatory from v5 (Kafka's KafkaApis).
			g.replySync(w, syncError(req.Version, kerr.InconsistentGroupProtocol.Code))
			return g.flush()
		}
	}
	code := g.validateMember(req.MemberID, instanceID)
	switch {
	case g.state == Dead:
		code = kerr.CoordinatorNotAvailable.Code
	case code != 0:
	case req.Generation != g.generation:
		code = kerr.IllegalGeneration.Code
	case protocolType != nil && (g.protocolType == "" || *protocolType != g.protocolType),
		protocol != nil && (g.protocol == "" || *protocol != g.protocol):
		code = kerr.InconsistentGroupProtocol.Code
	case g.state == Empty:
		code = kerr.UnknownMemberID.Code
	case g.state == PreparingRebalance:
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		g.replySync(w, syncError(req.Version, code))
		return g.flush()
	}
	m := g.members[req.MemberID]
	g.synced(m)
	if g.state == Stable {
		m.expires = now.Add(m.sessionTimeout)
		g.replySync(w, g.syncResult(req.Version, m.assignment))
		return g.flush()
	}
	// CompletingRebalance.
	if m.sync != nil {
		g.replySync(m.sync.waiter, syncError(m.sync.version, kerr.RebalanceInProgress.Code))
	}
	m.sync = &heldRequest{waiter: w, version: req.Version}
	if m.id == g.leader {
		assignment := make(map[string][]byte, len(g.order))
		for _, a := range req.GroupAssignment {
			if g.members[a.MemberID] != nil {
				assignment[a.MemberID] = bytes.Clone(a.MemberAssignment)
			}
		}
		for _, o := range g.order {
			if assignment[o.id] == nil {
				assignment[o.id] = []byte{}
			}
		}
		g.emitStore(storeIntent{kind: storeAssignment, generation: g.generation, assignment: assignment},
			g.metadataValue(func(m *member) []byte { return assignment[m.id] }))
	}
	return g.flush()
}

// synced notes that m sent SyncGroup this generation; the pending-sync
// timer stops once every member has.
func (g *Group) synced(m *member) {
	m.syncPending = false
	for _, o := range g.order {
		if o.syncPending {
			return
		}
	}
	g.syncArmed = false
}

// clearPendingSync stops the pending-sync timer.
func (g *Group) clearPendingSync() {
	for _, m := range g.order {
		m.syncPending = false
	}
	g.syncArmed = false
}

// Stored reports the outcome of an Output.Store append: code 0 on success,
// else the Kafka error code to give the waiting SyncGroups
// (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...; see StoreError). A
// Stored for an older generation than the group's, or that matches no
// Store, is ignored.
func (g *Group) Stored(now time.Time, generation int32, code int16) Output {
	intent, ok := g.takeStore(generation)
	if !ok || generation != g.generation {
		return g.flush()
	}
	switch intent.kind {
	case storeAssignment:
		if g.state != CompletingRebalance {
			break
		}
		if code != 0 {
			g.failAssignment(now, code)
			g.maybePrepareRebalance(now)
			break
		}
		for _, m := range g.order {
			m.assignment = intent.assignment[m.id]
			if m.sync != nil {
				g.replySync(m.sync.waiter, g.syncResult(m.sync.version, m.assignment))
				m.sync = nil
				m.expires = now.Add(m.sessionTimeout)
			}
		}
		g.transition(now, Stable)
	case storeStaticRejoin:
		g.staticRejoinStored(now, intent.rejoin, code)
	case storeEmpty:
		// Kafka only logs a failure: the older metadata in the log has
		// no live members either.
	}
	return g.flush()
}

// staticRejoinStored answers the JoinGroup of a static member whose new
// member id was stored; if the store failed, the member gets its old id
// back and the join gets the error. A group that rebalanced meanwhile
// answers the join itself.
func (g *Group) staticRejoinStored(now time.Time, r *staticRejoin, code int16) {
	m := g.members[r.newID]
	if g.state != Stable || m == nil || m.join == nil {
		return
	}
	if code == 0 {
		g.replyJoin(m.join.waiter, g.joinResult(m.join.version, m.id, r.leader, false))
		m.join = nil
		m.expires = now.Add(m.sessionTimeout)
		return
	}
	resp := g.joinResult(m.join.version, "", r.leader, false)
	resp.ErrorCode = code
	g.replyJoin(m.join.waiter, resp)
	m.join = nil
	m.protocols = r.protocols
	m.sessionTimeout = r.sessionTimeout
	m.rebalanceTimeout = r.rebalanceTimeout
	g.rename(m, r.oldID)
	m.expires = now.Add(m.sessionTimeout)
}

// takeStore removes the oldest pending Store of generation, and the older
// ones before it, and returns it.
func (g *Group) takeStore(generation int32) (storeIntent, bool) {
	for i, s := range g.stores {
		if s.generation == generation {
			g.stores = g.stores[i+1:]
			return s, true
		}
	}
	return storeIntent{}, false
}

// failAssignment clears the assignments and answers every held sync with
// code (Kafka's resetAndPropagateAssignmentError).
func (g *Group) failAssignment(now time.Time, code int16) {
	for _, m := range g.order {
		m.assignment = nil
		if m.sync != nil {
			g.replySync(m.sync.waiter, syncError(m.sync.version, code))
			m.sync = nil
			m.expires = now.Add(m.sessionTimeout)
		}
	}
}

// syncResult is a successful SyncGroup response carrying assignment.
func (g *Group) syncResult(version int16, assignment []byte) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.MemberAssignment = assignment
	return r
}

// syncError is a failed SyncGroup response.
func syncError(version int16, code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ErrorCode = code
	return r
}

// ---------------------------------------------------------------------------
// Heartbeat, LeaveGroup, offsets

// Heartbeat handles a Heartbeat v0–v4 and returns its error code (0 for
// none): UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
// COORDINATOR_NOT_AVAILABLE (Dead), REBALANCE_IN_PROGRESS (in
// PreparingRebalance, where the session is still renewed).
func (g *Group) Heartbeat(now time.Time, req *kmsg.HeartbeatRequest) (int16, Output) {
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code, g.flush()
	}
	if code := g.validateMember(req.MemberID, instanceID); code != 0 {
		return code, g.flush()
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code, g.flush()
	}
	m := g.members[req.MemberID]
	m.expires = now.Add(m.sessionTimeout)
	if g.state == PreparingRebalance {
		return kerr.RebalanceInProgress.Code, g.flush()
	}
	return 0, g.flush()
}

// Leave handles a LeaveGroup v0–v5: v0–v2 name one member (an error is the
// response's top-level code), v3+ a batch with a code per member (a member
// id "" with an instance id leaves by instance id). Removing members
// rebalances; the last member leaving makes the group Empty (and stored).
func (g *Group) Leave(now time.Time, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, Output) {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = req.Version
	if g.state == Dead {
		r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return r, g.flush()
	}
	if req.Version <= 2 {
		r.ErrorCode = g.leave(now, req.MemberID, nil)
		return r, g.flush()
	}
	for _, lm := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = lm.MemberID
		rm.InstanceID = lm.InstanceID
		rm.ErrorCode = g.leave(now, lm.MemberID, lm.InstanceID)
		r.Members = append(r.Members, rm)
	}
	return r, g.flush()
}

// leave removes one leaving member and returns its code.
func (g *Group) leave(now time.Time, memberID string, instanceID *string) int16 {
	if memberID == "" {
		// An administrative removal by instance id.
		if instanceID != nil {
			if id, ok := g.static[*instanceID]; ok {
				g.removeMember(now, g.members[id])
				return 0
			}
		}
		return kerr.UnknownMemberID.Code
	}
	if _, ok := g.pending[memberID]; ok {
		delete(g.pending, memberID)
		g.maybeCompleteJoin(now)
		return 0
	}
	if code := g.validateMember(memberID, instanceID); code != 0 {
		return code
	}
	g.removeMember(now, g.members[memberID])
	return 0
}

// ValidateCommit checks an OffsetCommit's member and generation as Kafka's
// handleCommitOffsets: generation -1 with an empty member id and no
// instance id is accepted only while the group is Empty (offsets-only
// use), UNKNOWN_MEMBER_ID otherwise; Dead -> COORDINATOR_NOT_AVAILABLE;
// unknown member -> UNKNOWN_MEMBER_ID; static member with another member
// id -> FENCED_INSTANCE_ID; wrong generation -> ILLEGAL_GENERATION;
// CompletingRebalance -> REBALANCE_IN_PROGRESS. A valid commit from a
// member (in Stable or PreparingRebalance) renews its session.
func (g *Group) ValidateCommit(now time.Time, generation int32, memberID string, instanceID *string) (int16, Output) {
	if code := g.validateCommit(generation, memberID, instanceID, false); code != 0 {
		return code, g.flush()
	}
	switch g.state {
	case CompletingRebalance:
		return kerr.RebalanceInProgress.Code, g.flush()
	case Stable, PreparingRebalance:
		m := g.members[memberID]
		m.expires = now.Add(m.sessionTimeout)
	}
	return 0, g.flush()
}

// ValidateTxnCommit checks a TxnOffsetCommit's member and generation as
// Kafka's handleTxnCommitOffsets: like ValidateCommit, but without member
// id and generation (v0–v2, or a producer outside the group) any state is
// accepted, CompletingRebalance is not refused, and no session is renewed.
func (g *Group) ValidateTxnCommit(generation int32, memberID string, instanceID *string) int16 {
	return g.validateCommit(generation, memberID, instanceID, true)
}

// validateCommit is Kafka's validateOffsetCommit.
func (g *Group) validateCommit(generation int32, memberID string, instanceID *string, transactional bool) int16 {
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case generation >= 0 || memberID != "" || instanceID != nil:
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	case !transactional && g.state != Empty:
		// Only members commit to a group with members.
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// ValidateFetch checks an OffsetFetch's member id and epoch (v9+). A
// classic group does not check them (Kafka's ClassicGroup
// validateOffsetFetch); a Dead group is GROUP_ID_NOT_FOUND.
func (g *Group) ValidateFetch(memberID string, memberEpoch int32) int16 {
	if g.state == Dead {
		return kerr.GroupIDNotFound.Code
	}
	return 0
}

// validateMember checks that memberID is a member and, for a static
// member, that instanceID names it (Kafka's validateCurrentMember):
// FENCED_INSTANCE_ID if the instance id belongs to another member id,
// UNKNOWN_MEMBER_ID if it belongs to none or memberID is not a member.
func (g *Group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		id, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if id != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// ---------------------------------------------------------------------------
// Describe, delete, unload

// Describe returns the group for DescribeGroups v0–v5: its state, protocol
// type, and members with member id, instance id, client id and host; in
// Stable also the protocol and each member's metadata for it and its
// assignment (as Kafka, which shows them only in Stable). A Dead group has
// no protocol type or members. The caller sets ErrorCode and
// AuthorizedOperations.
func (g *Group) Describe() kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.id
	d.State = g.state.String()
	if g.state == Dead {
		return d
	}
	d.ProtocolType = g.protocolType
	if g.state == Stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.order {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		if g.state == Stable {
			dm.ProtocolMetadata = m.metadata(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// Deletable returns 0 if DeleteGroups may delete the group (Empty or
// Dead), else NON_EMPTY_GROUP. The broker then drops the group and writes
// the tombstones of its metadata and offsets.
func (g *Group) Deletable() int16 {
	if g.state == Empty || g.state == Dead {
		return 0
	}
	return kerr.NonEmptyGroup.Code
}

// Unload answers every held request with NOT_COORDINATOR and marks the
// group Dead, without members or timers (the broker stopped being
// coordinator and drops it).
func (g *Group) Unload() Output {
	for _, m := range g.order {
		if m.join != nil {
			g.replyJoin(m.join.waiter, joinError(m.join.version, m.id, kerr.NotCoordinator.Code))
		}
		if m.sync != nil {
			g.replySync(m.sync.waiter, syncError(m.sync.version, kerr.NotCoordinator.Code))
		}
	}
	g.state = Dead
	g.members = make(map[string]*member)
	g.order = nil
	g.static = make(map[string]string)
	g.pending = make(map[string]time.Time)
	g.leader = ""
	g.syncArmed = false
	g.initialDelay = false
	g.stores = nil
	return g.flush()
}

// ---------------------------------------------------------------------------
// Timers

// timerKind names a timer; when several are due at the same instant they
// fire in this order.
type timerKind int

const (
	noTimer      timerKind = iota
	pendingTimer           // a pending member's expiry
	sessionTimer           // a member's session expiry
	joinTimer              // the rebalance timeout or initial delay
	syncTimer              // the pending-sync timeout
)

// Tick fires the timers due at now, earliest first: member session expiry,
// pending-member expiry, the rebalance timeout, the initial delay, the
// pending-sync timeout. With now before every timer it does nothing. The
// join and pending-sync timers fire at most once per Tick: one rearmed at
// or before now shows as an Output.Deadline not after now.
func (g *Group) Tick(now time.Time) Output {
	joinFired, syncFired := false, false
	for {
		kind, id := g.nextDue(now, joinFired, syncFired)
		switch kind {
		case noTimer:
			return g.flush()
		case pendingTimer:
			delete(g.pending, id)
			g.maybeCompleteJoin(now)
		case sessionTimer:
			g.removeMember(now, g.members[id])
		case joinTimer:
			joinFired = true
			g.joinTimerFired(now)
		case syncTimer:
			syncFired = true
			g.syncTimerFired(now)
		}
	}
}

// nextDue returns the earliest timer due at now (a member's or pending
// member's id with it), skipping the join and sync timers if asked.
func (g *Group) nextDue(now time.Time, skipJoin, skipSync bool) (timerKind, string) {
	kind, id, at := noTimer, "", time.Time{}
	g.eachTimer(func(k timerKind, key string, t time.Time) {
		switch {
		case t.After(now), k == joinTimer && skipJoin, k == syncTimer && skipSync:
		case kind == noTimer, t.Before(at), t.Equal(at) && (k < kind || k == kind && key < id):
			kind, id, at = k, key, t
		}
	})
	return kind, id
}

// eachTimer calls fn with every armed timer.
func (g *Group) eachTimer(fn func(k timerKind, key string, t time.Time)) {
	for id, t := range g.pending {
		fn(pendingTimer, id, t)
	}
	for _, m := range g.order {
		if m.isNew || (m.join == nil && m.sync == nil) {
			fn(sessionTimer, m.id, m.expires)
		}
	}
	if g.state == PreparingRebalance {
		fn(joinTimer, "", g.joinDeadline)
	}
	if g.syncArmed {
		fn(syncTimer, "", g.syncDeadline)
	}
}

// joinTimerFired handles the end of the rebalance timeout or of an initial
// delay window (Kafka's DelayedJoin and InitialDelayedJoin onComplete): a
// window in which new members joined is followed by another, at most the
// initial delay long, while rebalance timeout remains; otherwise the
// rebalance completes with whoever rejoined. The next window starts when
// the last ended, however late the Tick.
func (g *Group) joinTimerFired(now time.Time) {
	if g.initialDelay && g.newMemberAdded && g.initialRemaining > 0 {
		g.newMemberAdded = false
		window := min(g.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining = max(g.initialRemaining-g.initialWindow, 0)
		g.initialWindow = window
		g.joinDeadline = g.joinDeadline.Add(window)
		return
	}
	g.completeJoin(now)
}

// syncTimerFired removes the members that have not sent SyncGroup within
// the rebalance timeout after the join completed, and rebalances (Kafka's
// onExpirePendingSync).
func (g *Group) syncTimerFired(now time.Time) {
	g.syncArmed = false
	if g.syncGeneration != g.generation || (g.state != CompletingRebalance && g.state != Stable) {
		return
	}
	late := false
	for _, m := range append([]*member(nil), g.order...) {
		if m.syncPending {
			late = true
			g.drop(now, m)
		}
	}
	if late {
		g.prepareRebalance(now)
	}
}

// ---------------------------------------------------------------------------
// Transitions

// maybePrepareRebalance starts a rebalance unless one is under way.
func (g *Group) maybePrepareRebalance(now time.Time) {
	switch g.state {
	case Empty, CompletingRebalance, Stable:
		g.prepareRebalance(now)
	}
}

// prepareRebalance moves the group to PreparingRebalance (Kafka's
// prepareRebalance): held syncs get REBALANCE_IN_PROGRESS, and the join
// timer starts: the initial delay from Empty, else the rebalance timeout
// (the largest of the members'). It completes at once if every member has
// already rejoined or the timer is already due.
func (g *Group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance {
		g.failAssignment(now, kerr.RebalanceInProgress.Code)
	}
	g.clearPendingSync()
	if g.state == Empty {
		g.initialDelay = true
		g.initialWindow = g.cfg.InitialRebalanceDelay
		g.initialRemaining = max(g.rebalanceTimeout()-g.cfg.InitialRebalanceDelay, 0)
		g.joinDeadline = now.Add(g.initialWindow)
	} else {
		g.initialDelay = false
		g.joinDeadline = now.Add(g.rebalanceTimeout())
	}
	g.transition(now, PreparingRebalance)
	if !g.initialDelay && g.allJoined() {
		g.completeJoin(now)
	} else if !g.joinDeadline.After(now) {
		g.joinTimerFired(now)
	}
}

// transition enters state s at now.
func (g *Group) transition(now time.Time, s State) {
	g.state = s
	g.stateSince = now
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *Group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.order {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// removeMember removes a member that left or whose session expired
// (Kafka's removeMemberAndUpdateGroup): a Stable or CompletingRebalance
// group rebalances, a rebalance under way may complete.
func (g *Group) removeMember(now time.Time, m *member) {
	g.drop(now, m)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalance(now)
	case PreparingRebalance:
		g.maybeCompleteJoin(now)
	}
}

// dropQuietly removes memberID, a member or pending member, without
// rebalancing (Kafka's group.remove for a join over the size limit).
func (g *Group) dropQuietly(now time.Time, memberID string) {
	delete(g.pending, memberID)
	if m := g.members[memberID]; m != nil {
		g.drop(now, m)
	}
}

// drop removes m from the group, answering its held requests with
// UNKNOWN_MEMBER_ID so that a live client rejoins; a leader's place goes to
// the longest-standing member left.
func (g *Group) drop(now time.Time, m *member) {
	if m.join != nil {
		g.replyJoin(m.join.waiter, joinError(m.join.version, "", kerr.UnknownMemberID.Code))
		m.join = nil
	}
	if m.sync != nil {
		g.replySync(m.sync.waiter, syncError(m.sync.version, kerr.UnknownMemberID.Code))
		m.sync = nil
	}
	delete(g.members, m.id)
	if m.instanceID != nil {
		delete(g.static, *m.instanceID)
	}
	for i, o := range g.order {
		if o == m {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	if g.leader == m.id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0].id
		}
	}
}

// add makes m a member, and the leader if there is none.
func (g *Group) add(m *member) {
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m)
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	delete(g.pending, m.id)
}

// rename gives member m the member id id, keeping its place and
// leadership.
func (g *Group) rename(m *member, id string) {
	delete(g.members, m.id)
	if g.leader == m.id {
		g.leader = id
	}
	m.id = id
	g.members[id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
}

// metadataValue is the group's metadata to store, each member's
// assignment from assign (nil for an Empty group).
func (g *Group) metadataValue(assign func(*member) []byte) *kmsg.GroupMetadataValue {
	v := new(kmsg.GroupMetadataValue)
	v.Default()
	v.Version = metadataStoreVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	if !g.stateSince.IsZero() {
		v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	}
	for _, m := range g.order {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription = m.metadata(g.protocol)
		vm.Assignment = assign(m)
		v.Members = append(v.Members, vm)
	}
	return v
}

// ---------------------------------------------------------------------------
// Output

// replyJoin answers the held JoinGroup w.
func (g *Group) replyJoin(w Waiter, r *kmsg.JoinGroupResponse) {
	g.out.Replies = append(g.out.Replies, Reply{To: w, Join: r})
}

// replySync answers the held SyncGroup w.
func (g *Group) replySync(w Waiter, r *kmsg.SyncGroupResponse) {
	g.out.Replies = append(g.out.Replies, Reply{To: w, Sync: r})
}

// emitStore sets the event's Output.Store to v, awaiting Stored as intent.
// An event stores at most once; were it to store again, the later
// metadata would replace the earlier.
func (g *Group) emitStore(intent storeIntent, v *kmsg.GroupMetadataValue) {
	if g.out.Store != nil {
		g.stores = g.stores[:len(g.stores)-1]
	}
	g.stores = append(g.stores, intent)
	g.out.Store = v
}

// flush returns the event's Output with the next Deadline and starts a
// new one.
func (g *Group) flush() Output {
	out := g.out
	g.out = Output{}
	g.eachTimer(func(_ timerKind, _ string, t time.Time) {
		if out.Deadline.IsZero() || t.Before(out.Deadline) {
			out.Deadline = t
		}
	})
	return out
}

// ---------------------------------------------------------------------------
// Helpers

// newMemberID makes a member id with prefix.
func (g *Group) newMemberID(prefix string) string {
	if g.cfg.NewMemberID != nil {
		return g.cfg.NewMemberID(prefix)
	}
	var u [16]byte
	_, _ = rand.Read(u[:])  // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// matches says whether protocols are the member's, names and metadata in
// the same order (Kafka's MemberMetadata.matches).
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i, p := range protocols {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// supports says whether the member supports protocol.
func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// metadata returns the member's metadata for protocol.
func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// cloneString copies a nullable string.
func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}
