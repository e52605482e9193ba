package etcd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/etcd"
)

// freshPrefix returns a prefix no earlier run used, as the embedded etcd
// outlives one.
func freshPrefix(name string) string {
	return fmt.Sprintf("/%s-%d", name, time.Now().UnixNano())
}

// nextRecord waits for the next value of a WatchMigration.
func nextRecord(t *testing.T, ctx context.Context, ch <-chan coord.MigrationRecord) coord.MigrationRecord {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("WatchMigration: channel closed, want a record")
		}
		return r
	case <-ctx.Done():
		t.Fatal("WatchMigration: no record before the deadline")
	}
	return coord.MigrationRecord{}
}

// waitRecord reads ch until it sends a record in phase want.
func waitRecord(t *testing.T, ctx context.Context, ch <-chan coord.MigrationRecord, id string, want coord.MigrationPhase) coord.Migration {
	t.Helper()
	for {
		r := nextRecord(t, ctx, ch)
		if r.OK && r.Migration.ID == id && r.Migration.Phase == want {
			return r.Migration
		}
	}
}

// TestMigrationRecordCompareAndSet: the record is absent, then set
// against no record, then replaced only against its ID and phase; every
// change reaches a watcher; the version SetMigration returns is above
// the broker epochs and Versions reported before it.
func TestMigrationRecordCompareAndSet(t *testing.T) {
	prefix := freshPrefix("record")
	b := open(t, prefix, 1, nil)
	other := open(t, prefix, 2, nil)
	ctx := ctxFor(t, 30*time.Second)

	if _, ok, err := b.Migration(ctx); err != nil || ok {
		t.Fatalf("Migration of a new cluster: got ok %v, %v; want none", ok, err)
	}
	ch, err := other.WatchMigration(ctx)
	if err != nil {
		t.Fatalf("WatchMigration: %v", err)
	}
	if r := nextRecord(t, ctx, ch); r.OK {
		t.Fatalf("WatchMigration first value: got %+v, want none", r)
	}
	s, err := b.Register(ctx, broker(1))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	defer s.Close()
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}

	frozen := coord.Migration{ID: "m1", From: "etcd", To: "zk", Phase: coord.MigrationFrozen,
		Target: map[string]string{"coordination.backend": "zk", "zookeeper.connect": "zk1:2181"}}
	frozenAt, err := b.SetMigration(ctx, nil, frozen)
	if err != nil {
		t.Fatalf("SetMigration(nil, frozen): got %v, want nil", err)
	}
	if frozenAt <= s.Broker().Epoch || frozenAt <= md.Version {
		t.Fatalf("SetMigration version: got %d, want above broker epoch %d and metadata version %d", frozenAt, s.Broker().Epoch, md.Version)
	}
	got := waitRecord(t, ctx, ch, "m1", coord.MigrationFrozen)
	if got.From != "etcd" || got.To != "zk" || !reflect.DeepEqual(got.Target, frozen.Target) || got.Updated.IsZero() {
		t.Fatalf("watched record: got %+v, want %+v with Updated set", got, frozen)
	}
	resp, err := b.Client().Get(ctx, prefix+"/migration")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != frozenAt {
		t.Fatalf("record key %s/migration: got %v (err %v), want one key written at revision %d", prefix, resp.Kvs, err, frozenAt)
	}

	if _, err := other.SetMigration(ctx, nil, frozen); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("SetMigration(nil, ...) over a record: got %v, want ErrVersionMismatch", err)
	}
	wrongPhase := coord.Migration{ID: "m1", Phase: coord.MigrationSwitched}
	if _, err := other.SetMigration(ctx, &wrongPhase, coord.Migration{ID: "m1", Phase: coord.MigrationFinalized}); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("SetMigration against the wrong phase: got %v, want ErrVersionMismatch", err)
	}
	wrongID := coord.Migration{ID: "m0", Phase: coord.MigrationFrozen}
	if _, err := other.SetMigration(ctx, &wrongID, coord.Migration{ID: "m1", Phase: coord.MigrationRolledBack}); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("SetMigration against the wrong ID: got %v, want ErrVersionMismatch", err)
	}
	rolledBack := frozen
	rolledBack.Phase = coord.MigrationRolledBack
	rolledAt, err := other.SetMigration(ctx, &frozen, rolledBack)
	if err != nil {
		t.Fatalf("SetMigration(frozen, rolled back): got %v, want nil", err)
	}
	if rolledAt <= frozenAt {
		t.Fatalf("SetMigration version: got %d after %d, want greater", rolledAt, frozenAt)
	}
	waitRecord(t, ctx, ch, "m1", coord.MigrationRolledBack)
	m, ok, err := b.Migration(ctx)
	if err != nil || !ok || m.Phase != coord.MigrationRolledBack || m.ID != "m1" {
		t.Fatalf("Migration: got %+v, %v, %v; want m1 rolled back", m, ok, err)
	}
}

// refusable are the writes a refusing record refuses, each written so
// that it changes the store when it is allowed.
type refusable struct {
	name string
	do   func(ctx context.Context) error
}

func sha512Credential(fill byte) coord.ScramCredential {
	return coord.ScramCredential{Mechanism: coord.ScramSHA512, Salt: []byte{fill, fill}, StoredKey: bytes.Repeat([]byte{fill}, 64),
		ServerKey: bytes.Repeat([]byte{fill + 1}, 64), Iterations: 4096}
}

func sha256Credential(fill byte) coord.ScramCredential {
	return coord.ScramCredential{Mechanism: coord.ScramSHA256, Salt: []byte{fill}, StoredKey: bytes.Repeat([]byte{fill}, 32),
		ServerKey: bytes.Repeat([]byte{fill + 1}, 32), Iterations: 8192}
}

func readACL(topic, principal string) coord.ACL {
	return coord.ACL{ResourceType: coord.ACLResourceTopic, ResourceName: topic, PatternType: coord.ACLPatternLiteral,
		Principal: principal, Host: "*", Operation: coord.ACLOperationRead, Permission: coord.ACLPermissionAllow}
}

// storeState is everything the refused writes could change.
type storeState struct {
	md   *coord.Metadata
	sec  *coord.SecurityState
	cfgs *coord.ConfigState
	next int64
}

func readStore(t *testing.T, ctx context.Context, b *etcd.Backend) storeState {
	t.Helper()
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
	next, err := b.NextProducerID(ctx)
	if err != nil {
		t.Fatalf("NextProducerID: %v", err)
	}
	return storeState{md: md, sec: sec, cfgs: cfgs, next: next}
}

// sameStore fails unless a and b hold the same metadata, security and
// config content and producer id counter.
func sameStore(t *testing.T, what string, a, b storeState) {
	t.Helper()
	if !reflect.DeepEqual(a.md.Topics, b.md.Topics) || !reflect.DeepEqual(a.md.Partitions, b.md.Partitions) {
		t.Fatalf("%s: metadata changed: got %v %v, want %v %v", what, b.md.Topics, b.md.Partitions, a.md.Topics, a.md.Partitions)
	}
	if !a.sec.SameContent(b.sec) {
		t.Fatalf("%s: security state changed: got %+v, want %+v", what, b.sec, a.sec)
	}
	if !a.cfgs.SameContent(b.cfgs) {
		t.Fatalf("%s: config state changed: got %+v, want %+v", what, b.cfgs, a.cfgs)
	}
	if a.next != b.next {
		t.Fatalf("%s: next producer id: got %d, want %d", what, b.next, a.next)
	}
}

// TestFrozenRecordRefusesWrites: while the record is frozen, every write
// it guards fails with ErrMigrated and changes nothing, on the backend
// that froze it and on another one, while sessions, elections and reads
// go on; after a rollback every one of them works again.
func TestFrozenRecordRefusesWrites(t *testing.T) {
	prefix := freshPrefix("refuse")
	freezer := open(t, prefix, 1, nil)
	b := open(t, prefix, 2, nil)
	ctx := ctxFor(t, 60*time.Second)
	s, term := elect(t, b, 2)
	defer s.Close()
	if err := b.Commit(ctx, term, topicOp("orders", 2, term.Epoch())); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := b.SetScramCredential(ctx, "alice", sha512Credential(1)); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	if err := b.CreateACLs(ctx, []coord.ACL{readACL("orders", "User:alice")}); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	// b reads the record (none) before the freeze: its view is stale
	// when the writes below begin.
	if _, ok, err := b.Migration(ctx); err != nil || ok {
		t.Fatalf("Migration: got %v, %v; want none", ok, err)
	}

	leaderEpoch := int32(0)
	writes := []refusable{
		{"Commit", func(ctx context.Context) error {
			md, err := b.Load(ctx)
			if err != nil {
				return err
			}
			st := md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 0}]
			leaderEpoch++
			next := st.Clone()
			next.LeaderEpoch = leaderEpoch
			return b.Commit(ctx, term, coord.SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})
		}},
		{"empty Commit", func(ctx context.Context) error { return b.Commit(ctx, term) }},
		{"AllocateProducerIDs", func(ctx context.Context) error {
			_, err := b.AllocateProducerIDs(ctx, 2)
			return err
		}},
		{"ProducerIDKey storing a key", func(ctx context.Context) error {
			_, err := b.ProducerIDKey(ctx, bytes.Repeat([]byte{7}, coord.ProducerIDKeySize))
			return err
		}},
		{"SetScramCredential", func(ctx context.Context) error { return b.SetScramCredential(ctx, "bob", sha256Credential(3)) }},
		{"DeleteScramCredential", func(ctx context.Context) error { return b.DeleteScramCredential(ctx, "alice", coord.ScramSHA512) }},
		{"CreateACLs", func(ctx context.Context) error {
			return b.CreateACLs(ctx, []coord.ACL{readACL("orders", "User:bob")})
		}},
		{"DeleteACLs", func(ctx context.Context) error {
			removed, err := b.DeleteACLs(ctx, []coord.ACLFilter{coord.AnyACL})
			if err == nil && len(removed) == 0 {
				return errors.New("DeleteACLs removed nothing")
			}
			return err
		}},
		{"AlterBrokerConfigs", func(ctx context.Context) error {
			_, err := b.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false,
				[]coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "log.retention.ms", Value: "1000"}})
			return err
		}},
		{"AlterClientQuotas", func(ctx context.Context) error {
			_, err := b.AlterClientQuotas(ctx, coord.QuotaEntity{User: "alice"},
				[]coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaProducerByteRate, Value: "1048576"}})
			return err
		}},
	}

	before := readStore(t, ctx, freezer)
	frozen := coord.Migration{ID: "m-refuse", From: "etcd", To: "raft", Phase: coord.MigrationFrozen}
	if _, err := freezer.SetMigration(ctx, nil, frozen); err != nil {
		t.Fatalf("SetMigration frozen: %v", err)
	}
	for _, w := range writes {
		if err := w.do(ctx); !errors.Is(err, coord.ErrMigrated) {
			t.Fatalf("%s while frozen: got %v, want ErrMigrated", w.name, err)
		}
	}
	sameStore(t, "after the refused writes", before, readStore(t, ctx, freezer))
	if resp, err := b.Client().Get(ctx, prefix+"/producer_id_key"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("producer id key while frozen: got %v (err %v), want none stored", resp.Kvs, err)
	}

	// Sessions, elections and reads go on.
	s3, err := freezer.Register(ctx, broker(3))
	if err != nil {
		t.Fatalf("Register while frozen: got %v, want nil", err)
	}
	defer s3.Close()
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign while frozen: %v", err)
	}
	term, err = b.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign while frozen: got %v, want a term", err)
	}
	if members, err := b.Members(ctx); err != nil || len(members) != 2 {
		t.Fatalf("Members while frozen: got %v, %v; want brokers 2 and 3", members, err)
	}

	rolledBack := frozen
	rolledBack.Phase = coord.MigrationRolledBack
	if _, err := freezer.SetMigration(ctx, &frozen, rolledBack); err != nil {
		t.Fatalf("SetMigration rolled back: %v", err)
	}
	for _, w := range writes {
		if err := w.do(ctx); err != nil {
			t.Fatalf("%s after the rollback: got %v, want nil", w.name, err)
		}
	}
	after := readStore(t, ctx, freezer)
	if st := after.md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 0}]; st.LeaderEpoch != leaderEpoch {
		t.Fatalf("orders-0 after the rollback: got %+v, want leader epoch %d", st, leaderEpoch)
	}
	if _, ok := after.sec.Credential("bob", coord.ScramSHA256); !ok || len(after.sec.Users["alice"]) != 0 {
		t.Fatalf("users after the rollback: got %v, want bob only", after.sec.Users)
	}
	if after.cfgs.Brokers[coord.DefaultBrokerEntity]["log.retention.ms"] != "1000" || len(after.cfgs.Quotas) != 1 {
		t.Fatalf("configs after the rollback: got %+v, want the default broker's and alice's quota", after.cfgs)
	}
}

// TestCommitRacingFreezeNeverLandsAfter: commits of several goroutines
// race a freeze; each one either lands before the record's write (its
// key's mod revision is below the record's) or fails with ErrMigrated,
// and every commit that returned nil is in the store.
func TestCommitRacingFreezeNeverLandsAfter(t *testing.T) {
	prefix := freshPrefix("race")
	freezer := open(t, prefix, 1, nil)
	b := open(t, prefix, 2, nil)
	ctx := ctxFor(t, 60*time.Second)
	_, term := elect(t, b, 2)
	const writers = 4
	if err := b.Commit(ctx, term, topicOp("racing", writers, term.Epoch())); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	started := make(chan struct{}, writers)
	landed := make([]int32, writers) // the last leader epoch a commit of partition p returned nil for
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for p := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := coord.PartitionState{Topic: "racing", Partition: int32(p), Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
			epoch := int32(0)
			for i := 0; ; i++ {
				if i == 3 {
					started <- struct{}{}
				}
				st.LeaderEpoch = epoch + 1
				err := b.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: epoch})
				if errors.Is(err, coord.ErrMigrated) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("commit of racing-%d at epoch %d: %w", p, epoch, err)
					return
				}
				epoch++
				landed[p] = epoch
			}
		}()
	}
	for range writers {
		<-started
	}
	frozenAt, err := freezer.SetMigration(ctx, nil, coord.Migration{ID: "m-race", From: "etcd", To: "zk", Phase: coord.MigrationFrozen})
	if err != nil {
		t.Fatalf("SetMigration frozen: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rec, err := b.Client().Get(ctx, prefix+"/migration")
	if err != nil || len(rec.Kvs) != 1 || rec.Kvs[0].ModRevision != frozenAt {
		t.Fatalf("record: got %v (err %v), want written at %d", rec.Kvs, err, frozenAt)
	}
	resp, err := b.Client().Get(ctx, prefix+"/partitions/racing/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get partitions: %v", err)
	}
	md, err := freezer.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, kv := range resp.Kvs {
		if kv.ModRevision >= frozenAt {
			t.Fatalf("%s written at revision %d, want below the freeze at %d", kv.Key, kv.ModRevision, frozenAt)
		}
	}
	for p, epoch := range landed {
		st := md.Partitions[coord.TopicPartition{Topic: "racing", Partition: int32(p)}]
		if st.LeaderEpoch != epoch || st.PartitionEpoch != epoch {
			t.Fatalf("racing-%d: got %+v, want the last commit that returned nil (leader epoch %d)", p, st, epoch)
		}
	}
	t.Logf("commits that landed before the freeze, by partition: %v", landed)
}

var testBases = coord.EpochBases{Broker: 1_000_000, Controller: 2_000_000, Partition: 300, Version: 5_000_000}

// handSnapshot is a snapshot as Export would take of a small cluster:
// three topics, one of them mid-reassignment, topic configs, SCRAM users,
// ACLs, broker configs, quotas, a producer id counter and key.
func handSnapshot() *coord.Snapshot {
	md := coord.NewMetadata()
	md.Version = 4_999_000
	topics := []coord.Topic{
		{Name: "orders", ID: [16]byte{1, 2, 3}, Assignment: [][]coord.BrokerID{{1, 2, 3}, {2, 3, 1}},
			Config: map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"}},
		{Name: "clicks", ID: [16]byte{4, 5, 6}, Assignment: [][]coord.BrokerID{{4, 1, 2, 3}},
			Adding: map[int32][]coord.BrokerID{0: {4}}, Removing: map[int32][]coord.BrokerID{0: {3}}},
		{Name: "logs", ID: [16]byte{7, 8, 9}, Assignment: [][]coord.BrokerID{{3}, {1}, {2}}},
	}
	for i, topic := range topics {
		md.Topics[topic.Name] = topic
		for p, replicas := range topic.Assignment {
			tp := coord.TopicPartition{Topic: topic.Name, Partition: int32(p)}
			md.Partitions[tp] = coord.PartitionState{Topic: topic.Name, Partition: int32(p), Leader: replicas[0],
				LeaderEpoch: int32(10*i + p), ISR: replicas[:len(replicas)-1], PartitionEpoch: 299, ControllerEpoch: 1_999_000}
		}
	}
	sec := coord.NewSecurityState()
	sec.Version = 4_999_100
	sec.Users["alice"] = []coord.ScramCredential{sha256Credential(1), sha512Credential(2)}
	sec.Users["ops/bot"] = []coord.ScramCredential{sha512Credential(3)}
	sec.ACLs = coord.SortACLs([]coord.ACL{readACL("orders", "User:alice"),
		{ResourceType: coord.ACLResourceGroup, ResourceName: "etl-", PatternType: coord.ACLPatternPrefixed,
			Principal: "User:ops/bot", Host: "10.0.0.1", Operation: coord.ACLOperationAll, Permission: coord.ACLPermissionDeny}})
	cfgs := coord.NewConfigState()
	cfgs.Version = 4_999_200
	cfgs.Brokers[coord.DefaultBrokerEntity] = map[string]string{"log.retention.ms": "3600000"}
	cfgs.Brokers["2"] = map[string]string{"leader.replication.throttled.rate": "1048576"}
	cfgs.Topics["orders"] = md.Topics["orders"].Config
	cfgs.Quotas[coord.QuotaEntity{User: "alice"}] = map[string]string{coord.QuotaProducerByteRate: "2048"}
	cfgs.Quotas[coord.QuotaEntity{IP: "10.0.0.9"}] = map[string]string{coord.QuotaConnectionCreationRate: "10"}
	return &coord.Snapshot{Metadata: md, Security: sec, Configs: cfgs, NextProducerID: 123_000,
		ProducerIDKey: bytes.Repeat([]byte{0xab}, coord.ProducerIDKeySize), Bases: testBases}
}

func importMigration() coord.Migration {
	return coord.Migration{ID: "m-import", From: "zk", To: "etcd"}
}

// checkImported fails unless b holds snap, with the partition epochs
// fresh and raised by the bases, and the versions raised.
func checkImported(t *testing.T, ctx context.Context, b *etcd.Backend, snap *coord.Snapshot) {
	t.Helper()
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(md.Topics, snap.Metadata.Topics) {
		t.Fatalf("imported topics: got %+v, want %+v", md.Topics, snap.Metadata.Topics)
	}
	want := map[coord.TopicPartition]coord.PartitionState{}
	for tp, st := range snap.Metadata.Partitions {
		st.PartitionEpoch = snap.Bases.Partition
		want[tp] = st
	}
	if !reflect.DeepEqual(md.Partitions, want) {
		t.Fatalf("imported partition states: got %+v, want %+v", md.Partitions, want)
	}
	if md.Version <= snap.Bases.Version {
		t.Fatalf("metadata version: got %d, want above the base %d", md.Version, snap.Bases.Version)
	}
	sec, err := b.LoadSecurity(ctx)
	if err != nil {
		t.Fatalf("LoadSecurity: %v", err)
	}
	if !sec.SameContent(snap.Security) || sec.Version <= snap.Bases.Version {
		t.Fatalf("imported security state: got %+v, want %+v at a version above %d", sec, snap.Security, snap.Bases.Version)
	}
	cfgs, err := b.LoadConfigs(ctx)
	if err != nil {
		t.Fatalf("LoadConfigs: %v", err)
	}
	if !cfgs.SameContent(snap.Configs) || cfgs.Version <= snap.Bases.Version {
		t.Fatalf("imported configs: got %+v, want %+v at a version above %d", cfgs, snap.Configs, snap.Bases.Version)
	}
	m, ok, err := b.Migration(ctx)
	if err != nil || !ok || m.Phase != coord.MigrationImported || m.Bases != snap.Bases {
		t.Fatalf("record after Import: got %+v, %v, %v; want imported with bases %+v", m, ok, err, snap.Bases)
	}
}

// TestImportRaisesEpochsAndVersions: a snapshot imported into an empty
// backend reads back as it was, its partition epochs and versions raised
// by the bases; the producer ids go on from the snapshot's counter with
// its key; new broker and controller epochs are above the bases, and
// every epoch the backend reports fences as it should: a SetPartition
// with a reported epoch lands, one with a stale epoch does not, Replaces
// of a source epoch replaces nothing, EvictController of the reported
// controller evicts it.
func TestImportRaisesEpochsAndVersions(t *testing.T) {
	prefix := freshPrefix("import")
	b := open(t, prefix, 1, nil)
	watcher := open(t, prefix, 2, nil)
	ctx := ctxFor(t, 60*time.Second)
	snap := handSnapshot()

	// A watcher that starts before the import follows it with the
	// bases.
	mdCh, err := watcher.WatchMetadata(ctx)
	if err != nil {
		t.Fatalf("WatchMetadata: %v", err)
	}
	if err := b.Import(ctx, snap, importMigration()); err != nil {
		t.Fatalf("Import: got %v, want nil", err)
	}
	checkImported(t, ctx, b, snap)
	checkImported(t, ctx, open(t, prefix, 3, nil), snap) // a backend opened after it
	for {
		md := <-mdCh
		if len(md.Partitions) < len(snap.Metadata.Partitions) {
			continue
		}
		if st := md.Partitions[coord.TopicPartition{Topic: "orders"}]; st.PartitionEpoch == testBases.Partition && md.Version > testBases.Version {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("WatchMetadata after the import: got %+v, want partition epochs raised by %d", md.Partitions, testBases.Partition)
		}
	}

	block, err := b.AllocateProducerIDs(ctx, 1)
	if err != nil || block.First != snap.NextProducerID {
		t.Fatalf("AllocateProducerIDs after the import: got %v, %v; want the block from %d", block, err, snap.NextProducerID)
	}
	key, err := b.ProducerIDKey(ctx, bytes.Repeat([]byte{1}, coord.ProducerIDKeySize))
	if err != nil || !bytes.Equal(key, snap.ProducerIDKey) {
		t.Fatalf("ProducerIDKey after the import: got %x, %v; want the snapshot's %x", key, err, snap.ProducerIDKey)
	}

	// Broker epochs: raised, and a Replaces from the source replaces
	// nothing.
	s, err := b.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092, Replaces: testBases.Broker - 1})
	if err != nil {
		t.Fatalf("Register with a source epoch as Replaces: got %v, want nil", err)
	}
	defer s.Close()
	raw, err := b.Client().Get(ctx, prefix+"/brokers/ids/1")
	if err != nil || len(raw.Kvs) != 1 {
		t.Fatalf("Get registration: %v, %v", raw, err)
	}
	if got, want := s.Broker().Epoch, raw.Kvs[0].CreateRevision+testBases.Broker; got != want || s.Replaced() != 0 {
		t.Fatalf("broker epoch: got %d (replaced %d), want %d (the create revision plus the base), replacing nothing", got, s.Replaced(), want)
	}
	if members, err := watcher.Members(ctx); err != nil || len(members) != 1 || members[0].Epoch != s.Broker().Epoch {
		t.Fatalf("Members: got %v, %v; want broker 1 at epoch %d", members, err, s.Broker().Epoch)
	}
	// A Replaces of this backend's own epoch replaces the registration.
	next, err := b.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092, Replaces: s.Broker().Epoch})
	if err != nil || next.Replaced() != s.Broker().Epoch || next.Broker().Epoch <= s.Broker().Epoch {
		t.Fatalf("Register replacing epoch %d: got %v, %v; want a greater epoch, replacing it", s.Broker().Epoch, next, err)
	}
	defer next.Close()

	// Controller epochs.
	ctrlCh, err := watcher.WatchController(ctx)
	if err != nil {
		t.Fatalf("WatchController: %v", err)
	}
	term, err := b.Campaign(ctx, next)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if term.Epoch() <= testBases.Controller {
		t.Fatalf("term epoch: got %d, want above the base %d", term.Epoch(), testBases.Controller)
	}
	if info, err := watcher.Controller(ctx); err != nil || info != (coord.ControllerInfo{ID: 1, Epoch: term.Epoch()}) {
		t.Fatalf("Controller: got %+v, %v; want broker 1 at epoch %d", info, err, term.Epoch())
	}
	for info := range ctrlCh {
		if info.ID == 1 {
			if info.Epoch != term.Epoch() {
				t.Fatalf("WatchController: got %+v, want epoch %d", info, term.Epoch())
			}
			break
		}
	}

	// Partition epochs fence.
	tp := coord.TopicPartition{Topic: "clicks"}
	st := snap.Metadata.Partitions[tp]
	st.LeaderEpoch++
	st.ControllerEpoch = term.Epoch()
	if err := b.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: testBases.Partition}); err != nil {
		t.Fatalf("SetPartition at the reported epoch %d: got %v, want nil", testBases.Partition, err)
	}
	for _, stale := range []int32{testBases.Partition, testBases.Partition - 1, 0, 1} {
		if err := b.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: stale}); !errors.Is(err, coord.ErrVersionMismatch) {
			t.Fatalf("SetPartition at the stale epoch %d: got %v, want ErrVersionMismatch", stale, err)
		}
	}
	if err := b.Commit(ctx, term, topicOp("after", 1, term.Epoch())); err != nil {
		t.Fatalf("Commit of a topic created after the import: %v", err)
	}
	md, err := watcher.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := md.Partitions[tp]; got.PartitionEpoch != testBases.Partition+1 || got.LeaderEpoch != st.LeaderEpoch {
		t.Fatalf("%v after SetPartition: got %+v, want partition epoch %d", tp, got, testBases.Partition+1)
	}
	if got := md.Partitions[coord.TopicPartition{Topic: "after"}]; got.PartitionEpoch != testBases.Partition {
		t.Fatalf("a partition created after the import: got %+v, want partition epoch %d", got, testBases.Partition)
	}

	// The import's record refuses a second import.
	if err := b.Import(ctx, snap, importMigration()); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("Import into an imported backend: got %v, want ErrExists", err)
	}

	// EvictController takes the reported epoch back.
	if err := watcher.EvictController(ctx, coord.ControllerInfo{ID: 1, Epoch: term.Epoch() - 1}); err != nil {
		t.Fatalf("EvictController of an older epoch: %v", err)
	}
	if info, _ := watcher.Controller(ctx); info.ID != 1 {
		t.Fatalf("EvictController of an older epoch removed the controller: got %+v", info)
	}
	if err := watcher.EvictController(ctx, coord.ControllerInfo{ID: 1, Epoch: term.Epoch()}); err != nil {
		t.Fatalf("EvictController: %v", err)
	}
	select {
	case <-term.Done():
	case <-ctx.Done():
		t.Fatal("term of the evicted controller: still live, want ended")
	}
}

// TestImportIntoNonEmptyBackend: Import fails with ErrExists, writing
// nothing, where a topic, a credential, an ACL, a broker config or a
// quota is stored.
func TestImportIntoNonEmptyBackend(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	cases := []struct {
		name  string
		write func(b *etcd.Backend) error
	}{
		{"topic", func(b *etcd.Backend) error {
			_, term := elect(t, b, 1)
			return b.Commit(ctx, term, topicOp("there", 1, term.Epoch()))
		}},
		{"scram credential", func(b *etcd.Backend) error { return b.SetScramCredential(ctx, "u", sha256Credential(1)) }},
		{"acl", func(b *etcd.Backend) error { return b.CreateACLs(ctx, []coord.ACL{readACL("t", "User:u")}) }},
		{"broker config", func(b *etcd.Backend) error {
			_, err := b.AlterBrokerConfigs(ctx, "1", false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "k", Value: "v"}})
			return err
		}},
		{"quota", func(b *etcd.Backend) error {
			_, err := b.AlterClientQuotas(ctx, coord.QuotaEntity{ClientID: "c"},
				[]coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaConsumerByteRate, Value: "1"}})
			return err
		}},
	}
	for _, c := range cases {
		prefix := freshPrefix("nonempty")
		b := open(t, prefix, 1, nil)
		if err := c.write(b); err != nil {
			t.Fatalf("%s: write: %v", c.name, err)
		}
		if err := b.Import(ctx, handSnapshot(), importMigration()); !errors.Is(err, coord.ErrExists) {
			t.Fatalf("Import into a backend with a %s: got %v, want ErrExists", c.name, err)
		}
		if _, ok, err := b.Migration(ctx); err != nil || ok {
			t.Fatalf("%s: record after the refused Import: got %v, %v; want none", c.name, ok, err)
		}
		if md, err := b.Load(ctx); err != nil || md.Topics["orders"].Name != "" {
			t.Fatalf("%s: Load after the refused Import: got %v, %v; want no imported topic", c.name, md, err)
		}
	}
}

// TestImportRetriedAfterStoppingMidway: an Import that stopped midway
// left its record in phase Importing, some of its keys and some of
// another attempt's; Import again with the same migration replaces them
// all, and one with another migration is ErrExists. Writes are refused
// while the record is importing.
func TestImportRetriedAfterStoppingMidway(t *testing.T) {
	prefix := freshPrefix("midway")
	b := open(t, prefix, 1, nil)
	ctx := ctxFor(t, 60*time.Second)
	snap := handSnapshot()
	m := importMigration()

	// What an Import stopped midway leaves: the record in phase
	// Importing, a topic of the snapshot, a stray one and a credential.
	stopped := m
	stopped.Phase = coord.MigrationImporting
	stopped.Bases = snap.Bases
	record, _ := json.Marshal(stopped)
	stray, _ := json.Marshal(coord.Topic{Name: "stray", Assignment: [][]coord.BrokerID{{9}}})
	orders, _ := json.Marshal(snap.Metadata.Topics["orders"])
	for k, v := range map[string]string{
		prefix + "/migration":                        string(record),
		prefix + "/topics/stray":                     string(stray),
		prefix + "/partitions/stray/0":               `{"controller_epoch":1,"leader":9,"version":1,"leader_epoch":0,"isr":[9]}`,
		prefix + "/topics/orders":                    string(orders),
		prefix + "/security/scram/eve/SCRAM-SHA-256": coord.FormatScramCredential(sha256Credential(9)),
	} {
		if _, err := b.Client().Put(ctx, k, v); err != nil {
			t.Fatalf("Put %s: %v", k, err)
		}
	}
	if err := b.SetScramCredential(ctx, "mallory", sha256Credential(5)); !errors.Is(err, coord.ErrMigrated) {
		t.Fatalf("SetScramCredential while importing: got %v, want ErrMigrated", err)
	}
	other := m
	other.ID = "m-other"
	if err := b.Import(ctx, snap, other); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("Import of another migration over one stopped midway: got %v, want ErrExists", err)
	}
	if err := b.Import(ctx, snap, m); err != nil {
		t.Fatalf("Import retried: got %v, want nil", err)
	}
	checkImported(t, ctx, b, snap)
	if err := b.SetScramCredential(ctx, "mallory", sha256Credential(5)); err != nil {
		t.Fatalf("SetScramCredential once imported: got %v, want nil", err)
	}
}

// TestImportLargeSnapshot: a snapshot of 10 000 partitions imports, in
// transactions etcd accepts, and loads back whole.
func TestImportLargeSnapshot(t *testing.T) {
	prefix := freshPrefix("large")
	b := open(t, prefix, 1, nil)
	ctx := ctxFor(t, 120*time.Second)
	snap := handSnapshot()
	for i := range 10 {
		name := fmt.Sprintf("big-%d", i)
		topic := coord.Topic{Name: name, ID: [16]byte{byte(i + 100)}, Assignment: make([][]coord.BrokerID, 1000)}
		for p := range topic.Assignment {
			topic.Assignment[p] = []coord.BrokerID{1, 2, 3}
			snap.Metadata.Partitions[coord.TopicPartition{Topic: name, Partition: int32(p)}] = coord.PartitionState{
				Topic: name, Partition: int32(p), Leader: 1, LeaderEpoch: 5, ISR: []coord.BrokerID{1, 2, 3}, ControllerEpoch: 7}
		}
		snap.Metadata.Topics[name] = topic
	}
	if err := b.Import(ctx, snap, importMigration()); err != nil {
		t.Fatalf("Import of %d partitions: got %v, want nil", len(snap.Metadata.Partitions), err)
	}
	checkImported(t, ctx, b, snap)
}

// TestExportFromFrozenImportIntoAnother: coord.Export of a frozen etcd
// cluster imported into another prefix holds the same content, and the
// target's epochs go on above everything the source reported; exported
// again (the target frozen in turn), the bases only grow.
func TestExportFromFrozenImportIntoAnother(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	src := open(t, freshPrefix("export-src"), 1, nil)
	s, term := elect(t, src, 1)
	defer s.Close()
	create := topicOp("orders", 3, term.Epoch())
	create.Topic.Config = map[string]string{"retention.ms": "1000"}
	if err := src.Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := src.SetScramCredential(ctx, "alice", sha256Credential(4)); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	if _, err := src.AllocateProducerIDs(ctx, 1); err != nil {
		t.Fatalf("AllocateProducerIDs: %v", err)
	}
	srcKey, err := src.ProducerIDKey(ctx, bytes.Repeat([]byte{3}, coord.ProducerIDKeySize))
	if err != nil {
		t.Fatalf("ProducerIDKey: %v", err)
	}
	m := coord.Migration{ID: "m-chain", From: "etcd", To: "etcd", Phase: coord.MigrationFrozen}
	frozenAt, err := src.SetMigration(ctx, nil, m)
	if err != nil {
		t.Fatalf("SetMigration frozen: %v", err)
	}
	snap, err := coord.Export(ctx, src, frozenAt)
	if err != nil {
		t.Fatalf("Export of the frozen source: %v", err)
	}
	if !bytes.Equal(snap.ProducerIDKey, srcKey) || snap.NextProducerID != coord.ProducerIDBlockSize {
		t.Fatalf("exported producer ids: key %x next %d, want key %x next %d", snap.ProducerIDKey, snap.NextProducerID, srcKey, coord.ProducerIDBlockSize)
	}

	target := open(t, freshPrefix("export-dst"), 1, nil)
	if err := target.Import(ctx, snap, coord.Migration{ID: m.ID, From: "etcd", To: "etcd"}); err != nil {
		t.Fatalf("Import: %v", err)
	}
	checkImported(t, ctx, target, snap)
	s2, term2 := elect(t, target, 1)
	defer s2.Close()
	if s2.Broker().Epoch <= s.Broker().Epoch || s2.Broker().Epoch <= frozenAt || term2.Epoch() <= term.Epoch() {
		t.Fatalf("target epochs: broker %d, controller %d; want above the source's broker %d, freeze %d, controller %d",
			s2.Broker().Epoch, term2.Epoch(), s.Broker().Epoch, frozenAt, term.Epoch())
	}

	// The target becomes a source in turn: its bases do not go down.
	frozenAgain, err := target.SetMigration(ctx, &coord.Migration{ID: m.ID, Phase: coord.MigrationImported},
		coord.Migration{ID: "m-next", From: "etcd", To: "zk", Phase: coord.MigrationFrozen})
	if err != nil {
		t.Fatalf("SetMigration of the target frozen: %v", err)
	}
	again, ok, err := target.Migration(ctx)
	if err != nil || !ok || again.Bases != snap.Bases {
		t.Fatalf("record of the re-frozen target: got %+v, %v, %v; want its bases %+v kept", again, ok, err, snap.Bases)
	}
	if s2.Broker().Epoch != mustMember(t, ctx, target, 1).Epoch || frozenAgain <= s2.Broker().Epoch {
		t.Fatalf("re-frozen target: broker epoch %d, freeze at %d; want the epoch kept and the freeze above it", s2.Broker().Epoch, frozenAgain)
	}
	next, err := coord.Export(ctx, target, frozenAgain)
	if err != nil {
		t.Fatalf("Export of the re-frozen target: %v", err)
	}
	if next.Bases.Broker <= snap.Bases.Broker || next.Bases.Controller <= snap.Bases.Controller ||
		next.Bases.Partition < snap.Bases.Partition || next.Bases.Version <= snap.Bases.Version {
		t.Fatalf("bases of the next migration: got %+v, want above %+v", next.Bases, snap.Bases)
	}
}

func mustMember(t *testing.T, ctx context.Context, b *etcd.Backend, id coord.BrokerID) coord.Broker {
	t.Helper()
	members, err := b.Members(ctx)
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	for _, m := range members {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("Members: got %v, want broker %d", members, id)
	return coord.Broker{}
}
