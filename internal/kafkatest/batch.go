package kafkatest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// EncodeBatch returns a v2 record batch, uncompressed, holding one record
// per value at timestamp ts, written by producer producerID at
// producerEpoch from sequence firstSequence (-1, -1, -1 for none).
func EncodeBatch(ts int64, producerID int64, producerEpoch int16, firstSequence int32, values ...[]byte) []byte {
	return encodeBatch(0, ts, producerID, producerEpoch, firstSequence, values...)
}

// EncodeTransactionalBatch is EncodeBatch with the transactional
// attribute: a batch of producerID's open transaction (KIP-98).
func EncodeTransactionalBatch(ts int64, producerID int64, producerEpoch int16, firstSequence int32, values ...[]byte) []byte {
	return encodeBatch(0x10, ts, producerID, producerEpoch, firstSequence, values...)
}

// encodeBatch implements EncodeBatch with the batch's attributes.
func encodeBatch(attributes int16, ts int64, producerID int64, producerEpoch int16, firstSequence int32, values ...[]byte) []byte {
	var records []byte
	for i, v := range values {
		rec := kmsg.NewRecord()
		rec.OffsetDelta = int32(i)
		rec.Value = v
		// Length counts the bytes after itself: encode once with a
		// one-byte zero length to learn it.
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		records = rec.AppendTo(records)
	}
	batch := kmsg.NewRecordBatch()
	batch.Magic = 2
	batch.Attributes = attributes
	batch.LastOffsetDelta = int32(len(values) - 1)
	batch.FirstTimestamp = ts
	batch.MaxTimestamp = ts
	batch.ProducerID = producerID
	batch.ProducerEpoch = producerEpoch
	batch.FirstSequence = firstSequence
	batch.NumRecords = int32(len(values))
	batch.Records = records
	raw := batch.AppendTo(nil)
	// Length covers everything after the length field; CRC-32C covers
	// attributes to the end.
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], CRC32C(raw[21:]))
	return raw
}

// CRC32C is the CRC-32C (Castagnoli) of a record batch's attributes and
// what follows them.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// FuzzBatch returns a v2 record batch (no compression, no producer,
// timestamp 0 so that a fuzz corpus is the same at every write) holding
// one record per value.
func FuzzBatch(values ...[]byte) []byte { return EncodeBatch(0, -1, -1, -1, values...) }
