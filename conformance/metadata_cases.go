package conformance

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// topicID derives a stable topic UUID from the name.
func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// assignment returns partition p's replicas among brokers 1..replicas,
// rotated so leaders spread.
func assignment(p int32, replicas int) []coord.BrokerID {
	out := make([]coord.BrokerID, replicas)
	for r := range out {
		out[r] = coord.BrokerID((int(p)+r)%replicas + 1)
	}
	return out
}

// initialState is partition p's state as createTopicOp creates it: the
// first replica leads at leader epoch 0, every replica in the ISR.
func initialState(topic string, p int32, replicas int, controllerEpoch int64) coord.PartitionState {
	replicasOfP := assignment(p, replicas)
	return coord.PartitionState{
		Topic:           topic,
		Partition:       p,
		Leader:          replicasOfP[0],
		LeaderEpoch:     0,
		ISR:             replicasOfP,
		ControllerEpoch: controllerEpoch,
	}
}

// newTopic returns topic name with partitions partitions of replicas
// replicas each.
func newTopic(name string, partitions, replicas int) coord.Topic {
	topic := coord.Topic{
		Name:       name,
		ID:         topicID(name),
		Assignment: make([][]coord.BrokerID, partitions),
		Config:     map[string]string{"min.insync.replicas": "1", "retention.ms": "604800000"},
	}
	for p := range topic.Assignment {
		topic.Assignment[p] = assignment(int32(p), replicas)
	}
	return topic
}

// createTopicOp returns the CreateTopic of newTopic with its initial
// states, written by the controller of controllerEpoch.
func createTopicOp(name string, partitions, replicas int, controllerEpoch int64) coord.CreateTopic {
	op := coord.CreateTopic{Topic: newTopic(name, partitions, replicas), States: make([]coord.PartitionState, partitions)}
	for p := range op.States {
		op.States[p] = initialState(name, int32(p), replicas, controllerEpoch)
	}
	return op
}

// samePartitionState compares two states field by field (a nil and an
// empty ISR are the same).
func samePartitionState(a, b coord.PartitionState) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.Leader == b.Leader &&
		a.LeaderEpoch == b.LeaderEpoch && slices.Equal(a.ISR, b.ISR) &&
		a.PartitionEpoch == b.PartitionEpoch && a.ControllerEpoch == b.ControllerEpoch
}

// sameTopic compares two topics (nil and empty configs are the same).
func sameTopic(a, b coord.Topic) bool {
	if a.Name != b.Name || a.ID != b.ID || len(a.Assignment) != len(b.Assignment) || len(a.Config) != len(b.Config) {
		return false
	}
	for p := range a.Assignment {
		if !slices.Equal(a.Assignment[p], b.Assignment[p]) {
			return false
		}
	}
	sameReplicas := func(x, y []coord.BrokerID) bool { return slices.Equal(x, y) }
	return maps.Equal(a.Config, b.Config) && maps.EqualFunc(a.Adding, b.Adding, sameReplicas) &&
		maps.EqualFunc(a.Removing, b.Removing, sameReplicas)
}

// describeMetadata summarises md for failures.
func describeMetadata(md *coord.Metadata) string {
	if md == nil {
		return "nil metadata"
	}
	return fmt.Sprintf("version %d, topics %v, %d partition states", md.Version, md.TopicNames(), len(md.Partitions))
}

// controllerOf starts campaigners on every backend of c and returns the
// first term won, with the backend that holds it.
func controllerOf(t T, h Harness, c Cluster, n int) (*wonTerm, coord.Backend) {
	t.Helper()
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	cs := startCampaigners(t, h, c, all...)
	w := cs.waitTerm(t, nil, startupBound(h), "first election")
	return w, c.Backend(w.backend)
}

// commit commits ops with term through be and fails t on error.
func commit(t T, be coord.Backend, w *wonTerm, what string, ops ...coord.Op) time.Duration {
	t.Helper()
	return commitWithin(t, be, w, callBound, what, ops...)
}

// commitWithin is commit with a deadline of d.
func commitWithin(t T, be coord.Backend, w *wonTerm, d time.Duration, what string, ops ...coord.Op) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if err := be.Commit(ctx, w.term, ops...); err != nil {
		t.Fatalf("Commit of %s: got %v, want nil", what, err)
	}
	return time.Since(start)
}

// commitErr commits ops and fails t unless the error is want.
func commitErr(t T, be coord.Backend, w *wonTerm, want error, what string, ops ...coord.Op) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	if err := be.Commit(ctx, w.term, ops...); !errors.Is(err, want) {
		t.Fatalf("Commit of %s: got %v, want %v", what, err, want)
	}
}

// checkTopic fails t unless md holds topic want and exactly the states of
// wantStates for it.
func checkTopic(t T, md *coord.Metadata, want coord.Topic, wantStates []coord.PartitionState) {
	t.Helper()
	got, ok := md.Topics[want.Name]
	if !ok {
		t.Fatalf("Load: topic %s missing (%s), want it", want.Name, describeMetadata(md))
	}
	if !sameTopic(got, want) {
		t.Fatalf("Load: topic %s: got %d partitions, config %v, id %x; want %d partitions, config %v, id %x (assignments compared too)",
			want.Name, got.Partitions(), got.Config, got.ID, want.Partitions(), want.Config, want.ID)
	}
	n := 0
	for tp := range md.Partitions {
		if tp.Topic == want.Name {
			n++
		}
	}
	if n != len(wantStates) {
		t.Fatalf("Load: topic %s has %d partition states, want %d", want.Name, n, len(wantStates))
	}
	bad := 0
	var first string
	for _, ws := range wantStates {
		gs, ok := md.Partitions[ws.TopicPartition()]
		if !ok || !samePartitionState(gs, ws) {
			if bad == 0 {
				first = fmt.Sprintf("%v: got %+v, want %+v", ws.TopicPartition(), gs, ws)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("Load: %d of %d partition states of %s differ; first: %s", bad, len(wantStates), want.Name, first)
	}
}

// testTopicLifecycle: create, create again (ErrExists), add a partition
// with SetTopic and its SetPartition, delete, delete again (ErrNotFound);
// SetTopic and SetPartition of a missing topic fail with ErrNotFound.
func testTopicLifecycle(t T, h Harness) {
	c := h.NewCluster(t, 1)
	ctl, be := controllerOf(t, h, c, 1)
	const name = "orders"

	create := createTopicOp(name, 2, 1, ctl.epoch)
	commit(t, be, ctl, "CreateTopic orders", create)
	checkTopic(t, loadAt(t, be), create.Topic, create.States)

	commitErr(t, be, ctl, coord.ErrExists, "CreateTopic orders again", createTopicOp(name, 3, 1, ctl.epoch))
	checkTopic(t, loadAt(t, be), create.Topic, create.States)

	grown := newTopic(name, 3, 1)
	grown.Config["cleanup.policy"] = "compact"
	added := initialState(name, 2, 1, ctl.epoch)
	commit(t, be, ctl, "SetTopic orders to 3 partitions", coord.SetTopic{Topic: grown}, coord.SetPartition{State: added, ExpectedEpoch: coord.NewPartition})
	checkTopic(t, loadAt(t, be), grown, append(slices.Clone(create.States), added))

	// A reassignment in progress (KIP-455) is stored with the topic: the
	// assignment holds target and original replicas, Adding and Removing
	// say which is which; ending it clears them.
	moving := grown
	moving.Assignment = slices.Clone(grown.Assignment)
	moving.Assignment[1] = []coord.BrokerID{4, 5, 2}
	moving.Adding = map[int32][]coord.BrokerID{1: {4, 5}}
	moving.Removing = map[int32][]coord.BrokerID{1: {2}}
	commit(t, be, ctl, "SetTopic orders with partition 1 being reassigned", coord.SetTopic{Topic: moving})
	checkTopic(t, loadAt(t, be), moving, append(slices.Clone(create.States), added))
	if got := loadAt(t, be).Topics[name]; !got.Reassigning(1) || got.Reassigning(0) ||
		!slices.Equal(got.TargetReplicas(1), []coord.BrokerID{4, 5}) || !slices.Equal(got.OriginalReplicas(1), []coord.BrokerID{2}) {
		t.Fatalf("Load: topic %s: reassigning 1 %t 0 %t, target %v original %v; want true false [4 5] [2]",
			name, got.Reassigning(1), got.Reassigning(0), got.TargetReplicas(1), got.OriginalReplicas(1))
	}
	commit(t, be, ctl, "SetTopic orders with the reassignment ended", coord.SetTopic{Topic: grown})
	checkTopic(t, loadAt(t, be), grown, append(slices.Clone(create.States), added))

	commitErr(t, be, ctl, coord.ErrNotFound, "SetTopic of missing topic", coord.SetTopic{Topic: newTopic("missing", 1, 1)})
	commitErr(t, be, ctl, coord.ErrNotFound, "SetPartition of missing topic", coord.SetPartition{State: initialState("missing", 0, 1, ctl.epoch), ExpectedEpoch: coord.NewPartition})
	commitErr(t, be, ctl, coord.ErrNotFound, "DeleteTopic of missing topic", coord.DeleteTopic{Name: "missing"})

	commit(t, be, ctl, "DeleteTopic orders", coord.DeleteTopic{Name: name})
	md := loadAt(t, be)
	if _, ok := md.Topics[name]; ok {
		t.Fatalf("Load after DeleteTopic: topic %s still there, want gone", name)
	}
	for tp := range md.Partitions {
		if tp.Topic == name {
			t.Fatalf("Load after DeleteTopic: partition state %v still there, want gone", tp)
		}
	}
	commitErr(t, be, ctl, coord.ErrNotFound, "DeleteTopic orders again", coord.DeleteTopic{Name: name})

	// A deleted topic can be created again, from scratch.
	// A deleted topic can be created again, from scratch; the partition
	// epochs a CreateTopic carries are ignored (stored as 0), and a
	// SetPartition of the new topic may follow in the same Commit.
	again := createTopicOp(name, 2, 1, ctl.epoch)
	again.States[0].PartitionEpoch = 5
	again.States[1].PartitionEpoch = 5
	moved := again.States[1]
	moved.Leader, moved.LeaderEpoch = coord.NoBroker, 1
	commit(t, be, ctl, "CreateTopic orders after its deletion, with a SetPartition of it", again, coord.SetPartition{State: moved, ExpectedEpoch: 0})
	want := slices.Clone(again.States)
	want[0].PartitionEpoch = 0
	moved.PartitionEpoch = 1
	want[1] = moved
	checkTopic(t, loadAt(t, be), again.Topic, want)

	// A chunk fails as a whole: a valid SetPartition next to one of a
	// missing topic is not applied.
	valid := want[0]
	valid.LeaderEpoch = 9
	commitErr(t, be, ctl, coord.ErrNotFound, "SetPartition orders-0 (valid) and SetPartition of a missing topic",
		coord.SetPartition{State: valid, ExpectedEpoch: 0}, coord.SetPartition{State: initialState("missing", 0, 1, ctl.epoch), ExpectedEpoch: coord.NewPartition})
	checkTopic(t, loadAt(t, be), again.Topic, want)
}

// testStalePartitionEpochMismatch: a SetPartition whose ExpectedEpoch is
// not the stored partition epoch fails with ErrVersionMismatch and nothing
// of its chunk is applied; with the stored epoch it succeeds and the
// partition epoch grows by one.
func testStalePartitionEpochMismatch(t T, h Harness) {
	c := h.NewCluster(t, 1)
	ctl, be := controllerOf(t, h, c, 1)
	const name = "cas"
	create := createTopicOp(name, 3, 1, ctl.epoch)
	commit(t, be, ctl, "CreateTopic cas", create)
	states := slices.Clone(create.States)

	p0 := states[0]
	p0.LeaderEpoch = 1
	commit(t, be, ctl, "SetPartition cas-0 at epoch 0", coord.SetPartition{State: p0, ExpectedEpoch: 0})
	p0.PartitionEpoch = 1
	states[0] = p0
	checkTopic(t, loadAt(t, be), create.Topic, states)

	// One chunk: a valid write of cas-1 and a stale one of cas-0.
	p1 := states[1]
	p1.Leader, p1.LeaderEpoch = coord.NoBroker, 1
	stale := p0
	stale.LeaderEpoch = 7
	commitErr(t, be, ctl, coord.ErrVersionMismatch, "SetPartition cas-1 (valid) and cas-0 at stale epoch 0",
		coord.SetPartition{State: p1, ExpectedEpoch: 0}, coord.SetPartition{State: stale, ExpectedEpoch: 0})
	checkTopic(t, loadAt(t, be), create.Topic, states)

	commitErr(t, be, ctl, coord.ErrVersionMismatch, "SetPartition cas-0 at future epoch 5", coord.SetPartition{State: stale, ExpectedEpoch: 5})
	commitErr(t, be, ctl, coord.ErrVersionMismatch, "SetPartition cas-0 as NewPartition although it exists", coord.SetPartition{State: stale, ExpectedEpoch: coord.NewPartition})
	checkTopic(t, loadAt(t, be), create.Topic, states)

	p0.LeaderEpoch = 2
	commit(t, be, ctl, "SetPartition cas-0 at epoch 1", coord.SetPartition{State: p0, ExpectedEpoch: 1})
	p0.PartitionEpoch = 2
	states[0] = p0
	commit(t, be, ctl, "SetPartition cas-1 at epoch 0", coord.SetPartition{State: p1, ExpectedEpoch: 0})
	p1.PartitionEpoch = 1
	states[1] = p1
	checkTopic(t, loadAt(t, be), create.Topic, states)
}

// bigCommitBound is the deadline of a commit of 10 000 partitions: seconds
// are expected, a minute means the backend does not chunk sensibly.
const bigCommitBound = time.Minute

// testCommit10000Partitions: a CreateTopic of 10 000 partitions in one
// Commit, then 10 000 SetPartitions in one Commit (the backend chunks
// them); Load on the controller's backend and on another returns every
// state intact. 10 000 SetPartitions of which one is stale fail, without
// applying the chunk that holds it.
func testCommit10000Partitions(t T, h Harness) {
	const partitions, replicas = 10000, 3
	c := h.NewCluster(t, 2)
	ctl, be := controllerOf(t, h, c, 2)
	other := c.Backend(1 - ctl.backend)
	const name = "wide"

	create := createTopicOp(name, partitions, replicas, ctl.epoch)
	took := commitWithin(t, be, ctl, bigCommitBound, "CreateTopic of 10 000 partitions", create)
	start := time.Now()
	checkTopic(t, loadAt(t, be), create.Topic, create.States)
	t.Logf("CreateTopic of %d partitions: Commit %v, Load %v", partitions, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// Every partition loses its leader: the next replica leads and the
	// old leader leaves the ISR.
	updates := make([]coord.Op, partitions)
	moved := make([]coord.PartitionState, partitions)
	for p, s := range create.States {
		s.Leader = s.ISR[1]
		s.LeaderEpoch++
		s.ISR = slices.Clone(s.ISR[1:])
		updates[p] = coord.SetPartition{State: s, ExpectedEpoch: 0}
		s.PartitionEpoch = 1
		moved[p] = s
	}
	took = commitWithin(t, be, ctl, bigCommitBound, "10 000 SetPartitions", updates...)
	start = time.Now()
	checkTopic(t, loadAt(t, be), create.Topic, moved)
	t.Logf("%d SetPartitions: Commit %v, Load %v", partitions, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// A commit whose op 7013 is stale fails with ErrVersionMismatch and
	// applies nothing of the chunk that holds it: not op 7013, and no
	// partition is left in a state that is neither the old nor the new.
	// The other chunks are whole chunks applied or not (a backend applies
	// chunks that share no key concurrently, so which ones is the
	// backend's).
	const staleAt = 7013
	again := make([]coord.Op, partitions)
	next := make([]coord.PartitionState, partitions)
	for p, s := range moved {
		s.LeaderEpoch++
		expected := s.PartitionEpoch
		if p == staleAt {
			expected = 0
		}
		again[p] = coord.SetPartition{State: s, ExpectedEpoch: expected}
		s.PartitionEpoch++
		next[p] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), bigCommitBound)
	defer cancel()
	if err := be.Commit(ctx, ctl.term, again...); !errors.Is(err, coord.ErrVersionMismatch) {
		t.Fatalf("Commit of 10 000 SetPartitions, op %d stale: got %v, want ErrVersionMismatch", staleAt, err)
	}
	md := loadAt(t, be)
	applied := 0
	for p := range partitions {
		got := md.Partitions[moved[p].TopicPartition()]
		switch {
		case samePartitionState(got, next[p]):
			if p == staleAt {
				t.Fatalf("Commit with op %d stale: op %d applied (%+v)", staleAt, staleAt, got)
			}
			moved[p] = next[p]
			applied++
		case !samePartitionState(got, moved[p]):
			t.Fatalf("Commit with op %d stale: partition %d is %+v, neither the state before (%+v) nor the one committed (%+v)", staleAt, p, got, moved[p], next[p])
		}
	}
	t.Logf("a commit with op %d stale applied %d of its ops", staleAt, applied)

	// Another backend sees the same, once the change has reached it.
	var seen *coord.Metadata
	waitUntil(t, detectionBound(h)+callBound, "Load on the other backend returning the 10 000 updates", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		md, err := other.Load(ctx)
		if err != nil {
			return false, fmt.Sprintf("Load: %v", err)
		}
		for _, want := range moved {
			if got := md.Partitions[want.TopicPartition()]; got.PartitionEpoch != want.PartitionEpoch {
				return false, fmt.Sprintf("%v at partition epoch %d, want %d", want.TopicPartition(), got.PartitionEpoch, want.PartitionEpoch)
			}
		}
		seen = md
		return true, ""
	})
	checkTopic(t, seen, create.Topic, moved)
}
