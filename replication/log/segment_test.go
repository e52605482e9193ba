package log

import (
	"fmt"
	"testing"
)

// TestFindReusesScanChunks finds every batch of a segment whose index
// entries are 512 bytes apart, so that each find scans several headers,
// and checks that each finds the batch holding its offset and that,
// with the pool warm, a find allocates nothing: a fetch's lookup must
// not make garbage on a busy broker.
func TestFindReusesScanChunks(t *testing.T) {
	l := openTestLog(t, t.TempDir(), testConfig())
	for i := range 40 {
		mustAppend(t, l, newBatch(t, 1+i%3, 50, int64(i)))
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.segments[0]
	end := l.EndOffset()
	for offset := range end {
		span, ok, err := s.find(offset)
		if err != nil || !ok || span.baseOffset > offset || span.lastOffset < offset {
			t.Fatalf("find(%d) = batch %d-%d, ok %v, error %v: want the batch holding it", offset, span.baseOffset, span.lastOffset, ok, err)
		}
	}
	if _, ok, err := s.find(end); ok || err != nil {
		t.Fatalf("find(%d), the log end: ok %v, error %v, want no batch and no error", end, ok, err)
	}
	offset := end / 2
	if allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := s.find(offset); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("find(%d) allocated %v times a call, want 0", offset, allocs)
	}
}

// TestRecentBatchesAgreeWithTheFile: the active segment's recent batches
// answer find as a scan of the file's headers does, for every offset,
// through appends of several batches at once, offsets that jump (a
// follower copying a compacted leader), rolls and a truncation; and an
// offset among the last batches is answered from them, not the file.
func TestRecentBatchesAgreeWithTheFile(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10
	l := openTestLog(t, t.TempDir(), cfg)
	// check compares every offset's find with the file's; wantRecent
	// says the active segment has batches appended since it became
	// active, which it must then keep.
	check := func(step string, wantRecent bool) {
		t.Helper()
		l.mu.RLock()
		defer l.mu.RUnlock()
		s := l.active()
		if wantRecent && s.tail.size > 0 && (s.recent == nil || s.recent.len() == 0) {
			t.Fatalf("%s: the active segment keeps no recent batches, want its last ones", step)
		}
		for _, old := range l.segments[:len(l.segments)-1] {
			if old.recent != nil {
				t.Fatalf("%s: rolled segment %d keeps recent batches, want none", step, old.baseOffset)
			}
		}
		kept := s.recent
		for offset := s.baseOffset; offset <= s.tail.nextOffset; offset++ {
			got, gotOK, err := s.find(offset)
			if err != nil {
				t.Fatalf("%s: find(%d): %v", step, offset, err)
			}
			s.recent = nil
			want, wantOK, err := s.find(offset)
			s.recent = kept
			if err != nil {
				t.Fatalf("%s: find(%d) from the file: %v", step, offset, err)
			}
			if got != want || gotOK != wantOK {
				t.Fatalf("%s: find(%d) = %+v %v, the file says %+v %v", step, offset, got, gotOK, want, wantOK)
			}
		}
		if kept != nil && kept.len() > 0 {
			if kept.len() > recentBatchCount {
				t.Fatalf("%s: %d recent batches kept, want at most %d", step, kept.len(), recentBatchCount)
			}
			newest := kept.at(kept.len() - 1)
			if newest.pos+newest.size != s.tail.size || newest.lastOffset != s.tail.nextOffset-1 {
				t.Fatalf("%s: newest recent batch %+v does not end the segment (size %d, next offset %d)", step, newest, s.tail.size, s.tail.nextOffset)
			}
			if _, _, ok := kept.find(kept.at(0).baseOffset); !ok {
				t.Fatalf("%s: the oldest recent batch's offset is not answered from them", step)
			}
		}
	}
	var ts int64
	for i := range 60 {
		var buf []byte
		for j := range 1 + i%3 {
			buf = append(buf, newBatch(t, 1+(i+j)%4, 40, ts)...)
			ts++
		}
		mustAppend(t, l, buf)
		check(fmt.Sprintf("append %d", i), true)
	}
	if len(l.segments) < 3 {
		t.Fatalf("%d segments, want the appends to roll at least twice", len(l.segments))
	}
	// A follower's batches whose offsets jump over a compacted range.
	next := l.EndOffset()
	for i := range 20 {
		b := newBatch(t, 2, 40, ts)
		ts++
		next += int64(3 + i%5)
		setBaseOffset(b, next)
		next += 2
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatalf("AppendAsFollower at %d: %v", next-2, err)
		}
		check(fmt.Sprintf("follower append %d", i), true)
	}
	// A truncation into the recent batches forgets them; appends after
	// it keep them again.
	cut := l.EndOffset() - 5
	if err := l.TruncateTo(cut); err != nil {
		t.Fatalf("TruncateTo(%d): %v", cut, err)
	}
	check("truncation", false)
	if l.active().recent != nil {
		t.Fatalf("truncation kept the recent batches, want them forgotten")
	}
	for i := range 10 {
		mustAppend(t, l, newBatch(t, 1+i%2, 40, ts))
		ts++
		check(fmt.Sprintf("append after truncation %d", i), true)
	}
}
