package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// snapshotSuffix is the suffix of a producer snapshot file,
// "<20-digit offset>.snapshot" as Kafka names its producer state
// snapshots.
const snapshotSuffix = ".snapshot"

// ProducerSnapshotsRetained is how many producer snapshots a log keeps:
// WriteProducerSnapshot deletes the older ones.
const ProducerSnapshotsRetained = 2

// The log keeps its partition's producer snapshots, each the idempotent
// producer state (replication.Producers) as of the log offset in its
// name: every batch below that offset recorded, none at or above it. The
// log never reads their content; it names, lists, writes and deletes
// them, and deletes those the log no longer reaches: on Open the ones
// above the recovered log end, on TruncateTo the ones above the new log
// end, on TruncateFullyAndStartAt all of them.

// WriteProducerSnapshot replaces the producer snapshot at offset with
// data, atomically and durably (a temporary file fsynced, renamed over
// the snapshot, the directory fsynced), then deletes all but the
// ProducerSnapshotsRetained newest snapshots. offset must lie between
// StartOffset and EndOffset. It blocks appends for the write and its
// fsyncs.
//
// Errors: ErrClosed, ErrOffsetOutOfRange for an offset outside the log,
// and the file system's.
func (l *Log) WriteProducerSnapshot(offset int64, data []byte) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if end := l.active().tail.nextOffset; offset < l.startOffset || offset > end {
		return fmt.Errorf("%w: producer snapshot at offset %d, log holds %d..%d", ErrOffsetOutOfRange, offset, l.startOffset, end)
	}
	name := filepath.Base(segmentPath(l.dir, offset, snapshotSuffix))
	// Raised before the write: a failed write may leave the file.
	l.snapshotBound = max(l.snapshotBound, offset)
	if err := writeFileAtomic(l.dir, name, string(data)); err != nil {
		return fmt.Errorf("write producer snapshot %s: %w", name, err)
	}
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	if n := len(offsets) - ProducerSnapshotsRetained; n > 0 {
		return removeSnapshots(l.dir, offsets[:n], false)
	}
	return nil
}

// ProducerSnapshots returns the offsets of the log's producer snapshots,
// oldest first.
//
// Errors: ErrClosed, and the directory listing's.
func (l *Log) ProducerSnapshots() ([]int64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	return listSnapshots(l.dir)
}

// ReadProducerSnapshot returns the content of the producer snapshot at
// offset.
//
// Errors: ErrClosed, and the file system's (os.ErrNotExist for no such
// snapshot).
func (l *Log) ReadProducerSnapshot(offset int64) ([]byte, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	data, err := os.ReadFile(segmentPath(l.dir, offset, snapshotSuffix))
	if err != nil {
		return nil, fmt.Errorf("read producer snapshot at offset %d: %w", offset, err)
	}
	return data, nil
}

// DeleteProducerSnapshot deletes the producer snapshot at offset (one
// found corrupt); deleting a missing one is no error.
//
// Errors: ErrClosed, and the file system's.
func (l *Log) DeleteProducerSnapshot(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return removeSnapshots(l.dir, []int64{offset}, false)
}

// ActiveSegmentBaseOffset is the base offset of the segment appends go
// to: it grows when the log rolls a segment.
func (l *Log) ActiveSegmentBaseOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().baseOffset
}

// dropSnapshotsAbove deletes the producer snapshots above end, the log
// end offset after a recovery or truncation: they describe batches the
// log no longer holds. The removals are fsynced, so a crash cannot bring
// back a snapshot of a tail that is gone. It reads the directory only
// when snapshotBound says a snapshot may lie above end. Callers hold
// appendMu or own the log.
func (l *Log) dropSnapshotsAbove(end int64) error {
	if l.snapshotBound <= end {
		return nil
	}
	offsets, err := listSnapshots(l.dir)
	if err != nil {
		return err
	}
	i := sort.Search(len(offsets), func(i int) bool { return offsets[i] > end })
	if err := removeSnapshots(l.dir, offsets[i:], true); err != nil {
		return err
	}
	l.snapshotBound = end
	return nil
}

// listSnapshots returns the offsets of the producer snapshots in dir,
// ascending.
func listSnapshots(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list producer snapshots in %s: %w", dir, err)
	}
	return snapshotsAmong(entries), nil
}

// snapshotsAmong returns the offsets of the producer snapshots among the
// entries of a log directory, ascending.
func snapshotsAmong(entries []os.DirEntry) []int64 {
	var offsets []int64
	for _, e := range entries {
		if offset, ok := parseSegmentName(e.Name(), snapshotSuffix); ok {
			offsets = append(offsets, offset)
		}
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	return offsets
}

// removeSnapshots deletes the producer snapshots at offsets, fsyncing the
// directory afterwards if sync and any was removed.
func removeSnapshots(dir string, offsets []int64, sync bool) error {
	removed := false
	for _, offset := range offsets {
		err := os.Remove(segmentPath(dir, offset, snapshotSuffix))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove producer snapshot at offset %d: %w", offset, err)
		}
		removed = removed || err == nil
	}
	if sync && removed {
		return syncDir(dir)
	}
	return nil
}
