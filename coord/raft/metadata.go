package raft

import (
	"context"
	"fmt"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/parallel"
)

// chunkWeight is how many partition states one commit entry carries at
// most: small entries keep each Raft append, and the garbage it makes,
// short enough not to delay heartbeats. An entry of SetPartitions only is
// binary (codec.go), some 20 bytes a state, and carries up to
// statesPerEntry: a failover's 100 000 states are 25 entries, not 200,
// each about as large as 500 states in JSON.
const (
	chunkWeight    = 500
	statesPerEntry = 4000
)

// Load implements coord.MetadataStore. It is linearizable (see readable).
func (b *Backend) Load(ctx context.Context) (*coord.Metadata, error) {
	if err := b.readable(ctx, "load metadata"); err != nil {
		return nil, err
	}
	return b.fsm.metadata(), nil
}

// Commit implements coord.MetadataStore. Each chunk is one log entry
// carrying the term's epoch; the state machine rejects it unless that
// epoch is the current controller's.
func (b *Backend) Commit(ctx context.Context, t coord.Term, ops ...coord.Op) error {
	tm, ok := t.(*term)
	if !ok || tm.b != b {
		return fmt.Errorf("%w: commit: term %T was not won on this raft backend", coord.ErrFenced, t)
	}
	chunks, err := chunkOps(ops)
	if err != nil {
		return err
	}
	if len(chunks) == 0 {
		// An empty Commit still tells a deposed controller so.
		chunks = [][]wireOp{nil}
	}
	commitChunk := func(i int) error {
		if tm.ctx.Err() != nil {
			return fmt.Errorf("%w: commit chunk %d/%d: controller term %d ended", coord.ErrFenced, i+1, len(chunks), tm.epoch)
		}
		what := fmt.Sprintf("commit chunk %d/%d of controller epoch %d", i+1, len(chunks), tm.epoch)
		_, err := b.apply(ctx, what, &command{Type: cmdCommit, Epoch: tm.epoch, Ops: chunks[i]})
		return err
	}
	// Entries of distinct partitions' states may land in any order: up to
	// commitParallel are proposed at once, which Raft appends and
	// replicates together. One after the other, the 200 entries of a
	// failover's 100 000 states took 8 s on a busy machine. Any other
	// commit goes one entry after the other, stopping at a failure.
	workers := 1
	if independent(ops) {
		workers = commitParallel
	}
	return parallel.FirstError(len(chunks), workers, commitChunk)
}

// commitParallel is how many entries of a Commit of independent ops are
// proposed at once.
const commitParallel = 8

// independent reports whether ops are SetPartitions of distinct
// partitions, which no order of their entries changes the outcome of.
func independent(ops []coord.Op) bool {
	seen := make(map[coord.TopicPartition]bool, len(ops))
	for _, op := range ops {
		var st coord.PartitionState
		switch o := op.(type) {
		case coord.SetPartition:
			st = o.State
		case *coord.SetPartition:
			st = o.State
		default:
			return false
		}
		if seen[st.TopicPartition()] {
			return false
		}
		seen[st.TopicPartition()] = true
	}
	return true
}

// chunkOps splits ops into log entries of at most chunkWeight states, or
// statesPerEntry when the entry holds only SetPartitions.
func chunkOps(ops []coord.Op) ([][]wireOp, error) {
	var chunks [][]wireOp
	var cur []wireOp
	weight := 0
	onlySets := true
	for _, op := range ops {
		w, err := toWireOp(op)
		if err != nil {
			return nil, err
		}
		for _, part := range splitOp(w) {
			sets := onlySets && part.SetPartition != nil
			limit := chunkWeight
			if sets {
				limit = statesPerEntry
			}
			if len(cur) > 0 && weight+part.weight() > limit {
				chunks = append(chunks, cur)
				cur, weight = nil, 0
				sets = part.SetPartition != nil
			}
			cur = append(cur, part)
			weight += part.weight()
			onlySets = sets
		}
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks, nil
}

// splitOp splits a CreateTopic of more than chunkWeight partitions into a
// partial CreateTopic and SetPartitions creating the remaining states.
func splitOp(w wireOp) []wireOp {
	ct := w.CreateTopic
	if ct == nil || len(ct.States) <= chunkWeight || len(ct.States) != len(ct.Topic.Assignment) {
		return []wireOp{w}
	}
	parts := []wireOp{{CreateTopic: &coord.CreateTopic{Topic: ct.Topic, States: ct.States[:chunkWeight]}, Partial: true}}
	for i := chunkWeight; i < len(ct.States); i++ {
		st := ct.States[i]
		st.Topic, st.Partition = ct.Topic.Name, int32(i)
		parts = append(parts, wireOp{SetPartition: &coord.SetPartition{State: st, ExpectedEpoch: coord.NewPartition}})
	}
	return parts
}
