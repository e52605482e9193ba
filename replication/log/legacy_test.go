package log

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyKV is one message a test writes in the legacy format.
type legacyKV struct {
	key, value []byte
	timestamp  int64
}

// encodeLegacy encodes one message of magic with franz-go's kmsg
// (MessageV0, MessageV1), computing its size and CRC-32 here.
func encodeLegacy(magic int8, offset int64, attrs int8, kv legacyKV) []byte {
	var raw []byte
	if magic == 0 {
		m := kmsg.MessageV0{Offset: offset, Magic: 0, Attributes: attrs, Key: kv.key, Value: kv.value}
		raw = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Offset: offset, Magic: 1, Attributes: attrs, Timestamp: kv.timestamp, Key: kv.key, Value: kv.value}
		raw = m.AppendTo(nil)
	}
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[12:], crc32.ChecksumIEEE(raw[16:]))
	return raw
}

// legacySet encodes kvs as an uncompressed message set of magic.
func legacySet(magic int8, firstOffset int64, kvs []legacyKV) []byte {
	var out []byte
	for i, kv := range kvs {
		out = append(out, encodeLegacy(magic, firstOffset+int64(i), 0, kv)...)
	}
	return out
}

// compressWith compresses set with codec as the named client would.
func compressWith(t testing.TB, codec int16, style string, set []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case codecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(set)
		w.Close()
	case codecSnappy:
		if style == "plain" {
			return s2.EncodeSnappy(nil, set)
		}
		out, err := compressedPayload{codec: codecSnappy, xerial: true}.compress(set)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(set)
		w.Close()
		if style == "kafka-0.9" {
			out := buf.Bytes()
			end, _ := lz4DescriptorEnd(out)
			out[end] = byte(xxh32(out[:end]) >> 8) // the header checksum Kafka 0.8-0.9 wrote
			return out
		}
	default:
		t.Fatalf("codec %d", codec)
	}
	return buf.Bytes()
}

// wrapper encodes kvs as the inner set of one compressed message of magic,
// inner offsets relative (magic 1) or absolute from 0 (magic 0).
func wrapper(t testing.TB, magic int8, codec int16, style string, kvs []legacyKV) []byte {
	inner := legacySet(magic, 0, kvs)
	value := compressWith(t, codec, style, inner)
	ts := int64(0)
	if len(kvs) > 0 {
		ts = kvs[len(kvs)-1].timestamp
	}
	return encodeLegacy(magic, int64(len(kvs)-1), int8(codec), legacyKV{value: value, timestamp: ts})
}

// someKVs returns n messages with keys, values and timestamps of their
// index, the third with a null key and the fifth with a null value.
func someKVs(n int) []legacyKV {
	kvs := make([]legacyKV, n)
	for i := range kvs {
		kvs[i] = legacyKV{key: fmt.Appendf(nil, "key-%d", i), value: bytes.Repeat(fmt.Appendf(nil, "value %d ", i), 20), timestamp: 1_700_000_000_000 + int64(i)}
		if i == 2 {
			kvs[i].key = nil
		}
		if i == 4 {
			kvs[i].value = nil
		}
	}
	return kvs
}

// v2Record is a record as a converted batch holds it.
type v2Record struct {
	offset     int64
	timestamp  int64
	key, value []byte
}

// readV2 returns the records of the v2 batches b, failing the test if
// they do not validate as a producer's batches.
func readV2(t testing.TB, b []byte) (records []v2Record, codec int16) {
	t.Helper()
	if err := ValidateProduced(b, ProduceValidation{MaxDecompressedBytes: 1 << 30}); err != nil {
		t.Fatalf("converted batch does not validate: %v", err)
	}
	h := parseBatchHeader(b)
	base := int64(binary.BigEndian.Uint64(b[fieldBaseTimestamp:]))
	err := eachRecord(b[:h.size], h, func(offset int64, r parsedRecord) {
		records = append(records, v2Record{offset: offset, timestamp: base + recordTimestampDelta(r.raw), key: nullable(r.key, r.hasKey), value: nullable(r.value, r.hasValue)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return records, h.attributes & codecMask
}

// readLegacy returns the messages of a down-converted set, unwrapping
// compressed ones with absolute offsets, failing the test on a message
// that does not parse.
func readLegacy(t testing.TB, b []byte) []legacyMessage {
	t.Helper()
	var out []legacyMessage
	for pos := 0; pos < len(b); {
		m, size, err := parseLegacyMessage(b[pos:])
		if err != nil {
			t.Fatalf("down-converted message at byte %d: %v", pos, err)
		}
		pos += size
		if m.codec() == codecNone {
			out = append(out, m)
			continue
		}
		value := m.value
		if m.codec() == codecLZ4 && m.magic == 0 {
			// Kafka 0.8-0.9's header checksum: a standard decoder refuses it.
			if _, err := io.ReadAll(lz4.NewReader(bytes.NewReader(value))); err == nil {
				t.Fatalf("a magic 0 lz4 wrapper with a standard header checksum, want Kafka 0.9's")
			}
			value = fixLZ4HeaderChecksum(value)
		}
		set, _, err2 := decompress(m.codec(), value)
		if err2 != nil {
			t.Fatalf("wrapper at offset %d: %v", m.offset, err2)
		}
		var inner []legacyMessage
		for p := 0; p < len(set); {
			in, n, err := parseLegacyMessage(set[p:])
			if err != nil {
				t.Fatalf("inner message: %v", err)
			}
			inner = append(inner, in)
			p += n
		}
		if m.magic == 1 {
			last := inner[len(inner)-1].offset
			for i := range inner {
				inner[i].offset = m.offset - last + inner[i].offset
			}
		}
		out = append(out, inner...)
	}
	return out
}

// TestConvertLegacyKeepsRecords converts legacy sets of every magic and
// codec as old clients write them to a v2 batch, and back: the keys,
// values and timestamps (magic 1; NO_TIMESTAMP for magic 0) survive, the
// codec is kept, and the result is a valid producer's batch.
func TestConvertLegacyKeepsRecords(t *testing.T) {
	kvs := someKVs(7)
	type setCase struct {
		name  string
		magic int8
		codec int16
		style string
	}
	var cases []setCase
	for _, magic := range []int8{0, 1} {
		cases = append(cases, setCase{fmt.Sprintf("magic%d/none", magic), magic, codecNone, ""})
		cases = append(cases, setCase{fmt.Sprintf("magic%d/gzip", magic), magic, codecGzip, ""})
		cases = append(cases, setCase{fmt.Sprintf("magic%d/snappy-xerial", magic), magic, codecSnappy, "xerial"})
		cases = append(cases, setCase{fmt.Sprintf("magic%d/snappy-plain", magic), magic, codecSnappy, "plain"})
		cases = append(cases, setCase{fmt.Sprintf("magic%d/lz4", magic), magic, codecLZ4, ""})
	}
	cases = append(cases, setCase{"magic0/lz4-kafka-0.9-checksum", 0, codecLZ4, "kafka-0.9"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var set []byte
			if c.codec == codecNone {
				set = legacySet(c.magic, 0, kvs)
			} else {
				// Two wrappers: both end up in one batch.
				set = append(wrapper(t, c.magic, c.codec, c.style, kvs[:3]), wrapper(t, c.magic, c.codec, c.style, kvs[3:])...)
			}
			batch, err := ConvertLegacy(set, ProduceValidation{MaxDecompressedBytes: 1 << 20})
			if err != nil {
				t.Fatalf("ConvertLegacy: %v", err)
			}
			records, codec := readV2(t, batch)
			if codec != c.codec {
				t.Fatalf("converted batch codec %d, want %d", codec, c.codec)
			}
			if len(records) != len(kvs) {
				t.Fatalf("got %d records, want %d", len(records), len(kvs))
			}
			for i, r := range records {
				wantTS := kvs[i].timestamp
				if c.magic == 0 {
					wantTS = noTimestamp
				}
				if r.offset != int64(i) || r.timestamp != wantTS || !bytes.Equal(r.key, kvs[i].key) || (r.key == nil) != (kvs[i].key == nil) ||
					!bytes.Equal(r.value, kvs[i].value) || (r.value == nil) != (kvs[i].value == nil) {
					t.Fatalf("record %d: got offset %d ts %d key %q value %q, want offset %d ts %d key %q value %q",
						i, r.offset, r.timestamp, r.key, r.value, i, wantTS, kvs[i].key, kvs[i].value)
				}
			}

			// Back to the legacy format, as a Fetch v0-v3 reads it.
			setBaseOffset(batch, 100)
			for _, magic := range []int8{0, 1} {
				down, err := DownConvert(batch, magic, 100, 1<<20)
				if err != nil {
					t.Fatalf("DownConvert to magic %d: %v", magic, err)
				}
				msgs := readLegacy(t, down)
				if len(msgs) != len(kvs) {
					t.Fatalf("magic %d: got %d messages, want %d", magic, len(msgs), len(kvs))
				}
				for i, m := range msgs {
					wantTS := records[i].timestamp
					if magic == 0 {
						wantTS = noTimestamp
					}
					if m.magic != magic || m.offset != 100+int64(i) || m.timestamp != wantTS || !bytes.Equal(m.key, kvs[i].key) || (m.key == nil) != (kvs[i].key == nil) || (m.value == nil) != (kvs[i].value == nil) || !bytes.Equal(m.value, kvs[i].value) {
						t.Fatalf("magic %d message %d: got magic %d offset %d ts %d key %q, want offset %d ts %d key %q", magic, i, m.magic, m.offset, m.timestamp, m.key, 100+i, wantTS, kvs[i].key)
					}
				}
			}
		})
	}
}

// TestConvertLegacyRefusesMalformed feeds malformed legacy sets to
// ConvertLegacy: each gets the error Kafka's code is mapped from, never a
// panic or a batch.
func TestConvertLegacyRefusesMalformed(t *testing.T) {
	good := legacySet(1, 0, someKVs(3))
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 1
	smallSize := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(smallSize[8:], 10)
	hugeSize := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(hugeSize[8:], 0x7fffffff)
	magic2 := append([]byte(nil), good...)
	magic2[16] = 2
	magic7 := append([]byte(nil), good...)
	magic7[16] = 7
	nested := encodeLegacy(1, 0, codecGzip, legacyKV{value: compressWith(t, codecGzip, "", wrapper(t, 1, codecGzip, "", someKVs(2)))})
	mixed := encodeLegacy(1, 0, codecGzip, legacyKV{value: compressWith(t, codecGzip, "", legacySet(0, 0, someKVs(2)))})
	empty := encodeLegacy(1, 0, codecGzip, legacyKV{value: compressWith(t, codecGzip, "", nil)})
	nullValue := encodeLegacy(1, 0, codecGzip, legacyKV{})
	notGzip := encodeLegacy(1, 0, codecGzip, legacyKV{value: []byte("not gzip at all")})
	innerCut := encodeLegacy(1, 0, codecSnappy, legacyKV{value: compressWith(t, codecSnappy, "plain", good[:len(good)-3])})
	zstd := encodeLegacy(1, 0, codecZstd, legacyKV{value: []byte{1}})
	codec6 := encodeLegacy(1, 0, 6, legacyKV{value: []byte{1}})
	trailing := encodeLegacy(0, 0, 0, legacyKV{value: []byte("v")})
	trailing = append(trailing[:8], append(binary.BigEndian.AppendUint32(nil, uint32(len(trailing)-12+2)), append(trailing[12:], 0, 0)...)...)
	binary.BigEndian.PutUint32(trailing[12:], crc32.ChecksumIEEE(trailing[16:]))
	// 8 MiB of zeros gzip to 8 KiB: a bomb past a 1 MiB limit, in one
	// wrapper and spread over two.
	bomb := encodeLegacy(1, 0, codecGzip, legacyKV{value: compressWith(t, codecGzip, "", make([]byte, 8<<20))})
	halfBomb := encodeLegacy(1, 0, codecGzip, legacyKV{value: compressWith(t, codecGzip, "", legacySet(1, 0, []legacyKV{{value: make([]byte, 600<<10)}}))})
	snappyBomb := encodeLegacy(1, 0, codecSnappy, legacyKV{value: compressWith(t, codecSnappy, "xerial", make([]byte, 8<<20))})
	lz4Bomb := encodeLegacy(0, 0, codecLZ4, legacyKV{value: compressWith(t, codecLZ4, "", make([]byte, 8<<20))})

	for _, c := range []struct {
		name    string
		records []byte
		want    error
	}{
		{"empty", nil, ErrCorruptMessage},
		{"bad crc", badCRC, ErrCorruptMessage},
		{"messageSize below the minimum", smallSize, ErrCorruptMessage},
		{"messageSize past the end", hugeSize, ErrCorruptMessage},
		{"magic 2 in a legacy request", magic2, ErrInvalidRecord},
		{"magic 7", magic7, ErrUnsupportedMagic},
		{"nested wrapper", nested, ErrInvalidRecord},
		{"inner magic differs from the wrapper's", mixed, ErrInvalidRecord},
		{"wrapper holding nothing", empty, ErrInvalidRecord},
		{"wrapper with a null value", nullValue, ErrCorruptMessage},
		{"wrapper that is not gzip", notGzip, ErrCorruptMessage},
		{"inner set cut short", innerCut, ErrCorruptMessage},
		{"zstd in magic 1", zstd, ErrUnsupportedCompression},
		{"codec 6", codec6, ErrUnsupportedCompression},
		{"bytes after the value", trailing, ErrCorruptMessage},
		{"gzip bomb", bomb, ErrRecordTooLarge},
		{"two wrappers past the limit together", append(append([]byte(nil), halfBomb...), halfBomb...), ErrRecordTooLarge},
		{"snappy bomb", snappyBomb, ErrRecordTooLarge},
		{"lz4 bomb", lz4Bomb, ErrRecordTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			batch, err := ConvertLegacy(c.records, ProduceValidation{MaxDecompressedBytes: 1 << 20})
			if batch != nil || !errors.Is(err, c.want) {
				t.Fatalf("got batch of %d bytes, error %v; want error %v", len(batch), err, c.want)
			}
		})
	}
	// Every cut of a good set within a message is refused.
	boundaries := map[int]bool{}
	for pos := 0; pos < len(good); pos += 12 + int(binary.BigEndian.Uint32(good[pos+8:])) {
		boundaries[pos] = true
	}
	for n := 1; n < len(good); n++ {
		if boundaries[n] {
			continue
		}
		if _, err := ConvertLegacy(good[:n], ProduceValidation{MaxDecompressedBytes: 1 << 20}); !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("set cut to %d of %d bytes: got error %v, want %v", n, len(good), err, ErrCorruptMessage)
		}
	}
}

// TestConvertLegacyCompactedNeedsKeys: a record without a key on a
// compacted topic is refused with its index, as the v2 path does.
func TestConvertLegacyCompactedNeedsKeys(t *testing.T) {
	set := wrapper(t, 1, codecGzip, "", someKVs(5)) // record 2 has no key
	_, err := ConvertLegacy(set, ProduceValidation{Compacted: true, MaxDecompressedBytes: 1 << 20})
	var nullKey *NullKeyError
	if !errors.As(err, &nullKey) || nullKey.Index != 2 {
		t.Fatalf("got error %v, want a NullKeyError at record 2", err)
	}
}

// TestDownConvertLeavesOutMarkersAndBoundsBytes: control batches do not
// reach a legacy reader, records below the fetch offset of an
// uncompressed batch are left out, the result stops at maxBytes after a
// whole message but always holds the first, and zstd cannot be read as a
// legacy format.
func TestDownConvertLeavesOutMarkersAndBoundsBytes(t *testing.T) {
	data := newBatch(t, 5, 100, 1_700_000_000_000)
	setBaseOffset(data, 10)
	marker := BuildMarker(7, 0, 0, true, time.Unix(1_700_000_000, 0))
	setBaseOffset(marker, 15)
	more := newBatch(t, 2, 100, 1_700_000_001_000)
	setBaseOffset(more, 16)
	stored := append(append(append([]byte(nil), data...), marker...), more...)

	down, err := DownConvert(stored, 1, 12, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, m := range readLegacy(t, down) {
		offsets = append(offsets, m.offset)
	}
	if fmt.Sprint(offsets) != "[12 13 14 16 17]" {
		t.Fatalf("got offsets %v, want [12 13 14 16 17]", offsets)
	}

	one, err := DownConvert(stored, 0, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := readLegacy(t, one); len(msgs) != 1 || msgs[0].offset != 10 {
		t.Fatalf("with maxBytes 1 got %d messages, want the first only", len(msgs))
	}

	onlyMarker, err := DownConvert(marker, 1, 15, 1<<20)
	if err != nil || len(onlyMarker) != 0 {
		t.Fatalf("a marker alone: got %d bytes, error %v; want nothing", len(onlyMarker), err)
	}

	zstd := newBatch(t, 2, 10, 0)
	section, _ := compressedPayload{codec: codecZstd}.compress(zstd[batchHeaderSize:])
	zstd = append(zstd[:batchHeaderSize:batchHeaderSize], section...)
	binary.BigEndian.PutUint16(zstd[fieldAttributes:], codecZstd)
	binary.BigEndian.PutUint32(zstd[fieldBatchLength:], uint32(len(zstd)-batchLengthOverhead))
	binary.BigEndian.PutUint32(zstd[fieldCRC:], crc32Checksum(zstd[fieldAttributes:]))
	if _, err := DownConvert(zstd, 1, 0, 1<<20); !errors.Is(err, ErrUnsupportedCompression) {
		t.Fatalf("zstd batch: got error %v, want %v", err, ErrUnsupportedCompression)
	}
}

// TestXXH32 checks the header checksum's hash against the lz4 package's:
// the content checksum it writes at the end of a frame and the header
// checksum byte.
func TestXXH32(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 15, 16, 17, 100, 1000} {
		content := bytes.Repeat([]byte("tripod!"), n)[:n]
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.ChecksumOption(true)); err != nil {
			t.Fatal(err)
		}
		w.Write(content)
		w.Close()
		frame := buf.Bytes()
		if got, want := xxh32(content), binary.LittleEndian.Uint32(frame[len(frame)-4:]); got != want {
			t.Fatalf("xxh32 of %d bytes: got %#x, want %#x", n, got, want)
		}
		end, _ := lz4DescriptorEnd(frame)
		if got, want := byte(xxh32(frame[4:end])>>8), frame[end]; got != want {
			t.Fatalf("header checksum: got %#x, want %#x", got, want)
		}
	}
}
