package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
type KV struct {
	Key, Value []byte
}

// The v2 record batch header, field by field (Kafka's DefaultRecordBatch).
// replication/log has the same constants but does not export them.
const (
	fieldBaseOffset      = 0  // int64
	fieldBatchLength     = 8  // int32: bytes after this field
	fieldLeaderEpoch     = 12 // int32: partitionLeaderEpoch
	fieldMagic           = 16 // int8
	fieldCRC             = 17 // uint32: CRC-32C of attributes..end
	fieldAttributes      = 21 // int16
	fieldLastOffsetDelta = 23 // int32
	fieldFirstTimestamp  = 27 // int64
	fieldMaxTimestamp    = 35 // int64
	fieldProducerID      = 43 // int64
	fieldProducerEpoch   = 51 // int16
	fieldBaseSequence    = 53 // int32
	fieldRecordCount     = 57 // int32

	// batchHeaderSize is the size of a v2 batch without its records.
	batchHeaderSize = 61
	// batchLengthOverhead is the bytes before the records that
	// batchLength does not count (baseOffset and batchLength itself).
	batchLengthOverhead = 12
	// magicV2 is the record batch format written and read.
	magicV2 = 2

	// attrCodecMask selects a batch's compression codec from its
	// attributes; attrControl marks a control batch (transaction markers).
	attrCodecMask = 0x07
	attrControl   = 0x20
)

// castagnoli is the CRC-32C table of the v2 batch checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBatch builds one uncompressed magic-2 record batch of kvs, as the
// coordinator appends it to its __consumer_offsets partition: base offset 0
// (the log assigns offsets), partition leader epoch 0 (the leader stamps
// it), CreateTime timestamps of now (ms) as first and max timestamp, no
// producer (id -1, epoch -1, base sequence -1), and a CRC-32C over
// attributes..end. Record i has offset delta i, timestamp delta 0 and no
// headers; a nil key or value is written with length -1. With no kvs it
// returns nil: a batch holds at least one record.
func EncodeBatch(kvs []KV, now time.Time) []byte {
	if len(kvs) == 0 {
		return nil
	}
	size := batchHeaderSize
	for _, kv := range kvs {
		size += len(kv.Key) + len(kv.Value) + 5*binary.MaxVarintLen64 + 1
	}
	b := make([]byte, batchHeaderSize, size)
	var body []byte
	for i, kv := range kvs {
		body = append(body[:0], 0)          // attributes
		body = binary.AppendVarint(body, 0) // timestamp delta
		body = binary.AppendVarint(body, int64(i))
		body = appendVarintBytes(body, kv.Key)
		body = appendVarintBytes(body, kv.Value)
		body = binary.AppendVarint(body, 0) // headers
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	ts := uint64(now.UnixMilli())
	be := binary.BigEndian
	be.PutUint64(b[fieldBaseOffset:], 0)
	be.PutUint32(b[fieldBatchLength:], uint32(len(b)-batchLengthOverhead))
	be.PutUint32(b[fieldLeaderEpoch:], 0)
	b[fieldMagic] = magicV2
	be.PutUint16(b[fieldAttributes:], 0)
	be.PutUint32(b[fieldLastOffsetDelta:], uint32(len(kvs)-1))
	be.PutUint64(b[fieldFirstTimestamp:], ts)
	be.PutUint64(b[fieldMaxTimestamp:], ts)
	be.PutUint64(b[fieldProducerID:], ^uint64(0))
	be.PutUint16(b[fieldProducerEpoch:], ^uint16(0))
	be.PutUint32(b[fieldBaseSequence:], ^uint32(0))
	be.PutUint32(b[fieldRecordCount:], uint32(len(kvs)))
	be.PutUint32(b[fieldCRC:], crc32.Checksum(b[fieldAttributes:], castagnoli))
	return b
}

// appendVarintBytes appends p with its varint length, -1 for nil.
func appendVarintBytes(dst, p []byte) []byte {
	if p == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(p))), p...)
}

// EachRecord walks the records of the magic-2 batches in records, as read
// from a log: several concatenated batches, possibly ending with a
// truncated batch, which is ignored (NextOffset says where to read on). It
// calls fn with each record's absolute offset (base offset plus offset
// delta), key and value (nil for a tombstone); key and value alias records,
// so fn copies what it keeps. Control batches are skipped. The records of
// a transactional batch are passed like any other (tripod writes none;
// applying one depends on its transaction's marker, which this walk does
// not track).
//
// Every complete batch is checked as replication/log checks an append,
// CRC-32C included, before fn sees any record; such errors wrap
// log.ErrCorruptMessage or log.ErrUnsupportedMagic, and so does a record
// that does not parse. A compressed batch is an error naming its offset
// and codec: replication/log exports no decompressor. EachRecord stops at
// the first error fn returns and returns it unwrapped.
func EachRecord(records []byte, fn func(offset int64, key, value []byte) error) error {
	complete := completeBatches(records)
	if complete == 0 {
		return nil
	}
	var batches []log.BatchInfo
	if err := log.EachBatch(records[:complete], true, func(b log.BatchInfo) { batches = append(batches, b) }); err != nil {
		return fmt.Errorf("read %s batches: %w", OffsetsTopic, err)
	}
	pos := 0
	for _, info := range batches {
		size := batchSize(records[pos:])
		batch := records[pos : pos+size]
		pos += size
		if info.Attributes&attrControl != 0 {
			continue
		}
		if codec := info.Attributes & attrCodecMask; codec != 0 {
			return fmt.Errorf("read %s batch at offset %d: compressed with codec %d, and replication/log exports no decompressor", OffsetsTopic, info.BaseOffset, codec)
		}
		if err := eachBatchRecord(info.BaseOffset, batch, fn); err != nil {
			return err
		}
	}
	return nil
}

// NextOffset returns the offset after the last complete batch of records
// (its base offset plus last offset delta plus one), and false if records
// holds no complete batch. A loader reading __consumer_offsets in chunks
// reads on from it rather than from the last offset EachRecord passed fn:
// a batch of control records, or one compaction emptied, passes fn none of
// its offsets. It reads only the batches' framing; EachRecord checks them.
func NextOffset(records []byte) (int64, bool) {
	complete := completeBatches(records)
	last := -1
	for pos := 0; pos < complete; {
		size := batchSize(records[pos:])
		if size < batchHeaderSize || pos+size > complete {
			break
		}
		last = pos
		pos += size
	}
	if last < 0 {
		return 0, false
	}
	b := records[last:]
	base := int64(binary.BigEndian.Uint64(b[fieldBaseOffset:]))
	delta := int64(int32(binary.BigEndian.Uint32(b[fieldLastOffsetDelta:])))
	return base + delta + 1, true
}

// batchSize is the size of the batch b starts with, batchLength included,
// as its header declares it; b holds at least batchLengthOverhead bytes.
func batchSize(b []byte) int {
	return int(int32(binary.BigEndian.Uint32(b[fieldBatchLength:]))) + batchLengthOverhead
}

// completeBatches returns how many bytes of records the batches that are
// all there take: it stops before a last batch whose framing
// (baseOffset and batchLength) or declared length runs past the end. A
// batch whose declared length cannot frame a batch is not a truncation:
// the rest of records is included, for log.EachBatch to report.
func completeBatches(records []byte) int {
	pos := 0
	for len(records)-pos >= batchLengthOverhead {
		size := batchSize(records[pos:])
		switch {
		case size < batchHeaderSize:
			return len(records)
		case size > len(records)-pos:
			return pos
		}
		pos += size
	}
	return pos
}

// eachBatchRecord calls fn with each record of the uncompressed v2 batch
// batch, whose framing log.EachBatch has checked.
func eachBatchRecord(baseOffset int64, batch []byte, fn func(offset int64, key, value []byte) error) error {
	count := int32(binary.BigEndian.Uint32(batch[fieldRecordCount:]))
	rest := batch[batchHeaderSize:]
	for i := range count {
		length, n := binary.Varint(rest)
		if n <= 0 || length < 0 || length > int64(len(rest)-n) {
			return corruptRecord(baseOffset, i, "length does not fit the batch")
		}
		r := recordReader{b: rest[n : n+int(length)], ok: true}
		rest = rest[n+int(length):]
		r.skip(1)  // attributes
		r.varint() // timestamp delta
		delta := r.varint()
		key := r.bytes()
		value := r.bytes()
		for h := r.varint(); h > 0 && r.ok; h-- {
			r.bytes() // header key
			r.bytes() // header value
		}
		switch {
		case !r.ok:
			return corruptRecord(baseOffset, i, "fields run past its length")
		case len(r.b) != 0:
			return corruptRecord(baseOffset, i, fmt.Sprintf("%d bytes after its fields", len(r.b)))
		}
		if err := fn(baseOffset+delta, key, value); err != nil {
			return err
		}
	}
	if len(rest) != 0 {
		return corruptRecord(baseOffset, count, fmt.Sprintf("%d bytes after the %d records the header counts", len(rest), count))
	}
	return nil
}

// corruptRecord is the error of record i of the batch at baseOffset.
func corruptRecord(baseOffset int64, i int32, detail string) error {
	return fmt.Errorf("%w: %s batch at offset %d: record %d: %s", log.ErrCorruptMessage, OffsetsTopic, baseOffset, i, detail)
}

// recordReader reads a v2 record's fields; ok turns false, for good, at
// the first field that runs past b.
type recordReader struct {
	b  []byte
	ok bool
}

// skip drops n bytes.
func (r *recordReader) skip(n int) {
	if len(r.b) < n {
		r.b, r.ok = nil, false
		return
	}
	r.b = r.b[n:]
}

// varint reads a zigzag varint.
func (r *recordReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.b, r.ok = nil, false
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a varint length and that many bytes; a length of -1 is nil.
func (r *recordReader) bytes() []byte {
	n := r.varint()
	switch {
	case !r.ok:
		return nil
	case n == -1:
		return nil
	case n < 0 || n > int64(len(r.b)):
		r.b, r.ok = nil, false
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}
