package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// KV is one record of a batch BuildBatch makes; a nil Key or Value is
// written as null (a nil Value is a tombstone).
type KV struct {
	Key, Value []byte
}

// BuildBatch returns one uncompressed v2 record batch of kvs, as a broker
// that writes records of its own appends them (the group coordinator to
// __consumer_offsets): base offset 0 and partition leader epoch 0 (Append
// sets both), CreateTime timestamps of now (ms) as first and max
// timestamp, no producer (id -1, epoch -1, base sequence -1), and its
// CRC-32C. Record i has offset delta i, timestamp delta 0 and no headers.
// With no kvs it returns nil: a batch holds at least one record.
func BuildBatch(kvs []KV, now time.Time) []byte {
	return buildBatchAs(kvs, now, 0, -1, -1)
}

// BuildTxnBatch is BuildBatch for records a coordinator writes on behalf
// of a transaction (the offsets of a TxnOffsetCommit): the batch carries
// the transactional attribute and the transaction's producer id and
// epoch, and no sequence (-1), as Kafka's coordinator writes them; the
// transaction's marker on the same partition decides them.
func BuildTxnBatch(kvs []KV, now time.Time, producerID int64, producerEpoch int16) []byte {
	return buildBatchAs(kvs, now, attrTransactional, producerID, producerEpoch)
}

// buildBatchAs is BuildBatch with the batch's attributes and producer.
func buildBatchAs(kvs []KV, now time.Time, attributes int16, producerID int64, producerEpoch int16) []byte {
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
	be.PutUint32(b[fieldBatchLength:], uint32(len(b)-batchLengthOverhead))
	b[fieldMagic] = magicV2
	be.PutUint32(b[fieldLastOffsetDelta:], uint32(len(kvs)-1))
	be.PutUint64(b[fieldBaseTimestamp:], ts)
	be.PutUint64(b[fieldMaxTimestamp:], ts)
	be.PutUint16(b[fieldAttributes:], uint16(attributes))
	be.PutUint64(b[fieldProducerID:], uint64(producerID))
	be.PutUint16(b[fieldProducerEpoch:], uint16(producerEpoch))
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

// EachRecord calls fn with the offset, key and value (nil when null) of
// every record of the v2 batches in records, as a Read returns them:
// whole batches, of which a last one cut short is ignored (NextOffset
// says where to read on). Compressed batches are decompressed; control
// batches are skipped. Every complete batch is checked as Append checks
// it, CRC-32C included, before fn sees a record; errors wrap
// ErrCorruptMessage or ErrUnsupportedMagic. Key and value alias records
// (or the decompressed records), so fn copies what it keeps. EachRecord
// stops at the first error fn returns and returns it.
func EachRecord(records []byte, fn func(offset int64, key, value []byte) error) error {
	complete := completeBatches(records)
	if complete == 0 {
		return nil
	}
	var headers []batchHeader
	if err := walkBatches(records[:complete], true, func(h batchHeader, _ []byte) *batchError {
		headers = append(headers, h)
		return nil
	}); err != nil {
		return err
	}
	pos := 0
	for _, h := range headers {
		raw := records[pos : pos+int(h.size)]
		pos += int(h.size)
		if h.attributes&attrControl != 0 {
			continue
		}
		var fnErr error
		err := eachRecord(raw, h, func(offset int64, r parsedRecord) {
			if fnErr != nil {
				return
			}
			var key []byte
			if r.hasKey {
				key = r.key
			}
			fnErr = fn(offset, key, r.value)
		})
		if fnErr != nil {
			return fnErr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parsedRecord is a v2 record as parseRecord reads it, for the cleaner,
// EachRecord and the search by timestamp.
type parsedRecord struct {
	// raw is the whole record, its length varint included.
	raw []byte
	// key is the record's key, if hasKey; value is its value, if
	// hasValue (clear for a tombstone).
	key, value       []byte
	hasKey, hasValue bool
}

// eachRecord calls fn with each record of the batch raw (header h) and
// its offset, decompressing the records first if need be.
func eachRecord(raw []byte, h batchHeader, fn func(offset int64, r parsedRecord)) error {
	records, _, err := decompress(h.attributes&codecMask, raw[batchHeaderSize:h.size])
	if err != nil {
		return corrupt("batch at offset %d: %v", h.baseOffset, err)
	}
	return walkRecords(records, h, fn)
}

// walkRecords parses the h.recordCount records of records and calls fn
// with each.
func walkRecords(records []byte, h batchHeader, fn func(offset int64, r parsedRecord)) error {
	for i := int32(0); i < h.recordCount; i++ {
		r, offsetDelta, rest, err := parseRecord(records)
		if err != nil {
			return corrupt("batch at offset %d: record %d: %v", h.baseOffset, i, err)
		}
		fn(h.baseOffset+int64(offsetDelta), r)
		records = rest
	}
	if len(records) != 0 {
		return corrupt("batch at offset %d: %d bytes after its %d records", h.baseOffset, len(records), h.recordCount)
	}
	return nil
}

// errRecordCutShort is a record running past its batch.
var errRecordCutShort = errors.New("record cut short")

// parseRecord parses the record b starts with: length varint, attributes
// int8, timestampDelta varlong, offsetDelta varint, key and value (varint
// length, -1 for null), headers.
func parseRecord(b []byte) (r parsedRecord, offsetDelta int32, rest []byte, err error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 1 || length > int64(len(b)-n) {
		return r, 0, nil, errRecordCutShort
	}
	r.raw, rest = b[:n+int(length)], b[n+int(length):]
	body := b[n+1 : n+int(length)] // After the attributes.
	varint := func() int64 {
		v, k := binary.Varint(body)
		if k <= 0 {
			err = errRecordCutShort
			return 0
		}
		body = body[k:]
		return v
	}
	varint() // timestampDelta
	offsetDelta = int32(varint())
	keyLen := varint()
	if err != nil {
		return r, 0, nil, err
	}
	if keyLen > int64(len(body)) {
		return r, 0, nil, errRecordCutShort
	}
	if keyLen >= 0 {
		r.key, r.hasKey, body = body[:keyLen], true, body[keyLen:]
	}
	valueLen := varint()
	if err != nil {
		return r, 0, nil, err
	}
	if valueLen > int64(len(body)) {
		return r, 0, nil, errRecordCutShort
	}
	if valueLen >= 0 {
		r.value, r.hasValue = body[:valueLen], true
	}
	return r, offsetDelta, rest, nil
}

// NextOffset returns the offset after the last complete batch of records
// (its last offset plus one), and false if records holds none. A reader
// that walks a log in chunks reads on from it rather than from the last
// record it saw: a control batch, or a batch compaction emptied, has no
// record to see.
func NextOffset(records []byte) (int64, bool) {
	complete := completeBatches(records)
	next, ok := int64(0), false
	for pos := 0; pos+batchHeaderSize <= complete; {
		h := parseBatchHeader(records[pos:])
		if h.size < batchHeaderSize || pos+int(h.size) > complete {
			break
		}
		next, ok = h.nextOffset(), true
		pos += int(h.size)
	}
	return next, ok
}

// completeBatches returns how many bytes of records the batches that are
// all there take: it stops before a last batch whose framing or declared
// length runs past the end. A declared length that cannot frame a batch
// is not a cut: the rest is included, for walkBatches to report.
func completeBatches(records []byte) int {
	pos := 0
	for len(records)-pos >= batchLengthOverhead {
		size := int(int32(binary.BigEndian.Uint32(records[pos+fieldBatchLength:]))) + batchLengthOverhead
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
