package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// newBatch builds a v2 record batch with franz-go's kmsg: n records with
// keys "key-i", values of valueSize bytes and timestamps firstTimestamp+i,
// base offset 0 and partitionLeaderEpoch -1, as a producer sends it. The
// CRC-32C is computed here.
func newBatch(tb testing.TB, n, valueSize int, firstTimestamp int64) []byte {
	tb.Helper()
	var records []byte
	for i := range n {
		value := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              fmt.Appendf(nil, "key-%d", i),
			Value:            value,
			Headers:          []kmsg.Header{{Key: "h", Value: []byte("v")}},
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // Length 0 encodes in one byte.
		records = r.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       firstTimestamp,
		MaxTimestamp:         firstTimestamp + int64(n-1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		Records:              records,
	}
	b.Length = int32(batchHeaderSize - batchLengthOverhead + len(records))
	raw := b.AppendTo(nil)
	crc := crc32.Checksum(raw[fieldAttributes:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(raw[fieldCRC:], crc)
	return raw
}

// storedBatch is a batch as read back from the log.
type storedBatch struct {
	baseOffset  int64
	lastOffset  int64
	leaderEpoch int32
	raw         []byte
}

// decodeBatches splits bytes read from the log into batches, failing the
// test if any is malformed or fails its CRC.
func decodeBatches(tb testing.TB, b []byte) []storedBatch {
	tb.Helper()
	var out []storedBatch
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			tb.Fatalf("decode batch %d: %v", len(out), err)
		}
		size := int(rb.Length) + batchLengthOverhead
		if got := crc32.Checksum(b[fieldAttributes:size], crc32.MakeTable(crc32.Castagnoli)); got != uint32(rb.CRC) {
			tb.Fatalf("batch %d at offset %d: crc %#x, computed %#x", len(out), rb.FirstOffset, uint32(rb.CRC), got)
		}
		out = append(out, storedBatch{
			baseOffset:  rb.FirstOffset,
			lastOffset:  rb.FirstOffset + int64(rb.LastOffsetDelta),
			leaderEpoch: rb.PartitionLeaderEpoch,
			raw:         b[:size],
		})
		b = b[size:]
	}
	return out
}

// sameExceptOffsetAndEpoch reports whether stored equals sent except for
// the baseOffset and partitionLeaderEpoch fields.
func sameExceptOffsetAndEpoch(stored, sent []byte) bool {
	if len(stored) != len(sent) {
		return false
	}
	return bytes.Equal(stored[fieldBatchLength:fieldLeaderEpoch], sent[fieldBatchLength:fieldLeaderEpoch]) &&
		bytes.Equal(stored[fieldMagic:], sent[fieldMagic:])
}

// testConfig is a config with small segments and a dense index, so tests
// exercise rolls and index lookups with little data.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 512
	return cfg
}

// testClock is a settable clock for roll, retention and flush times.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

// newTestClock starts a clock at a fixed time.
func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *testClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// openTestLog opens a log in dir and closes it when the test ends.
func openTestLog(tb testing.TB, dir string, cfg Config) *Log {
	tb.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		tb.Fatalf("Open(%s): %v", dir, err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// mustAppend appends records as leader at epoch 0 and fails the test on error.
func mustAppend(tb testing.TB, l *Log, records []byte) AppendResult {
	tb.Helper()
	res, err := l.Append(records, 0)
	if err != nil {
		tb.Fatalf("Append(%d bytes): %v", len(records), err)
	}
	return res
}

// readAllFrom reads every batch from offset to the end of the log, and
// checks that the offsets follow each other.
func readAllFrom(tb testing.TB, l *Log, offset int64) []storedBatch {
	tb.Helper()
	var out []storedBatch
	next := offset
	for next < l.EndOffset() {
		b, err := l.Read(next, 1<<20)
		if err != nil {
			tb.Fatalf("Read(%d): %v", next, err)
		}
		batches := decodeBatches(tb, b)
		if len(batches) == 0 {
			tb.Fatalf("Read(%d) below EndOffset %d returned no batch", next, l.EndOffset())
		}
		for _, sb := range batches {
			if len(out) > 0 && sb.baseOffset != out[len(out)-1].lastOffset+1 {
				tb.Fatalf("batch at %d follows one ending at %d", sb.baseOffset, out[len(out)-1].lastOffset)
			}
			out = append(out, sb)
		}
		next = out[len(out)-1].lastOffset + 1
	}
	return out
}

// segmentFiles lists the base offsets of the .log files in dir.
func segmentFiles(tb testing.TB, dir string) []int64 {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var bases []int64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases
}

// lastSegmentPath is the path of the .log file with the highest base offset.
func lastSegmentPath(tb testing.TB, dir string) string {
	tb.Helper()
	bases := segmentFiles(tb, dir)
	if len(bases) == 0 {
		tb.Fatalf("no segment in %s", dir)
	}
	return filepath.Join(dir, fmt.Sprintf("%020d.log", bases[len(bases)-1]))
}

// wantErr fails the test unless err is want (errors.Is), or nil when want is.
func wantErr(tb testing.TB, what string, err, want error) {
	tb.Helper()
	if want == nil && err != nil {
		tb.Fatalf("%s: got error %v, want none", what, err)
	}
	if want != nil && !errors.Is(err, want) {
		tb.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// crc32Checksum is the CRC-32C of b.
func crc32Checksum(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
