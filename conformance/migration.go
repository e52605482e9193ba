package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/migration"
)

// RunMigration runs the migration cases from backend src to backend dst
// (coord.Migrator, coord/migration): a frozen source refuses writes, its
// Snapshot imported into dst reads back the same with every epoch and
// version above the source's, and brokers that follow the source's
// record move to dst, where they register and elect again.
func RunMigration(t *testing.T, src, dst Harness) {
	t.Run("FreezeExportImport", func(t *testing.T) { migrationExportImport(t, src, dst) })
	t.Run("PreCopyThenChanges", func(t *testing.T) { migrationPreCopy(t, src, dst) })
	t.Run("BrokersSwitch", func(t *testing.T) { migrationSwitch(t, src, dst) })
}

// migrationState is what the cases write into a source before migrating
// it: two topics (one mid-reassignment), SCRAM users, ACLs, broker
// configs, client quotas, producer id blocks and the key.
type migrationState struct {
	md     *coord.Metadata
	sec    *coord.SecurityState
	cfgs   *coord.ConfigState
	block  coord.ProducerIDBlock
	key    []byte
	member coord.Broker
	ctrl   int64
}

// writeMigrationState fills be, whose controller term is w, and reads
// it back.
func writeMigrationState(t T, be coord.Backend, w *wonTerm) migrationState {
	t.Helper()
	ctx := withTimeout(t, callBound)
	orders := createTopicOp("orders", 3, 3, w.epoch)
	moving := createTopicOp("moving", 2, 3, w.epoch)
	// Partition 0 of moving goes from [1 2 3] to [4 2 3]: both are
	// assigned while 4 is added and 1 removed.
	moving.Topic.Assignment[0] = []coord.BrokerID{4, 2, 3, 1}
	moving.Topic.Adding = map[int32][]coord.BrokerID{0: {4}}
	moving.Topic.Removing = map[int32][]coord.BrokerID{0: {1}}
	commit(t, be, w, "the topics to migrate", orders, moving)
	md, err := be.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	st := md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 1}]
	next := st.Clone()
	next.Leader, next.LeaderEpoch, next.ISR = 2, st.LeaderEpoch+1, []coord.BrokerID{2, 3}
	commit(t, be, w, "a new leader of orders-1", coord.SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})

	cred := coord.ScramCredential{Mechanism: coord.ScramSHA256, Salt: []byte("salt-of-alice"), StoredKey: make([]byte, 32), ServerKey: make([]byte, 32), Iterations: 4096}
	cred.StoredKey[0], cred.ServerKey[0] = 1, 2
	if err := be.SetScramCredential(ctx, "alice", cred); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	acls := []coord.ACL{
		{ResourceType: coord.ACLResourceTopic, ResourceName: "orders", PatternType: coord.ACLPatternLiteral, Principal: "User:alice", Host: "*", Operation: coord.ACLOperationRead, Permission: coord.ACLPermissionAllow},
		{ResourceType: coord.ACLResourceGroup, ResourceName: "app-", PatternType: coord.ACLPatternPrefixed, Principal: "User:alice", Host: "*", Operation: coord.ACLOperationAll, Permission: coord.ACLPermissionAllow},
	}
	if err := be.CreateACLs(ctx, acls); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	if _, err := be.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "log.retention.ms", Value: "3600000"}}); err != nil {
		t.Fatalf("AlterBrokerConfigs: %v", err)
	}
	if _, err := be.AlterBrokerConfigs(ctx, "2", false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "follower.replication.throttled.rate", Value: "1048576"}}); err != nil {
		t.Fatalf("AlterBrokerConfigs: %v", err)
	}
	if _, err := be.AlterClientQuotas(ctx, coord.QuotaEntity{User: "alice"}, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaProducerByteRate, Value: "1048576"}}); err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	var block coord.ProducerIDBlock
	for range 3 {
		if block, err = be.AllocateProducerIDs(ctx, w.id); err != nil {
			t.Fatalf("AllocateProducerIDs: %v", err)
		}
	}
	proposed := make([]byte, coord.ProducerIDKeySize)
	proposed[0] = 7
	key, err := be.ProducerIDKey(ctx, proposed)
	if err != nil {
		t.Fatalf("ProducerIDKey: %v", err)
	}
	s := migrationState{block: block, key: key, member: w.session.Broker(), ctrl: w.epoch}
	if s.md, err = be.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if s.sec, err = be.LoadSecurity(ctx); err != nil {
		t.Fatalf("LoadSecurity: %v", err)
	}
	if s.cfgs, err = be.LoadConfigs(ctx); err != nil {
		t.Fatalf("LoadConfigs: %v", err)
	}
	return s
}

// freeze writes a frozen record of migration id into be and returns the
// version it was written at.
func freeze(t T, be coord.Backend, from, to, id string, target map[string]string) (coord.Migration, int64) {
	t.Helper()
	m := coord.Migration{ID: id, From: from, To: to, Target: target, Phase: coord.MigrationFrozen, Updated: time.Now()}
	at, err := be.(coord.Migrator).SetMigration(withTimeout(t, callBound), nil, m)
	if err != nil {
		t.Fatalf("SetMigration(frozen): %v", err)
	}
	return m, at
}

// checkRefused checks that every write of the contract fails with
// ErrMigrated on be.
func checkRefused(t T, be coord.Backend, w *wonTerm) {
	t.Helper()
	ctx := withTimeout(t, callBound)
	writes := map[string]error{
		"Commit": be.Commit(ctx, w.term, createTopicOp("late", 1, 3, w.epoch)),
		"SetScramCredential": be.SetScramCredential(ctx, "bob", coord.ScramCredential{Mechanism: coord.ScramSHA256, Salt: []byte("s"),
			StoredKey: make([]byte, 32), ServerKey: make([]byte, 32), Iterations: 4096}),
		"DeleteScramCredential": be.DeleteScramCredential(ctx, "alice", coord.ScramSHA256),
		"CreateACLs": be.CreateACLs(ctx, []coord.ACL{{ResourceType: coord.ACLResourceTopic, ResourceName: "late", PatternType: coord.ACLPatternLiteral,
			Principal: "User:bob", Host: "*", Operation: coord.ACLOperationRead, Permission: coord.ACLPermissionAllow}}),
	}
	_, writes["DeleteACLs"] = be.DeleteACLs(ctx, []coord.ACLFilter{{ResourceType: coord.ACLResourceAny, PatternType: coord.ACLPatternAny,
		Operation: coord.ACLOperationAny, Permission: coord.ACLPermissionAny}})
	_, writes["AlterBrokerConfigs"] = be.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "log.retention.ms", Value: "1"}})
	_, writes["AlterClientQuotas"] = be.AlterClientQuotas(ctx, coord.QuotaEntity{User: "bob"}, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaProducerByteRate, Value: "1"}})
	_, writes["AllocateProducerIDs"] = be.AllocateProducerIDs(ctx, w.id)
	for _, what := range slices.Sorted(maps.Keys(writes)) {
		if !errors.Is(writes[what], coord.ErrMigrated) {
			t.Errorf("%s on a frozen backend: got %v, want ErrMigrated", what, writes[what])
		}
	}
}

func migrationExportImport(t *testing.T, src, dst Harness) {
	sc := src.NewCluster(t, 1)
	w, sbe := controllerOf(t, src, sc, 1)
	before := writeMigrationState(t, sbe, w)
	m, frozenAt := freeze(t, sbe, src.Name(), dst.Name(), "m-"+src.Name()+"-"+dst.Name(), map[string]string{"coordination.backend": dst.Name()})
	checkRefused(t, sbe, w)

	ctx := withTimeout(t, 2*callBound)
	snap, err := coord.Export(ctx, sbe, frozenAt)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if snap.NextProducerID <= before.block.Last() {
		t.Fatalf("Export: next producer id %d, want above the last block handed out, %v", snap.NextProducerID, before.block)
	}
	if snap.Bases.Broker <= before.member.Epoch || snap.Bases.Controller <= before.ctrl || snap.Bases.Version <= before.md.Version {
		t.Fatalf("Export: bases %+v, want above broker epoch %d, controller epoch %d, version %d", snap.Bases, before.member.Epoch, before.ctrl, before.md.Version)
	}

	dc := dst.NewCluster(t, 3)
	target := dc.Backend(1)
	imported := m
	imported.Target, imported.Phase, imported.Bases = nil, coord.MigrationImported, snap.Bases
	if err := target.(coord.Migrator).Import(ctx, snap, imported); err != nil {
		t.Fatalf("Import into %s: %v", dst.Name(), err)
	}
	if err := target.(coord.Migrator).Import(ctx, snap, coord.Migration{ID: "another", Phase: coord.MigrationImported}); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("a second Import into %s: got %v, want ErrExists", dst.Name(), err)
	}
	checkImported(t, dc, snap, before)
}

// migrationPreCopy takes a pre-copy of src while it takes writes (phase
// copying), changes the source (a topic created and one deleted, a
// leader moved, a user and an ACL added and one removed, broker configs
// and a quota changed, producer ids allocated), freezes it and imports
// what changed since: dst then holds what the frozen source holds.
func migrationPreCopy(t *testing.T, src, dst Harness) {
	sc := src.NewCluster(t, 1)
	w, sbe := controllerOf(t, src, sc, 1)
	writeMigrationState(t, sbe, w)
	smig := sbe.(coord.Migrator)
	ctx := withTimeout(t, 4*callBound)
	m := coord.Migration{ID: "m-pre-" + src.Name() + "-" + dst.Name(), From: src.Name(), To: dst.Name(),
		Target: map[string]string{"coordination.backend": dst.Name()}, Phase: coord.MigrationCopying, Updated: time.Now()}
	if _, err := smig.SetMigration(ctx, nil, m); err != nil {
		t.Fatalf("SetMigration(copying): %v", err)
	}
	base, err := coord.Export(ctx, sbe, 0)
	if err != nil {
		t.Fatalf("Export while copying: %v", err)
	}

	dc := dst.NewCluster(t, 3)
	target := dc.Backend(1).(coord.Migrator)
	rec := m
	rec.Target, rec.Phase, rec.Bases = nil, coord.MigrationImported, base.Bases
	if err := target.PreCopy(ctx, base, rec); err != nil {
		t.Fatalf("PreCopy into %s: %v", dst.Name(), err)
	}
	if got, ok, err := target.Migration(ctx); err != nil || !ok || got.ID != m.ID || got.Phase != coord.MigrationImporting {
		t.Fatalf("the target's record after PreCopy: %+v (present %v, %v), want migration %s importing", got, ok, err, m.ID)
	}
	changeMigrationState(t, sbe, w)

	frozen := m
	frozen.Phase, frozen.Updated = coord.MigrationFrozen, time.Now()
	frozenAt, err := smig.SetMigration(ctx, &m, frozen)
	if err != nil {
		t.Fatalf("SetMigration(frozen): %v", err)
	}
	checkRefused(t, sbe, w)
	snap, err := coord.Export(ctx, sbe, frozenAt)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if snap.Bases == base.Bases {
		t.Fatalf("the frozen copy's bases %+v equal the pre-copy's: the changes did not raise them", snap.Bases)
	}
	rec.Bases = snap.Bases
	if err := target.ImportChanges(ctx, base, snap, rec); err != nil {
		t.Fatalf("ImportChanges into %s: %v", dst.Name(), err)
	}
	if err := target.ImportChanges(ctx, base, snap, rec); !errors.Is(err, coord.ErrExists) {
		t.Fatalf("ImportChanges again, the record imported: got %v, want ErrExists", err)
	}
	if got, ok, err := target.Migration(ctx); err != nil || !ok || got.Phase != coord.MigrationImported || got.Bases != snap.Bases {
		t.Fatalf("the target's record: %+v (present %v, %v), want imported with bases %+v", got, ok, err, snap.Bases)
	}
	checkImported(t, dc, snap, migrationState{md: snap.Metadata, sec: snap.Security, cfgs: snap.Configs, key: snap.ProducerIDKey})
}

// changeMigrationState changes what writeMigrationState wrote into be:
// some of each kind created, changed and deleted.
func changeMigrationState(t T, be coord.Backend, w *wonTerm) {
	t.Helper()
	ctx := withTimeout(t, callBound)
	commit(t, be, w, "a topic created and one deleted after the pre-copy", createTopicOp("fresh", 2, 3, w.epoch), coord.DeleteTopic{Name: "moving"})
	md, err := be.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	st := md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 2}]
	next := st.Clone()
	next.Leader, next.LeaderEpoch, next.ISR = 3, st.LeaderEpoch+1, []coord.BrokerID{3}
	commit(t, be, w, "a new leader of orders-2", coord.SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})

	cred := coord.ScramCredential{Mechanism: coord.ScramSHA512, Salt: []byte("salt-of-bob"), StoredKey: make([]byte, 64), ServerKey: make([]byte, 64), Iterations: 4096}
	cred.StoredKey[0], cred.ServerKey[0] = 3, 4
	if err := be.SetScramCredential(ctx, "bob", cred); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	if err := be.CreateACLs(ctx, []coord.ACL{{ResourceType: coord.ACLResourceTopic, ResourceName: "fresh", PatternType: coord.ACLPatternLiteral,
		Principal: "User:bob", Host: "*", Operation: coord.ACLOperationWrite, Permission: coord.ACLPermissionAllow}}); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	if _, err := be.DeleteACLs(ctx, []coord.ACLFilter{{ResourceType: coord.ACLResourceGroup, PatternType: coord.ACLPatternAny,
		Operation: coord.ACLOperationAny, Permission: coord.ACLPermissionAny}}); err != nil {
		t.Fatalf("DeleteACLs: %v", err)
	}
	if _, err := be.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: "log.retention.ms", Value: "7200000"}}); err != nil {
		t.Fatalf("AlterBrokerConfigs: %v", err)
	}
	if _, err := be.AlterBrokerConfigs(ctx, "2", false, []coord.ConfigAlteration{{Op: coord.ConfigDelete, Key: "follower.replication.throttled.rate"}}); err != nil {
		t.Fatalf("AlterBrokerConfigs: %v", err)
	}
	if _, err := be.AlterClientQuotas(ctx, coord.QuotaEntity{User: "bob"}, []coord.ConfigAlteration{{Op: coord.ConfigSet, Key: coord.QuotaConsumerByteRate, Value: "2097152"}}); err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	if _, err := be.AllocateProducerIDs(ctx, w.id); err != nil {
		t.Fatalf("AllocateProducerIDs: %v", err)
	}
}

// checkImported checks every backend of c against the snapshot snap of
// the source state before.
func checkImported(t T, c Cluster, snap *coord.Snapshot, before migrationState) {
	t.Helper()
	for i := range 3 {
		be := c.Backend(i)
		var md *coord.Metadata
		waitUntil(t, callBound, "backend "+strconv.Itoa(i)+" to read the imported topics", func() (bool, string) {
			var err error
			md, err = be.Load(withTimeout(t, callBound))
			if err != nil || len(md.Topics) != len(before.md.Topics) {
				return false, describeMetadata(md)
			}
			return true, ""
		})
		if md.Version < snap.Bases.Version {
			t.Errorf("backend %d: metadata version %d, want at least the base %d", i, md.Version, snap.Bases.Version)
		}
		if md.PartitionBase != snap.Bases.Partition {
			t.Errorf("backend %d: partition base %d, want the copy's %d", i, md.PartitionBase, snap.Bases.Partition)
		}
		for name, topic := range before.md.Topics {
			if !sameTopic(md.Topics[name], topic) {
				t.Errorf("backend %d: topic %s is %+v, want %+v", i, name, md.Topics[name], topic)
			}
		}
		for tp, st := range before.md.Partitions {
			got := md.Partitions[tp]
			if got.Leader != st.Leader || got.LeaderEpoch != st.LeaderEpoch || !slices.Equal(got.ISR, st.ISR) || got.ControllerEpoch != st.ControllerEpoch {
				t.Errorf("backend %d: partition %s is %+v, want %+v", i, tp, got, st)
			}
			if got.PartitionEpoch < snap.Bases.Partition || got.PartitionEpoch <= st.PartitionEpoch {
				t.Errorf("backend %d: partition %s epoch %d, want at least the base %d, above the source's %d", i, tp, got.PartitionEpoch, snap.Bases.Partition, st.PartitionEpoch)
			}
		}
		ctx := withTimeout(t, callBound)
		sec, err := be.LoadSecurity(ctx)
		if err != nil {
			t.Fatalf("LoadSecurity: %v", err)
		}
		if !slices.Equal(sec.ACLs, before.sec.ACLs) || !maps.EqualFunc(sec.Users, before.sec.Users, sameCredentials) || sec.Version < snap.Bases.Version {
			t.Errorf("backend %d: security state %+v, want %+v at version at least %d", i, sec, before.sec, snap.Bases.Version)
		}
		cfgs, err := be.LoadConfigs(ctx)
		if err != nil {
			t.Fatalf("LoadConfigs: %v", err)
		}
		sameMap := func(a, b map[string]string) bool { return maps.Equal(a, b) }
		if !maps.EqualFunc(cfgs.Brokers, before.cfgs.Brokers, sameMap) || !maps.EqualFunc(cfgs.Quotas, before.cfgs.Quotas, sameMap) || cfgs.Version < snap.Bases.Version {
			t.Errorf("backend %d: configs %+v, want brokers %v quotas %v at version at least %d", i, cfgs, before.cfgs.Brokers, before.cfgs.Quotas, snap.Bases.Version)
		}
		key, err := be.ProducerIDKey(ctx, make([]byte, coord.ProducerIDKeySize))
		if err != nil || !slices.Equal(key, before.key) {
			t.Errorf("backend %d: producer id key %x (%v), want the source's %x", i, key, err, before.key)
		}
	}
	ctx := withTimeout(t, callBound)
	block, err := c.Backend(0).AllocateProducerIDs(ctx, 1)
	if err != nil || block.First < snap.NextProducerID {
		t.Errorf("AllocateProducerIDs after the import: %v (%v), want a block from %d on", block, err, snap.NextProducerID)
	}
}

func sameCredentials(a, b []coord.ScramCredential) bool {
	return slices.EqualFunc(a, b, func(x, y coord.ScramCredential) bool {
		return x.Mechanism == y.Mechanism && slices.Equal(x.Salt, y.Salt) && slices.Equal(x.StoredKey, y.StoredKey) &&
			slices.Equal(x.ServerKey, y.ServerKey) && x.Iterations == y.Iterations
	})
}

// migrationSwitch runs three brokers' campaign loops through
// migration.Backend over src, migrates them to dst while they hold
// sessions, a term and a watch, and checks that every session and the
// watch end, that the loops register on dst with epochs above the
// source's and elect a controller there above the source's epoch, that
// there is never more than one live term (the campaigners' check), and
// that the source's term is fenced.
func migrationSwitch(t *testing.T, src, dst Harness) {
	const n = 3
	sc, dc := src.NewCluster(t, n), dst.NewCluster(t, n)
	ctx := withTimeout(t, startupBound(src)+startupBound(dst))
	bes := openMigrating(t, src, dst, sc, dc, n)
	cluster := migrationCluster{bes: bes}
	cs := startCampaigners(t, src, cluster, 0, 1, 2)
	defer cs.stop(t)
	w := cs.waitTerm(t, nil, startupBound(src), "election on the source")
	members, err := bes[0].WatchMembers(ctx)
	if err != nil {
		t.Fatalf("WatchMembers: %v", err)
	}
	sbe := bes[w.backend]
	commit(t, sbe, w, "a topic", createTopicOp("switching", 2, 3, w.epoch))
	// Brokers store the producer id key when they start.
	if _, err := sbe.ProducerIDKey(ctx, make([]byte, coord.ProducerIDKeySize)); err != nil {
		t.Fatalf("ProducerIDKey: %v", err)
	}
	// Every broker is registered on the source when it is frozen.
	sessions := make([]coord.Session, n)
	waitUntil(t, startupBound(src), "every broker registered on the source", func() (bool, string) {
		for i := range sessions {
			if sessions[i] = cs.session(i); sessions[i] == nil || isClosed(sessions[i].Done()) {
				return false, "broker " + strconv.Itoa(i+1) + " has no live session"
			}
		}
		return true, ""
	})

	_, snap := migrateTo(t, ctx, sbe, src.Name(), dst.Name(), "switch-"+src.Name()+"-"+dst.Name())
	for i, s := range sessions {
		waitClosed(t, s.Done(), startupBound(dst), "session "+strconv.Itoa(i)+" on the source to end at the switch")
		if !errors.Is(s.Err(), coord.ErrSessionExpired) {
			t.Errorf("session %d: Err %v after the switch, want ErrSessionExpired", i, s.Err())
		}
	}
	waitClosed(t, w.term.Done(), callBound, "the source's term to end at the switch")
	for range members {
	}
	if ok, why := servingFrom(bes, dst.Name()); !ok {
		t.Fatalf("after the switch: %s", why)
	}
	w2 := cs.waitTerm(t, w, startupBound(dst), "election on the target")
	if w2.epoch < snap.Bases.Controller {
		t.Fatalf("controller epoch on the target %d, want at least the base %d (the source's was %d)", w2.epoch, snap.Bases.Controller, w.epoch)
	}
	if e := w2.session.Broker().Epoch; e < snap.Bases.Broker || e <= w.session.Broker().Epoch {
		t.Fatalf("broker epoch on the target %d, want at least the base %d, above the source's %d", e, snap.Bases.Broker, w.session.Broker().Epoch)
	}
	if err := sbe.Commit(withTimeout(t, callBound), w.term, createTopicOp("zombie", 1, 3, w.epoch)); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Commit with the source's term after the switch: got %v, want ErrFenced", err)
	}
	dbe := bes[w2.backend]
	md, err := dbe.Load(withTimeout(t, callBound))
	if err != nil {
		t.Fatalf("Load on the target: %v", err)
	}
	st, ok := md.Partitions[coord.TopicPartition{Topic: "switching", Partition: 0}]
	if !ok {
		t.Fatalf("the target lacks switching-0: %s", describeMetadata(md))
	}
	next := st.Clone()
	next.LeaderEpoch++
	next.ControllerEpoch = w2.epoch
	commit(t, dbe, w2, "a leader epoch on the target", coord.SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})
	stale := next.Clone()
	stale.LeaderEpoch++
	commitErr(t, dbe, w2, coord.ErrVersionMismatch, "a state based on the imported epoch", coord.SetPartition{State: stale, ExpectedEpoch: st.PartitionEpoch})

	// A state created on the target gets the partition base as its epoch,
	// as the metadata says, and the next write expecting it lands.
	if md.PartitionBase != snap.Bases.Partition {
		t.Fatalf("Load on the target: partition base %d, want the copy's %d", md.PartitionBase, snap.Bases.Partition)
	}
	if sourceMD, err := sc.Backend(0).Load(withTimeout(t, callBound)); err != nil || sourceMD.PartitionBase != 0 {
		t.Fatalf("Load on the source: partition base %v (%v), want 0", sourceMD, err)
	}
	commit(t, dbe, w2, "a topic created on the target", createTopicOp("created", 2, 3, w2.epoch))
	md = loadAt(t, dbe)
	for p := range int32(2) {
		created := md.Partitions[coord.TopicPartition{Topic: "created", Partition: p}]
		if created.PartitionEpoch != md.PartitionBase {
			t.Fatalf("created-%d on the target: partition epoch %d, want the metadata's partition base %d", p, created.PartitionEpoch, md.PartitionBase)
		}
	}
	watch, err := dbe.WatchMetadata(withTimeout(t, callBound))
	if err != nil {
		t.Fatalf("WatchMetadata on the target: %v", err)
	}
	watched := receiveWithin(t, watch, callBound, "WatchMetadata on the target")
	if watched.PartitionBase != md.PartitionBase {
		t.Fatalf("WatchMetadata on the target: partition base %d, want Load's %d", watched.PartitionBase, md.PartitionBase)
	}
	created := md.Partitions[coord.TopicPartition{Topic: "created", Partition: 1}]
	next = created.Clone()
	next.LeaderEpoch++
	next.ControllerEpoch = w2.epoch
	commit(t, dbe, w2, "a leader epoch of a partition created on the target", coord.SetPartition{State: next, ExpectedEpoch: md.PartitionBase})
	if got := loadAt(t, dbe).Partitions[created.TopicPartition()].PartitionEpoch; got != md.PartitionBase+1 {
		t.Fatalf("created-1 on the target after a write: partition epoch %d, want %d", got, md.PartitionBase+1)
	}
}

// openMigrating opens n backends through coord/migration, as n brokers
// configured with src open theirs: backend i serves from backend i of
// sc, src's cluster, and moves to backend i of dc, dst's cluster, when
// the record of the one it serves from says switched. t's cleanup closes
// them.
func openMigrating(t T, src, dst Harness, sc, dc Cluster, n int) []*migration.Backend {
	t.Helper()
	bes := make([]*migration.Backend, n)
	for i := range n {
		be, err := openMigrationBackend(src.Name(), dst.Name(), sc, dc, i, migration.Options{})
		if err != nil {
			t.Fatalf("migration.Open %d: %v", i, err)
		}
		t.Cleanup(func() { be.Close() })
		bes[i] = be
	}
	return bes
}

// openMigrationBackend opens broker i+1's backend through coord/migration:
// its Config names src, whose backend is sc's backend i; a migration's
// target names dst, whose backend is dc's backend i. The Backend closes
// the target as a broker's does when it stops; sc keeps the source open
// (noClose) after the switch, for the cases to read it. opts are the
// broker's (Options.Switched: one restarted after the switch opens the
// target at once).
func openMigrationBackend(src, dst string, sc, dc Cluster, i int, opts migration.Options) (*migration.Backend, error) {
	open := func(cfg coord.Config) (coord.Backend, error) {
		switch cfg.Backend {
		case src:
			return noClose{sc.Backend(i).(migratorBackend)}, nil
		case dst:
			return dc.Backend(i), nil
		}
		return nil, fmt.Errorf("coordination backend %q: neither the source %s nor the target %s", cfg.Backend, src, dst)
	}
	targetConfig := func(m coord.Migration) (coord.Config, error) {
		return coord.Config{Backend: m.Target["coordination.backend"]}, nil
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("migrating-%d", i+1), Level: hclog.Warn})
	return migration.Open(coord.Config{Backend: src, Logger: logger}, targetConfig, open, opts)
}

// migrateTo migrates sbe's cluster from src to dst as migration id, the
// way `tripod migrate` does: it freezes the source, exports it, imports
// the copy into the target sbe opened beside it, and writes switched into
// the source's record. It returns the switched record and the copy.
func migrateTo(t T, ctx context.Context, sbe *migration.Backend, src, dst, id string) (coord.Migration, *coord.Snapshot) {
	t.Helper()
	m, frozenAt := freeze(t, sbe, src, dst, id, map[string]string{"coordination.backend": dst})
	target, err := sbe.Standby(ctx, id)
	if err != nil {
		t.Fatalf("Standby: %v", err)
	}
	snap, err := coord.Export(ctx, sbe, frozenAt)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	imported := m
	imported.Target, imported.Phase, imported.Bases = nil, coord.MigrationImported, snap.Bases
	if err := target.(coord.Migrator).Import(ctx, snap, imported); err != nil {
		t.Fatalf("Import: %v", err)
	}
	switched := m
	switched.Phase = coord.MigrationSwitched
	if _, err := sbe.SetMigration(ctx, &m, switched); err != nil {
		t.Fatalf("SetMigration(switched): %v", err)
	}
	return switched, snap
}

// servingFrom reports whether every backend of bes serves from the
// backend named name, and names one that does not.
func servingFrom(bes []*migration.Backend, name string) (bool, string) {
	for i, be := range bes {
		if got := be.Name(); got != name {
			return false, fmt.Sprintf("backend %d serves from %s, want %s", i, got, name)
		}
	}
	return true, ""
}

// migrationCluster is the Cluster of the switching backends, for
// controllerOf.
type migrationCluster struct{ bes []*migration.Backend }

func (c migrationCluster) Backend(i int) coord.Backend { return c.bes[i] }
func (c migrationCluster) Crash(int)                   {}
func (c migrationCluster) Heal(int)                    {}
func (c migrationCluster) Restart(t T, _ int)          { t.Fatalf("migrationCluster cannot restart a backend") }

// migratorBackend is a backend of every harness.
type migratorBackend interface {
	coord.Backend
	coord.Migrator
}

// noClose is a source's backend handed to migration.Backend, which
// closes what it leaves: the harness closes it at the end instead.
type noClose struct{ migratorBackend }

func (noClose) Close() error { return nil }
