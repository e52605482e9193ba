// Package log is a partition's durable log: a directory of segments holding
// Kafka v2 record batches exactly as received, with a sparse offset index and
// a time index per segment. It assigns offsets, verifies CRC-32C, rolls and
// retains segments, and recovers a torn tail on open. It knows nothing of
// replication or the network; a Log is safe for concurrent use (one writer
// at a time, readers concurrent with it).
//
// A log's directory holds, as Kafka lays them out:
//
//	00000000000000000000.log        batches, byte for byte as appended
//	00000000000000000000.index      offset index: relative offset uint32,
//	                                position uint32, every
//	                                log.index.interval.bytes
//	00000000000000000000.timeindex  time index: timestamp int64, relative
//	                                offset uint32
//	leader-epoch-checkpoint         first offset of each leader epoch
//	log-start-offset                the log start offset, once retention,
//	                                truncation or AdvanceStartOffset
//	                                moved it
//	clean-shutdown                  present only while the log is closed
//	                                cleanly
//	cleaner-offset-checkpoint       where the next compaction pass's dirty
//	                                range starts (compacted topics)
//	*.cleaned, *.swap               a compaction pass's segment files
//	                                being written or swapped in; Open
//	                                finishes or undoes the swap
//	00000000000000000000.snapshot   the partition's producer state as of
//	                                the offset in its name (encoded and
//	                                decoded by replication.Producers; the
//	                                newest ProducerSnapshotsRetained kept)
//
// The log also rebuilds and persists that producer state
// (producer_state.go): it reads the batch headers and the snapshot files
// and hands them to a ProducerState, which decides what they mean.
//
// Index fields are big-endian; their offsets are relative to the segment's
// base offset, the 20-digit number in its file names.
package log

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by the log. The broker maps them to Kafka error codes.
var (
	// ErrCorruptMessage: a batch failed its CRC-32C or is malformed
	// (Kafka CORRUPT_MESSAGE). Nothing was written.
	ErrCorruptMessage = errors.New("log: corrupt record batch")
	// ErrOffsetOutOfRange: the offset is below the log start or above the
	// log end offset (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrUnsupportedMagic: a batch whose magic is not 2.
	ErrUnsupportedMagic = errors.New("log: unsupported record batch magic")
	// ErrRecordTooLarge: a batch larger than the segment size allows,
	// or whose records decompress beyond what ValidateProduced allows
	// (Kafka MESSAGE_TOO_LARGE).
	ErrRecordTooLarge = errors.New("log: record batch too large")
	// ErrInvalidRecord: a producer's batch whose header or records break
	// the v2 format's rules where its framing and CRC-32C hold, or a
	// record without a key for a compacted topic (Kafka INVALID_RECORD,
	// as its LogValidator refuses them).
	ErrInvalidRecord = errors.New("log: invalid record")
	// ErrUnsupportedCompression: a batch whose compression codec is none
	// of none, gzip, snappy, lz4 and zstd (Kafka
	// UNSUPPORTED_COMPRESSION_TYPE).
	ErrUnsupportedCompression = errors.New("log: unsupported compression codec")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("log: closed")
	// ErrUnexpectedOffset: a follower's batches do not start at the log
	// end offset or do not follow each other (Kafka's
	// UnexpectedAppendOffsetException). Nothing was written.
	ErrUnexpectedOffset = errors.New("log: batch offset does not follow the log end offset")
)

// Config holds the log's settings, under Kafka's property names.
type Config struct {
	// SegmentBytes rolls a new segment when the active one would exceed
	// it (log.segment.bytes). Default 1 GiB; 14 bytes .. 2^31-1.
	SegmentBytes int64
	// RollTime rolls a new segment when the active one's first batch is
	// older than this (log.roll.ms). Default 7 days. The age counts from
	// when the log appended that batch or, for a segment found on Open,
	// from the batch's maxTimestamp.
	RollTime time.Duration
	// RetentionBytes deletes oldest segments while the log is larger
	// (log.retention.bytes). Default -1: no size limit.
	RetentionBytes int64
	// RetentionTime deletes segments whose newest record is older
	// (log.retention.ms). Default 7 days; -1 keeps forever.
	RetentionTime time.Duration
	// IndexIntervalBytes is the bytes between offset-index entries
	// (log.index.interval.bytes). Default 4096.
	IndexIntervalBytes int64
	// FlushMessages fsyncs after this many records (log.flush.interval.messages).
	// Default: never (rely on replication, as Kafka does).
	FlushMessages int64
	// FlushInterval fsyncs when the oldest unflushed record is older
	// (log.flush.interval.ms), checked on each append and by
	// EnforceRetention. Default 0: never on time.
	FlushInterval time.Duration
	// WritebackBytes is how many bytes appended to a segment the log lets
	// the page cache hold before it asks the kernel to start writing them
	// to disk (sync_file_range, SYNC_FILE_RANGE_WRITE), without waiting
	// and without fsyncing (log.writeback.bytes). Left to itself, Linux
	// starts writeback only when the dirty pages of the whole machine
	// reach vm.dirty_background_ratio (10 % of memory: gigabytes), and
	// then writes them all at once: appends stalled for 0.2-0.7 s while
	// it did, at 50 MB/s per broker. Default 1 MiB; 0: off (the kernel's
	// own pacing); else 4096 .. 1073741824.
	WritebackBytes int64
	// Files is the pool through which the log opens its segment files,
	// shared by the logs of a broker (log.open.files.max bounds it).
	// Default nil: a pool of DefaultOpenFilesMax shared by every log of
	// the process that names none.
	Files *FilePool
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		RollTime:           7 * 24 * time.Hour,
		RetentionBytes:     -1,
		RetentionTime:      7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		FlushMessages:      1<<63 - 1,
		WritebackBytes:     1 << 20,
	}
}

// Validate checks ranges and names the bad key.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 14 || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("log.segment.bytes %d: must be between 14 and %d", c.SegmentBytes, math.MaxInt32)
	case c.RollTime < time.Millisecond:
		return fmt.Errorf("log.roll.ms %d: must be between 1 and %d", c.RollTime.Milliseconds(), int64(math.MaxInt64/time.Millisecond))
	case c.RetentionBytes < -1:
		return fmt.Errorf("log.retention.bytes %d: must be between -1 (no limit) and %d", c.RetentionBytes, int64(math.MaxInt64))
	case c.RetentionTime < 0 && c.RetentionTime != -1 && c.RetentionTime != -time.Millisecond:
		return fmt.Errorf("log.retention.ms %d: must be -1 (keep forever) or between 0 and %d", c.RetentionTime.Milliseconds(), int64(math.MaxInt64/time.Millisecond))
	case c.IndexIntervalBytes < 0 || c.IndexIntervalBytes > math.MaxInt32:
		return fmt.Errorf("log.index.interval.bytes %d: must be between 0 and %d", c.IndexIntervalBytes, math.MaxInt32)
	case c.FlushMessages < 1:
		return fmt.Errorf("log.flush.interval.messages %d: must be between 1 and %d", c.FlushMessages, int64(math.MaxInt64))
	case c.FlushInterval < 0:
		return fmt.Errorf("log.flush.interval.ms %d: must be between 0 (never on time) and %d", c.FlushInterval.Milliseconds(), int64(math.MaxInt64/time.Millisecond))
	case c.WritebackBytes != 0 && (c.WritebackBytes < pageBytes || c.WritebackBytes > 1<<30):
		return fmt.Errorf("log.writeback.bytes %d: must be 0 (off) or between %d and %d", c.WritebackBytes, pageBytes, 1<<30)
	}
	return nil
}

// Files of a log's directory besides its segments.
const (
	// startOffsetFile is the checkpoint of the log start offset.
	startOffsetFile = "log-start-offset"
	// cleanShutdownFile marks a log closed by Close, whose files were
	// fsynced; Open removes it.
	cleanShutdownFile = "clean-shutdown"
)

// maxAppendBuffer bounds the size of the append buffers kept for reuse.
const maxAppendBuffer = 4 << 20

// appendBuffers holds buffers (*[]byte) for the copies Append rewrites,
// shared by all logs so that idle partitions hold none.
var appendBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Log is one partition's log.
//
// Locking: appendMu serializes the writers (appends, truncation, rolls,
// retention, flush, close); mu guards the segment list, the log start
// offset and each segment's published state. A writer writes file bytes
// beyond the published sizes holding appendMu only, then publishes them
// under mu, so readers (holding mu's read lock while they pread) never see
// a half-written batch and are not held up by the write or an fsync.
type Log struct {
	dir string
	cfg Config
	// files opens the segment files.
	files *FilePool
	// now is the clock; tests replace it.
	now func() time.Time

	appendMu sync.Mutex
	// writeback counts the goroutines starting a segment's writeback
	// (Config.WritebackBytes), at most one at a time (writebackBusy);
	// Close waits for them. Added to under appendMu.
	writeback     sync.WaitGroup
	writebackBusy atomic.Bool
	// unflushedRecords counts the records appended since the last fsync.
	unflushedRecords int64
	// firstUnflushed is when the oldest record not yet fsynced was
	// appended; zero when everything is flushed.
	firstUnflushed time.Time
	// dirDirty is set when segment files were created or removed since
	// the directory was last fsynced.
	dirDirty bool
	// epochsDirty is set when the epochs changed since the leader-epoch
	// checkpoint was last written (see setEpochs).
	epochsDirty bool
	// snapshotBound is an offset no producer snapshot of the log lies
	// above, -1 when it has none: load sets it from the directory and
	// WriteProducerSnapshot raises it, so that TruncateTo lists the
	// directory only when a snapshot may lie above its cut (a follower
	// cuts thousands of logs' tails at a failover).
	snapshotBound int64

	mu          sync.RWMutex
	segments    []*segment
	startOffset int64
	// end and start mirror the active segment's next offset and
	// startOffset for EndOffset and StartOffset, which replication reads
	// for every partition many times a second: set by publishLocked
	// wherever either changes, under mu.
	end, start atomic.Int64
	// epochs is the leader-epoch cache (see Epochs).
	epochs []EpochEntry
	closed bool

	// cleanMu serializes compaction passes (Clean).
	cleanMu sync.Mutex
	// truncations counts the truncations, so that a compaction pass
	// gives up when the log was truncated under it. Changed under
	// appendMu.
	truncations atomic.Uint64
}

// SetConfig replaces the log's config, as when its topic's configs change
// while it runs: the next append, roll, flush and retention pass follow
// it (a segment already written is not rewritten). IndexIntervalBytes
// stays as opened: the cleaner reads it without the writers' lock. It
// refuses an invalid cfg and keeps the one it has.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.cfg.SegmentBytes, l.cfg.RollTime = cfg.SegmentBytes, cfg.RollTime
	l.cfg.RetentionBytes, l.cfg.RetentionTime = cfg.RetentionBytes, cfg.RetentionTime
	l.cfg.FlushMessages, l.cfg.FlushInterval = cfg.FlushMessages, cfg.FlushInterval
	l.cfg.WritebackBytes = cfg.WritebackBytes
	return nil
}

// Open opens or creates the log in dir, recovering the tail of the last
// segment: a partial batch, a malformed one, one with a bad CRC or an
// offset gap, and everything after it, is cut off; everything before is
// kept. After a clean Close the last segment is verified from its last
// offset-index entry on; after a crash (no clean-shutdown marker) it is
// verified from its start and its indexes are rebuilt. The indexes of the
// last segment are also rebuilt if they are missing or malformed. Earlier
// segments are trusted. A segment's aborted-transaction index loses a
// last entry torn by a crash and the entries of markers cut off with the
// tail; one that is corrupt is deleted together with every producer
// snapshot, so that the producer state's recovery (RecoverProducers)
// reads the whole log and writes its entries again.
func Open(dir string, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory %s: %w", dir, err)
	}
	l := &Log{dir: dir, cfg: cfg, files: cfg.Files, now: time.Now}
	if l.files == nil {
		l.files = defaultPool
	}
	marker := filepath.Join(dir, cleanShutdownFile)
	_, statErr := os.Stat(marker)
	clean := statErr == nil
	err := l.load(clean)
	if err == nil && clean {
		// Until the next Close, a crash must find no marker. A removal
		// lost to a power failure is not fsynced for: the next Open would
		// still verify the tail from the last index entry.
		err = os.Remove(marker)
	}
	if err != nil {
		for _, s := range l.segments {
			s.close()
		}
		return nil, err
	}
	l.mu.Lock()
	l.publishLocked()
	l.mu.Unlock()
	return l, nil
}

// publishLocked sets end and start from the segments and startOffset. The
// caller holds mu for writing.
func (l *Log) publishLocked() {
	l.end.Store(l.active().tail.nextOffset)
	l.start.Store(l.startOffset)
}

// load opens the segments found in l.dir, recovers the last one (wholly
// unless the log was closed cleanly) and sets the log start offset.
func (l *Log) load(clean bool) error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("list log directory %s: %w", l.dir, err)
	}
	changed, err := recoverSwaps(l.dir, entries)
	if err != nil {
		return err
	}
	if changed {
		if entries, err = os.ReadDir(l.dir); err != nil {
			return fmt.Errorf("list log directory %s: %w", l.dir, err)
		}
	}
	var bases []int64
	logs := make(map[int64]bool)
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			bases = append(bases, base)
			logs[base] = true
		}
	}
	// Index files without a log (a deletion cut short) and temporary
	// checkpoint files are left-overs.
	for _, e := range entries {
		name := e.Name()
		base, isIndex := parseSegmentName(name, indexSuffix)
		if !isIndex {
			base, isIndex = parseSegmentName(name, timeIndexSuffix)
		}
		if !isIndex {
			base, isIndex = parseSegmentName(name, txnIndexSuffix)
		}
		if (isIndex && !logs[base]) || strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("remove left-over %s: %w", name, err)
			}
		}
	}
	checkpoint, err := readStartOffset(l.dir)
	if err != nil {
		return err
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if len(bases) == 0 {
		s, err := createSegment(l.files, l.dir, max(checkpoint, 0))
		if err != nil {
			return err
		}
		l.segments = []*segment{s}
		l.dirDirty = true
	}
	// lostTxns is set when a transaction index was corrupt: it is
	// deleted, and so are the producer snapshots, so that the producer
	// state's recovery reads the whole log and writes its entries again.
	lostTxns := false
	for i, base := range bases {
		s := openSegment(l.files, l.dir, base)
		l.segments = append(l.segments, s)
		txns, err := loadTxnIndex(s.txns.path)
		switch {
		case errors.Is(err, ErrCorruptTxnIndex):
			if err := os.Remove(s.txns.path); err != nil {
				return fmt.Errorf("remove corrupt transaction index: %w", err)
			}
			lostTxns = true
		case err != nil:
			return err
		default:
			s.txns = txns
		}
		if i < len(bases)-1 {
			err = l.loadTrusted(s, bases[i+1])
		} else {
			err = l.recover(s, clean)
		}
		if err == nil {
			// Entries of markers the recovery cut off go with them;
			// entries lost to a crash are written again by the producer
			// state's recovery (LoadProducersFrom).
			err = s.txns.TruncateTo(s.tail.nextOffset)
		}
		if err != nil {
			return err
		}
	}
	end := l.segments[len(l.segments)-1].tail.nextOffset
	l.startOffset = min(max(checkpoint, l.segments[0].baseOffset), end)
	// The left-overs removed above are no snapshots: entries still
	// lists every snapshot.
	snapshots := snapshotsAmong(entries)
	i := sort.Search(len(snapshots), func(i int) bool { return snapshots[i] > end })
	if lostTxns {
		i = 0
	}
	if err := removeSnapshots(l.dir, snapshots[i:], true); err != nil {
		return err
	}
	l.snapshotBound = -1
	if i > 0 {
		l.snapshotBound = snapshots[i-1]
	}
	return l.loadEpochs(clean)
}

// loadEpochs reads the leader-epoch checkpoint, or rebuilds it from the
// batches when it is missing or unreadable, and drops the entries the
// log no longer holds (a recovered tail, retention). After a crash
// (!clean) the last segment's entries are rebuilt from its batches: the
// checkpoint is fsynced only with the batches (see setEpochs), so a power
// failure may have kept batches of an epoch it lacks.
func (l *Log) loadEpochs(clean bool) error {
	read, err := readEpochs(l.dir)
	stale := err != nil // A missing checkpoint is an empty one.
	entries := read
	if err != nil {
		if entries, err = l.scanEpochs(); err != nil {
			return err
		}
	} else if !clean {
		last := l.active()
		if entries, err = scanSegmentEpochs(trimEpochs(read, l.startOffset, last.baseOffset), []*segment{last}); err != nil {
			return err
		}
	}
	trimmed := trimEpochs(entries, l.startOffset, l.active().tail.nextOffset)
	l.epochs = trimmed
	if (stale && len(trimmed) > 0) || !equalEpochs(trimmed, read) {
		return writeEpochs(l.dir, trimmed)
	}
	return nil
}

// loadTrusted loads an earlier segment without verifying its batches; its
// indexes are rebuilt from its batch headers only if they are malformed or
// its time index lacks the entry written when it was rolled.
func (l *Log) loadTrusted(s *segment, next int64) error {
	fi, err := s.log.Stat()
	if err != nil {
		return fmt.Errorf("stat segment %d: %w", s.baseOffset, err)
	}
	size := fi.Size()
	ok, err := s.loadIndexes(size)
	if err != nil {
		return err
	}
	if !ok || (size > 0 && len(s.times) == 0) {
		s.offsets, s.times = nil, nil
		s.offsetsFile.cut(0)
		s.timesFile.cut(0)
		if err := s.rebuildTail(size, l.cfg.IndexIntervalBytes); err != nil {
			return err
		}
		if t := s.tail; t.maxTimestamp > t.lastIndexedTimestamp {
			s.times = append(s.times, timeEntry{timestamp: t.maxTimestamp, relOffset: uint32(t.maxTimestampOffset - s.baseOffset)})
			s.tail.lastIndexedTimestamp = t.maxTimestamp
		}
		return s.persistIndexes(false)
	}
	s.tail.size = size
	s.tail.nextOffset = next
	if n := len(s.times); n > 0 {
		s.tail.maxTimestamp = s.times[n-1].timestamp
		s.tail.maxTimestampOffset = s.baseOffset + int64(s.times[n-1].relOffset)
		s.tail.lastIndexedTimestamp = s.tail.maxTimestamp
	}
	return nil
}

// recover verifies the last segment from its last offset-index entry (or
// from its start, if the log was not closed cleanly or the indexes are
// malformed or disagree with the log) to its end, cuts the file at the
// first torn, malformed or corrupt batch or offset gap, cuts the indexes to
// match and rebuilds the tail.
func (l *Log) recover(s *segment, clean bool) error {
	fi, err := s.log.Stat()
	if err != nil {
		return fmt.Errorf("stat segment %d: %w", s.baseOffset, err)
	}
	size := fi.Size()
	ok, err := s.loadIndexes(size)
	if err != nil {
		return err
	}
	ok = ok && clean
	pos, expect := int64(0), s.baseOffset
	if ok && len(s.offsets) > 0 {
		last := s.offsets[len(s.offsets)-1]
		_, h, err := newHeaderScanner(s.log, int64(last.position), size).next()
		if err == nil && h.lastOffset() == s.baseOffset+int64(last.relOffset) {
			pos, expect = int64(last.position), h.baseOffset
		} else {
			ok = false
		}
	}
	if !ok {
		s.offsets, s.times = nil, nil
		s.offsetsFile.cut(0)
		s.timesFile.cut(0)
	}
	var buf []byte
	for pos < size {
		if size-pos < batchHeaderSize {
			break
		}
		if cap(buf) < batchHeaderSize {
			buf = make([]byte, batchHeaderSize, scanChunk)
		}
		if _, err := s.log.ReadAt(buf[:batchHeaderSize], pos); err != nil {
			return fmt.Errorf("read segment %d at byte %d: %w", s.baseOffset, pos, err)
		}
		h := parseBatchHeader(buf[:batchHeaderSize])
		// Offsets may jump forward (a compacted segment's dropped
		// batches) but never go back.
		if checkHeader(h) != nil || pos+h.size > size || h.baseOffset < expect {
			break
		}
		if int64(cap(buf)) < h.size {
			buf = make([]byte, h.size)
		}
		buf = buf[:h.size]
		if _, err := s.log.ReadAt(buf, pos); err != nil {
			return fmt.Errorf("read segment %d at byte %d: %w", s.baseOffset, pos, err)
		}
		if checkCRC(h, buf) != nil {
			break
		}
		pos += h.size
		expect = h.nextOffset()
	}
	if pos < size {
		if err := s.log.Truncate(pos); err != nil {
			return fmt.Errorf("cut torn tail of segment %d at byte %d: %w", s.baseOffset, pos, err)
		}
		if err := s.log.Sync(); err != nil {
			return fmt.Errorf("fsync segment %d: %w", s.baseOffset, err)
		}
	}
	s.cutIndexes(pos, expect)
	if err := s.rebuildTail(pos, l.cfg.IndexIntervalBytes); err != nil {
		return err
	}
	// After a crash, what the page cache held may not be on disk yet.
	s.dirty = !clean || !s.offsetsFile.current(len(s.offsets)) || !s.timesFile.current(len(s.times))
	if s.dirty {
		s.log.markUnsynced()
	}
	return s.persistIndexes(false)
}

// cutIndexes drops the in-memory index entries of batches at or after
// position pos, whose first offset is next.
func (s *segment) cutIndexes(pos, next int64) {
	i := sort.Search(len(s.offsets), func(i int) bool { return int64(s.offsets[i].position) >= pos })
	s.offsets = s.offsets[:i]
	s.offsetsFile.cut(i)
	j := sort.Search(len(s.times), func(j int) bool { return s.baseOffset+int64(s.times[j].relOffset) >= next })
	s.times = s.times[:j]
	s.timesFile.cut(j)
}

// active is the last segment, the one appends go to. Callers hold mu or
// appendMu.
func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// segmentFor returns the index of the last segment whose base offset is at
// most offset (0 if none). Callers hold mu or appendMu.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })
	return max(i-1, 0)
}

// AppendResult describes an append.
type AppendResult struct {
	// BaseOffset is the offset assigned to the first record.
	BaseOffset int64
	// LastOffset is the offset of the last record.
	LastOffset int64
	// LogAppendTime is the time the log appended the batches (ms).
	LogAppendTime int64
	// Records is the number of records appended.
	Records int64
}

// Append appends the record batches in records (a produce request's
// records field: one or more concatenated v2 batches) as a leader does:
// it verifies each batch's CRC-32C and framing, assigns consecutive offsets
// by rewriting each batch's baseOffset and sets partitionLeaderEpoch to
// leaderEpoch (both lie outside the CRC, so the batch is otherwise stored
// byte for byte). All batches are validated before any byte is written:
// on error nothing is written. Append returns once the bytes are written
// to the segment file (the write returned), not necessarily fsynced.
//
// Errors: ErrCorruptMessage or ErrUnsupportedMagic for a bad batch,
// ErrRecordTooLarge for a batch larger than SegmentBytes, ErrClosed; in
// these cases nothing is written. A failed write (disk full) is cut back,
// but batches an append already wrote to an earlier segment of the same
// call stay. If the append triggered an fsync (FlushMessages,
// FlushInterval) that failed, the result is returned with the error. The
// caller's records are not modified (the log rewrites a copy).
func (l *Log) Append(records []byte, leaderEpoch int32) (AppendResult, error) {
	headers, err := splitBatches(records)
	if err != nil {
		return AppendResult{}, err
	}
	if err := checkProduced(headers); err != nil {
		return AppendResult{}, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return AppendResult{}, ErrClosed
	}
	if err := l.checkSizes(headers); err != nil {
		return AppendResult{}, err
	}
	bp := appendBuffers.Get().(*[]byte)
	buf := append((*bp)[:0], records...)
	defer func() {
		if cap(buf) <= maxAppendBuffer {
			*bp = buf
			appendBuffers.Put(bp)
		}
	}()
	next := l.active().tail.nextOffset
	var pos int64
	for i := range headers {
		h := &headers[i]
		setBaseOffset(buf[pos:], next)
		setLeaderEpoch(buf[pos:], leaderEpoch)
		h.baseOffset, h.leaderEpoch = next, leaderEpoch
		next = h.nextOffset()
		pos += h.size
	}
	return l.appendLocked(buf, headers)
}

// AppendAsFollower appends batches that already carry their offsets and
// leader epochs (a follower copying from its leader). The first batch's
// base offset must be at least EndOffset and each next batch must start
// after the previous one: offsets may jump forward, as they do over a
// compacted leader's dropped batches (Kafka allows the same). Batches are
// checked as in Append, except that a batch may hold fewer records than
// its offset range (compacted).
//
// Errors: those of Append, and ErrUnexpectedOffset when a batch starts
// below the log end or the previous batch's end.
func (l *Log) AppendAsFollower(records []byte) (AppendResult, error) {
	headers, err := splitBatches(records)
	if err != nil {
		return AppendResult{}, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return AppendResult{}, ErrClosed
	}
	next := l.active().tail.nextOffset
	for i, h := range headers {
		if h.baseOffset < next {
			return AppendResult{}, fmt.Errorf("%w: batch %d has base offset %d, want at least %d", ErrUnexpectedOffset, i, h.baseOffset, next)
		}
		next = h.nextOffset()
	}
	if err := l.checkSizes(headers); err != nil {
		return AppendResult{}, err
	}
	return l.appendLocked(records, headers)
}

// checkProduced refuses a producer's batch whose record count does not
// match its offset range, as Kafka's LogValidator does: only compaction
// leaves batches with fewer records.
func checkProduced(headers []batchHeader) error {
	for i, h := range headers {
		if int64(h.recordCount) != int64(h.lastOffsetDelta)+1 {
			return &batchError{kind: ErrCorruptMessage, where: fmt.Sprintf("batch %d", i), detail: fmt.Sprintf("recordCount %d, want lastOffsetDelta+1 = %d", h.recordCount, int64(h.lastOffsetDelta)+1)}
		}
	}
	return nil
}

// checkSizes refuses a batch larger than a segment.
func (l *Log) checkSizes(headers []batchHeader) error {
	for i, h := range headers {
		if h.size > l.cfg.SegmentBytes {
			return fmt.Errorf("%w: batch %d is %d bytes, log.segment.bytes is %d", ErrRecordTooLarge, i, h.size, l.cfg.SegmentBytes)
		}
	}
	return nil
}

// appendLocked writes the validated batches in buf, described by headers
// with their final offsets, rolling segments as needed, then counts them
// toward the next fsync. Callers hold appendMu.
func (l *Log) appendLocked(buf []byte, headers []batchHeader) (AppendResult, error) {
	now := l.now()
	res := AppendResult{
		BaseOffset:    headers[0].baseOffset,
		LastOffset:    headers[len(headers)-1].lastOffset(),
		LogAppendTime: now.UnixMilli(),
	}
	for _, h := range headers {
		res.Records += int64(h.recordCount)
	}
	// A new leader epoch is in the cache before its first batch is
	// written, and checkpointed before it is fsynced (see setEpochs), so
	// that no batch is ever durable with an epoch the checkpoint lacks;
	// Open drops entries beyond the log end.
	if added := epochsAfter(l.epochs, headers); len(added) > 0 {
		l.setEpochs(append(append([]EpochEntry(nil), l.epochs...), added...))
	}
	if err := l.write(buf, headers, now); err != nil {
		l.setEpochs(trimEpochs(l.epochs, l.startOffset, l.active().tail.nextOffset))
		return AppendResult{}, err
	}
	l.unflushedRecords += res.Records
	if l.firstUnflushed.IsZero() {
		l.firstUnflushed = now
	}
	if err := l.maybeFlush(now); err != nil {
		return res, err
	}
	return res, nil
}

// write writes buf's batches to the active segment, one write per segment
// touched, rolling before a batch that would make the segment exceed
// SegmentBytes, would need a relative offset beyond int32, or when the
// segment is older than RollTime.
func (l *Log) write(buf []byte, headers []batchHeader, now time.Time) error {
	s := l.active()
	tail := s.tail
	var offsets []offsetEntry
	var times []timeEntry
	var groupStart, pos int64
	first := 0 // the group's first header
	for i, h := range headers {
		if tail.size > 0 && (tail.size+h.size > l.cfg.SegmentBytes ||
			h.lastOffset()-s.baseOffset > math.MaxInt32 ||
			l.rollDue(s, now)) {
			if err := l.publish(s, buf[groupStart:pos], headers[first:i], tail, offsets, times); err != nil {
				return err
			}
			var err error
			if s, err = l.roll(); err != nil {
				return err
			}
			tail, offsets, times, groupStart, first = s.tail, nil, nil, pos, i
		}
		if tail.size == 0 {
			s.rollTimestamp = now.UnixMilli()
		}
		oe, hasOffset, te, hasTime := tail.add(h, s.baseOffset, l.cfg.IndexIntervalBytes)
		if hasOffset {
			offsets = append(offsets, oe)
		}
		if hasTime {
			times = append(times, te)
		}
		pos += h.size
	}
	return l.publish(s, buf[groupStart:pos], headers[first:], tail, offsets, times)
}

// publish writes data, the batches of headers, at the end of segment s,
// then makes it visible to readers with the new tail, index entries and
// recent batches. On a failed write it cuts the file back so nothing
// half-written stays behind.
func (l *Log) publish(s *segment, data []byte, headers []batchHeader, tail segmentTail, offsets []offsetEntry, times []timeEntry) error {
	if len(data) == 0 {
		return nil
	}
	s.dirty = true
	at := s.tail.size
	if _, err := s.log.WriteAt(data, at); err != nil {
		s.log.Truncate(at)
		return fmt.Errorf("write segment %d at byte %d: %w", s.baseOffset, at, err)
	}
	if s.writtenBack > at {
		s.writtenBack = at &^ (pageBytes - 1) // truncated below it
	}
	if end := at + int64(len(data)); l.cfg.WritebackBytes > 0 && end-s.writtenBack >= l.cfg.WritebackBytes &&
		l.writebackBusy.CompareAndSwap(false, true) {
		// sync_file_range can wait for the device (behind another
		// process's fsync, say) and costs the file system's block
		// allocation, so it runs beside the append, one at a time per
		// log: while one runs, the range grows and goes with the next.
		// The range stops at the last whole page: the file system locks
		// each page it writes back until its blocks are allocated, which
		// can wait for block-bitmap reads behind the device's queue, and
		// the next append into the page still being filled would wait
		// as long (hundreds of ms, seen in the kernel's stacks). That
		// page goes with the next range, once full, and is written once.
		// Best effort: a file system without sync_file_range (or a file
		// closed meanwhile) leaves writeback to the kernel, as with
		// WritebackBytes 0.
		file, from, to := s.log, s.writtenBack, end&^(pageBytes-1)
		s.writtenBack = to
		l.writeback.Add(1)
		go func() {
			defer l.writeback.Done()
			defer l.writebackBusy.Store(false)
			file.startWriteback(from, to-from)
		}()
	}
	if last := tail.size - tail.lastPos; tail.hasLast && last <= tailCacheBytes {
		tail.lastBytes = slices.Clone(data[len(data)-int(last):])
	}
	l.mu.Lock()
	if s.recent == nil {
		s.recent = &recentBatches{}
	}
	for _, h := range headers {
		s.recent.add(spanOf(at, h))
		at += h.size
	}
	s.tail = tail
	s.offsets = append(s.offsets, offsets...)
	s.times = append(s.times, times...)
	l.publishLocked()
	l.mu.Unlock()
	return nil
}

// rollDue reports whether segment s is older than RollTime at now.
func (l *Log) rollDue(s *segment, now time.Time) bool {
	if s.tail.size == 0 {
		return false
	}
	if s.rollTimestamp < 0 {
		ts, err := s.firstBatchTimestamp()
		if err != nil || ts < 0 {
			ts = now.UnixMilli()
		}
		s.rollTimestamp = ts
	}
	return now.UnixMilli()-s.rollTimestamp > l.cfg.RollTime.Milliseconds()
}

// roll closes the active segment to appends, writing its final time-index
// entry, and starts a new one at the log end offset.
func (l *Log) roll() (*segment, error) {
	old := l.active()
	if t := old.tail; t.maxTimestamp > t.lastIndexedTimestamp {
		te := timeEntry{timestamp: t.maxTimestamp, relOffset: uint32(t.maxTimestampOffset - old.baseOffset)}
		l.mu.Lock()
		old.times = append(old.times, te)
		old.tail.lastIndexedTimestamp = t.maxTimestamp
		l.mu.Unlock()
	}
	if err := old.persistIndexes(false); err != nil {
		return nil, err
	}
	// A rolled segment's transaction index takes entries only from a
	// recovery, which opens it again: synced and closed, it holds no
	// descriptor, as the FilePool holds none for an idle segment.
	if err := old.txns.Flush(); err != nil {
		return nil, err
	}
	if err := old.txns.Close(); err != nil {
		return nil, err
	}
	// The epochs of the segment rolled are durable before any batch of
	// the next: Open rebuilds only the last segment's (see setEpochs).
	if err := l.syncEpochs(); err != nil {
		return nil, err
	}
	s, err := createSegment(l.files, l.dir, old.tail.nextOffset)
	if err != nil {
		return nil, err
	}
	s.dirty = true
	l.dirDirty = true
	l.mu.Lock()
	old.recent = nil // kept for the active segment only
	l.segments = append(l.segments, s)
	l.publishLocked()
	l.mu.Unlock()
	return s, nil
}

// Read returns whole batches starting with the batch that contains offset,
// up to maxBytes in total, but always at least one whole batch if any
// exists at offset (as Kafka does, so a large batch is never stuck).
// Reading at EndOffset returns no bytes and no error; below StartOffset or
// above EndOffset returns ErrOffsetOutOfRange. The returned slice is the
// caller's. A read may span segments.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.read(offset, maxBytes, math.MaxInt64, nil)
}

// ReadUpTo is Read limited to batches that end below maxOffset (the high
// watermark: consumers see only offsets below it). Reading at or above
// maxOffset (but within the log) returns no bytes and no error.
func (l *Log) ReadUpTo(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	return l.read(offset, maxBytes, maxOffset, nil)
}

// ReadUpToInto is ReadUpTo reading into buffers from alloc.
func (l *Log) ReadUpToInto(offset int64, maxBytes int, maxOffset int64, alloc Alloc) ([]byte, error) {
	return l.read(offset, maxBytes, maxOffset, alloc)
}

// Alloc returns a buffer of n bytes (contents unset) for a read to copy
// batches into: a fetch gives its reads buffers from a pool and takes
// them back once its answer is encoded. The buffer may have room beyond
// n. A nil Alloc allocates.
type Alloc func(n int) []byte

// read implements Read and ReadUpTo.
func (l *Log) read(offset int64, maxBytes int, maxOffset int64, alloc Alloc) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.readLocked(offset, maxBytes, maxOffset, alloc)
}

// readLocked is read for callers holding mu.
func (l *Log) readLocked(offset int64, maxBytes int, maxOffset int64, alloc Alloc) ([]byte, error) {
	if l.closed {
		return nil, ErrClosed
	}
	end := l.active().tail.nextOffset
	if offset < l.startOffset || offset > end {
		return nil, fmt.Errorf("%w: offset %d, log holds %d..%d", ErrOffsetOutOfRange, offset, l.startOffset, end)
	}
	limit := min(end, maxOffset)
	if offset >= limit {
		return nil, nil
	}
	var out []byte
	for i := l.segmentFor(offset); i < len(l.segments); i++ {
		s := l.segments[i]
		// A read at the tail starts at the last batch, kept in memory
		// when small; others scan from the offset index's hint.
		t := s.tail
		atTail := t.hasLast && offset >= t.lastBase && offset < t.nextOffset
		if atTail && t.lastBytes != nil && len(out) == 0 {
			if t.nextOffset > limit {
				return nil, nil // the batch ends beyond what may be read
			}
			return append(alloc.get(len(t.lastBytes))[:0], t.lastBytes...), nil
		}
		pos, ok := t.lastPos, true
		if !atTail {
			span, found, err := s.find(offset)
			if err != nil {
				return nil, fmt.Errorf("read offset %d: %w", offset, err)
			}
			pos, ok = span.pos, found
		}
		if !ok {
			continue
		}
		var done bool
		var err error
		if out, done, err = s.readBatches(out, pos, maxBytes, limit, alloc); err != nil {
			return nil, fmt.Errorf("read offset %d: %w", offset, err)
		}
		if done {
			break
		}
	}
	return out, nil
}

// readBatches appends to out the whole batches of s from pos while out
// stays within maxBytes (the first batch of a read always goes in) and
// the batches end below limit. done is false when the segment ran out
// first, so the read may go on in the next one. Buffers come from alloc.
// Callers hold mu.
func (s *segment) readBatches(out []byte, pos int64, maxBytes int, limit int64, alloc Alloc) (_ []byte, done bool, err error) {
	avail := s.tail.size - pos
	budget := int64(maxBytes - len(out))
	if len(out) == 0 {
		budget = max(budget, batchHeaderSize)
	}
	if budget < batchHeaderSize {
		return out, true, nil
	}
	n := min(avail, budget)
	start := len(out)
	out = alloc.grow(out, int(n))
	chunk := out[start : start+int(n)]
	if _, err := s.log.ReadAt(chunk, pos); err != nil {
		return out[:start], true, fmt.Errorf("read segment %d at byte %d: %w", s.baseOffset, pos, err)
	}
	var p int64
	for p+batchHeaderSize <= n {
		h := parseBatchHeader(chunk[p:])
		if h.size < batchHeaderSize {
			return out[:start], true, fmt.Errorf("segment %d at byte %d: batch of %d bytes", s.baseOffset, pos+p, h.size)
		}
		if h.lastOffset() >= limit {
			return out[:start+int(p)], true, nil
		}
		if p+h.size > n {
			if p == 0 && start == 0 {
				// At least one whole batch, however large.
				out = alloc.grow(out[:start], int(h.size))
				if _, err := s.log.ReadAt(out[start:start+int(h.size)], pos); err != nil {
					return out[:start], true, fmt.Errorf("read segment %d at byte %d: %w", s.baseOffset, pos, err)
				}
				return out[:start+int(h.size)], true, nil
			}
			break
		}
		p += h.size
	}
	return out[:start+int(p)], p < avail, nil
}

// grow returns b extended by n bytes (contents of the new bytes unset).
func grow(b []byte, n int) []byte {
	return Alloc(nil).grow(b, n)
}

// get returns a buffer of n bytes from a, or a new one.
func (a Alloc) get(n int) []byte {
	if a == nil {
		return make([]byte, n)
	}
	return a(n)[:n]
}

// grow returns b extended by n bytes (contents of the new bytes unset),
// in a buffer from a when b has no room.
func (a Alloc) grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	var nb []byte
	if a == nil {
		nb = make([]byte, len(b)+n, max(len(b)+n, 2*cap(b)))
	} else {
		nb = a(len(b) + n)[:len(b)+n]
	}
	copy(nb, b)
	return nb
}

// StartOffset is the first offset still in the log (log start offset).
func (l *Log) StartOffset() int64 {
	return l.start.Load()
}

// EndOffset is the offset the next record will get (log end offset, LEO).
func (l *Log) EndOffset() int64 {
	return l.end.Load()
}

// attrLogAppendTime is the attribute bit of a v2 batch whose timestamp
// type is LogAppendTime: every record's timestamp is the batch's
// maxTimestamp, whatever its timestampDelta.
const attrLogAppendTime = 0x08

// OffsetForTime returns the offset and timestamp of the first record at or
// above the log start offset whose timestamp is at least ts (ms), as
// Kafka's LogSegment.findOffsetByTimestamp does; ok is false if no record
// is. The time index finds the first batch whose maxTimestamp is at least
// ts; that batch's records are read (decompressed if need be) in offset
// order, and if compaction left none of them at or after ts, the next
// batches are. The search goes in offset order: where producer clocks
// went backwards, the first match in offset order wins, not the record
// whose timestamp is closest to ts. A record of a LogAppendTime batch has
// the batch's maxTimestamp. Control batches are skipped.
func (l *Log) OffsetForTime(ts int64) (offset int64, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, false, ErrClosed
	}
	var raw []byte
	for _, s := range l.segments {
		if s.tail.size == 0 || s.tail.maxTimestamp < ts || s.tail.nextOffset <= l.startOffset {
			continue
		}
		sc := newHeaderScanner(s.log, s.timeLookup(ts), s.tail.size)
		for {
			pos, h, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, 0, false, fmt.Errorf("find timestamp %d in segment %d: %w", ts, s.baseOffset, err)
			}
			if h.maxTimestamp < ts || h.lastOffset() < l.startOffset || h.recordCount == 0 || h.attributes&attrControl != 0 {
				continue
			}
			raw = grow(raw[:0], int(h.size))
			if _, err := s.log.ReadAt(raw, pos); err != nil {
				return 0, 0, false, fmt.Errorf("find timestamp %d: read segment %d at byte %d: %w", ts, s.baseOffset, pos, err)
			}
			offset, timestamp, ok, err = firstRecordAtOrAfter(raw, h, ts, l.startOffset)
			if err != nil {
				return 0, 0, false, fmt.Errorf("find timestamp %d in segment %d: %w", ts, s.baseOffset, err)
			}
			if ok {
				return offset, timestamp, true, nil
			}
		}
	}
	return 0, 0, false, nil
}

// firstRecordAtOrAfter returns the offset and timestamp of the first
// record of the batch raw (header h) at or above the offset from whose
// timestamp is at least ts; ok is false if none is.
func firstRecordAtOrAfter(raw []byte, h batchHeader, ts, from int64) (offset, timestamp int64, ok bool, err error) {
	baseTimestamp := int64(binary.BigEndian.Uint64(raw[fieldBaseTimestamp:]))
	err = eachRecord(raw, h, func(o int64, r parsedRecord) {
		if ok || o < from {
			return
		}
		t := h.maxTimestamp
		if h.attributes&attrLogAppendTime == 0 {
			t = baseTimestamp + recordTimestampDelta(r.raw)
		}
		if t >= ts {
			offset, timestamp, ok = o, t, true
		}
	})
	if err != nil {
		return 0, 0, false, err
	}
	return offset, timestamp, ok, nil
}

// recordTimestampDelta is the timestampDelta of the record raw, one
// parseRecord accepted: after its length varint and attributes int8.
func recordTimestampDelta(raw []byte) int64 {
	_, n := binary.Varint(raw)
	delta, _ := binary.Varint(raw[n+1:])
	return delta
}

// MaxTimestamp returns the batch with the largest maxTimestamp among the
// batches that end below the offset upTo (a consumer's high watermark),
// as its last offset and that timestamp (ListOffsets' max-timestamp
// query, KIP-734); ok is false when no such batch is. Its granularity is
// the batch; of equal timestamps the first wins.
func (l *Log) MaxTimestamp(upTo int64) (offset int64, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, false, ErrClosed
	}
	timestamp = -1
	for _, s := range l.segments {
		if s.tail.size == 0 || s.tail.nextOffset <= l.startOffset || s.baseOffset >= upTo {
			continue
		}
		if s.tail.nextOffset <= upTo {
			// The whole segment is below upTo: its tail knows.
			if s.tail.maxTimestamp > timestamp {
				offset, timestamp, ok = s.tail.maxTimestampOffset, s.tail.maxTimestamp, true
			}
			continue
		}
		sc := newHeaderScanner(s.log, 0, s.tail.size)
		for {
			_, h, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, 0, false, fmt.Errorf("find the max timestamp in segment %d: %w", s.baseOffset, err)
			}
			if h.lastOffset() >= upTo {
				break
			}
			if h.maxTimestamp > timestamp && h.lastOffset() >= l.startOffset {
				offset, timestamp, ok = h.lastOffset(), h.maxTimestamp, true
			}
		}
	}
	return offset, timestamp, ok, nil
}

// TruncateTo removes every record at or above offset (a follower
// truncating after a leader change). Truncating at or above EndOffset is a
// no-op. Batches are whole: if offset falls inside a batch, that batch is
// removed from its start, so EndOffset becomes its base offset, below
// offset. Truncating below StartOffset empties the log and restarts it at
// offset (TruncateFullyAndStartAt). The producer snapshots above the new
// EndOffset are deleted.
func (l *Log) TruncateTo(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset >= l.active().tail.nextOffset {
		return nil
	}
	if offset < l.startOffset {
		return l.truncateFullyLocked(offset)
	}
	i := l.segmentFor(offset)
	s := l.segments[i]
	span, ok, err := s.find(offset)
	if err != nil {
		return fmt.Errorf("truncate to offset %d: %w", offset, err)
	}
	pos := span.pos
	cutBase := s.tail.nextOffset
	if ok {
		cutBase = span.baseOffset
	}
	if cutBase < l.startOffset {
		return l.truncateFullyLocked(offset)
	}

	// Work out the segment's new state before readers see it.
	cut := &segment{dir: s.dir, baseOffset: s.baseOffset, log: s.log, offsetsFile: s.offsetsFile, timesFile: s.timesFile}
	cut.offsets = append([]offsetEntry(nil), s.offsets...)
	cut.times = append([]timeEntry(nil), s.times...)
	cut.cutIndexes(pos, cutBase)
	if err := cut.rebuildTail(pos, l.cfg.IndexIntervalBytes); err != nil {
		return fmt.Errorf("truncate to offset %d: %w", offset, err)
	}
	if err := l.lowerCleanerCheckpoint(cut.tail.nextOffset); err != nil {
		return fmt.Errorf("truncate to offset %d: %w", offset, err)
	}
	removed := l.segments[i+1:]
	l.mu.Lock()
	l.segments = l.segments[: i+1 : i+1]
	s.tail, s.offsets, s.times = cut.tail, cut.offsets, cut.times
	s.recent = nil // the cut batches may be among them
	l.publishLocked()
	txnErr := s.txns.TruncateTo(s.tail.nextOffset)
	l.mu.Unlock()
	s.offsetsFile, s.timesFile = cut.offsetsFile, cut.timesFile

	if s.tail.size == 0 {
		s.rollTimestamp = -1
	}
	s.dirty = true
	l.setEpochs(trimEpochs(l.epochs, l.startOffset, s.tail.nextOffset))
	first := l.dropSnapshotsAbove(s.tail.nextOffset)
	if txnErr != nil && first == nil {
		first = txnErr
	}
	if err := s.log.Truncate(pos); err != nil && first == nil {
		first = fmt.Errorf("truncate segment %d at byte %d: %w", s.baseOffset, pos, err)
	}
	// Index files that exist may hold entries past the cut, and are cut
	// now. A segment whose files are not created yet (the active one
	// before its first fsync) gets them at its next sync or roll, as
	// after appends: creating two files per log would cost a follower
	// cutting thousands of tails at a failover most of its time.
	if s.indexFiles {
		if err := s.persistIndexes(false); err != nil && first == nil {
			first = err
		}
	}
	for _, r := range removed {
		if err := r.remove(); err != nil && first == nil {
			first = fmt.Errorf("remove segment %d: %w", r.baseOffset, err)
		}
		l.dirDirty = true
	}
	return first
}

// TruncateFullyAndStartAt removes every segment and every producer
// snapshot and restarts the log, empty, at offset: StartOffset and
// EndOffset become offset (a follower whose leader's log starts above
// this log's end).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.truncateFullyLocked(offset)
}

// truncateFullyLocked implements TruncateFullyAndStartAt. Callers hold
// appendMu.
func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: restart the log at offset %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.lowerCleanerCheckpoint(offset); err != nil {
		return err
	}
	var first error
	removed := l.segments
	for _, r := range removed {
		if err := r.remove(); err != nil && first == nil {
			first = fmt.Errorf("remove segment %d: %w", r.baseOffset, err)
		}
	}
	s, err := createSegment(l.files, l.dir, offset)
	if err != nil {
		return err
	}
	s.dirty = true
	l.dirDirty = true
	l.mu.Lock()
	l.segments = []*segment{s}
	l.startOffset = offset
	l.publishLocked()
	l.mu.Unlock()
	if err := writeStartOffset(l.dir, offset); err != nil && first == nil {
		first = err
	}
	l.setEpochs(nil)
	if err := l.dropSnapshotsAbove(-1); err != nil && first == nil {
		first = err
	}
	return first
}

// AdvanceStartOffset raises the log start offset to offset (Kafka's
// maybeIncrementLogStartOffset, for DeleteRecords and for a follower
// learning its leader's log start) and checkpoints it before returning,
// so that it survives a crash. Records below it can no longer be read;
// the segments wholly below it are deleted by the next EnforceRetention,
// as Kafka's retention check deletes them. An offset at or below the
// current log start changes nothing; advanced says whether it moved.
// Errors: ErrOffsetOutOfRange for an offset above EndOffset (nothing
// changes), ErrClosed, and a failed checkpoint write (the new log start
// holds in memory).
func (l *Log) AdvanceStartOffset(offset int64) (advanced bool, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return false, ErrClosed
	}
	end := l.active().tail.nextOffset
	if offset > end {
		return false, fmt.Errorf("%w: log start offset %d above the log end offset %d", ErrOffsetOutOfRange, offset, end)
	}
	if offset <= l.startOffset {
		return false, nil
	}
	l.mu.Lock()
	l.startOffset = offset
	l.publishLocked()
	l.mu.Unlock()
	l.setEpochs(trimEpochs(l.epochs, offset, end))
	return true, writeStartOffset(l.dir, offset)
}

// Size is the bytes of the log's segment files (their batches; indexes
// and checkpoints not counted), as Kafka's DescribeLogDirs reports it.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var total int64
	for _, s := range l.segments {
		total += s.tail.size
	}
	return total
}

// EnforceRetention deletes whole segments beyond RetentionBytes or older
// than RetentionTime (never the active segment) and moves the log start
// offset; it returns how many segments it deleted. It also rolls the
// active segment when it is older than RollTime, and fsyncs when the
// oldest unflushed record is older than FlushInterval. The broker calls it
// periodically (log.retention.check.interval.ms).
//
// A segment's age for retention is now minus its largest record
// timestamp; segments are deleted oldest first, stopping at the first one
// that is kept.
func (l *Log) EnforceRetention(now time.Time) (int, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if l.rollDue(l.active(), now) {
		if _, err := l.roll(); err != nil {
			return 0, err
		}
	}
	candidates := l.segments[:len(l.segments)-1]
	n := 0
	// Segments wholly below the log start offset.
	for n < len(candidates) && l.segments[n+1].baseOffset <= l.startOffset {
		n++
	}
	if l.cfg.RetentionTime >= 0 {
		nowMs, limit := now.UnixMilli(), l.cfg.RetentionTime.Milliseconds()
		for n < len(candidates) && nowMs-candidates[n].largestTimestamp() > limit {
			n++
		}
	}
	if l.cfg.RetentionBytes >= 0 {
		var total int64
		for _, s := range l.segments[n:] {
			total += s.tail.size
		}
		for n < len(candidates) && total-candidates[n].tail.size >= l.cfg.RetentionBytes {
			total -= candidates[n].tail.size
			n++
		}
	}
	var first error
	if n > 0 {
		removed := append([]*segment(nil), l.segments[:n]...)
		l.mu.Lock()
		l.segments = append([]*segment(nil), l.segments[n:]...)
		l.startOffset = max(l.startOffset, l.segments[0].baseOffset)
		start := l.startOffset
		l.publishLocked()
		l.mu.Unlock()
		for _, r := range removed {
			if err := r.remove(); err != nil && first == nil {
				first = fmt.Errorf("remove segment %d: %w", r.baseOffset, err)
			}
		}
		l.dirDirty = true
		if err := writeStartOffset(l.dir, start); err != nil && first == nil {
			first = err
		}
		l.setEpochs(trimEpochs(l.epochs, start, l.active().tail.nextOffset))
	}
	if err := l.maybeFlush(now); err != nil && first == nil {
		first = err
	}
	return n, first
}

// largestTimestamp is the segment's largest record timestamp (ms), or the
// modification time of its file if its records carry none.
func (s *segment) largestTimestamp() int64 {
	if s.tail.maxTimestamp >= 0 {
		return s.tail.maxTimestamp
	}
	if fi, err := s.log.Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return -1
}

// maybeFlush fsyncs when FlushMessages records are unflushed or the oldest
// unflushed one is older than FlushInterval. Callers hold appendMu.
func (l *Log) maybeFlush(now time.Time) error {
	if l.unflushedRecords == 0 && !l.dirDirty {
		return nil
	}
	due := l.unflushedRecords >= l.cfg.FlushMessages
	if l.cfg.FlushInterval > 0 && !l.firstUnflushed.IsZero() && now.Sub(l.firstUnflushed) >= l.cfg.FlushInterval {
		due = true
	}
	if !due {
		return nil
	}
	return l.flushLocked()
}

// Flush fsyncs everything written so far: the leader-epoch checkpoint,
// the segments written since the last flush, their indexes, and the
// directory if segments were created or removed.
func (l *Log) Flush() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.flushLocked()
}

// flushLocked implements Flush. Callers hold appendMu.
func (l *Log) flushLocked() error {
	// The epochs first, so no batch is durable before its epoch.
	if err := l.syncEpochs(); err != nil {
		return err
	}
	for _, s := range l.segments {
		if !s.dirty {
			continue
		}
		if err := s.sync(); err != nil {
			return err
		}
		s.dirty = false
	}
	if l.dirDirty {
		if err := syncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	l.unflushedRecords = 0
	l.firstUnflushed = time.Time{}
	return nil
}

// Close flushes and closes the log's files. Closing a closed log does
// nothing.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return nil
	}
	first := l.flushLocked()
	if err := l.closeFilesLocked(); first == nil {
		first = err
	}
	if first == nil {
		first = writeCleanShutdown(l.dir)
	}
	return first
}

// closeFilesLocked marks the log closed, waits for its writeback
// requests and closes its segments' files, returning the first error.
// Callers hold appendMu and have checked that the log is open.
func (l *Log) closeFilesLocked() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.writeback.Wait()
	var first error
	for _, s := range l.segments {
		if err := s.close(); err != nil && first == nil {
			first = fmt.Errorf("close segment %d: %w", s.baseOffset, err)
		}
	}
	return first
}

// DeletedSuffix ends the name of a log directory marked for deletion
// (Kafka's "-delete"): Delete renames a log's directory to
// NAME.ID-delete beside it, and the broker holding the log dir removes
// such directories in the background, and at start those a crash left.
const DeletedSuffix = "-delete"

// Delete closes the log's files without syncing them, since nothing
// reads them again, and renames its directory to a name ending in
// DeletedSuffix, which it returns: the caller removes that directory
// (os.RemoveAll) later, off its own path. The rename frees the log's
// name at once, for a topic created again under it, and a crash leaves
// the files marked rather than half removed. Deleting a topic of 10 000
// partitions with a sync and a removal of each log in turn kept a broker
// at it for minutes on a disk; Kafka's LogManager renames and removes
// later the same way.
func (l *Log) Delete() (string, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	var first error
	if !l.closed {
		first = l.closeFilesLocked()
	}
	gone, err := MarkDeleted(l.dir)
	if err != nil {
		return "", err
	}
	return gone, first
}

// MarkDeleted renames the log directory dir to a name beside it that
// ends in DeletedSuffix (NAME.ID-delete, the ID random), which it
// returns, for its removal later.
func MarkDeleted(dir string) (string, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("name deleted log directory %s: %w", dir, err)
	}
	gone := fmt.Sprintf("%s.%x%s", dir, id, DeletedSuffix)
	if err := os.Rename(dir, gone); err != nil {
		return "", fmt.Errorf("mark log directory %s deleted: %w", dir, err)
	}
	return gone, nil
}

// AppendAbortedTxn adds a to the aborted-transaction index of the segment
// holding its marker (a.LastOffset), as Kafka's UnifiedLog does after it
// appends an abort marker. An entry whose marker is not after the
// segment's last entry is one the index holds already (a recovery
// replaying markers written before a crash) and is skipped. The entry is
// written to the file, not synced: the next flush syncs it with the
// segment. The caller holds the partition's append lock, which orders
// the markers.
//
// Errors: ErrOffsetOutOfRange for a marker outside the log, ErrClosed,
// and the file system's.
func (l *Log) AppendAbortedTxn(a AbortedTxn) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if a.LastOffset < l.segments[0].baseOffset || a.LastOffset >= l.active().tail.nextOffset {
		return fmt.Errorf("%w: aborted transaction marker at offset %d, log holds %d..%d",
			ErrOffsetOutOfRange, a.LastOffset, l.segments[0].baseOffset, l.active().tail.nextOffset)
	}
	s := l.segments[l.segmentFor(a.LastOffset)]
	if e := s.txns.Entries(); len(e) > 0 && a.LastOffset <= e[len(e)-1].LastOffset {
		return nil
	}
	l.mu.Lock()
	err := s.txns.Append(a)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	s.dirty = true
	return nil
}

// CollectAbortedTxns returns the aborted transactions a read_committed
// fetch of the records from fetchOffset up to upperBound (the end of what
// it read) must be told of: those whose marker is at or after fetchOffset
// and whose first offset is below upperBound, from the aborted-transaction
// indexes of the segment holding fetchOffset and the ones after it, until
// an entry's last stable offset shows no later one can matter (Kafka's
// collectAbortedTransactions). The result is the caller's; nil when there
// are none.
func (l *Log) CollectAbortedTxns(fetchOffset, upperBound int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil
	}
	var out []AbortedTxn
	for i := l.segmentFor(fetchOffset); i < len(l.segments); i++ {
		s := l.segments[i]
		if s.baseOffset >= upperBound {
			break
		}
		txns, complete := s.txns.Collect(fetchOffset, upperBound)
		out = append(out, txns...)
		if complete {
			break
		}
	}
	return out
}

// syncTxnIndexes fsyncs the aborted-transaction indexes, so that no
// producer snapshot is durable before the entries of the markers below
// it: a recovery replays only the markers above its snapshot.
func (l *Log) syncTxnIndexes() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	for _, s := range l.segments {
		if err := s.txns.Flush(); err != nil {
			return err
		}
	}
	return nil
}
