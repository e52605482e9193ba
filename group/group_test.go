package group

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The harness plays the broker around one Group: it numbers the held
// requests, checks that each is answered exactly once, keeps the Stores,
// and ticks the group when a Deadline comes due. Time moves only when a
// test says so; member ids are "<client>-<n>".

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// testConfig is Kafka's defaults with deterministic member ids.
func testConfig() Config {
	cfg := DefaultConfig()
	n := 0
	cfg.NewMemberID = func(prefix string) string {
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
	return cfg
}

type harness struct {
	t        *testing.T
	g        *Group
	now      time.Time
	next     Waiter
	held     map[Waiter]bool
	replies  map[Waiter]Reply
	stores   []*kmsg.GroupMetadataValue
	deadline time.Time
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, g: New("g", cfg), now: t0, held: make(map[Waiter]bool), replies: make(map[Waiter]Reply)}
}

// apply takes an Output as the broker would, checking that every reply
// answers a held request once and that Tick before the Deadline does
// nothing; a Deadline already due is ticked at once.
func (h *harness) apply(out Output) Output {
	h.t.Helper()
	for {
		for _, r := range out.Replies {
			if (r.Join == nil) == (r.Sync == nil) {
				h.t.Fatalf("reply to %d: got join %v and sync %v, want exactly one", r.To, r.Join, r.Sync)
			}
			if !h.held[r.To] {
				h.t.Fatalf("reply to %d: not a held request (answered twice?)", r.To)
			}
			delete(h.held, r.To)
			h.replies[r.To] = r
		}
		if out.Store != nil {
			if out.Store.Version != 3 {
				h.t.Fatalf("store version: got %d, want 3", out.Store.Version)
			}
			h.stores = append(h.stores, out.Store)
		}
		h.deadline = out.Deadline
		if h.deadline.IsZero() || h.deadline.After(h.now) {
			break
		}
		out = h.g.Tick(h.now)
	}
	if !h.deadline.IsZero() {
		state, gen := h.g.State(), h.g.Generation()
		idle := h.g.Tick(h.now)
		if len(idle.Replies) > 0 || idle.Store != nil || !idle.Deadline.Equal(h.deadline) || h.g.State() != state || h.g.Generation() != gen {
			h.t.Fatalf("tick at %v before deadline %v: got %+v, want nothing", h.now.Sub(t0), h.deadline.Sub(t0), idle)
		}
	}
	return out
}

// advance moves the clock by d and ticks.
func (h *harness) advance(d time.Duration) Output {
	h.t.Helper()
	h.now = h.now.Add(d)
	return h.apply(h.g.Tick(h.now))
}

// advanceTo moves the clock to at and ticks.
func (h *harness) advanceTo(at time.Time) Output {
	h.t.Helper()
	return h.advance(at.Sub(h.now))
}

func (h *harness) waiter() Waiter {
	h.next++
	h.held[h.next] = true
	return h.next
}

// client is a consumer of the group: what it sends and what it learnt.
type client struct {
	name         string
	version      int16
	instance     *string
	memberID     string
	generation   int32
	protocol     string
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol
	session      time.Duration
	rebalance    time.Duration
}

// newClient is a JoinGroup v5 consumer supporting protocols in that order;
// its metadata for each names it.
func newClient(name string, protocols ...string) *client {
	c := &client{name: name, version: 5, protocolType: "consumer", session: 10 * time.Second, rebalance: 30 * time.Second, generation: -1}
	c.setProtocols(protocols...)
	return c
}

// setProtocols sets c's protocols; "name:v" is protocol name with
// metadata version v.
func (c *client) setProtocols(protocols ...string) {
	c.protocols = nil
	for _, p := range protocols {
		name, _, _ := strings.Cut(p, ":")
		c.protocols = append(c.protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: []byte(c.name + ":" + p)})
	}
}

func (c *client) static(instance string) *client {
	c.instance = &instance
	return c
}

func ms(d time.Duration) int32 { return int32(d.Milliseconds()) }

// join sends c's JoinGroup.
func (h *harness) join(c *client) Waiter {
	h.t.Helper()
	w := h.waiter()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = c.version
	req.Group = "g"
	req.SessionTimeoutMillis = ms(c.session)
	req.RebalanceTimeoutMillis = ms(c.rebalance)
	req.MemberID = c.memberID
	req.InstanceID = c.instance
	req.ProtocolType = c.protocolType
	req.Protocols = c.protocols
	h.apply(h.g.Join(h.now, w, req, c.name, "/10.0.0.1"))
	return w
}

// enter joins c as a new member: for v4+ dynamic members, the
// MEMBER_ID_REQUIRED round trip first. It returns the held join.
func (h *harness) enter(c *client) Waiter {
	h.t.Helper()
	w := h.join(c)
	if c.version >= 4 && c.instance == nil && c.memberID == "" {
		r := h.joinReply(w)
		if r == nil || r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
			h.t.Fatalf("%s: first join: got %+v, want MEMBER_ID_REQUIRED with a member id", c.name, r)
		}
		c.memberID = r.MemberID
		w = h.join(c)
	}
	return w
}

// joinReply returns the answer to join w, nil if none yet.
func (h *harness) joinReply(w Waiter) *kmsg.JoinGroupResponse {
	h.t.Helper()
	r, ok := h.replies[w]
	if !ok {
		return nil
	}
	if r.Join == nil {
		h.t.Fatalf("reply to %d: got a sync reply, want a join reply", w)
	}
	return r.Join
}

// joinCode returns the error code answering join w.
func (h *harness) joinCode(w Waiter) int16 {
	h.t.Helper()
	r := h.joinReply(w)
	if r == nil {
		h.t.Fatalf("join %d: not answered, want an answer", w)
	}
	return r.ErrorCode
}

// joined returns c's successful join answer and takes its member id,
// generation and protocol.
func (h *harness) joined(c *client, w Waiter) *kmsg.JoinGroupResponse {
	h.t.Helper()
	r := h.joinReply(w)
	switch {
	case r == nil:
		h.t.Fatalf("%s: join not answered, want an answer", c.name)
	case r.ErrorCode != 0:
		h.t.Fatalf("%s: join: got %s, want success", c.name, errName(r.ErrorCode))
	}
	c.memberID, c.generation = r.MemberID, r.Generation
	if r.Protocol != nil {
		c.protocol = *r.Protocol
	}
	return r
}

// notAnswered fails if w was answered.
func (h *harness) notAnswered(what string, w Waiter) {
	h.t.Helper()
	if r, ok := h.replies[w]; ok {
		h.t.Fatalf("%s: got answer %+v %+v, want it held", what, r.Join, r.Sync)
	}
}

// rebalance waits for the joins ws of cs, advancing to each Deadline.
func (h *harness) rebalance(cs []*client, ws []Waiter) []*kmsg.JoinGroupResponse {
	h.t.Helper()
	for i := 0; ; i++ {
		done := true
		for _, w := range ws {
			if h.joinReply(w) == nil {
				done = false
			}
		}
		if done {
			break
		}
		if h.deadline.IsZero() || i > 10 {
			h.t.Fatalf("joins %v: not answered by %v", ws, h.now.Sub(t0))
		}
		h.advanceTo(h.deadline)
	}
	var out []*kmsg.JoinGroupResponse
	for i, c := range cs {
		out = append(out, h.joined(c, ws[i]))
	}
	return out
}

// sync sends c's SyncGroup with assignments (only the leader's count).
func (h *harness) sync(c *client, assignments map[*client]string) Waiter {
	h.t.Helper()
	w := h.waiter()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = c.version
	req.Group = "g"
	req.Generation = c.generation
	req.MemberID = c.memberID
	req.InstanceID = c.instance
	if c.version >= 5 {
		req.ProtocolType = kmsg.StringPtr(c.protocolType)
		req.Protocol = kmsg.StringPtr(c.protocol)
	}
	for o, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: o.memberID, MemberAssignment: []byte(a)})
	}
	h.apply(h.g.Sync(h.now, w, req))
	return w
}

// syncReply returns the answer to sync w, nil if none yet.
func (h *harness) syncReply(w Waiter) *kmsg.SyncGroupResponse {
	h.t.Helper()
	r, ok := h.replies[w]
	if !ok {
		return nil
	}
	if r.Sync == nil {
		h.t.Fatalf("reply to %d: got a join reply, want a sync reply", w)
	}
	return r.Sync
}

// syncCode returns the error code answering sync w.
func (h *harness) syncCode(w Waiter) int16 {
	h.t.Helper()
	r := h.syncReply(w)
	if r == nil {
		h.t.Fatalf("sync %d: not answered, want an answer", w)
	}
	return r.ErrorCode
}

// assigned checks that sync w succeeded with assignment.
func (h *harness) assigned(what string, w Waiter, assignment string) {
	h.t.Helper()
	r := h.syncReply(w)
	switch {
	case r == nil:
		h.t.Fatalf("%s: sync not answered, want assignment %q", what, assignment)
	case r.ErrorCode != 0:
		h.t.Fatalf("%s: sync: got %s, want assignment %q", what, errName(r.ErrorCode), assignment)
	case string(r.MemberAssignment) != assignment:
		h.t.Fatalf("%s: assignment: got %q, want %q", what, r.MemberAssignment, assignment)
	}
}

// lastStore returns the latest Store.
func (h *harness) lastStore() *kmsg.GroupMetadataValue {
	h.t.Helper()
	if len(h.stores) == 0 {
		h.t.Fatal("stores: got none, want one")
	}
	return h.stores[len(h.stores)-1]
}

// stored reports the latest Store's outcome.
func (h *harness) stored(code int16) {
	h.t.Helper()
	h.apply(h.g.Stored(h.now, h.lastStore().Generation, code))
}

// assignmentsOf gives each client the assignment "<name>-assignment".
func assignmentsOf(cs []*client) map[*client]string {
	a := make(map[*client]string)
	for _, c := range cs {
		a[c] = c.name + "-assignment"
	}
	return a
}

// leaderOf returns the client that leads.
func (h *harness) leaderOf(cs []*client) *client {
	h.t.Helper()
	for _, c := range cs {
		if c.memberID == h.g.Leader() {
			return c
		}
	}
	h.t.Fatalf("leader %q: not among the clients", h.g.Leader())
	return nil
}

// syncAll syncs cs (the leader first) after their joins and stores their
// assignments: the group is Stable.
func (h *harness) syncAll(cs []*client) {
	h.t.Helper()
	leader := h.leaderOf(cs)
	ws := map[*client]Waiter{leader: h.sync(leader, assignmentsOf(cs))}
	for _, c := range cs {
		if c != leader {
			ws[c] = h.sync(c, nil)
		}
	}
	h.stored(0)
	for _, c := range cs {
		h.assigned(c.name, ws[c], c.name+"-assignment")
	}
	h.wantState(Stable, h.g.Generation())
}

// stable brings an Empty group to Stable with cs, in one generation.
func (h *harness) stable(cs ...*client) {
	h.t.Helper()
	var ws []Waiter
	for _, c := range cs {
		ws = append(ws, h.enter(c))
	}
	h.rebalance(cs, ws)
	h.syncAll(cs)
}

// heartbeat sends c's Heartbeat and returns its code.
func (h *harness) heartbeat(c *client) int16 {
	h.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group = "g"
	req.Generation = c.generation
	req.MemberID = c.memberID
	req.InstanceID = c.instance
	code, out := h.g.Heartbeat(h.now, req)
	h.apply(out)
	return code
}

// leave sends a LeaveGroup of version with members (v0–v2: the first).
func (h *harness) leave(version int16, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	h.t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = version
	req.Group = "g"
	if version <= 2 {
		req.MemberID = members[0].MemberID
	} else {
		req.Members = members
	}
	r, out := h.g.Leave(h.now, req)
	h.apply(out)
	if r.Version != version {
		h.t.Fatalf("leave response version: got %d, want %d", r.Version, version)
	}
	return r
}

// commit validates an OffsetCommit from c.
func (h *harness) commit(c *client) int16 {
	h.t.Helper()
	code, out := h.g.ValidateCommit(h.now, c.generation, c.memberID, c.instance)
	h.apply(out)
	return code
}

func (h *harness) wantState(s State, generation int32) {
	h.t.Helper()
	if h.g.State() != s || h.g.Generation() != generation {
		h.t.Fatalf("group: got %v generation %d, want %v generation %d", h.g.State(), h.g.Generation(), s, generation)
	}
}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %s, want %s", what, errName(got), errName(want))
	}
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}

func leaving(id string, instance *string) kmsg.LeaveGroupRequestMember {
	return kmsg.LeaveGroupRequestMember{MemberID: id, InstanceID: instance}
}

func ptr(s string) *string { return &s }

// memberIDs lists a join response's member ids.
func memberIDs(r *kmsg.JoinGroupResponse) []string {
	var ids []string
	for _, m := range r.Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// ---------------------------------------------------------------------------
// Configuration

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" for valid, else a substring of the error
	}{
		{"defaults", func(*Config) {}, ""},
		{"zero delay", func(c *Config) { c.InitialRebalanceDelay = 0 }, ""},
		{"negative min", func(c *Config) { c.MinSessionTimeout = -time.Second }, "group.min.session.timeout.ms"},
		{"max below min", func(c *Config) { c.MaxSessionTimeout = time.Second }, "group.max.session.timeout.ms"},
		{"zero min", func(c *Config) { c.MinSessionTimeout = 0 }, "group.min.session.timeout.ms"},
		{"max beyond int32, as the broker takes it", func(c *Config) { c.MaxSessionTimeout = 30 * 24 * time.Hour }, ""},
		{"negative delay", func(c *Config) { c.InitialRebalanceDelay = -1 }, "group.initial.rebalance.delay.ms"},
		{"zero max size", func(c *Config) { c.MaxSize = 0 }, "group.max.size"},
		{"max size beyond int32", func(c *Config) { c.MaxSize = math.MaxInt32 + 1 }, "group.max.size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestDefaultConfigIsKafkas(t *testing.T) {
	got := DefaultConfig()
	if got.MinSessionTimeout != 6*time.Second || got.MaxSessionTimeout != 30*time.Minute ||
		got.InitialRebalanceDelay != 3*time.Second || got.MaxSize != math.MaxInt32 || got.NewMemberID != nil {
		t.Fatalf("got %+v, want Kafka's defaults", got)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Empty: "Empty", PreparingRebalance: "PreparingRebalance",
		CompletingRebalance: "CompletingRebalance", Stable: "Stable", Dead: "Dead", State(9): "State(9)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d): got %q, want %q", int(s), got, want)
		}
	}
}

func TestStoreError(t *testing.T) {
	for _, tt := range []struct{ in, want int16 }{
		{0, 0},
		{kerr.UnknownTopicOrPartition.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotEnoughReplicas.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotEnoughReplicasAfterAppend.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{kerr.KafkaStorageError.Code, kerr.NotCoordinator.Code},
		{kerr.RequestTimedOut.Code, kerr.RebalanceInProgress.Code},
		{kerr.MessageTooLarge.Code, kerr.UnknownServerError.Code},
		{kerr.RecordListTooLarge.Code, kerr.UnknownServerError.Code},
		{kerr.InvalidFetchSize.Code, kerr.UnknownServerError.Code},
		{kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorLoadInProgress.Code},
		{kerr.UnknownServerError.Code, kerr.UnknownServerError.Code},
	} {
		if got := StoreError(tt.in); got != tt.want {
			t.Errorf("StoreError(%s): got %s, want %s", errName(tt.in), errName(got), errName(tt.want))
		}
	}
}

// ---------------------------------------------------------------------------
// JoinGroup

// A v4+ member without an id is told MEMBER_ID_REQUIRED with one, comes
// back with it, and its join completes after the initial delay.
func TestTwoStepJoinThenInitialDelay(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")

	first := h.join(a)
	r := h.joinReply(first)
	if r == nil || r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID != "a-1" || r.Generation != -1 {
		t.Fatalf("first join: got %+v, want MEMBER_ID_REQUIRED with member id a-1, generation -1", r)
	}
	h.wantState(Empty, 0)
	if want := t0.Add(a.session); !h.deadline.Equal(want) {
		t.Fatalf("deadline: got %v, want the pending member's expiry %v", h.deadline, want)
	}

	a.memberID = r.MemberID
	w := h.join(a)
	h.wantState(PreparingRebalance, 0)
	if want := t0.Add(3 * time.Second); !h.deadline.Equal(want) {
		t.Fatalf("deadline: got %v, want the initial delay's end %v", h.deadline.Sub(t0), want.Sub(t0))
	}
	h.advance(3*time.Second - time.Millisecond)
	h.notAnswered("join before the initial delay ends", w)

	h.advance(time.Millisecond)
	r = h.joined(a, w)
	if r.Generation != 1 || r.LeaderID != "a-1" || *r.Protocol != "range" || *r.ProtocolType != "consumer" || r.SkipAssignment {
		t.Fatalf("join: got %+v, want generation 1 led by a-1 with range", r)
	}
	if got := memberIDs(r); len(got) != 1 || got[0] != "a-1" || string(r.Members[0].ProtocolMetadata) != "a:range" {
		t.Fatalf("leader's members: got %+v, want a-1 with its range metadata", r.Members)
	}
	h.wantState(CompletingRebalance, 1)
}

// The initial delay of a new group is extended while members keep
// arriving, never beyond the rebalance timeout (Kafka's InitialDelayedJoin).
func TestInitialDelayExtends(t *testing.T) {
	tests := []struct {
		name      string
		rebalance time.Duration
		arrivals  []time.Duration // when each member joins
		want      time.Duration   // when the joins are answered
	}{
		{"one member", 30 * time.Second, []time.Duration{0}, 3 * time.Second},
		{"second within the first window", 30 * time.Second, []time.Duration{0, time.Second}, 6 * time.Second},
		{"a member in each window", 30 * time.Second, []time.Duration{0, time.Second, 4 * time.Second, 8 * time.Second}, 12 * time.Second},
		{"bounded by the rebalance timeout", 5 * time.Second, []time.Duration{0, 2 * time.Second, 4 * time.Second}, 5 * time.Second},
		{"rebalance timeout below the delay", 2 * time.Second, []time.Duration{0, time.Second}, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			var cs []*client
			var ws []Waiter
			for i, at := range tt.arrivals {
				h.advanceTo(t0.Add(at))
				c := newClient(fmt.Sprintf("c%d", i), "range")
				c.version = 3 // joins without MEMBER_ID_REQUIRED
				c.rebalance = tt.rebalance
				cs = append(cs, c)
				ws = append(ws, h.join(c))
			}
			h.advanceTo(t0.Add(tt.want - time.Millisecond))
			for _, w := range ws {
				h.notAnswered("join before the delay ends", w)
			}
			h.advanceTo(t0.Add(tt.want))
			for i, c := range cs {
				if r := h.joined(c, ws[i]); r.Generation != 1 {
					t.Fatalf("%s: generation: got %d, want 1", c.name, r.Generation)
				}
			}
		})
	}
}

// With no initial delay the first member's join completes at once.
func TestZeroInitialDelay(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	a := newClient("a", "range")
	h.joined(a, h.enter(a))
	h.wantState(CompletingRebalance, 1)
}

// JoinGroup v0–v3 add a member without the MEMBER_ID_REQUIRED round trip;
// v0 has no rebalance timeout and uses the session timeout.
func TestJoinOldVersionsAddDirectly(t *testing.T) {
	for _, version := range []int16{0, 1, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			h := newHarness(t, testConfig())
			a := newClient("a", "range")
			a.version = version
			w := h.join(a)
			h.notAnswered("held join", w)
			h.wantState(PreparingRebalance, 0)
			h.advance(3 * time.Second)
			r := h.joined(a, w)
			if r.MemberID != "a-1" || r.Version != version {
				t.Fatalf("join: got member %q version %d, want a-1 version %d", r.MemberID, r.Version, version)
			}
			h.sync(a, assignmentsOf([]*client{a}))
			want := a.rebalance
			if version == 0 {
				want = a.session
			}
			if got := h.lastStore().Members[0].RebalanceTimeoutMillis; got != ms(want) {
				t.Fatalf("stored rebalance timeout: got %d ms, want %d ms", got, ms(want))
			}
		})
	}
}

// The leader's join lists every member with its metadata for the chosen
// protocol and its instance id; the followers' list nobody.
func TestLeaderGetsMembersFollowersNone(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range").static("b-instance")
	rs := h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	ra, rb := rs[0], rs[1]
	if ra.LeaderID != a.memberID || rb.LeaderID != a.memberID || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("joins: got leaders %q, %q generations %d, %d; want %q, generation 1", ra.LeaderID, rb.LeaderID, ra.Generation, rb.Generation, a.memberID)
	}
	if len(ra.Members) != 2 {
		t.Fatalf("leader's members: got %+v, want a and b", ra.Members)
	}
	for i, want := range []struct {
		id, metadata string
		instance     *string
	}{{a.memberID, "a:range", nil}, {b.memberID, "b:range", b.instance}} {
		m := ra.Members[i]
		if m.MemberID != want.id || string(m.ProtocolMetadata) != want.metadata || (m.InstanceID == nil) != (want.instance == nil) ||
			(m.InstanceID != nil && *m.InstanceID != *want.instance) {
			t.Fatalf("leader's member %d: got %+v, want %+v", i, m, want)
		}
	}
	if len(rb.Members) != 0 {
		t.Fatalf("follower's members: got %+v, want none", rb.Members)
	}
}

// The protocol is the one most members prefer among those all support.
func TestProtocolSelection(t *testing.T) {
	tests := []struct {
		name    string
		members [][]string
		want    string
	}{
		{"one protocol", [][]string{{"range"}, {"range"}}, "range"},
		{"most first choices", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}, {"range", "roundrobin"}}, "range"},
		{"only common protocols vote", [][]string{{"sticky", "range"}, {"range"}}, "range"},
		{"a vote goes to the first common one", [][]string{{"sticky", "roundrobin", "range"}, {"range", "roundrobin"}, {"roundrobin"}}, "roundrobin"},
		{"a tie goes to the first member's choice", [][]string{{"x", "y"}, {"y", "x"}}, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			var cs []*client
			var ws []Waiter
			for i, protocols := range tt.members {
				c := newClient(fmt.Sprintf("c%d", i), protocols...)
				cs = append(cs, c)
				ws = append(ws, h.enter(c))
			}
			for i, r := range h.rebalance(cs, ws) {
				if *r.Protocol != tt.want {
					t.Fatalf("member %d: protocol: got %q, want %q", i, *r.Protocol, tt.want)
				}
			}
			if h.g.Protocol() != tt.want {
				t.Fatalf("group protocol: got %q, want %q", h.g.Protocol(), tt.want)
			}
		})
	}
}

// Joins Kafka refuses at once.
func TestJoinRefused(t *testing.T) {
	tests := []struct {
		name  string
		cfg   func(*Config)
		setup func(h *harness)
		join  func(c *client)
		want  int16
	}{
		{name: "session timeout below the minimum", join: func(c *client) { c.session = 5 * time.Second }, want: kerr.InvalidSessionTimeout.Code},
		{name: "session timeout above the maximum", join: func(c *client) { c.session = 31 * time.Minute }, want: kerr.InvalidSessionTimeout.Code},
		{name: "no protocols", join: func(c *client) { c.protocols = nil }, want: kerr.InconsistentGroupProtocol.Code},
		{name: "no protocol type", join: func(c *client) { c.protocolType = "" }, want: kerr.InconsistentGroupProtocol.Code},
		{name: "another protocol type", setup: stableWith("a"), join: func(c *client) { c.protocolType = "connect" }, want: kerr.InconsistentGroupProtocol.Code},
		{name: "no protocol in common", setup: stableWith("a"), join: func(c *client) { c.setProtocols("roundrobin") }, want: kerr.InconsistentGroupProtocol.Code},
		{name: "unknown member id", setup: stableWith("a"), join: func(c *client) { c.memberID = "nobody" }, want: kerr.UnknownMemberID.Code},
		{name: "unknown member id of an empty group", join: func(c *client) { c.memberID = "nobody" }, want: kerr.UnknownMemberID.Code},
		{name: "group full", cfg: func(c *Config) { c.MaxSize = 1 }, setup: stableWith("a"), want: kerr.GroupMaxSizeReached.Code},
		{name: "group full while rebalancing", cfg: func(c *Config) { c.MaxSize = 1 }, setup: func(h *harness) { h.join(newClient("a", "range").static("a")) }, want: kerr.GroupMaxSizeReached.Code},
		{name: "dead group", setup: func(h *harness) { h.apply(h.g.Unload()) }, want: kerr.CoordinatorNotAvailable.Code},
		{name: "dead group, with a member id", setup: func(h *harness) { h.apply(h.g.Unload()) }, join: func(c *client) { c.memberID = "z-1" }, want: kerr.CoordinatorNotAvailable.Code},
		{name: "member dropping the common protocol", setup: func(h *harness) {
			h.stable(newClient("a", "range"), newClient("z", "range"))
		}, join: func(c *client) { c.memberID = "z-2"; c.setProtocols("roundrobin") }, want: kerr.InconsistentGroupProtocol.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			h := newHarness(t, cfg)
			if tt.setup != nil {
				tt.setup(h)
			}
			state, gen, members := h.g.State(), h.g.Generation(), h.g.NumMembers()
			c := newClient("z", "range")
			if tt.join != nil {
				tt.join(c)
			}
			w := h.join(c)
			wantCode(t, "join", h.joinCode(w), tt.want)
			if r := h.joinReply(w); r.Generation != -1 || r.Protocol != nil || r.LeaderID != "" || len(r.Members) != 0 {
				t.Fatalf("refused join: got %+v, want generation -1 and nothing else", r)
			}
			if h.g.State() != state || h.g.Generation() != gen || h.g.NumMembers() != members {
				t.Fatalf("group after a refused join: got %v generation %d with %d members, want unchanged %v %d %d",
					h.g.State(), h.g.Generation(), h.g.NumMembers(), state, gen, members)
			}
		})
	}
}

// stableWith returns a setup that makes the group Stable with clients of
// names, supporting range.
func stableWith(names ...string) func(h *harness) {
	return func(h *harness) {
		var cs []*client
		for _, n := range names {
			cs = append(cs, newClient(n, "range"))
		}
		h.stable(cs...)
	}
}

// A pending member (told MEMBER_ID_REQUIRED) that does not come back
// within its session timeout is forgotten.
func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	r := h.joinReply(h.join(a))
	a.memberID = r.MemberID
	h.advance(a.session - time.Millisecond)
	h.advance(time.Millisecond)
	if !h.deadline.IsZero() {
		t.Fatalf("deadline: got %v, want none after the pending member expired", h.deadline)
	}
	wantCode(t, "join with the expired id", h.joinCode(h.join(a)), kerr.UnknownMemberID.Code)
}

// A rebalance waits for pending members, until they expire.
func TestPendingMemberHoldsRebalance(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	h.stable(a)
	b := newClient("b", "range")
	h.join(b) // MEMBER_ID_REQUIRED; b never comes back
	h.wantState(Stable, 1)
	w := h.join(a) // the leader rejoins
	h.wantState(PreparingRebalance, 1)
	h.notAnswered("join while a member is pending", w)
	h.advance(b.session)
	if r := h.joined(a, w); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("join: got %+v, want generation 2 with a alone", r)
	}
}

// In Stable a follower rejoining with the same metadata gets the current
// generation at once; the leader, or changed metadata, rebalances.
func TestStableRejoin(t *testing.T) {
	tests := []struct {
		name      string
		who       int // 0 the leader, 1 the follower
		protocols []string
		rebalance bool
	}{
		{"follower with the same metadata", 1, []string{"range"}, false},
		{"follower with new protocols", 1, []string{"range", "roundrobin"}, true},
		{"follower with new metadata", 1, []string{"range:v2"}, true},
		{"leader with the same metadata", 0, []string{"range"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			cs := []*client{newClient("a", "range"), newClient("b", "range")}
			h.stable(cs...)
			c := cs[tt.who]
			c.setProtocols(tt.protocols...)
			w := h.join(c)
			if !tt.rebalance {
				r := h.joined(c, w)
				if r.Generation != 1 || r.LeaderID != cs[0].memberID || len(r.Members) != 0 {
					t.Fatalf("join: got %+v, want generation 1 led by %s without members", r, cs[0].memberID)
				}
				h.wantState(Stable, 1)
				return
			}
			h.notAnswered("join that rebalances", w)
			h.wantState(PreparingRebalance, 1)
			other := cs[1-tt.who]
			ws := []Waiter{w, h.join(other)}
			h.rebalance([]*client{c, other}, ws)
			h.wantState(CompletingRebalance, 2)
		})
	}
}

// In CompletingRebalance a member that lost its join answer gets the same
// answer again; with new metadata it rebalances.
func TestCompletingRebalanceRejoin(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	first := h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	again := h.joined(a, h.join(a))
	if again.Generation != first[0].Generation || again.LeaderID != first[0].LeaderID || len(again.Members) != 2 {
		t.Fatalf("repeated join: got %+v, want %+v", again, first[0])
	}
	h.wantState(CompletingRebalance, 1)
	b.setProtocols("range", "sticky")
	wb := h.join(b)
	h.wantState(PreparingRebalance, 1)
	h.rebalance([]*client{b, a}, []Waiter{wb, h.join(a)})
	h.wantState(CompletingRebalance, 2)
}

// A member that sends JoinGroup again while one is held: the older one is
// answered REBALANCE_IN_PROGRESS.
func TestSupersededJoin(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	first := h.enter(a)
	second := h.join(a)
	wantCode(t, "superseded join", h.joinCode(first), kerr.RebalanceInProgress.Code)
	h.rebalance([]*client{a}, []Waiter{second})
}

// A new member's join held beyond five minutes expires it (Kafka's
// NewMemberJoinTimeoutMs), even in a longer rebalance.
func TestNewMemberJoinTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	h.stable(a)
	b := newClient("b", "range")
	b.rebalance = 10 * time.Minute
	wb := h.enter(b)
	h.wantState(PreparingRebalance, 1)
	for range 59 {
		h.advance(5 * time.Second)
		wantCode(t, "a's heartbeat", h.heartbeat(a), kerr.RebalanceInProgress.Code)
	}
	h.notAnswered("b's join before five minutes", wb)
	h.advance(5 * time.Second)
	wantCode(t, "b's join after five minutes", h.joinCode(wb), kerr.UnknownMemberID.Code)
	if h.g.NumMembers() != 1 {
		t.Fatalf("members: got %d, want a alone", h.g.NumMembers())
	}
}

// ---------------------------------------------------------------------------
// SyncGroup

// The leader's sync is stored; once stored, every held sync gets its
// assignment and the group is Stable.
func TestSyncStoresThenAnswers(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b, c := newClient("a", "range"), newClient("b", "range"), newClient("c", "range")
	c.version = 3
	h.rebalance([]*client{a, b, c}, []Waiter{h.enter(a), h.enter(b), h.enter(c)})
	wb := h.sync(b, nil)
	wa := h.sync(a, map[*client]string{a: "A", b: "B"}) // c gets nothing
	h.notAnswered("follower's sync before the store", wb)
	h.notAnswered("leader's sync before the store", wa)
	v := h.lastStore()
	if v.Generation != 1 || *v.Protocol != "range" || *v.Leader != a.memberID || v.ProtocolType != "consumer" || len(v.Members) != 3 ||
		v.CurrentStateTimestamp != h.now.UnixMilli() {
		t.Fatalf("store: got %+v, want generation 1 of a, b and c led by a", v)
	}
	for i, want := range []struct{ id, client, subscription, assignment string }{
		{a.memberID, "a", "a:range", "A"}, {b.memberID, "b", "b:range", "B"}, {c.memberID, "c", "c:range", ""},
	} {
		m := v.Members[i]
		if m.MemberID != want.id || m.ClientID != want.client || m.ClientHost != "/10.0.0.1" || string(m.Subscription) != want.subscription ||
			string(m.Assignment) != want.assignment || m.Assignment == nil || m.SessionTimeoutMillis != 10000 || m.RebalanceTimeoutMillis != 30000 {
			t.Fatalf("stored member %d: got %+v, want %+v", i, m, want)
		}
	}
	h.wantState(CompletingRebalance, 1)
	wc := h.sync(c, nil)
	h.stored(0)
	h.wantState(Stable, 1)
	h.assigned("a", wa, "A")
	h.assigned("b", wb, "B")
	h.assigned("c", wc, "")
	if r := h.syncReply(wa); *r.ProtocolType != "consumer" || *r.Protocol != "range" {
		t.Fatalf("v5 sync: got protocol %v/%v, want consumer/range", r.ProtocolType, r.Protocol)
	}
	h.assigned("b again in Stable", h.sync(b, nil), "B")
}

// A failed store answers the held syncs with its code and rebalances.
func TestStoredErrorFailsSyncsAndRebalances(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	wb := h.sync(b, nil)
	wa := h.sync(a, assignmentsOf([]*client{a, b}))
	h.stored(kerr.NotCoordinator.Code)
	wantCode(t, "leader's sync", h.syncCode(wa), kerr.NotCoordinator.Code)
	wantCode(t, "follower's sync", h.syncCode(wb), kerr.NotCoordinator.Code)
	h.wantState(PreparingRebalance, 1)
	h.rebalance([]*client{a, b}, []Waiter{h.join(a), h.join(b)})
	h.wantState(CompletingRebalance, 2)
}

// A Stored for an older generation, or the second Stored of the same
// Store, changes nothing.
func TestStoredOlderGenerationIgnored(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	h.rebalance([]*client{a}, []Waiter{h.enter(a)})
	wa := h.sync(a, assignmentsOf([]*client{a}))
	h.apply(h.g.Stored(h.now, 0, kerr.NotCoordinator.Code))
	h.notAnswered("sync after a Stored of generation 0", wa)
	h.stored(0)
	h.assigned("a", wa, "a-assignment")
	h.stored(kerr.NotCoordinator.Code)
	h.wantState(Stable, 1)
}

// Syncs Kafka refuses at once.
func TestSyncRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness, a, b *client) // a and b joined generation 1
		sync  func(c *client)
		want  int16
	}{
		{name: "unknown member", sync: func(c *client) { c.memberID = "nobody" }, want: kerr.UnknownMemberID.Code},
		{name: "illegal generation", sync: func(c *client) { c.generation = 2 }, want: kerr.IllegalGeneration.Code},
		{name: "v5 protocol type", sync: func(c *client) { c.protocolType = "connect" }, want: kerr.InconsistentGroupProtocol.Code},
		{name: "v5 protocol name", sync: func(c *client) { c.protocol = "roundrobin" }, want: kerr.InconsistentGroupProtocol.Code},
		{name: "v4 does not check the protocol", sync: func(c *client) { c.version, c.protocol = 4, "roundrobin" }, want: 0},
		{name: "rebalance in progress", setup: func(h *harness, a, b *client) {
			a.setProtocols("range", "sticky")
			h.join(a)
		}, want: kerr.RebalanceInProgress.Code},
		{name: "dead group", setup: func(h *harness, a, b *client) { h.apply(h.g.Unload()) }, want: kerr.CoordinatorNotAvailable.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			a, b := newClient("a", "range"), newClient("b", "range")
			h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
			if tt.setup != nil {
				tt.setup(h, a, b)
			}
			if tt.sync != nil {
				tt.sync(b)
			}
			w := h.sync(b, nil)
			if tt.want == 0 {
				h.notAnswered("valid follower sync", w)
				return
			}
			wantCode(t, "sync", h.syncCode(w), tt.want)
		})
	}
	t.Run("v5 without protocol", func(t *testing.T) {
		h := newHarness(t, testConfig())
		a := newClient("a", "range")
		h.rebalance([]*client{a}, []Waiter{h.enter(a)})
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Generation, req.MemberID = 5, 1, a.memberID
		w := h.waiter()
		h.apply(h.g.Sync(h.now, w, req))
		wantCode(t, "sync", h.syncCode(w), kerr.InconsistentGroupProtocol.Code)
	})
}

// Members that have not sent SyncGroup within the rebalance timeout after
// the join completed are removed, and the group rebalances (Kafka's
// pending-sync timeout).
func TestPendingSyncTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	joinedAt := h.now
	wa := h.sync(a, assignmentsOf([]*client{a, b}))
	h.stored(0)
	h.assigned("a", wa, "a-assignment")
	h.wantState(Stable, 1)
	for h.now.Before(joinedAt.Add(a.rebalance - 5*time.Second)) {
		h.advance(5 * time.Second)
		wantCode(t, "a's heartbeat", h.heartbeat(a), 0)
		wantCode(t, "b's heartbeat", h.heartbeat(b), 0)
	}
	h.advanceTo(joinedAt.Add(a.rebalance))
	h.wantState(PreparingRebalance, 1)
	if h.g.NumMembers() != 1 {
		t.Fatalf("members: got %d, want a alone", h.g.NumMembers())
	}
	wantCode(t, "b's heartbeat", h.heartbeat(b), kerr.UnknownMemberID.Code)
	wantCode(t, "a's heartbeat", h.heartbeat(a), kerr.RebalanceInProgress.Code)
}

// Once every member has synced the pending-sync timer stops.
func TestPendingSyncStopsWhenAllSynced(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	h.stable(a)
	if want := h.now.Add(a.session); !h.deadline.Equal(want) {
		t.Fatalf("deadline: got %v, want a's session expiry %v", h.deadline.Sub(t0), want.Sub(t0))
	}
}

// ---------------------------------------------------------------------------
// Heartbeats and sessions

func TestHeartbeatCodes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness, a, b *client) // from Stable generation 1
		beat  func(a *client)
		want  int16
	}{
		{name: "stable", want: 0},
		{name: "unknown member", beat: func(a *client) { a.memberID = "nobody" }, want: kerr.UnknownMemberID.Code},
		{name: "illegal generation", beat: func(a *client) { a.generation = 0 }, want: kerr.IllegalGeneration.Code},
		{name: "preparing rebalance", setup: func(h *harness, a, b *client) {
			b.setProtocols("range", "sticky")
			h.join(b)
		}, want: kerr.RebalanceInProgress.Code},
		{name: "completing rebalance", setup: func(h *harness, a, b *client) {
			h.rebalance([]*client{a, b}, []Waiter{h.join(a), h.join(b)})
		}, want: 0},
		{name: "empty", setup: func(h *harness, a, b *client) {
			h.leave(3, leaving(a.memberID, nil), leaving(b.memberID, nil))
		}, want: kerr.UnknownMemberID.Code},
		{name: "dead", setup: func(h *harness, a, b *client) { h.apply(h.g.Unload()) }, want: kerr.CoordinatorNotAvailable.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			a, b := newClient("a", "range"), newClient("b", "range")
			h.stable(a, b)
			if tt.setup != nil {
				tt.setup(h, a, b)
			}
			if tt.beat != nil {
				tt.beat(a)
			}
			wantCode(t, "heartbeat", h.heartbeat(a), tt.want)
		})
	}
}

// A member that stops heartbeating is removed at its session timeout; the
// group rebalances and the survivor rejoins alone.
func TestSessionExpiryRebalances(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.stable(a, b)
	start := h.now
	h.advance(6 * time.Second)
	wantCode(t, "a's heartbeat", h.heartbeat(a), 0)
	h.advanceTo(start.Add(b.session - time.Millisecond))
	h.wantState(Stable, 1)
	h.advance(time.Millisecond)
	h.wantState(PreparingRebalance, 1)
	wantCode(t, "b's heartbeat after expiry", h.heartbeat(b), kerr.UnknownMemberID.Code)
	wantCode(t, "a's heartbeat while rebalancing", h.heartbeat(a), kerr.RebalanceInProgress.Code)
	r := h.joined(a, h.join(a)) // every member has rejoined: at once
	if r.Generation != 2 || r.LeaderID != a.memberID || len(r.Members) != 1 {
		t.Fatalf("join: got %+v, want generation 2 with a alone", r)
	}
}

// A member that heartbeats but does not rejoin within the rebalance
// timeout is removed; the rebalance completes with the others.
func TestRebalanceTimeoutRemovesLateMember(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.stable(a, b)
	start := h.now
	wa := h.join(a)
	h.wantState(PreparingRebalance, 1)
	for h.now.Before(start.Add(a.rebalance - 5*time.Second)) {
		h.advance(5 * time.Second)
		wantCode(t, "b's heartbeat", h.heartbeat(b), kerr.RebalanceInProgress.Code)
	}
	h.notAnswered("a's join before the rebalance timeout", wa)
	h.advanceTo(start.Add(a.rebalance))
	r := h.joined(a, wa)
	if r.Generation != 2 || len(r.Members) != 1 || h.g.NumMembers() != 1 {
		t.Fatalf("join: got %+v with %d members, want generation 2 with a alone", r, h.g.NumMembers())
	}
	wantCode(t, "b's heartbeat", h.heartbeat(b), kerr.UnknownMemberID.Code)
}

// A static member that does not rejoin stays through the rebalance (its
// session decides), and a member that rejoined leads.
func TestStaticMemberSurvivesRebalanceTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range").static("a"), newClient("b", "range")
	h.stable(a, b)
	if h.g.Leader() != a.memberID {
		t.Fatalf("leader: got %q, want a (%s)", h.g.Leader(), a.memberID)
	}
	b.setProtocols("range", "sticky")
	wb := h.join(b)
	for range 5 {
		h.advance(5 * time.Second)
		h.heartbeat(a)
	}
	h.advance(5 * time.Second)
	r := h.joined(b, wb)
	if r.Generation != 2 || r.LeaderID != b.memberID || len(r.Members) != 2 || h.g.NumMembers() != 2 {
		t.Fatalf("join: got %+v, want generation 2 of a and b led by b", r)
	}
}

// A rebalance in which no member rejoined (the remaining ones are static)
// waits another rebalance timeout instead of completing.
func TestRebalanceWaitsForStaticMembers(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range").static("a"), newClient("b", "range").static("b")
	h.stable(a, b)
	start := h.now
	h.leave(3, leaving(b.memberID, b.instance))
	h.wantState(PreparingRebalance, 1)
	for h.now.Before(start.Add(a.rebalance + 10*time.Second)) {
		h.advance(5 * time.Second)
		wantCode(t, "a's heartbeat", h.heartbeat(a), kerr.RebalanceInProgress.Code)
	}
	h.wantState(PreparingRebalance, 1)
	if r := h.joined(a, h.join(a)); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("join: got %+v, want generation 2 with a alone", r)
	}
}

// A valid commit renews the member's session like a heartbeat.
func TestCommitRenewsSession(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.stable(a, b)
	for range 4 {
		h.advance(6 * time.Second)
		wantCode(t, "a's commit", h.commit(a), 0)
		wantCode(t, "b's heartbeat", h.heartbeat(b), 0)
	}
	h.wantState(Stable, 1)
}

// ---------------------------------------------------------------------------
// Static membership

// A static member rejoining with a new member id replaces its old id
// without a rebalance: the new id is stored, then the join answered with
// the current generation and the old leader id; the old id is fenced.
func TestStaticRejoinReplacesWithoutRebalance(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range").static("a"), newClient("b", "range").static("b")
	h.stable(a, b)
	oldA := *a
	restarted := newClient("a", "range").static("a")
	w := h.join(restarted)
	h.notAnswered("static rejoin before the store", w)
	v := h.lastStore()
	if v.Generation != 1 || len(v.Members) != 2 || v.Members[0].MemberID == oldA.memberID || string(v.Members[0].Assignment) != "a-assignment" {
		t.Fatalf("store: got %+v, want generation 1 with a's new id and its assignment", v)
	}
	h.stored(0)
	r := h.joined(restarted, w)
	if r.Generation != 1 || r.MemberID == oldA.memberID || r.LeaderID != oldA.memberID || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("join: got %+v, want generation 1, a new id, the old leader id %s, no members", r, oldA.memberID)
	}
	h.wantState(Stable, 1)
	if h.g.Leader() != restarted.memberID {
		t.Fatalf("leader: got %q, want the new id %q", h.g.Leader(), restarted.memberID)
	}
	h.assigned("restarted a", h.sync(restarted, nil), "a-assignment")
	wantCode(t, "new id's heartbeat", h.heartbeat(restarted), 0)
	wantCode(t, "old id's heartbeat", h.heartbeat(&oldA), kerr.FencedInstanceID.Code)
	wantCode(t, "b's heartbeat", h.heartbeat(b), 0)
}

// A static member restarting before its old instance sent SyncGroup is not
// removed by the pending-sync timeout: the new instance has the generation.
func TestStaticRejoinClearsPendingSync(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range").static("a"), newClient("b", "range").static("b")
	h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	joinedAt := h.now
	h.sync(a, assignmentsOf([]*client{a, b}))
	h.stored(0)
	restarted := newClient("b", "range").static("b")
	w := h.join(restarted)
	h.stored(0)
	h.joined(restarted, w)
	for h.now.Before(joinedAt.Add(a.rebalance + 5*time.Second)) {
		h.advance(5 * time.Second)
		wantCode(t, "a's heartbeat", h.heartbeat(a), 0)
		wantCode(t, "restarted b's heartbeat", h.heartbeat(restarted), 0)
	}
	h.wantState(Stable, 1)
	if h.g.NumMembers() != 2 {
		t.Fatalf("members: got %d, want a and b", h.g.NumMembers())
	}
}

// A static rejoin whose store fails gives the member its old id back and
// the join the error.
func TestStaticRejoinStoreFails(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range").static("a")
	h.stable(a)
	restarted := newClient("a", "range").static("a")
	w := h.join(restarted)
	h.stored(kerr.NotCoordinator.Code)
	if r := h.joinReply(w); r == nil || r.ErrorCode != kerr.NotCoordinator.Code || r.MemberID != "" {
		t.Fatalf("join: got %+v, want NOT_COORDINATOR without a member id", r)
	}
	wantCode(t, "old id's heartbeat", h.heartbeat(a), 0)
	h.wantState(Stable, 1)
}

// A static rejoin with a protocol that changes the group's choice
// rebalances.
func TestStaticRejoinChangingProtocolRebalances(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range", "sticky").static("a")
	h.stable(a)
	restarted := newClient("a", "sticky", "range").static("a")
	// Every member has rejoined: the rebalance completes at once.
	if r := h.joined(restarted, h.join(restarted)); *r.Protocol != "sticky" || r.Generation != 2 {
		t.Fatalf("join: got %+v, want generation 2 with sticky", r)
	}
}

// A static rejoin while syncs are held fences the old id's sync and
// rebalances (the leader may be assigning to the old id).
func TestStaticRejoinFencesHeldSync(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range").static("a"), newClient("b", "range")
	h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	wb := h.sync(b, nil)
	wa := h.sync(a, assignmentsOf([]*client{a, b}))
	restarted := newClient("a", "range").static("a")
	w := h.join(restarted)
	wantCode(t, "old id's sync", h.syncCode(wa), kerr.FencedInstanceID.Code)
	wantCode(t, "b's sync", h.syncCode(wb), kerr.RebalanceInProgress.Code)
	h.wantState(PreparingRebalance, 1)
	h.stored(0) // the old assignment's store comes back: too late
	h.wantState(PreparingRebalance, 1)
	h.rebalance([]*client{restarted, b}, []Waiter{w, h.join(b)})
	h.wantState(CompletingRebalance, 2)
}

// Every request naming a static member's instance id with another member
// id is FENCED_INSTANCE_ID; an unknown instance id is UNKNOWN_MEMBER_ID.
func TestFencedInstance(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range").static("a")
	h.stable(a)
	impostor := *a
	impostor.memberID = "a-impostor"
	wantCode(t, "heartbeat", h.heartbeat(&impostor), kerr.FencedInstanceID.Code)
	wantCode(t, "commit", h.commit(&impostor), kerr.FencedInstanceID.Code)
	wantCode(t, "sync", h.syncCode(h.sync(&impostor, nil)), kerr.FencedInstanceID.Code)
	wantCode(t, "join", h.joinCode(h.join(&impostor)), kerr.FencedInstanceID.Code)
	r := h.leave(3, leaving(impostor.memberID, impostor.instance))
	wantCode(t, "leave", r.Members[0].ErrorCode, kerr.FencedInstanceID.Code)
	stranger := *a
	stranger.instance = ptr("x")
	wantCode(t, "heartbeat of an unknown instance", h.heartbeat(&stranger), kerr.UnknownMemberID.Code)
	h.wantState(Stable, 1)
	wantCode(t, "a's heartbeat", h.heartbeat(a), 0)
}

// ---------------------------------------------------------------------------
// LeaveGroup

func TestLeaveV0(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.stable(a, b)
	r := h.leave(0, leaving("nobody", nil))
	wantCode(t, "unknown member's leave", r.ErrorCode, kerr.UnknownMemberID.Code)
	h.wantState(Stable, 1)
	r = h.leave(0, leaving(b.memberID, nil))
	wantCode(t, "b's leave", r.ErrorCode, 0)
	if len(r.Members) != 0 {
		t.Fatalf("v0 response members: got %+v, want none", r.Members)
	}
	h.wantState(PreparingRebalance, 1)
	h.joined(a, h.join(a))
	h.wantState(CompletingRebalance, 2)
}

func TestLeaveBatched(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range").static("a"), newClient("b", "range")
	c, d := newClient("c", "range").static("c"), newClient("d", "range")
	h.stable(a, b, c, d)
	pending := newClient("p", "range")
	pending.memberID = h.joinReply(h.join(pending)).MemberID
	r := h.leave(5,
		leaving(b.memberID, nil),
		leaving("nobody", nil),
		leaving("", c.instance),
		leaving("", ptr("x")),
		leaving("a-wrong", a.instance),
		leaving(pending.memberID, nil),
	)
	want := []int16{0, kerr.UnknownMemberID.Code, 0, kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code, 0}
	if len(r.Members) != len(want) {
		t.Fatalf("response members: got %+v, want %d", r.Members, len(want))
	}
	for i, code := range want {
		wantCode(t, fmt.Sprintf("member %d (%s)", i, r.Members[i].MemberID), r.Members[i].ErrorCode, code)
	}
	if r.Members[2].InstanceID == nil || *r.Members[2].InstanceID != "c" {
		t.Fatalf("member 2: got instance %v, want c echoed", r.Members[2].InstanceID)
	}
	if h.g.NumMembers() != 2 {
		t.Fatalf("members: got %d, want a and d", h.g.NumMembers())
	}
	h.wantState(PreparingRebalance, 1)
	wantCode(t, "pending member's join", h.joinCode(h.join(pending)), kerr.UnknownMemberID.Code)
}

// The last member leaving makes the group Empty, stored without members.
func TestLeaveLastMemberEmpties(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	h.stable(a)
	h.advance(time.Second)
	wantCode(t, "leave", h.leave(1, leaving(a.memberID, nil)).ErrorCode, 0)
	h.wantState(Empty, 2)
	v := h.lastStore()
	if v.Generation != 2 || v.Protocol != nil || v.Leader != nil || len(v.Members) != 0 || v.ProtocolType != "consumer" ||
		v.CurrentStateTimestamp != h.now.UnixMilli() {
		t.Fatalf("store: got %+v, want generation 2 without protocol, leader or members", v)
	}
	if !h.g.StateSince().Equal(h.now) || h.g.Protocol() != "" || h.g.Leader() != "" {
		t.Fatalf("group: got since %v protocol %q leader %q, want now and none", h.g.StateSince(), h.g.Protocol(), h.g.Leader())
	}
	if !h.deadline.IsZero() {
		t.Fatalf("deadline: got %v, want none", h.deadline)
	}
	h.stored(kerr.NotCoordinator.Code) // ignored, as Kafka
	h.wantState(Empty, 2)
	// A new member starts generation 3 after the initial delay, without
	// extensions (only a brand-new group extends it).
	b, c := newClient("b", "range"), newClient("c", "range")
	wb := h.enter(b)
	start := h.now
	h.advance(time.Second)
	wc := h.enter(c)
	h.advanceTo(start.Add(3 * time.Second))
	h.rebalance([]*client{b, c}, []Waiter{wb, wc})
	h.wantState(CompletingRebalance, 3)
}

// A member leaving while its sync is held: its sync is UNKNOWN_MEMBER_ID,
// the others' REBALANCE_IN_PROGRESS.
func TestLeaveAnswersHeldSync(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range")
	h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	wa, wb := h.sync(a, nil), h.sync(b, nil)
	h.leave(3, leaving(a.memberID, nil))
	wantCode(t, "leaver's sync", h.syncCode(wa), kerr.UnknownMemberID.Code)
	wantCode(t, "other's sync", h.syncCode(wb), kerr.RebalanceInProgress.Code)
	h.wantState(PreparingRebalance, 1)
}

// ---------------------------------------------------------------------------
// Offsets

func TestValidateCommit(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(h *harness, a *client) // a is Stable in generation 1
		generation int32
		memberID   string // "a" for a's id
		instance   *string
		want       int16
	}{
		{name: "member of stable", generation: 1, memberID: "a", want: 0},
		{name: "no member in stable", generation: -1, want: kerr.UnknownMemberID.Code},
		{name: "empty group without member", setup: emptied, generation: -1, want: 0},
		{name: "empty group with member id", setup: emptied, generation: 1, memberID: "a", want: kerr.UnknownMemberID.Code},
		{name: "unknown member", generation: 1, memberID: "nobody", want: kerr.UnknownMemberID.Code},
		{name: "illegal generation", generation: 2, memberID: "a", want: kerr.IllegalGeneration.Code},
		{name: "generation -1 of a member", generation: -1, memberID: "a", want: kerr.IllegalGeneration.Code},
		{name: "unknown instance", generation: 1, memberID: "a", instance: ptr("other"), want: kerr.UnknownMemberID.Code},
		{name: "preparing rebalance", setup: func(h *harness, a *client) { h.join(newClient("b", "range").static("b")) }, generation: 1, memberID: "a", want: 0},
		{name: "completing rebalance", setup: func(h *harness, a *client) {
			h.rebalance([]*client{a}, []Waiter{h.join(a)})
		}, generation: 2, memberID: "a", want: kerr.RebalanceInProgress.Code},
		{name: "dead", setup: func(h *harness, a *client) { h.apply(h.g.Unload()) }, generation: -1, want: kerr.CoordinatorNotAvailable.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			a := newClient("a", "range")
			h.stable(a)
			if tt.setup != nil {
				tt.setup(h, a)
			}
			id := tt.memberID
			if id == "a" {
				id = a.memberID
			}
			code, out := h.g.ValidateCommit(h.now, tt.generation, id, tt.instance)
			h.apply(out)
			wantCode(t, "commit", code, tt.want)
		})
	}
	t.Run("static member with its instance id", func(t *testing.T) {
		h := newHarness(t, testConfig())
		a := newClient("a", "range").static("a")
		h.stable(a)
		wantCode(t, "commit", h.commit(a), 0)
	})
}

// emptied makes a Stable group of a Empty.
func emptied(h *harness, a *client) { h.leave(0, leaving(a.memberID, nil)) }

func TestValidateTxnCommitAndFetch(t *testing.T) {
	h := newHarness(t, testConfig())
	a := newClient("a", "range")
	wantCode(t, "txn commit to a new group", h.g.ValidateTxnCommit(-1, "", nil), 0)
	h.rebalance([]*client{a}, []Waiter{h.enter(a)})
	wantCode(t, "txn commit without member while completing", h.g.ValidateTxnCommit(-1, "", nil), 0)
	wantCode(t, "txn commit of a member while completing", h.g.ValidateTxnCommit(1, a.memberID, nil), 0)
	wantCode(t, "txn commit of an old generation", h.g.ValidateTxnCommit(0, a.memberID, nil), kerr.IllegalGeneration.Code)
	wantCode(t, "txn commit of an unknown member", h.g.ValidateTxnCommit(1, "nobody", nil), kerr.UnknownMemberID.Code)
	wantCode(t, "fetch", h.g.ValidateFetch("", -1), 0)
	wantCode(t, "fetch of a member", h.g.ValidateFetch(a.memberID, 1), 0)
	h.apply(h.g.Unload())
	wantCode(t, "txn commit to a dead group", h.g.ValidateTxnCommit(-1, "", nil), kerr.CoordinatorNotAvailable.Code)
	wantCode(t, "fetch from a dead group", h.g.ValidateFetch("", -1), kerr.GroupIDNotFound.Code)
}

// ---------------------------------------------------------------------------
// Restore, unload, describe, delete

// storedGroup is the metadata of a Stable generation 5 of m1 and m2.
func storedGroup() *kmsg.GroupMetadataValue {
	v := new(kmsg.GroupMetadataValue)
	v.Default()
	v.Version = 3
	v.ProtocolType = "consumer"
	v.Generation = 5
	v.Protocol = ptr("range")
	v.Leader = ptr("m1")
	v.CurrentStateTimestamp = t0.Add(-time.Hour).UnixMilli()
	for _, m := range []struct {
		id      string
		session time.Duration
	}{{"m1", 10 * time.Second}, {"m2", 20 * time.Second}} {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.ClientID = "client-" + m.id
		vm.ClientHost = "/10.0.0.2"
		vm.SessionTimeoutMillis = ms(m.session)
		vm.RebalanceTimeoutMillis = 30000
		vm.Subscription = []byte(m.id + ":range")
		vm.Assignment = []byte(m.id + "-assignment")
		v.Members = append(v.Members, vm)
	}
	return v
}

// A restored group is Stable: its members heartbeat and sync, and one that
// stops heartbeating expires and rebalances the group.
func TestRestore(t *testing.T) {
	h := newHarness(t, testConfig())
	g, out := Restore("g", testConfig(), storedGroup(), h.now)
	h.g = g
	h.apply(out)
	h.wantState(Stable, 5)
	if g.Leader() != "m1" || g.Protocol() != "range" || g.ProtocolType() != "consumer" || g.NumMembers() != 2 || g.ID() != "g" ||
		!g.StateSince().Equal(t0.Add(-time.Hour)) {
		t.Fatalf("restored: got leader %q protocol %q/%q members %d since %v", g.Leader(), g.ProtocolType(), g.Protocol(), g.NumMembers(), g.StateSince())
	}
	if want := h.now.Add(10 * time.Second); !h.deadline.Equal(want) {
		t.Fatalf("deadline: got %v, want m1's session expiry %v", h.deadline.Sub(t0), want.Sub(t0))
	}
	m1 := &client{name: "m1", version: 4, memberID: "m1", generation: 5, protocol: "range", protocolType: "consumer", session: 10 * time.Second, rebalance: 30 * time.Second}
	m2 := &client{name: "m2", version: 5, memberID: "m2", generation: 5, protocol: "range", protocolType: "consumer", session: 20 * time.Second, rebalance: 30 * time.Second}
	m2.setProtocols("range")
	wantCode(t, "m1's heartbeat", h.heartbeat(m1), 0)
	h.assigned("m2's sync", h.sync(m2, nil), "m2-assignment")
	h.advance(5 * time.Second)
	wantCode(t, "m2's heartbeat", h.heartbeat(m2), 0)
	h.advance(5 * time.Second)
	h.wantState(PreparingRebalance, 5)
	wantCode(t, "m1's heartbeat after expiry", h.heartbeat(m1), kerr.UnknownMemberID.Code)
	if r := h.joined(m2, h.join(m2)); r.Generation != 6 || r.LeaderID != "m2" || len(r.Members) != 1 {
		t.Fatalf("join: got %+v, want generation 6 led by m2 alone", r)
	}
}

func TestRestoreWithoutMembers(t *testing.T) {
	v := storedGroup()
	v.Members, v.Protocol, v.Leader = nil, nil, nil
	g, out := Restore("g", testConfig(), v, t0)
	if g.State() != Empty || g.Generation() != 5 || g.Leader() != "" || !out.Deadline.IsZero() || !g.StateSince().Equal(t0.Add(-time.Hour)) {
		t.Fatalf("restored: got %v generation %d leader %q deadline %v, want Empty generation 5 without timers", g.State(), g.Generation(), g.Leader(), out.Deadline)
	}
	v.CurrentStateTimestamp = -1
	if g, _ := Restore("g", testConfig(), v, t0); !g.StateSince().IsZero() {
		t.Fatalf("state since without a stored timestamp: got %v, want zero", g.StateSince())
	}
}

// A restored group larger than group.max.size rebalances at once.
func TestRestoreOverCapacityRebalances(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSize = 1
	g, out := Restore("g", cfg, storedGroup(), t0)
	if g.State() != PreparingRebalance || !out.Deadline.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("restored: got %v deadline %v, want PreparingRebalance and m1's session expiry", g.State(), out.Deadline)
	}
	// The first to rejoin fills the group; the second is turned away and
	// removed, which completes the rebalance.
	h := newHarness(t, cfg)
	h.g = g
	h.apply(out)
	m1, m2 := newClient("m1", "range"), newClient("m2", "range")
	m1.memberID, m2.memberID = "m1", "m2"
	w2 := h.join(m2)
	wantCode(t, "m1's join", h.joinCode(h.join(m1)), kerr.GroupMaxSizeReached.Code)
	if r := h.joined(m2, w2); r.Generation != 6 || len(r.Members) != 1 || g.NumMembers() != 1 {
		t.Fatalf("join: got %+v with %d members, want generation 6 with m2 alone", r, g.NumMembers())
	}
}

// Unload answers held joins and syncs NOT_COORDINATOR; the group is Dead.
func TestUnload(t *testing.T) {
	t.Run("held joins", func(t *testing.T) {
		h := newHarness(t, testConfig())
		a, b := newClient("a", "range"), newClient("b", "range")
		h.stable(a, b)
		w := h.join(a)
		out := h.apply(h.g.Unload())
		wantCode(t, "held join", h.joinCode(w), kerr.NotCoordinator.Code)
		if !out.Deadline.IsZero() || h.g.NumMembers() != 0 {
			t.Fatalf("unloaded: got deadline %v and %d members, want none", out.Deadline, h.g.NumMembers())
		}
		h.wantState(Dead, 1)
	})
	t.Run("held syncs", func(t *testing.T) {
		h := newHarness(t, testConfig())
		a, b := newClient("a", "range"), newClient("b", "range")
		h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
		wa, wb := h.sync(a, assignmentsOf([]*client{a, b})), h.sync(b, nil)
		h.apply(h.g.Unload())
		wantCode(t, "leader's sync", h.syncCode(wa), kerr.NotCoordinator.Code)
		wantCode(t, "follower's sync", h.syncCode(wb), kerr.NotCoordinator.Code)
		h.stored(0) // the store completes after the unload: ignored
		h.wantState(Dead, 1)
		wantCode(t, "leave", h.leave(3, leaving(a.memberID, nil)).ErrorCode, kerr.CoordinatorNotAvailable.Code)
		if d := h.g.Describe(); d.State != "Dead" || len(d.Members) != 0 || d.ProtocolType != "" {
			t.Fatalf("describe: got %+v, want Dead without members", d)
		}
	})
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b := newClient("a", "range"), newClient("b", "range").static("b")
	h.rebalance([]*client{a, b}, []Waiter{h.enter(a), h.enter(b)})
	d := h.g.Describe()
	if d.Group != "g" || d.State != "CompletingRebalance" || d.ProtocolType != "consumer" || d.Protocol != "" || len(d.Members) != 2 ||
		d.Members[0].ProtocolMetadata != nil || d.Members[0].ClientID != "a" || d.AuthorizedOperations != math.MinInt32 {
		t.Fatalf("describe while completing: got %+v, want members without metadata", d)
	}
	h.syncAll([]*client{a, b})
	d = h.g.Describe()
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 {
		t.Fatalf("describe: got %+v, want Stable with range", d)
	}
	m := d.Members[1]
	if m.MemberID != b.memberID || *m.InstanceID != "b" || m.ClientID != "b" || m.ClientHost != "/10.0.0.1" ||
		string(m.ProtocolMetadata) != "b:range" || string(m.MemberAssignment) != "b-assignment" {
		t.Fatalf("described member: got %+v, want b with its metadata and assignment", m)
	}
}

func TestDeletable(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCode(t, "new group", h.g.Deletable(), 0)
	a := newClient("a", "range")
	h.enter(a)
	wantCode(t, "rebalancing group", h.g.Deletable(), kerr.NonEmptyGroup.Code)
	h.apply(h.g.Unload())
	wantCode(t, "dead group", h.g.Deletable(), 0)
}

// Tick before every timer does nothing (the harness checks it after every
// event); a Tick long after a session expiry and a rebalance timeout fires
// both, in order.
func TestTickFiresDueTimersInOrder(t *testing.T) {
	h := newHarness(t, testConfig())
	a, b, c := newClient("a", "range"), newClient("b", "range"), newClient("c", "range")
	h.stable(a, b, c)
	start := h.now
	h.advance(5 * time.Second)
	h.heartbeat(a)
	h.heartbeat(b)
	// c expires at +10 s and the group rebalances; a and b, which do not
	// rejoin, expire at +15 s, which completes the rebalance: Empty.
	h.advanceTo(start.Add(time.Hour))
	h.wantState(Empty, 2)
	if v := h.lastStore(); v.Generation != 2 || len(v.Members) != 0 {
		t.Fatalf("store: got %+v, want the Empty generation 2", v)
	}
}

// The default member id is the prefix and a random UUID, Kafka's format.
func TestDefaultMemberID(t *testing.T) {
	g := New("g", DefaultConfig())
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = 4, 10000, 30000, "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	out := g.Join(t0, 1, req, "client", "/h")
	id := out.Replies[0].Join.MemberID
	if !regexp.MustCompile(`^client-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("member id: got %q, want client-<uuid>", id)
	}
	req.InstanceID, req.Version = ptr("instance"), 5
	out = g.Join(t0, 2, req, "client", "/h")
	if g.NumMembers() != 1 || len(out.Replies) != 0 || !out.Deadline.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("static join: got %d members, replies %+v, deadline %v; want one member held until the initial delay ends", g.NumMembers(), out.Replies, out.Deadline)
	}
}

// ---------------------------------------------------------------------------
// Random schedules

// checkInvariants fails if the group's structure is inconsistent.
func checkInvariants(t *testing.T, g *Group, step int) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (%v generation %d): "+format, append([]any{step, g.state, g.generation}, args...)...)
	}
	if len(g.members) != len(g.order) {
		fail("%d members by id, %d in order", len(g.members), len(g.order))
	}
	statics := 0
	for _, m := range g.order {
		if g.members[m.id] != m {
			fail("member %s: not under its id", m.id)
		}
		if m.instanceID != nil {
			statics++
			if g.static[*m.instanceID] != m.id {
				fail("static member %s: instance %s maps to %q", m.id, *m.instanceID, g.static[*m.instanceID])
			}
		}
		if _, ok := g.pending[m.id]; ok {
			fail("member %s: also pending", m.id)
		}
		if m.sync != nil && g.state != CompletingRebalance {
			fail("member %s: holds a sync", m.id)
		}
		if m.join != nil && g.state != PreparingRebalance && !(g.state == Stable && m.instanceID != nil) {
			fail("member %s: holds a join", m.id)
		}
	}
	if statics != len(g.static) {
		fail("%d static members, %d instance ids", statics, len(g.static))
	}
	if (g.leader == "") != (len(g.order) == 0) || (g.leader != "" && g.members[g.leader] == nil) {
		fail("leader %q of %d members", g.leader, len(g.order))
	}
	switch g.state {
	case Empty, Dead:
		if len(g.order) != 0 {
			fail("%d members", len(g.order))
		}
	case CompletingRebalance, Stable:
		if len(g.order) == 0 || g.protocol == "" {
			fail("%d members, protocol %q", len(g.order), g.protocol)
		}
	}
	if g.syncArmed && g.state != CompletingRebalance && g.state != Stable {
		fail("pending-sync timer armed")
	}
}

// checkHeld fails unless the requests the broker holds are exactly those
// the group's members hold: none is forgotten unanswered.
func checkHeld(t *testing.T, h *harness, step int) {
	t.Helper()
	held := make(map[Waiter]bool)
	for _, m := range h.g.order {
		for _, r := range []*heldRequest{m.join, m.sync} {
			if r != nil {
				if held[r.waiter] {
					t.Fatalf("step %d: request %d held twice", step, r.waiter)
				}
				held[r.waiter] = true
			}
		}
	}
	if len(held) != len(h.held) {
		t.Fatalf("step %d: group holds %v, broker holds %v", step, held, h.held)
	}
	for w := range h.held {
		if !held[w] {
			t.Fatalf("step %d: request %d held by the broker, not by the group", step, w)
		}
	}
}

// TestRandomSchedules drives a group with clients doing random things at
// random times (and random store outcomes), checking after every event
// that the group's structure holds and that every held request is answered
// at most once; unloading at the end must answer every request still held.
func TestRandomSchedules(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			cfg := testConfig()
			cfg.MaxSize = 4
			h := newHarness(t, cfg)
			var cs []*client
			for i := range 5 {
				c := newClient(fmt.Sprintf("c%d", i), "range", "roundrobin")
				c.version = int16(rng.IntN(6))
				if i%2 == 0 {
					c.static(fmt.Sprintf("i%d", i)).version = 5
				}
				cs = append(cs, c)
			}
			joins := make(map[*client]Waiter)
			syncs := make(map[*client]Waiter)
			stored := 0 // Stores answered so far
			// settle takes the answers the clients were waiting for.
			settle := func() {
				for c, w := range joins {
					r := h.joinReply(w)
					if r == nil {
						continue
					}
					delete(joins, c)
					switch r.ErrorCode {
					case 0, kerr.MemberIDRequired.Code:
						c.memberID, c.generation = r.MemberID, r.Generation
						if r.Protocol != nil {
							c.protocol = *r.Protocol
						}
					case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
						c.memberID, c.generation = "", -1
					}
				}
				for c, w := range syncs {
					if h.syncReply(w) != nil {
						delete(syncs, c)
					}
				}
			}
			for step := range 1000 {
				c := cs[rng.IntN(len(cs))]
				switch action := rng.IntN(12); {
				case action < 2 && joins[c] == 0:
					if rng.IntN(4) == 0 {
						c.setProtocols([]string{"range", "roundrobin", "range:v2", "sticky"}[rng.IntN(4)])
					}
					joins[c] = h.join(c)
				case action < 5 && syncs[c] == 0 && c.generation >= 0:
					syncs[c] = h.sync(c, assignmentsOf(cs))
				case action < 8:
					if code := h.heartbeat(c); code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code {
						c.memberID, c.generation = "", -1
					}
				case action == 8 && rng.IntN(4) == 0:
					h.leave(int16(rng.IntN(6)), leaving(c.memberID, c.instance))
				case action == 9:
					h.commit(c)
				case action == 10 && stored < len(h.stores):
					code := int16(0)
					if rng.IntN(5) == 0 {
						code = kerr.NotCoordinator.Code
					}
					h.apply(h.g.Stored(h.now, h.stores[stored].Generation, code))
					stored++
				default:
					h.advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
				}
				settle()
				checkInvariants(t, h.g, step)
				checkHeld(t, h, step)
			}
			t.Logf("generation %d, %v, %d replies, %d stores, %v", h.g.Generation(), h.g.State(), len(h.replies), len(h.stores), h.now.Sub(t0))
			h.apply(h.g.Unload())
			if len(h.held) != 0 {
				t.Fatalf("after Unload: got %d requests still held, want none", len(h.held))
			}
		})
	}
}
