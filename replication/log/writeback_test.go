package log

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWritebackBoundsDirtyPages appends 8 MiB to a log on the test's
// disk and asks the kernel (cachestat) how many of the segment's pages
// are still dirty: with WritebackBytes 1 MiB at most twice that (what
// was appended since the last writeback asked for, which may have been
// put off while the one before ran) plus a page or two at the ranges'
// edges, since writeback of the rest was started as it was appended;
// with 0, the kernel's own pacing, nearly all 8 MiB, which is what lets a
// busy machine gather gigabytes and write them at once while appends
// wait. The log reads back whole either way.
func TestWritebackBoundsDirtyPages(t *testing.T) {
	skipOnTmpfs(t)
	batch := newBatch(t, 64, 1000, 1000) // about 66 KiB
	const total = 8 << 20
	dirtyPages := func(writeback int64) uint64 {
		t.Helper()
		cfg := testConfig()
		cfg.SegmentBytes = 64 << 20
		cfg.WritebackBytes = writeback
		dir := t.TempDir()
		l := openTestLog(t, dir, cfg)
		appended := 0
		for appended < total {
			mustAppend(t, l, batch)
			appended += len(batch)
		}
		l.writeback.Wait()
		f, err := os.Open(segmentPath(dir, 0, logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var st unix.Cachestat_t
		if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: 0, Len: 0}, &st, 0); err != nil {
			t.Fatalf("cachestat of the segment: %v", err)
		}
		if got := len(readAllFrom(t, l, 0)); got != (appended / len(batch)) {
			t.Fatalf("WritebackBytes %d: read back %d batches, want %d", writeback, got, appended/len(batch))
		}
		t.Logf("WritebackBytes %d: %d pages cached, %d dirty, %d under writeback", writeback, st.Cache, st.Dirty, st.Writeback)
		return st.Dirty
	}
	const window = 1 << 20
	if got, most := dirtyPages(window), uint64(2*window/pageBytes+2); got > most {
		t.Errorf("WritebackBytes %d: %d dirty pages after 8 MiB, want at most %d", window, got, most)
	}
	if got, least := dirtyPages(0), uint64(total/2/pageBytes); got < least {
		t.Errorf("WritebackBytes 0: %d dirty pages after 8 MiB, want at least %d (else this test measures nothing here)", got, least)
	}
}

// TestWritebackLeavesTheTailPage: the writeback asked for after an append
// stops at the last whole page, so the page the next append fills is not
// locked by the file system's writeback meanwhile. After one append of
// about 66 KiB with WritebackBytes four pages, every whole page is written
// back (clean, not under writeback) and the partly filled last one is
// still dirty.
func TestWritebackLeavesTheTailPage(t *testing.T) {
	skipOnTmpfs(t)
	cfg := testConfig()
	cfg.WritebackBytes = 4 * pageBytes
	dir := t.TempDir()
	l := openTestLog(t, dir, cfg)
	mustAppend(t, l, newBatch(t, 64, 1000, 1000))
	l.writeback.Wait()
	f, err := os.Open(segmentPath(dir, 0, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	whole := st.Size() &^ (pageBytes - 1)
	if whole == st.Size() || whole < cfg.WritebackBytes {
		t.Fatalf("segment of %d bytes: want a partly filled last page after at least %d whole bytes", st.Size(), cfg.WritebackBytes)
	}
	cachestat := func(off, n int64) unix.Cachestat_t {
		t.Helper()
		var cs unix.Cachestat_t
		if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &cs, 0); err != nil {
			t.Fatalf("cachestat of the segment: %v", err)
		}
		return cs
	}
	deadline := time.Now().Add(10 * time.Second)
	for cs := cachestat(0, whole); cs.Dirty != 0 || cs.Writeback != 0; cs = cachestat(0, whole) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d whole pages: %d still dirty and %d under writeback after 10 s", whole/pageBytes, cs.Dirty, cs.Writeback)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cs := cachestat(whole, pageBytes); cs.Dirty != 1 {
		t.Errorf("the last, partly filled page: %d dirty, want 1 (left to the next writeback)", cs.Dirty)
	}
}

// skipOnTmpfs skips a test measuring writeback when the test directory is
// on tmpfs, whose pages are never written back.
func skipOnTmpfs(t *testing.T) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(t.TempDir(), &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose pages are never written back; run with TMPDIR on a disk")
	}
}
