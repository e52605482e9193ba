package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMain runs the package's tests through a default pool of
// TRIPOD_LOG_OPEN_FILES_MAX files when it is set, so that the whole suite
// can run with segment files evicted all the time (capacity 1).
func TestMain(m *testing.M) {
	if v := os.Getenv("TRIPOD_LOG_OPEN_FILES_MAX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "TRIPOD_LOG_OPEN_FILES_MAX %q: want a positive number\n", v)
			os.Exit(2)
		}
		defaultPool = NewFilePool(n)
	}
	os.Exit(m.Run())
}

// pooledConfig is testConfig with its own pool of capacity files.
func pooledConfig(capacity int) (Config, *FilePool) {
	cfg := testConfig()
	cfg.Files = NewFilePool(capacity)
	return cfg, cfg.Files
}

// fileOpen reports whether the segment file holds a descriptor, and how
// many users pin it.
func fileOpen(sf *segmentFile) (open bool, pins int) {
	sf.pool.mu.Lock()
	defer sf.pool.mu.Unlock()
	return sf.f != nil, sf.pins
}

// segmentsOf returns the log's segments.
func segmentsOf(l *Log) []*segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]*segment(nil), l.segments...)
}

func TestFilePoolEvictsTheLeastRecentlyUsed(t *testing.T) {
	cfg, pool := pooledConfig(2)
	batch := newBatch(t, 5, 100, 1000)
	cfg.SegmentBytes = int64(len(batch))
	l := openTestLog(t, t.TempDir(), cfg)
	for range 5 {
		mustAppend(t, l, batch)
	}
	if got := pool.Open(); got != 2 {
		t.Fatalf("after 5 rolls: %d files open, want 2", got)
	}
	segs := segmentsOf(l)
	// Reading segment 0 opens it and evicts the least recently used of
	// the two open (segment 3; segment 4 is the active one, written last).
	if _, err := segs[0].log.ReadAt(make([]byte, batchHeaderSize), 0); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false, false, true} {
		if open, pins := fileOpen(segs[i].log); open != want || pins != 0 {
			t.Errorf("segment %d: got open %v with %d pins, want open %v, no pin", i, open, pins, want)
		}
	}
	if got := pool.Open(); got != 2 {
		t.Fatalf("after a read: %d files open, want 2", got)
	}
}

func TestFilePoolBoundsDescriptorsAcrossLogs(t *testing.T) {
	cfg, pool := pooledConfig(3)
	root := t.TempDir()
	batch := newBatch(t, 5, 100, 1000)
	before := openDescriptors(t)
	var logs []*Log
	for i := range 10 {
		l := openTestLog(t, fmt.Sprintf("%s/p-%d", root, i), cfg)
		mustAppend(t, l, batch)
		logs = append(logs, l)
	}
	for _, l := range logs {
		readAllFrom(t, l, 0)
	}
	if got := openDescriptors(t) - before; got != 3 {
		t.Fatalf("10 logs through a pool of 3: %d descriptors, want 3", got)
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := openDescriptors(t) - before; got != 0 || pool.Open() != 0 {
		t.Fatalf("after Close: %d descriptors, pool holds %d, want none", got, pool.Open())
	}
	// Opening the logs again, cleanly closed, holds at most the pool's
	// capacity.
	for i := range 10 {
		openTestLog(t, fmt.Sprintf("%s/p-%d", root, i), cfg)
	}
	if got := openDescriptors(t) - before; got > 3 {
		t.Fatalf("10 logs reopened through a pool of 3: %d descriptors, want at most 3", got)
	}
}

func TestFilePoolPinnedFileStaysOpen(t *testing.T) {
	cfg, pool := pooledConfig(1)
	root := t.TempDir()
	batch := newBatch(t, 5, 100, 1000)
	a := openTestLog(t, root+"/a", cfg)
	b := openTestLog(t, root+"/b", cfg)
	mustAppend(t, a, batch)
	sf := segmentsOf(a)[0].log
	f, err := sf.pin(false)
	if err != nil {
		t.Fatal(err)
	}
	// b's append opens its file beside the pinned one, and the pool closes
	// b's once it is done: the pinned one is not evicted.
	mustAppend(t, b, batch)
	if open, pins := fileOpen(sf); !open || pins != 1 {
		t.Fatalf("pinned file: got open %v with %d pins, want open with 1", open, pins)
	}
	if open, _ := fileOpen(segmentsOf(b)[0].log); open {
		t.Fatalf("the unpinned file stayed open beside the pinned one in a pool of 1")
	}
	if got := pool.Open(); got != 1 {
		t.Fatalf("one pinned: %d files open, want 1", got)
	}
	// Close while pinned: the file stays usable until unpinned.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(batch))
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatalf("read a pinned file after Close: %v", err)
	}
	sf.unpin()
	if open, _ := fileOpen(sf); open {
		t.Fatalf("closed file still open after its last unpin")
	}
	if _, err := sf.pin(false); !errors.Is(err, errFileClosed) {
		t.Fatalf("pin after Close: got %v, want %v", err, errFileClosed)
	}
	if got := pool.Open(); got != 0 {
		t.Fatalf("after unpin: %d files open, want 0", got)
	}
}

func TestFilePoolSyncsWrittenFilesBeforeClosingThem(t *testing.T) {
	cfg, pool := pooledConfig(1)
	root := t.TempDir()
	batch := newBatch(t, 5, 100, 1000)
	a := openTestLog(t, root+"/a", cfg)
	b := openTestLog(t, root+"/b", cfg)
	mustAppend(t, a, batch)
	sa := segmentsOf(a)[0]
	sf := sa.log
	pool.mu.Lock()
	unsynced := sf.unsynced
	pool.mu.Unlock()
	if !unsynced {
		t.Fatalf("appended segment file not marked unsynced")
	}
	// b's append evicts a's file: it is fsynced as it is closed.
	mustAppend(t, b, batch)
	pool.mu.Lock()
	open, unsynced, syncing := sf.f != nil, sf.unsynced, sf.syncing
	pool.mu.Unlock()
	if open || unsynced || syncing != 0 {
		t.Fatalf("evicted file: got open %v, unsynced %v, %d syncing; want closed and synced", open, unsynced, syncing)
	}
	if !sa.dirty {
		t.Fatalf("segment not dirty after an append")
	}
	// a's Flush has nothing left to fsync: it does not reopen the file.
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if open, _ := fileOpen(sf); open {
		t.Fatalf("Flush reopened a file its eviction fsynced")
	}
	// A failed fsync of an eviction is the next Flush's error.
	mustAppend(t, a, batch)
	failed := errors.New("fsync failed")
	pool.mu.Lock()
	sf.syncErr = failed
	pool.mu.Unlock()
	if err := a.Flush(); !errors.Is(err, failed) {
		t.Fatalf("Flush after a failed eviction fsync: got %v, want %v", err, failed)
	}
	if err := a.Flush(); err != nil {
		t.Fatalf("Flush retried: %v", err)
	}
}

// TestFilePoolOfOneKeepsEveryOperationRight runs appends, reads, rolls,
// truncation, retention, compaction, a crash and reopens of two logs
// through a pool of one file, and checks that every log reads the same
// bytes as one written beside it through a pool of many.
func TestFilePoolOfOneKeepsEveryOperationRight(t *testing.T) {
	small, pool := pooledConfig(1)
	small.SegmentBytes, small.IndexIntervalBytes = 600, 100
	large := small
	large.Files = NewFilePool(1000)
	root := t.TempDir()
	open := func(dir string, cfg Config) *Log {
		l, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		return l
	}
	dirs := []string{root + "/one-a", root + "/one-b", root + "/many"}
	cfgs := []Config{small, small, large}
	logs := []*Log{open(dirs[0], small), open(dirs[1], small), open(dirs[2], large)}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	each := func(what string, f func(l *Log) error) {
		t.Helper()
		for i, l := range logs {
			if err := f(l); err != nil {
				t.Fatalf("%s on log %d: %v", what, i, err)
			}
		}
	}
	now := baseTime
	for round := range 6 {
		for i := range 20 {
			spec := batchSpec{
				records:   []testRecord{kv(fmt.Sprintf("key-%d", i%7), fmt.Sprintf("v%d-%d", round, i))},
				timestamp: now.UnixMilli() + int64(i),
			}
			batch := buildBatch(t, spec)
			each("Append", func(l *Log) error { _, err := l.Append(batch, int32(round)); return err })
		}
		switch round {
		case 1:
			each("TruncateTo", func(l *Log) error { return l.TruncateTo(l.EndOffset() - 13) })
		case 2:
			each("Clean", func(l *Log) error { _, err := l.Clean(eagerClean(), now.Add(time.Hour)); return err })
		case 3:
			each("AdvanceStartOffset", func(l *Log) error { _, err := l.AdvanceStartOffset(17); return err })
			each("EnforceRetention", func(l *Log) error { _, err := l.EnforceRetention(now); return err })
		case 4:
			// A crash: the logs are dropped unclosed (their files closed
			// under them, no clean-shutdown marker) and opened again.
			for i, l := range logs {
				l.mu.Lock()
				l.closed = true
				l.mu.Unlock()
				for _, s := range l.segments {
					s.close()
				}
				logs[i] = open(dirs[i], cfgs[i])
			}
		case 5:
			each("Close", func(l *Log) error { return l.Close() })
			for i := range logs {
				logs[i] = open(dirs[i], cfgs[i])
			}
		}
		if got := pool.Open(); got > 1 {
			t.Fatalf("round %d: the pool of one holds %d files", round, got)
		}
		want := readEverything(t, logs[2])
		for i, l := range logs[:2] {
			if got := readEverything(t, l); !bytes.Equal(got, want) {
				t.Fatalf("round %d: log %d through a pool of one reads %d bytes unlike the %d of the other", round, i, len(got), len(want))
			}
		}
	}
}

// readEverything reads the log from its start to its end, one batch at a
// time and then in one read.
func readEverything(tb testing.TB, l *Log) []byte {
	tb.Helper()
	var out []byte
	for next := l.StartOffset(); next < l.EndOffset(); {
		b, err := l.Read(next, 1)
		if err != nil {
			tb.Fatalf("Read(%d): %v", next, err)
		}
		h := parseBatchHeader(b)
		out = append(out, b[:h.size]...)
		next = h.nextOffset()
	}
	all, err := l.Read(l.StartOffset(), 1<<30)
	if err != nil {
		tb.Fatalf("Read(%d): %v", l.StartOffset(), err)
	}
	if !bytes.Equal(all, out) {
		tb.Fatalf("one read of the log returns %d bytes, batch by batch %d", len(all), len(out))
	}
	return out
}

// TestFilePoolReadersDuringEvictions reads four logs concurrently through
// a pool of one while a writer appends to them, so every read opens a file
// another goroutine's read or append may evict: every read returns whole,
// valid batches. Run it with -race.
func TestFilePoolReadersDuringEvictions(t *testing.T) {
	cfg, pool := pooledConfig(1)
	cfg.SegmentBytes = 4 << 10
	root := t.TempDir()
	var logs []*Log
	for i := range 4 {
		logs = append(logs, openTestLog(t, fmt.Sprintf("%s/p-%d", root, i), cfg))
	}
	batch := newBatch(t, 3, 200, 1000)
	for _, l := range logs {
		mustAppend(t, l, batch)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				l := logs[(r+n)%len(logs)]
				end := l.EndOffset()
				offset := int64(n) % end
				b, err := l.Read(offset, 1+n%3000)
				if err == nil {
					err = checkRead(b, offset)
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d: Read(%d): %w", r, offset, err)
					return
				}
			}
		}()
	}
	for i := range 300 {
		mustAppend(t, logs[i%len(logs)], batch)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := pool.Open(); got > 1 {
		t.Fatalf("after the readers: the pool of one holds %d files", got)
	}
}

func TestFilePoolCloseIdleClosesFilesUnusedSinceTheLastCall(t *testing.T) {
	cfg, pool := pooledConfig(100)
	root := t.TempDir()
	batch := newBatch(t, 5, 100, 1000)
	var logs []*Log
	for i := range 3 {
		l := openTestLog(t, fmt.Sprintf("%s/p-%d", root, i), cfg)
		// Two batches: a read of the last one alone comes from memory
		// (Log.read), a read from the first uses the file.
		mustAppend(t, l, batch)
		mustAppend(t, l, batch)
		logs = append(logs, l)
	}
	if got := pool.CloseIdle(); got != 0 {
		t.Fatalf("first CloseIdle: closed %d files, want 0 (all used since the pool began)", got)
	}
	readAllFrom(t, logs[0], 0)
	if got := pool.CloseIdle(); got != 2 {
		t.Fatalf("second CloseIdle: closed %d files, want the 2 unused since the first", got)
	}
	for i, want := range []bool{true, false, false} {
		sf := segmentsOf(logs[i])[0].log
		pool.mu.Lock()
		open, unsynced := sf.f != nil, sf.unsynced
		pool.mu.Unlock()
		if open != want || (!open && unsynced) {
			t.Errorf("log %d: got open %v, unsynced %v; want open %v, and fsynced if closed", i, open, unsynced, want)
		}
	}
	if got := pool.CloseIdle(); got != 1 || pool.Open() != 0 {
		t.Fatalf("third CloseIdle: closed %d files, %d left open; want 1 closed, none left", got, pool.Open())
	}
	// A closed file opens again on use, with the same bytes.
	for _, l := range logs {
		if got := readAllFrom(t, l, 0); len(got) != 2 {
			t.Fatalf("after CloseIdle: read %d batches, want 2", len(got))
		}
	}
}
