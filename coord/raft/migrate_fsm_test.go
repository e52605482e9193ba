package raft

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// testBases are the epoch bases of the hand-built snapshots.
var testBases = coord.EpochBases{Broker: 1000, Controller: 50, Partition: 40, Version: 2000}

// setMigration feeds a set_migration entry of m, expecting prev, to f.
func setMigration(t *testing.T, f *fsm, index uint64, prev *migrationKey, m coord.Migration) applyResult {
	t.Helper()
	return fsmLog(t, f, index, 2, command{Type: cmdSetMigration, Migration: &migrationCommand{Record: &m, Prev: prev}})
}

// TestFSMMigrationRecordSurvivesSnapshots: set_migration compares the
// stored record, a record with bases raises what the state machine
// reports from then on, a later record without bases keeps them, a
// snapshot carries the record and the bases on, and a snapshot written
// before the record existed restores none.
func TestFSMMigrationRecordSurvivesSnapshots(t *testing.T) {
	f := newFSM()
	b1 := fsmLog(t, f, 3, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
	epoch := fsmLog(t, f, 4, 2, command{Type: cmdClaim, Broker: b1}).Epoch
	create, _ := topicOf("orders", 2)
	fsmLog(t, f, 5, 2, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, create)})

	imported := coord.Migration{ID: "m1", From: "zk", To: "raft", Phase: coord.MigrationImported, Bases: testBases}
	if res := setMigration(t, f, 6, &migrationKey{ID: "m1", Phase: coord.MigrationImporting}, imported); !errors.Is(res.Err, coord.ErrVersionMismatch) {
		t.Fatalf("set_migration expecting a record where there is none: got %v, want ErrVersionMismatch", res.Err)
	}
	if res := setMigration(t, f, 7, nil, imported); res.Err != nil || res.Bases != epochBases(testBases) {
		t.Fatalf("set_migration of the first record: got %v with bases %+v, want nil and %+v", res.Err, res.Bases, testBases)
	}
	if res := setMigration(t, f, 8, nil, imported); !errors.Is(res.Err, coord.ErrVersionMismatch) {
		t.Fatalf("set_migration expecting no record where there is one: got %v, want ErrVersionMismatch", res.Err)
	}

	checkRaised := func(f *fsm, what string) {
		t.Helper()
		members, _ := f.reportedMembers()
		if len(members) != 1 || members[0].Epoch != 3+testBases.Broker {
			t.Fatalf("%s: members %+v, want broker 1 at epoch %d", what, members, 3+testBases.Broker)
		}
		if ctl, _ := f.reportedController(); ctl.Epoch != epoch+testBases.Controller {
			t.Fatalf("%s: controller %+v, want epoch %d", what, ctl, epoch+testBases.Controller)
		}
		md := f.metadata()
		if st := md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 1}]; md.Version != 5+testBases.Version || st.PartitionEpoch != testBases.Partition {
			t.Fatalf("%s: metadata version %d, orders-1 epoch %d, want %d and %d", what, md.Version, st.PartitionEpoch, 5+testBases.Version, testBases.Partition)
		}
		if s, c := f.security(), f.configs(); s.Version != testBases.Version || c.Version != 5+testBases.Version {
			t.Fatalf("%s: security version %d, configs version %d, want %d and %d", what, s.Version, c.Version, testBases.Version, 5+testBases.Version)
		}
		if v := f.versions(); v.members != 7 || v.controller != 7 || v.meta != 7 {
			t.Fatalf("%s: watch versions %+v, want 7 (the bases' entry) for each", what, v)
		}
	}
	checkRaised(f, "after the record with bases")

	// This backend becomes a migration's source: its record has no bases,
	// and what it reports does not go down.
	frozen := coord.Migration{ID: "m2", From: "raft", To: "etcd", Phase: coord.MigrationFrozen, Target: map[string]string{"etcd.endpoints": "e:2379"}}
	if res := setMigration(t, f, 9, &migrationKey{ID: "m1", Phase: coord.MigrationImported}, frozen); res.Err != nil {
		t.Fatalf("set_migration of the source record: %v", res.Err)
	}
	checkRaised(f, "after a record without bases")

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	restored := restoreSnapshot(t, snap)
	checkRaised(restored, "restored")
	rec, version := restored.migration()
	if !rec.OK || rec.Migration.ID != "m2" || rec.Migration.Phase != coord.MigrationFrozen || rec.Migration.Target["etcd.endpoints"] != "e:2379" || version != 9 {
		t.Fatalf("restored record: got %+v at %d, want m2 frozen at 9", rec, version)
	}

	old := newFSM()
	if err := old.Restore(io.NopCloser(bytes.NewReader([]byte(`{"topics":{},"brokers":{},"controller_id":-1,"applied":7}`)))); err != nil {
		t.Fatalf("Restore of a snapshot without the record: %v", err)
	}
	if rec, _ := old.migration(); rec.OK {
		t.Fatalf("record after an old snapshot: got %+v, want none", rec)
	}
	if md := old.metadata(); md.Version != 0 {
		t.Fatalf("metadata version after an old snapshot: got %d, want 0 (no bases)", md.Version)
	}
}

// TestFSMBasesLowerWhatTheyAreGiven: with bases, a SetPartition's
// ExpectedEpoch and a register's Replaces are reported epochs: the
// reported epoch matches, one below the base names nothing (a
// SetPartition fails, a register replaces nothing).
func TestFSMBasesLowerWhatTheyAreGiven(t *testing.T) {
	f := newFSM()
	setMigration(t, f, 1, nil, coord.Migration{ID: "m", Phase: coord.MigrationImported, Bases: testBases})
	b1 := fsmLog(t, f, 2, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
	epoch := fsmLog(t, f, 3, 2, command{Type: cmdClaim, Broker: b1}).Epoch
	create, states := topicOf("orders", 1)
	fsmLog(t, f, 4, 2, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, create)})
	for _, stale := range []int32{0, testBases.Partition - 1, testBases.Partition + 1} {
		res := fsmLog(t, f, 5, 2, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, coord.SetPartition{State: states[0], ExpectedEpoch: stale})})
		if !errors.Is(res.Err, coord.ErrVersionMismatch) {
			t.Fatalf("SetPartition expecting %d (stored %d): got %v, want ErrVersionMismatch", stale, testBases.Partition, res.Err)
		}
	}
	if res := fsmLog(t, f, 6, 2, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, coord.SetPartition{State: states[0], ExpectedEpoch: testBases.Partition})}); res.Err != nil {
		t.Fatalf("SetPartition expecting the reported epoch %d: %v", testBases.Partition, res.Err)
	}
	if st := f.metadata().Partitions[states[0].TopicPartition()]; st.PartitionEpoch != testBases.Partition+1 {
		t.Fatalf("orders-0 after the SetPartition: epoch %d, want %d", st.PartitionEpoch, testBases.Partition+1)
	}

	sourceEpoch := testBases.Broker - 1
	if res := fsmLog(t, f, 7, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}, Replaces: sourceEpoch}); !errors.Is(res.Err, coord.ErrExists) {
		t.Fatalf("register replacing a source epoch %d: got %v, want ErrExists (nothing to replace)", sourceEpoch, res.Err)
	}
	res := fsmLog(t, f, 8, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}, Replaces: testBases.Broker + b1.Epoch})
	if res.Err != nil || res.Replaced != b1.Epoch || res.Bases.replaced(res.Replaced) != testBases.Broker+b1.Epoch {
		t.Fatalf("register replacing the reported epoch %d: got %+v, want epoch %d replaced", testBases.Broker+b1.Epoch, res, b1.Epoch)
	}
	if res := fsmLog(t, f, 9, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 2}, Replaces: sourceEpoch}); res.Err != nil || res.Replaced != 0 {
		t.Fatalf("first register of broker 2 with a source epoch: got %+v, want registered, nothing replaced", res)
	}
}

// TestFSMRefusesWritesWhileFrozen: while the record refuses writes, every
// write it covers fails with ErrMigrated and changes nothing; sessions and
// claims go on, a producer_id_key that stores nothing is answered, and
// after a rollback the writes apply again.
func TestFSMRefusesWritesWhileFrozen(t *testing.T) {
	f := newFSM()
	b1 := fsmLog(t, f, 1, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
	epoch := fsmLog(t, f, 2, 2, command{Type: cmdClaim, Broker: b1}).Epoch
	cred := testCredential(coord.ScramSHA256, 1)
	fsmLog(t, f, 3, 2, command{Type: cmdSetScramCredential, Security: &securityCommand{User: "alice", Credential: &cred}})
	frozen := coord.Migration{ID: "m", From: "raft", To: "zk", Phase: coord.MigrationFrozen}
	setMigration(t, f, 4, nil, frozen)

	create, _ := topicOf("orders", 1)
	key := bytes.Repeat([]byte{9}, coord.ProducerIDKeySize)
	quota := (coord.QuotaEntity{User: "alice"}).String()
	writes := []command{
		{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, create)},
		{Type: cmdCommit, Epoch: epoch},
		{Type: cmdAllocateProducerIDs, Broker: coord.Broker{ID: 1}},
		{Type: cmdProducerIDKey, Key: key},
		{Type: cmdSetScramCredential, Security: &securityCommand{User: "bob", Credential: &cred}},
		{Type: cmdDeleteScramCredential, Security: &securityCommand{User: "alice", Mechanism: coord.ScramSHA256}},
		{Type: cmdCreateACLs, Security: &securityCommand{ACLs: []coord.ACL{testACL("orders", coord.ACLOperationRead)}}},
		{Type: cmdDeleteACLs, Security: &securityCommand{Filters: []coord.ACLFilter{coord.AnyACL}}},
		{Type: cmdAlterBrokerConfigs, Configs: &configsCommand{Entity: coord.DefaultBrokerEntity, Alterations: []coord.ConfigAlteration{{Key: "a", Value: "1"}}}},
		{Type: cmdAlterClientQuotas, Configs: &configsCommand{Entity: quota, Alterations: []coord.ConfigAlteration{{Key: coord.QuotaProducerByteRate, Value: "1"}}}},
	}
	before, err := json.Marshal(f.data)
	if err != nil {
		t.Fatal(err)
	}
	index := uint64(5)
	for _, cmd := range writes {
		if res := fsmLog(t, f, index, 2, cmd); !errors.Is(res.Err, coord.ErrMigrated) {
			t.Fatalf("%s while frozen: got %v, want ErrMigrated", cmd.Type, res.Err)
		}
		index++
	}
	f.data.Applied = 4
	after, err := json.Marshal(f.data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("state after the refused writes:\n got %s\nwant %s", after, before)
	}
	if res := fsmLog(t, f, index, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 2}}); res.Err != nil {
		t.Fatalf("register while frozen: %v", res.Err)
	}
	b2 := coord.Broker{ID: 2, Epoch: int64(index)}
	index++
	res := fsmLog(t, f, index, 3, command{Type: cmdClaim, Broker: b2})
	if res.Err != nil {
		t.Fatalf("claim while frozen: %v", res.Err)
	}
	epoch = res.Epoch
	index++

	rolledBack := frozen
	rolledBack.Phase = coord.MigrationRolledBack
	if res := setMigration(t, f, index, &migrationKey{ID: "m", Phase: coord.MigrationFrozen}, rolledBack); res.Err != nil {
		t.Fatalf("roll back: %v", res.Err)
	}
	index++
	writes[0].Epoch, writes[1].Epoch = epoch, epoch
	for _, cmd := range writes {
		index++
		if res := fsmLog(t, f, index, 3, cmd); res.Err != nil {
			t.Fatalf("%s after the rollback: %v", cmd.Type, res.Err)
		}
	}
	if !bytes.Equal(f.producerIDKey(), key) {
		t.Fatalf("producer id key after the rollback: got %x, want %x", f.producerIDKey(), key)
	}
	// A key stored is answered while frozen: it stores nothing.
	setMigration(t, f, index+1, &migrationKey{ID: "m", Phase: coord.MigrationRolledBack}, frozen)
	if res := fsmLog(t, f, index+2, 3, command{Type: cmdProducerIDKey, Key: bytes.Repeat([]byte{1}, coord.ProducerIDKeySize)}); res.Err != nil || !bytes.Equal(res.ProducerIDKey, key) {
		t.Fatalf("producer_id_key with a key stored, while frozen: got %x, %v, want %x", res.ProducerIDKey, res.Err, key)
	}
}

// TestImportChunksOf10000Partitions: a snapshot of 10 000 partitions
// (one topic of 8 000, one mid-reassignment, 2 000 small ones) splits
// into import_chunk entries under a megabyte each, which applied in
// order give every topic and state as given, with partition epochs from
// 0; a chunk of another migration, or after the import ended, changes
// nothing.
func TestImportChunksOf10000Partitions(t *testing.T) {
	snap := testSnapshot(8000, 2000)
	chunks, err := importChunks(snap, "m")
	if err != nil {
		t.Fatalf("importChunks: %v", err)
	}
	f := newFSM()
	begin := coord.Migration{ID: "m", Phase: coord.MigrationImporting, Bases: snap.Bases}
	if res := fsmLog(t, f, 1, 1, command{Type: cmdImportBegin, Migration: &migrationCommand{Record: &begin}}); res.Err != nil {
		t.Fatalf("import_begin: %v", res.Err)
	}
	if res := fsmLog(t, f, 2, 1, command{Type: cmdImportChunk, Migration: &migrationCommand{ID: "other"}}); !errors.Is(res.Err, coord.ErrVersionMismatch) {
		t.Fatalf("import_chunk of another migration: got %v, want ErrVersionMismatch", res.Err)
	}
	for i, chunk := range chunks {
		data, err := encodeCommand(&command{Type: cmdImportChunk, Migration: chunk})
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 1<<20 {
			t.Fatalf("chunk %d of %d: %d bytes, want at most 1 MiB", i, len(chunks), len(data))
		}
		if res := fsmLog(t, f, uint64(3+i), 1, command{Type: cmdImportChunk, Migration: chunk}); res.Err != nil {
			t.Fatalf("chunk %d of %d: %v", i, len(chunks), res.Err)
		}
	}
	if len(chunks) < 3 {
		t.Fatalf("chunks: got %d, want the snapshot split in several", len(chunks))
	}
	checkImported(t, snap, f.metadata(), f.security(), f.configs())
	end := begin
	if res := fsmLog(t, f, uint64(3+len(chunks)), 1, command{Type: cmdImportEnd, Migration: &migrationCommand{Record: &end, NextProducerID: snap.NextProducerID, ProducerIDKey: snap.ProducerIDKey}}); res.Err != nil {
		t.Fatalf("import_end: %v", res.Err)
	}
	if rec, _ := f.migration(); rec.Migration.Phase != coord.MigrationImported || f.nextProducerID() != snap.NextProducerID || !bytes.Equal(f.producerIDKey(), snap.ProducerIDKey) {
		t.Fatalf("after import_end: record %+v, next producer id %d, key %x", rec, f.nextProducerID(), f.producerIDKey())
	}
	if res := fsmLog(t, f, uint64(4+len(chunks)), 1, command{Type: cmdImportChunk, Migration: chunks[0]}); !errors.Is(res.Err, coord.ErrVersionMismatch) {
		t.Fatalf("import_chunk after import_end: got %v, want ErrVersionMismatch", res.Err)
	}
}

// TestMigrationCommandsRoundTrip: the migration commands decode to what
// was encoded (they are JSON entries).
func TestMigrationCommandsRoundTrip(t *testing.T) {
	snap := testSnapshot(3, 2)
	chunks, err := importChunks(snap, "m")
	if err != nil {
		t.Fatal(err)
	}
	rec := coord.Migration{ID: "m", From: "zk", To: "raft", Phase: coord.MigrationImported, Bases: testBases, Target: map[string]string{"k": "v"}}
	for _, cmd := range []command{
		{Type: cmdSetMigration, Migration: &migrationCommand{Record: &rec, Prev: &migrationKey{ID: "m", Phase: coord.MigrationImporting}}},
		{Type: cmdImportBegin, Migration: &migrationCommand{Record: &rec}},
		{Type: cmdImportChunk, Migration: chunks[0]},
		{Type: cmdImportEnd, Migration: &migrationCommand{Record: &rec, NextProducerID: 7000, ProducerIDKey: snap.ProducerIDKey}},
	} {
		data, err := encodeCommand(&cmd)
		if err != nil {
			t.Fatal(err)
		}
		if data[0] != '{' {
			t.Fatalf("%s: first byte %q, want JSON", cmd.Type, data[0])
		}
		var got command
		if err := decodeCommand(data, &got); err != nil {
			t.Fatalf("decode %s: %v", cmd.Type, err)
		}
		again, err := encodeCommand(&got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("%s round trip:\n got %s\nwant %s", cmd.Type, again, data)
		}
	}
}

// testSnapshot builds a snapshot as Export would give it: topics
// "orders" (wide partitions), "moving" (two partitions, the second
// mid-reassignment from brokers 1 2 3 to 2 3 4) and small topics
// "small-N" of one partition each, with topic configs; two SCRAM users,
// two ACLs, broker configs, client quotas, a producer id counter and key,
// and testBases.
func testSnapshot(wide, small int) *coord.Snapshot {
	md := coord.NewMetadata()
	md.Version = 1999
	addTopic := func(topic coord.Topic) {
		md.Topics[topic.Name] = topic
		for p, replicas := range topic.Assignment {
			md.Partitions[coord.TopicPartition{Topic: topic.Name, Partition: int32(p)}] = coord.PartitionState{
				Topic: topic.Name, Partition: int32(p), Leader: replicas[0], LeaderEpoch: int32(5 + p%3),
				ISR: replicas, PartitionEpoch: int32(17 + p%5), ControllerEpoch: 49}
		}
	}
	orders := coord.Topic{Name: "orders", ID: [16]byte{1}, Config: map[string]string{"min.insync.replicas": "2", "retention.ms": "60000"}}
	for range wide {
		orders.Assignment = append(orders.Assignment, []coord.BrokerID{1, 2, 3})
	}
	addTopic(orders)
	addTopic(coord.Topic{Name: "moving", ID: [16]byte{2}, Assignment: [][]coord.BrokerID{{1, 2, 3}, {2, 3, 4, 1}},
		Adding: map[int32][]coord.BrokerID{1: {4}}, Removing: map[int32][]coord.BrokerID{1: {1}}})
	for i := range small {
		addTopic(coord.Topic{Name: "small-" + strconv.Itoa(i), ID: [16]byte{3, byte(i), byte(i >> 8)},
			Assignment: [][]coord.BrokerID{{3, 1}}, Config: map[string]string{"cleanup.policy": "compact"}})
	}
	sec := coord.NewSecurityState()
	sec.Version = 1990
	sec.Users["alice"] = []coord.ScramCredential{testCredential(coord.ScramSHA256, 1)}
	sec.Users["bob"] = []coord.ScramCredential{testCredential(coord.ScramSHA256, 2), testCredential(coord.ScramSHA512, 3)}
	sec.ACLs = coord.SortACLs([]coord.ACL{testACL("orders", coord.ACLOperationRead), testACL("moving", coord.ACLOperationWrite)})
	cfgs := coord.NewConfigState()
	cfgs.Version = 1999
	cfgs.Brokers[coord.DefaultBrokerEntity] = map[string]string{"log.retention.ms": "3600000"}
	cfgs.Brokers["2"] = map[string]string{"log.cleaner.threads": "2"}
	cfgs.Quotas[coord.QuotaEntity{User: "alice"}] = map[string]string{coord.QuotaProducerByteRate: "1048576"}
	cfgs.Quotas[coord.QuotaEntity{IP: coord.DefaultQuotaEntity}] = map[string]string{coord.QuotaConnectionCreationRate: "10"}
	for name, topic := range md.Topics {
		cfgs.Topics[name] = topic.Config
	}
	return &coord.Snapshot{Metadata: md, Security: sec, Configs: cfgs, NextProducerID: 7000,
		ProducerIDKey: bytes.Repeat([]byte{7}, coord.ProducerIDKeySize), Bases: testBases}
}

// checkImported fails t unless md, sec and cfgs hold snap's topics,
// partition states (their epochs at the partition base: fresh), security
// and config states, with versions at or above the version base.
func checkImported(t *testing.T, snap *coord.Snapshot, md *coord.Metadata, sec *coord.SecurityState, cfgs *coord.ConfigState) {
	t.Helper()
	if !reflect.DeepEqual(md.Topics, snap.Metadata.Topics) {
		t.Fatalf("imported topics: got %v, want %v", md.TopicNames(), snap.Metadata.TopicNames())
	}
	if len(md.Partitions) != len(snap.Metadata.Partitions) {
		t.Fatalf("imported partitions: got %d, want %d", len(md.Partitions), len(snap.Metadata.Partitions))
	}
	for tp, want := range snap.Metadata.Partitions {
		want.PartitionEpoch = snap.Bases.Partition
		if got := md.Partitions[tp]; !reflect.DeepEqual(got, want) {
			t.Fatalf("imported %v: got %+v, want %+v", tp, got, want)
		}
	}
	if !sec.SameContent(snap.Security) {
		t.Fatalf("imported security state: got %+v, want %+v", sec, snap.Security)
	}
	if !cfgs.SameContent(snap.Configs) {
		t.Fatalf("imported config state: got %+v, want %+v", cfgs, snap.Configs)
	}
	if md.Version < snap.Bases.Version || sec.Version < snap.Bases.Version || cfgs.Version < snap.Bases.Version {
		t.Fatalf("versions after the import: metadata %d, security %d, configs %d, want each at least %d",
			md.Version, sec.Version, cfgs.Version, snap.Bases.Version)
	}
}
