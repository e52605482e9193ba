package log

import "testing"

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
		_, h, ok, err := s.find(offset)
		if err != nil || !ok || h.baseOffset > offset || h.lastOffset() < offset {
			t.Fatalf("find(%d) = batch %d-%d, ok %v, error %v: want the batch holding it", offset, h.baseOffset, h.lastOffset(), ok, err)
		}
	}
	if _, _, ok, err := s.find(end); ok || err != nil {
		t.Fatalf("find(%d), the log end: ok %v, error %v, want no batch and no error", end, ok, err)
	}
	offset := end / 2
	if allocs := testing.AllocsPerRun(100, func() {
		if _, _, _, err := s.find(offset); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("find(%d) allocated %v times a call, want 0", offset, allocs)
	}
}
