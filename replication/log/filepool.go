package log

import (
	"golang.org/x/sys/unix"

	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// DefaultOpenFilesMax is the default capacity of a FilePool
// (log.open.files.max).
const DefaultOpenFilesMax = 10000

// defaultPool is the pool of the logs whose Config names none.
var defaultPool = NewFilePool(DefaultOpenFilesMax)

// FilePool bounds the segment files the logs sharing it hold open. A
// segment's .log file is opened on first use (a read, an append, a
// truncation, an fsync) and pinned for that use only; once unpinned it
// stays open in the pool's least-recently-used list, and the least
// recently used one is closed when more than the pool's capacity are
// open. CloseIdle closes the files unused since its previous call, so
// that an idle partition holds no descriptor at all. A pinned file is
// never closed, so a pool holds more than its capacity while more files
// than that are in use at once. A file written
// since its last fsync is fsynced before it is closed, and an error of
// that fsync is returned by the segment's next sync, so an eviction loses
// no fsync. A broker shares one pool among all its logs; a FilePool is
// safe for concurrent use.
type FilePool struct {
	max int

	mu sync.Mutex
	// open counts the files open, pinned or idle; closing those taken
	// out of the pool but not closed yet.
	open, closing int
	// idle lists the open files no one pinned, the most recently used
	// first.
	idle fileList
	// generation counts the calls to CloseIdle; a file last used during
	// an earlier generation is idle since the previous call.
	generation uint64
}

// NewFilePool returns a pool that keeps at most capacity files open
// (at least 1) beside those pinned.
func NewFilePool(capacity int) *FilePool { return &FilePool{max: max(capacity, 1)} }

// Max is the pool's capacity.
func (p *FilePool) Max() int { return p.max }

// Open reports how many files the pool holds open, counting those it is
// closing.
func (p *FilePool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open + p.closing
}

// CloseIdle closes the files not used since the previous call (fsyncing
// those written since their last fsync), and returns how many it closed.
// A broker calls it periodically (every log.retention.check.interval.ms).
func (p *FilePool) CloseIdle() int {
	p.mu.Lock()
	var victims []evicted
	for p.idle.last != nil && p.idle.last.used < p.generation {
		victims = append(victims, p.takeLocked(p.idle.last))
	}
	p.generation++
	p.mu.Unlock()
	p.closeEvicted(victims)
	return len(victims)
}

// evictLocked takes out of the pool the least recently used idle files
// while more than limit are open, and returns them for closeEvicted.
// Callers hold p.mu.
func (p *FilePool) evictLocked(limit int) []evicted {
	var out []evicted
	for p.open > limit && p.idle.last != nil {
		out = append(out, p.takeLocked(p.idle.last))
	}
	return out
}

// takeLocked takes the idle file sf out of the pool, for closeEvicted.
// Callers hold p.mu.
func (p *FilePool) takeLocked(sf *segmentFile) evicted {
	p.idle.remove(sf)
	e := evicted{sf: sf, f: sf.f, sync: sf.unsynced}
	if sf.unsynced {
		sf.unsynced = false
		sf.syncing++
	}
	sf.f = nil
	p.open--
	p.closing++
	return e
}

// closeEvicted fsyncs (if written since their last fsync) and closes the
// files evictLocked took out, without p.mu.
func (p *FilePool) closeEvicted(files []evicted) {
	for _, e := range files {
		var err error
		if e.sync {
			err = e.f.Sync()
		}
		e.f.Close()
		p.mu.Lock()
		if e.sync {
			e.sf.syncing--
		}
		if err != nil {
			e.sf.unsynced = true
			if e.sf.syncErr == nil {
				e.sf.syncErr = err
			}
		}
		p.closing--
		p.mu.Unlock()
	}
}

// evicted is an open file evictLocked took out of the pool.
type evicted struct {
	sf   *segmentFile
	f    *os.File
	sync bool
}

// fileList is a doubly linked list of segment files, threaded through
// their prev and next fields.
type fileList struct{ first, last *segmentFile }

// pushFront puts sf first.
func (l *fileList) pushFront(sf *segmentFile) {
	sf.prev, sf.next = nil, l.first
	if l.first != nil {
		l.first.prev = sf
	} else {
		l.last = sf
	}
	l.first = sf
}

// remove takes sf out of the list.
func (l *fileList) remove(sf *segmentFile) {
	if sf.prev != nil {
		sf.prev.next = sf.next
	} else {
		l.first = sf.next
	}
	if sf.next != nil {
		sf.next.prev = sf.prev
	} else {
		l.last = sf.prev
	}
	sf.prev, sf.next = nil, nil
}

// errFileClosed is returned by a segment file used after close.
var errFileClosed = errors.New("segment file closed")

// segmentFile is a segment's .log file, opened through its pool when it
// is used. Each method pins the file for the call only; pin and unpin
// keep it open (on the same inode) across calls. It holds no descriptor
// while idle and evicted.
type segmentFile struct {
	pool *FilePool
	// dir and base name the file (segmentPath), so that a segment holds
	// no path string of its own.
	dir  string
	base int64

	// Guarded by pool.mu.
	f *os.File
	// pins counts the users of f; f is on the idle list when it is open
	// and pins is 0.
	pins       int
	prev, next *segmentFile
	// used is the pool's generation when the file was last unpinned.
	used uint64
	// closed is set by close: the file can no longer be pinned.
	closed bool
	// unsynced is set when the file was written since its last fsync.
	unsynced bool
	// syncing counts the evictions fsyncing the file.
	syncing int
	// syncErr is a failed fsync of an eviction, for the next sync.
	syncErr error
}

// openSegmentFile opens the .log file of the segment at base in dir with
// flag (to create or truncate it) and leaves it open in pool.
func openSegmentFile(pool *FilePool, dir string, base int64, flag int) (*segmentFile, error) {
	sf := &segmentFile{pool: pool, dir: dir, base: base}
	f, err := openRetry(pool, sf.path(), flag)
	if err != nil {
		return nil, err
	}
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		sf.unsynced = true
	}
	pool.mu.Lock()
	sf.f = f
	sf.used = pool.generation
	pool.open++
	pool.idle.pushFront(sf)
	victims := pool.evictLocked(pool.max)
	pool.mu.Unlock()
	pool.closeEvicted(victims)
	return sf, nil
}

// lazySegmentFile is the .log file of the segment at base in dir, not
// opened until it is used.
func lazySegmentFile(pool *FilePool, dir string, base int64) *segmentFile {
	return &segmentFile{pool: pool, dir: dir, base: base}
}

// path is the file's path.
func (sf *segmentFile) path() string { return segmentPath(sf.dir, sf.base, logSuffix) }

// openRetry opens path; when the process is out of descriptors it
// closes half the pool's idle files and tries once more.
func openRetry(pool *FilePool, path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o644)
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		pool.mu.Lock()
		victims := pool.evictLocked(pool.open / 2)
		pool.mu.Unlock()
		pool.closeEvicted(victims)
		f, err = os.OpenFile(path, flag, 0o644)
	}
	return f, err
}

// pin returns the open file, opening it if need be, and keeps it open
// until unpin. write marks it as written (to fsync before an eviction
// closes it).
func (sf *segmentFile) pin(write bool) (*os.File, error) {
	p := sf.pool
	p.mu.Lock()
	if sf.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", sf.path(), errFileClosed)
	}
	if sf.f != nil {
		if sf.pins == 0 {
			p.idle.remove(sf)
		}
		sf.pins++
		sf.unsynced = sf.unsynced || write
		f := sf.f
		p.mu.Unlock()
		return f, nil
	}
	p.mu.Unlock()
	f, err := openRetry(p, sf.path(), os.O_RDWR)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	var extra *os.File
	switch {
	case sf.closed:
		p.mu.Unlock()
		f.Close()
		return nil, fmt.Errorf("%s: %w", sf.path(), errFileClosed)
	case sf.f != nil:
		// Another user opened it meanwhile.
		extra = f
		if sf.pins == 0 {
			p.idle.remove(sf)
		}
	default:
		sf.f = f
		p.open++
	}
	sf.pins++
	sf.unsynced = sf.unsynced || write
	f = sf.f
	victims := p.evictLocked(p.max)
	p.mu.Unlock()
	if extra != nil {
		extra.Close()
	}
	p.closeEvicted(victims)
	return f, nil
}

// unpin ends a use begun by pin: the file goes back to the idle list (or
// is closed, if close came meanwhile).
func (sf *segmentFile) unpin() {
	p := sf.pool
	p.mu.Lock()
	sf.pins--
	if sf.pins > 0 {
		p.mu.Unlock()
		return
	}
	var victims []evicted
	var closing *os.File
	if sf.closed {
		closing, sf.f = sf.f, nil
		p.open--
	} else {
		sf.used = p.generation
		p.idle.pushFront(sf)
		victims = p.evictLocked(p.max)
	}
	p.mu.Unlock()
	if closing != nil {
		closing.Close()
	}
	p.closeEvicted(victims)
}

// ReadAt reads len(b) bytes at off (io.ReaderAt).
func (sf *segmentFile) ReadAt(b []byte, off int64) (int, error) {
	f, err := sf.pin(false)
	if err != nil {
		return 0, err
	}
	defer sf.unpin()
	return f.ReadAt(b, off)
}

// WriteAt writes b at off.
func (sf *segmentFile) WriteAt(b []byte, off int64) (int, error) {
	f, err := sf.pin(true)
	if err != nil {
		return 0, err
	}
	defer sf.unpin()
	return f.WriteAt(b, off)
}

// startWriteback asks the kernel to start writing the n bytes at off to
// disk (sync_file_range with SYNC_FILE_RANGE_WRITE) without waiting for
// them, when the file is open; see Config.WritebackBytes.
func (sf *segmentFile) startWriteback(off, n int64) error {
	f, err := sf.pin(false)
	if err != nil {
		return err
	}
	defer sf.unpin()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return err
	}
	return serr
}

// Truncate cuts the file to size bytes.
func (sf *segmentFile) Truncate(size int64) error {
	f, err := sf.pin(true)
	if err != nil {
		return err
	}
	defer sf.unpin()
	return f.Truncate(size)
}

// Stat describes the file, from its open descriptor if it has one, else
// by its path.
func (sf *segmentFile) Stat() (fs.FileInfo, error) {
	p := sf.pool
	p.mu.Lock()
	if sf.f == nil || sf.closed {
		p.mu.Unlock()
		return os.Stat(sf.path())
	}
	sf.pins++
	if sf.pins == 1 {
		p.idle.remove(sf)
	}
	f := sf.f
	p.mu.Unlock()
	defer sf.unpin()
	return f.Stat()
}

// markUnsynced records that the file may hold bytes not yet fsynced
// (found so by a recovery), so that the next Sync fsyncs it even if it
// was evicted.
func (sf *segmentFile) markUnsynced() {
	sf.pool.mu.Lock()
	sf.unsynced = true
	sf.pool.mu.Unlock()
}

// Sync fsyncs the file, and returns the error of an eviction's fsync
// that failed since the last Sync. A file evicted (and so fsynced) since
// it was last written is not reopened.
func (sf *segmentFile) Sync() error {
	p := sf.pool
	p.mu.Lock()
	err := sf.syncErr
	sf.syncErr = nil
	if err == nil && sf.f == nil && !sf.unsynced && sf.syncing == 0 && !sf.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	f, err := sf.pin(false)
	if err != nil {
		return err
	}
	defer sf.unpin()
	p.mu.Lock()
	sf.unsynced = false
	p.mu.Unlock()
	if err := f.Sync(); err != nil {
		p.mu.Lock()
		sf.unsynced = true
		p.mu.Unlock()
		return err
	}
	return nil
}

// Close closes the file (at once, or when its last user unpins it); it
// can no longer be used.
func (sf *segmentFile) Close() error {
	p := sf.pool
	p.mu.Lock()
	if sf.closed {
		p.mu.Unlock()
		return nil
	}
	sf.closed = true
	if sf.f == nil || sf.pins > 0 {
		p.mu.Unlock()
		return nil
	}
	p.idle.remove(sf)
	f := sf.f
	sf.f = nil
	p.open--
	p.mu.Unlock()
	return f.Close()
}
