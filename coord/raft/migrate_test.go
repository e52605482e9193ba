package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// followerOf returns a node of backends that is not the Raft leader.
func followerOf(t *testing.T, backends []*Backend) *Backend {
	t.Helper()
	return backends[(leaderOf(t, backends)+1)%len(backends)]
}

// TestMigrationRecordCompareAndWatch: on a follower, the record is absent,
// then set by a compare-and-set on its ID and phase (a wrong expectation
// fails with ErrVersionMismatch), read back on every node, and a watcher
// sees none, then each phase in turn. The version returned is above the
// broker epochs reported before.
func TestMigrationRecordCompareAndWatch(t *testing.T) {
	backends := openTestCluster(t, 3)
	follower := followerOf(t, backends)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := follower.Register(ctx, coord.Broker{ID: follower.id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	defer s.Close()

	if _, ok, err := follower.Migration(ctx); err != nil || ok {
		t.Fatalf("Migration on a new cluster: got ok %v, %v, want none", ok, err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	records, err := follower.WatchMigration(watchCtx)
	if err != nil {
		t.Fatalf("WatchMigration: %v", err)
	}
	next := func(want string) coord.MigrationRecord {
		t.Helper()
		select {
		case r := <-records:
			return r
		case <-ctx.Done():
			t.Fatalf("WatchMigration: no %s", want)
		}
		return coord.MigrationRecord{}
	}
	if r := next("first record"); r.OK {
		t.Fatalf("WatchMigration's first record: got %+v, want none", r)
	}

	frozen := coord.Migration{ID: "m1", From: "raft", To: "etcd", Phase: coord.MigrationFrozen,
		Target: map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "127.0.0.1:2379"}}
	version, err := follower.SetMigration(ctx, nil, frozen)
	if err != nil {
		t.Fatalf("SetMigration of the first record: %v", err)
	}
	if version <= s.Broker().Epoch {
		t.Fatalf("SetMigration version %d, want above the broker epoch %d reported before", version, s.Broker().Epoch)
	}
	for _, b := range backends {
		got, ok, err := b.Migration(ctx)
		if err != nil || !ok || got.ID != "m1" || got.Phase != coord.MigrationFrozen || got.Target["etcd.endpoints"] != "127.0.0.1:2379" || got.Updated.IsZero() {
			t.Fatalf("Migration on node %d: got %+v, %v, %v, want m1 frozen with its target", b.id, got, ok, err)
		}
	}
	if r := next("frozen record"); !r.OK || r.Migration.Phase != coord.MigrationFrozen {
		t.Fatalf("WatchMigration after the freeze: got %+v, want m1 frozen", r)
	}

	switched := frozen
	switched.Phase = coord.MigrationSwitched
	for _, prev := range []*coord.Migration{nil, {ID: "m1", Phase: coord.MigrationImported}, {ID: "m0", Phase: coord.MigrationFrozen}} {
		if _, err := follower.SetMigration(ctx, prev, switched); !errors.Is(err, coord.ErrVersionMismatch) {
			t.Fatalf("SetMigration expecting %+v: got %v, want ErrVersionMismatch", prev, err)
		}
	}
	v2, err := follower.SetMigration(ctx, &frozen, switched)
	if err != nil || v2 <= version {
		t.Fatalf("SetMigration frozen to switched: got %d, %v, want a version above %d", v2, err, version)
	}
	if r := next("switched record"); r.Migration.Phase != coord.MigrationSwitched {
		t.Fatalf("WatchMigration after the switch: got %+v, want m1 switched", r)
	}
	stopWatch()
	for range records {
	}
}

// TestMigrationRefusesWritesWhileFrozen: once SetMigration freezes the
// cluster, every write the record covers fails with ErrMigrated, on the
// leader and through a follower, and changes nothing; registrations,
// campaigns and reads go on. Rolled back, the writes work again.
func TestMigrationRefusesWritesWhileFrozen(t *testing.T) {
	backends := openTestCluster(t, 3)
	leader := backends[leaderOf(t, backends)]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, term := controllerOn(t, ctx, leader)
	follower := followerOf(t, backends)
	if err := follower.SetScramCredential(ctx, "alice", testCredential(coord.ScramSHA256, 1)); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	if err := follower.CreateACLs(ctx, []coord.ACL{testACL("orders", coord.ACLOperationRead)}); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	frozen := coord.Migration{ID: "m", From: "raft", To: "zk", Phase: coord.MigrationFrozen}
	if _, err := follower.SetMigration(ctx, nil, frozen); err != nil {
		t.Fatalf("SetMigration frozen: %v", err)
	}
	type state struct {
		md   *coord.Metadata
		sec  *coord.SecurityState
		cfgs *coord.ConfigState
		next int64
	}
	load := func() state {
		t.Helper()
		md, err := follower.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		sec, err := follower.LoadSecurity(ctx)
		if err != nil {
			t.Fatalf("LoadSecurity: %v", err)
		}
		cfgs, err := follower.LoadConfigs(ctx)
		if err != nil {
			t.Fatalf("LoadConfigs: %v", err)
		}
		next, err := follower.NextProducerID(ctx)
		if err != nil {
			t.Fatalf("NextProducerID: %v", err)
		}
		return state{md, sec, cfgs, next}
	}
	before := load()

	create, _ := topicOf("orders", 2)
	key := bytes.Repeat([]byte{5}, coord.ProducerIDKeySize)
	writes := []struct {
		name  string
		write func(b *Backend) error
	}{
		{"Commit", func(*Backend) error { return leader.Commit(ctx, term, create) }},
		{"AllocateProducerIDs", func(b *Backend) error { _, err := b.AllocateProducerIDs(ctx, b.id); return err }},
		{"ProducerIDKey", func(b *Backend) error { _, err := b.ProducerIDKey(ctx, key); return err }},
		{"SetScramCredential", func(b *Backend) error {
			return b.SetScramCredential(ctx, "bob", testCredential(coord.ScramSHA512, 2))
		}},
		{"DeleteScramCredential", func(b *Backend) error { return b.DeleteScramCredential(ctx, "alice", coord.ScramSHA256) }},
		{"CreateACLs", func(b *Backend) error {
			return b.CreateACLs(ctx, []coord.ACL{testACL("orders", coord.ACLOperationWrite)})
		}},
		{"DeleteACLs", func(b *Backend) error { _, err := b.DeleteACLs(ctx, []coord.ACLFilter{coord.AnyACL}); return err }},
		{"AlterBrokerConfigs", func(b *Backend) error {
			_, err := b.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false, []coord.ConfigAlteration{{Key: "log.retention.ms", Value: "1000"}})
			return err
		}},
		{"AlterClientQuotas", func(b *Backend) error {
			_, err := b.AlterClientQuotas(ctx, coord.QuotaEntity{User: "alice"}, []coord.ConfigAlteration{{Key: coord.QuotaProducerByteRate, Value: "1024"}})
			return err
		}},
	}
	for _, w := range writes {
		for _, b := range []*Backend{leader, follower} {
			if err := w.write(b); !errors.Is(err, coord.ErrMigrated) {
				t.Fatalf("%s on node %d while frozen: got %v, want ErrMigrated", w.name, b.id, err)
			}
		}
	}
	after := load()
	if !reflect.DeepEqual(after.md, before.md) || !after.sec.SameContent(before.sec) ||
		!after.cfgs.SameContent(before.cfgs) || after.next != before.next {
		t.Fatalf("state after the refused writes: got %+v, want %+v", after, before)
	}
	if leader.fsm.producerIDKey() != nil {
		t.Fatalf("producer id key stored while frozen")
	}

	// Sessions and elections go on.
	s2, err := follower.Register(ctx, coord.Broker{ID: follower.id, Host: "127.0.0.1", Port: 9093})
	if err != nil {
		t.Fatalf("Register while frozen: %v", err)
	}
	defer s2.Close()
	if _, err := follower.Members(ctx); err != nil {
		t.Fatalf("Members while frozen: %v", err)
	}

	rolledBack := frozen
	rolledBack.Phase = coord.MigrationRolledBack
	if _, err := leader.SetMigration(ctx, &frozen, rolledBack); err != nil {
		t.Fatalf("SetMigration rolled back: %v", err)
	}
	for _, w := range writes {
		if err := w.write(follower); err != nil {
			t.Fatalf("%s after the rollback: %v", w.name, err)
		}
	}
	if md, err := follower.Load(ctx); err != nil || len(md.Topics) != 1 {
		t.Fatalf("Load after the rollback: got %v, %v, want topic orders", md, err)
	}
}

// TestCommitRacingFreezeNeverLandsAfter: commits keep coming while a
// follower freezes the cluster. Each either landed before the freeze
// (the Load right after SetMigration returns has its topic) or failed
// with ErrMigrated; nothing lands after: a Load once every committer
// stopped is the same.
func TestCommitRacingFreezeNeverLandsAfter(t *testing.T) {
	backends := openTestCluster(t, 3)
	leader := backends[leaderOf(t, backends)]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, term := controllerOn(t, ctx, leader)
	follower := followerOf(t, backends)

	const committers = 4
	var mu sync.Mutex
	landed := map[string]bool{}
	started := make(chan struct{})
	var startOnce sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, committers)
	for c := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("race-%d-%d", c, i)
				create, _ := topicOf(name, 1)
				err := leader.Commit(ctx, term, create)
				if errors.Is(err, coord.ErrMigrated) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("commit of %s: %w", name, err)
					return
				}
				mu.Lock()
				landed[name] = true
				if len(landed) >= 2*committers {
					startOnce.Do(func() { close(started) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-started:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatalf("commits before the freeze: none within the deadline")
	}
	version, err := follower.SetMigration(ctx, nil, coord.Migration{ID: "m", From: "raft", To: "zk", Phase: coord.MigrationFrozen})
	if err != nil {
		t.Fatalf("SetMigration frozen: %v", err)
	}
	atFreeze, err := follower.Load(ctx)
	if err != nil {
		t.Fatalf("Load after the freeze: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	later, err := follower.Load(ctx)
	if err != nil {
		t.Fatalf("Load once the committers stopped: %v", err)
	}
	if !slices.Equal(later.TopicNames(), atFreeze.TopicNames()) || later.Version != atFreeze.Version {
		t.Fatalf("topics once the committers stopped: got %d at version %d, want the %d at version %d the freeze left",
			len(later.Topics), later.Version, len(atFreeze.Topics), atFreeze.Version)
	}
	if atFreeze.Version >= version {
		t.Fatalf("metadata version %d after the freeze at %d: want below", atFreeze.Version, version)
	}
	mu.Lock()
	defer mu.Unlock()
	for name := range landed {
		if _, ok := atFreeze.Topics[name]; !ok {
			t.Fatalf("topic %s: its commit succeeded, but the Load after the freeze lacks it", name)
		}
	}
	if len(atFreeze.Topics) != len(landed) {
		t.Fatalf("topics after the freeze: got %d, want the %d whose commits succeeded", len(atFreeze.Topics), len(landed))
	}
}

// TestImportThroughObserver: an observer imports a hand-built snapshot
// (three kinds of topics, one mid-reassignment, topic configs, SCRAM
// users, ACLs, broker configs, quotas, a producer id counter and key,
// bases) into a new cluster. Every node then loads it with epochs and
// versions raised by the bases; producer ids continue at the snapshot's
// counter under its key; a new registration's epoch and a new term's
// epoch are above the bases; a SetPartition expecting the reported epoch
// works and one expecting a stale epoch fails; a second Import is
// ErrExists.
func TestImportThroughObserver(t *testing.T) {
	qn := newQuorumNet(t, 3, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	qn.waitMembership(20*time.Second, "voters [1 2 3] observers [4]")
	observer := qn.node(4)
	snap := testSnapshot(3, 2)
	m := coord.Migration{ID: "m1", From: "zk", To: "raft"}
	if err := observer.Import(ctx, snap, m); err != nil {
		t.Fatalf("Import on the observer: %v", err)
	}
	leader := qn.leader()
	var follower *Backend
	for id := coord.BrokerID(1); id <= 3; id++ {
		if b := qn.node(id); b != leader {
			follower = b
		}
	}
	for _, b := range []*Backend{observer, follower, leader} {
		md, err := b.Load(ctx)
		if err != nil {
			t.Fatalf("Load on node %d: %v", b.id, err)
		}
		sec, err := b.LoadSecurity(ctx)
		if err != nil {
			t.Fatalf("LoadSecurity on node %d: %v", b.id, err)
		}
		cfgs, err := b.LoadConfigs(ctx)
		if err != nil {
			t.Fatalf("LoadConfigs on node %d: %v", b.id, err)
		}
		checkImported(t, snap, md, sec, cfgs)
		rec, ok, err := b.Migration(ctx)
		if err != nil || !ok || rec.ID != "m1" || rec.Phase != coord.MigrationImported || rec.Bases != snap.Bases {
			t.Fatalf("Migration on node %d: got %+v, %v, %v, want m1 imported with the snapshot's bases", b.id, rec, ok, err)
		}
	}

	block, err := observer.AllocateProducerIDs(ctx, observer.id)
	if err != nil || block.First != snap.NextProducerID {
		t.Fatalf("AllocateProducerIDs after the import: got %v, %v, want first %d", block, err, snap.NextProducerID)
	}
	key, err := follower.ProducerIDKey(ctx, bytes.Repeat([]byte{1}, coord.ProducerIDKeySize))
	if err != nil || !bytes.Equal(key, snap.ProducerIDKey) {
		t.Fatalf("ProducerIDKey after the import: got %x, %v, want the snapshot's %x", key, err, snap.ProducerIDKey)
	}

	s, term := controllerOn(t, ctx, leader)
	if s.Broker().Epoch <= snap.Bases.Broker {
		t.Fatalf("broker epoch of a registration after the import: got %d, want above %d", s.Broker().Epoch, snap.Bases.Broker)
	}
	if term.Epoch() <= snap.Bases.Controller {
		t.Fatalf("controller epoch after the import: got %d, want above %d", term.Epoch(), snap.Bases.Controller)
	}
	members, err := observer.Members(ctx)
	if err != nil || len(members) != 1 || members[0].Epoch != s.Broker().Epoch {
		t.Fatalf("Members on the observer: got %+v, %v, want broker %d at epoch %d", members, err, leader.id, s.Broker().Epoch)
	}
	if info, err := observer.Controller(ctx); err != nil || info.ID != leader.id || info.Epoch != term.Epoch() {
		t.Fatalf("Controller on the observer: got %+v, %v, want broker %d at epoch %d", info, err, leader.id, term.Epoch())
	}
	// A broker that held a source epoch replaces nothing here.
	if _, err := leader.Register(ctx, coord.Broker{ID: leader.id, Host: "127.0.0.1", Port: 9092, Replaces: snap.Bases.Broker - 1}); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("Register replacing a source epoch while registered: got %v, want ErrExists", err)
	}

	tp := coord.TopicPartition{Topic: "moving", Partition: 1}
	st := snap.Metadata.Partitions[tp]
	st.Leader, st.LeaderEpoch, st.ControllerEpoch = 2, st.LeaderEpoch+1, term.Epoch()
	if err := leader.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: snap.Bases.Partition}); err != nil {
		t.Fatalf("SetPartition of %v expecting the reported epoch %d: %v", tp, snap.Bases.Partition, err)
	}
	for _, stale := range []int32{snap.Bases.Partition, snap.Metadata.Partitions[tp].PartitionEpoch} {
		if err := leader.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: stale}); !errors.Is(err, coord.ErrVersionMismatch) {
			t.Fatalf("SetPartition of %v expecting the stale epoch %d: got %v, want ErrVersionMismatch", tp, stale, err)
		}
	}
	create, _ := topicOf("after-import", 1)
	if err := leader.Commit(ctx, term, create); err != nil {
		t.Fatalf("CreateTopic after the import: %v", err)
	}
	md, err := observer.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := md.Partitions[tp]; got.PartitionEpoch != snap.Bases.Partition+1 || got.Leader != 2 {
		t.Fatalf("%v after the SetPartition: got %+v, want leader 2 at epoch %d", tp, got, snap.Bases.Partition+1)
	}
	if got := md.Partitions[coord.TopicPartition{Topic: "after-import"}]; got.PartitionEpoch != snap.Bases.Partition {
		t.Fatalf("a new topic's partition: epoch %d, want %d (the base)", got.PartitionEpoch, snap.Bases.Partition)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched, err := observer.WatchMetadata(watchCtx)
	if err != nil {
		t.Fatalf("WatchMetadata: %v", err)
	}
	if first := <-watched; first.Version < md.Version || first.Partitions[tp].PartitionEpoch != snap.Bases.Partition+1 {
		t.Fatalf("WatchMetadata's first state: version %d, %v epoch %d, want at least %d and %d",
			first.Version, tp, first.Partitions[tp].PartitionEpoch, md.Version, snap.Bases.Partition+1)
	}

	if err := follower.Import(ctx, snap, m); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("Import into an imported cluster: got %v, want ErrExists", err)
	}
}

// TestImportRetriedAfterStoppingMidway: an Import of 10 000 partitions
// that stopped after its first chunk (its record left in phase
// Importing) refuses writes and another migration's Import, and the same
// migration's Import, retried, replaces what it wrote and completes; a
// cluster that holds a topic refuses an Import with ErrExists.
func TestImportRetriedAfterStoppingMidway(t *testing.T) {
	backends := openTestCluster(t, 1)
	b := backends[0]
	leaderOf(t, backends)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	snap := testSnapshot(8000, 2000)
	m := coord.Migration{ID: "m1", From: "etcd", To: "raft", Bases: snap.Bases}
	begin := m
	begin.Phase = coord.MigrationImporting
	if _, err := b.apply(ctx, "import begin", &command{Type: cmdImportBegin, Migration: &migrationCommand{Record: &begin}}); err != nil {
		t.Fatalf("import_begin: %v", err)
	}
	chunks, err := importChunks(snap, m.ID)
	if err != nil {
		t.Fatalf("importChunks: %v", err)
	}
	if _, err := b.apply(ctx, "import chunk", &command{Type: cmdImportChunk, Migration: chunks[0]}); err != nil {
		t.Fatalf("first import_chunk: %v", err)
	}
	if _, err := b.AllocateProducerIDs(ctx, 1); !errors.Is(err, coord.ErrMigrated) {
		t.Fatalf("AllocateProducerIDs while importing: got %v, want ErrMigrated", err)
	}
	other := m
	other.ID = "m2"
	if err := b.Import(ctx, snap, other); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("Import of another migration while m1 is importing: got %v, want ErrExists", err)
	}

	if err := b.Import(ctx, snap, m); err != nil {
		t.Fatalf("Import retried: %v", err)
	}
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	sec, err := b.LoadSecurity(ctx)
	if err != nil {
		t.Fatalf("LoadSecurity: %v", err)
	}
	cfgs, err := b.LoadConfigs(ctx)
	if err != nil {
		t.Fatalf("LoadConfigs: %v", err)
	}
	checkImported(t, snap, md, sec, cfgs)
	if rec, _, err := b.Migration(ctx); err != nil || rec.Phase != coord.MigrationImported {
		t.Fatalf("Migration after the retried Import: got %+v, %v, want imported", rec, err)
	}

	fresh := openTestCluster(t, 1)[0]
	leaderOf(t, []*Backend{fresh})
	s, term := controllerOn(t, ctx, fresh)
	defer s.Close()
	create, _ := topicOf("existing", 1)
	if err := fresh.Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := fresh.Import(ctx, snap, m); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("Import into a cluster holding a topic: got %v, want ErrExists", err)
	}
	if _, ok, err := fresh.Migration(ctx); err != nil || ok {
		t.Fatalf("Migration after the refused Import: got ok %v, %v, want none", ok, err)
	}
}
