package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/etcd"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/faultnet"
)

// sessionTimeout is the session timeout of every test backend: short, to
// keep the suite fast (the default stays 6 s).
const sessionTimeout = 2 * time.Second

// server is the one embedded etcd every test of the package shares; each
// test works under a prefix of its own.
var server *etcdserver.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tripod-etcd-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd tests: temp dir: %v\n", err)
		os.Exit(1)
	}
	server, err = etcdserver.Start(dir)
	if err != nil {
		// An embedded etcd is always available: failing to start it is a
		// failure, never a skip.
		fmt.Fprintf(os.Stderr, "etcd tests: start embedded etcd: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	server.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestConformance runs the coord conformance suite against etcd.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.NewEtcdHarness(server.Endpoints(), server, sessionTimeout))
}

// open opens a backend for broker id under prefix, dialing through fn
// when it is not nil, and closes it when t ends.
func open(t testing.TB, prefix string, id coord.BrokerID, fn *faultnet.Net) *etcd.Backend {
	t.Helper()
	return openWith(t, prefix, id, fn, false)
}

// openStandby is open for a backend that keeps a standby metadata view
// while it campaigns, as a broker's does.
func openStandby(t testing.TB, prefix string, id coord.BrokerID, fn *faultnet.Net) *etcd.Backend {
	t.Helper()
	return openWith(t, prefix, id, fn, true)
}

func openWith(t testing.TB, prefix string, id coord.BrokerID, fn *faultnet.Net, standby bool) *etcd.Backend {
	t.Helper()
	cfg := coord.DefaultConfig()
	cfg.MetadataStandby = standby
	cfg.Backend = "etcd"
	cfg.BrokerID = id
	cfg.SessionTimeout = sessionTimeout
	cfg.EtcdEndpoints = server.Endpoints()
	cfg.EtcdPrefix = prefix
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn})
	if fn != nil {
		cfg.Dialer = fn.Dial
	}
	b, err := etcd.Open(cfg)
	if err != nil {
		t.Fatalf("Open under %s: got %v, want nil", prefix, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func broker(id coord.BrokerID) coord.Broker {
	return coord.Broker{ID: id, Host: "127.0.0.1", Port: 9092}
}

func topicOp(name string, partitions int, epoch int64) coord.CreateTopic {
	op := coord.CreateTopic{Topic: coord.Topic{Name: name, Assignment: make([][]coord.BrokerID, partitions)}}
	for p := range partitions {
		op.Topic.Assignment[p] = []coord.BrokerID{1}
		op.States = append(op.States, coord.PartitionState{Topic: name, Partition: int32(p), Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: epoch})
	}
	return op
}

// elect registers broker id on b and campaigns until it is the controller.
func elect(t testing.TB, b *etcd.Backend, id coord.BrokerID) (coord.Session, coord.Term) {
	t.Helper()
	s, err := b.Register(ctxFor(t, 10*time.Second), broker(id))
	if err != nil {
		t.Fatalf("Register broker %d: got %v, want nil", id, err)
	}
	term, err := b.Campaign(ctxFor(t, 10*time.Second), s)
	if err != nil {
		t.Fatalf("Campaign broker %d: got %v, want a term", id, err)
	}
	return s, term
}

// TestPrefixIsolation: clusters under /iso and /iso2 (one prefix a string
// prefix of the other) share nothing: the same broker ID registers in
// both, and a topic committed in one is absent from the other.
func TestPrefixIsolation(t *testing.T) {
	a := open(t, "/iso", 1, nil)
	b := open(t, "/iso2/", 1, nil)
	_, termA := elect(t, a, 1)
	_, termB := elect(t, b, 1)
	if err := a.Commit(ctxFor(t, 10*time.Second), termA, topicOp("only-a", 2, termA.Epoch())); err != nil {
		t.Fatalf("Commit under /iso: got %v, want nil", err)
	}
	if err := b.Commit(ctxFor(t, 10*time.Second), termB, topicOp("only-b", 1, termB.Epoch())); err != nil {
		t.Fatalf("Commit under /iso2: got %v, want nil", err)
	}
	for _, c := range []struct {
		b    *etcd.Backend
		want string
	}{{a, "only-a"}, {b, "only-b"}} {
		md, err := c.b.Load(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatalf("Load: got %v, want nil", err)
		}
		if names := md.TopicNames(); len(names) != 1 || names[0] != c.want {
			t.Fatalf("Load: got topics %v, want [%s]", names, c.want)
		}
		members, err := c.b.Members(ctxFor(t, 10*time.Second))
		if err != nil || len(members) != 1 {
			t.Fatalf("Members: got %v, %v; want one broker", members, err)
		}
	}
}

// TestCutOffSessionExpiresBothSides: a backend cut off from etcd ends its
// own session (ErrSessionExpired) within the session timeout, without
// reconnecting, and etcd drops its registration within the lease TTL plus
// a second.
func TestCutOffSessionExpiresBothSides(t *testing.T) {
	fn := faultnet.New()
	cut := open(t, "/expiry", 1, fn)
	watcher := open(t, "/expiry", 2, nil)
	s, err := cut.Register(ctxFor(t, 10*time.Second), broker(1))
	if err != nil {
		t.Fatalf("Register: got %v, want nil", err)
	}
	cutAt := time.Now()
	fn.Cut()
	defer fn.Heal()
	select {
	case <-s.Done():
	case <-time.After(sessionTimeout + 100*time.Millisecond):
		t.Fatalf("cut-off session still live %v after the cut, want ended within the %v session timeout", time.Since(cutAt), sessionTimeout)
	}
	if err := s.Err(); !errors.Is(err, coord.ErrSessionExpired) {
		t.Fatalf("cut-off session Err: got %v, want ErrSessionExpired", err)
	}
	deadline := cutAt.Add(sessionTimeout + time.Second)
	for {
		members, err := watcher.Members(ctxFor(t, 5*time.Second))
		if err == nil && len(members) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registration of the cut-off broker: still %v (err %v) %v after the cut, want gone", members, err, time.Since(cutAt))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("session ended locally and in etcd within %v of the cut", time.Since(cutAt).Round(time.Millisecond))
}

// TestFencedCommits: a commit of a resigned term, and of a term whose
// election key was deleted behind its back, fails with ErrFenced and
// changes nothing; the term whose key vanished ends by itself.
func TestFencedCommits(t *testing.T) {
	b := open(t, "/fence", 1, nil)
	_, term := elect(t, b, 1)
	if err := b.Commit(ctxFor(t, 10*time.Second), term, topicOp("kept", 1, term.Epoch())); err != nil {
		t.Fatalf("Commit: got %v, want nil", err)
	}
	if _, err := b.Client().Delete(ctxFor(t, 10*time.Second), "/fence/controller"); err != nil {
		t.Fatalf("delete the election key: %v", err)
	}
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("term whose election key was deleted: still live, want ended")
	}
	if err := b.Commit(ctxFor(t, 10*time.Second), term, topicOp("lost", 1, term.Epoch())); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Commit of a lost term: got %v, want ErrFenced", err)
	}

	b2 := open(t, "/fence", 2, nil)
	s2, term2 := elect(t, b2, 2)
	if term2.Epoch() <= term.Epoch() {
		t.Fatalf("second term epoch: got %d, want > %d", term2.Epoch(), term.Epoch())
	}
	if err := term2.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Resign: got %v, want nil", err)
	}
	if err := b2.Commit(ctxFor(t, 10*time.Second), term2, topicOp("resigned", 1, term2.Epoch())); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Commit of a resigned term: got %v, want ErrFenced", err)
	}
	md, err := b.Load(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Load: got %v, want nil", err)
	}
	if names := md.TopicNames(); len(names) != 1 || names[0] != "kept" {
		t.Fatalf("topics after fenced commits: got %v, want [kept]", names)
	}
	s2.Close()
}

// TestCommitFailuresToldApart: in one transaction the fence holds but a
// compare fails: a missing partition is ErrNotFound, a stale epoch
// ErrVersionMismatch, an existing topic ErrExists; nothing of the chunk is
// applied.
func TestCommitFailuresToldApart(t *testing.T) {
	b := open(t, "/apart", 1, nil)
	_, term := elect(t, b, 1)
	ctx := ctxFor(t, 10*time.Second)
	if err := b.Commit(ctx, term, topicOp("t", 2, term.Epoch())); err != nil {
		t.Fatalf("Commit: got %v, want nil", err)
	}
	good := coord.SetPartition{State: coord.PartitionState{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 1}, ExpectedEpoch: 0}
	cases := []struct {
		name string
		bad  coord.Op
		want error
	}{
		{"missing partition", coord.SetPartition{State: coord.PartitionState{Topic: "t", Partition: 7}, ExpectedEpoch: 0}, coord.ErrNotFound},
		{"stale epoch", coord.SetPartition{State: coord.PartitionState{Topic: "t", Partition: 1}, ExpectedEpoch: 3}, coord.ErrVersionMismatch},
		{"existing topic", topicOp("t", 1, term.Epoch()), coord.ErrExists},
		{"missing topic", coord.SetTopic{Topic: coord.Topic{Name: "nope"}}, coord.ErrNotFound},
	}
	for _, c := range cases {
		if err := b.Commit(ctx, term, good, c.bad); !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
		md, err := b.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if got := md.Partitions[coord.TopicPartition{Topic: "t", Partition: 0}]; got.PartitionEpoch != 0 || got.LeaderEpoch != 0 {
			t.Fatalf("%s: t-0 got %+v, want untouched at epoch 0", c.name, got)
		}
	}
}

// TestWatchMetadataAcrossCompaction: a watcher cut off while etcd compacts
// the revisions it missed reloads the whole state when it is back: it
// receives the newest state and never an older Version.
func TestWatchMetadataAcrossCompaction(t *testing.T) {
	ctl := open(t, "/compact", 1, nil)
	fn := faultnet.New()
	watching := open(t, "/compact", 2, fn)
	_, term := elect(t, ctl, 1)
	ctx := ctxFor(t, 30*time.Second)
	ch, err := watching.WatchMetadata(ctx)
	if err != nil {
		t.Fatalf("WatchMetadata: got %v, want nil", err)
	}
	first := <-ch
	fn.Cut()
	for i := range 5 {
		if err := ctl.Commit(ctx, term, topicOp(fmt.Sprintf("t%d", i), 1, term.Epoch())); err != nil {
			t.Fatalf("Commit %d: %v", i, err)
		}
	}
	resp, err := ctl.Client().Get(ctx, "/compact/topics/t4")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if _, err := ctl.Client().Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatalf("Compact at %d: %v", resp.Header.Revision, err)
	}
	fn.Heal()
	last := first
	for len(last.Topics) < 5 {
		select {
		case md, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed early after version %d", last.Version)
			}
			if md.Version < last.Version {
				t.Fatalf("watch sent version %d after %d, want never decreasing", md.Version, last.Version)
			}
			last = md
		case <-ctx.Done():
			t.Fatalf("watch after compaction: got topics %v, want 5", last.TopicNames())
		}
	}
}

// TestSessionTimeoutRoundsUpToLeaseTTL: a 1.5 s session timeout is a 2 s
// lease, etcd granting whole seconds.
func TestSessionTimeoutRoundsUpToLeaseTTL(t *testing.T) {
	cfg := coord.DefaultConfig()
	cfg.Backend = "etcd"
	cfg.SessionTimeout = 1500 * time.Millisecond
	cfg.EtcdEndpoints = server.Endpoints()
	cfg.EtcdPrefix = "/ttl"
	b, err := coord.Open(cfg)
	if err != nil {
		t.Fatalf("coord.Open etcd: got %v, want nil", err)
	}
	defer b.Close()
	eb := b.(*etcd.Backend)
	s, err := b.Register(ctxFor(t, 10*time.Second), broker(1))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	defer s.Close()
	resp, err := eb.Client().Get(ctxFor(t, 10*time.Second), "/ttl/brokers/ids/1")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get registration: %v, %v", resp, err)
	}
	if resp.Kvs[0].CreateRevision != s.Broker().Epoch {
		t.Fatalf("broker epoch: got %d, want the key's create revision %d", s.Broker().Epoch, resp.Kvs[0].CreateRevision)
	}
	ttl, err := eb.Client().TimeToLive(ctxFor(t, 10*time.Second), clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	if ttl.GrantedTTL != 2 {
		t.Fatalf("granted TTL: got %d s, want 2 s", ttl.GrantedTTL)
	}
}

// TestCampaignRightAfterResignGetsNewEpoch: a broker that campaigns again
// the moment its term's Done closes, while Resign is still deleting the
// election key, never gets the resigned term back: each new term has a
// greater epoch.
func TestCampaignRightAfterResignGetsNewEpoch(t *testing.T) {
	b := open(t, "/recampaign", 1, nil)
	s, term := elect(t, b, 1)
	defer s.Close()
	for round := range 20 {
		resigned := make(chan error, 1)
		go func() { resigned <- term.Resign(context.Background()) }()
		<-term.Done()
		next, err := b.Campaign(ctxFor(t, 10*time.Second), s)
		if err != nil {
			t.Fatalf("round %d: Campaign after Resign: got %v, want a term", round, err)
		}
		if err := <-resigned; err != nil {
			t.Fatalf("round %d: Resign: got %v, want nil", round, err)
		}
		if next.Epoch() <= term.Epoch() {
			t.Fatalf("round %d: term after Resign has epoch %d, want > %d", round, next.Epoch(), term.Epoch())
		}
		term = next
	}
}

// TestEmptyCommitChecksFence: a Commit without ops succeeds for the
// current term and fails with ErrFenced once the term is gone.
func TestEmptyCommitChecksFence(t *testing.T) {
	b := open(t, "/empty", 1, nil)
	_, term := elect(t, b, 1)
	if err := b.Commit(ctxFor(t, 10*time.Second), term); err != nil {
		t.Fatalf("empty Commit of the current term: got %v, want nil", err)
	}
	if _, err := b.Client().Delete(ctxFor(t, 10*time.Second), "/empty/controller"); err != nil {
		t.Fatalf("delete the election key: %v", err)
	}
	if err := b.Commit(ctxFor(t, 10*time.Second), term); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("empty Commit after the election key was deleted: got %v, want ErrFenced", err)
	}
}

// BenchmarkCommit measures Commit of a CreateTopic of 1 000 partitions and
// of 1 000 SetPartitions, each chunked into transactions of at most 128
// operations: ns/op is one Commit of 1 000 partition writes.
func BenchmarkCommit(b *testing.B) {
	be := open(b, fmt.Sprintf("/bench-%d", time.Now().UnixNano()), 1, nil)
	_, term := elect(b, be, 1)
	const partitions = 1000
	ctx := context.Background()
	created := 0
	b.Run("CreateTopic1000", func(b *testing.B) {
		for range b.N {
			created++
			if err := be.Commit(ctx, term, topicOp(fmt.Sprintf("create-%d", created), partitions, term.Epoch())); err != nil {
				b.Fatalf("Commit: %v", err)
			}
		}
	})
	create := topicOp("moving", partitions, term.Epoch())
	if err := be.Commit(ctx, term, create); err != nil {
		b.Fatalf("Commit: %v", err)
	}
	epoch := int32(0)
	b.Run("SetPartition1000", func(b *testing.B) {
		for range b.N {
			ops := make([]coord.Op, partitions)
			for p, st := range create.States {
				st.LeaderEpoch = epoch + 1
				ops[p] = coord.SetPartition{State: st, ExpectedEpoch: epoch}
			}
			if err := be.Commit(ctx, term, ops...); err != nil {
				b.Fatalf("Commit: %v", err)
			}
			epoch++
		}
	})
}

// TestCutOffControllerGivesUpTermFirst: a controller cut off from etcd
// ends its term on its own (it cannot confirm its lease for 2/3 of the
// session timeout) before its session ends, and both before etcd lets
// another broker win the election.
func TestCutOffControllerGivesUpTermFirst(t *testing.T) {
	fn := faultnet.New()
	cut := open(t, "/giveup", 1, fn)
	other := open(t, "/giveup", 2, nil)
	s, term := elect(t, cut, 1)
	s2, err := other.Register(ctxFor(t, 10*time.Second), broker(2))
	if err != nil {
		t.Fatalf("Register broker 2: %v", err)
	}
	type campaign struct {
		term coord.Term
		err  error
	}
	won := make(chan campaign, 1)
	campaignCtx := ctxFor(t, 30*time.Second)
	go func() {
		next, err := other.Campaign(campaignCtx, s2)
		won <- campaign{next, err}
	}()

	cutAt := time.Now()
	fn.Cut()
	defer fn.Heal()
	<-term.Done()
	termEnded := time.Since(cutAt)
	select {
	case <-s.Done():
		t.Fatalf("session ended no later than its term (term after %v), want the term to end first", termEnded)
	default:
	}
	select {
	case c := <-won:
		t.Fatalf("broker 2's campaign ended (%v, %v) before the cut-off controller's term did", c.term, c.err)
	default:
	}
	<-s.Done()
	sessionEnded := time.Since(cutAt)
	c := <-won
	if c.err != nil {
		t.Fatalf("Campaign of broker 2: got %v, want a term", c.err)
	}
	next := c.term
	if next.Epoch() <= term.Epoch() {
		t.Fatalf("new term epoch: got %d, want > %d", next.Epoch(), term.Epoch())
	}
	if bound := sessionTimeout*2/3 + 300*time.Millisecond; termEnded > bound {
		t.Errorf("cut-off term ended %v after the cut, want within %v (2/3 of the %v session timeout, plus 300 ms for timers)", termEnded, bound, sessionTimeout)
	}
	t.Logf("after the cut: term ended in %v, session in %v, broker 2 elected in %v",
		termEnded.Round(time.Millisecond), sessionEnded.Round(time.Millisecond), time.Since(cutAt).Round(time.Millisecond))
}

// TestCommitPlansAroundConflicts: ops of one Commit that touch the same
// keys land in order (delete then re-create a topic; create a topic and
// move its partitions), and SetPartitions spread over 300 topics, each
// needing its own presence compare, are chunked within etcd's limits.
func TestCommitPlansAroundConflicts(t *testing.T) {
	b := open(t, "/plan", 1, nil)
	_, term := elect(t, b, 1)
	ctx := ctxFor(t, 30*time.Second)
	if err := b.Commit(ctx, term, topicOp("re", 1, term.Epoch())); err != nil {
		t.Fatalf("Commit create re: %v", err)
	}
	moved := coord.PartitionState{Topic: "fresh", Partition: 1, Leader: 1, LeaderEpoch: 1, ISR: []coord.BrokerID{1}}
	if err := b.Commit(ctx, term,
		coord.DeleteTopic{Name: "re"}, topicOp("re", 3, term.Epoch()),
		topicOp("fresh", 2, term.Epoch()), coord.SetPartition{State: moved, ExpectedEpoch: 0},
	); err != nil {
		t.Fatalf("Commit delete+create re, create+move fresh: got %v, want nil", err)
	}
	var many []coord.Op
	for i := range 300 {
		many = append(many, topicOp(fmt.Sprintf("many-%d", i), 1, term.Epoch()))
	}
	if err := b.Commit(ctx, term, many...); err != nil {
		t.Fatalf("Commit of 300 topics: got %v, want nil", err)
	}
	var moves []coord.Op
	for i := range 300 {
		st := coord.PartitionState{Topic: fmt.Sprintf("many-%d", i), Leader: 1, LeaderEpoch: 1, ISR: []coord.BrokerID{1}}
		moves = append(moves, coord.SetPartition{State: st, ExpectedEpoch: 0})
	}
	if err := b.Commit(ctx, term, moves...); err != nil {
		t.Fatalf("Commit of SetPartitions over 300 topics: got %v, want nil", err)
	}

	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := md.Topics["re"].Partitions(); got != 3 {
		t.Fatalf("re: got %d partitions, want 3", got)
	}
	for p := range int32(3) {
		if st, ok := md.Partitions[coord.TopicPartition{Topic: "re", Partition: p}]; !ok || st.PartitionEpoch != 0 {
			t.Fatalf("re-%d: got %+v (present %v), want a fresh state at epoch 0", p, st, ok)
		}
	}
	if st := md.Partitions[coord.TopicPartition{Topic: "fresh", Partition: 1}]; st.PartitionEpoch != 1 || st.LeaderEpoch != 1 {
		t.Fatalf("fresh-1: got %+v, want leader epoch 1 at partition epoch 1", st)
	}
	for i := range 300 {
		tp := coord.TopicPartition{Topic: fmt.Sprintf("many-%d", i)}
		if st := md.Partitions[tp]; st.PartitionEpoch != 1 || st.LeaderEpoch != 1 {
			t.Fatalf("%v: got %+v, want leader epoch 1 at partition epoch 1", tp, st)
		}
	}
}

// BenchmarkMetadata100k is conformance.BenchMetadata with 100 topics of
// 1 000 partitions.
func BenchmarkMetadata100k(b *testing.B) {
	conformance.BenchMetadata(b, conformance.NewEtcdHarness(server.Endpoints(), server, 6*time.Second), 100, 1000)
}

// BenchmarkControllerFailover100k is conformance.BenchControllerFailover
// with 100 topics of 1 000 partitions.
func BenchmarkControllerFailover100k(b *testing.B) {
	conformance.BenchControllerFailover(b, conformance.NewEtcdHarness(server.Endpoints(), server, 6*time.Second), 100, 1000)
}

// TestStandbyLoadIsCurrent: a campaigning broker's Load comes from its
// standby view and holds every commit made before it, however recent: a
// topic created, a partition state changed, a topic deleted, and commits
// made while the broker was cut off from etcd and then compacted away
// from its watch's history.
func TestStandbyLoadIsCurrent(t *testing.T) {
	ctl := open(t, "/standby", 1, nil)
	fn := faultnet.New()
	standby := openStandby(t, "/standby", 2, fn)
	_, term := elect(t, ctl, 1)
	ctx := ctxFor(t, 60*time.Second)
	s2, err := standby.Register(ctx, broker(2))
	if err != nil {
		t.Fatalf("Register broker 2: %v", err)
	}
	campaignCtx, stopCampaign := context.WithCancel(ctx)
	campaigned := make(chan error, 1)
	go func() {
		_, err := standby.Campaign(campaignCtx, s2)
		campaigned <- err
	}()
	t.Cleanup(func() {
		stopCampaign()
		<-campaigned
	})

	load := func(what string) *coord.Metadata {
		t.Helper()
		md, err := standby.Load(ctx)
		if err != nil {
			t.Fatalf("Load %s: %v", what, err)
		}
		return md
	}
	// The view is loaded once the campaign starts: wait for the first
	// Load it serves.
	for etcd.StandbyLoads(standby) == 0 {
		load("before any commit")
		if ctx.Err() != nil {
			t.Fatal("the standby view never served a Load")
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("t%d", i)
		if err := ctl.Commit(ctx, term, topicOp(name, 2, term.Epoch())); err != nil {
			t.Fatalf("Commit %s: %v", name, err)
		}
		served := etcd.StandbyLoads(standby)
		md := load("after creating " + name)
		if _, ok := md.Topics[name]; !ok || len(md.Partitions) != 2*(i+1) {
			t.Fatalf("Load right after creating %s: topics %v, %d partitions; want it and %d", name, md.TopicNames(), len(md.Partitions), 2*(i+1))
		}
		if got := etcd.StandbyLoads(standby); got != served+1 {
			t.Fatalf("Load after creating %s: standby served %d Loads, want %d", name, got, served+1)
		}
	}
	// A write outside the metadata moves etcd's revision past the
	// view's last event: the view is still current.
	if _, err := ctl.Client().Put(ctx, "/standby/elsewhere", "x"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	served := etcd.StandbyLoads(standby)
	if md := load("after a write elsewhere"); len(md.Topics) != 3 {
		t.Fatalf("Load after a write elsewhere: topics %v, want t0 t1 t2", md.TopicNames())
	}
	if got := etcd.StandbyLoads(standby); got != served+1 {
		t.Fatalf("Load after a write elsewhere: standby served %d Loads, want %d", got, served+1)
	}
	st := coord.PartitionState{Topic: "t1", Partition: 1, Leader: 1, LeaderEpoch: 7, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
	if err := ctl.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: 0}); err != nil {
		t.Fatalf("Commit SetPartition: %v", err)
	}
	if got := load("after a SetPartition").Partitions[st.TopicPartition()]; got.LeaderEpoch != 7 || got.PartitionEpoch != 1 {
		t.Fatalf("Load after SetPartition: got %+v, want leader epoch 7 at partition epoch 1", got)
	}
	if err := ctl.Commit(ctx, term, coord.DeleteTopic{Name: "t0"}); err != nil {
		t.Fatalf("Commit DeleteTopic: %v", err)
	}
	if md := load("after a DeleteTopic"); len(md.Topics) != 2 || len(md.Partitions) != 4 {
		t.Fatalf("Load after deleting t0: topics %v, %d partitions; want t1 t2 and 4", md.TopicNames(), len(md.Partitions))
	}

	// Cut off, the view misses commits etcd then compacts: it reloads
	// once healed, and a Load in between reads etcd itself.
	fn.Cut()
	for i := 3; i < 6; i++ {
		if err := ctl.Commit(ctx, term, topicOp(fmt.Sprintf("t%d", i), 1, term.Epoch())); err != nil {
			t.Fatalf("Commit t%d: %v", i, err)
		}
	}
	resp, err := ctl.Client().Get(ctx, "/standby/topics/t5")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if _, err := ctl.Client().Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatalf("Compact at %d: %v", resp.Header.Revision, err)
	}
	fn.Heal()
	if md := load("after the compaction"); len(md.Topics) != 5 {
		t.Fatalf("Load after the compaction: topics %v, want t1 to t5", md.TopicNames())
	}
	served = etcd.StandbyLoads(standby)
	for etcd.StandbyLoads(standby) == served {
		if md := load("once the view reloaded"); len(md.Topics) != 5 {
			t.Fatalf("Load once the view reloaded: topics %v, want t1 to t5", md.TopicNames())
		}
		if ctx.Err() != nil {
			t.Fatal("the standby view never served a Load after the compaction")
		}
	}
}

// TestWarmMetadata: a backend that has not campaigned warms its standby
// view on request, as the broker driving a migration does with its
// target; WarmMetadata returns once the view holds what was committed
// before, and the next Load, right after more commits, is the view's.
func TestWarmMetadata(t *testing.T) {
	ctl := open(t, "/warm", 1, nil)
	warm := openStandby(t, "/warm", 2, nil)
	_, term := elect(t, ctl, 1)
	ctx := ctxFor(t, 60*time.Second)
	if err := ctl.Commit(ctx, term, topicOp("before", 2, term.Epoch())); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := warm.WarmMetadata(ctx); err != nil {
		t.Fatalf("WarmMetadata: %v", err)
	}
	if err := ctl.Commit(ctx, term, topicOp("after", 2, term.Epoch())); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	md, err := warm.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(md.Topics) != 2 || len(md.Partitions) != 4 {
		t.Fatalf("Load after warming: topics %v, %d partitions; want before and after, 4", md.TopicNames(), len(md.Partitions))
	}
	if got := etcd.StandbyLoads(warm); got != 1 {
		t.Fatalf("the standby view served %d Loads, want the one after warming", got)
	}
}
