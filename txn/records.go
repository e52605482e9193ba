package txn

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// StateTopic is Kafka's internal topic of transactional ids' metadata.
const StateTopic = "__transaction_state"

// The key and value versions of __transaction_state records (Kafka's
// TransactionLogKey and TransactionLogValue schemas): Kafka 3.x writes
// value version 0; version 1, the first flexible one, adds tagged fields
// that this coordinator reads and does not write.
const (
	keyVersion      = 0
	valueVersion    = 0
	maxValueVersion = 1
)

// ErrUnknownVersion is a record of a key or value version Restore does not
// read; the loader skips it.
var ErrUnknownVersion = errors.New("unknown version")

// PartitionFor is the __transaction_state partition of transactionalID
// among partitions (transaction.state.log.num.partitions): Kafka's
// Utils.abs(hashCode) % partitions, the rule __consumer_offsets uses for
// groups. It panics if partitions is not positive.
func PartitionFor(transactionalID string, partitions int) int32 {
	return group.PartitionFor(transactionalID, partitions)
}

// RecordKey encodes the key of transactionalID's record.
func RecordKey(transactionalID string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: transactionalID}
	return k.AppendTo(nil)
}

// RecordValue encodes t as the value of its transactional id's record; a
// Dead transit is a tombstone (nil), which removes the id.
func RecordValue(t Transit) []byte {
	if t.State == Dead {
		return nil
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	v.TimeoutMillis = t.TimeoutMs
	v.State = kmsg.TransactionState(t.State)
	v.LastUpdateTimestamp, v.StartTimestamp = t.LastUpdateMs, t.StartMs
	if t.State != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range sortPartitions(append([]TopicPartition(nil), t.Partitions...)) {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
			}
			last := &v.Topics[len(v.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// DecodeKey reads a record key: the transactional id.
func DecodeKey(key []byte) (string, error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", fmt.Errorf("transaction state key: %w", err)
	}
	if k.Version != keyVersion {
		return "", fmt.Errorf("transaction state key version %d: %w", k.Version, ErrUnknownVersion)
	}
	return k.TransactionalID, nil
}

// Restore rebuilds the Metadata of transactionalID from the value of its
// latest record; a nil value (a tombstone) means the id is gone, and
// Restore returns nil. A transaction found in PrepareCommit or
// PrepareAbort still has markers to write.
func Restore(transactionalID string, value []byte) (*Metadata, error) {
	if value == nil {
		return nil, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("transaction state of %q: %w", transactionalID, err)
	}
	if v.Version < 0 || v.Version > maxValueVersion {
		return nil, fmt.Errorf("transaction state of %q, version %d: %w", transactionalID, v.Version, ErrUnknownVersion)
	}
	state := State(v.State)
	if !state.valid() || state == PrepareEpochFence {
		return nil, fmt.Errorf("transaction state of %q: status %d is not a stored state", transactionalID, v.State)
	}
	m := &Metadata{
		TransactionalID:   transactionalID,
		ProducerID:        v.ProducerID,
		LastProducerID:    v.ProducerID,
		ProducerEpoch:     v.ProducerEpoch,
		LastProducerEpoch: NoProducerEpoch,
		TimeoutMs:         v.TimeoutMillis,
		State:             state,
		Partitions:        map[TopicPartition]struct{}{},
		StartMs:           v.StartTimestamp,
		LastUpdateMs:      v.LastUpdateTimestamp,
	}
	if v.Version >= 1 && v.PreviousProducerID >= 0 {
		m.LastProducerID = v.PreviousProducerID
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions[TopicPartition{Topic: t.Topic, Partition: p}] = struct{}{}
		}
	}
	return m, nil
}
