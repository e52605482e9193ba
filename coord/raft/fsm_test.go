package raft

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
)

// fsmLog feeds one command to f as the log entry at index in term,
// encoded as the leader encodes it.
func fsmLog(t *testing.T, f *fsm, index, term uint64, cmd command) applyResult {
	t.Helper()
	data, err := encodeCommand(&cmd)
	if err != nil {
		t.Fatalf("encode %s: %v", cmd.Type, err)
	}
	res, ok := f.Apply(&hraft.Log{Index: index, Term: term, Type: hraft.LogCommand, Data: data}).(applyResult)
	if !ok {
		t.Fatalf("Apply of %s at %d: got no applyResult", cmd.Type, index)
	}
	return res
}

func topicOf(name string, partitions int) (coord.CreateTopic, []coord.PartitionState) {
	topic := coord.Topic{Name: name, ID: [16]byte{1, 2, 3}, Config: map[string]string{"min.insync.replicas": "2"}}
	var states []coord.PartitionState
	for p := range partitions {
		topic.Assignment = append(topic.Assignment, []coord.BrokerID{1, 2, 3})
		states = append(states, coord.PartitionState{Topic: name, Partition: int32(p), Leader: 1, LeaderEpoch: 0, ISR: []coord.BrokerID{1, 2, 3}})
	}
	return coord.CreateTopic{Topic: topic, States: states}, states
}

func wireOps(t *testing.T, ops ...coord.Op) []wireOp {
	t.Helper()
	var out []wireOp
	for _, op := range ops {
		w, err := toWireOp(op)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

// TestFSMApplySnapshotRestore drives a state machine through registrations,
// a claim and commits, then checks that a snapshot restores an equal one.
func TestFSMApplySnapshotRestore(t *testing.T) {
	f := newFSM()
	b1 := fsmLog(t, f, 3, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1, Host: "h1", Port: 9092}})
	if b1.Err != nil || b1.Broker.Epoch != 3 {
		t.Fatalf("register broker 1: got %+v, want epoch 3 (the log index)", b1)
	}
	if res := fsmLog(t, f, 4, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}); !errors.Is(res.Err, coord.ErrExists) {
		t.Fatalf("second register of broker 1: got %v, want ErrExists", res.Err)
	}
	fsmLog(t, f, 5, 2, command{Type: cmdRegister, Broker: coord.Broker{ID: 2, Host: "h2", Port: 9093}})
	claim := fsmLog(t, f, 6, 2, command{Type: cmdClaim, Broker: b1.Broker})
	if claim.Err != nil || claim.Epoch != 2 {
		t.Fatalf("claim in raft term 2: got %+v, want epoch 2", claim)
	}
	create, _ := topicOf("orders", 3)
	if res := fsmLog(t, f, 7, 2, command{Type: cmdCommit, Epoch: 2, Ops: wireOps(t, create)}); res.Err != nil {
		t.Fatalf("commit CreateTopic: %v", res.Err)
	}
	moved := create.States[1]
	moved.Leader, moved.LeaderEpoch, moved.ISR = 2, 1, []coord.BrokerID{2, 3}
	if res := fsmLog(t, f, 8, 2, command{Type: cmdCommit, Epoch: 2, Ops: wireOps(t, coord.SetPartition{State: moved, ExpectedEpoch: 0})}); res.Err != nil {
		t.Fatalf("commit SetPartition: %v", res.Err)
	}
	if res := fsmLog(t, f, 9, 2, command{Type: cmdExpire, Broker: coord.Broker{ID: 2, Epoch: 5}}); res.Err != nil {
		t.Fatalf("expire broker 2: %v", res.Err)
	}

	md := f.metadata()
	if md.Version != 8 {
		t.Errorf("metadata version: got %d, want 8 (the last commit's index)", md.Version)
	}
	got := md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 1}]
	moved.PartitionEpoch = 1
	if !reflect.DeepEqual(got, moved) {
		t.Errorf("orders-1: got %+v, want %+v", got, moved)
	}
	members, _ := f.members()
	if len(members) != 1 || !members[0].Equal(b1.Broker) {
		t.Errorf("members: got %+v, want only %+v", members, b1.Broker)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	restored := restoreSnapshot(t, snap)
	if !reflect.DeepEqual(restored.metadata(), md) {
		t.Errorf("restored metadata: got %+v, want %+v", restored.metadata(), md)
	}
	gotMembers, _ := restored.members()
	if !reflect.DeepEqual(gotMembers, members) {
		t.Errorf("restored members: got %+v, want %+v", gotMembers, members)
	}
	gotCtl, _ := restored.controller()
	wantCtl, _ := f.controller()
	if gotCtl != wantCtl || restored.applied() != 9 {
		t.Errorf("restored controller %+v applied %d: want %+v applied 9", gotCtl, restored.applied(), wantCtl)
	}
}

// TestFSMFencesStaleEpoch: a commit carrying an epoch below the current
// claim's, or made after the controller was released, changes nothing.
func TestFSMFencesStaleEpoch(t *testing.T) {
	f := newFSM()
	b1 := fsmLog(t, f, 1, 1, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
	b2 := fsmLog(t, f, 2, 1, command{Type: cmdRegister, Broker: coord.Broker{ID: 2}}).Broker
	old := fsmLog(t, f, 3, 1, command{Type: cmdClaim, Broker: b1}).Epoch
	// A claim in the same raft term still gets a greater epoch.
	next := fsmLog(t, f, 4, 1, command{Type: cmdClaim, Broker: b2}).Epoch
	if next <= old {
		t.Fatalf("second claim: epoch %d, want > %d", next, old)
	}
	create, _ := topicOf("t", 1)
	res := fsmLog(t, f, 5, 1, command{Type: cmdCommit, Epoch: old, Ops: wireOps(t, create)})
	if !errors.Is(res.Err, coord.ErrFenced) {
		t.Fatalf("commit with deposed epoch %d: got %v, want ErrFenced", old, res.Err)
	}
	fsmLog(t, f, 6, 1, command{Type: cmdRelease, Epoch: next})
	res = fsmLog(t, f, 7, 1, command{Type: cmdCommit, Epoch: next, Ops: wireOps(t, create)})
	if !errors.Is(res.Err, coord.ErrFenced) {
		t.Fatalf("commit after release: got %v, want ErrFenced", res.Err)
	}
	if md := f.metadata(); len(md.Topics) != 0 || md.Version != 0 {
		t.Fatalf("metadata after fenced commits: got %d topics at version %d, want none at 0", len(md.Topics), md.Version)
	}
}

// TestFSMChunkAllOrNothing: a chunk whose last SetPartition has a stale
// partition epoch applies none of its ops.
func TestFSMChunkAllOrNothing(t *testing.T) {
	f := newFSM()
	b1 := fsmLog(t, f, 1, 1, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
	epoch := fsmLog(t, f, 2, 1, command{Type: cmdClaim, Broker: b1}).Epoch
	create, states := topicOf("t", 2)
	fsmLog(t, f, 3, 1, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, create)})
	other, _ := topicOf("other", 1)
	p0, p1 := states[0], states[1]
	p0.Leader, p1.Leader = 2, 2
	res := fsmLog(t, f, 4, 1, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t,
		other,
		coord.SetPartition{State: p0, ExpectedEpoch: 0},
		coord.SetPartition{State: p1, ExpectedEpoch: 7},
	)})
	if !errors.Is(res.Err, coord.ErrVersionMismatch) {
		t.Fatalf("chunk with a stale partition epoch: got %v, want ErrVersionMismatch", res.Err)
	}
	md := f.metadata()
	if _, ok := md.Topics["other"]; ok {
		t.Errorf("topic other exists after the failed chunk, want none of it applied")
	}
	if got := md.Partitions[coord.TopicPartition{Topic: "t", Partition: 0}]; got.Leader != 1 || got.PartitionEpoch != 0 {
		t.Errorf("t-0 after the failed chunk: got leader %d epoch %d, want leader 1 epoch 0", got.Leader, got.PartitionEpoch)
	}
	// Ops that depend on each other within a chunk: delete then recreate.
	res = fsmLog(t, f, 5, 1, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, coord.DeleteTopic{Name: "t"}, create)})
	if res.Err != nil {
		t.Fatalf("delete and recreate in one chunk: %v", res.Err)
	}
	if res := fsmLog(t, f, 6, 1, command{Type: cmdCommit, Epoch: epoch, Ops: wireOps(t, coord.DeleteTopic{Name: "missing"})}); !errors.Is(res.Err, coord.ErrNotFound) {
		t.Errorf("delete of a missing topic: got %v, want ErrNotFound", res.Err)
	}
}

// TestChunkOpsSplitsLargeCreateTopic: a CreateTopic of 10 000 partitions
// becomes a partial CreateTopic of chunkWeight states and SetPartitions
// in entries of at most statesPerEntry, which applied in order give the
// whole topic.
func TestChunkOpsSplitsLargeCreateTopic(t *testing.T) {
	create, states := topicOf("wide", 10000)
	chunks, err := chunkOps([]coord.Op{create})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + (10000-chunkWeight+statesPerEntry-1)/statesPerEntry; len(chunks) != want {
		t.Fatalf("chunks: got %d, want %d", len(chunks), want)
	}
	if len(chunks[0]) != 1 || chunks[0][0].CreateTopic == nil || len(chunks[0][0].CreateTopic.States) != chunkWeight {
		t.Fatalf("first chunk: got %d ops, want the partial CreateTopic of %d states", len(chunks[0]), chunkWeight)
	}
	f := newFSM()
	b1 := fsmLog(t, f, 1, 1, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
	epoch := fsmLog(t, f, 2, 1, command{Type: cmdClaim, Broker: b1}).Epoch
	for i, chunk := range chunks {
		if res := fsmLog(t, f, uint64(3+i), 1, command{Type: cmdCommit, Epoch: epoch, Ops: chunk}); res.Err != nil {
			t.Fatalf("chunk %d: %v", i, res.Err)
		}
	}
	md := f.metadata()
	if len(md.Partitions) != len(states) {
		t.Fatalf("partitions: got %d, want %d", len(md.Partitions), len(states))
	}
	for _, st := range states {
		if got := md.Partitions[st.TopicPartition()]; !reflect.DeepEqual(got, st) {
			t.Fatalf("%v: got %+v, want %+v", st.TopicPartition(), got, st)
		}
	}
}

// memorySink is a hraft.SnapshotSink in memory.
type memorySink struct {
	bytes.Buffer
}

func (s *memorySink) ID() string    { return "memory" }
func (s *memorySink) Cancel() error { return nil }
func (s *memorySink) Close() error  { return nil }

// restoreSnapshot persists snap in memory and restores it into a new
// state machine, as a node does that installs a snapshot.
func restoreSnapshot(t *testing.T, snap hraft.FSMSnapshot) *fsm {
	t.Helper()
	sink := &memorySink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	restored := newFSM()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return restored
}

// TestFSMProducerIDBlocksSurviveSnapshots: allocate_producer_ids entries
// reserve consecutive blocks, a snapshot carries the counter on, and a
// snapshot written before the counter existed restores it as 0.
func TestFSMProducerIDBlocksSurviveSnapshots(t *testing.T) {
	f := newFSM()
	for i, broker := range []coord.BrokerID{1, 2} {
		res := fsmLog(t, f, uint64(3+i), 2, command{Type: cmdAllocateProducerIDs, Broker: coord.Broker{ID: broker}})
		want := coord.ProducerIDBlock{Broker: broker, First: int64(i) * coord.ProducerIDBlockSize, Size: coord.ProducerIDBlockSize}
		if res.Err != nil || res.ProducerIDs != want {
			t.Fatalf("allocation %d: got %+v, %v, want %+v", i, res.ProducerIDs, res.Err, want)
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	restored := restoreSnapshot(t, snap)
	res := fsmLog(t, restored, 5, 2, command{Type: cmdAllocateProducerIDs, Broker: coord.Broker{ID: 3}})
	if want := int64(2 * coord.ProducerIDBlockSize); res.Err != nil || res.ProducerIDs.First != want {
		t.Fatalf("allocation after restore: got %+v, %v, want first %d", res.ProducerIDs, res.Err, want)
	}

	old := newFSM()
	if err := old.Restore(io.NopCloser(bytes.NewReader([]byte(`{"topics":{},"brokers":{},"controller_id":-1,"applied":7}`)))); err != nil {
		t.Fatalf("Restore of a snapshot without next_producer_id: %v", err)
	}
	res = fsmLog(t, old, 8, 2, command{Type: cmdAllocateProducerIDs, Broker: coord.Broker{ID: 1}})
	if res.Err != nil || res.ProducerIDs.First != 0 {
		t.Fatalf("allocation after an old snapshot: got %+v, %v, want first 0", res.ProducerIDs, res.Err)
	}
}

// TestFSMProducerIDKeyStoredOnce: the first producer_id_key entry stores
// its key, a later one with another key gets the first back, a malformed
// one fails without storing anything, and a snapshot carries the key on.
func TestFSMProducerIDKeyStoredOnce(t *testing.T) {
	f := newFSM()
	if res := fsmLog(t, f, 3, 2, command{Type: cmdProducerIDKey, Key: []byte("short")}); res.Err == nil || f.producerIDKey() != nil {
		t.Fatalf("a 5-byte key: got %v and stored %x, want an error and nothing stored", res.Err, f.producerIDKey())
	}
	first, second := bytes.Repeat([]byte{1}, coord.ProducerIDKeySize), bytes.Repeat([]byte{2}, coord.ProducerIDKeySize)
	for i, proposed := range [][]byte{first, second} {
		res := fsmLog(t, f, uint64(4+i), 2, command{Type: cmdProducerIDKey, Key: proposed})
		if res.Err != nil || !bytes.Equal(res.ProducerIDKey, first) {
			t.Fatalf("producer_id_key %d: got %x, %v, want %x", i, res.ProducerIDKey, res.Err, first)
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	restored := restoreSnapshot(t, snap)
	if got := restored.producerIDKey(); !bytes.Equal(got, first) {
		t.Fatalf("key after restore: got %x, want %x", got, first)
	}
}

// TestFSMRegisterReplacesDeadIncarnation: a register entry whose Replaces
// is the stored registration's epoch replaces it (the new epoch is its
// index) and takes its controller claim along; one with another epoch, or
// an entry written before Replaces existed, is refused with ErrExists.
func TestFSMRegisterReplacesDeadIncarnation(t *testing.T) {
	f := newFSM()
	b := coord.Broker{ID: 1, Host: "h1", Port: 9092}
	if res := fsmLog(t, f, 3, 1, command{Type: cmdRegister, Broker: b}); res.Err != nil || res.Replaced != 0 {
		t.Fatalf("register broker 1: got %+v, want epoch 3, nothing replaced", res)
	}
	if res := fsmLog(t, f, 4, 1, command{Type: cmdClaim, Broker: coord.Broker{ID: 1, Epoch: 3}}); res.Err != nil {
		t.Fatalf("claim of broker 1 epoch 3: got %v, want nil", res.Err)
	}

	old := []byte(`{"type":"register","broker":{"id":1,"host":"h1","port":9092,"epoch":0}}`)
	if res, _ := f.Apply(&hraft.Log{Index: 5, Term: 1, Type: hraft.LogCommand, Data: old}).(applyResult); !errors.Is(res.Err, coord.ErrExists) {
		t.Fatalf("register entry without replaces of live broker 1: got %v, want ErrExists", res.Err)
	}
	if res := fsmLog(t, f, 6, 1, command{Type: cmdRegister, Broker: b, Replaces: 2}); !errors.Is(res.Err, coord.ErrExists) {
		t.Fatalf("register replacing epoch 2 while epoch 3 is live: got %v, want ErrExists", res.Err)
	}

	res := fsmLog(t, f, 7, 1, command{Type: cmdRegister, Broker: b, Replaces: 3})
	if res.Err != nil || res.Broker.Epoch != 7 || res.Replaced != 3 || res.Broker.Replaces != 0 {
		t.Fatalf("register replacing epoch 3: got %+v, want epoch 7, Replaced 3, Broker.Replaces 0", res)
	}
	members, version := f.members()
	if len(members) != 1 || members[0].Epoch != 7 || version != 7 {
		t.Fatalf("members after the replacement: got %+v at version %d, want broker 1 epoch 7 at 7", members, version)
	}
	f.mu.RLock()
	ctl := f.data.ControllerID
	f.mu.RUnlock()
	if ctl != coord.NoBroker {
		t.Fatalf("controller after its registration was replaced: got %d, want none (%d)", ctl, coord.NoBroker)
	}
}

// TestFSMBrokerConfigsSurviveSnapshots: alter_broker_configs entries
// change an entity as stored, a snapshot taken before a later change keeps
// its own point in time, restored it carries the configs on, and a
// snapshot written before the config store existed restores it empty.
func TestFSMBrokerConfigsSurviveSnapshots(t *testing.T) {
	f := newFSM()
	alter := func(index uint64, entity string, replace bool, alts ...coord.ConfigAlteration) applyResult {
		return fsmLog(t, f, index, 2, command{Type: cmdAlterBrokerConfigs,
			Configs: &configsCommand{Entity: entity, Replace: replace, Alterations: alts}})
	}
	set := func(k, v string) coord.ConfigAlteration {
		return coord.ConfigAlteration{Op: coord.ConfigSet, Key: k, Value: v}
	}
	if res := alter(3, coord.DefaultBrokerEntity, false, set("a", "1"), set("b", "2")); res.Err != nil || len(res.Configs) != 2 {
		t.Fatalf("alter the default: got %v, %v", res.Configs, res.Err)
	}
	if res := alter(4, "bad entity", false, set("a", "1")); res.Err == nil {
		t.Fatalf("alter an invalid entity: got nil, want an error")
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if res := alter(5, coord.DefaultBrokerEntity, true, set("c", "3")); res.Err != nil || res.Configs["c"] != "3" || len(res.Configs) != 1 {
		t.Fatalf("replace the default: got %v, %v", res.Configs, res.Err)
	}
	if got := f.configs(); got.Version != 5 || got.Brokers[coord.DefaultBrokerEntity]["c"] != "3" {
		t.Fatalf("after the replace: got %+v", got)
	}
	restored := restoreSnapshot(t, snap)
	got := restored.configs().Brokers[coord.DefaultBrokerEntity]
	if len(got) != 2 || got["a"] != "1" || got["b"] != "2" {
		t.Fatalf("restored from the snapshot before the replace: got %v, want a=1 b=2", got)
	}
	old := newFSM()
	if err := old.Restore(io.NopCloser(bytes.NewReader([]byte(`{"topics":{},"brokers":{},"controller_id":-1,"applied":7}`)))); err != nil {
		t.Fatalf("Restore of a snapshot without configs: %v", err)
	}
	if got := old.configs(); len(got.Brokers) != 0 {
		t.Fatalf("an old snapshot: broker configs %v, want none", got.Brokers)
	}
}
