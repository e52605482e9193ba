package log

import (
	"testing"
	"time"
)

// TestAdvanceStartOffset raises the log start offset into the middle of a
// segment (as DeleteRecords does): reads below it are out of range, an
// offset at or below it changes nothing, one above the log end is
// refused, the leader-epoch cache is trimmed to it, it survives a
// reopen, and the next EnforceRetention deletes the segments wholly
// below it while Size shrinks by theirs.
func TestAdvanceStartOffset(t *testing.T) {
	dir := t.TempDir()
	batch := newBatch(t, 10, 100, time.Now().UnixMilli())
	cfg := testConfig()
	cfg.SegmentBytes = 2*int64(len(batch)) + 1
	cfg.RetentionTime = -1
	l := openTestLog(t, dir, cfg)
	for i := range 8 { // Four segments of two batches: 0, 20, 40, 60.
		if _, err := l.Append(batch, int32(i/4)); err != nil {
			t.Fatal(err)
		}
	}
	sizeBefore := l.Size()
	if want := 8 * int64(len(batch)); sizeBefore != want {
		t.Fatalf("Size: got %d, want %d", sizeBefore, want)
	}

	advanced, err := l.AdvanceStartOffset(45)
	if err != nil || !advanced {
		t.Fatalf("AdvanceStartOffset(45): got %t, %v, want true, nil", advanced, err)
	}
	if got := l.StartOffset(); got != 45 {
		t.Fatalf("StartOffset: got %d, want 45", got)
	}
	_, err = l.Read(44, 1<<20)
	wantErr(t, "Read below the log start offset", err, ErrOffsetOutOfRange)
	if got := readAllFrom(t, l, 45); len(got) != 4 || got[0].baseOffset != 40 {
		t.Fatalf("read from 45: got %d batches starting at %d, want 4 starting at 40 (the batch holding 45)", len(got), got[0].baseOffset)
	}
	if got := l.Epochs(); len(got) != 1 || got[0] != (EpochEntry{Epoch: 1, StartOffset: 45}) {
		t.Fatalf("Epochs after the advance: got %v, want [{1 45}]", got)
	}
	for _, offset := range []int64{45, 10} {
		if advanced, err := l.AdvanceStartOffset(offset); err != nil || advanced {
			t.Fatalf("AdvanceStartOffset(%d) at log start 45: got %t, %v, want false, nil", offset, advanced, err)
		}
	}
	_, err = l.AdvanceStartOffset(81)
	wantErr(t, "AdvanceStartOffset above the log end", err, ErrOffsetOutOfRange)
	if got := l.StartOffset(); got != 45 {
		t.Fatalf("StartOffset after refused advances: got %d, want 45", got)
	}
	if got := segmentFiles(t, dir); len(got) != 4 {
		t.Fatalf("segments before retention: got %v, want all 4", got)
	}

	// A crash (no Close) keeps the checkpointed log start.
	reopened := openTestLog(t, dir, cfg)
	if got := reopened.StartOffset(); got != 45 {
		t.Fatalf("StartOffset after reopen: got %d, want 45", got)
	}
	l.Close()

	n, err := reopened.EnforceRetention(time.Now())
	if err != nil || n != 2 {
		t.Fatalf("EnforceRetention: got %d, %v, want 2 segments deleted", n, err)
	}
	if got := segmentFiles(t, dir); len(got) != 2 || got[0] != 40 {
		t.Fatalf("segments after retention: got %v, want [40 60]", got)
	}
	if got, want := reopened.Size(), 4*int64(len(batch)); got != want {
		t.Fatalf("Size after retention: got %d, want %d", got, want)
	}
	if got := reopened.StartOffset(); got != 45 {
		t.Fatalf("StartOffset after retention: got %d, want 45", got)
	}
}
