package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/replication/log"
)

// The key and value versions of __consumer_offsets records, as Kafka 2.3+
// writes them (Kafka's GroupMetadataManager and its generated
// OffsetCommitKey, OffsetCommitValue, GroupMetadataKey and
// GroupMetadataValue schemas).
const (
	// offsetKeyVersion is the key version of a committed offset; Kafka
	// reads versions 0 and 1 (the same schema) and writes 1.
	offsetKeyVersion = 1
	// groupKeyVersion is the key version of a group's metadata.
	groupKeyVersion = 2
	// offsetValueVersion is the value version Kafka writes for an offset
	// without an explicit expire timestamp; offsetValueExpireVersion the
	// one it writes for an offset with one (that version cannot hold a
	// leader epoch).
	offsetValueVersion       = 3
	offsetValueExpireVersion = 1
	// maxOffsetValueVersion is the newest offset value version read.
	maxOffsetValueVersion = 4
	// groupValueVersion is the value version of group metadata written.
	groupValueVersion = 3
	// maxGroupValueVersion is the newest group value version read.
	maxGroupValueVersion = 4
)

// ErrUnknownVersion is a record key or value of a version DecodeRecord does
// not read: a key of one of the record types Kafka 3.7+'s new group
// coordinator writes for consumer (KIP-848) or share groups, or a value
// newer than Kafka 4.1's. The loader skips such records.
var ErrUnknownVersion = errors.New("unknown version")

// OffsetKey names one committed offset: a group's offset of one partition.
type OffsetKey struct {
	Group, Topic string
	Partition    int32
}

// Offset is a committed offset.
type Offset struct {
	// Offset is the offset committed: the next record the group consumes.
	Offset int64
	// LeaderEpoch is the leader epoch of the record before Offset, as the
	// committer saw it (KIP-320); -1 if unknown.
	LeaderEpoch int32
	// Metadata is the committer's string, stored as given.
	Metadata string
	// CommitTimestamp is when the coordinator took the commit, in ms
	// since the epoch.
	CommitTimestamp int64
	// ExpireTimestamp is when the offset expires, in ms since the epoch;
	// -1 (any negative value) if none. Only OffsetCommit v1 with an
	// explicit retention sets it.
	ExpireTimestamp int64
}

// OffsetRecordKey encodes the __consumer_offsets key of k: an
// OffsetCommitKey, version 1.
func OffsetRecordKey(k OffsetKey) []byte {
	key := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: k.Group, Topic: k.Topic, Partition: k.Partition}
	return key.AppendTo(nil)
}

// OffsetRecordValue encodes the __consumer_offsets value of o: an
// OffsetCommitValue of version 3 when o has no ExpireTimestamp (negative),
// else of version 1, as Kafka picks. Version 1 has no leader epoch: o's is
// dropped, as Kafka drops it.
func OffsetRecordValue(o Offset) []byte {
	value := kmsg.OffsetCommitValue{
		Version:         offsetValueVersion,
		Offset:          o.Offset,
		LeaderEpoch:     o.LeaderEpoch,
		Metadata:        o.Metadata,
		CommitTimestamp: o.CommitTimestamp,
	}
	if o.ExpireTimestamp >= 0 {
		value.Version = offsetValueExpireVersion
		value.ExpireTimestamp = o.ExpireTimestamp
	}
	return value.AppendTo(nil)
}

// GroupRecordKey encodes the __consumer_offsets key of group's metadata: a
// GroupMetadataKey, version 2.
func GroupRecordKey(group string) []byte {
	key := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return key.AppendTo(nil)
}

// GroupRecordValue encodes v as a GroupMetadataValue of version 3; it sets
// v.Version to 3.
func GroupRecordValue(v *kmsg.GroupMetadataValue) []byte {
	v.Version = groupValueVersion
	return v.AppendTo(nil)
}

// Record is one decoded __consumer_offsets record: either a committed
// offset (OffsetKey set; OffsetValue nil for a tombstone, which deletes the
// offset) or a group's metadata (Group set; GroupValue nil for a
// tombstone, which deletes the group).
type Record struct {
	// OffsetKey and OffsetValue are an offset record's key and value.
	OffsetKey   *OffsetKey
	OffsetValue *Offset
	// Group and GroupValue are a group metadata record's group and value.
	Group      string
	GroupValue *kmsg.GroupMetadataValue
}

// DecodeRecord decodes a __consumer_offsets record's key and value of any
// version Kafka's classic group coordinator writes: an offset key of
// version 0 or 1 with a value of version 0 to 4, or a group key of version
// 2 with a value of version 0 to 4. A nil or empty value is a tombstone.
// Fields an older value lacks read as Kafka reads them: LeaderEpoch and
// ExpireTimestamp -1, a group's CurrentStateTimestamp -1, and a version 0
// member's rebalance timeout its session timeout. A key or value of
// another version is an error wrapping ErrUnknownVersion and naming the
// version. The Record shares no memory with key or value.
func DecodeRecord(key, value []byte) (Record, error) {
	version, ok := peekVersion(key)
	if !ok {
		return Record{}, fmt.Errorf("decode %s key: %d bytes, too short for a version", OffsetsTopic, len(key))
	}
	switch version {
	case 0, offsetKeyVersion:
		return decodeOffset(key, value)
	case groupKeyVersion:
		return decodeGroup(key, value)
	}
	return Record{}, fmt.Errorf("decode %s key: version %d: %w", OffsetsTopic, version, ErrUnknownVersion)
}

// peekVersion returns the int16 version b starts with, and false if b is
// too short to hold one.
func peekVersion(b []byte) (int16, bool) {
	if len(b) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(b)), true
}

// decodeOffset decodes an offset record's key and value.
func decodeOffset(key, value []byte) (Record, error) {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil {
		return Record{}, fmt.Errorf("decode %s offset key: %w", OffsetsTopic, err)
	}
	rec := Record{OffsetKey: &OffsetKey{Group: k.Group, Topic: k.Topic, Partition: k.Partition}}
	if len(value) == 0 {
		return rec, nil
	}
	where := fmt.Sprintf("group %q topic %q partition %d", k.Group, k.Topic, k.Partition)
	version, ok := peekVersion(value)
	switch {
	case !ok:
		return Record{}, fmt.Errorf("decode %s offset value of %s: %d bytes, too short for a version", OffsetsTopic, where, len(value))
	case version < 0 || version > maxOffsetValueVersion:
		return Record{}, fmt.Errorf("decode %s offset value of %s: version %d: %w", OffsetsTopic, where, version, ErrUnknownVersion)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return Record{}, fmt.Errorf("decode %s offset value of %s: version %d: %w", OffsetsTopic, where, version, err)
	}
	o := &Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
	if v.Version >= 3 {
		o.LeaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.ExpireTimestamp = v.ExpireTimestamp
	}
	rec.OffsetValue = o
	return rec, nil
}

// decodeGroup decodes a group metadata record's key and value.
func decodeGroup(key, value []byte) (Record, error) {
	var k kmsg.GroupMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return Record{}, fmt.Errorf("decode %s group key: %w", OffsetsTopic, err)
	}
	rec := Record{Group: k.Group}
	if len(value) == 0 {
		return rec, nil
	}
	version, ok := peekVersion(value)
	switch {
	case !ok:
		return Record{}, fmt.Errorf("decode %s group value of group %q: %d bytes, too short for a version", OffsetsTopic, k.Group, len(value))
	case version < 0 || version > maxGroupValueVersion:
		return Record{}, fmt.Errorf("decode %s group value of group %q: version %d: %w", OffsetsTopic, k.Group, version, ErrUnknownVersion)
	}
	v := new(kmsg.GroupMetadataValue)
	// kmsg's byte fields (subscriptions, assignments) alias what they are
	// read from: read from a copy the Record owns.
	if err := v.ReadFrom(bytes.Clone(value)); err != nil {
		return Record{}, fmt.Errorf("decode %s group value of group %q: version %d: %w", OffsetsTopic, k.Group, version, err)
	}
	if v.Version == 0 {
		for i := range v.Members {
			v.Members[i].RebalanceTimeoutMillis = v.Members[i].SessionTimeoutMillis
		}
	}
	rec.GroupValue = v
	return rec, nil
}

// KV is one record to write; a nil Value is a tombstone.
type KV = log.KV

// EncodeBatch builds one uncompressed v2 record batch of kvs, as the
// coordinator appends it to its __consumer_offsets partition (see
// log.BuildBatch); with no kvs it returns nil.
func EncodeBatch(kvs []KV, now time.Time) []byte { return log.BuildBatch(kvs, now) }

// EncodeTxnBatch is EncodeBatch for the offsets of a TxnOffsetCommit: a
// transactional batch of the transaction's producer id and epoch (see
// log.BuildTxnBatch).
func EncodeTxnBatch(kvs []KV, now time.Time, producerID int64, producerEpoch int16) []byte {
	return log.BuildTxnBatch(kvs, now, producerID, producerEpoch)
}

// EachRecord walks the records of the v2 batches in records, as read from
// a __consumer_offsets partition, calling fn with each record's offset,
// key and value (nil for a tombstone); see log.EachRecord. Compressed
// batches are read too, control batches skipped.
func EachRecord(records []byte, fn func(offset int64, key, value []byte) error) error {
	return log.EachRecord(records, fn)
}

// EachBatchRecord walks the v2 batches of records, as read from a
// __consumer_offsets partition: batch is called with each batch's header
// and, for a control batch, its transaction marker; then record with each
// record of a batch that is not a control batch, as EachRecord calls it.
// A truncated batch at the end (a read cut short) ends the walk. Errors
// are the log's, naming the batch.
func EachBatchRecord(records []byte, batch func(h log.BatchInfo, m *log.Marker), record func(offset int64, key, value []byte) error) error {
	for len(records) >= batchFramingSize {
		size := batchFramingSize + int(int32(binary.BigEndian.Uint32(records[8:12])))
		if size <= batchFramingSize || size > len(records) {
			return nil
		}
		one := records[:size]
		records = records[size:]
		var h log.BatchInfo
		if err := log.EachBatch(one, false, func(bi log.BatchInfo) { h = bi }); err != nil {
			return err
		}
		if h.Attributes&attrControl != 0 {
			m, err := log.ReadMarker(one)
			if err != nil {
				return err
			}
			batch(h, &m)
			continue
		}
		batch(h, nil)
		if err := log.EachRecord(one, record); err != nil {
			return err
		}
	}
	return nil
}

// Transactional reports whether a batch belongs to a transaction: the
// offsets a TxnOffsetCommit wrote, which its marker decides.
func Transactional(h log.BatchInfo) bool {
	return h.Attributes&attrTransactional != 0 && h.ProducerID >= 0
}

// The v2 batch framing (base offset int64, batch length int32) and the
// attribute bits the loader reads.
const (
	batchFramingSize  = 8 + 4
	attrTransactional = 0x10
	attrControl       = 0x20
)

// NextOffset returns the offset after the last complete batch of records,
// where a loader reading in chunks reads on; see log.NextOffset.
func NextOffset(records []byte) (int64, bool) { return log.NextOffset(records) }
