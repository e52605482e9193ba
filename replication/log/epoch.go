package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// leaderEpochFile is the leader-epoch checkpoint of a log's directory, in
// Kafka's format: a version line (0), a count line, then one
// "epoch startOffset" line per entry.
const leaderEpochFile = "leader-epoch-checkpoint"

// EpochEntry is a leader epoch and the first offset written in it, as
// Kafka's leader-epoch cache holds them (KIP-101).
type EpochEntry struct {
	// Epoch is the leader epoch.
	Epoch int32
	// StartOffset is the offset of the first batch written in Epoch.
	StartOffset int64
}

// Epochs returns the leader epochs of the batches in the log, oldest
// first, each with the offset its first batch got. Epochs strictly
// increase, as do their start offsets.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.epochs...)
}

// LatestEpoch returns the leader epoch of the newest batch that carried
// one; ok is false when no batch in the log did.
func (l *Log) LatestEpoch() (epoch int32, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.epochs) == 0 {
		return -1, false
	}
	return l.epochs[len(l.epochs)-1].Epoch, true
}

// EndOffsetForEpoch answers an OffsetForLeaderEpoch request as Kafka's
// leader does (KIP-101, KIP-279), over the log's epochs (EndOffsetFor).
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return EndOffsetFor(l.epochs, l.active().tail.nextOffset, epoch)
}

// LeaderEndOffsetForEpoch is EndOffsetForEpoch as the leader at
// leaderEpoch answers it, its epoch begun at epochStart (LeaderEndOffsetFor).
func (l *Log) LeaderEndOffsetForEpoch(epoch, leaderEpoch int32, epochStart int64) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return LeaderEndOffsetFor(l.epochs, l.active().tail.nextOffset, leaderEpoch, epochStart, epoch)
}

// EndOffsetFor answers OffsetForLeaderEpoch over epochs (oldest first)
// and a log end offset as Kafka's leader does: for the latest epoch, the
// log end offset; for an earlier one, the largest epoch at most epoch and
// the start offset of the first epoch above it (where epoch's writes
// ended); for an epoch below every known one, epoch itself and the first
// known start offset. An epoch above the latest, or no epochs, gives -1,
// -1 (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
func EndOffsetFor(epochs []EpochEntry, logEnd int64, epoch int32) (int32, int64) {
	n := len(epochs)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if epochs[n-1].Epoch == epoch {
		return epoch, logEnd
	}
	higher := -1
	for i, e := range epochs {
		if e.Epoch > epoch {
			higher = i
			break
		}
	}
	switch higher {
	case -1:
		return -1, -1
	case 0:
		return epoch, epochs[0].StartOffset
	default:
		return epochs[higher-1].Epoch, epochs[higher].StartOffset
	}
}

// LeaderEndOffsetFor is EndOffsetFor for the leader at leaderEpoch whose
// epoch began at epochStart (its log end when it became leader): until
// it writes, leaderEpoch is in no batch, and Kafka's leader, which puts
// its epoch in its cache on election, counts it as begun there anyway.
// So a replica whose last batch came from an epoch this leader never
// had (a leader between them wrote it) hears that the epoch before it
// ended at epochStart, not UNDEFINED.
func LeaderEndOffsetFor(epochs []EpochEntry, logEnd int64, leaderEpoch int32, epochStart int64, epoch int32) (int32, int64) {
	n := len(epochs)
	if leaderEpoch < 0 || (n > 0 && epochs[n-1].Epoch >= leaderEpoch) || epoch < 0 {
		return EndOffsetFor(epochs, logEnd, epoch)
	}
	epochStart = min(epochStart, logEnd)
	switch {
	case epoch == leaderEpoch:
		return epoch, logEnd
	case epoch > leaderEpoch:
		return -1, -1
	case n == 0:
		return epoch, epochStart
	case epoch >= epochs[n-1].Epoch:
		return epochs[n-1].Epoch, epochStart
	default:
		return EndOffsetFor(epochs, logEnd, epoch)
	}
}

// epochsAfter returns the epoch entries that headers (batches about to be
// appended, with their final offsets and epochs) add to entries.
func epochsAfter(entries []EpochEntry, headers []batchHeader) []EpochEntry {
	latest := int32(-1)
	if n := len(entries); n > 0 {
		latest = entries[n-1].Epoch
	}
	var added []EpochEntry
	for _, h := range headers {
		if h.leaderEpoch > latest {
			added = append(added, EpochEntry{Epoch: h.leaderEpoch, StartOffset: h.baseOffset})
			latest = h.leaderEpoch
		}
	}
	return added
}

// setEpochs publishes entries. Callers hold appendMu.
//
// The checkpoint is not written here but by syncEpochs, which flushLocked
// and roll call, and so Close: a new epoch's first append (every
// partition that changed leader, on its leader and on each follower)
// would otherwise create and rename a file, and fsync it, thousands of
// times in a row when a broker fails. It is durable no later than the
// batches it describes, and after a crash Open rebuilds the last
// segment's entries from its batches, which it verifies anyway (the
// earlier segments' entries were written when the segment after them was
// rolled).
func (l *Log) setEpochs(entries []EpochEntry) {
	if equalEpochs(entries, l.epochs) {
		return
	}
	l.mu.Lock()
	l.epochs = entries
	l.mu.Unlock()
	l.epochsDirty = true
}

// syncEpochs writes and fsyncs the leader-epoch checkpoint if the epochs
// changed since it was last written. Callers hold appendMu.
func (l *Log) syncEpochs() error {
	if !l.epochsDirty {
		return nil
	}
	if err := writeEpochs(l.dir, l.epochs); err != nil {
		return err
	}
	l.epochsDirty = false
	return nil
}

// trimEpochs returns entries without those starting at or after end, and
// with only the last of those starting before start kept, moved to start
// (the epoch of the oldest batch kept), as Kafka's truncateFromEnd and
// truncateFromStart do.
func trimEpochs(entries []EpochEntry, start, end int64) []EpochEntry {
	var out []EpochEntry
	for i, e := range entries {
		if e.StartOffset >= end {
			break
		}
		if e.StartOffset < start {
			if i+1 < len(entries) && entries[i+1].StartOffset <= start {
				continue
			}
			e.StartOffset = start
		}
		out = append(out, e)
	}
	return out
}

// equalEpochs reports whether a and b hold the same entries.
func equalEpochs(a, b []EpochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// errNoEpochCheckpoint reports a log directory without a leader-epoch
// checkpoint.
var errNoEpochCheckpoint = errors.New("no leader-epoch checkpoint")

// readEpochs reads the leader-epoch checkpoint of dir.
func readEpochs(dir string) ([]EpochEntry, error) {
	path := filepath.Join(dir, leaderEpochFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoEpochCheckpoint
	}
	if err != nil {
		return nil, fmt.Errorf("read leader-epoch checkpoint: %w", err)
	}
	bad := func(what string) error {
		return fmt.Errorf("leader-epoch checkpoint %s: %s", path, what)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	lines := 0
	var count int
	var entries []EpochEntry
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch lines {
		case 0:
			if line != "0" {
				return nil, bad(fmt.Sprintf("version %q, want 0", line))
			}
		case 1:
			if count, err = strconv.Atoi(line); err != nil || count < 0 {
				return nil, bad(fmt.Sprintf("count %q", line))
			}
		default:
			fields := strings.Fields(line)
			if len(fields) != 2 {
				return nil, bad(fmt.Sprintf("line %d %q, want \"epoch offset\"", lines+1, line))
			}
			epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
			offset, err2 := strconv.ParseInt(fields[1], 10, 64)
			if err1 != nil || err2 != nil || epoch < 0 || offset < 0 {
				return nil, bad(fmt.Sprintf("line %d %q, want \"epoch offset\"", lines+1, line))
			}
			e := EpochEntry{Epoch: int32(epoch), StartOffset: offset}
			if n := len(entries); n > 0 && (e.Epoch <= entries[n-1].Epoch || e.StartOffset <= entries[n-1].StartOffset) {
				return nil, bad(fmt.Sprintf("line %d %q does not follow %d %d", lines+1, line, entries[n-1].Epoch, entries[n-1].StartOffset))
			}
			entries = append(entries, e)
		}
		lines++
	}
	if lines < 2 || len(entries) != count {
		return nil, bad(fmt.Sprintf("%d entries, header says %d", len(entries), count))
	}
	return entries, nil
}

// writeEpochs replaces the leader-epoch checkpoint of dir atomically.
func writeEpochs(dir string, entries []EpochEntry) error {
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if err := writeFileAtomic(dir, leaderEpochFile, b.String()); err != nil {
		return fmt.Errorf("write leader-epoch checkpoint: %w", err)
	}
	return nil
}

// scanEpochs rebuilds the epoch entries from the batch headers of every
// segment (when the checkpoint is missing or unreadable).
func (l *Log) scanEpochs() ([]EpochEntry, error) {
	return scanSegmentEpochs(nil, l.segments)
}

// scanSegmentEpochs returns entries with the epochs that the batches of
// segs (in order, after those entries) add to them.
func scanSegmentEpochs(entries []EpochEntry, segs []*segment) ([]EpochEntry, error) {
	for _, s := range segs {
		sc := newHeaderScanner(s.log, 0, s.tail.size)
		for {
			_, h, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("scan leader epochs of segment %d: %w", s.baseOffset, err)
			}
			entries = append(entries, epochsAfter(entries, []batchHeader{h})...)
		}
	}
	return entries, nil
}
