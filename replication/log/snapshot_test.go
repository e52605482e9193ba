package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// snapshotOffsets lists l's producer snapshots.
func snapshotOffsets(t *testing.T, l *Log) []int64 {
	t.Helper()
	offsets, err := l.ProducerSnapshots()
	if err != nil {
		t.Fatalf("ProducerSnapshots: %v", err)
	}
	return offsets
}

// TestProducerSnapshotFiles follows a log's producer snapshots: written
// atomically at offsets within the log, the newest two kept, the ones
// above the log end deleted by TruncateTo and by Open, all of them by
// TruncateFullyAndStartAt.
func TestProducerSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, testConfig())
	var written []int64
	for i := range 4 {
		mustAppend(t, l, newBatch(t, 3, 16, int64(i)))
		offset := l.EndOffset()
		if err := l.WriteProducerSnapshot(offset, fmt.Appendf(nil, "state %d", i)); err != nil {
			t.Fatalf("WriteProducerSnapshot(%d): %v", offset, err)
		}
		written = append(written, offset)
	}
	if got, want := snapshotOffsets(t, l), written[2:]; !slices.Equal(got, want) {
		t.Fatalf("after four writes: got snapshots %v, want the newest two %v", got, want)
	}
	data, err := l.ReadProducerSnapshot(written[3])
	if err != nil || string(data) != "state 3" {
		t.Fatalf("ReadProducerSnapshot(%d): got (%q, %v), want \"state 3\"", written[3], data, err)
	}
	if err := l.WriteProducerSnapshot(l.EndOffset()+1, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("snapshot above the log end: got %v, want ErrOffsetOutOfRange", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}

	// TruncateTo drops the snapshot above the new end, keeps the one at it.
	if err := l.TruncateTo(written[2]); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshotOffsets(t, l), written[2:3]; !slices.Equal(got, want) {
		t.Fatalf("after TruncateTo(%d): got snapshots %v, want %v", written[2], got, want)
	}

	// Open drops a snapshot above the recovered log end (here one left
	// by a crash between a truncation and its removal).
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, fmt.Sprintf("%020d.snapshot", written[3]+50))
	if err := os.WriteFile(stale, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, testConfig())
	if got, want := snapshotOffsets(t, l), written[2:3]; !slices.Equal(got, want) {
		t.Fatalf("after Open: got snapshots %v, want %v", got, want)
	}
	// A truncation below the snapshot Open kept drops it too: TruncateTo
	// reads the directory only when a snapshot may lie above its cut.
	if err := l.TruncateTo(written[2] - 1); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, l); len(got) != 0 {
		t.Fatalf("after TruncateTo(%d): got snapshots %v, want none", written[2]-1, got)
	}
	if err := l.WriteProducerSnapshot(l.EndOffset(), []byte("again")); err != nil {
		t.Fatal(err)
	}
	written[2] = l.EndOffset()

	if err := l.DeleteProducerSnapshot(written[2]); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteProducerSnapshot(written[2]); err != nil {
		t.Fatalf("deleting a missing snapshot: got %v, want no error", err)
	}
	if got := snapshotOffsets(t, l); len(got) != 0 {
		t.Fatalf("after DeleteProducerSnapshot: got snapshots %v, want none", got)
	}

	if err := l.WriteProducerSnapshot(l.EndOffset(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, l); len(got) != 0 {
		t.Fatalf("after TruncateFullyAndStartAt: got snapshots %v, want none", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ProducerSnapshots(); !errors.Is(err, ErrClosed) {
		t.Fatalf("ProducerSnapshots after Close: got %v, want ErrClosed", err)
	}
}
