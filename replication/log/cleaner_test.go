package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is a record of a test batch; a nil key or value is null.
type testRecord struct {
	key, value []byte
}

// kv is a record with key k and value v.
func kv(k, v string) testRecord { return testRecord{key: []byte(k), value: []byte(v)} }

// tombstone is a record with key k and a null value.
func tombstone(k string) testRecord { return testRecord{key: []byte(k)} }

// batchSpec describes a test batch.
type batchSpec struct {
	records []testRecord
	// timestamp is the first record's; each next one is 1 ms later.
	timestamp int64
	// codec compresses the records; the zero value does not.
	codec kgo.CompressionCodec
	// compressed is set when codec is.
	compressed bool
	// producerID, producerEpoch and baseSequence are the idempotent
	// producer's; producerID 0 stands for none (-1).
	producerID    int64
	producerEpoch int16
	baseSequence  int32
}

// buildBatch encodes spec as a producer would send it, with franz-go's
// kmsg records and kgo's compressor.
func buildBatch(tb testing.TB, spec batchSpec) []byte {
	tb.Helper()
	var records []byte
	for i, r := range spec.records {
		kr := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		records = kr.AppendTo(records)
	}
	var attrs int16
	if spec.compressed {
		c, err := kgo.DefaultCompressor(spec.codec)
		if err != nil {
			tb.Fatal(err)
		}
		out, codec := c.Compress(new(bytes.Buffer), records)
		records, attrs = append([]byte(nil), out...), int16(codec)
	}
	n := len(spec.records)
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(n - 1), FirstTimestamp: spec.timestamp, MaxTimestamp: spec.timestamp + int64(n-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: records,
	}
	if spec.producerID > 0 {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = spec.producerID, spec.producerEpoch, spec.baseSequence
	}
	b.Length = int32(minBatchLength + len(records))
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[fieldCRC:], crc32Checksum(raw[fieldAttributes:]))
	return raw
}

// logRecord is a record as read back from the log.
type logRecord struct {
	offset     int64
	key, value []byte
	// batchMaxTimestamp is its batch's maxTimestamp.
	batchMaxTimestamp int64
}

// String formats the record for failure messages.
func (r logRecord) String() string {
	value := "null"
	if r.value != nil {
		value = string(r.value)
	}
	return fmt.Sprintf("%d:%s=%s", r.offset, r.key, value)
}

// readRecords reads the whole log as a consumer would: each batch parsed
// by franz-go's kmsg, its CRC-32C checked, its records decompressed by
// kgo's decompressor and parsed by kmsg. It fails the test unless every
// batch's offsets follow on from the previous one's.
func readRecords(tb testing.TB, l *Log) []logRecord {
	tb.Helper()
	var out []logRecord
	dec := kgo.DefaultDecompressor()
	offset, end := l.StartOffset(), l.EndOffset()
	for offset < end {
		data, err := l.Read(offset, 1<<20)
		if err != nil {
			tb.Fatalf("read at offset %d: %v", offset, err)
		}
		if len(data) == 0 {
			tb.Fatalf("read at offset %d: got no batch, want one below the log end %d", offset, end)
		}
		for len(data) > 0 {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(data); err != nil {
				tb.Fatalf("decode batch at offset %d: %v", offset, err)
			}
			size := int(rb.Length) + batchLengthOverhead
			if got := crc32Checksum(data[fieldAttributes:size]); got != uint32(rb.CRC) {
				tb.Fatalf("batch at offset %d: crc %#x, computed %#x", rb.FirstOffset, uint32(rb.CRC), got)
			}
			if rb.FirstOffset < offset && len(out) > 0 && rb.FirstOffset <= out[len(out)-1].offset {
				tb.Fatalf("batch at offset %d after record %d", rb.FirstOffset, out[len(out)-1].offset)
			}
			records := rb.Records
			if codec := rb.Attributes & codecMask; codec != 0 && rb.NumRecords > 0 {
				if records, err = dec.Decompress(rb.Records, kgo.CompressionCodecType(codec)); err != nil {
					tb.Fatalf("decompress batch at offset %d: %v", rb.FirstOffset, err)
				}
			}
			for i := int32(0); i < rb.NumRecords; i++ {
				length, n := binary.Varint(records)
				var kr kmsg.Record
				if err := kr.ReadFrom(records[:n+int(length)]); err != nil {
					tb.Fatalf("decode record %d of batch at offset %d: %v", i, rb.FirstOffset, err)
				}
				out = append(out, logRecord{offset: rb.FirstOffset + int64(kr.OffsetDelta), key: kr.Key, value: kr.Value, batchMaxTimestamp: rb.MaxTimestamp})
				records = records[n+int(length):]
			}
			offset = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			data = data[size:]
		}
	}
	return out
}

// compactionModel is what the log holds, record by record, and what
// cleaning must leave.
type compactionModel struct {
	records []logRecord
}

// appendBatch appends spec to l and to the model.
func (m *compactionModel) appendBatch(tb testing.TB, l *Log, spec batchSpec) AppendResult {
	tb.Helper()
	res := mustAppend(tb, l, buildBatch(tb, spec))
	for i, r := range spec.records {
		m.records = append(m.records, logRecord{offset: res.BaseOffset + int64(i), key: r.key, value: r.value, batchMaxTimestamp: spec.timestamp + int64(len(spec.records)-1)})
	}
	return res
}

// cleaned returns the records a compaction of [0, end) leaves: below end,
// only the latest record of each key, tombstones whose batch's
// maxTimestamp is below horizon dropped; at and after end, all of them.
func (m *compactionModel) cleaned(end, horizon int64) []logRecord {
	latest := make(map[string]int64)
	for _, r := range m.records {
		if r.offset < end {
			latest[string(r.key)] = r.offset
		}
	}
	var out []logRecord
	for _, r := range m.records {
		if r.offset >= end {
			out = append(out, r)
			continue
		}
		if latest[string(r.key)] != r.offset || (r.value == nil && r.batchMaxTimestamp < horizon) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// sameRecords fails the test unless got and want hold the same offsets,
// keys and values.
func sameRecords(tb testing.TB, what string, got, want []logRecord) {
	tb.Helper()
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = got[i].offset == want[i].offset && bytes.Equal(got[i].key, want[i].key) &&
			bytes.Equal(got[i].value, want[i].value) && (got[i].value == nil) == (want[i].value == nil)
	}
	if !same {
		tb.Fatalf("%s: got %d records %v, want %d records %v", what, len(got), got, len(want), want)
	}
}

// compactConfig is a log config of small segments, about five batches of
// a few small records each.
func compactConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 100
	return cfg
}

// eagerClean cleans whatever is dirty and keeps tombstones for an hour.
func eagerClean() CleanConfig {
	cfg := DefaultCleanConfig()
	cfg.MinCleanableDirtyRatio = 0
	cfg.DeleteRetention = time.Hour
	return cfg
}

// baseTime is the timestamp of the first test record (ms).
var baseTime = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fillOverwrites appends batches rounds of two records each, overwriting
// the keys key-0..key-(keys-1) over and over, timestamps 1 s apart.
func fillOverwrites(tb testing.TB, l *Log, m *compactionModel, rounds, keys int, codec *kgo.CompressionCodec) {
	tb.Helper()
	for i := range rounds {
		spec := batchSpec{
			records: []testRecord{
				kv(fmt.Sprintf("key-%d", (2*i)%keys), fmt.Sprintf("v%d", 2*i)),
				kv(fmt.Sprintf("key-%d", (2*i+1)%keys), fmt.Sprintf("v%d", 2*i+1)),
			},
			timestamp: baseTime.UnixMilli() + int64(i)*1000,
		}
		if codec != nil {
			spec.codec, spec.compressed = *codec, true
		}
		m.appendBatch(tb, l, spec)
	}
}

// activeBase is the base offset of the log's active segment.
func activeBase(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().baseOffset
}

// mustClean runs a pass and fails the test on error.
func mustClean(tb testing.TB, l *Log, cfg CleanConfig, now time.Time) CleanResult {
	tb.Helper()
	res, err := l.Clean(cfg, now)
	if err != nil {
		tb.Fatalf("Clean: %v", err)
	}
	return res
}

func TestCleanKeepsTheLatestRecordPerKey(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, compactConfig())
	var m compactionModel
	fillOverwrites(t, l, &m, 60, 5, nil)
	end, base := l.EndOffset(), activeBase(l)
	activeBefore, err := os.ReadFile(segmentPath(dir, base, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	now := baseTime.Add(time.Hour)

	res := mustClean(t, l, eagerClean(), now)
	if !res.Cleaned || res.CleanedTo != base || res.More || res.SegmentsRewritten == 0 || res.RecordsRemoved == 0 {
		t.Fatalf("Clean: got %+v, want a pass up to the active segment's base %d", res, base)
	}
	want := m.cleaned(base, 0)
	sameRecords(t, "records after Clean", readRecords(t, l), want)
	if got := l.EndOffset(); got != end {
		t.Fatalf("EndOffset after Clean: got %d, want %d", got, end)
	}
	if got, err := os.ReadFile(segmentPath(dir, base, logSuffix)); err != nil || !bytes.Equal(got, activeBefore) {
		t.Fatalf("active segment after Clean: got %d bytes (%v), want its %d bytes unchanged", len(got), err, len(activeBefore))
	}
	checkReadsAtEveryOffset(t, l, want)
	checkIndexes(t, dir)

	// A second pass finds nothing dirty.
	if res := mustClean(t, l, eagerClean(), now); res.Cleaned {
		t.Fatalf("second Clean: got %+v, want no pass", res)
	}
	// The cleaned log reopens the same, indexes included.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, compactConfig())
	sameRecords(t, "records after reopening", readRecords(t, l), want)
	checkReadsAtEveryOffset(t, l, want)
	if got := l.EndOffset(); got != end {
		t.Fatalf("EndOffset after reopening: got %d, want %d", got, end)
	}
	// Appends go on at the end, and a later pass cleans them too.
	fillOverwrites(t, l, &m, 30, 5, nil)
	base = activeBase(l)
	mustClean(t, l, eagerClean(), now)
	sameRecords(t, "records after a second round", readRecords(t, l), m.cleaned(base, 0))
}

// checkReadsAtEveryOffset checks that a read at any offset of the log
// returns, as the first record at or after it, the first surviving
// record: the offsets removed read as the next one kept.
func checkReadsAtEveryOffset(t *testing.T, l *Log, survivors []logRecord) {
	t.Helper()
	dec := kgo.DefaultDecompressor()
	for offset := l.StartOffset(); offset < l.EndOffset(); offset++ {
		i, _ := slices.BinarySearchFunc(survivors, offset, func(r logRecord, o int64) int { return int(r.offset - o) })
		data, err := l.Read(offset, 1)
		if err != nil {
			t.Fatalf("read at offset %d: %v", offset, err)
		}
		got := int64(-1)
		for len(data) > 0 && got < 0 {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(data); err != nil {
				t.Fatalf("decode batch read at offset %d: %v", offset, err)
			}
			records := rb.Records
			if codec := rb.Attributes & codecMask; codec != 0 && rb.NumRecords > 0 {
				if records, err = dec.Decompress(rb.Records, kgo.CompressionCodecType(codec)); err != nil {
					t.Fatal(err)
				}
			}
			for range rb.NumRecords {
				length, n := binary.Varint(records)
				var kr kmsg.Record
				if err := kr.ReadFrom(records[:n+int(length)]); err != nil {
					t.Fatal(err)
				}
				if o := rb.FirstOffset + int64(kr.OffsetDelta); o >= offset {
					got = o
					break
				}
				records = records[n+int(length):]
			}
			if got < 0 {
				// An empty or wholly earlier batch: read on after it.
				next := rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
				if next >= l.EndOffset() {
					break
				}
				if data, err = l.Read(next, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := int64(-1)
		if i < len(survivors) {
			want = survivors[i].offset
		}
		if got != want {
			t.Fatalf("read at offset %d: first record at or after it is %d, want %d", offset, got, want)
		}
	}
}

func TestCleanTombstones(t *testing.T) {
	tests := []struct {
		name string
		// age is how long after the tombstone's batch the pass runs.
		age  time.Duration
		kept bool
	}{
		{name: "younger than delete.retention.ms", age: 30 * time.Minute, kept: true},
		{name: "older than delete.retention.ms", age: 2 * time.Hour, kept: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openTestLog(t, t.TempDir(), compactConfig())
			var m compactionModel
			ts := baseTime.UnixMilli()
			m.appendBatch(t, l, batchSpec{records: []testRecord{kv("a", "1"), kv("b", "1")}, timestamp: ts})
			m.appendBatch(t, l, batchSpec{records: []testRecord{kv("a", "2"), tombstone("b")}, timestamp: ts + 1000})
			fillOverwrites(t, l, &m, 20, 3, nil)
			base := activeBase(l)
			now := time.UnixMilli(ts + 1001).Add(tt.age)
			mustClean(t, l, eagerClean(), now)
			got := readRecords(t, l)
			sameRecords(t, "records after Clean", got, m.cleaned(base, now.Add(-time.Hour).UnixMilli()))
			hasTombstone := slices.ContainsFunc(got, func(r logRecord) bool { return string(r.key) == "b" && r.value == nil })
			if hasB := slices.ContainsFunc(got, func(r logRecord) bool { return string(r.key) == "b" }); hasTombstone != tt.kept || (hasB && !hasTombstone) {
				t.Fatalf("key b after Clean: got %v, want tombstone kept %v and no earlier value", got, tt.kept)
			}
		})
	}
}

func TestCleanMinCompactionLag(t *testing.T) {
	l := openTestLog(t, t.TempDir(), compactConfig())
	var m compactionModel
	fillOverwrites(t, l, &m, 60, 5, nil) // Timestamps baseTime + 0..59 s.
	cfg := eagerClean()
	cfg.MinCompactionLag = 30 * time.Second
	now := baseTime.Add(60 * time.Second)
	res := mustClean(t, l, cfg, now)
	// The first segment holding a record younger than 30 s is where
	// cleaning stops.
	if !res.Cleaned || res.CleanedTo >= activeBase(l) {
		t.Fatalf("Clean: got %+v, want a pass ending below the active segment %d", res, activeBase(l))
	}
	for _, r := range m.records {
		if r.offset == res.CleanedTo {
			if young := r.batchMaxTimestamp > now.Add(-cfg.MinCompactionLag).UnixMilli(); !young {
				t.Fatalf("first record left dirty (offset %d, batch max timestamp %d) is older than min.compaction.lag.ms", r.offset, r.batchMaxTimestamp)
			}
		}
	}
	sameRecords(t, "records after Clean", readRecords(t, l), m.cleaned(res.CleanedTo, 0))
}

func TestCleanDirtyRatio(t *testing.T) {
	l := openTestLog(t, t.TempDir(), compactConfig())
	var m compactionModel
	fillOverwrites(t, l, &m, 60, 40, nil) // Mostly distinct keys: little to remove.
	now := baseTime.Add(time.Hour)
	cfg := DefaultCleanConfig()
	if res := mustClean(t, l, cfg, now); !res.Cleaned {
		t.Fatalf("first Clean: got %+v, want a pass (all dirty)", res)
	}
	// One more closed segment against many clean ones: below 0.5.
	fillOverwrites(t, l, &m, 6, 40, nil)
	before := readRecords(t, l)
	res := mustClean(t, l, cfg, now)
	if res.Cleaned || res.DirtyRatio >= 0.5 || res.DirtyRatio <= 0 {
		t.Fatalf("Clean below the dirty ratio: got %+v, want no pass and a ratio in (0, 0.5)", res)
	}
	sameRecords(t, "records after a skipped Clean", readRecords(t, l), before)
	// max.compaction.lag.ms forces the pass.
	cfg.MaxCompactionLag = time.Minute
	if res := mustClean(t, l, cfg, now); !res.Cleaned {
		t.Fatalf("Clean past max.compaction.lag.ms: got %+v, want a pass", res)
	}
	sameRecords(t, "records after a forced Clean", readRecords(t, l), m.cleaned(activeBase(l), 0))
}

func TestCleanSmallDedupeBuffer(t *testing.T) {
	var m compactionModel
	small := openTestLog(t, t.TempDir(), compactConfig())
	large := openTestLog(t, t.TempDir(), compactConfig())
	fillOverwrites(t, small, &m, 80, 12, nil)
	fillOverwrites(t, large, &compactionModel{}, 80, 12, nil)
	now := baseTime.Add(time.Hour)
	mustClean(t, large, eagerClean(), now)
	cfg := eagerClean()
	cfg.DedupeBufferSize = 8 * offsetMapEntrySize // Holds 7 keys: a few batches a pass.
	passes := 0
	for {
		res := mustClean(t, small, cfg, now)
		if !res.Cleaned {
			break
		}
		passes++
		if passes > 100 {
			t.Fatalf("pass %d: got %+v, want the passes to end", passes, res)
		}
	}
	if passes < 3 {
		t.Fatalf("got %d passes, want several with a small dedupe buffer", passes)
	}
	want := m.cleaned(activeBase(small), 0)
	sameRecords(t, "records of the large buffer's log", readRecords(t, large), want)
	sameRecords(t, fmt.Sprintf("records after %d small passes", passes), readRecords(t, small), want)
}

func TestCleanCompressedBatches(t *testing.T) {
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
		id    int16
	}{
		{"gzip", kgo.GzipCompression(), codecGzip},
		{"snappy", kgo.SnappyCompression(), codecSnappy},
		{"lz4", kgo.Lz4Compression(), codecLZ4},
		{"zstd", kgo.ZstdCompression(), codecZstd},
	} {
		t.Run(codec.name, func(t *testing.T) {
			l := openTestLog(t, t.TempDir(), compactConfig())
			var m compactionModel
			fillOverwrites(t, l, &m, 60, 3, &codec.codec)
			base := activeBase(l)
			mustClean(t, l, eagerClean(), baseTime.Add(time.Hour))
			want := m.cleaned(base, 0)
			sameRecords(t, "records after Clean", readRecords(t, l), want)
			checkReadsAtEveryOffset(t, l, want)
			data, err := l.Read(0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range decodeBatches(t, data) {
				h := parseBatchHeader(b.raw)
				if got := h.attributes & codecMask; h.recordCount > 0 && got != codec.id {
					t.Fatalf("batch at offset %d: codec %d, want %d", h.baseOffset, got, codec.id)
				}
			}
		})
	}
}

func TestCleanRecoversFromACrashMidSwap(t *testing.T) {
	// build makes two logs from the same appends and cleans the first:
	// the second is a log whose pass crashed, and the first's rewritten
	// segment files are what that pass would have written.
	build := func(t *testing.T) (cleanedDir, crashedDir string, rewritten []int64, before, after []logRecord) {
		cleanedDir, crashedDir = t.TempDir(), t.TempDir()
		cl, crashed := openTestLog(t, cleanedDir, compactConfig()), openTestLog(t, crashedDir, compactConfig())
		var m compactionModel
		fillOverwrites(t, cl, &m, 40, 4, nil)
		fillOverwrites(t, crashed, &compactionModel{}, 40, 4, nil)
		before = readRecords(t, crashed)
		mustClean(t, cl, eagerClean(), baseTime.Add(time.Hour))
		after = readRecords(t, cl)
		for _, base := range segmentFiles(t, cleanedDir) {
			a, _ := os.ReadFile(segmentPath(cleanedDir, base, logSuffix))
			b, _ := os.ReadFile(segmentPath(crashedDir, base, logSuffix))
			if !bytes.Equal(a, b) {
				rewritten = append(rewritten, base)
			}
		}
		if len(rewritten) == 0 {
			t.Fatal("Clean rewrote no segment")
		}
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
		if err := crashed.Close(); err != nil {
			t.Fatal(err)
		}
		return cleanedDir, crashedDir, rewritten, before, after
	}
	// copyAs copies a segment file of the cleaned log into the crashed
	// one under the name the crash left it with.
	copyAs := func(t *testing.T, from, to string, base int64, suffix, as string) {
		b, err := os.ReadFile(segmentPath(from, base, suffix))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segmentPath(to, base, suffix+as), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// log, index and timeIndex are the suffixes the crash left the
		// cleaned files with: ".cleaned", ".swap", or "" (in place).
		log, index, timeIndex string
		// swapped is whether recovery must end with the cleaned segment.
		swapped bool
	}{
		{name: "while writing the cleaned files", log: cleanedSuffix, index: cleanedSuffix, timeIndex: cleanedSuffix},
		{name: "after renaming the log to .swap", log: swapSuffix, index: cleanedSuffix, timeIndex: cleanedSuffix, swapped: true},
		{name: "after renaming all to .swap", log: swapSuffix, index: swapSuffix, timeIndex: swapSuffix, swapped: true},
		{name: "after putting the offset index in place", log: swapSuffix, index: "", timeIndex: swapSuffix, swapped: true},
		{name: "after putting the indexes in place", log: swapSuffix, index: "", timeIndex: "", swapped: true},
		{name: "after putting the log in place", log: "", index: "", timeIndex: swapSuffix, swapped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanedDir, crashedDir, rewritten, before, after := build(t)
			for _, base := range rewritten {
				copyAs(t, cleanedDir, crashedDir, base, logSuffix, tt.log)
				copyAs(t, cleanedDir, crashedDir, base, indexSuffix, tt.index)
				copyAs(t, cleanedDir, crashedDir, base, timeIndexSuffix, tt.timeIndex)
			}
			l := openTestLog(t, crashedDir, compactConfig())
			want := before
			if tt.swapped {
				want = after
			}
			sameRecords(t, "records after recovery", readRecords(t, l), want)
			checkReadsAtEveryOffset(t, l, want)
			checkIndexes(t, crashedDir)
			entries, err := os.ReadDir(crashedDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if ext := filepath.Ext(e.Name()); ext == cleanedSuffix || ext == swapSuffix {
					t.Fatalf("left-over %s after recovery", e.Name())
				}
			}
			// A pass after recovery ends at the same records.
			mustClean(t, l, eagerClean(), baseTime.Add(time.Hour))
			sameRecords(t, "records after a pass after recovery", readRecords(t, l), after)
		})
	}
}

func TestCleanKeepsTheLastBatchOfEachProducer(t *testing.T) {
	l := openTestLog(t, t.TempDir(), compactConfig())
	var m compactionModel
	ts := baseTime.UnixMilli()
	// Producer 7's last batch is superseded in a closed segment;
	// producer 8's last batch is in the active segment.
	m.appendBatch(t, l, batchSpec{records: []testRecord{kv("a", "p7-0"), kv("b", "p7-1")}, timestamp: ts, producerID: 7, baseSequence: 0})
	m.appendBatch(t, l, batchSpec{records: []testRecord{kv("a", "p7-2"), kv("b", "p7-3")}, timestamp: ts, producerID: 7, baseSequence: 2})
	p8 := m.appendBatch(t, l, batchSpec{records: []testRecord{kv("c", "p8-0")}, timestamp: ts, producerID: 8, baseSequence: 0})
	fillOverwrites(t, l, &m, 30, 3, nil) // Overwrites keys key-0..2 only.
	m.appendBatch(t, l, batchSpec{records: []testRecord{kv("a", "x"), kv("b", "x"), kv("c", "x")}, timestamp: ts})
	fillOverwrites(t, l, &m, 20, 3, nil)
	m.appendBatch(t, l, batchSpec{records: []testRecord{kv("c", "p8-1")}, timestamp: ts, producerID: 8, baseSequence: 1})
	base := activeBase(l)
	mustClean(t, l, eagerClean(), baseTime.Add(time.Hour))
	sameRecords(t, "records after Clean", readRecords(t, l), m.cleaned(base, 0))

	data, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var seven, eight []batchHeader
	for _, b := range decodeBatches(t, data) {
		switch h := parseBatchHeader(b.raw); h.producerID {
		case 7:
			seven = append(seven, h)
		case 8:
			eight = append(eight, h)
		}
	}
	if len(seven) != 1 || seven[0].baseOffset != 2 || seven[0].recordCount != 0 || seven[0].lastOffset() != 3 || seven[0].baseSequence != 2 {
		t.Fatalf("producer 7's batches after Clean: got %+v, want one empty batch at offsets 2..3, sequence 2", seven)
	}
	if len(eight) != 0 && eight[0].baseOffset == p8.BaseOffset {
		t.Fatalf("producer 8's batches after Clean: got %+v, want its superseded first batch dropped", eight)
	}
}

func TestCleanAbandonsAfterTruncation(t *testing.T) {
	l := openTestLog(t, t.TempDir(), compactConfig())
	var m compactionModel
	fillOverwrites(t, l, &m, 40, 4, nil)
	mustClean(t, l, eagerClean(), baseTime.Add(time.Hour))
	cp, err := readCleanerCheckpoint(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	// A truncation below the checkpoint moves it down, so that what is
	// appended again there is dirty.
	if err := l.TruncateTo(cp / 2); err != nil {
		t.Fatal(err)
	}
	got, err := readCleanerCheckpoint(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	if got > l.EndOffset() {
		t.Fatalf("cleaner checkpoint after truncating to %d: got %d, want at most the log end %d", cp/2, got, l.EndOffset())
	}
	if got := l.EndOffset(); got > cp/2 {
		t.Fatalf("EndOffset after truncating into a cleaned segment: got %d, want at most %d", got, cp/2)
	}
	// The log recovers its cleaned, gapped last segment on reopening.
	end := l.EndOffset()
	before := readRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, l.dir, compactConfig())
	if got := l.EndOffset(); got != end {
		t.Fatalf("EndOffset after reopening: got %d, want %d", got, end)
	}
	sameRecords(t, "records after reopening", readRecords(t, l), before)
}

func TestCleanConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*CleanConfig)
		ok     bool
	}{
		{"defaults", func(*CleanConfig) {}, true},
		{"tiny dedupe buffer", func(c *CleanConfig) { c.DedupeBufferSize = 23 }, false},
		{"dirty ratio above 1", func(c *CleanConfig) { c.MinCleanableDirtyRatio = 1.5 }, false},
		{"negative min lag", func(c *CleanConfig) { c.MinCompactionLag = -time.Millisecond }, false},
		{"max lag below min lag", func(c *CleanConfig) { c.MinCompactionLag, c.MaxCompactionLag = time.Hour, time.Minute }, false},
		{"negative delete retention", func(c *CleanConfig) { c.DeleteRetention = -time.Millisecond }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultCleanConfig()
			tt.modify(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate: got %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap(1000*offsetMapEntrySize, 500)
	for i := range 500 {
		m.put(keyHash(fmt.Appendf(nil, "k%d", i%250)), int64(i))
	}
	if m.used != 250 {
		t.Fatalf("used: got %d, want 250", m.used)
	}
	for i := range 250 {
		if got, ok := m.get(keyHash(fmt.Appendf(nil, "k%d", i))); !ok || got != int64(250+i) {
			t.Fatalf("get k%d: got %d, %v, want %d", i, got, ok, 250+i)
		}
	}
	if _, ok := m.get(keyHash([]byte("absent"))); ok {
		t.Fatal("get of an absent key: got found, want not")
	}
}

// BuildKeyedBatchForTest builds, for the tests of package log_test, a
// batch of one record per key ("key=value" splits a key from its value)
// from producer id (0 for none) at epoch 0 and sequence seq, with
// timestamp ts.
func BuildKeyedBatchForTest(tb testing.TB, id int64, seq int32, ts int64, records ...string) []byte {
	spec := batchSpec{timestamp: ts, producerID: id, baseSequence: seq}
	for _, r := range records {
		k, v, _ := strings.Cut(r, "=")
		spec.records = append(spec.records, kv(k, v))
	}
	return buildBatch(tb, spec)
}

func TestCleanConcurrentWithAppendsAndReads(t *testing.T) {
	l := openTestLog(t, t.TempDir(), compactConfig())
	var m compactionModel
	fillOverwrites(t, l, &m, 20, 4, nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // The writer: overwrites the same keys.
		defer wg.Done()
		defer close(done)
		for i := range 200 {
			b := buildBatch(t, batchSpec{records: []testRecord{kv(fmt.Sprintf("key-%d", i%4), "w")}, timestamp: baseTime.UnixMilli()})
			if _, err := l.Append(b, 0); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
		}
	}()
	go func() { // The reader: every read parses, whatever the swaps.
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for offset := l.StartOffset(); offset < l.EndOffset(); {
				data, err := l.Read(offset, 1<<10)
				if err != nil || len(data) == 0 {
					t.Errorf("read at offset %d: got %d bytes, %v, want a batch", offset, len(data), err)
					return
				}
				batches, err := splitBatches(data)
				if err != nil {
					t.Errorf("read at offset %d: %v", offset, err)
					return
				}
				offset = batches[len(batches)-1].nextOffset()
			}
		}
	}()
	for passes := 0; ; passes++ {
		select {
		case <-done:
		default:
			if _, err := l.Clean(eagerClean(), baseTime.Add(time.Hour)); err != nil {
				t.Errorf("Clean pass %d: %v", passes, err)
			}
			continue
		}
		break
	}
	wg.Wait()
	mustClean(t, l, eagerClean(), baseTime.Add(time.Hour))
	latest := make(map[string]int64)
	for _, r := range readRecords(t, l) {
		if r.offset < activeBase(l) {
			if _, dup := latest[string(r.key)]; dup {
				t.Fatalf("key %s twice below the active segment after the last pass", r.key)
			}
			latest[string(r.key)] = r.offset
		}
	}
}
