package replication

import (
	"reflect"
	"testing"

	"github.com/tripodmq/tripod/replication/log"
)

// TestTxnsLastStableOffset follows two interleaved transactions on one
// partition, as Kafka's ProducerStateManagerTest does: the LSO stops at
// the first open transaction's first record, stays there until the
// marker that ends it is below the high watermark, and is the high
// watermark once every transaction is decided.
func TestTxnsLastStableOffset(t *testing.T) {
	x := NewTxns()
	if got := x.LastStable(10); got != 10 {
		t.Fatalf("no transaction: LSO %d, want the HW 10", got)
	}
	x.Data(1, 10) // producer 1 opens at 10
	x.Data(2, 12) // producer 2 opens at 12
	x.Data(1, 13) // producer 1 writes again: its transaction still begins at 10
	if got := x.LastStable(20); got != 10 {
		t.Fatalf("two open transactions: LSO %d, want 10", got)
	}
	if got := x.LastStable(5); got != 5 {
		t.Fatalf("HW below every transaction: LSO %d, want the HW 5", got)
	}
	done, aborted := x.Marker(1, 14, true)
	if aborted != nil || done != (CompletedTxn{ProducerID: 1, FirstOffset: 10, LastOffset: 14}) {
		t.Fatalf("commit of producer 1: got %+v %+v", done, aborted)
	}
	// The marker at 14 is not replicated while the HW is at or below it.
	x.HighWatermark(14)
	if got := x.LastStable(14); got != 10 {
		t.Fatalf("commit marker at the HW: LSO %d, want 10", got)
	}
	x.HighWatermark(15)
	if got := x.LastStable(15); got != 12 {
		t.Fatalf("commit marker replicated: LSO %d, want producer 2's first offset 12", got)
	}
	done, aborted = x.Marker(2, 15, false)
	want := log.AbortedTxn{ProducerID: 2, FirstOffset: 12, LastOffset: 15, LastStableOffset: 16}
	if aborted == nil || *aborted != want || !done.Aborted {
		t.Fatalf("abort of producer 2: got %+v %+v, want index entry %+v", done, aborted, want)
	}
	x.HighWatermark(16)
	if got := x.LastStable(20); got != 20 {
		t.Fatalf("everything decided: LSO %d, want the HW 20", got)
	}
	if open := x.Open(); len(open) != 0 {
		t.Errorf("open transactions after both markers: %+v", open)
	}
}

// TestTxnsAbortIndexLastStableOffset: an aborted transaction's index
// entry carries the first offset of the earliest transaction still open
// when its marker was written, or the offset after its marker.
func TestTxnsAbortIndexLastStableOffset(t *testing.T) {
	x := NewTxns()
	x.Data(7, 100)
	x.Data(8, 101)
	_, aborted := x.Marker(8, 102, false)
	if aborted == nil || aborted.LastStableOffset != 100 {
		t.Fatalf("abort with producer 7 open from 100: got %+v, want LastStableOffset 100", aborted)
	}
	_, aborted = x.Marker(9, 103, false)
	if aborted == nil || aborted.FirstOffset != 103 || aborted.LastStableOffset != 100 {
		t.Fatalf("abort of a transaction without data here: got %+v, want first offset 103 and LastStableOffset 100", aborted)
	}
	x.Marker(7, 104, true)
	_, aborted = x.Marker(10, 105, false)
	if aborted == nil || aborted.LastStableOffset != 106 {
		t.Fatalf("abort with nothing open: got %+v, want LastStableOffset 106", aborted)
	}
}

// TestTxnsOpenAndTruncate: Open lists the open transactions by first
// offset; a truncation forgets those that began above the cut, and asks
// for a rebuild when it removes a marker.
func TestTxnsOpenAndTruncate(t *testing.T) {
	x := NewTxns()
	x.Data(5, 30)
	x.Data(3, 20)
	x.Data(4, 40)
	want := []CompletedTxn{{ProducerID: 3, FirstOffset: 20, LastOffset: -1}, {ProducerID: 5, FirstOffset: 30, LastOffset: -1}, {ProducerID: 4, FirstOffset: 40, LastOffset: -1}}
	if got := x.Open(); !reflect.DeepEqual(got, want) {
		t.Fatalf("open: got %+v, want %+v", got, want)
	}
	if x.TruncateTo(35) {
		t.Fatal("a cut above every marker asked for a rebuild")
	}
	if got := x.Open(); len(got) != 2 || got[1].ProducerID != 5 {
		t.Fatalf("open after the cut at 35: got %+v, want producers 3 and 5", got)
	}
	x.Marker(3, 36, true)
	x.HighWatermark(40)
	if x.TruncateTo(37) {
		t.Fatal("a cut above the marker at 36 asked for a rebuild")
	}
	if !x.TruncateTo(36) {
		t.Fatal("a cut removing the marker at 36 did not ask for a rebuild")
	}
	x.Reset()
	if _, ok := x.FirstUnstable(); ok || x.TruncateTo(0) {
		t.Fatal("state left after Reset")
	}
}
