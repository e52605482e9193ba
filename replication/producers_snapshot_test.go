package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/replication/log"
)

// snapshotTestLog opens a log in a fresh directory with 64 KiB segments,
// so a few batches roll a segment, and returns it with its directory.
func snapshotTestLog(t *testing.T) (*log.Log, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	l, err := log.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// history writes batches first..last-1 of a fixed run of three
// idempotent producers (producer 21 bumps its epoch at batch 17) and a
// plain one to l as the leader does, recording them in leader.
func history(t *testing.T, l *log.Log, leader *Producers, first, last int) {
	t.Helper()
	for i := first; i < last; i++ {
		id := int64(20 + i%4)
		n := int32(1 + i%3)
		s := spec{id, 0, 0, n}
		switch {
		case id == 23:
			s = spec{NoProducerID, NoProducerEpoch, NoSequence, n}
		case id == 21 && i >= 17:
			s.epoch = 1
		}
		if e := leader.entries[id]; e != nil && e.epoch == s.epoch {
			s.seq = incrementSequence(e.lastSequence(), 1)
		}
		records := producerBatch(t, s, 6<<10, int64(1000+i))
		appendAccepted(t, leader, l, records, fmt.Sprintf("batch %d %+v", i, s))
	}
}

// fullLoad is the state a Load of the whole of l gives.
func fullLoad(t *testing.T, l *log.Log) map[int64]producerEntry {
	t.Helper()
	p := NewProducers()
	if err := l.LoadProducers(p); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return snapshot(p)
}

// recoverState runs Recover on a fresh state and returns both.
func recoverState(t *testing.T, l *log.Log) (*Producers, log.ProducerLoad) {
	t.Helper()
	p := NewProducers()
	load, err := l.RecoverProducers(p)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return p, load
}

// snapshotFiles lists l's snapshot offsets.
func snapshotFiles(t *testing.T, l *log.Log) []int64 {
	t.Helper()
	offsets, err := l.ProducerSnapshots()
	if err != nil {
		t.Fatal(err)
	}
	return offsets
}

// TestProducersSnapshotRoundTrip encodes states (empty; several
// producers with five batches, an epoch bump, a transactional batch and
// a sequence wrapping past math.MaxInt32) and decodes them back equal,
// with equal bytes when encoded again.
func TestProducersSnapshotRoundTrip(t *testing.T) {
	full := NewProducers()
	appendSpecs(t, full, fiveAfterOne...)
	appendSpecs(t, full, spec{8, 0, 0, 3}, spec{8, 1, 0, 1}, spec{9, 2, math.MaxInt32 - 1, 4})
	full.entries[8].batches[0].Transactional = true
	for _, tc := range []struct {
		name  string
		state *Producers
	}{{"empty", NewProducers()}, {"producers", full}} {
		t.Run(tc.name, func(t *testing.T) {
			const offset = 1 << 40
			data := tc.state.Snapshot(offset)
			restored := NewProducers()
			appendSpecs(t, restored, spec{99, 0, 0, 1}) // RestoreSnapshot replaces it.
			if err := restored.RestoreSnapshot(data, offset); err != nil {
				t.Fatalf("RestoreSnapshot: got %v, want no error", err)
			}
			if got, want := snapshot(restored), snapshot(tc.state); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored: got %v, want %v", got, want)
			}
			if again := restored.Snapshot(offset); !slices.Equal(again, data) {
				t.Fatalf("encoded again: got %x, want %x", again, data)
			}
		})
	}
	if e := full.entries[9]; e.lastSequence() != 1 {
		t.Fatalf("producer 9: got last sequence %d, want 1 (wrapped)", e.lastSequence())
	}
}

// TestProducersSnapshotCorrupt damages a snapshot in every way
// RestoreSnapshot checks for: each is ErrCorruptSnapshot and leaves the
// state as it was.
func TestProducersSnapshotCorrupt(t *testing.T) {
	state := NewProducers()
	appendSpecs(t, state, spec{7, 0, 0, 2}, spec{7, 0, 2, 2}, spec{8, 0, 0, 1})
	const offset = 200
	good := state.Snapshot(offset)
	// resealed recomputes the CRC, so that the field checks behind it
	// are reached.
	resealed := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRC))
		return b
	}
	damage := map[string]func(b []byte) []byte{
		"empty":          func(b []byte) []byte { return nil },
		"cut header":     func(b []byte) []byte { return b[:10] },
		"cut body":       func(b []byte) []byte { return resealed(b[:len(b)-5]) },
		"flipped bit":    func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"version 3":      func(b []byte) []byte { b[1] = 3; return resealed(b) },
		"other offset":   func(b []byte) []byte { binary.BigEndian.PutUint64(b[6:], 201); return resealed(b) },
		"trailing bytes": func(b []byte) []byte { return resealed(append(b, 0)) },
		"huge count":     func(b []byte) []byte { binary.BigEndian.PutUint32(b[14:], 1<<30); return resealed(b) },
		"six batches":    func(b []byte) []byte { b[snapshotHeaderSize+snapshotProducerSize-1] = 6; return resealed(b) },
		"open transaction past the offset": func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[snapshotHeaderSize+18:], 200)
			return resealed(b)
		},
		"v1 without batches": func(b []byte) []byte {
			v1 := snapshotV1(t, state, offset)
			v1[snapshotHeaderSize+snapshotProducerV1-1] = 0
			return resealed(v1)
		},
		"descending ids": func(b []byte) []byte { binary.BigEndian.PutUint64(b[snapshotHeaderSize:], 9); return resealed(b) },
		// Producer 7's second batch ends at 103, not below 102.
		"batch past the offset": func(b []byte) []byte { return state.Snapshot(102) },
	}
	for name, damaged := range damage {
		t.Run(name, func(t *testing.T) {
			at := int64(offset)
			if name == "batch past the offset" {
				at = 102
			}
			restored := NewProducers()
			appendSpecs(t, restored, spec{99, 0, 0, 1})
			before := snapshot(restored)
			err := restored.RestoreSnapshot(damaged(slices.Clone(good)), at)
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("got %v, want ErrCorruptSnapshot", err)
			}
			if got := snapshot(restored); !reflect.DeepEqual(got, before) {
				t.Fatalf("state after the error: got %v, want %v unchanged", got, before)
			}
		})
	}
}

// TestProducersRecoverFromSnapshot writes a log across segments with a
// snapshot midway, and checks that Recover starts at the snapshot, reads
// only the tail and gives what Load gives, before and after truncations
// that drop the snapshots above the cut.
func TestProducersRecoverFromSnapshot(t *testing.T) {
	l, _ := snapshotTestLog(t)
	leader := NewProducers()
	history(t, l, leader, 0, 12)
	first, err := l.SnapshotProducers(leader)
	if err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	history(t, l, leader, 12, 24)
	second, err := l.SnapshotProducers(leader)
	if err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	history(t, l, leader, 24, 30)
	if got, want := snapshotFiles(t, l), []int64{first, second}; !slices.Equal(got, want) {
		t.Fatalf("snapshots: got %v, want %v", got, want)
	}

	steps := []struct {
		name string
		// cut is where the log is truncated first, -1 for not.
		cut int64
		// from is the snapshot Recover must start at, -1 for none.
		from int64
	}{
		{"whole log", -1, second},
		{"cut above both snapshots", second + 5, second},
		{"cut between the snapshots", first + 3, first},
		{"cut below both snapshots", first - 4, -1},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if step.cut >= 0 {
				if err := l.TruncateTo(step.cut); err != nil {
					t.Fatal(err)
				}
				for _, offset := range snapshotFiles(t, l) {
					if offset > l.EndOffset() {
						t.Fatalf("snapshot at %d kept above the log end %d", offset, l.EndOffset())
					}
				}
			}
			recovered, load := recoverState(t, l)
			if load.SnapshotOffset != step.from || (step.from >= 0 && load.From != step.from) || load.To != l.EndOffset() {
				t.Fatalf("load: got %+v, want snapshot %d, read from it to %d", load, step.from, l.EndOffset())
			}
			if len(load.Skipped) != 0 {
				t.Fatalf("skipped snapshots: got %v, want none", load.Skipped)
			}
			if got, want := snapshot(recovered), fullLoad(t, l); !reflect.DeepEqual(got, want) {
				t.Fatalf("Recover: got %v, want Load's %v", got, want)
			}
			if step.cut < 0 {
				if got, want := snapshot(recovered), snapshot(leader); !reflect.DeepEqual(got, want) {
					t.Fatalf("Recover: got %v, want the leader's %v", got, want)
				}
			}
		})
	}
}

// TestProducersRecoverSkipsCorruptSnapshot damages the newest snapshot:
// Recover deletes it, says so, and starts at the older one; with both
// damaged it reads the whole log. Either way the state is Load's.
func TestProducersRecoverSkipsCorruptSnapshot(t *testing.T) {
	l, dir := snapshotTestLog(t)
	leader := NewProducers()
	history(t, l, leader, 0, 10)
	first, err := l.SnapshotProducers(leader)
	if err != nil {
		t.Fatal(err)
	}
	history(t, l, leader, 10, 20)
	second, err := l.SnapshotProducers(leader)
	if err != nil {
		t.Fatal(err)
	}
	history(t, l, leader, 20, 25)
	corrupt := func(offset int64) {
		t.Helper()
		path := filepath.Join(dir, fmt.Sprintf("%020d.snapshot", offset))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0xff
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := fullLoad(t, l)

	corrupt(second)
	recovered, load := recoverState(t, l)
	if load.SnapshotOffset != first || len(load.Skipped) != 1 || !errors.Is(load.Skipped[0], ErrCorruptSnapshot) {
		t.Fatalf("load: got %+v, want snapshot %d after skipping the corrupt one at %d", load, first, second)
	}
	if got := snapshotFiles(t, l); !slices.Equal(got, []int64{first}) {
		t.Fatalf("snapshots: got %v, want [%d] (the corrupt one deleted)", got, first)
	}
	if got := snapshot(recovered); !reflect.DeepEqual(got, want) {
		t.Fatalf("Recover: got %v, want %v", got, want)
	}

	corrupt(first)
	recovered, load = recoverState(t, l)
	if load.SnapshotOffset != -1 || load.From != l.StartOffset() || len(load.Skipped) != 1 {
		t.Fatalf("load: got %+v, want the whole log read after skipping the snapshot at %d", load, first)
	}
	if got := snapshot(recovered); !reflect.DeepEqual(got, want) {
		t.Fatalf("Recover: got %v, want %v", got, want)
	}
}

// TestProducersLoadFromForgetsBelowStart restores a snapshot whose
// batches partly lie below the log start offset, as after retention:
// LoadFrom forgets them and the producers left with none, as Load would.
func TestProducersLoadFromForgetsBelowStart(t *testing.T) {
	l, _ := snapshotTestLog(t)
	history(t, l, NewProducers(), 0, 4)
	restart := l.EndOffset() + 100
	if err := l.TruncateFullyAndStartAt(restart); err != nil {
		t.Fatal(err)
	}
	p := NewProducers()
	p.Appended(metas(t, spec{5, 0, 0, 2}), restart-10) // Entirely below the start: forgotten.
	p.Appended(metas(t, spec{6, 0, 0, 1}), restart-1)
	p.Appended(metas(t, spec{6, 0, 1, 1}), restart) // Not in the log, but not below its start.
	if err := l.LoadProducersFrom(p, restart); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(p.entries)), []int64{6}; !slices.Equal(got, want) {
		t.Fatalf("producers: got %v, want %v", got, want)
	}
	if got := len(p.entries[6].batches); got != 1 {
		t.Fatalf("producer 6: got %d batches, want 1", got)
	}
	if err := l.LoadProducersFrom(p, restart+1); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("LoadFrom above the log end: got %v, want log.ErrOffsetOutOfRange", err)
	}
}
