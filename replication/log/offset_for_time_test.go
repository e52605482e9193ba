package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// timedRecord is a record of a timedSpec batch: its offset and timestamp
// deltas from the batch's base offset and first timestamp.
type timedRecord struct {
	offsetDelta    int32
	timestampDelta int64
}

// timedSpec describes a batch whose record offsets and timestamps the test
// chooses: gaps as compaction leaves them, timestamps out of order.
type timedSpec struct {
	baseOffset     int64
	firstTimestamp int64
	// maxTimestamp is the batch's; 0 stands for the largest record
	// timestamp (or firstTimestamp when there is no record).
	maxTimestamp int64
	// lastOffsetDelta is the batch's; -1 stands for the last record's
	// offset delta.
	lastOffsetDelta int32
	attributes      int16
	// codec, if set, compresses the records.
	codec   *kgo.CompressionCodec
	records []timedRecord
}

// inOrder is n records at offset deltas 0..n-1, timestamps step apart.
func inOrder(n int, step int64) []timedRecord {
	out := make([]timedRecord, n)
	for i := range out {
		out[i] = timedRecord{offsetDelta: int32(i), timestampDelta: int64(i) * step}
	}
	return out
}

// timedBatch encodes spec with franz-go's kmsg and kgo's compressor.
func timedBatch(tb testing.TB, spec timedSpec) []byte {
	tb.Helper()
	var records []byte
	maxTimestamp, lastOffsetDelta := spec.firstTimestamp, spec.lastOffsetDelta
	for i, r := range spec.records {
		kr := kmsg.Record{
			TimestampDelta64: r.timestampDelta,
			OffsetDelta:      r.offsetDelta,
			Key:              fmt.Appendf(nil, "key-%d", i),
			Value:            fmt.Appendf(nil, "value-%d", i),
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		records = kr.AppendTo(records)
		maxTimestamp = max(maxTimestamp, spec.firstTimestamp+r.timestampDelta)
		if spec.lastOffsetDelta < 0 {
			lastOffsetDelta = r.offsetDelta
		}
	}
	if spec.maxTimestamp != 0 {
		maxTimestamp = spec.maxTimestamp
	}
	attrs := spec.attributes
	if spec.codec != nil {
		c, err := kgo.DefaultCompressor(*spec.codec)
		if err != nil {
			tb.Fatal(err)
		}
		out, codec := c.Compress(new(bytes.Buffer), records)
		if codec == 0 {
			tb.Fatalf("the compressor did not compress")
		}
		records, attrs = append([]byte(nil), out...), attrs|int16(codec)
	}
	b := kmsg.RecordBatch{
		FirstOffset: spec.baseOffset, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: lastOffsetDelta, FirstTimestamp: spec.firstTimestamp, MaxTimestamp: maxTimestamp,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(spec.records)), Records: records,
	}
	if spec.attributes&(attrControl|attrTransactional) != 0 {
		b.ProducerID, b.ProducerEpoch = 7, 0
	}
	b.Length = int32(minBatchLength + len(records))
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[fieldCRC:], crc32Checksum(raw[fieldAttributes:]))
	return raw
}

// appendFollower appends batches that carry their own offsets.
func appendFollower(tb testing.TB, l *Log, batches ...[]byte) {
	tb.Helper()
	if _, err := l.AppendAsFollower(bytes.Join(batches, nil)); err != nil {
		tb.Fatalf("AppendAsFollower: %v", err)
	}
}

// scanOffsetForTime is OffsetForTime worked out the slow way, to check it
// against: every batch from the log start read with l.Read, parsed by
// kmsg and decompressed by kgo, no index used.
func scanOffsetForTime(tb testing.TB, l *Log, ts int64) (offset, timestamp int64, ok bool) {
	tb.Helper()
	dec := kgo.DefaultDecompressor()
	start, end := l.StartOffset(), l.EndOffset()
	for next := start; next < end; {
		data, err := l.Read(next, 1<<20)
		if err != nil {
			tb.Fatalf("Read(%d): %v", next, err)
		}
		if len(data) == 0 {
			tb.Fatalf("Read(%d) below the end %d: no batch", next, end)
		}
		for len(data) > 0 {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(data); err != nil {
				tb.Fatalf("decode batch at %d: %v", next, err)
			}
			data = data[int(rb.Length)+batchLengthOverhead:]
			next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			if rb.MaxTimestamp < ts || rb.Attributes&attrControl != 0 {
				continue
			}
			records := rb.Records
			if codec := rb.Attributes & codecMask; codec != 0 && rb.NumRecords > 0 {
				if records, err = dec.Decompress(rb.Records, kgo.CompressionCodecType(codec)); err != nil {
					tb.Fatalf("decompress batch at %d: %v", rb.FirstOffset, err)
				}
			}
			for range rb.NumRecords {
				length, n := binary.Varint(records)
				var kr kmsg.Record
				if err := kr.ReadFrom(records[:n+int(length)]); err != nil {
					tb.Fatalf("decode a record of batch %d: %v", rb.FirstOffset, err)
				}
				records = records[n+int(length):]
				o, t := rb.FirstOffset+int64(kr.OffsetDelta), rb.FirstTimestamp+kr.TimestampDelta64
				if rb.Attributes&attrLogAppendTime != 0 {
					t = rb.MaxTimestamp
				}
				if o >= start && t >= ts {
					return o, t, true
				}
			}
		}
	}
	return 0, 0, false
}

// timeCase is a query of OffsetForTime and its answer.
type timeCase struct {
	ts                   int64
	wantOffset, wantTime int64
	wantOK               bool
}

// checkOffsetForTime fails the test unless OffsetForTime answers each
// case as it wants, and as scanOffsetForTime does.
func checkOffsetForTime(tb testing.TB, what string, l *Log, cases []timeCase) {
	tb.Helper()
	for _, c := range cases {
		offset, ts, ok, err := l.OffsetForTime(c.ts)
		if err != nil {
			tb.Fatalf("%s: OffsetForTime(%d): %v", what, c.ts, err)
		}
		if ok != c.wantOK || (ok && (offset != c.wantOffset || ts != c.wantTime)) {
			tb.Fatalf("%s: OffsetForTime(%d): got %d, %d, %v, want %d, %d, %v", what, c.ts, offset, ts, ok, c.wantOffset, c.wantTime, c.wantOK)
		}
		if so, sts, sok := scanOffsetForTime(tb, l, c.ts); sok != ok || (ok && (so != offset || sts != ts)) {
			tb.Fatalf("%s: OffsetForTime(%d): got %d, %d, %v, a scan of the log finds %d, %d, %v", what, c.ts, offset, ts, ok, so, sts, sok)
		}
	}
}

// TestOffsetForTimeWithinABatch is the ListOffsets report: ten records in
// one batch, a second apart; a time finds the record, not the batch.
func TestOffsetForTimeWithinABatch(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, testConfig())
	const base = 1_800_000_000_000
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: base, lastOffsetDelta: -1, records: inOrder(10, 1000)}))
	// Timestamps out of offset order: the first record in offset order
	// at or after the time wins (offsets 10..13 at +5, +1, +9, +3 s).
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: base + 20_000, lastOffsetDelta: -1, records: []timedRecord{
		{0, 5000}, {1, 1000}, {2, 9000}, {3, 3000},
	}}))
	cases := []timeCase{
		{0, 0, base, true},
		{base, 0, base, true},
		{base + 1, 1, base + 1000, true},
		{base + 3000, 3, base + 3000, true},
		{base + 2500, 3, base + 3000, true},
		{base + 9000, 9, base + 9000, true},
		{base + 9001, 10, base + 25_000, true},
		{base + 22_000, 10, base + 25_000, true},
		{base + 25_001, 12, base + 29_000, true},
		{base + 29_000, 12, base + 29_000, true},
		{base + 29_001, 0, 0, false},
	}
	checkOffsetForTime(t, "while written", l, cases)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, testConfig())
	checkOffsetForTime(t, "after reopen", l, cases)

	// A log start inside the batch: the records below it are not found.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeStartOffset(dir, 4); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, testConfig())
	if l.StartOffset() != 4 {
		t.Fatalf("log start: got %d, want 4", l.StartOffset())
	}
	checkOffsetForTime(t, "with the log start at 4", l, []timeCase{
		{0, 4, base + 4000, true},
		{base + 3000, 4, base + 3000 + 1000, true},
		{base + 6000, 6, base + 6000, true},
	})
}

func TestOffsetForTimeCompressed(t *testing.T) {
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	} {
		t.Run(codec.name, func(t *testing.T) {
			l := openTestLog(t, t.TempDir(), testConfig())
			// Offsets 0..19 at 1000..1019, then 20..39 at 2000..2038 (2 ms
			// apart).
			mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 1000, lastOffsetDelta: -1, codec: &codec.codec, records: inOrder(20, 1)}))
			mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 2000, lastOffsetDelta: -1, codec: &codec.codec, records: inOrder(20, 2)}))
			checkOffsetForTime(t, codec.name, l, []timeCase{
				{1000, 0, 1000, true},
				{1007, 7, 1007, true},
				{1019, 19, 1019, true},
				{1020, 20, 2000, true},
				{2011, 26, 2012, true},
				{2038, 39, 2038, true},
				{2039, 0, 0, false},
			})
		})
	}
}

// TestOffsetForTimeLogAppendTime: every record of a LogAppendTime batch
// has the batch's maxTimestamp, whatever its create time.
func TestOffsetForTimeLogAppendTime(t *testing.T) {
	l := openTestLog(t, t.TempDir(), testConfig())
	zstd := kgo.ZstdCompression()
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 100, maxTimestamp: 5000, lastOffsetDelta: -1, attributes: attrLogAppendTime, records: inOrder(5, 1)}))
	// Compacted: offsets 5 and 6 gone.
	appendFollower(t, l, timedBatch(t, timedSpec{baseOffset: 5, firstTimestamp: 200, maxTimestamp: 6000, lastOffsetDelta: 4, attributes: attrLogAppendTime, codec: &zstd, records: []timedRecord{
		{2, 2}, {3, 3}, {4, 4},
	}}))
	checkOffsetForTime(t, "LogAppendTime", l, []timeCase{
		{0, 0, 5000, true},
		{103, 0, 5000, true},
		{5000, 0, 5000, true},
		{5001, 7, 6000, true},
		{6000, 7, 6000, true},
		{6001, 0, 0, false},
	})
}

// TestOffsetForTimeCompactedBatches: a batch whose records at or after the
// time compaction removed, or left empty, gives way to the next batch.
func TestOffsetForTimeCompactedBatches(t *testing.T) {
	for _, codec := range []*kgo.CompressionCodec{nil, new(kgo.ZstdCompression())} {
		name := "uncompressed"
		if codec != nil {
			name = "zstd"
		}
		t.Run(name, func(t *testing.T) {
			l := openTestLog(t, t.TempDir(), testConfig())
			appendFollower(t, l,
				// Offsets 0..4 once at 100..104; 1 and 3 are left, the
				// record of the max timestamp is gone.
				timedBatch(t, timedSpec{baseOffset: 0, firstTimestamp: 100, maxTimestamp: 104, lastOffsetDelta: 4, codec: codec, records: []timedRecord{{1, 1}, {3, 3}}}),
				// Offsets 5..9: emptied, as Kafka keeps a producer's last
				// batch.
				timedBatch(t, timedSpec{baseOffset: 5, firstTimestamp: 200, maxTimestamp: 300, lastOffsetDelta: 4}),
				// Offsets 10..14 at 400..404; 12 and 14 are left.
				timedBatch(t, timedSpec{baseOffset: 10, firstTimestamp: 400, lastOffsetDelta: 4, codec: codec, records: []timedRecord{{2, 2}, {4, 4}}}),
			)
			// After a jump in offsets (dropped batches): 20..22 at 500..502.
			appendFollower(t, l, timedBatch(t, timedSpec{baseOffset: 20, firstTimestamp: 500, lastOffsetDelta: -1, codec: codec, records: inOrder(3, 1)}))
			checkOffsetForTime(t, name, l, []timeCase{
				{0, 1, 101, true},
				{101, 1, 101, true},
				{102, 3, 103, true},
				{104, 12, 402, true},
				{250, 12, 402, true},
				{403, 14, 404, true},
				{404, 14, 404, true},
				{405, 20, 500, true},
				{502, 22, 502, true},
				{503, 0, 0, false},
			})
		})
	}
}

// TestOffsetForTimeBetweenBatches: a time between two batches finds the
// first record of the later one, across segments and over a control
// batch.
func TestOffsetForTimeBetweenBatches(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = int64(len(timedBatch(t, timedSpec{firstTimestamp: 1000, lastOffsetDelta: -1, records: inOrder(5, 1)})) + 1)
	l := openTestLog(t, dir, cfg)
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 1000, lastOffsetDelta: -1, records: inOrder(5, 1)}))
	// Offset 5: a transaction's commit marker at 1500.
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 1500, lastOffsetDelta: -1, attributes: attrControl | attrTransactional, records: inOrder(1, 0)}))
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 2000, lastOffsetDelta: -1, records: inOrder(5, 1)}))
	mustAppend(t, l, timedBatch(t, timedSpec{firstTimestamp: 3000, lastOffsetDelta: -1, records: inOrder(5, 1)}))
	if got := segmentFiles(t, dir); len(got) < 3 {
		t.Fatalf("segments: got %v, want one a batch", got)
	}
	cases := []timeCase{
		{1004, 4, 1004, true},
		{1005, 6, 2000, true},
		{1500, 6, 2000, true},
		{1999, 6, 2000, true},
		{2005, 11, 3000, true},
		{2500, 11, 3000, true},
		{3004, 15, 3004, true},
		{3005, 0, 0, false},
	}
	checkOffsetForTime(t, "while written", l, cases)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, base := range segmentFiles(t, dir) {
		removeFile(t, segmentPath(dir, base, timeIndexSuffix))
	}
	l = openTestLog(t, dir, cfg)
	checkOffsetForTime(t, "after rebuilding the time indexes", l, cases)
}

// TestOffsetForTimeAfterClean checks OffsetForTime against a scan of a
// log the cleaner compacted, every quarter second of its records. Batch
// i, at i s, holds a key of its own then the key "hot", which the next
// batch overwrites: compaction keeps the first record of each batch but
// its last, the one of its maxTimestamp; every third batch holds "hot"
// twice and is emptied.
func TestOffsetForTimeAfterClean(t *testing.T) {
	for _, codec := range []*kgo.CompressionCodec{nil, new(kgo.Lz4Compression())} {
		name := "uncompressed"
		if codec != nil {
			name = "lz4"
		}
		t.Run(name, func(t *testing.T) {
			l := openTestLog(t, t.TempDir(), compactConfig())
			var m compactionModel
			const rounds = 40
			first := baseTime.UnixMilli()
			for i := range rounds {
				spec := batchSpec{records: []testRecord{kv(fmt.Sprintf("own-%d", i), "v"), kv("hot", "v")}, timestamp: first + int64(i)*1000}
				if i%3 == 2 {
					spec.records[0] = kv("hot", "v")
				}
				if codec != nil {
					spec.codec, spec.compressed = *codec, true
				}
				m.appendBatch(t, l, spec)
			}
			if res := mustClean(t, l, eagerClean(), baseTime.Add(time.Hour)); res.RecordsRemoved == 0 {
				t.Fatalf("Clean removed nothing: %+v", res)
			}
			sameRecords(t, "records after Clean", readRecords(t, l), m.cleaned(activeBase(l), 0))
			for ts := first - 1; ts <= first+rounds*1000+1; ts += 250 {
				for _, ts := range []int64{ts, ts + 1, ts + 2} {
					offset, got, ok, err := l.OffsetForTime(ts)
					if err != nil {
						t.Fatal(err)
					}
					wantOffset, want, wantOK := scanOffsetForTime(t, l, ts)
					if ok != wantOK || offset != wantOffset || got != want {
						t.Fatalf("OffsetForTime(%d): got %d, %d, %v, a scan of the log finds %d, %d, %v", ts, offset, got, ok, wantOffset, want, wantOK)
					}
				}
			}
		})
	}
}
