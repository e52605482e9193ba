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
