package consumer

import (
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/replication/log"
)

// topics is a Metadata of fixed topics for tests.
type topics map[string]topicMeta

func (ts topics) Topic(name string) (TopicID, int32, bool) {
	t, ok := ts[name]
	return t.id, t.partitions, ok
}

func (ts topics) TopicNames() []string {
	var out []string
	for n := range ts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (ts topics) TopicName(id TopicID) string {
	for n, t := range ts {
		if t.id == id {
			return n
		}
	}
	return ""
}

var t0 = time.Unix(1000, 0)

// scenario drives one group and keeps every record it wrote.
type scenario struct {
	t       *testing.T
	g       *Group
	md      topics
	now     time.Time
	records []log.KV
}

func newScenario(t *testing.T, md topics) *scenario {
	cfg := DefaultConfig()
	return &scenario{t: t, g: New("g", cfg), md: md, now: t0}
}

// hb is one heartbeat: owned nil sends Topics null (a keepalive). A join
// or full heartbeat subscribes to regex when it is not "" (or emptyRegex
// is set: an empty regex, as librdkafka sends), and to topics when
// regex is "" or topics is not nil.
type hb struct {
	member     string
	epoch      int32
	instance   string
	topics     []string
	regex      string
	emptyRegex bool
	assignor   string
	owned      Assignment
	full       bool
}

func (s *scenario) heartbeat(h hb) *kmsg.ConsumerGroupHeartbeatResponse {
	s.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.MemberID = h.member
	req.MemberEpoch = h.epoch
	if h.instance != "" {
		req.InstanceID = &h.instance
	}
	if h.epoch == 0 || h.full {
		req.RebalanceTimeoutMillis = 30000
		if h.regex != "" || h.emptyRegex {
			req.SubscribedTopicRegex = &h.regex
		}
		if h.regex == "" || h.topics != nil {
			req.SubscribedTopicNames = h.topics
			if req.SubscribedTopicNames == nil {
				req.SubscribedTopicNames = []string{}
			}
		}
		if h.assignor != "" {
			req.ServerAssignor = &h.assignor
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	if h.owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, tp := range h.owned.topics() {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp, Partitions: h.owned[tp]})
		}
	}
	if code, msg := ValidateHeartbeat(req, s.g.cfg); code != 0 {
		s.t.Fatalf("heartbeat %+v: invalid: %s", h, msg)
	}
	resp, out := s.g.Heartbeat(s.now, req, "client", "/127.0.0.1", s.md)
	s.records = append(s.records, out.Records...)
	s.checkOwnership()
	return resp
}

// checkOwnership fails if two members own one partition, or the owners
// map disagrees with the members.
func (s *scenario) checkOwnership() {
	s.t.Helper()
	seen := map[topicPartition]string{}
	for id, m := range s.g.members {
		for tp, ps := range m.owned() {
			for _, p := range ps {
				k := topicPartition{tp, p}
				if o, ok := seen[k]; ok {
					s.t.Fatalf("partition %x/%d owned by %s and %s", tp[:1], p, o, id)
				}
				seen[k] = id
				if s.g.owners[k] != id {
					s.t.Fatalf("partition %x/%d: owners says %q, member %s owns it", tp[:1], p, s.g.owners[k], id)
				}
			}
		}
	}
	if len(seen) != len(s.g.owners) {
		s.t.Fatalf("owners has %d partitions, members own %d", len(s.g.owners), len(seen))
	}
}

// want checks a response.
func want(t *testing.T, step string, resp *kmsg.ConsumerGroupHeartbeatResponse, code int16, epoch int32, assigned Assignment) {
	t.Helper()
	if resp.ErrorCode != code {
		t.Fatalf("%s: got error %v, want %v", step, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(code))
	}
	if code != 0 {
		return
	}
	if resp.MemberEpoch != epoch {
		t.Fatalf("%s: got epoch %d, want %d", step, resp.MemberEpoch, epoch)
	}
	if assigned == nil {
		if resp.Assignment != nil {
			t.Fatalf("%s: got an assignment, want none", step)
		}
		return
	}
	if resp.Assignment == nil {
		t.Fatalf("%s: got no assignment, want %v", step, assigned)
	}
	got := Assignment{}
	for _, tp := range resp.Assignment.Topics {
		for _, p := range tp.Partitions {
			got.add(tp.TopicID, p)
		}
	}
	if !got.Equal(assigned) {
		t.Fatalf("%s: got assignment %v, want %v", step, got, assigned)
	}
}

var (
	topicA = topicMeta{id: tid(1), partitions: 4}
	topicB = topicMeta{id: tid(2), partitions: 2}
	a      = tid(1)
)

// TestReconciliation is KIP-848's walk-through: a second member joins a
// group whose only member owns every partition; the first must revoke
// half before the second gets them, and never do both own one.
func TestReconciliation(t *testing.T) {
	s := newScenario(t, topics{"a": topicA})
	r := s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}})
	want(t, "m1 joins", r, 0, 1, Assignment{a: {0, 1, 2, 3}})

	r = s.heartbeat(hb{member: "m2", epoch: 0, topics: []string{"a"}})
	want(t, "m2 joins: epoch 2, its partitions still m1's", r, 0, 2, Assignment{})
	if got := s.g.Member("m2").State; got != UnreleasedPartitions {
		t.Fatalf("m2: got state %v, want unreleased_partitions", got)
	}
	if got := s.g.State(); got != "Reconciling" {
		t.Fatalf("group: got state %s, want Reconciling", got)
	}

	r = s.heartbeat(hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1, 2, 3}}})
	want(t, "m1 told to revoke, epoch kept", r, 0, 1, Assignment{a: {0, 1}})
	if got := s.g.Member("m1").PendingRevocation; !got.Equal(Assignment{a: {2, 3}}) {
		t.Fatalf("m1 pending revocation: got %v, want {2 3}", got)
	}

	r = s.heartbeat(hb{member: "m2", epoch: 2, owned: Assignment{}})
	want(t, "m2 still waits", r, 0, 2, nil)

	r = s.heartbeat(hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1, 2, 3}}})
	want(t, "m1 has not revoked yet", r, 0, 1, nil)

	r = s.heartbeat(hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1}}})
	want(t, "m1 revoked: moves to epoch 2", r, 0, 2, nil)

	r = s.heartbeat(hb{member: "m2", epoch: 2, owned: Assignment{}})
	want(t, "m2 gets the released partitions", r, 0, 2, Assignment{a: {2, 3}})
	if got := s.g.State(); got != "Stable" {
		t.Fatalf("group: got state %s, want Stable", got)
	}

	r = s.heartbeat(hb{member: "m2", epoch: -1})
	want(t, "m2 leaves", r, 0, -1, nil)
	r = s.heartbeat(hb{member: "m1", epoch: 2, owned: Assignment{a: {0, 1}}})
	want(t, "m1 gets all back at epoch 3", r, 0, 3, Assignment{a: {0, 1, 2, 3}})
}

func TestFencing(t *testing.T) {
	s := newScenario(t, topics{"a": topicA})
	want(t, "m1 joins", s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}}), 0, 1, Assignment{a: {0, 1, 2, 3}})
	want(t, "m2 joins", s.heartbeat(hb{member: "m2", epoch: 0, topics: []string{"a"}}), 0, 2, Assignment{})
	want(t, "m1 told to revoke", s.heartbeat(hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1, 2, 3}}}), 0, 1, Assignment{a: {0, 1}})
	want(t, "m1 revoked", s.heartbeat(hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1}}}), 0, 2, nil)

	for _, tc := range []struct {
		step string
		h    hb
		code int16
	}{
		{"a greater epoch is fenced", hb{member: "m1", epoch: 3, owned: Assignment{}}, kerr.FencedMemberEpoch.Code},
		{"an older epoch that is not the previous one is fenced", hb{member: "m1", epoch: 0, owned: Assignment{}, full: false}, 0},
		{"the previous epoch owning a subset is taken (a lost response)", hb{member: "m1", epoch: 1, owned: Assignment{a: {0}}}, 0},
		{"the previous epoch owning more is fenced", hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1, 2}}}, kerr.FencedMemberEpoch.Code},
		{"the previous epoch without owned partitions is fenced", hb{member: "m1", epoch: 1}, kerr.FencedMemberEpoch.Code},
		{"an unknown member", hb{member: "nobody", epoch: 2, owned: Assignment{}}, kerr.UnknownMemberID.Code},
		{"an unknown member leaving", hb{member: "nobody", epoch: -1}, kerr.UnknownMemberID.Code},
	} {
		if tc.h.epoch == 0 {
			continue // a rejoin, below
		}
		r := s.heartbeat(tc.h)
		if r.ErrorCode != tc.code {
			t.Errorf("%s: got %v, want %v", tc.step, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(tc.code))
		}
	}

	// A fenced member rejoins with epoch 0 under its member id: it owns
	// nothing now, and its partitions come back to it once free.
	r := s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}})
	want(t, "m1 rejoins", r, 0, 2, Assignment{a: {0, 1}})
}

func TestStaticMembers(t *testing.T) {
	s := newScenario(t, topics{"a": topicA})
	want(t, "s1 joins", s.heartbeat(hb{member: "m1", instance: "i1", epoch: 0, topics: []string{"a"}}), 0, 1, Assignment{a: {0, 1, 2, 3}})
	want(t, "another member id for a live instance", s.heartbeat(hb{member: "x", instance: "i1", epoch: 0, topics: []string{"a"}}), kerr.UnreleasedInstanceID.Code, 0, nil)
	want(t, "a heartbeat of another member id for the instance", s.heartbeat(hb{member: "x", instance: "i1", epoch: 1, owned: Assignment{}}), kerr.FencedInstanceID.Code, 0, nil)

	r := s.heartbeat(hb{member: "m1", instance: "i1", epoch: -2})
	want(t, "static leave", r, 0, -2, nil)
	if got := s.g.Epoch(); got != 1 {
		t.Fatalf("a static leave moved the group epoch to %d", got)
	}
	want(t, "m2 joins while i1 is away", s.heartbeat(hb{member: "m2", epoch: 0, topics: []string{"a"}}), 0, 2, Assignment{})

	r = s.heartbeat(hb{member: "m1b", instance: "i1", epoch: 0, topics: []string{"a"}})
	want(t, "i1 back under a new member id, in a new process that owns nothing", r, 0, 2, Assignment{a: {0, 1}})
	if s.g.Member("m1") != nil {
		t.Fatalf("the old member id of i1 is still a member")
	}
	want(t, "m2 gets its half", s.heartbeat(hb{member: "m2", epoch: 2, owned: Assignment{}}), 0, 2, Assignment{a: {2, 3}})
}

func TestTimeouts(t *testing.T) {
	s := newScenario(t, topics{"a": topicA})
	want(t, "m1 joins", s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}}), 0, 1, Assignment{a: {0, 1, 2, 3}})
	s.now = s.now.Add(10 * time.Second)
	want(t, "m2 joins", s.heartbeat(hb{member: "m2", epoch: 0, topics: []string{"a"}}), 0, 2, Assignment{})

	// m1 stops heartbeating: removed 45 s after its last heartbeat.
	out := s.g.Tick(t0.Add(45*time.Second - time.Millisecond))
	if s.g.Member("m1") == nil {
		t.Fatalf("m1 removed before its session timeout")
	}
	if want := t0.Add(45 * time.Second); !out.Deadline.Equal(want) {
		t.Fatalf("got deadline %v, want %v", out.Deadline, want)
	}
	s.now = t0.Add(45 * time.Second)
	out = s.g.Tick(s.now)
	s.records = append(s.records, out.Records...)
	if s.g.Member("m1") != nil {
		t.Fatalf("m1 not removed at its session timeout")
	}
	want(t, "m2 takes every partition", s.heartbeat(hb{member: "m2", epoch: 2, owned: Assignment{}}), 0, 3, Assignment{a: {0, 1, 2, 3}})

	// m3 joins; m2 never revokes: removed after its rebalance timeout.
	want(t, "m3 joins", s.heartbeat(hb{member: "m3", epoch: 0, topics: []string{"a"}}), 0, 4, Assignment{})
	want(t, "m2 told to revoke", s.heartbeat(hb{member: "m2", epoch: 3, owned: Assignment{a: {0, 1, 2, 3}}}), 0, 3, Assignment{a: {0, 1}})
	revokeBy := s.now.Add(30 * time.Second)
	s.now = revokeBy.Add(-time.Second)
	want(t, "m2 still holds them", s.heartbeat(hb{member: "m2", epoch: 3, owned: Assignment{a: {0, 1, 2, 3}}}), 0, 3, nil)
	s.records = append(s.records, s.g.Tick(revokeBy).Records...)
	if s.g.Member("m2") != nil {
		t.Fatalf("m2 kept its partitions past its rebalance timeout")
	}
	s.now = revokeBy
	want(t, "m3 gets everything", s.heartbeat(hb{member: "m3", epoch: 4, owned: Assignment{}}), 0, 5, Assignment{a: {0, 1, 2, 3}})
}

func TestTopicChanges(t *testing.T) {
	md := topics{"a": topicA}
	s := newScenario(t, md)
	want(t, "regex join", s.heartbeat(hb{member: "m1", epoch: 0, regex: "a|b.*"}), 0, 1, Assignment{a: {0, 1, 2, 3}})
	want(t, "nothing changed", s.heartbeat(hb{member: "m1", epoch: 1}), 0, 1, nil)

	md["bee"] = topicB
	md["xbee"] = topicMeta{id: tid(3), partitions: 1} // the regex matches whole names
	want(t, "a topic the regex matches is created", s.heartbeat(hb{member: "m1", epoch: 1}), 0, 2, Assignment{a: {0, 1, 2, 3}, tid(2): {0, 1}})

	md["a"] = topicMeta{id: tid(1), partitions: 5}
	want(t, "a topic grows", s.heartbeat(hb{member: "m1", epoch: 2}), 0, 3, Assignment{a: {0, 1, 2, 3, 4}, tid(2): {0, 1}})

	delete(md, "bee")
	out := s.g.MetadataChanged(md)
	s.records = append(s.records, out.Records...)
	if s.g.Epoch() != 4 {
		t.Fatalf("a deleted topic: got group epoch %d, want 4", s.g.Epoch())
	}
	want(t, "a topic is deleted", s.heartbeat(hb{member: "m1", epoch: 3, owned: Assignment{a: {0, 1, 2, 3, 4}, tid(2): {0, 1}}}), 0, 3, Assignment{a: {0, 1, 2, 3, 4}})
	want(t, "revoked", s.heartbeat(hb{member: "m1", epoch: 3, owned: Assignment{a: {0, 1, 2, 3, 4}}}), 0, 4, nil)
}

// TestNamesAndRegexSubscribeTogether: a member subscribes to the topics
// it names and to those its regex matches, as in Kafka. librdkafka's
// consumer joins with its topic names beside an empty regex, which adds
// no topic.
func TestNamesAndRegexSubscribeTogether(t *testing.T) {
	s := newScenario(t, topics{"a": topicA, "bee": topicB})
	b := tid(2)
	want(t, "librdkafka's join: names and an empty regex", s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}, emptyRegex: true}), 0, 1, Assignment{a: {0, 1, 2, 3}})
	want(t, "a regex beside the names", s.heartbeat(hb{member: "m1", epoch: 1, topics: []string{"a"}, regex: "b.*", full: true, owned: Assignment{a: {0, 1, 2, 3}}}),
		0, 2, Assignment{a: {0, 1, 2, 3}, b: {0, 1}})
	want(t, "the regex emptied", s.heartbeat(hb{member: "m1", epoch: 2, topics: []string{"a"}, emptyRegex: true, full: true, owned: Assignment{a: {0, 1, 2, 3}, b: {0, 1}}}),
		0, 2, Assignment{a: {0, 1, 2, 3}})
	want(t, "bee revoked", s.heartbeat(hb{member: "m1", epoch: 2, owned: Assignment{a: {0, 1, 2, 3}}}), 0, 3, nil)
	if m := s.g.members["m1"]; m.SubscribedTopicRegex != "" || m.regex != nil {
		t.Fatalf("m1's regex after an empty one: got %q (compiled %v), want none", m.SubscribedTopicRegex, m.regex)
	}
}

// TestSubscribedTo: a topic is the group's while a member names it,
// existing or not, or its regex matches it; not once they have left.
func TestSubscribedTo(t *testing.T) {
	s := newScenario(t, topics{"a": topicA, "bee": topicB})
	s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a", "later"}, emptyRegex: true})
	s.heartbeat(hb{member: "m2", epoch: 0, regex: "b.*"})
	check := func(step string, want map[string]bool) {
		t.Helper()
		for topic, w := range want {
			if got := s.g.SubscribedTo(topic); got != w {
				t.Errorf("%s: SubscribedTo(%q) = %v, want %v", step, topic, got, w)
			}
		}
	}
	check("m1 names a and later, m2's regex matches bee", map[string]bool{"a": true, "later": true, "bee": true, "ant": false, "c": false})
	s.heartbeat(hb{member: "m2", epoch: LeaveEpoch})
	check("m2 left", map[string]bool{"a": true, "later": true, "bee": false})
	s.heartbeat(hb{member: "m1", epoch: LeaveEpoch})
	check("both left", map[string]bool{"a": false, "later": false, "bee": false})
}

func TestRangeAssignorChosen(t *testing.T) {
	s := newScenario(t, topics{"a": topicA})
	want(t, "m1", s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}, assignor: "range"}), 0, 1, Assignment{a: {0, 1, 2, 3}})
	want(t, "m0", s.heartbeat(hb{member: "m0", epoch: 0, topics: []string{"a"}, assignor: "range"}), 0, 2, Assignment{})
	if got := s.g.Target("m0"); !got.Equal(Assignment{a: {0, 1}}) {
		t.Fatalf("range target of m0: got %v, want {0 1}", got)
	}
}

func TestValidateHeartbeat(t *testing.T) {
	str := func(s string) *string { return &s }
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name string
		edit func(r *kmsg.ConsumerGroupHeartbeatRequest)
		code int16
	}{
		{"a valid join", func(*kmsg.ConsumerGroupHeartbeatRequest) {}, 0},
		{"no group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest.Code},
		{"v1 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
		{"v0 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version, r.MemberID = 0, "" }, 0},
		{"join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}, kerr.InvalidRequest.Code},
		{"join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest.Code},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = str("sticky") }, kerr.UnsupportedAssignor.Code},
		{"names beside a regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = str("b.*") }, 0},
		{"names beside an empty regex (librdkafka)", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = str("") }, 0},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, str("a(")
		}, kerr.InvalidRegularExpression.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "g", "m", 1000
			r.SubscribedTopicNames = []string{"a"}
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			tc.edit(r)
			if code, msg := ValidateHeartbeat(r, cfg); code != tc.code {
				t.Fatalf("got %v (%s), want %v", kerr.ErrorForCode(code), msg, kerr.ErrorForCode(tc.code))
			}
		})
	}
}

func TestValidateOffsets(t *testing.T) {
	s := newScenario(t, topics{"a": topicA})
	empty := New("e", DefaultConfig())
	if code := empty.ValidateCommit("", -1, false, 9); code != 0 {
		t.Fatalf("an admin commit to an empty group: got %v", kerr.ErrorForCode(code))
	}
	s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a"}})
	for _, tc := range []struct {
		name          string
		member        string
		epoch         int32
		transactional bool
		version       int16
		commit, fetch int16
	}{
		{"the member at its epoch", "m1", 1, false, 9, 0, 0},
		{"an older epoch", "m1", 0, false, 9, kerr.StaleMemberEpoch.Code, kerr.StaleMemberEpoch.Code},
		{"a v8 commit", "m1", 1, false, 8, kerr.UnsupportedVersion.Code, 0},
		{"an unknown member", "x", 1, false, 9, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code},
		{"no member, group not empty", "", -1, false, 9, kerr.UnknownMemberID.Code, 0},
		{"a transaction's commit without member", "", -1, true, 3, 0, 0},
	} {
		if got := s.g.ValidateCommit(tc.member, tc.epoch, tc.transactional, tc.version); got != tc.commit {
			t.Errorf("%s: commit: got %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.commit))
		}
		if got := s.g.ValidateFetch(tc.member, tc.epoch); got != tc.fetch {
			t.Errorf("%s: fetch: got %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.fetch))
		}
	}
}

// TestLoadRestoresTheGroup replays the records a group wrote into a
// Loader and checks the group read back is the group that wrote them.
func TestLoadRestoresTheGroup(t *testing.T) {
	s := newScenario(t, topics{"a": topicA, "b": topicB})
	s.heartbeat(hb{member: "m1", epoch: 0, topics: []string{"a", "b"}})
	s.heartbeat(hb{member: "m2", instance: "i2", epoch: 0, topics: []string{"a"}, assignor: "uniform"})
	s.heartbeat(hb{member: "m3", epoch: 0, regex: "b"})
	s.heartbeat(hb{member: "m1", epoch: 1, owned: Assignment{a: {0, 1, 2, 3}, tid(2): {0, 1}}})
	s.heartbeat(hb{member: "m3", epoch: -1})

	l := NewLoader()
	for _, r := range s.records {
		if !IsConsumerGroupKey(r.Key) {
			t.Fatalf("record key %x is not a consumer group key", r.Key)
		}
		if err := l.Apply(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	got := l.Groups(s.g.cfg, s.now)
	if len(got) != 1 {
		t.Fatalf("got %d groups, want 1", len(got))
	}
	g := got[0]
	if g.Epoch() != s.g.Epoch() || g.AssignmentEpoch() != s.g.AssignmentEpoch() {
		t.Fatalf("got epochs %d/%d, want %d/%d", g.Epoch(), g.AssignmentEpoch(), s.g.Epoch(), s.g.AssignmentEpoch())
	}
	if !mapsEqual(g.subscribed, s.g.subscribed) {
		t.Fatalf("got subscription metadata %v, want %v", g.subscribed, s.g.subscribed)
	}
	if len(g.members) != len(s.g.members) {
		t.Fatalf("got %d members, want %d", len(g.members), len(s.g.members))
	}
	for id, w := range s.g.members {
		m := g.members[id]
		if m == nil {
			t.Fatalf("member %s not restored", id)
		}
		if !sameMetadata(m, w) || m.Epoch != w.Epoch || m.PreviousEpoch != w.PreviousEpoch || m.State != w.State ||
			!m.Assigned.Equal(w.Assigned) || !m.PendingRevocation.Equal(w.PendingRevocation) {
			t.Fatalf("member %s: got %+v, want %+v", id, m, w)
		}
		if !g.target[id].Equal(s.g.target[id]) {
			t.Fatalf("member %s target: got %v, want %v", id, g.target[id], s.g.target[id])
		}
	}
	if g.static["i2"] != "m2" {
		t.Fatalf("static member i2 not restored")
	}
	// The restored group goes on where the old one stopped.
	s.g = g
	s.heartbeat(hb{member: "m2", instance: "i2", epoch: s.g.members["m2"].Epoch, owned: s.g.members["m2"].Assigned})
}
