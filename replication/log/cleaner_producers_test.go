package log_test

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/replication"
	"github.com/tripodmq/tripod/replication/log"
)

// TestCleanedLogLoadsProducerState checks that the idempotent producers'
// state loads from a cleaned log: producer 7's batches are all superseded
// by later records, yet its last sequence survives in the empty batch the
// cleaner keeps, so a gap after it is still refused.
func TestCleanedLogLoadsProducerState(t *testing.T) {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 100
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ts := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	appendBatch := func(b []byte) {
		t.Helper()
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	appendBatch(log.BuildKeyedBatchForTest(t, 7, 0, ts, "a=1", "b=1"))
	appendBatch(log.BuildKeyedBatchForTest(t, 7, 2, ts, "a=2", "b=2", "c=2"))
	for range 40 {
		appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts, "a=3", "b=3", "c=3"))
	}
	cleanCfg := log.DefaultCleanConfig()
	cleanCfg.MinCleanableDirtyRatio = 0
	res, err := l.Clean(cleanCfg, time.UnixMilli(ts).Add(time.Hour))
	if err != nil || res.RecordsRemoved == 0 {
		t.Fatalf("Clean: got %+v, %v, want records removed", res, err)
	}

	p := replication.NewProducers()
	if err := l.LoadProducers(p); err != nil {
		t.Fatalf("Load over the cleaned log: %v", err)
	}
	next := replication.BatchMeta{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 5, LastSequence: 5}
	if dup, err := p.Check([]replication.BatchMeta{next}); err != nil || dup != nil {
		t.Fatalf("Check of producer 7's next sequence: got %v, %v, want accepted", dup, err)
	}
	gap := replication.BatchMeta{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 9, LastSequence: 9}
	if _, err := p.Check([]replication.BatchMeta{gap}); !errors.Is(err, replication.ErrOutOfOrderSequence) {
		t.Fatalf("Check of a sequence gap after producer 7's last batch: got %v, want %v", err, replication.ErrOutOfOrderSequence)
	}
}

// TestCleanedTxnLogReadCommitted runs many small transactions over a few
// compacted keys, some aborted (as Kafka Streams' exactly-once commits to
// __consumer_offsets), cleans the log past delete.retention.ms and checks
// that the cleaned log says what a read_committed reader must see: the
// markers went (not all: those of transactions with a batch left stay),
// the producer state loaded from the log (whole, or from a snapshot taken
// before cleaning) has no transaction left open and its last stable
// offset is the log end, and a read_committed read of the log with the
// aborted transactions CollectAbortedTxns gives sees no aborted record
// and each key's latest committed value.
func TestCleanedTxnLogReadCommitted(t *testing.T) {
	cfg := log.DefaultConfig()
	cfg.IndexIntervalBytes = 100
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ts := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	appendBatch := func(b []byte) int64 {
		t.Helper()
		res, err := l.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	latest := map[string]string{} // each key's latest committed value
	abortedValues := map[string]bool{}
	for i := range 60 {
		id := int64(100 + i%3)
		key, value := fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i)
		first := appendBatch(log.BuildTxnBatchForTest(id, ts, key+"="+value))
		if i%4 == 3 {
			at := appendBatch(log.BuildMarker(id, 0, 1, false, ts))
			if err := l.AppendAbortedTxn(log.AbortedTxn{ProducerID: id, FirstOffset: first, LastOffset: at, LastStableOffset: at + 1}); err != nil {
				t.Fatal(err)
			}
			abortedValues[value] = true
		} else {
			appendBatch(log.BuildMarker(id, 0, 1, true, ts))
			latest[key] = value
		}
		if i%7 == 6 {
			log.RollForTest(t, l)
		}
	}
	log.RollForTest(t, l)
	appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts.UnixMilli(), "filler=1"))
	before := replication.NewProducers()
	if err := l.LoadProducers(before); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SnapshotProducers(before); err != nil {
		t.Fatal(err)
	}

	clean := log.DefaultCleanConfig()
	clean.MinCleanableDirtyRatio = 0
	clean.DeleteRetention = time.Hour
	if res, err := l.CleanBelow(clean, ts, l.EndOffset()); err != nil || res.MarkersRemoved != 0 {
		t.Fatalf("pass within delete.retention.ms: %+v, %v; want no marker removed", res, err)
	}
	log.RollForTest(t, l)
	appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts.UnixMilli(), "filler=2"))
	res, err := l.CleanBelow(clean, ts.Add(2*time.Hour), l.EndOffset())
	if err != nil || res.MarkersRemoved == 0 {
		t.Fatalf("pass past delete.retention.ms: %+v, %v; want markers removed", res, err)
	}

	for _, load := range []struct {
		name string
		fn   func(p *replication.Producers) error
	}{
		{"LoadProducers", func(p *replication.Producers) error { return l.LoadProducers(p) }},
		{"RecoverProducers", func(p *replication.Producers) error {
			load, err := l.RecoverProducers(p)
			if err == nil && load.SnapshotOffset < 0 {
				t.Errorf("RecoverProducers used no snapshot: %+v", load)
			}
			return err
		}},
	} {
		p := replication.NewProducers()
		if err := load.fn(p); err != nil {
			t.Fatalf("%s over the cleaned log: %v", load.name, err)
		}
		end := l.EndOffset()
		p.Txns().HighWatermark(end)
		if open, lso := p.Txns().Open(), p.Txns().LastStable(end); len(open) != 0 || lso != end {
			t.Fatalf("%s over the cleaned log: open transactions %+v, LSO %d; want none and %d", load.name, open, lso, end)
		}
	}

	// A read_committed read, as Kafka's consumer filters a fetch: an
	// aborted transaction of the list, from its first offset, hides its
	// producer's transactional batches until its ABORT marker.
	end := l.EndOffset()
	aborted := l.CollectAbortedTxns(l.StartOffset(), end)
	slices.SortFunc(aborted, func(a, b log.AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	var data []byte
	for next := l.StartOffset(); next < end; {
		chunk, err := l.Read(next, 1<<20)
		if err != nil || len(chunk) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", next, len(chunk), err)
		}
		if err := log.EachBatch(chunk, true, func(h log.BatchInfo) { next = h.LastOffset + 1 }); err != nil {
			t.Fatal(err)
		}
		data = append(data, chunk...)
	}
	hidden := map[int64]bool{} // offsets of records in aborted transactions
	skipping := map[int64]bool{}
	markers, abortMarkers := map[int64]int64{}, 0
	err = log.EachBatch(data, false, func(h log.BatchInfo) {
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset {
			skipping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		switch {
		case h.Attributes&0x20 != 0:
			markers[h.BaseOffset] = h.ProducerID
			if !h.Commit {
				abortMarkers++
				delete(skipping, h.ProducerID)
			}
		case h.Attributes&0x10 != 0 && skipping[h.ProducerID]:
			for o := h.BaseOffset; o <= h.LastOffset; o++ {
				hidden[o] = true
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(aborted) != 0 || len(skipping) != 0 {
		t.Fatalf("aborted transactions %+v not reached, producers %v never ended", aborted, skipping)
	}
	for _, a := range l.CollectAbortedTxns(l.StartOffset(), end) {
		if id, ok := markers[a.LastOffset]; !ok || id != a.ProducerID {
			t.Fatalf("index entry %+v without its marker", a)
		}
	}
	if n := len(l.CollectAbortedTxns(l.StartOffset(), end)); n != abortMarkers {
		t.Fatalf("%d index entries for %d ABORT markers", n, abortMarkers)
	}
	seen := map[string]string{}
	err = log.EachRecord(data, func(offset int64, key, value []byte) error {
		if hidden[offset] {
			return nil
		}
		if abortedValues[string(value)] {
			return fmt.Errorf("aborted record %s=%s at %d visible to read_committed", key, value, offset)
		}
		seen[string(key)] = string(value)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(seen, "filler")
	if !reflect.DeepEqual(seen, latest) {
		t.Fatalf("read_committed latest values: got %v, want %v", seen, latest)
	}
}

// TestCleanKeepsMarkersAboveProducerSnapshot keeps, past
// delete.retention.ms, the marker of a transaction that a producer
// snapshot holds open: recovery restores the snapshot and replays the log
// above it, so without the marker the producer's next transaction, still
// open, would be taken for the same one, and the LSO held at the first
// one's start. Once that snapshot is gone the marker goes.
func TestCleanKeepsMarkersAboveProducerSnapshot(t *testing.T) {
	l, err := log.Open(t.TempDir(), log.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ts := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	appendBatch := func(b []byte) int64 {
		t.Helper()
		res, err := l.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	appendBatch(log.BuildTxnBatchForTest(200, ts, "s=1"))
	appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts.UnixMilli(), "u=1"))
	log.RollForTest(t, l)
	p := replication.NewProducers()
	if err := l.LoadProducers(p); err != nil {
		t.Fatal(err)
	}
	snapshot, err := l.SnapshotProducers(p) // producer 200's transaction open
	if err != nil {
		t.Fatal(err)
	}
	appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts.UnixMilli(), "s=2"))
	commit := appendBatch(log.BuildMarker(200, 0, 1, true, ts))
	appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts.UnixMilli(), "filler=1"))
	log.RollForTest(t, l)
	next := appendBatch(log.BuildTxnBatchForTest(200, ts, "t=1")) // open
	wantOpen := []replication.CompletedTxn{{ProducerID: 200, FirstOffset: next, LastOffset: -1}}

	clean := log.DefaultCleanConfig()
	clean.MinCleanableDirtyRatio = 0
	clean.DeleteRetention = time.Hour
	res, err := l.CleanBelow(clean, ts.Add(2*time.Hour), next)
	if err != nil || res.RecordsRemoved == 0 || res.MarkersRemoved != 0 {
		t.Fatalf("pass past delete.retention.ms: %+v, %v; want records removed, no marker", res, err)
	}
	recovered := replication.NewProducers()
	load, err := l.RecoverProducers(recovered)
	if err != nil || load.SnapshotOffset != snapshot {
		t.Fatalf("RecoverProducers: %+v, %v; want the snapshot at %d restored", load, err, snapshot)
	}
	if open := recovered.Txns().Open(); !reflect.DeepEqual(open, wantOpen) {
		t.Fatalf("open transactions after recovery from the snapshot at %d: %+v, want %+v", snapshot, open, wantOpen)
	}

	if err := l.DeleteProducerSnapshot(snapshot); err != nil {
		t.Fatal(err)
	}
	appendBatch(log.BuildMarker(200, 0, 1, true, ts))
	log.RollForTest(t, l)
	appendBatch(log.BuildKeyedBatchForTest(t, 0, 0, ts.UnixMilli(), "filler=2"))
	res, err = l.CleanBelow(clean, ts.Add(2*time.Hour), l.EndOffset())
	if err != nil || res.MarkersRemoved != 1 {
		t.Fatalf("pass without the snapshot: %+v, %v; want the marker at %d removed", res, err, commit)
	}
	reloaded := replication.NewProducers()
	if err := l.LoadProducers(reloaded); err != nil {
		t.Fatal(err)
	}
	if open := reloaded.Txns().Open(); len(open) != 0 {
		t.Fatalf("open transactions after the marker went: %+v, want none", open)
	}
}
