package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/hostile"
)

// testLimit is the decompression bound of the validation tests.
const testLimit = 1 << 20

// encodeRecord returns record i of a batch as franz-go encodes it.
func encodeRecord(i int32, key, value []byte) []byte {
	r := kmsg.Record{OffsetDelta: i, Key: key, Value: value}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	return r.AppendTo(nil)
}

// rawBatch wraps a records section in a v2 header with the given
// attributes, record count and lastOffsetDelta, no producer, and a valid
// CRC-32C.
func rawBatch(section []byte, attrs int16, count, lastOffsetDelta int32) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: lastOffsetDelta,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: section,
		Length: int32(minBatchLength + len(section)),
	}
	raw := b.AppendTo(nil)
	setCRC(raw)
	return raw
}

// withCRC returns b with field changed by fn and its CRC-32C recomputed.
func withCRC(b []byte, fn func([]byte)) []byte {
	b = bytes.Clone(b)
	fn(b)
	setCRC(b)
	return b
}

// recordPrefix is the start of a record whose value is valueLen bytes
// that follow it, then a zero header count: with zeros after it, a whole
// record.
func recordPrefix(key []byte, valueLen int64) []byte {
	body := []byte{0}                   // attributes
	body = binary.AppendVarint(body, 0) // timestampDelta
	body = binary.AppendVarint(body, 0) // offsetDelta
	body = appendVarintBytes(body, key) // key
	body = binary.AppendVarint(body, valueLen)
	length := int64(len(body)) + valueLen + 1 // value, header count
	return append(binary.AppendVarint(nil, length), body...)
}

func TestValidateProduced(t *testing.T) {
	keyed := buildBatch(t, batchSpec{records: []testRecord{kv("a", "1"), kv("b", "2")}})
	unkeyed := buildBatch(t, batchSpec{records: []testRecord{kv("a", "1"), {value: []byte("no key")}}})
	r0, r1 := encodeRecord(0, []byte("k"), []byte("v0")), encodeRecord(1, []byte("k"), []byte("v1"))
	two := append(bytes.Clone(r0), r1...)
	compressed := func(codec kgo.CompressionCodec, records ...testRecord) []byte {
		return buildBatch(t, batchSpec{records: records, codec: codec, compressed: true})
	}
	xerial, err := compressedPayload{codec: codecSnappy, xerial: true}.compress(two)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 100<<10)
	bomb := recordPrefix([]byte("k"), 1<<30)
	tests := []struct {
		name      string
		records   []byte
		compacted bool
		want      error
	}{
		{"uncompressed", keyed, false, nil},
		{"gzip", compressed(kgo.GzipCompression(), kv("a", "1"), kv("b", "2")), false, nil},
		{"snappy", compressed(kgo.SnappyCompression(), kv("a", "1"), testRecord{key: []byte("b"), value: big}), false, nil},
		{"snappy, xerial framing", rawBatch(xerial, codecSnappy, 2, 1), false, nil},
		{"lz4", compressed(kgo.Lz4Compression(), kv("a", "1"), kv("b", "2")), false, nil},
		{"zstd", compressed(kgo.ZstdCompression(), kv("a", "1"), kv("b", "2")), false, nil},
		{"two batches", append(bytes.Clone(keyed), keyed...), true, nil},
		{"a header", rawBatch(func() []byte {
			r := kmsg.Record{Key: []byte("k"), Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}, {Key: "n"}}}
			r.Length = int32(len(r.AppendTo(nil)) - 1)
			return r.AppendTo(nil)
		}(), 0, 1, 0), false, nil},
		{"a zstd batch of 1 MiB, the limit", func() []byte {
			valueLen := int64(testLimit)
			for int64(len(recordPrefix([]byte("k"), valueLen)))+valueLen+1 > testLimit {
				valueLen--
			}
			prefix := recordPrefix([]byte("k"), valueLen)
			return rawBatch(hostile.ZstdZeros(prefix, valueLen+1), codecZstd, 1, 0)
		}(), false, nil},

		{"no batch", nil, false, ErrCorruptMessage},
		{"magic 1", withCRC(keyed, func(b []byte) { b[fieldMagic] = 1 }), false, ErrUnsupportedMagic},
		{"bad crc", func() []byte { b := bytes.Clone(keyed); b[len(b)-1] ^= 1; return b }(), false, ErrCorruptMessage},
		{"length past the end", keyed[:len(keyed)-1], false, ErrCorruptMessage},
		{"codec 7", withCRC(keyed, func(b []byte) { b[fieldAttributes+1] |= 7 }), false, ErrUnsupportedCompression},
		{"codec 5", withCRC(keyed, func(b []byte) { b[fieldAttributes+1] |= 5 }), false, ErrUnsupportedCompression},
		{"gzip of garbage", rawBatch(bytes.Repeat([]byte{0xa5}, 100), codecGzip, 1, 0), false, ErrCorruptMessage},
		{"snappy of garbage", rawBatch(bytes.Repeat([]byte{0xff}, 100), codecSnappy, 1, 0), false, ErrCorruptMessage},
		{"lz4 of garbage", rawBatch(bytes.Repeat([]byte{0xa5}, 100), codecLZ4, 1, 0), false, ErrCorruptMessage},
		{"zstd of garbage", rawBatch(bytes.Repeat([]byte{0xa5}, 100), codecZstd, 1, 0), false, ErrCorruptMessage},
		{"gzip cut short", func() []byte {
			b := compressed(kgo.GzipCompression(), kv("a", "1"), kv("b", "2"))
			b = b[:len(b)-6]
			return withCRC(b, func(b []byte) { binary.BigEndian.PutUint32(b[fieldBatchLength:], uint32(len(b)-batchLengthOverhead)) })
		}(), false, ErrCorruptMessage},
		{"snappy block claiming more than snappy can encode", rawBatch(append(binary.AppendUvarint(nil, 1<<30), 0), codecSnappy, 1, 0), false, ErrCorruptMessage},

		{"garbage records", rawBatch(bytes.Repeat([]byte{0xa5}, 100), 0, 1, 0), false, ErrInvalidRecord},
		{"garbage records in gzip", func() []byte {
			payload, _ := compressedPayload{codec: codecGzip}.compress(bytes.Repeat([]byte{0xa5}, 100))
			return rawBatch(payload, codecGzip, 1, 0)
		}(), false, ErrInvalidRecord},
		{"record length past the batch", rawBatch(append(binary.AppendVarint(nil, 1000), r0[1:]...), 0, 1, 0), false, ErrInvalidRecord},
		{"record length short of its fields", rawBatch(append(binary.AppendVarint(nil, int64(len(r0)-3)), r0[1:]...), 0, 1, 0), false, ErrInvalidRecord},
		{"record length zero", rawBatch([]byte{0}, 0, 1, 0), false, ErrInvalidRecord},
		{"key past the record", rawBatch(func() []byte {
			b := bytes.Clone(r0)
			b[4] = 100 // the key length varint (50), after length, attributes and two deltas
			return b
		}(), 0, 1, 0), false, ErrInvalidRecord},
		{"negative header count", rawBatch(func() []byte {
			b := bytes.Clone(r0)
			b[len(b)-1] = 1 // -1
			return b
		}(), 0, 1, 0), false, ErrInvalidRecord},
		{"record count above the records", rawBatch(r0, 0, 2, 1), false, ErrInvalidRecord},
		{"record count below the records", rawBatch(two, 0, 1, 0), false, ErrInvalidRecord},
		{"record count not lastOffsetDelta+1", rawBatch(two, 0, 2, 2), false, ErrInvalidRecord},
		{"record count zero", rawBatch(nil, 0, 0, -1), false, ErrInvalidRecord},
		{"offset deltas 0, 0", rawBatch(append(bytes.Clone(r0), r0...), 0, 2, 1), false, ErrInvalidRecord},
		{"control bit", withCRC(keyed, func(b []byte) { b[fieldAttributes+1] |= attrControl }), false, ErrInvalidRecord},
		{"transactional bit without a producer id", withCRC(keyed, func(b []byte) { b[fieldAttributes+1] |= attrTransactional }), false, ErrInvalidRecord},
		{"transactional bit without a producer epoch", withCRC(keyed, func(b []byte) {
			b[fieldAttributes+1] |= attrTransactional
			binary.BigEndian.PutUint64(b[fieldProducerID:], 7)
			binary.BigEndian.PutUint32(b[fieldBaseSequence:], 0)
		}), false, ErrInvalidRecord},
		{"transactional batch of a producer", withCRC(keyed, func(b []byte) {
			b[fieldAttributes+1] |= attrTransactional
			binary.BigEndian.PutUint64(b[fieldProducerID:], 7)
			binary.BigEndian.PutUint16(b[fieldProducerEpoch:], 0)
			binary.BigEndian.PutUint32(b[fieldBaseSequence:], 0)
		}), false, nil},
		{"producer id without a sequence", withCRC(keyed, func(b []byte) { binary.BigEndian.PutUint64(b[fieldProducerID:], 7) }), false, ErrInvalidRecord},
		{"null key, compacted", unkeyed, true, ErrInvalidRecord},
		{"null key in zstd, compacted", compressed(kgo.ZstdCompression(), testRecord{value: []byte("v")}), true, ErrInvalidRecord},

		{"zstd inflating to 1 GiB", rawBatch(hostile.ZstdZeros(bomb, 1<<30+1), codecZstd, 1, 0), false, ErrRecordTooLarge},
		{"gzip inflating past the limit", func() []byte {
			records := append(recordPrefix([]byte("k"), 4*testLimit), make([]byte, 4*testLimit+1)...)
			payload, _ := compressedPayload{codec: codecGzip}.compress(records)
			return rawBatch(payload, codecGzip, 1, 0)
		}(), false, ErrRecordTooLarge},
		{"lz4 inflating past the limit", func() []byte {
			records := append(recordPrefix([]byte("k"), 4*testLimit), make([]byte, 4*testLimit+1)...)
			payload, _ := compressedPayload{codec: codecLZ4}.compress(records)
			return rawBatch(payload, codecLZ4, 1, 0)
		}(), false, ErrRecordTooLarge},
		{"snappy inflating past the limit", func() []byte {
			records := append(recordPrefix([]byte("k"), 4*testLimit), make([]byte, 4*testLimit+1)...)
			payload, _ := compressedPayload{codec: codecSnappy, xerial: true}.compress(records)
			return rawBatch(payload, codecSnappy, 1, 0)
		}(), false, ErrRecordTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateProduced(tt.records, ProduceValidation{Compacted: tt.compacted, MaxDecompressedBytes: testLimit})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestValidateProducedNullKeyIndex(t *testing.T) {
	keyed := buildBatch(t, batchSpec{records: []testRecord{kv("a", "1"), kv("b", "2")}})
	unkeyed := buildBatch(t, batchSpec{records: []testRecord{kv("a", "1"), {value: []byte("no key")}}})
	err := ValidateProduced(append(bytes.Clone(keyed), unkeyed...), ProduceValidation{Compacted: true, MaxDecompressedBytes: testLimit})
	var nk *NullKeyError
	if !errors.As(err, &nk) || nk.Index != 3 {
		t.Fatalf("got %v, want a NullKeyError at index 3", err)
	}
	if err := ValidateProduced(unkeyed, ProduceValidation{MaxDecompressedBytes: testLimit}); err != nil {
		t.Fatalf("a null key on a topic that is not compacted: got %v, want no error", err)
	}
}

// TestValidateProducedBoundedMemory validates a zstd batch of 32 KiB
// that inflates to 1 GiB: what it allocates stays near the codec's
// window and the scan buffer, far from the bound of 64 MiB.
func TestValidateProducedBoundedMemory(t *testing.T) {
	batch := rawBatch(hostile.ZstdZeros(recordPrefix([]byte("k"), 1<<30), 1<<30+1), codecZstd, 1, 0)
	v := ProduceValidation{MaxDecompressedBytes: 64 << 20}
	_ = ValidateProduced(batch, v) // Fill the pools.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := ValidateProduced(batch, v); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("got %v, want %v", err, ErrRecordTooLarge)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("got %d KiB allocated for a %d KiB batch, want at most 4096", got>>10, len(batch)>>10)
	}
}

// BenchmarkValidateProduced validates 1 MiB of 1 KiB or 100 B records
// in one batch as a produce does, uncompressed and with each codec (MB/s
// of the records uncompressed).
func BenchmarkValidateProduced(b *testing.B) {
	for _, size := range []int{1024, 100} {
		for _, codec := range []struct {
			name  string
			codec kgo.CompressionCodec
			on    bool
		}{{"none", kgo.NoCompression(), false}, {"snappy", kgo.SnappyCompression(), true}, {"lz4", kgo.Lz4Compression(), true}, {"zstd", kgo.ZstdCompression(), true}, {"gzip", kgo.GzipCompression(), true}} {
			// Words and numbers: text that compresses about 3 to 1.
			words := strings.Fields("the broker validates every produced batch before it is appended and refuses what a consumer could not read")
			rng := rand.New(rand.NewSource(1))
			var records []testRecord
			for range (1 << 20) / size {
				var v []byte
				for len(v) < size {
					v = fmt.Appendf(v, "%s %d ", words[rng.Intn(len(words))], rng.Intn(100000))
				}
				records = append(records, testRecord{key: []byte("key"), value: v[:size]})
			}
			batch := buildBatch(b, batchSpec{records: records, codec: codec.codec, compressed: codec.on})
			plain := buildBatch(b, batchSpec{records: records})
			name := codec.name + "/" + map[int]string{1024: "1KiB", 100: "100B"}[size]
			b.Run(name, func(b *testing.B) {
				v := ProduceValidation{MaxDecompressedBytes: 64 << 20}
				b.SetBytes(int64(len(plain))) // MB/s of records, decompressed.
				b.ReportAllocs()
				for b.Loop() {
					if err := ValidateProduced(batch, v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
