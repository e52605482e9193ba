package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// File name suffixes of a segment, as Kafka names them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	// txnIndexSuffix is the segment's aborted-transaction index
	// (TxnIndex), which exists once the segment holds an abort marker.
	txnIndexSuffix = ".txnindex"

	// offsetEntrySize is an offset-index entry: relative offset uint32,
	// file position uint32.
	offsetEntrySize = 8
	// timeEntrySize is a time-index entry: timestamp int64, relative
	// offset uint32.
	timeEntrySize = 12
	// scanChunk is how many bytes a header scan reads at a time.
	scanChunk = 4096
	// pageBytes is the page size the writeback ranges of
	// Config.WritebackBytes are aligned to.
	pageBytes = 4096
)

// errTornBatch marks a batch cut short by the end of the segment file.
var errTornBatch = errors.New("batch cut short by the end of the segment")

// offsetEntry is an offset-index entry: the last offset of a batch,
// relative to the segment's base offset, and the file position where the
// batch starts.
type offsetEntry struct {
	relOffset uint32
	position  uint32
}

// timeEntry is a time-index entry: the largest batch maxTimestamp seen so
// far in the segment and the last offset (relative) of the batch that holds
// it. Timestamps strictly increase along the index.
type timeEntry struct {
	timestamp int64
	relOffset uint32
}

// segmentTail is the state of a segment that grows with each batch: what
// readers may see (size, nextOffset, maxTimestamp) and where the next index
// entry is due. A writer advances a copy and publishes it under Log.mu.
type segmentTail struct {
	// size is the bytes of whole batches in the file; readers never read
	// beyond it.
	size int64
	// nextOffset is the offset after the segment's last batch.
	nextOffset int64
	// maxTimestamp is the largest batch maxTimestamp, -1 while empty.
	maxTimestamp int64
	// maxTimestampOffset is the last offset of the batch holding
	// maxTimestamp.
	maxTimestampOffset int64
	// bytesSinceIndex counts the bytes appended since the last
	// offset-index entry.
	bytesSinceIndex int64
	// lastIndexedTimestamp is the timestamp of the last time-index entry,
	// -1 when there is none.
	lastIndexedTimestamp int64
	// hasLast says lastPos and lastBase are the position and base offset
	// of the segment's last batch, known once a batch was added to the
	// tail (not after an Open that trusted the index files): a read at
	// the tail, a caught-up follower's, starts there without a scan.
	hasLast           bool
	lastPos, lastBase int64
	// lastBytes is a copy of the last batch when it was appended through
	// this process and is at most tailCacheBytes (nil otherwise): a read
	// of it, one per partition per round of a caught-up follower's
	// fetches, needs no read from the file.
	lastBytes []byte
}

// tailCacheBytes bounds the last batch a segment keeps in memory: an idle
// partition holds at most this much for it.
const tailCacheBytes = 1024

// add advances the tail over the batch h written at t.size, as Kafka's
// LogSegment.append does: when more than interval bytes were appended since
// the last index entry, the batch gets an offset-index entry and, if the
// largest timestamp grew, a time-index entry.
func (t *segmentTail) add(h batchHeader, base, interval int64) (oe offsetEntry, hasOffset bool, te timeEntry, hasTime bool) {
	if h.maxTimestamp > t.maxTimestamp {
		t.maxTimestamp = h.maxTimestamp
		t.maxTimestampOffset = h.lastOffset()
	}
	if t.bytesSinceIndex > interval {
		oe, hasOffset = offsetEntry{relOffset: uint32(h.lastOffset() - base), position: uint32(t.size)}, true
		if t.maxTimestamp > t.lastIndexedTimestamp {
			te, hasTime = timeEntry{timestamp: t.maxTimestamp, relOffset: uint32(t.maxTimestampOffset - base)}, true
			t.lastIndexedTimestamp = t.maxTimestamp
		}
		t.bytesSinceIndex = 0
	}
	t.bytesSinceIndex += h.size
	t.hasLast, t.lastPos, t.lastBase, t.lastBytes = true, t.size, h.baseOffset, nil
	t.size += h.size
	t.nextOffset = h.nextOffset()
	return oe, hasOffset, te, hasTime
}

// segment is one .log file of batches with its .index and .timeindex.
// Its published fields (tail, offsets, times) are read under Log.mu (read
// lock) and changed under Log.appendMu and Log.mu (write lock); the writer
// fields are used under Log.appendMu only.
//
// Only the .log file is read and written through a descriptor, and only
// while it is in use: it is opened on first use and closed when idle by
// the log's FilePool, so a broker with many partitions holds no descriptor
// for an idle one. The indexes live in memory; their files are brought up
// to date by persistIndexes when the segment is rolled, flushed, truncated
// or closed. Index entries lost to a crash are rebuilt by Open, which
// scans the last segment.
type segment struct {
	dir        string
	baseOffset int64
	log        *segmentFile

	// Published state.
	tail    segmentTail
	offsets []offsetEntry
	times   []timeEntry
	// recent are the positions of the last batches appended through
	// this process, while the segment is the active one (nil before its
	// first append, and once rolled, truncated or cleaned).
	recent *recentBatches

	// Writer state.
	// rollTimestamp is when the segment's first batch was appended (ms),
	// the start of its age for log.roll.ms; -1 while unknown.
	rollTimestamp int64
	// dirty is set when the files hold writes not yet fsynced.
	dirty bool
	// writtenBack is the byte of the .log file up to which writeback was
	// asked for (Config.WritebackBytes), a multiple of pageBytes; guarded
	// by the log's appendMu.
	writtenBack int64
	// offsetsFile and timesFile track the index files against offsets
	// and times.
	offsetsFile, timesFile indexFileState
	// indexFiles is set once both index files exist.
	indexFiles bool
	// txns is the segment's aborted-transaction index: its entries are
	// changed under both appendMu and mu, read under either.
	txns *TxnIndex
}

// indexFileState tracks an index file against the entries in memory.
type indexFileState struct {
	// entries is how many entries the file holds, -1 if it is malformed.
	entries int
	// valid is how many leading entries of the file equal those in
	// memory.
	valid int
}

// current reports whether the file holds exactly the n entries in memory.
func (st indexFileState) current(n int) bool { return st.entries == n && st.valid == n }

// cut records that the entries in memory were cut to n.
func (st *indexFileState) cut(n int) { st.valid = min(st.valid, n) }

// segmentPath is the path of a segment file: dir/<20-digit base><suffix>.
func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// parseSegmentName returns the base offset of a segment file name such as
// 00000000000000001234.log, and whether name is one with that suffix.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// createSegment creates the empty .log file of a segment at base,
// replacing any left over, and leaves it open in pool. Its index files are
// created when it first has bytes (see persistIndexes), so a partition
// created and left idle costs one file, not three: creating files is most
// of what creating a partition costs. (Open removes index files without a
// log; a file left at base otherwise is cut to the entries written when it
// is created.)
func createSegment(pool *FilePool, dir string, base int64) (*segment, error) {
	s := newSegment(dir, base)
	// A transaction index left at base (a segment truncated away, whose
	// deletion was cut short) describes none of this segment's batches.
	if err := os.Remove(s.txns.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("create segment %d: remove left-over transaction index: %w", base, err)
	}
	var err error
	if s.log, err = openSegmentFile(pool, dir, base, os.O_RDWR|os.O_CREATE|os.O_TRUNC); err != nil {
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	return s, nil
}

// openSegment is the segment at base, whose .log file exists; the file is
// opened through pool when it is first used.
func openSegment(pool *FilePool, dir string, base int64) *segment {
	s := newSegment(dir, base)
	s.log = lazySegmentFile(pool, dir, base)
	return s
}

// newSegment is an empty segment at base, without its file, with an empty
// transaction index (whose file is created by its first entry).
func newSegment(dir string, base int64) *segment {
	s := &segment{dir: dir, baseOffset: base, rollTimestamp: -1, txns: &TxnIndex{path: segmentPath(dir, base, txnIndexSuffix)}}
	s.tail = segmentTail{nextOffset: base, maxTimestamp: -1, maxTimestampOffset: -1, lastIndexedTimestamp: -1}
	return s
}

// close closes the segment's log file (once its last user is done) and
// its transaction index.
func (s *segment) close() error {
	first := s.log.Close()
	if err := s.txns.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// remove closes and deletes the segment's files.
func (s *segment) remove() error {
	first := s.close()
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := os.Remove(segmentPath(s.dir, s.baseOffset, suffix)); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// sync brings the index files up to date and fsyncs the segment's files.
func (s *segment) sync() error {
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("fsync segment %d: %w", s.baseOffset, err)
	}
	if err := s.txns.Flush(); err != nil {
		return err
	}
	return s.persistIndexes(true)
}

// persistIndexes writes the index entries the files lack and cuts entries
// the log no longer has, creating the files once the segment holds bytes;
// with sync it also fsyncs both index files.
func (s *segment) persistIndexes(sync bool) error {
	create := !s.indexFiles && s.tail.size > 0
	if sync || create || !s.offsetsFile.current(len(s.offsets)) {
		n := s.offsetsFile.valid
		buf := appendOffsetEntries(nil, s.offsets[n:])
		if err := writeIndexFile(segmentPath(s.dir, s.baseOffset, indexSuffix), buf, int64(n)*offsetEntrySize, sync); err != nil {
			return fmt.Errorf("write offset index of segment %d: %w", s.baseOffset, err)
		}
		s.offsetsFile = indexFileState{entries: len(s.offsets), valid: len(s.offsets)}
	}
	if sync || create || !s.timesFile.current(len(s.times)) {
		n := s.timesFile.valid
		buf := appendTimeEntries(nil, s.times[n:])
		if err := writeIndexFile(segmentPath(s.dir, s.baseOffset, timeIndexSuffix), buf, int64(n)*timeEntrySize, sync); err != nil {
			return fmt.Errorf("write time index of segment %d: %w", s.baseOffset, err)
		}
		s.timesFile = indexFileState{entries: len(s.times), valid: len(s.times)}
	}
	s.indexFiles = true
	return nil
}

// appendOffsetEntries appends the file encoding of offset-index entries
// to buf.
func appendOffsetEntries(buf []byte, entries []offsetEntry) []byte {
	buf = slices.Grow(buf, len(entries)*offsetEntrySize)
	for _, e := range entries {
		buf = binary.BigEndian.AppendUint32(buf, e.relOffset)
		buf = binary.BigEndian.AppendUint32(buf, e.position)
	}
	return buf
}

// appendTimeEntries appends the file encoding of time-index entries to
// buf.
func appendTimeEntries(buf []byte, entries []timeEntry) []byte {
	buf = slices.Grow(buf, len(entries)*timeEntrySize)
	for _, e := range entries {
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.timestamp))
		buf = binary.BigEndian.AppendUint32(buf, e.relOffset)
	}
	return buf
}

// writeIndexFile writes data at position at of the index file path, cuts
// the file right after it, and fsyncs it if sync is set.
func writeIndexFile(path string, data []byte, at int64, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		_, err = f.WriteAt(data, at)
	}
	if err == nil {
		err = f.Truncate(at + int64(len(data)))
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// lastOffsetEntryPosition is the file position of the last offset-index
// entry, 0 when there is none.
func (s *segment) lastOffsetEntryPosition() int64 {
	if len(s.offsets) == 0 {
		return 0
	}
	return int64(s.offsets[len(s.offsets)-1].position)
}

// lookup returns the file position of a batch at or before the one that
// holds offset: the position of the last index entry whose offset is at
// most offset, or 0.
func (s *segment) lookup(offset int64) int64 {
	if offset <= s.baseOffset {
		return 0
	}
	rel := offset - s.baseOffset
	i := sort.Search(len(s.offsets), func(i int) bool { return int64(s.offsets[i].relOffset) > rel })
	if i == 0 {
		return 0
	}
	return int64(s.offsets[i-1].position)
}

// timeLookup returns the position to start scanning for the first batch
// whose maxTimestamp is at least ts: every batch before the one holding the
// offset of the last time entry below ts has an older maxTimestamp.
func (s *segment) timeLookup(ts int64) int64 {
	i := sort.Search(len(s.times), func(i int) bool { return s.times[i].timestamp >= ts })
	if i == 0 {
		return 0
	}
	return s.lookup(s.baseOffset + int64(s.times[i-1].relOffset))
}

// batchSpan is where a batch lies in its segment file and which offsets
// it holds.
type batchSpan struct {
	pos, size              int64
	baseOffset, lastOffset int64
}

// spanOf is the span of the batch of header h at pos.
func spanOf(pos int64, h batchHeader) batchSpan {
	return batchSpan{pos: pos, size: h.size, baseOffset: h.baseOffset, lastOffset: h.lastOffset()}
}

// recentBatchCount is how many of the active segment's last batches
// recentBatches keeps: a follower or consumer a few batches behind the
// tail finds its fetch offset, and a consumer its high watermark, among
// them.
const recentBatchCount = 16

// recentBatches are the spans of a segment's last batches, oldest first
// from head, the last of them ending at the segment's published size. A
// fetch near the tail finds its batch here instead of reading batch
// headers from the file from the offset index's hint (up to
// index.interval.bytes behind): two preads of every consumer fetch and
// one of every follower fetch not at the very last batch, a few thousand
// system calls a second at a busy broker. The spans grow with the
// batches appended, so a partition written once holds one (32 bytes).
// Changed under Log.appendMu and Log.mu (write lock), read under either.
type recentBatches struct {
	spans []batchSpan // a ring once recentBatchCount long
	head  int         // the oldest, once a ring
}

// add keeps span as the newest.
func (r *recentBatches) add(span batchSpan) {
	if len(r.spans) < recentBatchCount {
		r.spans = append(r.spans, span)
		return
	}
	r.spans[r.head] = span
	r.head = (r.head + 1) % len(r.spans)
}

// len is how many spans r holds.
func (r *recentBatches) len() int { return len(r.spans) }

// at is the i-th span from the oldest.
func (r *recentBatches) at(i int) batchSpan { return r.spans[(r.head+i)%len(r.spans)] }

// find is segment.find among the recent batches: ok is false when the
// batch whose last offset is first at least offset may lie before them
// (offset below the oldest's base offset).
func (r *recentBatches) find(offset int64) (span batchSpan, found, ok bool) {
	if r == nil || r.len() == 0 || offset < r.at(0).baseOffset {
		return batchSpan{}, false, false
	}
	n := r.len()
	i := sort.Search(n, func(i int) bool { return r.at(i).lastOffset >= offset })
	if i == n {
		return batchSpan{}, false, true
	}
	return r.at(i), true, true
}

// find returns the span of the first batch in the segment whose last
// offset is at least offset: among the recent batches when it lies
// there, else by scanning from the offset index's hint up to the
// published size. ok is false when no such batch is there (span.pos is
// then the size).
func (s *segment) find(offset int64) (span batchSpan, ok bool, err error) {
	if span, found, ok := s.recent.find(offset); ok {
		if !found {
			span.pos = s.tail.size
		}
		return span, found, nil
	}
	sc := pooledHeaderScanner(s.log, s.lookup(offset), s.tail.size)
	defer sc.release()
	for {
		pos, h, err := sc.next()
		if err == io.EOF {
			return batchSpan{pos: s.tail.size}, false, nil
		}
		if err != nil {
			return batchSpan{}, false, err
		}
		if h.lastOffset() >= offset {
			return spanOf(pos, h), true, nil
		}
	}
}

// firstBatchTimestamp is the maxTimestamp of the segment's first batch, or
// -1 if the segment is empty.
func (s *segment) firstBatchTimestamp() (int64, error) {
	if s.tail.size == 0 {
		return -1, nil
	}
	_, h, err := newHeaderScanner(s.log, 0, s.tail.size).next()
	if err != nil {
		return -1, err
	}
	return h.maxTimestamp, nil
}

// loadIndexes reads both index files. ok is false if either is missing or
// malformed: a size that is not a whole number of entries, offsets or
// positions that do not increase, a position beyond the log file,
// timestamps that do not increase, or no time entry beside offset entries.
func (s *segment) loadIndexes(logSize int64) (ok bool, err error) {
	raw, rawExists, err := readIndexFile(segmentPath(s.dir, s.baseOffset, indexSuffix))
	if err != nil {
		return false, fmt.Errorf("read offset index of segment %d: %w", s.baseOffset, err)
	}
	traw, trawExists, err := readIndexFile(segmentPath(s.dir, s.baseOffset, timeIndexSuffix))
	if err != nil {
		return false, fmt.Errorf("read time index of segment %d: %w", s.baseOffset, err)
	}
	s.offsets, s.times = nil, nil
	s.offsetsFile, s.timesFile = indexFileState{entries: -1}, indexFileState{entries: -1}
	s.indexFiles = rawExists && trawExists
	if !s.indexFiles && logSize == 0 {
		// An empty segment's index files are created with its first
		// bytes.
		s.offsetsFile, s.timesFile = indexFileState{}, indexFileState{}
		return true, nil
	}
	if !rawExists || !trawExists || len(raw)%offsetEntrySize != 0 || len(traw)%timeEntrySize != 0 {
		return false, nil
	}
	s.offsetsFile.entries, s.timesFile.entries = len(raw)/offsetEntrySize, len(traw)/timeEntrySize
	offsets := make([]offsetEntry, 0, len(raw)/offsetEntrySize)
	for i := 0; i < len(raw); i += offsetEntrySize {
		e := offsetEntry{relOffset: binary.BigEndian.Uint32(raw[i:]), position: binary.BigEndian.Uint32(raw[i+4:])}
		if int64(e.position) >= logSize || e.relOffset > math.MaxInt32 {
			return false, nil
		}
		if n := len(offsets); n > 0 && (e.relOffset <= offsets[n-1].relOffset || e.position <= offsets[n-1].position) {
			return false, nil
		}
		offsets = append(offsets, e)
	}
	times := make([]timeEntry, 0, len(traw)/timeEntrySize)
	for i := 0; i < len(traw); i += timeEntrySize {
		e := timeEntry{timestamp: int64(binary.BigEndian.Uint64(traw[i:])), relOffset: binary.BigEndian.Uint32(traw[i+8:])}
		if e.relOffset > math.MaxInt32 {
			return false, nil
		}
		if n := len(times); n > 0 && (e.timestamp <= times[n-1].timestamp || e.relOffset < times[n-1].relOffset) {
			return false, nil
		}
		times = append(times, e)
	}
	s.offsets, s.times = offsets, times
	s.offsetsFile.valid, s.timesFile.valid = len(offsets), len(times)
	// The first offset entry comes with a time entry (unless records
	// carry no timestamps): an empty time index beside a full offset
	// index was lost.
	return len(offsets) == 0 || len(times) > 0, nil
}

// readIndexFile reads a whole index file, and whether it exists.
func readIndexFile(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// rebuildTail recomputes the tail by scanning the batch headers from the
// last offset-index entry to end (trusted bytes), adding any index entry
// the scan finds missing (after a crash that lost index writes; the caller
// persists them). The index entries in memory must already be cut to
// those below end.
func (s *segment) rebuildTail(end, interval int64) error {
	t := segmentTail{nextOffset: s.baseOffset, maxTimestamp: -1, maxTimestampOffset: -1, lastIndexedTimestamp: -1}
	if n := len(s.times); n > 0 {
		t.maxTimestamp = s.times[n-1].timestamp
		t.maxTimestampOffset = s.baseOffset + int64(s.times[n-1].relOffset)
		t.lastIndexedTimestamp = t.maxTimestamp
	}
	t.size = s.lastOffsetEntryPosition()
	var newOffsets []offsetEntry
	var newTimes []timeEntry
	sc := newHeaderScanner(s.log, t.size, end)
	for {
		_, h, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("scan segment %d: %w", s.baseOffset, err)
		}
		oe, hasOffset, te, hasTime := t.add(h, s.baseOffset, interval)
		if hasOffset {
			newOffsets = append(newOffsets, oe)
		}
		if hasTime {
			newTimes = append(newTimes, te)
		}
	}
	s.offsets = append(s.offsets, newOffsets...)
	s.times = append(s.times, newTimes...)
	s.tail = t
	return nil
}

// headerScanner walks the batch headers of a segment file from a position
// up to an end, reading scanChunk bytes at a time. It trusts the framing:
// it checks only that each header and batch fit before end.
type headerScanner struct {
	f        io.ReaderAt
	pos, end int64
	buf      []byte
	bufStart int64
	// pooled is buf's chunk from scanBufs, if it came from there.
	pooled *[]byte
}

// newHeaderScanner scans f from pos to end.
func newHeaderScanner(f io.ReaderAt, pos, end int64) *headerScanner {
	return &headerScanner{f: f, pos: pos, end: end}
}

// scanBufs holds the chunks of the scans that run on every fetch (finding
// a fetch offset's batch, bounding a sent slice), which would otherwise
// allocate one each: a fifth of a busy broker's allocations went there.
var scanBufs = sync.Pool{New: func() any { b := make([]byte, scanChunk); return &b }}

// pooledHeaderScanner is newHeaderScanner reading into a chunk of
// scanBufs, which release gives back; the headers next returns are
// copies, so nothing keeps the chunk. It returns the scanner by value,
// for the caller's stack.
func pooledHeaderScanner(f io.ReaderAt, pos, end int64) headerScanner {
	b := scanBufs.Get().(*[]byte)
	return headerScanner{f: f, pos: pos, end: end, buf: (*b)[:0], pooled: b}
}

// release gives a pooled scanner's chunk back; the scanner is not used
// after.
func (sc *headerScanner) release() {
	if sc.pooled != nil {
		scanBufs.Put(sc.pooled)
		sc.pooled, sc.buf = nil, nil
	}
}

// next returns the next batch header and its position; io.EOF at end, and
// errTornBatch if a header or batch runs past end.
func (sc *headerScanner) next() (int64, batchHeader, error) {
	if sc.pos >= sc.end {
		return 0, batchHeader{}, io.EOF
	}
	if sc.end-sc.pos < batchHeaderSize {
		return 0, batchHeader{}, errTornBatch
	}
	if sc.pos < sc.bufStart || sc.pos+batchHeaderSize > sc.bufStart+int64(len(sc.buf)) {
		n := min(int64(scanChunk), sc.end-sc.pos)
		if cap(sc.buf) < int(n) {
			sc.buf = make([]byte, n)
		}
		sc.buf = sc.buf[:n]
		if _, err := sc.f.ReadAt(sc.buf, sc.pos); err != nil {
			return 0, batchHeader{}, fmt.Errorf("read batch header at byte %d: %w", sc.pos, err)
		}
		sc.bufStart = sc.pos
	}
	h := parseBatchHeader(sc.buf[sc.pos-sc.bufStart:])
	if h.size < batchHeaderSize || sc.pos+h.size > sc.end {
		return 0, batchHeader{}, errTornBatch
	}
	pos := sc.pos
	sc.pos += h.size
	return pos, h, nil
}
