package group

import (
	"cmp"
	"maps"
	"slices"
)

// TxnOffsets holds the offsets that open transactions committed with
// TxnOffsetCommit (KIP-98, KIP-447) to one __consumer_offsets partition:
// written to the partition as transactional records of the producer's id,
// they become the group's committed offsets only when the transaction's
// commit marker is written there, and an abort marker drops them. Until
// then an OffsetFetch with require_stable answers their partitions
// UNSTABLE_OFFSET_COMMIT (Kafka's GroupMetadata.pendingTransactionalOffsetCommits).
// It is not safe for concurrent use.
type TxnOffsets struct {
	// byProducer maps a producer id to the offsets its open transaction
	// committed, each with the log offset of its record.
	byProducer map[int64]map[OffsetKey]TxnOffset
	// pending counts, per group topic and partition, the producers with
	// an offset pending for it.
	pending map[OffsetKey]int
}

// TxnOffset is one offset a transaction committed, with the log offset of
// the record that holds it.
type TxnOffset struct {
	Offset
	LogOffset int64
}

// NewTxnOffsets returns a TxnOffsets with nothing pending.
func NewTxnOffsets() *TxnOffsets {
	return &TxnOffsets{byProducer: map[int64]map[OffsetKey]TxnOffset{}, pending: map[OffsetKey]int{}}
}

// Add records an offset producerID's transaction committed, written at
// logOffset. A later commit of the same key in the same transaction
// replaces the earlier one, as the later record does.
func (t *TxnOffsets) Add(producerID int64, k OffsetKey, v Offset, logOffset int64) {
	offsets := t.byProducer[producerID]
	if offsets == nil {
		offsets = map[OffsetKey]TxnOffset{}
		t.byProducer[producerID] = offsets
	}
	if _, ok := offsets[k]; !ok {
		t.pending[k]++
	}
	offsets[k] = TxnOffset{Offset: v, LogOffset: logOffset}
}

// Complete ends producerID's transaction as its marker says: with commit,
// it returns the offsets to apply, by key; with abort, nil. Either way
// nothing of the producer stays pending. A marker of a producer with
// nothing pending returns nil.
func (t *TxnOffsets) Complete(producerID int64, commit bool) []TxnCommitted {
	offsets, ok := t.byProducer[producerID]
	if !ok {
		return nil
	}
	delete(t.byProducer, producerID)
	var out []TxnCommitted
	for k, v := range offsets {
		if t.pending[k]--; t.pending[k] <= 0 {
			delete(t.pending, k)
		}
		if commit {
			out = append(out, TxnCommitted{Key: k, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b TxnCommitted) int {
		return cmp.Or(cmp.Compare(a.Value.LogOffset, b.Value.LogOffset), compareOffsetKeys(a.Key, b.Key))
	})
	return out
}

// TxnCommitted is an offset a committed transaction made the group's.
type TxnCommitted struct {
	Key   OffsetKey
	Value TxnOffset
}

// Pending reports whether an open transaction committed an offset of
// group's topic partition.
func (t *TxnOffsets) Pending(k OffsetKey) bool { return t.pending[k] > 0 }

// GroupPending reports whether an open transaction committed any offset
// of group (Kafka refuses to delete such a group).
func (t *TxnOffsets) GroupPending(group string) bool {
	for k := range t.pending {
		if k.Group == group {
			return true
		}
	}
	return false
}

// Producers returns the producer ids with offsets pending, sorted.
func (t *TxnOffsets) Producers() []int64 { return slices.Sorted(maps.Keys(t.byProducer)) }
