package log_test

import (
	"errors"
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
