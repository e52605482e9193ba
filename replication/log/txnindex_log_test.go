package log

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// txnIndexFiles lists the base offsets of the .txnindex files in dir.
func txnIndexFiles(tb testing.TB, dir string) []int64 {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var bases []int64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name(), txnIndexSuffix); ok {
			bases = append(bases, base)
		}
	}
	return bases
}

// abortAt appends producer id's abort marker to l and the index entry
// of its transaction from first, returning the entry.
func abortAt(tb testing.TB, l *Log, id, first int64) AbortedTxn {
	tb.Helper()
	res := mustAppend(tb, l, BuildMarker(id, 0, 1, false, time.UnixMilli(1000)))
	a := AbortedTxn{ProducerID: id, FirstOffset: first, LastOffset: res.BaseOffset, LastStableOffset: res.BaseOffset + 1}
	if err := l.AppendAbortedTxn(a); err != nil {
		tb.Fatalf("AppendAbortedTxn(%+v): %v", a, err)
	}
	return a
}

// TestLogTxnIndexPerSegment writes abort markers across rolled segments:
// each segment's <base>.txnindex holds the entries of its markers, an
// entry already present is skipped, a rolled segment's index holds no
// descriptor, CollectAbortedTxns walks the
// segments from the fetch offset, and the files follow the segments
// through truncation, a reopen after a crash that tore an entry,
// retention and TruncateFullyAndStartAt.
func TestLogTxnIndexPerSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 4 << 10
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []AbortedTxn
	for i := range 6 {
		first := mustAppend(t, l, newBatch(t, 3, 1000, 1000)).BaseOffset
		want = append(want, abortAt(t, l, int64(i), first))
	}
	segments := segmentFiles(t, dir)
	if len(segments) < 3 {
		t.Fatalf("got segments %v, want at least 3", segments)
	}
	var holding []int64
	for _, a := range want {
		l.mu.RLock()
		base := l.segments[l.segmentFor(a.LastOffset)].baseOffset
		l.mu.RUnlock()
		if len(holding) == 0 || holding[len(holding)-1] != base {
			holding = append(holding, base)
		}
	}
	if got := txnIndexFiles(t, dir); !slices.Equal(got, holding) {
		t.Fatalf("txnindex files: got %v, want those of the segments holding a marker %v", got, holding)
	}
	l.mu.RLock()
	for _, s := range l.segments[:len(l.segments)-1] {
		if s.txns.f != nil {
			t.Errorf("rolled segment %d holds its transaction index open", s.baseOffset)
		}
	}
	l.mu.RUnlock()
	if err := l.AppendAbortedTxn(want[2]); err != nil {
		t.Fatal(err)
	}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("CollectAbortedTxns(0, end): got %+v, want %+v (no entry twice)", got, want)
	}
	// From the fourth transaction's first record: the third ended before.
	if got := l.CollectAbortedTxns(want[3].FirstOffset, l.EndOffset()); !reflect.DeepEqual(got, want[3:]) {
		t.Fatalf("CollectAbortedTxns from %d: got %+v, want %+v", want[3].FirstOffset, got, want[3:])
	}
	// Bounded above by the fifth transaction's first record.
	if got := l.CollectAbortedTxns(want[3].FirstOffset, want[4].FirstOffset); !reflect.DeepEqual(got, want[3:4]) {
		t.Fatalf("CollectAbortedTxns up to %d: got %+v, want %+v", want[4].FirstOffset, got, want[3:4])
	}
	if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 9, FirstOffset: 0, LastOffset: l.EndOffset()}); err == nil {
		t.Fatal("AppendAbortedTxn past the log end: got no error")
	}

	// Truncation below the last marker drops its entry.
	if err := l.TruncateTo(want[5].LastOffset); err != nil {
		t.Fatal(err)
	}
	want = want[:5]
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after TruncateTo: got %+v, want %+v", got, want)
	}

	// A crash: the last index file gains a torn entry and the log has no
	// clean-shutdown marker.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := txnIndexFiles(t, dir)
	last := segmentPath(dir, files[len(files)-1], txnIndexSuffix)
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 0, 0, 7})
	f.Close()
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	l, err = Open(dir, cfg)
	if err != nil {
		t.Fatalf("reopen after a torn index entry: %v", err)
	}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the reopen: got %+v, want %+v", got, want)
	}
	if fi, err := os.Stat(last); err != nil || fi.Size()%txnEntrySize != 0 {
		t.Fatalf("torn index after the reopen: %v, %v", fi, err)
	}

	// Retention deletes the index with its segment.
	if _, err := l.AdvanceStartOffset(want[2].LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnforceRetention(time.UnixMilli(5000)); err != nil {
		t.Fatal(err)
	}
	start := l.segments[0].baseOffset
	for _, base := range txnIndexFiles(t, dir) {
		if base < start {
			t.Fatalf("txnindex %d left below the first segment %d", base, start)
		}
	}
	if got := l.CollectAbortedTxns(l.StartOffset(), l.EndOffset()); len(got) == 0 || got[0].LastOffset < start {
		t.Fatalf("after retention: got %+v, want the entries from segment %d", got, start)
	}

	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if got := txnIndexFiles(t, dir); len(got) != 0 {
		t.Fatalf("after TruncateFullyAndStartAt: got txnindex files %v, want none", got)
	}
	if got := l.CollectAbortedTxns(1000, 2000); got != nil {
		t.Fatalf("after TruncateFullyAndStartAt: got %+v, want none", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCleanTransactions compacts a log holding transactions, as Kafka's
// cleaner does: an aborted transaction's records are removed and
// supersede nothing, a committed transaction's are compacted as any
// other (superseding and superseded), the markers and the index entry
// survive the swap, and CleanBelow leaves the segments ending above its
// bound alone.
func TestCleanTransactions(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, compactConfig())
	kv := func(k, v string) []KV { return []KV{{Key: []byte(k), Value: []byte(v)}} }
	ts := time.UnixMilli(baseTime.UnixMilli())
	commitAt := func(id int64) int64 {
		return mustAppend(t, l, BuildMarker(id, 0, 1, true, ts)).BaseOffset
	}
	mustAppend(t, l, BuildBatch(kv("k", "committed"), ts))                                                // 0
	aborted := mustAppend(t, l, buildBatchAs(kv("k", "aborted"), ts, attrTransactional, 7, 0)).BaseOffset // 1
	a := abortAt(t, l, 7, aborted)                                                                        // 2
	mustAppend(t, l, buildBatchAs(kv("k2", "txn"), ts, attrTransactional, 8, 0))                          // 3
	commitAt(8)                                                                                           // 4
	mustAppend(t, l, BuildBatch(kv("k2", "plain"), ts))                                                   // 5
	mustAppend(t, l, BuildBatch(kv("k3", "old"), ts))                                                     // 6
	mustAppend(t, l, buildBatchAs(kv("k3", "new"), ts, attrTransactional, 9, 0))                          // 7
	commitAt(9)                                                                                           // 8
	for i := range 20 {
		mustAppend(t, l, BuildBatch([]KV{{Key: []byte("other"), Value: []byte{byte(i)}}}, ts))
	}
	if len(segmentFiles(t, dir)) < 3 {
		t.Fatalf("got segments %v, want several", segmentFiles(t, dir))
	}
	// Bounded at the aborted record: only what ends at or below it.
	res, err := l.CleanBelow(eagerClean(), baseTime, aborted)
	if err != nil {
		t.Fatal(err)
	}
	if res.CleanedTo > aborted {
		t.Fatalf("CleanBelow(%d): cleaned to %d", aborted, res.CleanedTo)
	}
	mustClean(t, l, eagerClean(), baseTime)
	values := map[int64]string{}
	all, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	err = EachRecord(all, func(offset int64, key, value []byte) error {
		if string(key) != "other" {
			values[offset] = string(key) + "=" + string(value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{0: "k=committed", 5: "k2=plain", 7: "k3=new"}
	if !reflect.DeepEqual(values, want) {
		t.Fatalf("after cleaning: got %v, want %v", values, want)
	}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, []AbortedTxn{a}) {
		t.Fatalf("index after cleaning: got %+v, want %+v", got, a)
	}
	for _, at := range []int64{a.LastOffset, 4, 8} {
		data, err := l.Read(at, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := ReadMarker(data[:batchSizeAt(data)]); err != nil || parseBatchHeader(data).baseOffset != at {
			t.Fatalf("marker at %d after cleaning: got %+v, %v", at, m, err)
		}
	}
}

// batchSizeAt is the size of the batch data starts with.
func batchSizeAt(data []byte) int { return int(parseBatchHeader(data).size) }
