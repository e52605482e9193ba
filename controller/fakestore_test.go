package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tripodmq/tripod/coord"
)

// fakeStore is a test double of the metadata store, for the actor's unit
// tests only: it injects a failure at a chosen chunk of a Commit, which
// no real backend can be made to do on cue. It applies a Commit as the
// contract says (chunks of at most chunkSize partition states, each
// atomic, stopping at the first that fails and leaving earlier ones
// applied), splitting a large CreateTopic as the Raft backend does. The
// backends' own behaviour is proven by the conformance suite, which runs
// the controller cases on all three.
type fakeStore struct {
	members chan []coord.Broker

	mu        sync.Mutex
	md        *coord.Metadata
	chunkSize int
	// failChunk, when above 0, is the chunk (1-based) at which the next
	// Commit fails with failErr, once.
	failChunk int
	failErr   error
	// fenced makes every Commit fail with coord.ErrFenced.
	fenced bool
	// loadErr, when set, is every Load's error.
	loadErr error
	commits int
}

func newFakeStore() *fakeStore {
	return &fakeStore{members: make(chan []coord.Broker, 16), md: coord.NewMetadata(), chunkSize: 100}
}

// failNextCommitAt makes the next Commit fail at chunk n.
func (f *fakeStore) failNextCommitAt(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failChunk, f.failErr = n, fmt.Errorf("%w: injected failure", coord.ErrUnavailable)
}

func (f *fakeStore) setLoadErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loadErr = err
}

func (f *fakeStore) setFenced() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fenced = true
}

// Load implements coord.MetadataStore.
func (f *fakeStore) Load(ctx context.Context) (*coord.Metadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loadErr != nil {
		return nil, f.loadErr
	}
	return copyMetadata(f.md), nil
}

// Commit implements coord.MetadataStore.
func (f *fakeStore) Commit(ctx context.Context, term coord.Term, ops ...coord.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits++
	if f.fenced || term.Context().Err() != nil {
		return fmt.Errorf("%w: fake store", coord.ErrFenced)
	}
	for i, chunk := range f.chunk(ops) {
		if f.failChunk == i+1 {
			f.failChunk = 0
			return fmt.Errorf("chunk %d: %w", i+1, f.failErr)
		}
		next := copyMetadata(f.md)
		if err := applyChunk(next, chunk); err != nil {
			return fmt.Errorf("chunk %d: %w", i+1, err)
		}
		f.md = next
	}
	return nil
}

// chunk splits ops into chunks of at most chunkSize partition states.
func (f *fakeStore) chunk(ops []coord.Op) [][]coord.Op {
	var units []coord.Op
	for _, op := range ops {
		ct, ok := op.(coord.CreateTopic)
		if !ok || len(ct.States) <= f.chunkSize {
			units = append(units, op)
			continue
		}
		units = append(units, coord.CreateTopic{Topic: ct.Topic, States: ct.States[:f.chunkSize]})
		for _, st := range ct.States[f.chunkSize:] {
			units = append(units, coord.SetPartition{State: st, ExpectedEpoch: coord.NewPartition})
		}
	}
	var chunks [][]coord.Op
	var cur []coord.Op
	weight := 0
	for _, u := range units {
		w := 1
		if ct, ok := u.(coord.CreateTopic); ok {
			w = max(1, len(ct.States))
		}
		if len(cur) > 0 && weight+w > f.chunkSize {
			chunks = append(chunks, cur)
			cur, weight = nil, 0
		}
		cur = append(cur, u)
		weight += w
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// applyChunk applies ops to md or fails as the contract says.
func applyChunk(md *coord.Metadata, ops []coord.Op) error {
	for _, op := range ops {
		switch op := op.(type) {
		case coord.CreateTopic:
			if _, ok := md.Topics[op.Topic.Name]; ok {
				return fmt.Errorf("%w: topic %s", coord.ErrExists, op.Topic.Name)
			}
			md.Topics[op.Topic.Name] = op.Topic
			for p, st := range op.States {
				st.Topic, st.Partition, st.PartitionEpoch = op.Topic.Name, int32(p), 0
				md.Partitions[st.TopicPartition()] = st
			}
		case coord.SetTopic:
			if _, ok := md.Topics[op.Topic.Name]; !ok {
				return fmt.Errorf("%w: topic %s", coord.ErrNotFound, op.Topic.Name)
			}
			md.Topics[op.Topic.Name] = op.Topic
		case coord.DeleteTopic:
			if _, ok := md.Topics[op.Name]; !ok {
				return fmt.Errorf("%w: topic %s", coord.ErrNotFound, op.Name)
			}
			delete(md.Topics, op.Name)
			for tp := range md.Partitions {
				if tp.Topic == op.Name {
					delete(md.Partitions, tp)
				}
			}
		case coord.SetPartition:
			tp := op.State.TopicPartition()
			if _, ok := md.Topics[tp.Topic]; !ok {
				return fmt.Errorf("%w: topic %s", coord.ErrNotFound, tp.Topic)
			}
			stored, ok := md.Partitions[tp]
			switch {
			case op.ExpectedEpoch == coord.NewPartition && ok,
				op.ExpectedEpoch != coord.NewPartition && (!ok || stored.PartitionEpoch != op.ExpectedEpoch):
				return fmt.Errorf("%w: partition %s", coord.ErrVersionMismatch, tp)
			}
			st := op.State
			st.PartitionEpoch = op.ExpectedEpoch + 1
			md.Partitions[tp] = st
		default:
			return fmt.Errorf("unknown op %T", op)
		}
	}
	return nil
}

// WatchMetadata implements coord.MetadataStore; the controller does not
// use it.
func (f *fakeStore) WatchMetadata(ctx context.Context) (<-chan *coord.Metadata, error) {
	return nil, errors.New("fake store: no metadata watch")
}

// WatchMembers implements Store: the sets the test pushes on members.
func (f *fakeStore) WatchMembers(ctx context.Context) (<-chan []coord.Broker, error) {
	return f.members, nil
}

// metadata returns a copy of the stored metadata.
func (f *fakeStore) metadata() *coord.Metadata {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copyMetadata(f.md)
}

func copyMetadata(md *coord.Metadata) *coord.Metadata {
	c := coord.NewMetadata()
	c.Version = md.Version
	for n, t := range md.Topics {
		c.Topics[n] = t
	}
	for tp, st := range md.Partitions {
		c.Partitions[tp] = st
	}
	return c
}

// fakeTerm is a controller term that ends when resigned.
type fakeTerm struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newFakeTerm() *fakeTerm {
	ctx, cancel := context.WithCancel(context.Background())
	return &fakeTerm{ctx: ctx, cancel: cancel}
}

func (t *fakeTerm) Controller() coord.BrokerID       { return 1 }
func (t *fakeTerm) Epoch() int64                     { return testControllerEpoch }
func (t *fakeTerm) Context() context.Context         { return t.ctx }
func (t *fakeTerm) Done() <-chan struct{}            { return t.ctx.Done() }
func (t *fakeTerm) Resign(ctx context.Context) error { t.cancel(); return nil }

// recordingSender records what the controller sends.
type recordingSender struct {
	mu      sync.Mutex
	sent    []Message
	dropped []coord.BrokerID
}

// Send implements Sender.
func (r *recordingSender) Send(to coord.Broker, req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, Message{To: to, Request: req})
}

// Drop implements Sender.
func (r *recordingSender) Drop(id coord.BrokerID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = append(r.dropped, id)
}

// leaderAndIsr returns every partition state sent in a LeaderAndIsr.
func (r *recordingSender) leaderAndIsr() map[coord.TopicPartition]PartitionInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := map[coord.TopicPartition]PartitionInfo{}
	for _, m := range r.sent {
		if lai, ok := m.Request.(*LeaderAndIsrRequest); ok {
			for _, p := range lai.Partitions {
				got[p.TopicPartition()] = p
			}
		}
	}
	return got
}
