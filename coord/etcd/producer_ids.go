package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// maxProducerIDConflicts bounds how many conflicting reservations one
// AllocateProducerIDs outlasts: each conflict is another broker's
// reservation succeeding, so the cluster progresses, but one caller gives
// up rather than loop without end.
const maxProducerIDConflicts = 1000

// producerIDBlockValue is the JSON of <prefix>/latest_producer_id_block,
// Kafka's /latest_producer_id_block (ProducerIdBlockZNode, version 1): the
// last block reserved, its ends inclusive and written as decimal strings.
type producerIDBlockValue struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

func encodeProducerIDBlock(b coord.ProducerIDBlock) string {
	data, _ := json.Marshal(producerIDBlockValue{
		Version:    1,
		Broker:     int32(b.Broker),
		BlockStart: strconv.FormatInt(b.First, 10),
		BlockEnd:   strconv.FormatInt(b.Last(), 10),
	})
	return string(data)
}

// nextProducerIDBlock returns the block after the one stored in kv (nil:
// none yet, the first block starts at 0).
func nextProducerIDBlock(kv *mvccpb.KeyValue, broker coord.BrokerID) (coord.ProducerIDBlock, error) {
	if kv == nil {
		return coord.NewProducerIDBlock(broker, 0)
	}
	var v producerIDBlockValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return coord.ProducerIDBlock{}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	if v.Version != 1 {
		return coord.ProducerIDBlock{}, fmt.Errorf("decode %s: version %d, want 1", kv.Key, v.Version)
	}
	end, err := strconv.ParseInt(v.BlockEnd, 10, 64)
	if err != nil {
		return coord.ProducerIDBlock{}, fmt.Errorf("decode %s: block_end %q is not a decimal int64", kv.Key, v.BlockEnd)
	}
	block, err := coord.NewProducerIDBlock(broker, end+1)
	if err != nil {
		return coord.ProducerIDBlock{}, fmt.Errorf("%s: %w", kv.Key, err)
	}
	return block, nil
}

// AllocateProducerIDs implements coord.ProducerIDAllocator. One transaction
// writes the next block if the key's ModRevision is still the one read
// (CreateRevision 0 while it is absent); when another reservation came
// first, its Else branch reads the key, and the next attempt builds on it.
// A transaction whose answer was lost is not repeated blindly: the retry's
// compare fails and the block is skipped. The transactions are guarded by
// the migration record.
func (b *Backend) AllocateProducerIDs(ctx context.Context, broker coord.BrokerID) (coord.ProducerIDBlock, error) {
	key := b.producerIDBlockKey()
	what := "allocate producer ids at " + key
	if b.isClosed() {
		return coord.ProducerIDBlock{}, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.writableRecord(ctx, what); err != nil {
		return coord.ProducerIDBlock{}, err
	}
	resp, err := b.client.Get(ctx, key)
	if err != nil {
		return coord.ProducerIDBlock{}, b.convertError(err, what)
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	for attempt := 0; attempt < maxProducerIDConflicts; attempt++ {
		if attempt > 0 {
			pause := time.NewTimer(rand.N(time.Duration(min(attempt, 10)) * time.Millisecond))
			select {
			case <-pause.C:
			case <-ctx.Done():
				pause.Stop()
				return coord.ProducerIDBlock{}, b.convertError(ctx.Err(), what)
			}
		}
		block, err := nextProducerIDBlock(kv, broker)
		if err != nil {
			return coord.ProducerIDBlock{}, err
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if kv != nil {
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		prev := kv
		tr, err := b.guardedTxn(ctx, what, []clientv3.Cmp{cmp},
			[]clientv3.Op{clientv3.OpPut(key, encodeProducerIDBlock(block))},
			[]clientv3.Op{clientv3.OpGet(key)},
			func(tr *clientv3.TxnResponse) bool {
				kvs := tr.Responses[0].GetResponseRange().GetKvs()
				if prev == nil {
					return len(kvs) > 0
				}
				return len(kvs) == 0 || kvs[0].ModRevision != prev.ModRevision
			})
		if err != nil {
			return coord.ProducerIDBlock{}, err
		}
		if tr.Succeeded {
			return block, nil
		}
		kv = nil
		if kvs := tr.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			kv = kvs[0]
		}
	}
	return coord.ProducerIDBlock{}, fmt.Errorf("%w: %s: %d conflicting reservations in a row",
		coord.ErrUnavailable, what, maxProducerIDConflicts)
}

// ProducerIDKey implements coord.ProducerIDAllocator. One transaction puts
// proposed at <prefix>/producer_id_key if the key was never created
// (CreateRevision 0), and otherwise reads it; either way the answer is the
// stored key. A transaction whose answer was lost is harmless: the retry
// reads what it stored. The put is guarded by the migration record; while
// the record refuses writes, a stored key is still returned.
func (b *Backend) ProducerIDKey(ctx context.Context, proposed []byte) ([]byte, error) {
	key := b.producerIDKeyKey()
	what := "producer id key at " + key
	if err := coord.CheckProducerIDKey("proposed for "+key, proposed); err != nil {
		return nil, err
	}
	if b.isClosed() {
		return nil, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	tr, err := b.guardedTxn(ctx, what, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(proposed))},
		[]clientv3.Op{clientv3.OpGet(key)},
		func(tr *clientv3.TxnResponse) bool { return len(tr.Responses[0].GetResponseRange().GetKvs()) > 0 })
	if errors.Is(err, coord.ErrMigrated) {
		// Only storing a new key is refused: a stored one is the answer.
		resp, gerr := b.client.Get(ctx, key)
		if gerr != nil {
			return nil, b.convertError(gerr, what)
		}
		if len(resp.Kvs) == 0 {
			return nil, err
		}
		if err := coord.CheckProducerIDKey(key, resp.Kvs[0].Value); err != nil {
			return nil, err
		}
		return resp.Kvs[0].Value, nil
	}
	if err != nil {
		return nil, err
	}
	if tr.Succeeded {
		return proposed, nil
	}
	kvs := tr.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, fmt.Errorf("%w: %s: created but not found", coord.ErrUnavailable, what)
	}
	if err := coord.CheckProducerIDKey(key, kvs[0].Value); err != nil {
		return nil, err
	}
	return kvs[0].Value, nil
}
