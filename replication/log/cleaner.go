package log

// Log compaction, as Kafka's LogCleaner does it for cleanup.policy=compact.
//
// A pass (Clean) works on the closed segments only, never the active one:
//
//  1. It picks the dirty range: from the cleaner checkpoint (the end of
//     the last pass; the log start offset at first) to the first
//     uncleanable offset, the base of the active segment or of the first
//     segment holding a record younger than min.compaction.lag.ms,
//     whichever is lower. It cleans only when the dirty bytes are at least
//     min.cleanable.dirty.ratio of the bytes from the log start to there,
//     or when the dirty range's first batch is older than
//     max.compaction.lag.ms.
//  2. It fills an offset map (a 16-byte key hash to the key's latest
//     offset) with the dirty range's keys, up to the dedupe buffer; when
//     the map is full it stops at a batch boundary and the pass covers
//     only the range the map holds (the next pass goes on from there).
//  3. It rewrites, one at a time, each closed segment from the log start
//     to the end of the map's range, keeping a record unless its key maps
//     to a higher offset, its key is null (Kafka refuses those at produce;
//     any found are dropped, as Kafka's cleaner does), or it is a
//     tombstone (null value) whose batch's maxTimestamp is older than
//     delete.retention.ms (a simpler rule than Kafka's, which counts from
//     when the tombstone's segment was first cleaned). A segment nothing
//     was removed from is left as it is.
//  4. It records the end of the map's range in the cleaner checkpoint.
//
// Offsets never change. A rewritten batch keeps its base offset,
// lastOffsetDelta (so it still covers its original last offset, and the
// next offsets and the log end stay as they were), timestamps, producer
// id, epoch and base sequence, partition leader epoch and attributes, and
// its surviving records byte for byte; its record count and CRC-32C are
// recomputed, and its records are recompressed with the codec (and, for
// snappy, the framing) they came in. A batch left without records is
// dropped, unless it is the last batch of an idempotent producer in the
// log, kept as an empty batch (no records, no compression) so that the
// producer's state still loads from the log, as Kafka keeps it, or the
// last batch of its segment, kept empty too so that every offset below
// the active segment reads as a batch (Kafka's readers move on to the
// next segment instead; tripod's producer-state load counts an empty read
// below the log end as corruption).
// Transactions (KIP-98), as Kafka's cleaner treats them: no segment is
// cleaned that ends above the first unstable offset (CleanBelow's bound,
// the last stable offset, as Kafka's firstUncleanableOffset holds), so
// every transaction whose records a pass sees is decided. A batch of an
// aborted transaction (one an aborted-transaction index entry of its
// producer covers) is removed, its keys never entering the offset map:
// an aborted value is never a key's latest. A committed transaction's
// batches are cleaned as any other. A transaction marker (control batch)
// is removed, as Kafka's CleanedTransactionMetadata decides, once no
// batch of its transaction is left: the pass follows each producer's
// transaction in progress through the segments in offset order, and a
// COMMIT or ABORT marker none of whose transaction's batches the pass
// kept (a batch kept empty, by the rules above, counts as kept) goes,
// unless:
//   - its batch's maxTimestamp is not yet older than delete.retention.ms:
//     the tombstones' rule, so that a consumer reading the log within
//     delete.retention.ms sees the marker of what it read (Kafka >= 2.8
//     counts from a delete horizon the cleaner records in the batch,
//     KIP-534, as it does for tombstones; tripod counts from the batch's
//     own timestamp for both);
//   - it is the last batch of its segment, or of its producer in the
//     log (kept whole, where a data batch would be kept empty);
//   - it is at or above the end of the pass's offset map, or the oldest
//     producer snapshot at or above the log start: RecoverProducers may
//     restore any of them and replays the log above it, where the marker
//     of a transaction the snapshot holds open must be found (Kafka
//     snapshots at every roll, so its latest snapshot is never below the
//     cleaned range; tripod writes its snapshot after the roll, and
//     falls back to the older one when the newest cannot be read).
// The marker of a transaction with a batch left stays, so that the
// producer state loaded from the cleaned log closes that transaction; a
// transaction whose batches and marker are both gone leaves nothing
// behind. A segment's aborted-transaction index keeps an entry while its
// abort marker stays (Kafka appends to the cleaned segment's index only
// the aborted transactions whose marker it keeps): a read_committed
// consumer told of an aborted transaction skips its producer's batches
// until it reads the abort marker, so an entry without its marker would
// hide the producer's later committed batches. When a pass drops an
// entry the cleaned segment gets a new index, <base>.txnindex.cleaned;
// otherwise the index file keeps its name through the swap.
//
// Swap protocol, crash safe as Kafka's: a segment's cleaned files are
// written as <base>.log.cleaned, <base>.index.cleaned,
// <base>.timeindex.cleaned (and <base>.txnindex.cleaned when its
// aborted-transaction index changed) and fsynced; then renamed to .swap
// (the transaction index first, then the log, then the other indexes)
// and the directory fsynced; then, holding the log's writer lock,
// renamed into place (the indexes first, then the log) and the segment
// replaced in the segment list under the readers' lock. Open deletes any
// .cleaned file, completes every <base>.log.swap (an offset or time index
// with no .swap beside it is deleted and rebuilt from the log; a
// transaction index with none is the cleaned segment's already), deletes
// a <base>.txnindex.swap without a <base>.log.swap beside it (the log was
// not swapped), and moves any remaining index .swap into place: each
// rename leaves the directory in a state one of these rules finishes.

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File names of the cleaner.
const (
	// cleanerCheckpointFile holds the offset the next cleaning pass's
	// dirty range starts at (Kafka keeps these per log directory, in
	// cleaner-offset-checkpoint; tripod keeps one per partition).
	cleanerCheckpointFile = "cleaner-offset-checkpoint"
	// cleanedSuffix marks a segment file being written by the cleaner.
	cleanedSuffix = ".cleaned"
	// swapSuffix marks a cleaned segment file ready to replace its
	// segment.
	swapSuffix = ".swap"
)

// offsetMapEntrySize is the bytes an offset-map entry takes: a 16-byte
// key hash and an 8-byte offset.
const offsetMapEntrySize = 24

// offsetMapLoadFactor is how full the offset map may get (Kafka's
// log.cleaner.io.buffer.load.factor).
const offsetMapLoadFactor = 0.9

// CleanConfig holds a compacted log's cleaning settings, under Kafka's
// property names.
type CleanConfig struct {
	// DedupeBufferSize bounds the offset map of a pass, in bytes
	// (log.cleaner.dedupe.buffer.size). Default 134217728; at least 24 (one
	// entry). An entry takes 24 bytes and the map fills to 90 %.
	DedupeBufferSize int64
	// MinCleanableDirtyRatio is the share of the log's bytes that must
	// be dirty for a pass to clean (min.cleanable.dirty.ratio). Default
	// 0.5; 0 .. 1.
	MinCleanableDirtyRatio float64
	// MinCompactionLag keeps a segment uncleaned while it holds a record
	// younger than this (min.compaction.lag.ms). Default 0.
	MinCompactionLag time.Duration
	// MaxCompactionLag forces a pass, whatever the dirty ratio, once the
	// dirty range's first batch is older than this
	// (max.compaction.lag.ms). Default math.MaxInt64: never; at least
	// MinCompactionLag and 1 ms.
	MaxCompactionLag time.Duration
	// DeleteRetention is how long a tombstone, or a transaction marker
	// the cleaner may remove, is kept, counted from its batch's
	// maxTimestamp (delete.retention.ms). Default 1 day.
	DeleteRetention time.Duration
}

// DefaultCleanConfig returns Kafka's defaults.
func DefaultCleanConfig() CleanConfig {
	return CleanConfig{
		DedupeBufferSize:       128 << 20,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLag:       math.MaxInt64,
		DeleteRetention:        24 * time.Hour,
	}
}

// Validate checks ranges and names the bad key.
func (c CleanConfig) Validate() error {
	switch {
	case c.DedupeBufferSize < offsetMapEntrySize:
		return fmt.Errorf("log.cleaner.dedupe.buffer.size %d: must be at least %d", c.DedupeBufferSize, offsetMapEntrySize)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("min.cleanable.dirty.ratio %v: must be between 0 and 1", c.MinCleanableDirtyRatio)
	case c.MinCompactionLag < 0:
		return fmt.Errorf("min.compaction.lag.ms %d: must be at least 0", c.MinCompactionLag.Milliseconds())
	case c.MaxCompactionLag < time.Millisecond || c.MaxCompactionLag < c.MinCompactionLag:
		return fmt.Errorf("max.compaction.lag.ms %d: must be at least 1 and at least min.compaction.lag.ms %d", c.MaxCompactionLag.Milliseconds(), c.MinCompactionLag.Milliseconds())
	case c.DeleteRetention < 0:
		return fmt.Errorf("delete.retention.ms %d: must be at least 0", c.DeleteRetention.Milliseconds())
	}
	return nil
}

// CleanResult describes a cleaning pass.
type CleanResult struct {
	// Cleaned is set when the pass ran; it is not when nothing was dirty
	// or the dirty ratio was below MinCleanableDirtyRatio and no record
	// was older than MaxCompactionLag.
	Cleaned bool
	// DirtyRatio is the dirty bytes over the cleanable bytes when the pass
	// began.
	DirtyRatio float64
	// FirstDirty and CleanedTo bound the dirty range the offset map
	// covered: [FirstDirty, CleanedTo). The next pass starts at CleanedTo.
	FirstDirty, CleanedTo int64
	// More is set when the offset map filled before the end of the
	// cleanable range: a further pass has more to clean.
	More bool
	// SegmentsRewritten counts the segments replaced by a cleaned copy.
	SegmentsRewritten int
	// BytesBefore and BytesAfter are the sizes of the rewritten segments
	// before and after.
	BytesBefore, BytesAfter int64
	// RecordsRemoved counts the records the pass dropped, transaction
	// markers not included.
	RecordsRemoved int64
	// MarkersRemoved counts the transaction markers (control batches) the
	// pass dropped.
	MarkersRemoved int64
	// Abandoned is set when the log was truncated, closed or had segments
	// removed during the pass, or an aborted-transaction index entry was
	// added to a segment the pass removed markers from: the rest of the
	// pass was given up and the checkpoint not moved.
	Abandoned bool
}

// cleanSegment is what a pass saw of a closed segment when it began.
type cleanSegment struct {
	seg  *segment
	size int64
	next int64
}

// Clean runs one compaction pass over the log's closed segments (see the
// comment at the top of cleaner.go) and returns what it did. now is the
// clock for the compaction lags and the retention of tombstones and
// markers. Appends and reads go on during the pass; it holds the writer
// lock only to swap a cleaned segment in, and one pass runs at a time per
// log.
//
// Errors: ErrClosed, the config's Validate error, ErrCorruptMessage for a
// batch or record the pass cannot parse, an error naming the offset when
// the dedupe buffer cannot hold one batch's keys, and the file system's.
// The log is then as it was, or has some segments cleaned.
func (l *Log) Clean(cfg CleanConfig, now time.Time) (CleanResult, error) {
	return l.CleanBelow(cfg, now, math.MaxInt64)
}

// CleanBelow is Clean bounded by firstUnstable, the partition's last
// stable offset: a segment that ends above it (whose records include
// undecided transactions) is not cleaned, nor any after it. Clean, which
// has no bound, takes every transaction without an abort entry for
// committed: it is for logs whose transactions are all decided.
func (l *Log) CleanBelow(cfg CleanConfig, now time.Time, firstUnstable int64) (CleanResult, error) {
	if err := cfg.Validate(); err != nil {
		return CleanResult{}, err
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()

	// Plan the pass over a snapshot of the closed segments. A truncation
	// after generation is read makes the pass give up.
	generation := l.truncations.Load()
	checkpoint, err := readCleanerCheckpoint(l.dir)
	if err != nil {
		return CleanResult{}, err
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return CleanResult{}, ErrClosed
	}
	start := l.startOffset
	active := l.active()
	activeSize := active.tail.size
	var closed []cleanSegment
	for _, s := range l.segments[:len(l.segments)-1] {
		if s.tail.nextOffset > start {
			closed = append(closed, cleanSegment{seg: s, size: s.tail.size, next: s.tail.nextOffset})
		}
	}
	aborted := abortedRanges(l.segments)
	firstDirty := min(max(checkpoint, start), active.baseOffset)
	uncleanable := active.baseOffset
	nowMs := now.UnixMilli()
	var cleanBytes, dirtyBytes int64
	forced := false
	firstDirtySeen := false
	for _, c := range closed {
		if c.next > firstUnstable {
			uncleanable = min(uncleanable, c.seg.baseOffset)
		}
		switch {
		case c.next <= firstDirty:
			cleanBytes += c.size
			continue
		case c.seg.baseOffset >= uncleanable:
			continue
		}
		if cfg.MinCompactionLag > 0 && c.seg.largestTimestamp() > nowMs-cfg.MinCompactionLag.Milliseconds() {
			uncleanable = c.seg.baseOffset
			continue
		}
		if !firstDirtySeen {
			firstDirtySeen = true
			if cfg.MaxCompactionLag < math.MaxInt64 {
				if ts, err := c.seg.firstBatchTimestamp(); err == nil && ts >= 0 && nowMs-ts > cfg.MaxCompactionLag.Milliseconds() {
					forced = true
				}
			}
		}
		dirtyBytes += c.size
	}
	l.mu.RUnlock()
	res := CleanResult{FirstDirty: firstDirty, CleanedTo: firstDirty}
	if firstDirty >= uncleanable || dirtyBytes == 0 {
		return res, nil
	}
	res.DirtyRatio = float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
	if res.DirtyRatio < cfg.MinCleanableDirtyRatio && !forced {
		return res, nil
	}
	res.Cleaned = true

	// Fill the offset map from the dirty range.
	records, err := countRecords(closed, firstDirty, uncleanable, maxOffsetMapEntries(cfg.DedupeBufferSize))
	if err != nil {
		return res, err
	}
	m := newOffsetMap(cfg.DedupeBufferSize, records)
	mapEnd, more, err := l.fillOffsetMap(m, closed, firstDirty, uncleanable, aborted)
	if err != nil {
		return res, err
	}
	res.CleanedTo, res.More = mapEnd, more

	// The last batch of each idempotent producer survives, empty if need
	// be; a producer with a batch at or after mapEnd needs none kept.
	lastBatch, err := lastProducerBatches(closed, active, activeSize, mapEnd)
	if err != nil {
		return res, err
	}

	// Markers go only below the oldest producer snapshot recovery may
	// restore: it replays the log above the snapshot, where the marker of
	// a transaction the snapshot holds open must still be.
	snapshots, err := l.ProducerSnapshots()
	if err != nil {
		return res, err
	}
	markerEnd := mapEnd
	if i := slices.IndexFunc(snapshots, func(o int64) bool { return o >= start }); i >= 0 {
		markerEnd = min(markerEnd, snapshots[i])
	}

	// Rewrite the segments below mapEnd, oldest first: txns follows the
	// transactions through all of them, those left as they are included.
	tombstoneHorizon := nowMs - cfg.DeleteRetention.Milliseconds()
	txns := cleanedTxns{}
	for _, c := range closed {
		if c.seg.baseOffset >= mapEnd {
			break
		}
		cleaned, err := l.cleanSegmentFile(c, m, mapEnd, markerEnd, tombstoneHorizon, lastBatch, aborted, txns)
		if err != nil {
			removeSegmentFiles(l.dir, c.seg.baseOffset, cleanedSuffix)
			return res, err
		}
		if cleaned == nil {
			continue
		}
		res.RecordsRemoved += cleaned.removed
		res.MarkersRemoved += cleaned.markersRemoved
		swapped, err := l.swapSegment(c, cleaned, generation)
		if err != nil {
			return res, err
		}
		if !swapped {
			res.Abandoned = true
			return res, nil
		}
		res.SegmentsRewritten++
		res.BytesBefore += c.size
		res.BytesAfter += cleaned.tail.size
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed || l.truncations.Load() != generation {
		res.Abandoned = true
		return res, nil
	}
	return res, writeCleanerCheckpoint(l.dir, mapEnd)
}

// abortedTxns are the aborted transactions of a log by producer id, as
// its segments' aborted-transaction indexes list them.
type abortedTxns map[int64][]AbortedTxn

// abortedRanges collects the aborted transactions of segments. The
// caller holds mu.
func abortedRanges(segments []*segment) abortedTxns {
	var out abortedTxns
	for _, s := range segments {
		for _, a := range s.txns.Entries() {
			if out == nil {
				out = abortedTxns{}
			}
			out[a.ProducerID] = append(out[a.ProducerID], a)
		}
	}
	return out
}

// covers reports whether the transactional data batch h belongs to an
// aborted transaction: one of its producer's that began at or before it
// and ended after it (a producer has one transaction open at a time).
func (a abortedTxns) covers(h batchHeader) bool {
	if h.attributes&(attrTransactional|attrControl) != attrTransactional {
		return false
	}
	for _, t := range a[h.producerID] {
		if t.FirstOffset <= h.baseOffset && h.baseOffset < t.LastOffset {
			return true
		}
	}
	return false
}

// fillOffsetMap puts the keys of the batches of closed from firstDirty to
// uncleanable into m, batch by batch, stopping before a batch whose
// records might not fit; control batches and those of aborted
// transactions are left out. It returns the offset after the last batch
// it put, and whether it stopped before uncleanable.
func (l *Log) fillOffsetMap(m *offsetMap, closed []cleanSegment, firstDirty, uncleanable int64, aborted abortedTxns) (end int64, more bool, err error) {
	end = firstDirty
	for _, c := range closed {
		if c.next <= firstDirty {
			continue
		}
		if c.seg.baseOffset >= uncleanable {
			break
		}
		br := newBatchReader(c.seg, c.size)
		for {
			raw, h, err := br.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, false, err
			}
			if h.lastOffset() < firstDirty || h.attributes&attrControl != 0 || aborted.covers(h) {
				end = max(end, h.nextOffset())
				continue
			}
			if m.used+int(h.recordCount) > m.limit {
				if m.used == 0 {
					return 0, false, fmt.Errorf("clean log %s: the dedupe buffer holds %d keys, the batch at offset %d has %d records", l.dir, m.limit, h.baseOffset, h.recordCount)
				}
				return end, true, nil
			}
			err = eachRecord(raw, h, func(offset int64, r parsedRecord) {
				if r.hasKey {
					m.put(keyHash(r.key), offset)
				}
			})
			if err != nil {
				return 0, false, fmt.Errorf("clean segment %d: %w", c.seg.baseOffset, err)
			}
			end = h.nextOffset()
		}
		end = max(end, min(c.next, uncleanable))
	}
	return end, false, nil
}

// countRecords counts the records of the batches of closed from
// firstDirty to uncleanable, by their headers, stopping beyond limit.
func countRecords(closed []cleanSegment, firstDirty, uncleanable, limit int64) (int64, error) {
	var n int64
	for _, c := range closed {
		if c.next <= firstDirty {
			continue
		}
		if c.seg.baseOffset >= uncleanable || n > limit {
			break
		}
		sc := newHeaderScanner(c.seg.log, 0, c.size)
		for n <= limit {
			_, h, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("scan segment %d: %w", c.seg.baseOffset, err)
			}
			if h.lastOffset() >= firstDirty {
				n += int64(h.recordCount)
			}
		}
	}
	return n, nil
}

// lastProducerBatches returns, for each idempotent producer whose last
// batch in the log lies below mapEnd, that batch's base offset. It scans
// the batch headers of closed and of the active segment up to activeSize.
func lastProducerBatches(closed []cleanSegment, active *segment, activeSize, mapEnd int64) (map[int64]int64, error) {
	last := make(map[int64]int64)
	scan := func(s *segment, size int64) error {
		sc := newHeaderScanner(s.log, 0, size)
		for {
			_, h, err := sc.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("scan segment %d: %w", s.baseOffset, err)
			}
			if h.producerID >= 0 {
				last[h.producerID] = h.baseOffset
			}
		}
	}
	for _, c := range closed {
		if err := scan(c.seg, c.size); err != nil {
			return nil, err
		}
	}
	if err := scan(active, activeSize); err != nil {
		return nil, err
	}
	for id, base := range last {
		if base >= mapEnd {
			delete(last, id)
		}
	}
	return last, nil
}

// cleanedTxns follows, through the batches of a pass in offset order,
// each producer's transaction in progress: whether a batch of it was
// kept (Kafka's CleanedTransactionMetadata). A producer has one
// transaction open at a time, so its transactional data batches since its
// last marker are its transaction's, and its next marker ends it.
type cleanedTxns map[int64]bool

// kept records that the batch h was kept, its records or empty.
func (t cleanedTxns) kept(h batchHeader) {
	if h.attributes&(attrTransactional|attrControl) == attrTransactional {
		t[h.producerID] = true
	}
}

// marker ends the transaction of the marker h and returns whether a
// batch of it was kept.
func (t cleanedTxns) marker(h batchHeader) bool {
	kept := t[h.producerID]
	delete(t, h.producerID)
	return kept
}

// cleanedFile is a cleaned copy of a segment, written as .cleaned files.
type cleanedFile struct {
	tail    segmentTail
	offsets []offsetEntry
	times   []timeEntry
	removed int64
	// markersRemoved counts the markers dropped.
	markersRemoved int64
	// txnsRead is how many entries the segment's aborted-transaction
	// index had when the pass read it; txns, when txnsChanged, are the
	// entries of the cleaned index (those whose marker was kept), written
	// as <base>.txnindex.cleaned.
	txnsRead    int
	txns        []AbortedTxn
	txnsChanged bool
}

// cleanSegmentFile writes the cleaned copy of segment c as .cleaned files,
// fsynced, and returns it; nil (and no file) when nothing is removed.
// A record at or after mapEnd is kept; below it, one is dropped when its
// key is null, maps to a higher offset, or it is a tombstone whose batch's
// maxTimestamp is below tombstoneHorizon, and every record of a batch of
// an aborted transaction is. A transaction marker below markerEnd is
// dropped when txns saw no batch of its transaction kept, its batch's
// maxTimestamp is below tombstoneHorizon, and it is neither the last
// batch of the segment nor its producer's last (lastBatch); the entries
// of the dropped abort markers leave the segment's aborted-transaction
// index. Other control batches are kept as they are. lastBatch holds the
// base offsets of the batches kept even when left empty.
func (l *Log) cleanSegmentFile(c cleanSegment, m *offsetMap, mapEnd, markerEnd, tombstoneHorizon int64, lastBatch map[int64]int64, aborted abortedTxns, txns cleanedTxns) (*cleanedFile, error) {
	base := c.seg.baseOffset
	// The index's entries, read under mu: AppendAbortedTxn adds to it
	// under mu (swapSegment checks that it did not meanwhile).
	l.mu.RLock()
	entries := slices.Clone(c.seg.txns.Entries())
	l.mu.RUnlock()
	var droppedMarkers map[int64]bool
	path := segmentPath(l.dir, base, logSuffix+cleanedSuffix)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create cleaned segment %d: %w", base, err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	out := &cleanedFile{tail: segmentTail{nextOffset: base, maxTimestamp: -1, maxTimestampOffset: -1, lastIndexedTimestamp: -1}}
	add := func(b []byte, h batchHeader) error {
		txns.kept(h)
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write cleaned segment %d: %w", base, err)
		}
		oe, hasOffset, te, hasTime := out.tail.add(h, base, l.cfg.IndexIntervalBytes)
		if hasOffset {
			out.offsets = append(out.offsets, oe)
		}
		if hasTime {
			out.times = append(out.times, te)
		}
		return nil
	}
	br := newBatchReader(c.seg, c.size)
	for {
		raw, h, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if h.attributes&attrControl != 0 {
			kept := txns.marker(h)
			lb, ok := lastBatch[h.producerID]
			if !kept && h.baseOffset < markerEnd && h.maxTimestamp < tombstoneHorizon && br.pos < br.end && (!ok || lb != h.baseOffset) {
				// A control batch that is no marker tripod reads is kept.
				if _, err := ReadMarker(raw); err == nil {
					out.markersRemoved++
					if droppedMarkers == nil {
						droppedMarkers = map[int64]bool{}
					}
					droppedMarkers[h.baseOffset] = true
					continue
				}
			}
		}
		if h.baseOffset >= mapEnd || h.attributes&attrControl != 0 {
			if err := add(raw, h); err != nil {
				return nil, err
			}
			continue
		}
		abortedBatch := aborted.covers(h)
		keep := func(offset int64, r parsedRecord) bool {
			if offset >= mapEnd {
				return true
			}
			if abortedBatch {
				return false
			}
			if !r.hasKey {
				return false
			}
			latest, ok := m.get(keyHash(r.key))
			if ok && offset < latest {
				return false
			}
			return r.hasValue || h.maxTimestamp >= tombstoneHorizon
		}
		cleaned, removed, err := cleanBatch(raw, h, keep)
		if err != nil {
			return nil, fmt.Errorf("clean segment %d: %w", base, err)
		}
		out.removed += int64(removed)
		if cleaned == nil {
			lb, ok := lastBatch[h.producerID]
			producerLast := ok && h.producerID >= 0 && lb == h.baseOffset
			if !producerLast && br.pos < br.end {
				continue
			}
			cleaned = emptyBatch(raw)
		}
		if err := add(cleaned, parseBatchHeader(cleaned)); err != nil {
			return nil, err
		}
	}
	if out.removed == 0 && out.markersRemoved == 0 {
		f.Close()
		os.Remove(path)
		return nil, nil
	}
	out.txnsRead = len(entries)
	for _, a := range entries {
		if droppedMarkers[a.LastOffset] {
			out.txnsChanged = true
		} else {
			out.txns = append(out.txns, a)
		}
	}
	if t := out.tail; t.maxTimestamp > t.lastIndexedTimestamp {
		out.times = append(out.times, timeEntry{timestamp: t.maxTimestamp, relOffset: uint32(t.maxTimestampOffset - base)})
		out.tail.lastIndexedTimestamp = t.maxTimestamp
	}
	out.tail.nextOffset = c.next
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("write cleaned segment %d: %w", base, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync cleaned segment %d: %w", base, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close cleaned segment %d: %w", base, err)
	}
	// The cleaned segment keeps its source's age for retention.
	if fi, err := c.seg.log.Stat(); err == nil {
		os.Chtimes(path, fi.ModTime(), fi.ModTime())
	}
	if err := writeIndexFile(segmentPath(l.dir, base, indexSuffix+cleanedSuffix), appendOffsetEntries(nil, out.offsets), 0, true); err != nil {
		return nil, fmt.Errorf("write offset index of cleaned segment %d: %w", base, err)
	}
	if err := writeIndexFile(segmentPath(l.dir, base, timeIndexSuffix+cleanedSuffix), appendTimeEntries(nil, out.times), 0, true); err != nil {
		return nil, fmt.Errorf("write time index of cleaned segment %d: %w", base, err)
	}
	if out.txnsChanged {
		if err := writeTxnIndexFile(segmentPath(l.dir, base, txnIndexSuffix+cleanedSuffix), out.txns); err != nil {
			return nil, fmt.Errorf("write transaction index of cleaned segment %d: %w", base, err)
		}
	}
	return out, nil
}

// swapSegment puts the cleaned files of segment c in its place (see the
// swap protocol at the top of cleaner.go). It returns false, having
// removed the files, when the segment is no longer the one the pass
// planned for: removed, truncated, or the log closed.
func (l *Log) swapSegment(c cleanSegment, cleaned *cleanedFile, generation uint64) (bool, error) {
	base := c.seg.baseOffset
	// The transaction index goes to .swap before the log: beside a
	// <base>.log.swap, a missing .txnindex.swap means the one in place is
	// the cleaned segment's (unchanged, or already moved into place).
	suffixes := []string{logSuffix, indexSuffix, timeIndexSuffix}
	if cleaned.txnsChanged {
		suffixes = append([]string{txnIndexSuffix}, suffixes...)
	}
	for _, suffix := range suffixes {
		from := segmentPath(l.dir, base, suffix+cleanedSuffix)
		if err := os.Rename(from, segmentPath(l.dir, base, suffix+swapSuffix)); err != nil {
			removeSegmentFiles(l.dir, base, cleanedSuffix)
			removeSegmentFiles(l.dir, base, swapSuffix)
			return false, fmt.Errorf("rename cleaned segment %d: %w", base, err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		return false, err
	}

	l.appendMu.Lock()
	i := l.segmentFor(base)
	// An index entry added meanwhile (a recovery writing lost entries
	// again) may be a dropped marker's, or missing from the cleaned index.
	txnsAdded := len(c.seg.txns.Entries()) != cleaned.txnsRead
	if l.closed || l.truncations.Load() != generation || l.segments[i] != c.seg || i == len(l.segments)-1 || c.seg.tail.size != c.size ||
		(txnsAdded && cleaned.markersRemoved > 0) {
		l.appendMu.Unlock()
		removeSegmentFiles(l.dir, base, swapSuffix)
		return false, nil
	}
	// Readers may still open the old segment's file until it leaves the
	// segment list: pinned, it stays open on the old bytes once the
	// cleaned file takes its name.
	if _, err := c.seg.log.pin(false); err != nil {
		l.appendMu.Unlock()
		removeSegmentFiles(l.dir, base, swapSuffix)
		return false, fmt.Errorf("swap cleaned segment %d: %w", base, err)
	}
	defer c.seg.log.unpin()
	into := []string{indexSuffix, timeIndexSuffix, logSuffix}
	if cleaned.txnsChanged {
		into = append([]string{txnIndexSuffix}, into...)
	}
	for _, suffix := range into {
		if err := os.Rename(segmentPath(l.dir, base, suffix+swapSuffix), segmentPath(l.dir, base, suffix)); err != nil {
			l.appendMu.Unlock()
			return false, fmt.Errorf("swap cleaned segment %d: %w", base, err)
		}
	}
	s := openSegment(l.files, l.dir, base)
	s.tail, s.offsets, s.times = cleaned.tail, cleaned.offsets, cleaned.times
	s.offsetsFile = indexFileState{entries: len(s.offsets), valid: len(s.offsets)}
	s.timesFile = indexFileState{entries: len(s.times), valid: len(s.times)}
	s.indexFiles = true
	// The segment's aborted-transaction index goes on as it is unless a
	// marker of one of its entries was dropped.
	old := c.seg.txns
	s.txns = old
	if cleaned.txnsChanged {
		s.txns = &TxnIndex{path: segmentPath(l.dir, base, txnIndexSuffix), entries: cleaned.txns}
	} else {
		old = nil
	}
	l.mu.Lock()
	l.segments[i] = s
	l.publishLocked()
	l.mu.Unlock()
	l.dirDirty = true
	// The replaced index's file is written only under appendMu.
	var err error
	if old != nil {
		err = old.Close()
	}
	l.appendMu.Unlock()
	// No reader holds the old segment any more: they take it under mu.
	// Its transaction index lives on in s unless it was replaced.
	c.seg.log.Close()
	return true, err
}

// removeSegmentFiles removes the files of the segment at base that end in
// suffix after their segment suffix, ignoring those missing.
func removeSegmentFiles(dir string, base int64, suffix string) {
	for _, s := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		os.Remove(segmentPath(dir, base, s+suffix))
	}
}

// recoverSwaps finishes or undoes, on Open, a cleaner's swap cut short by
// a crash (see the swap protocol at the top of cleaner.go), given the
// entries of dir; changed says whether it renamed or removed any.
func recoverSwaps(dir string, entries []os.DirEntry) (changed bool, err error) {
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, cleanedSuffix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return false, fmt.Errorf("remove left-over %s: %w", name, err)
			}
			changed = true
		}
	}
	for _, e := range entries {
		base, ok := parseSegmentName(strings.TrimSuffix(e.Name(), swapSuffix), logSuffix)
		if !ok || !strings.HasSuffix(e.Name(), swapSuffix) {
			continue
		}
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if name := filepath.Base(segmentPath(dir, base, suffix+swapSuffix)); !names[name] {
				if err := os.Remove(segmentPath(dir, base, suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return false, fmt.Errorf("remove index of swapped segment %d: %w", base, err)
				}
			}
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), segmentPath(dir, base, logSuffix)); err != nil {
			return false, fmt.Errorf("complete swap of segment %d: %w", base, err)
		}
		changed = true
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), swapSuffix)
		if !ok || strings.HasSuffix(name, logSuffix) {
			continue
		}
		// A transaction index renamed to .swap before its log was: without
		// the log's .swap the segment was not swapped, and its index in
		// place describes it.
		if base, ok := parseSegmentName(name, txnIndexSuffix); ok && !names[filepath.Base(segmentPath(dir, base, logSuffix+swapSuffix))] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return false, fmt.Errorf("remove left-over %s: %w", e.Name(), err)
			}
			changed = true
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, name)); err != nil {
			return false, fmt.Errorf("complete swap of %s: %w", name, err)
		}
		changed = true
	}
	if changed {
		return true, syncDir(dir)
	}
	return false, nil
}

// readCleanerCheckpoint reads the cleaner checkpoint of dir; 0 if there
// is none.
func readCleanerCheckpoint(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, cleanerCheckpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cleaner checkpoint %s holds %q, want an offset", filepath.Join(dir, cleanerCheckpointFile), b)
	}
	return n, nil
}

// writeCleanerCheckpoint replaces the cleaner checkpoint of dir.
func writeCleanerCheckpoint(dir string, offset int64) error {
	if err := writeFileAtomic(dir, cleanerCheckpointFile, strconv.FormatInt(offset, 10)+"\n"); err != nil {
		return fmt.Errorf("write cleaner checkpoint %d: %w", offset, err)
	}
	return nil
}

// lowerCleanerCheckpoint moves the cleaner checkpoint of l down to offset
// if it is above (a truncation removed what the last pass cleaned), so
// that records appended again there are dirty. Callers hold appendMu.
func (l *Log) lowerCleanerCheckpoint(offset int64) error {
	l.truncations.Add(1)
	cp, err := readCleanerCheckpoint(l.dir)
	if err != nil || cp <= offset {
		return err
	}
	return writeCleanerCheckpoint(l.dir, offset)
}

// offsetMap maps key hashes to the latest offset seen for each, in a
// fixed array of slots (open addressing, linear probing), so that its
// memory is bounded by the dedupe buffer. The hash is the first 16 bytes
// of the key's SHA-256: with the 5.6 million entries of a default buffer
// the chance that two keys collide is below 10^-25.
type offsetMap struct {
	slots []offsetSlot
	// used counts the slots taken; limit is how many may be.
	used, limit int
}

// offsetSlot is an offset-map entry; offsetPlusOne is 0 while it is free.
type offsetSlot struct {
	hash          [16]byte
	offsetPlusOne int64
}

// maxOffsetMapEntries is how many keys a map within bufferSize bytes
// holds.
func maxOffsetMapEntries(bufferSize int64) int64 {
	return max(int64(float64(bufferSize/offsetMapEntrySize)*offsetMapLoadFactor), 1)
}

// newOffsetMap returns a map within bufferSize bytes, no larger than
// needed for records keys.
func newOffsetMap(bufferSize, records int64) *offsetMap {
	maxSlots := bufferSize / offsetMapEntrySize
	limit := max(min(maxOffsetMapEntries(bufferSize), records), 1)
	slots := min(max(int64(float64(limit)/offsetMapLoadFactor)+1, limit+1), max(maxSlots, limit+1))
	return &offsetMap{slots: make([]offsetSlot, slots), limit: int(limit)}
}

// keyHash is the offset-map hash of key.
func keyHash(key []byte) [16]byte {
	sum := sha256.Sum256(key)
	return [16]byte(sum[:16])
}

// slot returns the index of hash's slot, or of the free slot it would
// take.
func (m *offsetMap) slot(hash [16]byte) int {
	i := int(binary.BigEndian.Uint64(hash[:8]) % uint64(len(m.slots)))
	for m.slots[i].offsetPlusOne != 0 && m.slots[i].hash != hash {
		i++
		if i == len(m.slots) {
			i = 0
		}
	}
	return i
}

// put records offset as the latest of hash. The caller keeps used below
// limit.
func (m *offsetMap) put(hash [16]byte, offset int64) {
	i := m.slot(hash)
	if m.slots[i].offsetPlusOne == 0 {
		m.used++
		m.slots[i].hash = hash
	}
	m.slots[i].offsetPlusOne = offset + 1
}

// get returns the latest offset of hash.
func (m *offsetMap) get(hash [16]byte) (int64, bool) {
	s := m.slots[m.slot(hash)]
	return s.offsetPlusOne - 1, s.offsetPlusOne != 0
}

// batchReader reads the batches of a segment file in order, through a
// buffer, up to a size the caller knows to hold whole batches.
type batchReader struct {
	s   *segment
	r   *bufio.Reader
	pos int64
	end int64
	buf []byte
}

// newBatchReader reads s from its start to size.
func newBatchReader(s *segment, size int64) *batchReader {
	return &batchReader{s: s, r: bufio.NewReaderSize(io.NewSectionReader(s.log, 0, size), 1<<20), end: size}
}

// next returns the next batch (valid until the following call) and its
// header; io.EOF at the end.
func (br *batchReader) next() ([]byte, batchHeader, error) {
	if br.pos >= br.end {
		return nil, batchHeader{}, io.EOF
	}
	if cap(br.buf) < batchHeaderSize {
		br.buf = make([]byte, batchHeaderSize, 64<<10)
	}
	br.buf = br.buf[:batchHeaderSize]
	if _, err := io.ReadFull(br.r, br.buf); err != nil {
		return nil, batchHeader{}, fmt.Errorf("read segment %d at byte %d: %w", br.s.baseOffset, br.pos, err)
	}
	h := parseBatchHeader(br.buf)
	if err := checkHeader(h); err != nil || br.pos+h.size > br.end {
		return nil, batchHeader{}, fmt.Errorf("%w: segment %d at byte %d", ErrCorruptMessage, br.s.baseOffset, br.pos)
	}
	if int64(cap(br.buf)) < h.size {
		nb := make([]byte, h.size)
		copy(nb, br.buf)
		br.buf = nb
	}
	br.buf = br.buf[:h.size]
	if _, err := io.ReadFull(br.r, br.buf[batchHeaderSize:]); err != nil {
		return nil, batchHeader{}, fmt.Errorf("read segment %d at byte %d: %w", br.s.baseOffset, br.pos, err)
	}
	br.pos += h.size
	return br.buf, h, nil
}

// cleanBatch returns the batch raw (header h) holding only the records
// keep accepts, and how many it removed: raw itself when keep accepts
// all, nil when it accepts none. A rewritten batch keeps every header
// field but its length, record count and CRC-32C, and is recompressed
// with the codec it came with.
func cleanBatch(raw []byte, h batchHeader, keep func(offset int64, r parsedRecord) bool) ([]byte, int, error) {
	records, payload, err := decompress(h.attributes&codecMask, raw[batchHeaderSize:h.size])
	if err != nil {
		return nil, 0, corrupt("batch at offset %d: %v", h.baseOffset, err)
	}
	var kept []byte
	removed, count := 0, int32(0)
	err = walkRecords(records, h, func(offset int64, r parsedRecord) {
		if keep(offset, r) {
			kept = append(kept, r.raw...)
			count++
		} else {
			removed++
		}
	})
	switch {
	case err != nil:
		return nil, 0, err
	case removed == 0:
		return raw, 0, nil
	case count == 0:
		return nil, removed, nil
	}
	if kept, err = payload.compress(kept); err != nil {
		return nil, 0, fmt.Errorf("batch at offset %d: %w", h.baseOffset, err)
	}
	out := make([]byte, batchHeaderSize, batchHeaderSize+len(kept))
	copy(out, raw[:batchHeaderSize])
	out = append(out, kept...)
	binary.BigEndian.PutUint32(out[fieldBatchLength:], uint32(len(out)-batchLengthOverhead))
	binary.BigEndian.PutUint32(out[fieldRecordCount:], uint32(count))
	setCRC(out)
	return out, removed, nil
}

// emptyBatch returns the header of the batch raw as a batch without
// records and without compression, as Kafka writes the empty batch that
// keeps an idempotent producer's last sequence.
func emptyBatch(raw []byte) []byte {
	out := append([]byte(nil), raw[:batchHeaderSize]...)
	binary.BigEndian.PutUint32(out[fieldBatchLength:], uint32(minBatchLength))
	attrs := binary.BigEndian.Uint16(out[fieldAttributes:]) &^ codecMask
	binary.BigEndian.PutUint16(out[fieldAttributes:], attrs)
	binary.BigEndian.PutUint32(out[fieldRecordCount:], 0)
	setCRC(out)
	return out
}

// setCRC computes and sets the CRC-32C of the whole batch b.
func setCRC(b []byte) {
	binary.BigEndian.PutUint32(b[fieldCRC:], crc32.Checksum(b[fieldAttributes:], castagnoli))
}
