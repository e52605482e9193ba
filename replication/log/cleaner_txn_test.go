package log

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// BuildTxnBatchForTest builds, for the tests of package log_test, a
// transactional batch of producer id at epoch 0 holding one record per
// key ("key=value"), timestamped ts.
func BuildTxnBatchForTest(id int64, ts time.Time, records ...string) []byte {
	var kvs []KV
	for _, r := range records {
		k, v, _ := strings.Cut(r, "=")
		kvs = append(kvs, KV{Key: []byte(k), Value: []byte(v)})
	}
	return buildBatchAs(kvs, ts, attrTransactional, id, 0)
}

// rollForTest starts a new segment at the log end.
func rollForTest(tb testing.TB, l *Log) {
	tb.Helper()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if _, err := l.roll(); err != nil {
		tb.Fatal(err)
	}
}

// txnLog is the log of TestCleanTransactionMarkers and its offsets.
type txnLog struct {
	l *Log
	// The markers, by what the cleaner must do with them.
	commitGone, abortGone, abortGone2 int64 // no batch left: removed past the horizon
	commitKept, abortKept             int64 // a batch of theirs kept
	producerLast, segmentLast         int64 // the last batch of their producer, of their segment
	// The aborted-transaction index entries.
	goneEntry, goneEntry2, keptEntry AbortedTxn
}

// buildTxnLog writes, at baseTime, in segments it rolls itself:
//
//	segment 0: 0 P7 a=a1, 1 COMMIT P7, 2 P8 b=b1, 3 ABORT P8, 4 P9 c=c1,
//	           5 COMMIT P9, 6 a=a2, 7 P11 e=e1 (aborted, last of segment)
//	segment 1: 8 ABORT P11, 9 P13 g=g1, 10 ABORT P13, 11 P10 d=d1, 12 d=d2,
//	           13 COMMIT P10 (its producer's last), 14 P12 f=f1, 15 f=f2,
//	           16 COMMIT P12 (last of segment)
//	segment 2: a committed transaction of each of P7, P8, P9, P11, P12,
//	           P13 (so their markers above are not their last batches),
//	           then filler; then an active segment.
func buildTxnLog(t *testing.T, dir string) txnLog {
	l := openTestLog(t, dir, testConfig())
	ts := baseTime
	var x txnLog
	x.l = l
	data := func(id int64, r string) int64 {
		return mustAppend(t, l, BuildTxnBatchForTest(id, ts, r)).BaseOffset
	}
	plain := func(r string) int64 {
		k, v, _ := strings.Cut(r, "=")
		return mustAppend(t, l, BuildBatch([]KV{{Key: []byte(k), Value: []byte(v)}}, ts)).BaseOffset
	}
	commit := func(id int64) int64 { return mustAppend(t, l, BuildMarker(id, 0, 1, true, ts)).BaseOffset }
	abort := func(id, first int64) AbortedTxn {
		at := mustAppend(t, l, BuildMarker(id, 0, 1, false, ts)).BaseOffset
		a := AbortedTxn{ProducerID: id, FirstOffset: first, LastOffset: at, LastStableOffset: at + 1}
		if err := l.AppendAbortedTxn(a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	data(7, "a=a1")
	x.commitGone = commit(7)
	x.goneEntry = abort(8, data(8, "b=b1"))
	x.abortGone = x.goneEntry.LastOffset
	data(9, "c=c1")
	x.commitKept = commit(9)
	plain("a=a2")
	e1 := data(11, "e=e1")
	rollForTest(t, l)
	x.keptEntry = abort(11, e1)
	x.abortKept = x.keptEntry.LastOffset
	x.goneEntry2 = abort(13, data(13, "g=g1"))
	x.abortGone2 = x.goneEntry2.LastOffset
	data(10, "d=d1")
	plain("d=d2")
	x.producerLast = commit(10)
	data(12, "f=f1")
	plain("f=f2")
	x.segmentLast = commit(12)
	rollForTest(t, l)
	for _, id := range []int64{7, 8, 9, 11, 12, 13} {
		data(id, "z=later")
		commit(id)
	}
	plain("filler=1")
	rollForTest(t, l)
	plain("filler=2")
	if x.segmentLast != 16 || l.EndOffset() != 31 {
		t.Fatalf("layout: last marker of segment 1 at %d, log end %d; want 16 and 31", x.segmentLast, l.EndOffset())
	}
	return x
}

// addDirt closes a segment of new records, so that the next pass has a
// dirty range to clean.
func addDirt(t *testing.T, l *Log) {
	t.Helper()
	mustAppend(t, l, BuildBatch([]KV{{Key: []byte("filler"), Value: []byte("3")}}, baseTime))
	rollForTest(t, l)
	mustAppend(t, l, BuildBatch([]KV{{Key: []byte("filler"), Value: []byte("4")}}, baseTime))
}

// cleanedBatches reads every batch of l, which may have gaps between
// them.
func cleanedBatches(t *testing.T, l *Log) []storedBatch {
	t.Helper()
	var out []storedBatch
	for next := l.StartOffset(); next < l.EndOffset(); {
		b, err := l.Read(next, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		batches := decodeBatches(t, b)
		if len(batches) == 0 {
			t.Fatalf("Read(%d) below EndOffset %d returned no batch", next, l.EndOffset())
		}
		out = append(out, batches...)
		next = out[len(out)-1].lastOffset + 1
	}
	return out
}

// controlBatches returns the control batches of l by offset: true for a
// COMMIT marker, false for an ABORT.
func controlBatches(t *testing.T, l *Log) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	for _, b := range cleanedBatches(t, l) {
		h := parseBatchHeader(b.raw)
		if h.attributes&attrControl == 0 {
			continue
		}
		m, err := ReadMarker(b.raw)
		if err != nil {
			t.Fatalf("marker at %d: %v", h.baseOffset, err)
		}
		out[h.baseOffset] = m.Commit
	}
	return out
}

// checkTxnIndexMatchesMarkers checks that every aborted-transaction index
// entry has its ABORT marker in the log, of its producer, and every ABORT
// marker its entry.
func checkTxnIndexMatchesMarkers(t *testing.T, l *Log) {
	t.Helper()
	entries := l.CollectAbortedTxns(l.StartOffset(), l.EndOffset())
	byMarker := map[int64]AbortedTxn{}
	for _, a := range entries {
		byMarker[a.LastOffset] = a
	}
	aborts := 0
	for _, b := range cleanedBatches(t, l) {
		h := parseBatchHeader(b.raw)
		if h.attributes&attrControl == 0 {
			continue
		}
		m, err := ReadMarker(b.raw)
		if err != nil {
			t.Fatal(err)
		}
		if m.Commit {
			continue
		}
		aborts++
		if a, ok := byMarker[h.baseOffset]; !ok || a.ProducerID != h.producerID {
			t.Errorf("ABORT marker of producer %d at %d: index entry %+v, %v", h.producerID, h.baseOffset, a, ok)
		}
	}
	if aborts != len(entries) {
		t.Errorf("index entries %+v for %d ABORT markers", entries, aborts)
	}
}

// TestCleanTransactionMarkers removes transaction markers as Kafka's
// cleaner does: within delete.retention.ms every marker stays; past it
// the markers whose transaction has no batch left go, the abort ones'
// index entries with them, while the markers of a transaction with a
// batch kept (data, or an aborted batch kept empty as the last of its
// segment), the last batch of a segment and the last batch of a producer
// stay. The cleaned index survives a reopen.
func TestCleanTransactionMarkers(t *testing.T) {
	dir := t.TempDir()
	x := buildTxnLog(t, dir)
	l := x.l
	allMarkers := controlBatches(t, l)

	// Within delete.retention.ms: the aborted records go, every marker
	// stays.
	res := mustClean(t, l, eagerClean(), baseTime)
	if res.MarkersRemoved != 0 || res.RecordsRemoved == 0 {
		t.Fatalf("pass within delete.retention.ms: %+v, want records removed and no marker", res)
	}
	if got := controlBatches(t, l); !reflect.DeepEqual(got, allMarkers) {
		t.Fatalf("markers within delete.retention.ms: got %v, want %v", got, allMarkers)
	}
	want := []AbortedTxn{x.goneEntry, x.keptEntry, x.goneEntry2}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("index within delete.retention.ms: got %+v, want %+v", got, want)
	}

	// Past it.
	addDirt(t, l)
	res = mustClean(t, l, eagerClean(), baseTime.Add(2*time.Hour))
	if res.MarkersRemoved != 3 {
		t.Fatalf("pass past delete.retention.ms: %+v, want 3 markers removed", res)
	}
	wantMarkers := maps.Clone(allMarkers)
	for _, gone := range []int64{x.commitGone, x.abortGone, x.abortGone2} {
		delete(wantMarkers, gone)
	}
	if got := controlBatches(t, l); !reflect.DeepEqual(got, wantMarkers) {
		t.Fatalf("markers past delete.retention.ms: got %v, want %v", got, wantMarkers)
	}
	for _, kept := range []int64{x.commitKept, x.abortKept, x.producerLast, x.segmentLast} {
		if _, ok := wantMarkers[kept]; !ok {
			t.Fatalf("marker at %d not among those wanted", kept)
		}
	}
	want = []AbortedTxn{x.keptEntry}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("index past delete.retention.ms: got %+v, want %+v", got, want)
	}
	checkTxnIndexMatchesMarkers(t, l)
	if left := cleanerLeftovers(t, dir); len(left) != 0 {
		t.Fatalf("left-over cleaner files: %v", left)
	}

	// A further pass finds nothing more to remove.
	addDirt(t, l)
	if res := mustClean(t, l, eagerClean(), baseTime.Add(3*time.Hour)); res.MarkersRemoved != 0 {
		t.Fatalf("third pass: %+v, want no marker removed", res)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, testConfig())
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("index after a reopen: got %+v, want %+v", got, want)
	}
	checkTxnIndexMatchesMarkers(t, l)
}

// cleanerLeftovers lists the .cleaned and .swap files of dir.
func cleanerLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == cleanedSuffix || filepath.Ext(e.Name()) == swapSuffix {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCleanTransactionMarkersCrash reopens a log whose swap of a cleaned
// segment, which drops markers and index entries, a crash cut short at
// each step: the log and its aborted-transaction index are either both
// the old segment's or both the cleaned one's.
func TestCleanTransactionMarkersCrash(t *testing.T) {
	// before: the log after a pass within delete.retention.ms; after: the
	// same log after one past it, which rewrote segment 0 without two
	// markers and with an empty index.
	before := t.TempDir()
	x := buildTxnLog(t, before)
	mustClean(t, x.l, eagerClean(), baseTime)
	addDirt(t, x.l)
	if err := x.l.Close(); err != nil {
		t.Fatal(err)
	}
	after := t.TempDir()
	copyDir(t, before, after)
	la := openTestLog(t, after, testConfig())
	if res := mustClean(t, la, eagerClean(), baseTime.Add(2*time.Hour)); res.MarkersRemoved != 3 {
		t.Fatalf("pass past delete.retention.ms: %+v, want 3 markers removed", res)
	}
	if err := la.Close(); err != nil {
		t.Fatal(err)
	}

	const (
		old = iota
		cleaned
	)
	type file struct {
		suffix string // of the segment file
		as     string // the name it is left under: cleanedSuffix, swapSuffix or "" (in place)
	}
	for _, tc := range []struct {
		name  string
		files []file
		want  int
	}{
		{"cleaned files written", []file{{logSuffix, cleanedSuffix}, {indexSuffix, cleanedSuffix}, {timeIndexSuffix, cleanedSuffix}, {txnIndexSuffix, cleanedSuffix}}, old},
		{"index renamed to swap", []file{{txnIndexSuffix, swapSuffix}, {logSuffix, cleanedSuffix}, {indexSuffix, cleanedSuffix}, {timeIndexSuffix, cleanedSuffix}}, old},
		{"log renamed to swap", []file{{txnIndexSuffix, swapSuffix}, {logSuffix, swapSuffix}, {indexSuffix, cleanedSuffix}, {timeIndexSuffix, cleanedSuffix}}, cleaned},
		{"all renamed to swap", []file{{txnIndexSuffix, swapSuffix}, {logSuffix, swapSuffix}, {indexSuffix, swapSuffix}, {timeIndexSuffix, swapSuffix}}, cleaned},
		{"index moved into place", []file{{indexSuffix, ""}, {timeIndexSuffix, ""}, {txnIndexSuffix, ""}, {logSuffix, swapSuffix}}, cleaned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, before, dir)
			for _, f := range tc.files {
				data, err := os.ReadFile(segmentPath(after, 0, f.suffix))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(segmentPath(dir, 0, f.suffix+f.as), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l := openTestLog(t, dir, testConfig())
			markers := controlBatches(t, l)
			_, commitThere := markers[x.commitGone]
			_, abortThere := markers[x.abortGone]
			entries := l.CollectAbortedTxns(0, l.EndOffset())
			wantEntries := []AbortedTxn{x.goneEntry, x.keptEntry, x.goneEntry2}
			if tc.want == cleaned {
				wantEntries = wantEntries[1:]
			}
			if commitThere != (tc.want == old) || abortThere != (tc.want == old) || !reflect.DeepEqual(entries, wantEntries) {
				t.Fatalf("after reopening: markers at %d, %d there: %v, %v; index %+v; want the %s segment's and index %+v",
					x.commitGone, x.abortGone, commitThere, abortThere, entries, []string{"old", "cleaned"}[tc.want], wantEntries)
			}
			checkTxnIndexMatchesMarkers(t, l)
			if left := cleanerLeftovers(t, dir); len(left) != 0 {
				t.Fatalf("left-over cleaner files after reopening: %v", left)
			}
		})
	}
}

// copyDir copies the files of from into to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// RollForTest starts a new segment at the log end, for the tests of
// package log_test.
func RollForTest(tb testing.TB, l *Log) { rollForTest(tb, l) }
