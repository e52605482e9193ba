package log

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestReadSliceMatchesRead: over a log of several segments and batches of
// many sizes, a slice read gives, for every offset, byte budget and
// limit, the bytes ReadUpTo gives, cut at the end of the first segment
// they come from (a slice holds one segment's batches); minSlice above
// the read's size gives the bytes themselves.
func TestReadSliceMatchesRead(t *testing.T) {
	l, rng := logOfSeveralSegments(t, 1)
	end := l.EndOffset()
	for range 3000 {
		offset := rng.Int64N(end + 1)
		maxBytes := rng.IntN(8 << 10)
		limit := offset + rng.Int64N(end-offset+2)
		want, err := l.ReadUpTo(offset, maxBytes, limit)
		if err != nil {
			t.Fatalf("ReadUpTo(%d, %d, %d): %v", offset, maxBytes, limit, err)
		}
		data, slice, err := l.ReadSliceUpTo(offset, maxBytes, limit, 0, nil)
		if err != nil {
			t.Fatalf("ReadSliceUpTo(%d, %d, %d): %v", offset, maxBytes, limit, err)
		}
		if slice != nil {
			if data != nil {
				t.Fatal("ReadSliceUpTo returned bytes and a slice")
			}
			data, err = slice.Bytes(nil)
			slice.Release()
			if err != nil {
				t.Fatal(err)
			}
			// One segment's batches: a prefix of the read, in whole
			// batches, and all of it when the read stays in the segment.
			if !bytes.HasPrefix(want, data) || len(decodeBatches(t, data)) == 0 {
				t.Fatalf("ReadSliceUpTo(%d, %d, %d): %d bytes are not whole batches leading the %d ReadUpTo read", offset, maxBytes, limit, len(data), len(want))
			}
			if len(data) < len(want) {
				seg := l.segments[l.segmentFor(offset)]
				last := decodeBatches(t, data)
				if next := last[len(last)-1].lastOffset + 1; next != seg.tail.nextOffset {
					t.Fatalf("ReadSliceUpTo(%d, %d, %d): stopped at offset %d inside segment %d (ends at %d), short of ReadUpTo", offset, maxBytes, limit, next, seg.baseOffset, seg.tail.nextOffset)
				}
			}
			continue
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("ReadSliceUpTo(%d, %d, %d) bytes: %d, ReadUpTo %d", offset, maxBytes, limit, len(data), len(want))
		}
	}
	// A minimum the read does not reach: the bytes.
	data, slice, err := l.ReadSliceUpTo(0, 1<<20, end, 1<<30, nil)
	if err != nil || slice != nil || len(data) == 0 {
		t.Fatalf("ReadSliceUpTo with a minimum above the read: %d bytes, slice %v, %v; want the bytes", len(data), slice, err)
	}
}

// TestSliceOutlivesItsSegment: a slice's file stays readable after
// retention deletes its segment.
func TestSliceOutlivesItsSegment(t *testing.T) {
	l := openTestLog(t, t.TempDir(), testConfig())
	for range 200 {
		mustAppend(t, l, newBatch(t, 4, 300, 1000))
	}
	want, err := l.Read(0, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	_, slice, err := l.ReadSliceUpTo(0, 4<<10, l.EndOffset(), 1, nil)
	if err != nil || slice == nil {
		t.Fatalf("ReadSliceUpTo: slice %v, %v", slice, err)
	}
	defer slice.Release()
	second := l.segments[1].baseOffset
	if _, err := l.AdvanceStartOffset(second); err != nil {
		t.Fatal(err)
	}
	if n, err := l.EnforceRetention(time.Now()); err != nil || n == 0 {
		t.Fatalf("EnforceRetention: deleted %d segments, %v; want the first", n, err)
	}
	got, err := slice.Bytes(nil)
	if err != nil {
		t.Fatalf("read the slice of a deleted segment: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the slice of a deleted segment reads %d bytes unlike the %d read before", len(got), len(want))
	}
}

// TestReadIntoGivenBuffers: a read with an Alloc gives, for every offset,
// byte budget and limit over several segments, the bytes ReadUpTo gives,
// in a buffer the Alloc handed out (the tail's batch kept in memory
// included), and a read whose Alloc reuses one buffer allocates nothing.
func TestReadIntoGivenBuffers(t *testing.T) {
	l, rng := logOfSeveralSegments(t, 3)
	var given [][]byte
	alloc := func(n int) []byte {
		b := make([]byte, n, n+rng.IntN(64))
		given = append(given, b)
		return b
	}
	inGiven := func(data []byte) bool {
		for _, b := range given {
			if &b[:cap(b)][cap(b)-1] == &data[:cap(data)][cap(data)-1] {
				return true
			}
		}
		return false
	}
	end := l.EndOffset()
	check := func(offset int64, maxBytes int, limit int64) {
		t.Helper()
		given = given[:0]
		want, err := l.ReadUpTo(offset, maxBytes, limit)
		if err != nil {
			t.Fatalf("ReadUpTo(%d, %d, %d): %v", offset, maxBytes, limit, err)
		}
		data, err := l.ReadUpToInto(offset, maxBytes, limit, alloc)
		if err != nil || !bytes.Equal(data, want) {
			t.Fatalf("ReadUpToInto(%d, %d, %d): %d bytes, %v; ReadUpTo read %d", offset, maxBytes, limit, len(data), err, len(want))
		}
		if len(data) > 0 && !inGiven(data) {
			t.Fatalf("ReadUpToInto(%d, %d, %d): the %d bytes are not in a buffer the Alloc gave", offset, maxBytes, limit, len(data))
		}
	}
	for range 2000 {
		offset := rng.Int64N(end + 1)
		check(offset, rng.IntN(16<<10), offset+rng.Int64N(end-offset+2))
	}
	last := l.segments[len(l.segments)-1].tail
	if !last.hasLast || last.lastBytes == nil {
		t.Fatal("the log keeps no last batch in memory")
	}
	check(last.lastBase, 1<<20, end)

	reused := make([]byte, 64<<10)
	reuse := func(n int) []byte { return reused[:n] }
	offset := l.segments[1].baseOffset
	if allocs := testing.AllocsPerRun(50, func() {
		if _, err := l.ReadUpToInto(offset, 8<<10, end, reuse); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ReadUpToInto(last.lastBase, 8<<10, end, reuse); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("reads into a reused buffer allocated %v times a call, want 0", allocs)
	}
}

// logOfSeveralSegments returns a log of 300 batches of random record
// counts and sizes spanning several segments, and the random source
// (seeded with seed) that made them, for the test to go on with.
func logOfSeveralSegments(t *testing.T, seed uint64) (*Log, *rand.Rand) {
	t.Helper()
	l := openTestLog(t, t.TempDir(), testConfig())
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for range 300 {
		mustAppend(t, l, newBatch(t, 1+rng.IntN(6), rng.IntN(400), 1000))
	}
	if n := len(l.segments); n < 3 {
		t.Fatalf("the log has %d segments, want several", n)
	}
	return l, rng
}
