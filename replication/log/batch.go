package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The v2 record batch header, field by field (Kafka's DefaultRecordBatch).
const (
	fieldBaseOffset      = 0  // int64
	fieldBatchLength     = 8  // int32: bytes after this field
	fieldLeaderEpoch     = 12 // int32: partitionLeaderEpoch
	fieldMagic           = 16 // int8
	fieldCRC             = 17 // uint32: CRC-32C of attributes..end
	fieldAttributes      = 21 // int16
	fieldLastOffsetDelta = 23 // int32
	fieldBaseTimestamp   = 27 // int64
	fieldMaxTimestamp    = 35 // int64
	fieldProducerID      = 43 // int64
	fieldProducerEpoch   = 51 // int16
	fieldBaseSequence    = 53 // int32
	fieldRecordCount     = 57 // int32

	// batchHeaderSize is the size of a v2 batch without its records.
	batchHeaderSize = 61
	// batchLengthOverhead is the bytes before the records that batchLength
	// does not count (baseOffset and batchLength itself).
	batchLengthOverhead = 12
	// minBatchLength is the smallest batchLength of a v2 batch.
	minBatchLength = batchHeaderSize - batchLengthOverhead
	// magicV2 is the only record batch format the log stores.
	magicV2 = 2
)

// castagnoli is the CRC-32C table of the v2 batch checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the part of a v2 batch header the log uses.
type batchHeader struct {
	baseOffset      int64
	size            int64 // the whole batch: batchLength + 12
	leaderEpoch     int32
	magic           int8
	crc             uint32
	attributes      int16
	lastOffsetDelta int32
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	recordCount     int32
}

// lastOffset is the offset of the batch's last record.
func (h batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }

// nextOffset is the offset after the batch.
func (h batchHeader) nextOffset() int64 { return h.lastOffset() + 1 }

// parseBatchHeader decodes the first batchHeaderSize bytes of b, which the
// caller guarantees are present. It checks nothing.
func parseBatchHeader(b []byte) batchHeader {
	_ = b[batchHeaderSize-1]
	return batchHeader{
		baseOffset:      int64(binary.BigEndian.Uint64(b[fieldBaseOffset:])),
		size:            int64(int32(binary.BigEndian.Uint32(b[fieldBatchLength:]))) + batchLengthOverhead,
		leaderEpoch:     int32(binary.BigEndian.Uint32(b[fieldLeaderEpoch:])),
		magic:           int8(b[fieldMagic]),
		crc:             binary.BigEndian.Uint32(b[fieldCRC:]),
		attributes:      int16(binary.BigEndian.Uint16(b[fieldAttributes:])),
		lastOffsetDelta: int32(binary.BigEndian.Uint32(b[fieldLastOffsetDelta:])),
		maxTimestamp:    int64(binary.BigEndian.Uint64(b[fieldMaxTimestamp:])),
		producerID:      int64(binary.BigEndian.Uint64(b[fieldProducerID:])),
		producerEpoch:   int16(binary.BigEndian.Uint16(b[fieldProducerEpoch:])),
		baseSequence:    int32(binary.BigEndian.Uint32(b[fieldBaseSequence:])),
		recordCount:     int32(binary.BigEndian.Uint32(b[fieldRecordCount:])),
	}
}

// batchError is a rejected batch: kind is ErrCorruptMessage or
// ErrUnsupportedMagic, where names the batch ("batch 2 at byte 4096") and
// detail says what is wrong with it.
type batchError struct {
	kind   error
	where  string
	detail string
}

// Error implements error.
func (e *batchError) Error() string {
	if e.where == "" {
		return e.kind.Error() + ": " + e.detail
	}
	return e.kind.Error() + ": " + e.where + ": " + e.detail
}

// Unwrap returns the sentinel, for errors.Is.
func (e *batchError) Unwrap() error { return e.kind }

// corrupt returns a batchError of kind ErrCorruptMessage.
func corrupt(format string, args ...any) *batchError {
	return &batchError{kind: ErrCorruptMessage, detail: fmt.Sprintf(format, args...)}
}

// checkHeader checks the framing of a batch header: its magic, length,
// offset delta and record count (at most lastOffsetDelta+1: a compacted
// batch may have lost records, or all of them; Append checks that a
// producer's batch has them all).
func checkHeader(h batchHeader) *batchError {
	switch {
	case h.magic != magicV2:
		return &batchError{kind: ErrUnsupportedMagic, detail: fmt.Sprintf("magic %d, want %d", h.magic, magicV2)}
	case h.size < batchHeaderSize:
		return corrupt("batchLength %d below the minimum %d", h.size-batchLengthOverhead, minBatchLength)
	case h.lastOffsetDelta < 0:
		return corrupt("lastOffsetDelta %d is negative", h.lastOffsetDelta)
	case h.recordCount < 0 || int64(h.recordCount) > int64(h.lastOffsetDelta)+1:
		return corrupt("recordCount %d, want 0..lastOffsetDelta+1 = %d", h.recordCount, int64(h.lastOffsetDelta)+1)
	}
	return nil
}

// checkCRC verifies the CRC-32C of the whole batch b.
func checkCRC(h batchHeader, b []byte) *batchError {
	if got := crc32.Checksum(b[fieldAttributes:h.size], castagnoli); got != h.crc {
		return corrupt("crc %#08x, computed %#08x", h.crc, got)
	}
	return nil
}

// splitBatches validates every batch of records (one or more concatenated
// v2 batches), CRC included, and returns their headers, in order. Errors
// name the batch by index and byte position.
func splitBatches(records []byte) ([]batchHeader, error) {
	var headers []batchHeader
	err := walkBatches(records, true, func(h batchHeader, _ []byte) *batchError {
		headers = append(headers, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return headers, nil
}

// walkBatches validates every batch of records in order, the CRC-32C only
// if withCRC, and calls fn with each header and the batch's bytes. It
// stops at the first bad batch, or the first error fn returns, and
// returns that error, naming the batch by index and byte position.
func walkBatches(records []byte, withCRC bool, fn func(h batchHeader, raw []byte) *batchError) error {
	if len(records) == 0 {
		return corrupt("no record batch")
	}
	n := 0
	for pos := 0; pos < len(records); n++ {
		rest := records[pos:]
		h, err := frameBatch(rest)
		if err == nil {
			err = checkHeader(h)
		}
		if err == nil && withCRC {
			err = checkCRC(h, rest)
		}
		if err == nil {
			err = fn(h, rest[:h.size])
		}
		if err != nil {
			err.where = fmt.Sprintf("batch %d at byte %d", n, pos)
			return err
		}
		pos += int(h.size)
	}
	return nil
}

// BatchInfo is what a v2 batch header says of its batch, for code outside
// the log that reasons about batches (the idempotent producers' state).
type BatchInfo struct {
	// BaseOffset and LastOffset are the offsets of the first and last
	// record as the header states them.
	BaseOffset, LastOffset int64
	// MaxTimestamp is the batch's max timestamp (ms).
	MaxTimestamp int64
	// Attributes are the batch's attribute bits (compression, timestamp
	// type, transactional 0x10, control 0x20).
	Attributes int16
	// ProducerID, ProducerEpoch and BaseSequence identify an idempotent
	// producer's batch; -1 for a producer that is not idempotent.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Commit is what a control batch's marker says (Attributes has the
	// control bit 0x20): its control record's type is COMMIT (1), not
	// ABORT (0). It is false for every other batch.
	Commit bool
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote a control batch's marker (its EndTransactionMarker value);
	// -1 for every other batch.
	CoordinatorEpoch int32
}

// batchInfo is h as a BatchInfo, raw being the whole batch: a control
// batch's control record is read for its type (Kafka's ControlRecordType).
func batchInfo(h batchHeader, raw []byte) (BatchInfo, *batchError) {
	info := BatchInfo{
		BaseOffset: h.baseOffset, LastOffset: h.lastOffset(), MaxTimestamp: h.maxTimestamp,
		Attributes: h.attributes, ProducerID: h.producerID, ProducerEpoch: h.producerEpoch, BaseSequence: h.baseSequence,
		CoordinatorEpoch: -1,
	}
	if h.attributes&attrControl == 0 || h.recordCount == 0 {
		// A control batch compaction emptied says nothing any more.
		return info, nil
	}
	var err *batchError
	info.Commit, info.CoordinatorEpoch, err = controlMarker(raw, h)
	return info, err
}

// controlMarker reads the first control record of the control batch raw:
// its type, true for COMMIT and false for ABORT, and the coordinator
// epoch of its EndTransactionMarker value. A key or value too short, or a
// type other than the two, is corrupt.
func controlMarker(raw []byte, h batchHeader) (bool, int32, *batchError) {
	var commit, seen bool
	coordinatorEpoch := int32(-1)
	var bad *batchError
	err := eachRecord(raw, h, func(_ int64, r parsedRecord) {
		if seen {
			return
		}
		seen = true
		if !r.hasKey || len(r.key) < controlKeySize || len(r.value) < markerValueSize {
			bad = corrupt("control batch at offset %d: control record of %d key and %d value bytes, want at least %d and %d",
				h.baseOffset, len(r.key), len(r.value), controlKeySize, markerValueSize)
			return
		}
		coordinatorEpoch = int32(binary.BigEndian.Uint32(r.value[2:]))
		switch t := binary.BigEndian.Uint16(r.key[2:]); t {
		case controlTypeCommit:
			commit = true
		case controlTypeAbort:
		default:
			bad = corrupt("control batch at offset %d: control record of type %d, want ABORT (0) or COMMIT (1)", h.baseOffset, t)
		}
	})
	if err != nil {
		var be *batchError
		if errors.As(err, &be) {
			return false, -1, be
		}
		return false, -1, corrupt("control batch at offset %d: %v", h.baseOffset, err)
	}
	return commit, coordinatorEpoch, bad
}

// EachBatch checks every batch of records (one or more concatenated v2
// batches) as Append does, the CRC-32C only if checkCRC (batches the log
// has verified already need not pay for it again), and calls fn with each
// batch's header, in order. Errors wrap ErrCorruptMessage or
// ErrUnsupportedMagic and name the batch by index and byte position; fn
// has then seen the batches before it.
func EachBatch(records []byte, checkCRC bool, fn func(BatchInfo)) error {
	return walkBatches(records, checkCRC, func(h batchHeader, raw []byte) *batchError {
		info, err := batchInfo(h, raw)
		if err == nil {
			fn(info)
		}
		return err
	})
}

// EachProducedBatch is EachBatch, CRC-32C included, for a producer's
// batches: it also refuses, as Append does, a batch whose record count is
// not lastOffsetDelta+1 (only compaction leaves batches with fewer
// records, so only a follower or a reader of the log sees those).
func EachProducedBatch(records []byte, fn func(BatchInfo)) error {
	var infos []BatchInfo
	var headers []batchHeader
	err := walkBatches(records, true, func(h batchHeader, raw []byte) *batchError {
		info, err := batchInfo(h, raw)
		headers, infos = append(headers, h), append(infos, info)
		return err
	})
	if err == nil {
		err = checkProduced(headers)
	}
	if err != nil {
		return err
	}
	for _, info := range infos {
		fn(info)
	}
	return nil
}

// setBaseOffset rewrites the baseOffset field of the batch b starts with.
func setBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[fieldBaseOffset:], uint64(offset))
}

// setLeaderEpoch rewrites the partitionLeaderEpoch field of the batch b
// starts with.
func setLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[fieldLeaderEpoch:], uint32(epoch))
}
