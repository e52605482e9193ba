package zk

import (
	"context"

	"github.com/tripodmq/tripod/coord"
)

// StandbyLoads returns how many Loads of b the standby view served.
func StandbyLoads(b *Backend) uint64 {
	if s := b.currentStandby(); s != nil {
		return s.served.Load()
	}
	return 0
}

// CommitWaves returns how a Commit of ops (no DeleteTopic: it reads
// ZooKeeper) would send its chunks: the waves of chunk indexes, and how
// many chunks there are.
func CommitWaves(b *Backend, ops ...coord.Op) ([][]int, int, error) {
	units, err := b.buildUnits(context.Background(), nil, ops)
	if err != nil {
		return nil, 0, err
	}
	chunks := chunkUnits(units)
	return b.commitWaves(chunks), len(chunks), nil
}
