package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// capability is what a case needs of a harness's clusters beyond Cluster.
type capability int

const (
	// needsNothing: any Cluster.
	needsNothing capability = iota
	// needsRestarter: a ServiceRestarter (ZooKeeper, etcd with a server).
	needsRestarter
	// needsQuorumLoser: a QuorumLoser (Raft).
	needsQuorumLoser
	// needsOutage: a ServiceRestarter or a QuorumLoser, anything whose
	// service the case can take away.
	needsOutage
	// needsEvictor: backends that are a coord.ControllerEvictor
	// (ZooKeeper, etcd).
	needsEvictor
)

// capabilities records which optional interfaces a harness's clusters have.
type capabilities struct {
	restarter   bool
	quorumLoser bool
	evictor     bool
}

// allows reports whether clusters with caps can run a case that needs c.
func (caps capabilities) allows(c capability) bool {
	switch c {
	case needsRestarter:
		return caps.restarter
	case needsQuorumLoser:
		return caps.quorumLoser
	case needsOutage:
		return caps.restarter || caps.quorumLoser
	case needsEvictor:
		return caps.evictor
	}
	return true
}

func (c capability) String() string {
	switch c {
	case needsRestarter:
		return "ServiceRestarter"
	case needsQuorumLoser:
		return "QuorumLoser"
	case needsOutage:
		return "ServiceRestarter or QuorumLoser"
	case needsEvictor:
		return "coord.ControllerEvictor"
	}
	return "nothing"
}

// testCase is one case of the suite: Group/Name run by run on a fresh
// cluster (the case creates it with h.NewCluster).
type testCase struct {
	group string
	name  string
	needs capability
	run   func(t T, h Harness)
}

// fullName is "Group/Case", the name of the case in both runners.
func (tc testCase) fullName() string { return tc.group + "/" + tc.name }

// cases lists every case in the order they run: the groups by capability,
// Availability (the cases needing optional interfaces) last.
func cases() []testCase {
	return []testCase{
		{"Sessions", "RegisterAppearsCloseRemovesAtOnce", needsNothing, testRegisterAppearsCloseRemovesAtOnce},
		{"Sessions", "ExpiryWithinBounds", needsNothing, testExpiryWithinBounds},
		{"Sessions", "ReRegistrationNewEpoch", needsNothing, testReRegistrationNewEpoch},
		{"Sessions", "ReplaceDeadIncarnation", needsNothing, testReplaceDeadIncarnation},
		{"Sessions", "BackendCloseEndsAll", needsNothing, testBackendCloseEndsAll},
		{"Election", "EpochsIncrease", needsNothing, testEpochsIncrease},
		{"Election", "CampaignEndsWithCtxOrSession", needsNothing, testCampaignEndsWithCtxOrSession},
		{"Election", "CrashedControllerReplaced", needsNothing, testCrashedControllerReplaced},
		{"Election", "DeposedCommitFenced", needsNothing, testDeposedCommitFenced},
		{"Election", "OneControllerAcross20Changes", needsNothing, testOneControllerAcross20Changes},
		{"Metadata", "TopicLifecycle", needsNothing, testTopicLifecycle},
		{"Metadata", "StalePartitionEpochMismatch", needsNothing, testStalePartitionEpochMismatch},
		{"Metadata", "Commit10000Partitions", needsNothing, testCommit10000Partitions},
		{"Watches", "MetadataInOrder", needsNothing, testMetadataInOrder},
		{"Watches", "MembersAndController", needsNothing, testMembersAndController},
		{"ProducerIDs", "ConcurrentBlocksNeverOverlap", needsNothing, testConcurrentBlocksNeverOverlap},
		{"ProducerIDs", "RestartedBrokerContinuesAbove", needsNothing, testRestartedBrokerContinuesAbove},
		{"ProducerIDs", "CancelledAllocationNeverReused", needsNothing, testCancelledAllocationNeverReused},
		{"ProducerIDs", "KeyAgreedOnce", needsNothing, testProducerIDKeyAgreedOnce},
		{"Security", "ScramCredentialLifecycle", needsNothing, testScramCredentialLifecycle},
		{"Security", "ACLCreateIdempotentAndFilter", needsNothing, testACLCreateIdempotentAndFilter},
		{"Security", "DeleteACLsReturnsWhatItRemoved", needsNothing, testDeleteACLsReturnsWhatItRemoved},
		{"Security", "ConcurrentWritersBothLand", needsNothing, testConcurrentSecurityWriters},
		{"Security", "WatchSeesEveryChange", needsNothing, testSecurityWatchSeesEveryChange},
		{"Security", "SurvivesRestart", needsNothing, testSecuritySurvivesRestart},
		{"Configs", "BrokerConfigsLifecycle", needsNothing, testBrokerConfigsLifecycle},
		{"Configs", "ConcurrentWritersBothLand", needsNothing, testConcurrentConfigWriters},
		{"Configs", "WatchSeesEveryChange", needsNothing, testConfigWatchSeesEveryChange},
		{"Configs", "SurviveRestart", needsNothing, testConfigsSurviveRestart},
		{"ClientQuotas", "Lifecycle", needsNothing, testClientQuotasLifecycle},
		{"ClientQuotas", "BesideScramCredentials", needsNothing, testClientQuotasBesideScramCredentials},
		{"Availability", "CutOffCallsFailThenRecover", needsNothing, testCutOffCallsFailThenRecover},
		{"Availability", "CallsFailWithinDeadline", needsOutage, testCallsFailWithinDeadline},
		{"Availability", "ServiceRestartRecovers", needsRestarter, testServiceRestartRecovers},
		{"Availability", "RaftMinorityAndMajority", needsQuorumLoser, testRaftMinorityAndMajority},
		{"Availability", "EvictedControllerReplaced", needsEvictor, testEvictedControllerReplaced},
	}
}

// probingHarness passes NewCluster through and records the capabilities of
// the clusters it returns, so the runners learn them without a cluster of
// their own when an earlier case has made one.
type probingHarness struct {
	Harness
	mu    sync.Mutex
	known bool
	caps  capabilities
}

// NewCluster implements Harness.
func (p *probingHarness) NewCluster(t T, n int) Cluster {
	c := p.Harness.NewCluster(t, n)
	p.record(c)
	return c
}

func (p *probingHarness) record(c Cluster) {
	_, restarter := c.(ServiceRestarter)
	_, quorumLoser := c.(QuorumLoser)
	_, evictor := c.Backend(0).(coord.ControllerEvictor)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.known = true
	p.caps = capabilities{restarter: restarter, quorumLoser: quorumLoser, evictor: evictor}
}

// capabilities returns the recorded capabilities, making a one-backend
// cluster on t to learn them if no case has made a cluster yet.
func (p *probingHarness) capabilities(t T) capabilities {
	p.mu.Lock()
	known, caps := p.known, p.caps
	p.mu.Unlock()
	if known {
		return caps
	}
	p.NewCluster(t, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caps
}

// Run runs every case of the suite against h, as subtests "Group/Case" of
// t, one after another, each on a fresh cluster. Cases that need a
// capability the harness's clusters lack (ServiceRestarter, QuorumLoser)
// are not run at all: CI forbids skipped tests, and such a case does not
// apply to the backend.
func Run(t *testing.T, h Harness) {
	t.Helper()
	ph := &probingHarness{Harness: h}
	byGroup := map[string][]testCase{}
	var groups []string
	for _, tc := range cases() {
		if _, ok := byGroup[tc.group]; !ok {
			groups = append(groups, tc.group)
		}
		byGroup[tc.group] = append(byGroup[tc.group], tc)
	}
	for _, group := range groups {
		t.Run(group, func(t *testing.T) {
			for _, tc := range byGroup[group] {
				if tc.needs != needsNothing && !ph.capabilities(t).allows(tc.needs) {
					t.Logf("%s: not applicable to %s: its clusters are not a %v", tc.fullName(), h.Name(), tc.needs)
					continue
				}
				t.Run(tc.name, func(t *testing.T) { tc.run(t, ph) })
			}
		})
	}
}

// Timing helpers.

// pollInterval is how often observation loops look at the backends. It
// only bounds how late a condition is noticed, never what is asserted.
const pollInterval = 10 * time.Millisecond

// detectionBound is how long after a crash the service must have expired
// the crashed session and elected a new controller: the session timeout
// plus one second of slack for the service's tick and the watchers.
func detectionBound(h Harness) time.Duration { return h.SessionTimeout() + time.Second }

// startupBound bounds the first election and the first registration of a
// fresh cluster (a new Raft cluster must elect a leader first).
func startupBound(h Harness) time.Duration { return 3*h.SessionTimeout() + 10*time.Second }

// callBound bounds one call to a healthy service.
const callBound = 10 * time.Second

// withTimeout returns a context that ends after d and is cancelled at the
// latest when t's case ends.
func withTimeout(t T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond every pollInterval until it reports true, and fails
// t with what and cond's last explanation when deadline passes first.
func waitUntil(t T, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, d, why)
		}
		time.Sleep(pollInterval)
	}
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitClosed waits up to d for ch to close and returns how long it took;
// it fails t with what when it does not.
func waitClosed(t T, ch <-chan struct{}, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
		return time.Since(start)
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, d)
		return 0
	}
}

// closedAt returns a channel that receives the time ch closes at. Its
// goroutine ends when ch closes (sessions and terms end at the latest when
// the cluster is closed).
func closedAt(ch <-chan struct{}) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		<-ch
		at <- time.Now()
	}()
	return at
}

// Broker helpers.

// brokerFor returns the broker that backend i runs (ID i+1) as it is
// passed to Register.
func brokerFor(i int) coord.Broker {
	return brokerWithID(coord.BrokerID(i + 1))
}

// brokerWithID returns a broker to register under id.
func brokerWithID(id coord.BrokerID) coord.Broker {
	port := 9092 + int32(id)
	return coord.Broker{ID: id, Host: "127.0.0.1", Port: port, Rack: fmt.Sprintf("rack-%d", id%3),
		Endpoints: []coord.Endpoint{
			{Listener: "CLIENT", Host: "127.0.0.1", Port: port + 1000, SecurityProtocol: "SSL"},
			{Listener: "BROKER", Host: "127.0.0.1", Port: port, SecurityProtocol: "PLAINTEXT"},
		}}
}

// register registers b through be, retrying while the service is not
// ready (ErrUnavailable, a call deadline) or an earlier incarnation of b
// has not expired (ErrExists), and fails t when d passes first.
func register(t T, be coord.Backend, b coord.Broker, d time.Duration) coord.Session {
	t.Helper()
	var s coord.Session
	waitUntil(t, d, fmt.Sprintf("register broker %d", b.ID), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		var err error
		s, err = be.Register(ctx, b)
		if err == nil {
			return true, ""
		}
		if errors.Is(err, coord.ErrExists) || errors.Is(err, coord.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return false, "last error: " + err.Error()
		}
		t.Fatalf("register broker %d: got error %v, want nil (or ErrExists/ErrUnavailable while the cluster starts)", b.ID, err)
		return false, ""
	})
	t.Cleanup(func() { s.Close() })
	checkRegistered(t, s, b)
	return s
}

// checkRegistered checks the Broker of a fresh Session.
func checkRegistered(t T, s coord.Session, b coord.Broker) {
	t.Helper()
	got := s.Broker()
	if got.ID != b.ID || got.Host != b.Host || got.Port != b.Port || got.Rack != b.Rack || !slices.Equal(got.Endpoints, b.Endpoints) {
		t.Fatalf("session broker: got %+v, want %+v with an epoch", got, b)
	}
	if got.Epoch <= 0 {
		t.Fatalf("session broker %d epoch: got %d, want > 0", b.ID, got.Epoch)
	}
	if isClosed(s.Done()) || s.Err() != nil {
		t.Fatalf("fresh session of broker %d: Done closed or Err %v, want live", b.ID, s.Err())
	}
}

// memberIDs formats a member list as "[1@e17 2@e18]".
func memberIDs(members []coord.Broker) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = fmt.Sprintf("%d@e%d", m.ID, m.Epoch)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// sameMembers reports whether members holds exactly the brokers of want
// (ID and epoch), in ID order.
func sameMembers(members []coord.Broker, want []coord.Broker) bool {
	if len(members) != len(want) {
		return false
	}
	sorted := append([]coord.Broker(nil), want...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for i := range members {
		if members[i].ID != sorted[i].ID || members[i].Epoch != sorted[i].Epoch {
			return false
		}
	}
	return true
}

// violations collects failures found by goroutines of a case (checkers,
// campaigners, watchers), which must not call T themselves: the case's own
// goroutine reports them.
type violations struct {
	mu   sync.Mutex
	list []string
}

// maxViolations caps how many violations are kept: the first ones tell.
const maxViolations = 20

func (v *violations) addf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) < maxViolations {
		v.list = append(v.list, fmt.Sprintf(format, args...))
	}
}

// report fails t with every violation collected so far.
func (v *violations) report(t T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, msg := range v.list {
		t.Errorf("%s", msg)
	}
	v.list = nil
}
