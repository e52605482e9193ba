package zk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/zk"
)

// migration returns a record of migration id from zk to etcd in phase.
func migration(id string, phase coord.MigrationPhase) coord.Migration {
	return coord.Migration{ID: id, From: "zk", To: "etcd", Phase: phase,
		Target:  map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "http://127.0.0.1:2379"},
		Updated: time.Now().UTC().Truncate(time.Millisecond)}
}

// TestMigrationRecordCompareAndSetAndWatch: the record is none at first;
// SetMigration writes it only over the record named as prev, returns a
// version above every broker epoch reported before, and every backend of
// the cluster reads it; WatchMigration sends the current record, then
// every change.
func TestMigrationRecordCompareAndSetAndWatch(t *testing.T) {
	s := server(t)
	connect := s.Addr() + chroot()
	b := open(t, connect, 6*time.Second, nil)
	other := open(t, connect, 6*time.Second, nil)
	ctx := ctxFor(t, 60*time.Second)

	if _, ok, err := b.Migration(ctx); err != nil || ok {
		t.Fatalf("migration of a new cluster: got ok %v, %v; want none", ok, err)
	}
	watch, err := other.WatchMigration(ctx)
	if err != nil {
		t.Fatalf("watch migration: %v", err)
	}
	waitFor(t, watch, func(r coord.MigrationRecord) bool { return !r.OK }, "first record (none)")
	sess, err := b.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	defer sess.Close()

	frozen := migration("m1", coord.MigrationFrozen)
	wrong := migration("m0", coord.MigrationFrozen)
	if _, err := b.SetMigration(ctx, &wrong, frozen); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("set migration over %s while none is stored: got %v, want ErrVersionMismatch", wrong.ID, err)
	}
	frozenAt, err := b.SetMigration(ctx, nil, frozen)
	if err != nil {
		t.Fatalf("set migration frozen: %v", err)
	}
	if frozenAt <= sess.Broker().Epoch {
		t.Errorf("frozen at version %d: want above broker epoch %d", frozenAt, sess.Broker().Epoch)
	}
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if frozenAt <= md.Version {
		t.Errorf("frozen at version %d: want above metadata version %d", frozenAt, md.Version)
	}
	waitFor(t, watch, func(r coord.MigrationRecord) bool {
		return r.OK && r.Migration.ID == "m1" && r.Migration.Phase == coord.MigrationFrozen
	}, "frozen record")
	if _, err := other.SetMigration(ctx, nil, migration("m2", coord.MigrationFrozen)); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("set migration over none while m1 is stored: got %v, want ErrVersionMismatch", err)
	}
	stale := migration("m1", coord.MigrationSwitched)
	if _, err := other.SetMigration(ctx, &stale, migration("m1", coord.MigrationFinalized)); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("set migration over m1 switched while m1 is frozen: got %v, want ErrVersionMismatch", err)
	}
	switched := migration("m1", coord.MigrationSwitched)
	switchedAt, err := other.SetMigration(ctx, &frozen, switched)
	if err != nil {
		t.Fatalf("set migration switched: %v", err)
	}
	if switchedAt <= frozenAt {
		t.Errorf("switched at version %d: want above frozen's %d", switchedAt, frozenAt)
	}
	got, ok, err := b.Migration(ctx)
	if err != nil || !ok || got.ID != "m1" || got.Phase != coord.MigrationSwitched || !maps.Equal(got.Target, switched.Target) ||
		!got.Updated.Equal(switched.Updated) {
		t.Fatalf("migration read back: got %+v, %v, %v; want %+v", got, ok, err, switched)
	}
	waitFor(t, watch, func(r coord.MigrationRecord) bool {
		return r.OK && r.Migration.Phase == coord.MigrationSwitched
	}, "switched record")
}

// refusedWrites are every write the migration record refuses, each
// against the state refusalFixture leaves; each returns its error.
func refusedWrites(ctx context.Context, b *zk.Backend, term coord.Term, state coord.PartitionState) map[string]func() error {
	alice := "User:alice"
	return map[string]func() error{
		"Commit": func() error {
			st := state
			st.LeaderEpoch++
			return b.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: state.PartitionEpoch})
		},
		"AllocateProducerIDs": func() error {
			_, err := b.AllocateProducerIDs(ctx, 1)
			return err
		},
		"ProducerIDKey (store)": func() error {
			_, err := b.ProducerIDKey(ctx, bytes.Repeat([]byte{7}, coord.ProducerIDKeySize))
			return err
		},
		"SetScramCredential": func() error {
			return b.SetScramCredential(ctx, "bob", scramCredential(coord.ScramSHA256, 2))
		},
		"DeleteScramCredential": func() error {
			return b.DeleteScramCredential(ctx, "alice", coord.ScramSHA256)
		},
		"CreateACLs": func() error {
			return b.CreateACLs(ctx, []coord.ACL{topicACL("payments", "User:bob")})
		},
		"DeleteACLs": func() error {
			_, err := b.DeleteACLs(ctx, []coord.ACLFilter{{ResourceType: coord.ACLResourceAny, PatternType: coord.ACLPatternAny,
				Principal: &alice, Operation: coord.ACLOperationAny, Permission: coord.ACLPermissionAny}})
			return err
		},
		"AlterBrokerConfigs": func() error {
			_, err := b.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false,
				[]coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "log.retention.ms", Value: "1000"}})
			return err
		},
		"AlterClientQuotas": func() error {
			_, err := b.AlterClientQuotas(ctx, coord.QuotaEntity{ClientID: "app"},
				[]coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaProducerByteRate, Value: "1024"}})
			return err
		},
	}
}

func scramCredential(mechanism string, seed byte) coord.ScramCredential {
	size := 32
	if mechanism == coord.ScramSHA512 {
		size = 64
	}
	return coord.ScramCredential{Mechanism: mechanism, Salt: []byte{seed, 1, 2, 3}, StoredKey: bytes.Repeat([]byte{seed}, size),
		ServerKey: bytes.Repeat([]byte{seed + 1}, size), Iterations: 4096}
}

func topicACL(topic, principal string) coord.ACL {
	return coord.ACL{ResourceType: coord.ACLResourceTopic, ResourceName: topic, PatternType: coord.ACLPatternLiteral,
		Principal: principal, Host: "*", Operation: coord.ACLOperationRead, Permission: coord.ACLPermissionAllow}
}

// everything is what the backend stores, for comparing before and after.
type everything struct {
	md   *coord.Metadata
	sec  *coord.SecurityState
	cfgs *coord.ConfigState
	next int64
}

func loadEverything(t *testing.T, ctx context.Context, b *zk.Backend) everything {
	t.Helper()
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	sec, err := b.LoadSecurity(ctx)
	if err != nil {
		t.Fatalf("load security: %v", err)
	}
	cfgs, err := b.LoadConfigs(ctx)
	if err != nil {
		t.Fatalf("load configs: %v", err)
	}
	next, err := b.NextProducerID(ctx)
	if err != nil {
		t.Fatalf("next producer id: %v", err)
	}
	return everything{md: md, sec: sec, cfgs: cfgs, next: next}
}

func (e everything) same(o everything) bool {
	return reflect.DeepEqual(e.md.Topics, o.md.Topics) && reflect.DeepEqual(e.md.Partitions, o.md.Partitions) &&
		e.sec.SameContent(o.sec) && e.cfgs.SameContent(o.cfgs) && e.next == o.next
}

// TestFrozenRecordRefusesWritesUntilRolledBack: while the record is
// frozen, every write it refuses fails with ErrMigrated and changes
// nothing, whether the backend that writes froze it or learnt of it only
// from its own write's failed guard; sessions, elections and reads go on.
// Rolled back, every write works again.
func TestFrozenRecordRefusesWritesUntilRolledBack(t *testing.T) {
	s := server(t)
	connect := s.Addr() + chroot()
	writer := open(t, connect, 6*time.Second, nil)
	admin := open(t, connect, 6*time.Second, nil)
	ctx := ctxFor(t, 120*time.Second)

	_, term := controllerTerm(t, ctx, writer, 1)
	state := coord.PartitionState{Topic: "orders", Partition: 0, Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
	topic := coord.Topic{Name: "orders", ID: [16]byte{9}, Assignment: [][]coord.BrokerID{{1}}}
	if err := writer.Commit(ctx, term, coord.CreateTopic{Topic: topic, States: []coord.PartitionState{state}}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := writer.SetScramCredential(ctx, "alice", scramCredential(coord.ScramSHA256, 1)); err != nil {
		t.Fatalf("set scram credential: %v", err)
	}
	if err := writer.CreateACLs(ctx, []coord.ACL{topicACL("orders", "User:alice")}); err != nil {
		t.Fatalf("create acls: %v", err)
	}

	frozen := migration("m1", coord.MigrationFrozen)
	rolledBack := migration("m1", coord.MigrationRolledBack)
	for round, freezer := range []*zk.Backend{admin, writer} {
		before := loadEverything(t, ctx, writer)
		var prev *coord.Migration
		if round > 0 {
			prev = &rolledBack
		}
		if _, err := freezer.SetMigration(ctx, prev, frozen); err != nil {
			t.Fatalf("round %d: freeze: %v", round, err)
		}
		for name, write := range refusedWrites(ctx, writer, term, before.md.Partitions[state.TopicPartition()]) {
			if err := write(); !errors.Is(err, coord.ErrMigrated) {
				t.Errorf("round %d: %s while frozen: got %v, want ErrMigrated", round, name, err)
			}
		}
		if after := loadEverything(t, ctx, writer); !after.same(before) {
			t.Errorf("round %d: the store after the refused writes: got %+v, want %+v", round, after, before)
		}
		if _, err := writer.ProducerIDKey(ctx, bytes.Repeat([]byte{7}, coord.ProducerIDKeySize)); !errors.Is(err, coord.ErrMigrated) {
			t.Errorf("round %d: producer id key while frozen and none stored: got %v, want ErrMigrated", round, err)
		}
		// Sessions, elections and reads go on.
		sess, err := writer.Register(ctx, coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9093})
		if err != nil {
			t.Fatalf("round %d: register while frozen: %v", round, err)
		}
		sess.Close()
		if ctrl, err := admin.Controller(ctx); err != nil || ctrl.ID != 1 {
			t.Errorf("round %d: controller while frozen: got %+v, %v; want broker 1", round, ctrl, err)
		}
		if _, err := freezer.SetMigration(ctx, &frozen, rolledBack); err != nil {
			t.Fatalf("round %d: roll back: %v", round, err)
		}
	}

	// Rolled back, every write works again, the key store included.
	writes := refusedWrites(ctx, writer, term, loadEverything(t, ctx, writer).md.Partitions[state.TopicPartition()])
	for _, name := range slices.Sorted(maps.Keys(writes)) {
		if err := writes[name](); err != nil {
			t.Errorf("%s after the rollback: %v", name, err)
		}
	}
}

// TestCommitRacingFreezeNeverLandsAfterIt: a controller commits topics
// one after another while another backend freezes the cluster; every
// commit that succeeded landed before the freeze (its znodes' zxid is
// below the record's), the first that did not fails with ErrMigrated, and
// no topic lands after.
func TestCommitRacingFreezeNeverLandsAfterIt(t *testing.T) {
	s := server(t)
	root := chroot()
	connect := s.Addr() + root
	writer := open(t, connect, 6*time.Second, nil)
	admin := open(t, connect, 6*time.Second, nil)
	conn := raw(t, s.Addr())
	ctx := ctxFor(t, 120*time.Second)
	_, term := controllerTerm(t, ctx, writer, 1)

	var prev *coord.Migration
	for round := range 5 {
		frozen := migration("m"+strconv.Itoa(round), coord.MigrationFrozen)
		committed := make(chan string, 1000)
		failed := make(chan error, 1)
		go func() {
			defer close(committed)
			for i := 0; ; i++ {
				name := fmt.Sprintf("race-%d-%d", round, i)
				st := coord.PartitionState{Topic: name, Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
				err := writer.Commit(ctx, term, coord.CreateTopic{Topic: coord.Topic{Name: name, Assignment: [][]coord.BrokerID{{1}}},
					States: []coord.PartitionState{st}})
				if err != nil {
					failed <- err
					return
				}
				committed <- name
			}
		}()
		// Freeze once the writer is under way.
		first := <-committed
		frozenAt, err := admin.SetMigration(ctx, prev, frozen)
		if err != nil {
			t.Fatalf("round %d: freeze: %v", round, err)
		}
		names := []string{first}
		for name := range committed {
			names = append(names, name)
		}
		if err := <-failed; !errors.Is(err, coord.ErrMigrated) {
			t.Fatalf("round %d: the commit after the freeze: got %v, want ErrMigrated", round, err)
		}
		topics, _, err := conn.Children(root + "/brokers/topics")
		if err != nil {
			t.Fatalf("list topics: %v", err)
		}
		for _, name := range topics {
			_, stat, err := conn.Get(root + "/brokers/topics/" + name + "/partitions/0/state")
			if err != nil {
				t.Fatalf("get state of %s: %v", name, err)
			}
			if stat.Czxid >= frozenAt {
				t.Errorf("round %d: topic %s landed at zxid %d, after the freeze at %d", round, name, stat.Czxid, frozenAt)
			}
			if strings.HasPrefix(name, fmt.Sprintf("race-%d-", round)) && !slices.Contains(names, name) {
				t.Errorf("round %d: topic %s exists, but its commit did not succeed", round, name)
			}
		}
		rolledBack := frozen
		rolledBack.Phase = coord.MigrationRolledBack
		if _, err := admin.SetMigration(ctx, &frozen, rolledBack); err != nil {
			t.Fatalf("round %d: roll back: %v", round, err)
		}
		prev = &rolledBack
	}
}

// testBases are the bases of the test snapshots: far above anything the
// test's ZooKeeper reports of its own.
var testBases = coord.EpochBases{Broker: 1 << 40, Controller: 700, Partition: 300, Version: 1 << 40}

// testSnapshot builds a snapshot by hand: three topics (one being
// reassigned, with topic configs), partition states, SCRAM users, ACLs
// of both pattern types, broker configs, client quotas of every entity
// kind, a producer id counter and key.
func testSnapshot() *coord.Snapshot {
	md := coord.NewMetadata()
	md.Version = 5000
	add := func(t coord.Topic, leaderEpoch int32) {
		md.Topics[t.Name] = t
		for p, replicas := range t.Assignment {
			tp := coord.TopicPartition{Topic: t.Name, Partition: int32(p)}
			md.Partitions[tp] = coord.PartitionState{Topic: t.Name, Partition: int32(p), Leader: replicas[0], LeaderEpoch: leaderEpoch + int32(p),
				ISR: slices.Clone(replicas), PartitionEpoch: 40 + int32(p), ControllerEpoch: 12}
		}
	}
	add(coord.Topic{Name: "orders", ID: [16]byte{1, 2, 3}, Assignment: [][]coord.BrokerID{{1, 2}, {2, 3}, {3, 1}},
		Config: map[string]string{"retention.ms": "3600000", "min.insync.replicas": "2"}}, 4)
	add(coord.Topic{Name: "payments", ID: [16]byte{4, 5, 6}, Assignment: [][]coord.BrokerID{{4, 1, 2, 3}, {2, 3}},
		Adding: map[int32][]coord.BrokerID{0: {4}}, Removing: map[int32][]coord.BrokerID{0: {3}}}, 9)
	add(coord.Topic{Name: "audit", ID: [16]byte{7, 8, 9}, Assignment: [][]coord.BrokerID{{1}},
		Config: map[string]string{"cleanup.policy": "compact"}}, 0)

	sec := coord.NewSecurityState()
	sec.Version = 5001
	sec.Users["alice"] = []coord.ScramCredential{scramCredential(coord.ScramSHA256, 1), scramCredential(coord.ScramSHA512, 2)}
	sec.Users["bob smith"] = []coord.ScramCredential{scramCredential(coord.ScramSHA512, 3)}
	sec.ACLs = coord.SortACLs([]coord.ACL{
		topicACL("orders", "User:alice"),
		topicACL("orders", "User:bob smith"),
		{ResourceType: coord.ACLResourceGroup, ResourceName: "app-", PatternType: coord.ACLPatternPrefixed, Principal: "User:alice",
			Host: "*", Operation: coord.ACLOperationRead, Permission: coord.ACLPermissionAllow},
		{ResourceType: coord.ACLResourceCluster, ResourceName: "kafka-cluster", PatternType: coord.ACLPatternLiteral, Principal: "User:*",
			Host: "10.0.0.1", Operation: coord.ACLOperationAlter, Permission: coord.ACLPermissionDeny},
	})

	cfgs := coord.NewConfigState()
	cfgs.Version = 5002
	cfgs.Brokers[coord.DefaultBrokerEntity] = map[string]string{"log.retention.ms": "86400000"}
	cfgs.Brokers["2"] = map[string]string{"leader.replication.throttled.rate": "1048576"}
	cfgs.Quotas[coord.QuotaEntity{User: "alice"}] = map[string]string{coord.QuotaProducerByteRate: "1048576"}
	cfgs.Quotas[coord.QuotaEntity{User: "carol", ClientID: "app"}] = map[string]string{coord.QuotaConsumerByteRate: "2048"}
	cfgs.Quotas[coord.QuotaEntity{ClientID: coord.DefaultQuotaEntity}] = map[string]string{coord.QuotaRequestPercentage: "50"}
	cfgs.Quotas[coord.QuotaEntity{IP: "10.0.0.2"}] = map[string]string{coord.QuotaConnectionCreationRate: "10"}
	for name, t := range md.Topics {
		cfgs.Topics[name] = t.Config
	}

	return &coord.Snapshot{Metadata: md, Security: sec, Configs: cfgs, NextProducerID: 42_000,
		ProducerIDKey: bytes.Repeat([]byte{0xab}, coord.ProducerIDKeySize), Bases: testBases}
}

// checkImported checks that b holds snap, its epochs and versions raised
// by snap.Bases; it returns the metadata loaded.
func checkImported(t *testing.T, ctx context.Context, b *zk.Backend, snap *coord.Snapshot) *coord.Metadata {
	t.Helper()
	m, ok, err := b.Migration(ctx)
	if err != nil || !ok || m.Phase != coord.MigrationImported || m.Bases != snap.Bases {
		t.Fatalf("record after import: got %+v, %v, %v; want phase imported with bases %+v", m, ok, err, snap.Bases)
	}
	got := loadEverything(t, ctx, b)
	if !reflect.DeepEqual(got.md.Topics, snap.Metadata.Topics) {
		t.Errorf("topics after import: got %+v, want %+v", got.md.Topics, snap.Metadata.Topics)
	}
	if len(got.md.Partitions) != len(snap.Metadata.Partitions) {
		t.Errorf("partitions after import: got %d, want %d", len(got.md.Partitions), len(snap.Metadata.Partitions))
	}
	for tp, want := range snap.Metadata.Partitions {
		want.PartitionEpoch = snap.Bases.Partition // a fresh state, raised
		if st := got.md.Partitions[tp]; !reflect.DeepEqual(st, want) {
			t.Errorf("partition %s after import: got %+v, want %+v", tp, st, want)
		}
	}
	if got.md.Version < snap.Bases.Version {
		t.Errorf("metadata version after import: got %d, want at least the base %d", got.md.Version, snap.Bases.Version)
	}
	if !got.sec.SameContent(snap.Security) || got.sec.Version < snap.Bases.Version {
		t.Errorf("security state after import: got %+v, want %+v raised by %d", got.sec, snap.Security, snap.Bases.Version)
	}
	if !got.cfgs.SameContent(snap.Configs) || got.cfgs.Version < snap.Bases.Version {
		t.Errorf("config state after import: got %+v, want %+v raised by %d", got.cfgs, snap.Configs, snap.Bases.Version)
	}
	if got.next != snap.NextProducerID {
		t.Errorf("next producer id after import: got %d, want %d", got.next, snap.NextProducerID)
	}
	return got.md
}

// TestImportRaisesEpochsAndVersions: a snapshot imported into an empty
// backend reads back as it was, with every epoch and version raised by
// its bases, in this backend and in one opened after the import (as a
// switched broker's); producer ids go on from the snapshot's counter
// under its key; new registrations, terms, topics and partition states
// are above the bases, and fencing holds across them.
func TestImportRaisesEpochsAndVersions(t *testing.T) {
	s := server(t)
	connect := s.Addr() + chroot()
	target := open(t, connect, 6*time.Second, nil)
	ctx := ctxFor(t, 120*time.Second)
	snap := testSnapshot()
	if err := target.Import(ctx, snap, migration("m1", coord.MigrationImporting)); err != nil {
		t.Fatalf("import: %v", err)
	}
	checkImported(t, ctx, target, snap)
	broker := open(t, connect, 6*time.Second, nil) // opened after the import
	md := checkImported(t, ctx, broker, snap)

	block, err := broker.AllocateProducerIDs(ctx, 1)
	if err != nil || block.First != snap.NextProducerID {
		t.Errorf("first producer id block after import: got %v, %v; want one from %d", block, err, snap.NextProducerID)
	}
	key, err := broker.ProducerIDKey(ctx, bytes.Repeat([]byte{1}, coord.ProducerIDKeySize))
	if err != nil || !bytes.Equal(key, snap.ProducerIDKey) {
		t.Errorf("producer id key after import: got %x, %v; want the snapshot's %x", key, err, snap.ProducerIDKey)
	}

	// Registrations and terms are above the bases. A Replaces from before
	// the base (the broker's registration on the source) replaces nothing.
	sess, err := broker.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092, Replaces: snap.Bases.Broker - 1})
	if err != nil {
		t.Fatalf("register with a source epoch as Replaces: %v", err)
	}
	if sess.Broker().Epoch <= snap.Bases.Broker || sess.Replaced() != 0 {
		t.Errorf("registration after import: epoch %d, replaced %d; want above %d, none", sess.Broker().Epoch, sess.Replaced(), snap.Bases.Broker)
	}
	members, err := target.Members(ctx)
	if err != nil || len(members) != 1 || members[0].Epoch != sess.Broker().Epoch {
		t.Errorf("members after import: got %+v, %v; want broker 1 at epoch %d", members, err, sess.Broker().Epoch)
	}
	// The broker restarts: its new registration replaces the live one.
	again, err := broker.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092, Replaces: sess.Broker().Epoch})
	if err != nil {
		t.Fatalf("register replacing epoch %d: %v", sess.Broker().Epoch, err)
	}
	if again.Replaced() != sess.Broker().Epoch || again.Broker().Epoch <= sess.Broker().Epoch {
		t.Errorf("re-registration: epoch %d replaced %d; want above %d, replacing it", again.Broker().Epoch, again.Replaced(), sess.Broker().Epoch)
	}
	defer again.Close()
	term, err := broker.Campaign(ctx, again)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	if term.Epoch() <= snap.Bases.Controller {
		t.Errorf("controller epoch after import: got %d, want above %d", term.Epoch(), snap.Bases.Controller)
	}
	if ctrl, err := target.Controller(ctx); err != nil || ctrl != (coord.ControllerInfo{ID: 1, Epoch: term.Epoch()}) {
		t.Errorf("controller: got %+v, %v; want broker 1 at epoch %d", ctrl, err, term.Epoch())
	}

	// SetPartition takes the reported epoch back; a stale one is refused.
	tp := coord.TopicPartition{Topic: "orders", Partition: 1}
	st := md.Partitions[tp]
	next := st
	next.LeaderEpoch++
	next.ControllerEpoch = term.Epoch()
	if err := broker.Commit(ctx, term, coord.SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch}); err != nil {
		t.Fatalf("set partition at the reported epoch %d: %v", st.PartitionEpoch, err)
	}
	for _, stale := range []int32{st.PartitionEpoch, snap.Metadata.Partitions[tp].PartitionEpoch} {
		if err := broker.Commit(ctx, term, coord.SetPartition{State: next, ExpectedEpoch: stale}); !errors.Is(err, coord.ErrVersionMismatch) {
			t.Errorf("set partition at the stale epoch %d: got %v, want ErrVersionMismatch", stale, err)
		}
	}
	// A topic created after the import gets raised epochs too.
	created := coord.PartitionState{Topic: "later", Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
	if err := broker.Commit(ctx, term, coord.CreateTopic{Topic: coord.Topic{Name: "later", Assignment: [][]coord.BrokerID{{1}}},
		States: []coord.PartitionState{created}}); err != nil {
		t.Fatalf("create topic after import: %v", err)
	}
	watch, err := target.WatchMetadata(ctx)
	if err != nil {
		t.Fatalf("watch metadata: %v", err)
	}
	waitFor(t, watch, func(md *coord.Metadata) bool {
		later, ok := md.Partitions[coord.TopicPartition{Topic: "later"}]
		return ok && later.PartitionEpoch == snap.Bases.Partition &&
			md.Partitions[tp].PartitionEpoch == st.PartitionEpoch+1 && md.Version > snap.Bases.Version
	}, "watched metadata with raised epochs")
}

// TestImportRefusesABackendThatIsNotEmpty: a topic, a SCRAM user, an
// ACL, a broker config, a quota or another migration's record makes
// Import fail with ErrExists, and it writes nothing.
func TestImportRefusesABackendThatIsNotEmpty(t *testing.T) {
	s := server(t)
	ctx := ctxFor(t, 120*time.Second)
	for name, fill := range map[string]func(t *testing.T, b *zk.Backend) error{
		"topic": func(t *testing.T, b *zk.Backend) error {
			_, term := controllerTerm(t, ctx, b, 1)
			st := coord.PartitionState{Topic: "t", Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
			return b.Commit(ctx, term, coord.CreateTopic{Topic: coord.Topic{Name: "t", Assignment: [][]coord.BrokerID{{1}}}, States: []coord.PartitionState{st}})
		},
		"scram user": func(_ *testing.T, b *zk.Backend) error {
			return b.SetScramCredential(ctx, "alice", scramCredential(coord.ScramSHA256, 1))
		},
		"acl": func(_ *testing.T, b *zk.Backend) error {
			return b.CreateACLs(ctx, []coord.ACL{topicACL("t", "User:alice")})
		},
		"broker config": func(_ *testing.T, b *zk.Backend) error {
			_, err := b.AlterBrokerConfigs(ctx, "1", false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "k", Value: "v"}})
			return err
		},
		"quota": func(_ *testing.T, b *zk.Backend) error {
			_, err := b.AlterClientQuotas(ctx, coord.QuotaEntity{User: "u"}, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaProducerByteRate, Value: "1"}})
			return err
		},
		"another migration's record": func(_ *testing.T, b *zk.Backend) error {
			_, err := b.SetMigration(ctx, nil, migration("m0", coord.MigrationRolledBack))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := open(t, s.Addr()+chroot(), 6*time.Second, nil)
			if err := fill(t, b); err != nil {
				t.Fatalf("fill: %v", err)
			}
			before := loadEverything(t, ctx, b)
			if err := b.Import(ctx, testSnapshot(), migration("m1", coord.MigrationImporting)); !errors.Is(err, coord.ErrExists) {
				t.Fatalf("import: got %v, want ErrExists", err)
			}
			if after := loadEverything(t, ctx, b); !after.same(before) {
				t.Errorf("after the refused import: got %+v, want %+v", after, before)
			}
		})
	}
}

// TestImportRetriedAfterItStoppedMidway: an Import that failed after
// writing the metadata and the security and config states leaves the
// record importing, which refuses writes; retried with the same
// migration, it replaces what the failed one wrote. Another migration
// cannot import over it.
func TestImportRetriedAfterItStoppedMidway(t *testing.T) {
	s := server(t)
	root := chroot()
	target := open(t, s.Addr()+root, 6*time.Second, nil)
	conn := raw(t, s.Addr())
	ctx := ctxFor(t, 120*time.Second)

	// An unreadable producer id counter fails the import at its last
	// step, after the topics, credentials, ACLs and configs.
	if _, _, err := target.Migration(ctx); err != nil { // creates the chroot
		t.Fatalf("read the record: %v", err)
	}
	if _, err := conn.Create(root+"/latest_producer_id_block", []byte("garbage"), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatalf("create an unreadable producer id counter: %v", err)
	}
	m := migration("m1", coord.MigrationImporting)
	first := testSnapshot()
	first.Metadata.Topics["stray"] = coord.Topic{Name: "stray", Assignment: [][]coord.BrokerID{{1}}}
	first.Security.Users["stray"] = []coord.ScramCredential{scramCredential(coord.ScramSHA256, 9)}
	first.Security.ACLs = coord.SortACLs(append(first.Security.ACLs, topicACL("stray", "User:stray")))
	first.Configs.Quotas[coord.QuotaEntity{User: "stray", ClientID: "x"}] = map[string]string{coord.QuotaProducerByteRate: "1"}
	if err := target.Import(ctx, first, m); err == nil {
		t.Fatalf("import over an unreadable producer id counter: got nil error, want one")
	}
	if rec, ok, err := target.Migration(ctx); err != nil || !ok || rec.Phase != coord.MigrationImporting {
		t.Fatalf("record after the failed import: got %+v, %v, %v; want phase importing", rec, ok, err)
	}
	if _, err := target.AlterBrokerConfigs(ctx, "1", false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "k", Value: "v"}}); !errors.Is(err, coord.ErrMigrated) {
		t.Errorf("alter broker configs while importing: got %v, want ErrMigrated", err)
	}
	if err := target.Import(ctx, testSnapshot(), migration("m2", coord.MigrationImporting)); !errors.Is(err, coord.ErrExists) {
		t.Errorf("import of another migration over the failed one: got %v, want ErrExists", err)
	}

	if err := conn.Delete(root+"/latest_producer_id_block", -1); err != nil {
		t.Fatalf("delete the unreadable producer id counter: %v", err)
	}
	snap := testSnapshot()
	if err := target.Import(ctx, snap, m); err != nil {
		t.Fatalf("import retried: %v", err)
	}
	checkImported(t, ctx, target, snap)
}

// TestImportTenThousandPartitions: a snapshot of 10 000 partitions
// imports in chunks ZooKeeper accepts.
func TestImportTenThousandPartitions(t *testing.T) {
	s := server(t)
	target := open(t, s.Addr()+chroot(), 6*time.Second, nil)
	ctx := ctxFor(t, 300*time.Second)
	snap := testSnapshot()
	for i := range 10 {
		name := fmt.Sprintf("big-%d", i)
		topic := coord.Topic{Name: name, ID: [16]byte{byte(i + 1), 0xbb}, Assignment: make([][]coord.BrokerID, 1000)}
		for p := range topic.Assignment {
			replicas := []coord.BrokerID{coord.BrokerID(p%5 + 1), coord.BrokerID((p+1)%5 + 1), coord.BrokerID((p+2)%5 + 1)}
			topic.Assignment[p] = replicas
			snap.Metadata.Partitions[coord.TopicPartition{Topic: name, Partition: int32(p)}] = coord.PartitionState{
				Topic: name, Partition: int32(p), Leader: replicas[0], LeaderEpoch: 3, ISR: slices.Clone(replicas), ControllerEpoch: 12}
		}
		snap.Metadata.Topics[name] = topic
		snap.Configs.Topics[name] = nil
	}
	if err := target.Import(ctx, snap, migration("m1", coord.MigrationImporting)); err != nil {
		t.Fatalf("import: %v", err)
	}
	checkImported(t, ctx, target, snap)
}

// TestExportedSourceImportsAboveItsEpochs: a frozen ZooKeeper source's
// Export imports into another ZooKeeper cluster, whose broker epochs,
// controller epochs, partition epochs and versions are above every one
// the source reported.
func TestExportedSourceImportsAboveItsEpochs(t *testing.T) {
	s := server(t)
	source := open(t, s.Addr()+chroot(), 6*time.Second, nil)
	target := open(t, s.Addr()+chroot(), 6*time.Second, nil)
	ctx := ctxFor(t, 120*time.Second)

	sess, term := controllerTerm(t, ctx, source, 1)
	st := coord.PartitionState{Topic: "orders", Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
	if err := source.Commit(ctx, term, coord.CreateTopic{Topic: coord.Topic{Name: "orders", ID: [16]byte{1}, Assignment: [][]coord.BrokerID{{1}}},
		States: []coord.PartitionState{st}}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for range 3 {
		md, err := source.Load(ctx)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		cur := md.Partitions[st.TopicPartition()]
		next := cur
		next.LeaderEpoch++
		if err := source.Commit(ctx, term, coord.SetPartition{State: next, ExpectedEpoch: cur.PartitionEpoch}); err != nil {
			t.Fatalf("set partition: %v", err)
		}
	}
	if _, err := source.AllocateProducerIDs(ctx, 1); err != nil {
		t.Fatalf("allocate producer ids: %v", err)
	}
	key, err := source.ProducerIDKey(ctx, bytes.Repeat([]byte{5}, coord.ProducerIDKeySize))
	if err != nil {
		t.Fatalf("producer id key: %v", err)
	}
	before := loadEverything(t, ctx, source)

	frozen := migration("m1", coord.MigrationFrozen)
	frozenAt, err := source.SetMigration(ctx, nil, frozen)
	if err != nil {
		t.Fatalf("freeze: %v", err)
	}
	snap, err := coord.Export(ctx, source, frozenAt)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	if !bytes.Equal(snap.ProducerIDKey, key) || snap.NextProducerID != coord.ProducerIDBlockSize {
		t.Fatalf("exported producer ids: key %x, next %d; want %x, %d", snap.ProducerIDKey, snap.NextProducerID, key, coord.ProducerIDBlockSize)
	}
	if err := target.Import(ctx, snap, migration("m1", coord.MigrationImporting)); err != nil {
		t.Fatalf("import: %v", err)
	}
	after := checkImported(t, ctx, target, snap)
	if !reflect.DeepEqual(after.Topics, before.md.Topics) {
		t.Errorf("topics on the target: got %+v, want the source's %+v", after.Topics, before.md.Topics)
	}
	if got, was := after.Partitions[st.TopicPartition()].PartitionEpoch, before.md.Partitions[st.TopicPartition()].PartitionEpoch; got <= was {
		t.Errorf("partition epoch on the target: got %d, want above the source's %d", got, was)
	}
	if after.Version <= frozenAt {
		t.Errorf("metadata version on the target: got %d, want above the source's %d", after.Version, frozenAt)
	}
	moved, err := target.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092, Replaces: sess.Broker().Epoch})
	if err != nil {
		t.Fatalf("register on the target replacing the source's epoch: %v", err)
	}
	defer moved.Close()
	if moved.Broker().Epoch <= frozenAt || moved.Replaced() != 0 {
		t.Errorf("registration on the target: epoch %d, replaced %d; want above %d, none", moved.Broker().Epoch, moved.Replaced(), frozenAt)
	}
	next, err := target.Campaign(ctx, moved)
	if err != nil {
		t.Fatalf("campaign on the target: %v", err)
	}
	if next.Epoch() <= term.Epoch() {
		t.Errorf("controller epoch on the target: got %d, want above the source's %d", next.Epoch(), term.Epoch())
	}
	block, err := target.AllocateProducerIDs(ctx, 1)
	if err != nil || block.First != snap.NextProducerID {
		t.Errorf("first producer id block on the target: got %v, %v; want one from %d", block, err, snap.NextProducerID)
	}
}
