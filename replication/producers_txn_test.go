package replication

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/replication/log"
)

// txnBatch is producerBatch with the transactional attribute: a batch of
// a transactional producer.
func txnBatch(tb testing.TB, s spec, ts int64) []byte {
	tb.Helper()
	raw := producerBatch(tb, s, 8, ts)
	binary.BigEndian.PutUint16(raw[batchFieldAttributes:], attrTransactional)
	binary.BigEndian.PutUint32(raw[batchFieldCRC:], crc32.Checksum(raw[batchFieldAttributes:], crcTable))
	return raw
}

// leaderAppend checks, appends and records records as the broker's leader
// does, adding the aborted-transaction index entries to the log, and
// returns the offset of the first record.
func leaderAppend(t *testing.T, p *Producers, l *log.Log, records []byte) int64 {
	t.Helper()
	metas, err := ParseBatchMeta(records)
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := p.Check(metas); dup != nil || err != nil {
		t.Fatalf("got (%v, %v), want the batches accepted", dup, err)
	}
	res, err := l.Append(records, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Appended(metas, res.BaseOffset) {
		if err := l.AppendAbortedTxn(a); err != nil {
			t.Fatal(err)
		}
	}
	return res.BaseOffset
}

// marker is the control batch of producer id's transaction at epoch.
func marker(id int64, epoch int16, commit bool) []byte {
	return log.BuildMarker(id, epoch, 3, commit, time.UnixMilli(5000))
}

// txnScenario writes, on l: plain records (0), producer 1's transaction
// (1..2 and 4), producer 2's (3), producer 1's abort (5), producer 2's
// commit (6), and producer 3's open transaction (7..8).
func txnScenario(t *testing.T, p *Producers, l *log.Log) {
	t.Helper()
	leaderAppend(t, p, l, producerBatch(t, spec{NoProducerID, NoProducerEpoch, NoSequence, 1}, 8, 1000))
	leaderAppend(t, p, l, txnBatch(t, spec{1, 0, 0, 2}, 1001))
	leaderAppend(t, p, l, txnBatch(t, spec{2, 0, 0, 1}, 1002))
	leaderAppend(t, p, l, txnBatch(t, spec{1, 0, 2, 1}, 1003))
	leaderAppend(t, p, l, marker(1, 0, false))
	leaderAppend(t, p, l, marker(2, 0, true))
	leaderAppend(t, p, l, txnBatch(t, spec{3, 0, 0, 2}, 1004))
}

// TestProducersTxnMarkers follows transactions through the producer
// state as the leader writes them: the LSO stops at the first open
// transaction until its marker is below the high watermark, the abort
// marker's entry reaches the log's index (CollectAbortedTxns), the open
// transaction shows in Active, a non-transactional batch of a producer
// in a transaction is ErrInvalidTxnState, and a marker of an older epoch
// or of an older coordinator epoch is fenced while a newer one moves the
// producer to its epoch.
func TestProducersTxnMarkers(t *testing.T) {
	l := openTestLog(t)
	p := NewProducers()
	txnScenario(t, p, l)
	x := p.Txns()
	for _, tc := range []struct{ hw, lso int64 }{{1, 1}, {5, 1}, {6, 3}, {7, 7}, {9, 7}} {
		u := x.Unstable()
		x.HighWatermark(tc.hw)
		if got := x.LastStable(tc.hw); got != tc.lso {
			t.Fatalf("HW %d: LSO %d, want %d", tc.hw, got, tc.lso)
		}
		if got := u.LastStable(tc.hw); got != tc.lso {
			t.Fatalf("HW %d: published LSO %d, want %d", tc.hw, got, tc.lso)
		}
	}
	want := []log.AbortedTxn{{ProducerID: 1, FirstOffset: 1, LastOffset: 5, LastStableOffset: 3}}
	if got := l.CollectAbortedTxns(0, 9); !reflect.DeepEqual(got, want) {
		t.Fatalf("CollectAbortedTxns(0, 9): got %+v, want %+v", got, want)
	}
	if got := l.CollectAbortedTxns(6, 9); got != nil {
		t.Fatalf("CollectAbortedTxns(6, 9): got %+v, want none", got)
	}
	if got := l.CollectAbortedTxns(0, 1); got != nil {
		t.Fatalf("CollectAbortedTxns(0, 1): got %+v, want none (the transaction begins at 1)", got)
	}
	var open []int64
	for _, st := range p.Active() {
		open = append(open, st.CurrentTxnStartOffset)
	}
	if !slices.Equal(open, []int64{-1, -1, 7}) {
		t.Fatalf("CurrentTxnStartOffset of producers 1, 2, 3: got %v, want [-1 -1 7]", open)
	}

	// Producer 3 may not write outside its open transaction.
	plain, err := ParseBatchMeta(producerBatch(t, spec{3, 0, 2, 1}, 8, 1004))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(plain); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch during producer 3's transaction: got %v, want ErrInvalidTxnState", err)
	}

	// Producer 3's coordinator bumped it to epoch 2 and aborts with it:
	// a marker of epoch 1 after that is fenced.
	leaderAppend(t, p, l, marker(3, 2, false))
	metas, err := ParseBatchMeta(marker(3, 1, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(metas); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("marker of an older epoch: got %v, want ErrProducerFenced", err)
	}
	// Its last marker came from coordinator epoch 3: one of epoch 2 is
	// from a coordinator since replaced.
	metas, err = ParseBatchMeta(log.BuildMarker(3, 2, 2, false, time.UnixMilli(5000)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(metas); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: got %v, want ErrCoordinatorFenced", err)
	}
	if st := p.Active()[2]; st.ProducerEpoch != 2 || st.CurrentTxnStartOffset != -1 || st.LastSequence != NoSequence || st.CoordinatorEpoch != 3 {
		t.Fatalf("producer 3 after its abort at epoch 2: got %+v, want epoch 2, no transaction, no sequence, coordinator epoch 3", st)
	}
	// Epoch 2 starts at sequence 0.
	leaderAppend(t, p, l, txnBatch(t, spec{3, 2, 0, 1}, 1005))
	want = append(want, log.AbortedTxn{ProducerID: 3, FirstOffset: 7, LastOffset: 9, LastStableOffset: 10})
	if got := l.CollectAbortedTxns(0, 11); !reflect.DeepEqual(got, want) {
		t.Fatalf("CollectAbortedTxns(0, 11): got %+v, want %+v", got, want)
	}
}

// TestProducersTxnRecover rebuilds the transactions from the log after a
// crash that lost the aborted-transaction index, from a snapshot taken
// while a transaction was open (version 2 keeps its first offset): the
// open transactions, the LSO and the index come back as they were.
func TestProducersTxnRecover(t *testing.T) {
	dir := t.TempDir()
	cfg := log.DefaultConfig()
	l, err := log.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProducers()
	leaderAppend(t, p, l, txnBatch(t, spec{1, 0, 0, 2}, 1001))
	if _, err := l.SnapshotProducers(p); err != nil { // producer 1 open at 0
		t.Fatal(err)
	}
	leaderAppend(t, p, l, txnBatch(t, spec{2, 0, 0, 1}, 1002))
	leaderAppend(t, p, l, marker(1, 0, false))
	leaderAppend(t, p, l, txnBatch(t, spec{1, 0, 2, 1}, 1003))
	wantIndex := l.CollectAbortedTxns(0, 100)
	wantOpen := p.Txns().Open()
	if len(wantIndex) != 1 || len(wantOpen) != 2 {
		t.Fatalf("before the crash: index %+v, open %+v, want one entry and two open", wantIndex, wantOpen)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The crash: no clean-shutdown marker, and the index entry never
	// reached the disk.
	txnIndexes, _ := filepath.Glob(filepath.Join(dir, "*.txnindex"))
	if len(txnIndexes) != 1 {
		t.Fatalf("got transaction indexes %v, want one", txnIndexes)
	}
	for _, f := range append(txnIndexes, filepath.Join(dir, "clean-shutdown")) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	l, err = log.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.CollectAbortedTxns(0, 100); got != nil {
		t.Fatalf("index after the crash: got %+v, want none before the recovery", got)
	}
	recovered := NewProducers()
	load, err := l.RecoverProducers(recovered)
	if err != nil {
		t.Fatal(err)
	}
	if load.SnapshotOffset != 2 {
		t.Fatalf("recovered from snapshot %d, want the one at 2", load.SnapshotOffset)
	}
	if got := recovered.Txns().Open(); !reflect.DeepEqual(got, wantOpen) {
		t.Fatalf("open transactions: got %+v, want %+v", got, wantOpen)
	}
	if got := l.CollectAbortedTxns(0, 100); !reflect.DeepEqual(got, wantIndex) {
		t.Fatalf("index after the recovery: got %+v, want %+v", got, wantIndex)
	}
	// A second recovery finds the entry present and adds nothing.
	if _, err := l.RecoverProducers(NewProducers()); err != nil {
		t.Fatal(err)
	}
	if got := l.CollectAbortedTxns(0, 100); !reflect.DeepEqual(got, wantIndex) {
		t.Fatalf("index after a second recovery: got %+v, want %+v", got, wantIndex)
	}
}

// TestProducersTxnTruncate cuts the log below an abort marker: the
// producer state asks for a reload, which opens the transaction again,
// and the log's index loses the entry.
func TestProducersTxnTruncate(t *testing.T) {
	l := openTestLog(t)
	p := NewProducers()
	txnScenario(t, p, l)
	if !p.TruncateTo(5) {
		t.Fatal("TruncateTo(5) below the abort marker at 5: got no reload, want one")
	}
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if _, err := l.RecoverProducers(p); err != nil {
		t.Fatal(err)
	}
	want := []CompletedTxn{{ProducerID: 1, FirstOffset: 1, LastOffset: -1}, {ProducerID: 2, FirstOffset: 3, LastOffset: -1}}
	if got := p.Txns().Open(); !reflect.DeepEqual(got, want) {
		t.Fatalf("open after the cut: got %+v, want %+v", got, want)
	}
	if got := l.CollectAbortedTxns(0, 100); got != nil {
		t.Fatalf("index after the cut: got %+v, want none", got)
	}
	if got := p.Txns().LastStable(5); got != 1 {
		t.Fatalf("LSO after the cut: got %d, want 1", got)
	}
	// A cut above every marker keeps the state.
	p2 := NewProducers()
	txnScenario(t, p2, openTestLog(t))
	if p2.TruncateTo(9) {
		t.Fatal("TruncateTo(9) above every marker: got a reload, want none")
	}
}

// snapshotV1 encodes p as tripod wrote producer snapshots before
// transactions (version 1).
func snapshotV1(t *testing.T, p *Producers, offset int64) []byte {
	t.Helper()
	b := make([]byte, 6)
	binary.BigEndian.PutUint16(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	ids := slices.Sorted(maps.Keys(p.entries))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := p.entries[id]
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(len(e.batches)))
		for _, batch := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(batch.BaseSequence))
			b = binary.BigEndian.AppendUint32(b, uint32(batch.LastSequence))
			b = binary.BigEndian.AppendUint64(b, uint64(batch.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(batch.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(batch.MaxTimestamp))
			b = append(b, 0)
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRC))
	return b
}

// TestProducersSnapshotVersions restores a version 1 snapshot (written
// before transactions) to the state it describes, with each producer's
// last timestamp from its last batch and no marker, and round-trips a
// version 2 one with open transactions, a producer a marker left without
// batches and the latest marker's offset, which decides whether a cut
// reloads.
func TestProducersSnapshotVersions(t *testing.T) {
	old := NewProducers()
	appendSpecs(t, old, spec{7, 0, 0, 2}, spec{7, 0, 2, 2}, spec{8, 1, 0, 1})
	restored := NewProducers()
	if err := restored.RestoreSnapshot(snapshotV1(t, old, 1000), 1000); err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if got, want := snapshot(restored), snapshot(old); !reflect.DeepEqual(got, want) {
		t.Fatalf("version 1: got %v, want %v", got, want)
	}
	if got, want := restored.Active(), old.Active(); !slices.Equal(got, want) {
		t.Fatalf("version 1 Active: got %+v, want %+v", got, want)
	}
	if restored.TruncateTo(999) {
		t.Fatal("version 1 state cut above its batches: got a reload, want none (no marker before transactions)")
	}

	l := openTestLog(t)
	p := NewProducers()
	txnScenario(t, p, l)
	lastMarker := leaderAppend(t, p, l, marker(4, 5, true)) // producer 4: a marker only
	leaderAppend(t, p, l, producerBatch(t, spec{NoProducerID, NoProducerEpoch, NoSequence, 1}, 8, 1006))
	data := p.Snapshot(l.EndOffset())
	if v := binary.BigEndian.Uint16(data); v != 2 {
		t.Fatalf("Snapshot writes version %d, want 2", v)
	}
	restored = NewProducers()
	if err := restored.RestoreSnapshot(data, l.EndOffset()); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	if got, want := restored.Active(), p.Active(); !slices.Equal(got, want) {
		t.Fatalf("version 2 Active: got %+v, want %+v", got, want)
	}
	if got, want := restored.Txns().Open(), p.Txns().Open(); !reflect.DeepEqual(got, want) {
		t.Fatalf("version 2 open transactions: got %+v, want %+v", got, want)
	}
	if again := restored.Snapshot(l.EndOffset()); !slices.Equal(again, data) {
		t.Fatalf("version 2 encoded again: got %x, want %x", again, data)
	}
	// The snapshot keeps the latest marker: a cut above it keeps the
	// state, a cut at it reloads.
	if restored.TruncateTo(lastMarker + 1) {
		t.Fatal("restored state cut above its latest marker: got a reload, want none")
	}
	if !restored.TruncateTo(lastMarker) {
		t.Fatal("restored state cut at its latest marker: got no reload, want one")
	}
}

// TestProducersTxnIndexCorrupt opens a log whose aborted-transaction
// index is corrupt: the log deletes it and the producer snapshots, so
// that the recovery reads the whole log and writes the entry again.
func TestProducersTxnIndexCorrupt(t *testing.T) {
	dir := t.TempDir()
	cfg := log.DefaultConfig()
	l, err := log.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProducers()
	txnScenario(t, p, l)
	if _, err := l.SnapshotProducers(p); err != nil {
		t.Fatal(err)
	}
	want := l.CollectAbortedTxns(0, l.EndOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "00000000000000000000.txnindex")
	if err := os.WriteFile(index, bytes.Repeat([]byte{0xff}, 34), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = log.Open(dir, cfg)
	if err != nil {
		t.Fatalf("open with a corrupt transaction index: %v", err)
	}
	defer l.Close()
	if got := snapshotFiles(t, l); len(got) != 0 {
		t.Fatalf("producer snapshots after a corrupt transaction index: got %v, want none", got)
	}
	recovered := NewProducers()
	if _, err := l.RecoverProducers(recovered); err != nil {
		t.Fatal(err)
	}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("index after the recovery: got %+v, want %+v", got, want)
	}
	if got, want := recovered.Txns().Open(), p.Txns().Open(); !reflect.DeepEqual(got, want) {
		t.Fatalf("open transactions: got %+v, want %+v", got, want)
	}
}

// TestProducersTxnAfterClean compacts a log holding transactions below
// its last stable offset: the producer state a load of the cleaned log
// gives has the same open transaction, and the index the same entries.
func TestProducersTxnAfterClean(t *testing.T) {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 300
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := NewProducers()
	txnScenario(t, p, l)
	for i := range 10 {
		leaderAppend(t, p, l, producerBatch(t, spec{NoProducerID, NoProducerEpoch, NoSequence, 1}, 8, int64(2000+i)))
	}
	p.Txns().HighWatermark(l.EndOffset())
	lso := p.Txns().LastStable(l.EndOffset())
	if lso != 7 {
		t.Fatalf("LSO %d, want producer 3's open transaction at 7", lso)
	}
	clean := log.DefaultCleanConfig()
	clean.MinCleanableDirtyRatio = 0
	res, err := l.CleanBelow(clean, time.UnixMilli(3000), lso)
	if err != nil {
		t.Fatal(err)
	}
	if res.SegmentsRewritten == 0 || res.CleanedTo > lso {
		t.Fatalf("CleanBelow(%d): %+v, want segments rewritten below it", lso, res)
	}
	reloaded := NewProducers()
	if err := l.LoadProducers(reloaded); err != nil {
		t.Fatal(err)
	}
	if got, want := reloaded.Txns().Open(), p.Txns().Open(); !reflect.DeepEqual(got, want) {
		t.Fatalf("open transactions after cleaning: got %+v, want %+v", got, want)
	}
	want := []log.AbortedTxn{{ProducerID: 1, FirstOffset: 1, LastOffset: 5, LastStableOffset: 3}}
	if got := l.CollectAbortedTxns(0, l.EndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("index after cleaning: got %+v, want %+v", got, want)
	}
}

// TestProducersTxnExpireAndRetention keeps a producer whose transaction
// is open through expiry and through retention of its batches, as Kafka
// keeps it, and forgets it once its marker is written.
func TestProducersTxnExpireAndRetention(t *testing.T) {
	l := openTestLog(t)
	p := NewProducers()
	txnScenario(t, p, l) // producer 3 open at 7, its batch at 1004 ms
	if n := p.Expire(1_000_000); n != 2 || !p.Knows(3) {
		t.Fatalf("Expire: forgot %d, knows producer 3: %v; want producers 1 and 2 forgotten, 3 kept", n, p.Knows(3))
	}
	p.ForgetBelow(9)
	if !p.Knows(3) {
		t.Fatal("ForgetBelow past its batches forgot producer 3, whose transaction is open")
	}
	p.Txns().HighWatermark(100)
	if got := p.Txns().LastStable(100); got != 7 {
		t.Fatalf("LSO after expiry and retention: got %d, want 7", got)
	}
	leaderAppend(t, p, l, marker(3, 0, true))
	if n := p.Expire(1_000_000); n != 1 || p.Knows(3) {
		t.Fatalf("Expire after producer 3's commit: forgot %d, knows it: %v; want it forgotten", n, p.Knows(3))
	}
}

// TestProducersTxnReusedSequence: a retry of a transactional batch while
// its transaction is open is a duplicate, answered with the offsets it
// was written at; the same sequences once a marker ended that
// transaction are a reuse (the producer gave the batch up), refused with
// ErrOutOfOrderSequence rather than acknowledged as written.
func TestProducersTxnReusedSequence(t *testing.T) {
	l := openTestLog(t)
	p := NewProducers()
	first := leaderAppend(t, p, l, txnBatch(t, spec{5, 0, 0, 1}, 1000))
	retry, err := ParseBatchMeta(txnBatch(t, spec{5, 0, 0, 1}, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := p.Check(retry); err != nil || dup == nil || dup.FirstOffset != first {
		t.Fatalf("retry in the open transaction: got (%+v, %v), want the duplicate at %d", dup, err, first)
	}
	leaderAppend(t, p, l, marker(5, 0, false))
	if dup, err := p.Check(retry); !errors.Is(err, ErrOutOfOrderSequence) || dup != nil {
		t.Fatalf("the sequences after the abort: got (%+v, %v), want ErrOutOfOrderSequence", dup, err)
	}
	// The next transaction opens at the next sequence, and a retry of
	// its batch is a duplicate again.
	next := leaderAppend(t, p, l, txnBatch(t, spec{5, 0, 1, 1}, 1001))
	again, err := ParseBatchMeta(txnBatch(t, spec{5, 0, 1, 1}, 1001))
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := p.Check(again); err != nil || dup == nil || dup.FirstOffset != next {
		t.Fatalf("retry in the next transaction: got (%+v, %v), want the duplicate at %d", dup, err, next)
	}
	// The first transaction's sequences are still refused while the
	// next one is open: its batch is older than the open transaction.
	if _, err := p.Check(retry); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("the first transaction's sequences in the next one: got %v, want ErrOutOfOrderSequence", err)
	}
}
