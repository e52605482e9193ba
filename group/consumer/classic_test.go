package consumer

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/replication/log"
)

// subscription encodes a ConsumerProtocolSubscription v1 of topics with
// owned partitions of topic "a".
func subscription(topics []string, ownedA ...int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = topics
	if len(ownedA) > 0 {
		m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "a", Partitions: ownedA}}
	}
	return m.AppendTo(nil)
}

// assignmentOfA encodes a ConsumerProtocolAssignment v1 of partitions of
// topic "a".
func assignmentOfA(ps ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 1
	if len(ps) > 0 {
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: ps}}
	}
	return a.AppendTo(nil)
}

// classicSnapshot is a Stable classic group of generation 5 whose
// members m1 and m2 split topic "a" (cooperative-sticky).
func classicSnapshot() group.Snapshot {
	member := func(id string, ps ...int32) group.SnapshotMember {
		return group.SnapshotMember{
			ID: id, ClientID: "client-" + id, ClientHost: "/10.0.0.1",
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second,
			Protocols:  []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: subscription([]string{"a"}, ps...)}},
			Assignment: assignmentOfA(ps...),
		}
	}
	return group.Snapshot{Generation: 5, ProtocolType: "consumer", Protocol: "cooperative-sticky",
		Members: []group.SnapshotMember{member("m1", 0, 1), member("m2", 2, 3)}}
}

// TestFromClassic converts classic groups to consumer groups: the
// members stay, classic, Stable at the generation with the assignment
// they had as target; the records written rebuild the same group.
// Policies, protocol types and sizes that forbid it leave the group
// classic.
func TestFromClassic(t *testing.T) {
	md := topics{"a": topicA}
	malformed := classicSnapshot()
	malformed.Members[1].Protocols[0].Metadata = []byte{0, 1, 0}
	connect := classicSnapshot()
	connect.ProtocolType = "connect"
	for _, tc := range []struct {
		name    string
		policy  MigrationPolicy
		maxSize int
		s       group.Snapshot
		err     string // "" if it converts
	}{
		{name: "bidirectional upgrades", policy: MigrationBidirectional, s: classicSnapshot()},
		{name: "upgrade upgrades", policy: MigrationUpgrade, s: classicSnapshot()},
		{name: "downgrade does not upgrade", policy: MigrationDowngrade, s: classicSnapshot(), err: "does not upgrade"},
		{name: "disabled does not upgrade", policy: MigrationDisabled, s: classicSnapshot(), err: "does not upgrade"},
		{name: "another protocol type", policy: MigrationBidirectional, s: connect, err: `protocol type "connect"`},
		{name: "more members than the maximum", policy: MigrationBidirectional, maxSize: 1, s: classicSnapshot(), err: "group.consumer.max.size"},
		{name: "a subscription that does not decode", policy: MigrationBidirectional, s: malformed, err: "subscription of member m2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MigrationPolicy = tc.policy
			if tc.maxSize > 0 {
				cfg.MaxSize = tc.maxSize
			}
			g, out, err := FromClassic("g", cfg, tc.s, md, t0)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Epoch() != 5 || g.AssignmentEpoch() != 5 || g.State() != "Stable" {
				t.Fatalf("got epoch %d, assignment epoch %d, state %s; want 5, 5, Stable", g.Epoch(), g.AssignmentEpoch(), g.State())
			}
			for id, ps := range map[string][]int32{"m1": {0, 1}, "m2": {2, 3}} {
				m := g.Member(id)
				wantA := Assignment{a: ps}
				switch {
				case m == nil:
					t.Fatalf("member %s: gone", id)
				case m.Classic == nil || m.Classic.SessionTimeout != 10*time.Second || m.Classic.Protocols[0].Name != "cooperative-sticky":
					t.Fatalf("member %s: got classic metadata %+v, want a 10 s session and cooperative-sticky", id, m.Classic)
				case m.Epoch != 5 || m.State != Stable || !m.Assigned.Equal(wantA) || !g.Target(id).Equal(wantA):
					t.Fatalf("member %s: got epoch %d, state %v, assigned %v, target %v; want 5, stable, %v, %v", id, m.Epoch, m.State, m.Assigned, g.Target(id), wantA, wantA)
				case m.RebalanceTimeout != 20*time.Second || m.ClientID != "client-"+id || len(m.SubscribedTopicNames) != 1:
					t.Fatalf("member %s: got %+v", id, m)
				}
			}
			if out.Deadline != t0.Add(10*time.Second) {
				t.Fatalf("got deadline %v, want the members' session timeout", out.Deadline.Sub(t0))
			}
			loaded := load(t, out.Records, cfg)
			for id, w := range g.members {
				m := loaded.members[id]
				if m == nil || !sameMetadata(m, w) || m.Epoch != w.Epoch || !m.Assigned.Equal(w.Assigned) || !loaded.target[id].Equal(g.target[id]) {
					t.Fatalf("member %s read back: got %+v, want %+v", id, m, w)
				}
			}
		})
	}
}

// load replays records into a Loader and returns the one group read.
func load(t *testing.T, records []log.KV, cfg Config) *Group {
	t.Helper()
	l := NewLoader()
	for _, r := range records {
		if err := l.Apply(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	gs := l.Groups(cfg, t0)
	if len(gs) != 1 {
		t.Fatalf("read back %d groups, want 1", len(gs))
	}
	return gs[0]
}

// classicScenario is a scenario whose group was converted from
// classicSnapshot.
func classicScenario(t *testing.T, policy MigrationPolicy) *scenario {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MigrationPolicy = policy
	s := &scenario{t: t, md: topics{"a": topicA}, now: t0}
	g, out, err := FromClassic("g", cfg, classicSnapshot(), s.md, t0)
	if err != nil {
		t.Fatal(err)
	}
	s.g, s.records = g, out.Records
	return s
}

// join sends a classic member's JoinGroup v9 (memberID "" to ask for
// one) subscribing to "a" and owning ownedA.
func (s *scenario) join(memberID string, ownedA ...int32) *kmsg.JoinGroupResponse {
	s.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID, req.ProtocolType = "g", memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: subscription([]string{"a"}, ownedA...)}}
	resp, out := s.g.JoinClassic(s.now, req, "client", "/127.0.0.1", s.md)
	s.records = append(s.records, out.Records...)
	s.checkOwnership()
	return resp
}

// sync sends a classic member's SyncGroup and returns its code and the
// partitions of "a" it is given.
func (s *scenario) sync(memberID string, generation int32) (int16, []int32) {
	s.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = "g", memberID, generation
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("cooperative-sticky")
	resp, out := s.g.SyncClassic(s.now, req, s.md)
	s.records = append(s.records, out.Records...)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		s.t.Fatalf("sync %s: the assignment does not decode: %v", memberID, err)
	}
	if a.Version != 1 {
		s.t.Fatalf("sync %s: got assignment version %d, want the subscription's 1", memberID, a.Version)
	}
	var ps []int32
	for _, t := range a.Topics {
		ps = append(ps, t.Partitions...)
	}
	return 0, ps
}

// beat sends a classic member's Heartbeat and returns its code.
func (s *scenario) beat(memberID string, generation int32) int16 {
	s.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = "g", memberID, generation
	code, out := s.g.HeartbeatClassic(s.now, req)
	s.records = append(s.records, out.Records...)
	return code
}

// TestClassicMemberReconciliation walks a converted group through a
// consumer-protocol member's join: classic members are told to rejoin,
// one gives up half its partitions through its SyncGroup assignment
// before it moves to the new epoch, and only then does the new member
// get them.
func TestClassicMemberReconciliation(t *testing.T) {
	s := classicScenario(t, MigrationBidirectional)
	code := func(step string, got, want int16) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: got %v, want %v", step, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	code("m1 heartbeats at generation 5", s.beat("m1", 5), 0)

	r := s.heartbeat(hb{member: "c", epoch: 0, topics: []string{"a"}})
	want(t, "c joins with the consumer protocol: epoch 6, nothing free yet", r, 0, 6, Assignment{})
	if got := s.g.Target("c").Len(); got != 1 {
		t.Fatalf("c's target: got %d partitions, want 1 of 4 over 3 members", got)
	}

	code("m1 heartbeats: told to rejoin", s.beat("m1", 5), kerr.RebalanceInProgress.Code)
	code("m1 heartbeats at a wrong generation", s.beat("m1", 4), kerr.IllegalGeneration.Code)
	code("c through the classic Heartbeat", s.beat("c", 6), kerr.UnknownMemberID.Code)

	// Whoever of m1 and m2 must give a partition up to c does so; the
	// other keeps its two at epoch 6.
	giver, keeper := "m1", "m2"
	if s.g.Target("m1").Len() == 2 {
		giver, keeper = "m2", "m1"
	}
	owned := func(id string) []int32 { return s.g.Member(id).Assigned[a] }
	kept := owned(keeper)
	j := s.join(keeper, kept...)
	if j.ErrorCode != 0 || j.Generation != 6 || j.LeaderID != "" || *j.Protocol != "cooperative-sticky" {
		t.Fatalf("%s rejoins: got %v, generation %d, leader %q, protocol %v; want generation 6, no leader, cooperative-sticky",
			keeper, kerr.ErrorForCode(j.ErrorCode), j.Generation, j.LeaderID, j.Protocol)
	}
	c, ps := s.sync(keeper, 6)
	code(keeper+" syncs", c, 0)
	if len(ps) != 2 {
		t.Fatalf("%s syncs: got %v, want its two partitions", keeper, ps)
	}
	code(keeper+" heartbeats at 6", s.beat(keeper, 6), 0)

	before := owned(giver)
	j = s.join(giver, before...)
	if j.ErrorCode != 0 || j.Generation != 5 {
		t.Fatalf("%s rejoins owning %v: got %v, generation %d; want generation 5 (partitions to revoke)", giver, before, kerr.ErrorForCode(j.ErrorCode), j.Generation)
	}
	if got := s.g.Member(giver).State; got != UnrevokedPartitions {
		t.Fatalf("%s: got state %v, want unrevoked_partitions", giver, got)
	}
	c, ps = s.sync(giver, 5)
	code(giver+" syncs", c, 0)
	if len(ps) != 1 {
		t.Fatalf("%s syncs: got %v, want one partition (the other revoked)", giver, ps)
	}
	r = s.heartbeat(hb{member: "c", epoch: 6, owned: Assignment{}})
	want(t, "c waits while the giver has not revoked", r, 0, 6, nil)
	code(giver+" heartbeats: still told to rejoin", s.beat(giver, 5), kerr.RebalanceInProgress.Code)

	j = s.join(giver, ps...)
	if j.ErrorCode != 0 || j.Generation != 6 {
		t.Fatalf("%s rejoins having revoked: got %v, generation %d; want 6", giver, kerr.ErrorForCode(j.ErrorCode), j.Generation)
	}
	code(giver+" syncs at 6", func() int16 { c, _ := s.sync(giver, 6); return c }(), 0)
	r = s.heartbeat(hb{member: "c", epoch: 6, owned: Assignment{}})
	want(t, "c gets the revoked partition", r, 0, 6, s.g.Target("c"))
	code(giver+" heartbeats at 6", s.beat(giver, 6), 0)
	if got := s.g.State(); got != "Stable" {
		t.Fatalf("group: got state %s, want Stable", got)
	}

	// Offsets: a classic member commits at its generation, any version.
	if got := s.g.ValidateCommit(giver, 6, false, 2); got != 0 {
		t.Fatalf("%s commits at generation 6 with OffsetCommit v2: got %v, want none", giver, kerr.ErrorForCode(got))
	}
	if got := s.g.ValidateCommit(giver, 5, false, 8); got != kerr.IllegalGeneration.Code {
		t.Fatalf("%s commits at generation 5: got %v, want ILLEGAL_GENERATION", giver, kerr.ErrorForCode(got))
	}

	// The records rebuild the mixed group.
	loaded := load(t, s.records, s.g.cfg)
	for id, w := range s.g.members {
		m := loaded.members[id]
		if m == nil || !sameMetadata(m, w) || m.Epoch != w.Epoch || !m.Assigned.Equal(w.Assigned) {
			t.Fatalf("member %s read back: got %+v, want %+v", id, m, w)
		}
	}
	if loaded.Deadline() != t0.Add(10*time.Second) {
		t.Fatalf("a loaded classic member's session: got %v, want its own 10 s", loaded.Deadline().Sub(t0))
	}
}

// TestClassicJoinErrors covers the JoinGroups a consumer group refuses.
func TestClassicJoinErrors(t *testing.T) {
	s := classicScenario(t, MigrationBidirectional)
	for _, tc := range []struct {
		name     string
		edit     func(*kmsg.JoinGroupRequest)
		code     int16
		memberID bool // the response carries a new member id
	}{
		{name: "v4+ without member id", edit: func(r *kmsg.JoinGroupRequest) { r.MemberID = "" }, code: kerr.MemberIDRequired.Code, memberID: true},
		{name: "another protocol type", edit: func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, code: kerr.InconsistentGroupProtocol.Code},
		{name: "no protocol the members share", edit: func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Name = "range" }, code: kerr.InconsistentGroupProtocol.Code},
		{name: "a subscription that does not decode", edit: func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Metadata = []byte{0} }, code: kerr.InconsistentGroupProtocol.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version = 9
			req.Group, req.MemberID, req.ProtocolType = "g", "new", "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: subscription([]string{"a"})}}
			tc.edit(req)
			resp, out := s.g.JoinClassic(s.now, req, "client", "/h", s.md)
			if resp.ErrorCode != tc.code || len(out.Records) != 0 {
				t.Fatalf("got %v and %d records, want %v and none", kerr.ErrorForCode(resp.ErrorCode), len(out.Records), kerr.ErrorForCode(tc.code))
			}
			if tc.memberID && resp.MemberID == "" {
				t.Fatalf("got no member id, want one to join with")
			}
		})
	}
	if s.g.NumMembers() != 2 {
		t.Fatalf("got %d members, want the 2 of the classic group", s.g.NumMembers())
	}
}

// TestClassicMemberTimers: a classic member is removed when its own
// session timeout passes, when it does not join again within its
// rebalance timeout after it was told to, and when it does not sync
// within it after joining.
func TestClassicMemberTimers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(s *scenario)
		after time.Duration
	}{
		{name: "session", setup: func(s *scenario) {}, after: 10 * time.Second},
		{name: "join", setup: func(s *scenario) {
			s.heartbeat(hb{member: "c", epoch: 0, topics: []string{"a"}})
			s.now = s.now.Add(5 * time.Second)
			if code := s.beat("m1", 5); code != kerr.RebalanceInProgress.Code {
				t.Fatalf("m1 heartbeats: got %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
			}
			for i := 0; i < 3; i++ { // it heartbeats but does not join
				s.now = s.now.Add(5 * time.Second)
				s.beat("m1", 5)
				s.beat("m2", 5)
				s.heartbeat(hb{member: "c", epoch: 6})
			}
		}, after: 6 * time.Second},
		{name: "sync", setup: func(s *scenario) {
			s.join("m1", 0, 1)
			for i := 0; i < 3; i++ { // it heartbeats but does not sync
				s.now = s.now.Add(5 * time.Second)
				s.beat("m1", s.g.Member("m1").Epoch)
				s.beat("m2", 5)
			}
		}, after: 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := classicScenario(t, MigrationBidirectional)
			tc.setup(s)
			if out := s.g.Tick(s.now); len(out.Records) != 0 {
				t.Fatalf("a tick before the timer removed someone: %d records", len(out.Records))
			}
			s.now = s.now.Add(tc.after)
			if code := s.beat("m2", 5); code != 0 && code != kerr.RebalanceInProgress.Code {
				t.Fatalf("m2 heartbeats: got %v", kerr.ErrorForCode(code))
			}
			if s.g.Member("c") != nil {
				s.heartbeat(hb{member: "c", epoch: s.g.Member("c").Epoch})
			}
			s.g.Tick(s.now)
			if s.g.Member("m1") != nil {
				t.Fatalf("m1 is still a member after its %s timer", tc.name)
			}
			if s.g.Member("m2") == nil {
				t.Fatalf("m2, which heartbeats, was removed")
			}
		})
	}
}

// TestDowngrade: when the last member of the consumer protocol leaves a
// group whose other members are classic, the group says it may become a
// classic group again (unless the policy forbids it), and hands over its
// classic members with their target assignments and the tombstones of
// every record it wrote; the classic group rebuilt from them rebalances.
func TestDowngrade(t *testing.T) {
	for _, tc := range []struct {
		policy    MigrationPolicy
		downgrade bool
	}{
		{MigrationBidirectional, true},
		{MigrationDowngrade, true},
		{MigrationUpgrade, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MigrationPolicy = MigrationBidirectional
			s := &scenario{t: t, md: topics{"a": topicA}, now: t0}
			g, out, err := FromClassic("g", cfg, classicSnapshot(), s.md, t0)
			if err != nil {
				t.Fatal(err)
			}
			g.cfg.MigrationPolicy = tc.policy
			s.g, s.records = g, out.Records
			s.heartbeat(hb{member: "c", epoch: 0, topics: []string{"a"}})
			for range 2 { // the second join is after any revocation
				s.join("m1", s.g.Member("m1").Assigned[a]...)
				s.join("m2", s.g.Member("m2").Assigned[a]...)
			}

			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Group, req.MemberID, req.MemberEpoch = "g", "c", LeaveEpoch
			_, out = s.g.Heartbeat(s.now, req, "client", "/h", s.md)
			s.records = append(s.records, out.Records...)
			if out.Downgrade != tc.downgrade {
				t.Fatalf("c left: got Downgrade %v, want %v", out.Downgrade, tc.downgrade)
			}
			if !tc.downgrade {
				return
			}
			snap := s.g.ClassicSnapshot(s.md)
			if snap.Generation != s.g.Epoch()-1 || snap.ProtocolType != "consumer" || len(snap.Members) != 2 {
				t.Fatalf("got snapshot %+v, want generation %d (the members' epoch, before c left) and m1, m2", snap, s.g.Epoch()-1)
			}
			for _, id := range []string{"m1", "m2"} {
				if e := s.g.Member(id).Epoch; e != snap.Generation {
					t.Fatalf("member %s: got epoch %d, want the classic generation %d it goes on committing at", id, e, snap.Generation)
				}
			}
			for _, sm := range snap.Members {
				got, err := decodeAssignment(sm.Assignment, s.md)
				if err != nil || !got.Equal(s.g.Target(sm.ID)) || sm.SessionTimeout != 10*time.Second {
					t.Fatalf("member %s: got assignment %v (%v), session %v; want its target %v and 10 s", sm.ID, got, err, sm.SessionTimeout, s.g.Target(sm.ID))
				}
			}
			s.records = append(s.records, s.g.Tombstones()...)
			l := NewLoader()
			for _, r := range s.records {
				if err := l.Apply(r.Key, r.Value); err != nil {
					t.Fatal(err)
				}
			}
			if gs := l.Groups(cfg, t0); len(gs) != 0 {
				t.Fatalf("after the tombstones: read back %d consumer groups, want none", len(gs))
			}
			cg, v, cout := group.FromConsumer("g", group.DefaultConfig(), snap, s.now)
			if cg.State() != group.PreparingRebalance || cg.Generation() != snap.Generation || cg.Protocol() != "cooperative-sticky" || cg.NumMembers() != 2 {
				t.Fatalf("classic group: got %v generation %d protocol %q with %d members, want PreparingRebalance, %d, cooperative-sticky, 2",
					cg.State(), cg.Generation(), cg.Protocol(), cg.NumMembers(), snap.Generation)
			}
			if len(v.Members) != 2 || v.Generation != snap.Generation || cout.Deadline.IsZero() {
				t.Fatalf("classic group metadata: got %+v, deadline %v", v, cout.Deadline)
			}
		})
	}
}

// TestClassicRejoin: after a consumer-protocol member joined the
// converted group, what a classic member's JoinGroup says it owns
// decides where its reconciliation goes: an eager member, which revoked
// everything before joining, and a cooperative one that revoked what it
// lost both move to the new epoch at once; a cooperative one still
// owning a partition it must give up stays at its epoch, told to
// revoke it.
func TestClassicRejoin(t *testing.T) {
	for _, tc := range []struct {
		name       string
		owned      func(assigned, target []int32) []int32
		generation int32
		state      MemberState
	}{
		{"eager, owning nothing", func(_, _ []int32) []int32 { return nil }, 6, Stable},
		{"cooperative, revoked already", func(_, target []int32) []int32 { return target }, 6, Stable},
		{"cooperative, still owning all", func(assigned, _ []int32) []int32 { return assigned }, 5, UnrevokedPartitions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := classicScenario(t, MigrationBidirectional)
			s.heartbeat(hb{member: "c", epoch: 0, topics: []string{"a"}})
			giver := "m1"
			if s.g.Target("m1").Len() == 2 {
				giver = "m2"
			}
			owned := tc.owned(s.g.Member(giver).Assigned[a], s.g.Target(giver)[a])
			j := s.join(giver, owned...)
			m := s.g.Member(giver)
			if j.ErrorCode != 0 || j.Generation != tc.generation || m.State != tc.state {
				t.Fatalf("%s joins owning %v: got %v, generation %d, state %v; want generation %d, %v",
					giver, owned, kerr.ErrorForCode(j.ErrorCode), j.Generation, m.State, tc.generation, tc.state)
			}
			if _, ps := s.sync(giver, j.Generation); len(ps) != 1 {
				t.Fatalf("%s syncs: got %v, want the one partition it keeps", giver, ps)
			}
		})
	}
}
