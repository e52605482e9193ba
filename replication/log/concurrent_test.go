package log

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentReadersDuringAppends runs readers against a log while one
// writer appends (rolling segments), truncates, and retention deletes old
// segments:
// every read returns whole batches with valid CRCs and consecutive offsets,
// starting with the batch holding the offset asked for. Run it with -race.
func TestConcurrentReadersDuringAppends(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 32 << 10
	cfg.RetentionBytes = 128 << 10
	cfg.RetentionTime = -1
	l := openTestLog(t, t.TempDir(), cfg)
	batches := make([][]byte, 8)
	for i := range batches {
		batches[i] = newBatch(t, 1+i, 100+i*150, int64(i))
	}

	stop := make(chan struct{})
	// shrinks counts truncations and retention passes begun: a read whose
	// offset one of them passed may fail out of range, even though the
	// log has grown past that offset again by the time the reader looks.
	var shrinks atomic.Int64
	var wg sync.WaitGroup
	var reads sync.Map // reader -> count of non-empty reads
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			n := 0
			for {
				select {
				case <-stop:
					reads.Store(r, n)
					return
				default:
				}
				shrinksBefore := shrinks.Load()
				start, end := l.StartOffset(), l.EndOffset()
				offset := start + rng.Int64N(end-start+1)
				maxBytes := rng.IntN(8 << 10)
				var b []byte
				var err error
				if r%2 == 0 {
					b, err = l.Read(offset, maxBytes)
				} else {
					b, err = l.ReadUpTo(offset, maxBytes, end-rng.Int64N(5))
				}
				if errors.Is(err, ErrOffsetOutOfRange) && (shrinks.Load() != shrinksBefore || offset < l.StartOffset() || offset > l.EndOffset()) {
					continue // Retention or truncation passed the offset meanwhile.
				}
				if err != nil {
					t.Errorf("reader %d: Read(%d): %v", r, offset, err)
					return
				}
				if err := checkRead(b, offset); err != nil {
					t.Errorf("reader %d: Read(%d, %d): %v", r, offset, maxBytes, err)
					return
				}
				if len(b) > 0 {
					n++
				}
				if _, _, _, err := l.OffsetForTime(rng.Int64N(8)); err != nil {
					t.Errorf("reader %d: OffsetForTime: %v", r, err)
					return
				}
			}
		}()
	}

	now := time.Now()
	for i := range 400 {
		records := batches[i%len(batches)]
		if i%3 == 0 {
			records = append(append([]byte(nil), records...), batches[(i+1)%len(batches)]...)
		}
		if _, err := l.Append(records, int32(i/100)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if i%20 == 0 {
			shrinks.Add(1)
			if _, err := l.EnforceRetention(now); err != nil {
				t.Fatalf("retention: %v", err)
			}
		}
		if i%30 == 29 {
			shrinks.Add(1)
			if err := l.TruncateTo(l.EndOffset() - 10); err != nil {
				t.Fatalf("truncate: %v", err)
			}
		}
	}
	close(stop)
	wg.Wait()
	reads.Range(func(r, n any) bool {
		if n.(int) == 0 {
			t.Errorf("reader %d read nothing", r)
		}
		return true
	})
	if l.StartOffset() == 0 {
		t.Fatalf("retention never moved the log start offset")
	}
	readAllFrom(t, l, l.StartOffset())
}

// checkRead checks that b holds whole batches with valid CRCs and
// consecutive offsets, the first one holding offset.
func checkRead(b []byte, offset int64) error {
	next := int64(-1)
	for pos := 0; pos < len(b); {
		if len(b)-pos < batchHeaderSize {
			return fmt.Errorf("%d bytes left at byte %d, less than a batch header", len(b)-pos, pos)
		}
		h := parseBatchHeader(b[pos:])
		if h.size < batchHeaderSize || int64(len(b)-pos) < h.size {
			return fmt.Errorf("batch at byte %d: size %d, %d bytes left", pos, h.size, len(b)-pos)
		}
		if got := crc32.Checksum(b[pos+fieldAttributes:pos+int(h.size)], castagnoli); got != h.crc {
			return fmt.Errorf("batch at byte %d (offset %d): crc %#x, computed %#x", pos, h.baseOffset, h.crc, got)
		}
		if next < 0 && (h.baseOffset > offset || h.lastOffset() < offset) {
			return fmt.Errorf("first batch holds %d..%d, want the one holding %d", h.baseOffset, h.lastOffset(), offset)
		}
		if next >= 0 && h.baseOffset != next {
			return fmt.Errorf("batch at %d follows one ending at %d", h.baseOffset, next-1)
		}
		next = h.nextOffset()
		pos += int(h.size)
	}
	return nil
}
