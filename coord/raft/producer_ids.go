package raft

import (
	"context"
	"fmt"

	"github.com/tripodmq/tripod/coord"
)

// AllocateProducerIDs implements coord.ProducerIDAllocator. The reservation
// is one allocate_producer_ids log entry, which advances the state
// machine's next producer id by a block and returns the block; a follower
// forwards it to the leader as it forwards Register. An entry whose answer
// is lost (ctx ended, the leader moved) may still be applied: its block is
// skipped, since every later entry starts above it.
func (b *Backend) AllocateProducerIDs(ctx context.Context, broker coord.BrokerID) (coord.ProducerIDBlock, error) {
	what := fmt.Sprintf("allocate producer ids for broker %d", broker)
	res, err := b.apply(ctx, what, &command{Type: cmdAllocateProducerIDs, Broker: coord.Broker{ID: broker}})
	if err != nil {
		return coord.ProducerIDBlock{}, err
	}
	return res.ProducerIDs, nil
}

// ProducerIDKey implements coord.ProducerIDAllocator. A key this node's
// state machine holds is final and returned at once; otherwise one
// producer_id_key log entry stores proposed unless an earlier entry stored
// a key, and returns the stored key; a follower forwards it to the leader
// as it forwards AllocateProducerIDs. An entry whose answer was lost is
// harmless: the retry's entry returns what the first stored.
func (b *Backend) ProducerIDKey(ctx context.Context, proposed []byte) ([]byte, error) {
	what := "producer id key"
	if err := coord.CheckProducerIDKey("proposed to the raft log", proposed); err != nil {
		return nil, err
	}
	if b.isClosed() {
		return nil, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	if key := b.fsm.producerIDKey(); len(key) > 0 {
		return key, nil
	}
	res, err := b.apply(ctx, what, &command{Type: cmdProducerIDKey, Key: proposed})
	if err != nil {
		return nil, err
	}
	if err := coord.CheckProducerIDKey("the raft log", res.ProducerIDKey); err != nil {
		return nil, err
	}
	return res.ProducerIDKey, nil
}
