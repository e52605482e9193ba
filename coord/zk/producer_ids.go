package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// maxProducerIDConflicts bounds how many conflicting writes of
// /latest_producer_id_block one AllocateProducerIDs outlasts: each conflict
// is another broker's reservation succeeding, so the cluster progresses,
// but one caller gives up rather than loop without end.
const maxProducerIDConflicts = 1000

// producerIDBlockZNode is the JSON of /latest_producer_id_block exactly as
// Kafka's ZkProducerIdManager writes it (ProducerIdBlockZNode, version 1):
// the last block reserved, its ends inclusive and written as decimal
// strings.
type producerIDBlockZNode struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

func encodeProducerIDBlock(b coord.ProducerIDBlock) []byte {
	data, _ := json.Marshal(producerIDBlockZNode{
		Version:    1,
		Broker:     int32(b.Broker),
		BlockStart: strconv.FormatInt(b.First, 10),
		BlockEnd:   strconv.FormatInt(b.Last(), 10),
	})
	return data
}

// decodeProducerIDBlock reads the last reserved block's end: the next block
// starts after it.
func decodeProducerIDBlock(path string, data []byte) (blockEnd int64, err error) {
	var z producerIDBlockZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return 0, fmt.Errorf("decode %s: %w", path, err)
	}
	if z.Version != 1 {
		return 0, fmt.Errorf("decode %s: version %d, want 1", path, z.Version)
	}
	end, err := strconv.ParseInt(z.BlockEnd, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decode %s: block_end %q is not a decimal int64", path, z.BlockEnd)
	}
	return end, nil
}

// producerIDBlockPath is Kafka's /latest_producer_id_block under the chroot.
func (b *Backend) producerIDBlockPath() string { return b.path("/latest_producer_id_block") }

// AllocateProducerIDs implements coord.ProducerIDAllocator. It reads
// /latest_producer_id_block with its version and writes the next block with
// a version check (creates it when absent), as Kafka's ZkProducerIdManager
// does, again after a conflict. A write whose answer was lost is not
// repeated blindly: the retry's version check fails and the next read skips
// the block. The write goes behind the migration record's guard.
func (b *Backend) AllocateProducerIDs(ctx context.Context, broker coord.BrokerID) (coord.ProducerIDBlock, error) {
	path := b.producerIDBlockPath()
	if err := b.ensureBase(ctx); err != nil {
		return coord.ProducerIDBlock{}, err
	}
	what := "allocate producer ids at " + path
	for attempt := 0; attempt < maxProducerIDConflicts; attempt++ {
		if attempt > 0 && !wait(ctx, b.closing, rand.N(time.Duration(min(attempt, 10))*time.Millisecond)) {
			if ctx.Err() != nil {
				return coord.ProducerIDBlock{}, ctx.Err()
			}
			return coord.ProducerIDBlock{}, fmt.Errorf("%w: allocate producer ids at %s", coord.ErrClosed, path)
		}
		var block coord.ProducerIDBlock
		conflict := false
		err := b.do(ctx, path, func(c *zk.Conn) error {
			conflict = false
			data, stat, err := c.Get(path)
			version := int32(-1)
			first := int64(0)
			switch {
			case errors.Is(err, zk.ErrNoNode):
			case err != nil:
				return err
			default:
				end, err := decodeProducerIDBlock(path, data)
				if err != nil {
					return err
				}
				version, first = stat.Version, end+1
			}
			if block, err = coord.NewProducerIDBlock(broker, first); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if version < 0 {
				_, err = b.guardedMulti(c, what, &zk.CreateRequest{Path: path, Data: encodeProducerIDBlock(block), Acl: b.aclFor(path)})
			} else {
				_, err = b.guardedMulti(c, what, &zk.SetDataRequest{Path: path, Data: encodeProducerIDBlock(block), Version: version})
			}
			if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) {
				conflict = true
				return nil
			}
			return err
		})
		if err != nil {
			return coord.ProducerIDBlock{}, convertError(err, what)
		}
		if !conflict {
			return block, nil
		}
	}
	return coord.ProducerIDBlock{}, fmt.Errorf("%w: allocate producer ids at %s: %d conflicting writes in a row",
		coord.ErrUnavailable, path, maxProducerIDConflicts)
}

// producerIDKeyPath is the znode of the cluster's producer id key under the
// chroot; like the SCRAM credentials, only the brokers may read it when
// zookeeper.set.acl is on (aclFor).
func (b *Backend) producerIDKeyPath() string { return b.path("/producer_id_key") }

// ProducerIDKey implements coord.ProducerIDAllocator. It reads
// /producer_id_key and, when absent, creates it with proposed behind the
// migration record's guard; a create that loses to another broker's reads
// the winner's. A create whose answer was lost is harmless: the retry
// finds the node and reads it.
func (b *Backend) ProducerIDKey(ctx context.Context, proposed []byte) ([]byte, error) {
	path := b.producerIDKeyPath()
	if err := coord.CheckProducerIDKey("proposed for "+path, proposed); err != nil {
		return nil, err
	}
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	var key []byte
	err := b.do(ctx, path, func(c *zk.Conn) error {
		data, _, err := c.Get(path)
		if err == nil {
			key = data
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		_, err = b.guardedMulti(c, "store the producer id key at "+path, &zk.CreateRequest{Path: path, Data: proposed, Acl: b.aclFor(path)})
		if err == nil {
			key = proposed
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		key, _, err = c.Get(path)
		return err
	})
	if err != nil {
		return nil, convertError(err, "producer id key at "+path)
	}
	if err := coord.CheckProducerIDKey(path, key); err != nil {
		return nil, err
	}
	return key, nil
}
