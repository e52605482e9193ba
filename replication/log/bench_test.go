package log

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

// benchBatch is a producer batch of 16 records of 1 KiB (about 16.5 KiB).
func benchBatch(b *testing.B) []byte { return newBatch(b, 16, 1024, time.Now().UnixMilli()) }

// benchConfig has 64 MiB segments and keeps at most 256 MiB, so long runs
// roll and delete segments as a broker's log does.
func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.RetentionBytes = 256 << 20
	return cfg
}

// BenchmarkAppend appends ~16 KiB batches as a leader (CRC check, offset
// assignment, one write per append, no fsync).
func BenchmarkAppend(b *testing.B) {
	l := openTestLog(b, b.TempDir(), benchConfig())
	batch := benchBatch(b)
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := range b.N {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
		if i%4096 == 4095 {
			if _, err := l.EnforceRetention(time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkRead reads a 64 MiB log from start to end in 1 MiB fetches
// (offset index lookup, header scan, one pread per segment touched).
func BenchmarkRead(b *testing.B) {
	l := openTestLog(b, b.TempDir(), benchConfig())
	batch := benchBatch(b)
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	b.ResetTimer()
	var total int64
	offset := int64(0)
	for range b.N {
		if offset >= end {
			offset = 0
		}
		data, err := l.Read(offset, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		h := parseBatchHeader(data[len(data)-lastBatchSize(data):])
		offset = h.nextOffset()
		total += int64(len(data))
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkReadTail reads the last batch of a log of 100-byte batches,
// as a caught-up follower's fetch does after each append: one read per
// partition per round, tens of thousands a second at 10 000 partitions.
func BenchmarkReadTail(b *testing.B) {
	l := logOfBatches(b, 10000, 100)
	tail := l.EndOffset() - 1
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Read(tail, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadNearTail reads, as a sendable slice, from four batches
// behind the end of a log of 1 KB batches up to a high watermark one
// batch short of it: a consumer's fetch, or a follower's a few batches
// behind, at a busy partition. Finding the first batch and the one
// holding the high watermark reads batch headers from the file unless
// the log knows where its last batches lie.
func BenchmarkReadNearTail(b *testing.B) {
	l := logOfBatches(b, 10000, 1000)
	end := l.EndOffset()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, slice, err := l.ReadSliceUpTo(end-4, 1<<20, end-1, 0, nil)
		if err != nil || slice == nil {
			b.Fatalf("ReadSliceUpTo: slice %v, error %v", slice, err)
		}
		slice.Release()
	}
}

// logOfBatches is a log of n batches of one record of valueSize bytes.
func logOfBatches(b *testing.B, n, valueSize int) *Log {
	l := openTestLog(b, b.TempDir(), benchConfig())
	batch := newBatch(b, 1, valueSize, 0)
	for range n {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// lastBatchSize is the size of the last batch in data.
func lastBatchSize(data []byte) int {
	var pos, size int
	for pos < len(data) {
		size = int(parseBatchHeader(data[pos:]).size)
		pos += size
	}
	return size
}

// idleLogs is how many logs BenchmarkOpenIdleLogs opens, as a broker
// restarted with that many replicas does.
var idleLogs = flag.Int("idle-logs", 30000, "how many logs BenchmarkOpenIdleLogs opens")

// BenchmarkOpenIdleLogs opens -idle-logs cleanly closed logs of one small
// batch each, through one pool of DefaultOpenFilesMax files as a broker
// does, and reports the time per log and the descriptors held once all
// are open (closing them is not timed).
func BenchmarkOpenIdleLogs(b *testing.B) {
	root := b.TempDir()
	cfg := DefaultConfig()
	cfg.Files = NewFilePool(DefaultOpenFilesMax)
	batch := newBatch(b, 1, 100, time.Now().UnixMilli())
	dirs := make([]string, *idleLogs)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/t-%d", root, i)
		l, err := Open(dirs[i], cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	logs := make([]*Log, *idleLogs)
	var fds int
	b.ResetTimer()
	for range b.N {
		before := openDescriptors(b)
		openLogs(b, logs, dirs, cfg)
		b.StopTimer()
		fds = openDescriptors(b) - before
		for _, l := range logs {
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N**idleLogs), "ns/log")
	b.ReportMetric(float64(fds), "fds")
	b.ReportMetric(0, "ns/op")
}

// openLogs opens the log of each dir into logs.
func openLogs(b *testing.B, logs []*Log, dirs []string, cfg Config) {
	for i, dir := range dirs {
		l, err := Open(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		logs[i] = l
	}
}

// BenchmarkTruncateTail cuts the last batch of one log after another, as
// a follower does for each partition whose leader moved at a failover
// (OffsetForLeaderEpoch found the old leader's unreplicated tail): 2 000
// logs of 300 single-record batches, through one pool of
// DefaultOpenFilesMax files as a broker's.
func BenchmarkTruncateTail(b *testing.B) {
	root := b.TempDir()
	cfg := DefaultConfig()
	cfg.Files = NewFilePool(DefaultOpenFilesMax)
	batch := newBatch(b, 1, 100, time.Now().UnixMilli())
	logs := make([]*Log, 2000)
	for i := range logs {
		logs[i] = openTestLog(b, fmt.Sprintf("%s/t-%d", root, i), cfg)
		for range 300 {
			if _, err := logs[i].Append(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		l := logs[i%len(logs)]
		if l.EndOffset() == 0 {
			b.Fatal("every log is empty: lower -benchtime")
		}
		if err := l.TruncateTo(l.EndOffset() - 1); err != nil {
			b.Fatal(err)
		}
	}
}
