package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/pierrec/lz4/v4"
)

// The legacy message format (magic 0 and 1) that producers older than
// Kafka 0.11 write and consumers older than it read, field by field
// (Kafka's LegacyRecord). A message is framed by a log overhead (offset
// int64, messageSize int32); messageSize counts what follows: crc uint32
// (CRC-32, IEEE, of magic..end), magic int8, attributes int8 (the codec in
// the low three bits and, for magic 1, the timestamp type in bit 3),
// timestamp int64 (magic 1 only), key and value (int32 length, -1 for
// null). A compressed message (a wrapper) has a null key and, as its
// value, the compressed message set of its inner messages.
const (
	legacyLogOverhead  = 12 // offset + messageSize
	legacyFieldCRC     = 12
	legacyFieldMagic   = 16
	legacyFieldAttrs   = 17
	legacyFieldTime    = 18 // magic 1 only
	legacyOverheadV0   = 14 // crc, magic, attributes, key and value lengths
	legacyOverheadV1   = 22 // legacyOverheadV0 and the timestamp
	legacyTimeTypeAttr = 0x08
	// noTimestamp is Kafka's NO_TIMESTAMP: the timestamp of a record
	// written as magic 0, which has none.
	noTimestamp = -1
)

// legacyMessage is one message of a legacy message set.
type legacyMessage struct {
	offset     int64
	magic      int8
	attributes int8
	// timestamp is noTimestamp for magic 0.
	timestamp int64
	// key and value are nil when null.
	key, value []byte
}

// codec is the message's compression codec.
func (m legacyMessage) codec() int16 { return int16(m.attributes) & codecMask }

// legacyOverhead is the least messageSize of a message of magic.
func legacyOverhead(magic int8) int {
	if magic == 0 {
		return legacyOverheadV0
	}
	return legacyOverheadV1
}

// parseLegacyMessage parses the message b starts with and returns it with
// the bytes it takes, checking its framing, magic (0 or 1), CRC-32 and
// that its key and value fill it exactly. Key and value alias b.
func parseLegacyMessage(b []byte) (legacyMessage, int, *batchError) {
	var m legacyMessage
	if len(b) < legacyLogOverhead+legacyOverheadV0 {
		return m, 0, corrupt("%d bytes, shorter than a message (%d)", len(b), legacyLogOverhead+legacyOverheadV0)
	}
	m.offset = int64(binary.BigEndian.Uint64(b))
	size := int64(int32(binary.BigEndian.Uint32(b[8:])))
	m.magic = int8(b[legacyFieldMagic])
	switch {
	case m.magic == magicV2:
		return m, 0, invalid("a record batch of magic 2 in a produce request of version 0 to 2, which carry magic 0 and 1 only")
	case m.magic != 0 && m.magic != 1:
		return m, 0, &batchError{kind: ErrUnsupportedMagic, detail: fmt.Sprintf("message magic %d, want 0 or 1", m.magic)}
	case size < int64(legacyOverhead(m.magic)):
		return m, 0, corrupt("messageSize %d below magic %d's minimum %d", size, m.magic, legacyOverhead(m.magic))
	case size > int64(len(b)-legacyLogOverhead):
		return m, 0, corrupt("messageSize %d runs past the %d bytes given", size, len(b)-legacyLogOverhead)
	}
	end := legacyLogOverhead + int(size)
	if stored, got := binary.BigEndian.Uint32(b[legacyFieldCRC:]), crc32.ChecksumIEEE(b[legacyFieldMagic:end]); stored != got {
		return m, 0, corrupt("message crc %#08x, computed %#08x", stored, got)
	}
	m.attributes = int8(b[legacyFieldAttrs])
	pos := legacyFieldAttrs + 1
	m.timestamp = noTimestamp
	if m.magic == 1 {
		m.timestamp = int64(binary.BigEndian.Uint64(b[legacyFieldTime:]))
		pos = legacyFieldTime + 8
	}
	field := func(name string) ([]byte, *batchError) {
		n := int64(int32(binary.BigEndian.Uint32(b[pos:])))
		pos += 4
		switch {
		case n == -1:
			return nil, nil
		case n < 0 || n > int64(end-pos):
			return nil, corrupt("message %s length %d, %d bytes left in the message", name, n, end-pos)
		}
		v := b[pos : pos+int(n) : pos+int(n)]
		pos += int(n)
		return v, nil
	}
	var err *batchError
	if m.key, err = field("key"); err != nil {
		return m, 0, err
	}
	if end-pos < 4 {
		return m, 0, corrupt("message value length cut short")
	}
	if m.value, err = field("value"); err != nil {
		return m, 0, err
	}
	if pos != end {
		return m, 0, corrupt("message fields take %d bytes, its messageSize says %d", pos-legacyLogOverhead, size)
	}
	return m, end, nil
}

// legacyRecord is a record of a legacy message set as it goes into a v2
// batch.
type legacyRecord struct {
	timestamp  int64
	key, value []byte
}

// ConvertLegacy checks a producer's legacy message set (magic 0 and 1,
// as produce requests of versions 0 to 2 carry it) to the last message,
// as strictly as ValidateProduced checks v2 batches, and converts it to
// one v2 batch as Kafka's LogValidator does for a log of message format
// 2: its records in order, keys and values kept, offsets left for Append
// to assign, no producer (legacy messages are never idempotent or
// transactional), and the timestamps the messages carry (magic 1;
// inner messages of a wrapper whose timestamp type is LogAppendTime take
// the wrapper's) or NO_TIMESTAMP (-1) for magic 0, which has none. The
// batch is compressed with the codec of the set's compressed messages,
// as a topic whose compression.type is producer keeps it (tripod stores
// every topic's batches so).
//
// It refuses:
//
//   - a message whose framing, CRC-32 or lengths fail, or whose
//     compressed value its codec cannot read: ErrCorruptMessage;
//   - a message of magic 2 (a request of version 0 to 2 carries none),
//     a wrapper holding a compressed message (nested compression), a
//     wrapper whose inner magic differs from its own or that holds no
//     message: ErrInvalidRecord;
//   - a magic other than 0, 1 and 2: ErrUnsupportedMagic;
//   - zstd (magic 2 only) or an unknown codec: ErrUnsupportedCompression;
//   - compressed messages whose inner messages, all wrappers of the set
//     together, decompress beyond v.MaxDecompressedBytes:
//     ErrRecordTooLarge;
//   - with v.Compacted, a record without a key: a *NullKeyError.
//
// Errors name the message by index and byte position.
func ConvertLegacy(records []byte, v ProduceValidation) ([]byte, error) {
	if len(records) == 0 {
		return nil, corrupt("no message")
	}
	if v.MaxDecompressedBytes <= 0 {
		return nil, fmt.Errorf("log: MaxDecompressedBytes %d: must be positive", v.MaxDecompressedBytes)
	}
	left := v.MaxDecompressedBytes
	var out []legacyRecord
	payload := compressedPayload{codec: codecNone}
	for n, pos := 0, 0; pos < len(records); n++ {
		m, size, err := parseLegacyMessage(records[pos:])
		if err == nil {
			switch codec := m.codec(); codec {
			case codecNone:
				out = append(out, legacyRecord{timestamp: m.timestamp, key: m.key, value: m.value})
			case codecGzip, codecSnappy, codecLZ4:
				var inner []legacyRecord
				var xerial bool
				inner, xerial, err = unwrapLegacy(m, &left)
				out = append(out, inner...)
				payload = compressedPayload{codec: codec, xerial: xerial}
			case codecZstd:
				err = &batchError{kind: ErrUnsupportedCompression, detail: fmt.Sprintf("zstd in a message of magic %d, which needs magic 2", m.magic)}
			default:
				err = &batchError{kind: ErrUnsupportedCompression, detail: fmt.Sprintf("compression codec %d", codec)}
			}
		}
		if err != nil {
			err.where = fmt.Sprintf("message %d at byte %d", n, pos)
			return nil, err
		}
		pos += size
	}
	if v.Compacted {
		for i, r := range out {
			if r.key == nil {
				return nil, &NullKeyError{Index: i}
			}
		}
	}
	if len(out) > math.MaxInt32 {
		return nil, invalid("%d records, more than a batch holds", len(out))
	}
	return buildConverted(out, payload)
}

// unwrapLegacy returns the inner messages of the wrapper m as records,
// decompressing at most *left bytes and taking what it decompressed off
// *left, and whether a snappy payload was in xerial framing.
func unwrapLegacy(m legacyMessage, left *int64) ([]legacyRecord, bool, *batchError) {
	if m.value == nil {
		return nil, false, corrupt("a compressed message with a null value")
	}
	codec := m.codec()
	src := m.value
	if codec == codecLZ4 && m.magic == 0 {
		src = fixLZ4HeaderChecksum(src)
	}
	d, err := openDecompressor(codec, src, *left)
	if err != nil {
		return nil, false, corrupt("compression codec %d: %v", codec, err)
	}
	set, err := io.ReadAll(io.LimitReader(d.reader, *left+1))
	xerial := false
	if r, ok := d.reader.(*snappyReader); ok {
		xerial = r.xerial
	}
	d.release()
	switch {
	case int64(len(set)) > *left || err == errPastLimit:
		return nil, false, &batchError{kind: ErrRecordTooLarge, detail: fmt.Sprintf("compressed messages decompress beyond %d bytes", *left)}
	case err != nil:
		return nil, false, corrupt("compression codec %d payload: %v", codec, err)
	}
	*left -= int64(len(set))
	var out []legacyRecord
	for i, pos := 0, 0; pos < len(set); i++ {
		in, size, berr := parseLegacyMessage(set[pos:])
		switch {
		case berr != nil:
			berr.detail = fmt.Sprintf("inner message %d: %s", i, berr.detail)
			return nil, false, berr
		case in.codec() != codecNone:
			return nil, false, invalid("inner message %d is compressed (codec %d) inside a compressed message", i, in.codec())
		case in.magic != m.magic:
			return nil, false, invalid("inner message %d of magic %d in a wrapper of magic %d", i, in.magic, m.magic)
		}
		ts := in.timestamp
		if m.magic == 1 && m.attributes&legacyTimeTypeAttr != 0 {
			ts = m.timestamp
		}
		out = append(out, legacyRecord{timestamp: ts, key: in.key, value: in.value})
		pos += size
	}
	if len(out) == 0 {
		return nil, false, invalid("a compressed message holding no message")
	}
	return out, xerial, nil
}

// buildConverted returns the v2 batch of recs, compressed as payload
// says: base offset and leader epoch 0 (Append sets both), CreateTime,
// no producer.
func buildConverted(recs []legacyRecord, payload compressedPayload) ([]byte, error) {
	base := recs[0].timestamp
	maxTS := base
	size := 0
	for _, r := range recs {
		maxTS = max(maxTS, r.timestamp)
		size += len(r.key) + len(r.value) + 5*binary.MaxVarintLen64 + 1
	}
	body := make([]byte, 0, size)
	var rec []byte
	for i, r := range recs {
		rec = append(rec[:0], 0) // attributes
		rec = binary.AppendVarint(rec, r.timestamp-base)
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarintBytes(rec, r.key)
		rec = appendVarintBytes(rec, r.value)
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	section, err := payload.compress(body)
	if err != nil {
		return nil, err
	}
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(section))
	b = append(b, section...)
	be := binary.BigEndian
	be.PutUint32(b[fieldBatchLength:], uint32(len(b)-batchLengthOverhead))
	b[fieldMagic] = magicV2
	be.PutUint16(b[fieldAttributes:], uint16(payload.codec))
	be.PutUint32(b[fieldLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[fieldBaseTimestamp:], uint64(base))
	be.PutUint64(b[fieldMaxTimestamp:], uint64(maxTS))
	be.PutUint64(b[fieldProducerID:], ^uint64(0))
	be.PutUint16(b[fieldProducerEpoch:], ^uint16(0))
	be.PutUint32(b[fieldBaseSequence:], ^uint32(0))
	be.PutUint32(b[fieldRecordCount:], uint32(len(recs)))
	be.PutUint32(b[fieldCRC:], crc32.Checksum(b[fieldAttributes:], castagnoli))
	return b, nil
}

// DownConvert returns the v2 batches of records, as a Read returns them
// (a last batch cut short is left out), in the legacy format of magic (0
// or 1) that a Fetch of version 0 to 3 reads, as Kafka's
// RecordsUtil.downConvert converts them: control batches (transaction
// markers) left out; an uncompressed batch as one message per record
// from fetchOffset on; a compressed batch as one wrapper message
// compressed again with the same codec (snappy in the xerial framing
// and lz4 in the frame Kafka's producers wrote for that magic), its inner
// messages with offsets relative to its first for magic 1, absolute for
// magic 0. Timestamps are kept for magic 1 (with the batch's timestamp
// type) and dropped for magic 0; headers, which the legacy format cannot
// carry, are dropped. The messages of aborted transactions stay, as a
// read_uncommitted consumer reads them: clients of those versions
// have no isolation level.
//
// The result holds at most maxBytes bytes, cut after a whole message,
// except that its first message (or wrapper) is always whole. A zstd
// batch, which the legacy format cannot carry, gives
// ErrUnsupportedCompression; a batch that fails its checks,
// ErrCorruptMessage.
func DownConvert(records []byte, magic int8, fetchOffset int64, maxBytes int) ([]byte, error) {
	if magic != 0 && magic != 1 {
		return nil, fmt.Errorf("log: down-conversion to magic %d: want 0 or 1", magic)
	}
	complete := completeBatches(records)
	var headers []batchHeader
	if err := walkBatches(records[:complete], true, func(h batchHeader, _ []byte) *batchError {
		headers = append(headers, h)
		return nil
	}); err != nil {
		return nil, err
	}
	var out []byte
	pos := 0
	for _, h := range headers {
		raw := records[pos : pos+int(h.size)]
		pos += int(h.size)
		if h.attributes&attrControl != 0 {
			continue
		}
		codec := h.attributes & codecMask
		if codec == codecZstd {
			return nil, &batchError{kind: ErrUnsupportedCompression, detail: fmt.Sprintf("a zstd batch at offset %d cannot be read as magic %d", h.baseOffset, magic)}
		}
		baseTS := int64(binary.BigEndian.Uint64(raw[fieldBaseTimestamp:]))
		attrs := int8(0)
		if magic == 1 && h.attributes&attrLogAppendTime != 0 {
			attrs = legacyTimeTypeAttr
		}
		timestamp := func(tsDelta int64) int64 {
			switch {
			case magic == 0:
				return noTimestamp
			case attrs != 0:
				return h.maxTimestamp
			}
			return baseTS + tsDelta
		}
		if codec == codecNone {
			full := false
			err := eachRecord(raw, h, func(offset int64, r parsedRecord) {
				if full || offset < fetchOffset {
					return
				}
				next := appendLegacyMessage(out, magic, offset, attrs, timestamp(recordTimestampDelta(r.raw)), nullable(r.key, r.hasKey), nullable(r.value, r.hasValue))
				if len(next) > maxBytes && len(out) > 0 {
					full = true
					return
				}
				out = next
			})
			if err != nil {
				return nil, err
			}
			if full {
				return out, nil
			}
			continue
		}
		var inner []byte
		first, last, n := int64(-1), int64(-1), 0
		err := eachRecord(raw, h, func(offset int64, r parsedRecord) {
			if first < 0 {
				first = offset
			}
			last = offset
			innerOffset := offset
			if magic == 1 {
				innerOffset = offset - first
			}
			inner = appendLegacyMessage(inner, magic, innerOffset, attrs, timestamp(recordTimestampDelta(r.raw)), nullable(r.key, r.hasKey), nullable(r.value, r.hasValue))
			n++
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue // Compaction emptied it.
		}
		value, err := compressLegacy(codec, magic, inner)
		if err != nil {
			return nil, err
		}
		wrapperTS := int64(noTimestamp)
		if magic == 1 {
			wrapperTS = h.maxTimestamp
		}
		next := appendLegacyMessage(out, magic, last, attrs|int8(codec), wrapperTS, nil, value)
		if len(next) > maxBytes && len(out) > 0 {
			return out, nil
		}
		out = next
	}
	return out, nil
}

// nullable returns b, or nil when the field is null.
func nullable(b []byte, present bool) []byte {
	if !present {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}

// appendLegacyMessage appends to dst the message of magic with offset,
// attributes, timestamp (magic 1 only), key and value (nil for null) and
// its CRC-32.
func appendLegacyMessage(dst []byte, magic int8, offset int64, attrs int8, timestamp int64, key, value []byte) []byte {
	start := len(dst)
	size := legacyOverhead(magic) + len(key) + len(value)
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = append(dst, 0, 0, 0, 0, byte(magic), byte(attrs))
	if magic == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(timestamp))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			dst = binary.BigEndian.AppendUint32(dst, ^uint32(0))
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	binary.BigEndian.PutUint32(dst[start+legacyFieldCRC:], crc32.ChecksumIEEE(dst[start+legacyFieldMagic:]))
	return dst
}

// compressLegacy compresses the message set set with codec as Kafka's
// producers of the legacy format did: gzip; snappy in the xerial framing
// of the Java producer; lz4 in a frame of 64 KiB blocks without content
// checksum, whose header checksum, for magic 0, is the one Kafka 0.8 to
// 0.9 wrote (over the frame's magic number too), which the consumers of
// those versions check.
func compressLegacy(codec int16, magic int8, set []byte) ([]byte, error) {
	if codec != codecLZ4 {
		return compressedPayload{codec: codec, xerial: true}.compress(set)
	}
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
		return nil, fmt.Errorf("compress lz4: %w", err)
	}
	if _, err := w.Write(set); err != nil {
		return nil, fmt.Errorf("compress lz4: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress lz4: %w", err)
	}
	out := buf.Bytes()
	if magic == 0 {
		if end, ok := lz4DescriptorEnd(out); ok {
			out[end] = byte(xxh32(out[:end]) >> 8)
		}
	}
	return out, nil
}

// lz4FrameMagic starts an lz4 frame.
const lz4FrameMagic = 0x184D2204

// lz4DescriptorEnd returns where the header checksum byte of the lz4
// frame b is: after the magic number, FLG, BD and, if FLG says so, the
// 8-byte content size. It reports false for what is no frame header.
func lz4DescriptorEnd(b []byte) (int, bool) {
	if len(b) < 7 || binary.LittleEndian.Uint32(b) != lz4FrameMagic {
		return 0, false
	}
	end := 6
	if b[4]&0x08 != 0 { // content size
		end += 8
	}
	return end, len(b) > end
}

// fixLZ4HeaderChecksum returns the lz4 frame payload with its header
// checksum computed as the frame format defines it (over FLG, BD and the
// content size). Kafka 0.8 to 0.9 wrote it over the magic number too, and
// Kafka ignores it in magic 0 messages (KafkaLZ4BlockInputStream's
// ignoreFlagDescriptorChecksum); the decoder checks it. payload is not
// modified.
func fixLZ4HeaderChecksum(payload []byte) []byte {
	end, ok := lz4DescriptorEnd(payload)
	if !ok {
		return payload
	}
	fixed := append([]byte(nil), payload...)
	fixed[end] = byte(xxh32(fixed[4:end]) >> 8)
	return fixed
}

// The primes of xxHash32.
const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32 is xxHash32 of b with seed 0, the hash of an lz4 frame's header
// checksum.
func xxh32(b []byte) uint32 {
	rotl := func(x uint32, r uint) uint32 { return x<<r | x>>(32-r) }
	round := func(acc, in uint32) uint32 { return rotl(acc+in*xxhPrime2, 13) * xxhPrime1 }
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		v1, v2, v3, v4 := xxhPrime1, xxhPrime2, uint32(0), uint32(0)
		v1 += xxhPrime2
		v4 -= xxhPrime1
		for len(b) >= 16 {
			v1 = round(v1, binary.LittleEndian.Uint32(b))
			v2 = round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = round(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)
	} else {
		h = xxhPrime5
	}
	h += n
	for ; len(b) >= 4; b = b[4:] {
		h = rotl(h+binary.LittleEndian.Uint32(b)*xxhPrime3, 17) * xxhPrime4
	}
	for _, c := range b {
		h = rotl(h+uint32(c)*xxhPrime5, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}
