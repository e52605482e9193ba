package log

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	batch := newBatch(t, 5, 100, time.Now().UnixMilli())
	cfg.SegmentBytes = int64(2*len(batch) + 1)
	l := openTestLog(t, dir, cfg)
	// Epoch 0 writes 0..9, epoch 2 writes 10..19, epoch 5 writes 20..24.
	for _, epoch := range []int32{0, 0, 2, 2, 5} {
		if _, err := l.Append(batch, epoch); err != nil {
			t.Fatal(err)
		}
	}
	// A producer batch appended without an epoch (-1) adds none.
	if _, err := l.Append(batch, -1); err != nil {
		t.Fatal(err)
	}
	wantEpochs := func(when string, want ...EpochEntry) {
		t.Helper()
		if got := l.Epochs(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Epochs %s: got %v, want %v", when, got, want)
		}
	}
	wantEpochs("after appends", EpochEntry{0, 0}, EpochEntry{2, 10}, EpochEntry{5, 20})
	if epoch, ok := l.LatestEpoch(); !ok || epoch != 5 {
		t.Fatalf("LatestEpoch: got %d, %v, want 5, true", epoch, ok)
	}
	tests := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{5, 5, 30}, // The latest epoch ends at the log end offset.
		{4, 2, 20},
		{2, 2, 20},
		{1, 0, 10},
		{0, 0, 10},
		{6, -1, -1},
		{-1, -1, -1},
	}
	check := func(when string) {
		t.Helper()
		for _, tt := range tests {
			epoch, end := l.EndOffsetForEpoch(tt.epoch)
			if epoch != tt.wantEpoch || end != tt.wantEnd {
				t.Fatalf("EndOffsetForEpoch(%d) %s: got %d, %d, want %d, %d", tt.epoch, when, epoch, end, tt.wantEpoch, tt.wantEnd)
			}
		}
	}
	check("after appends")

	// The checkpoint survives a restart; without it the log rebuilds it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	check("after reopen")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	removeFile(t, filepath.Join(dir, leaderEpochFile))
	l = openTestLog(t, dir, cfg)
	check("after rebuilding the checkpoint")

	// An epoch checkpointed before a crash lost its batches is dropped.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeEpochs(dir, []EpochEntry{{0, 0}, {2, 10}, {5, 20}, {7, 30}}); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	wantEpochs("after reopen with an epoch beyond the end", EpochEntry{0, 0}, EpochEntry{2, 10}, EpochEntry{5, 20})

	// Truncation drops the epochs above the new end.
	if err := l.TruncateTo(15); err != nil {
		t.Fatal(err)
	}
	wantEpochs("after TruncateTo(15)", EpochEntry{0, 0}, EpochEntry{2, 10})
	if epoch, end := l.EndOffsetForEpoch(5); epoch != -1 || end != -1 {
		t.Fatalf("EndOffsetForEpoch(5) after truncation: got %d, %d, want -1, -1", epoch, end)
	}
	if epoch, end := l.EndOffsetForEpoch(2); epoch != 2 || end != 15 {
		t.Fatalf("EndOffsetForEpoch(2) after truncation: got %d, %d, want 2, 15", epoch, end)
	}
	// A new leader's epoch starts at the end.
	if _, err := l.Append(batch, 8); err != nil {
		t.Fatal(err)
	}
	wantEpochs("after an append in epoch 8", EpochEntry{0, 0}, EpochEntry{2, 10}, EpochEntry{8, 15})

	// Retention drops the epochs of deleted segments (segment 0).
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.RetentionBytes = 0
	l = openTestLog(t, dir, cfg)
	if _, err := l.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := l.StartOffset(); got != 10 {
		t.Fatalf("StartOffset after retention: got %d, want 10", got)
	}
	wantEpochs("after retention", EpochEntry{2, 10}, EpochEntry{8, 15})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	wantEpochs("after retention and reopen", EpochEntry{2, 10}, EpochEntry{8, 15})

	if err := l.TruncateFullyAndStartAt(40); err != nil {
		t.Fatal(err)
	}
	wantEpochs("after TruncateFullyAndStartAt")
	if _, ok := l.LatestEpoch(); ok {
		t.Fatalf("LatestEpoch of an emptied log: got ok")
	}
}

func TestFollowerCopiesEpochs(t *testing.T) {
	leader := openTestLog(t, t.TempDir(), testConfig())
	for _, epoch := range []int32{1, 1, 3, 4} {
		if _, err := leader.Append(newBatch(t, 2, 10, 1000), epoch); err != nil {
			t.Fatal(err)
		}
	}
	follower := openTestLog(t, t.TempDir(), testConfig())
	b, err := leader.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if got, want := follower.Epochs(), leader.Epochs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower epochs: got %v, want the leader's %v", got, want)
	}
	if epoch, end := follower.EndOffsetForEpoch(2); epoch != 1 || end != 4 {
		t.Fatalf("follower EndOffsetForEpoch(2): got %d, %d, want 1, 4", epoch, end)
	}
	if epoch, end := follower.EndOffsetForEpoch(0); epoch != 0 || end != 0 {
		t.Fatalf("follower EndOffsetForEpoch(0), below every epoch: got %d, %d, want 0, 0", epoch, end)
	}
}

func TestTrimEpochs(t *testing.T) {
	entries := []EpochEntry{{1, 0}, {2, 10}, {3, 20}}
	tests := []struct {
		name       string
		start, end int64
		want       []EpochEntry
	}{
		{"nothing to trim", 0, 30, entries},
		{"end cuts the last epoch", 0, 20, []EpochEntry{{1, 0}, {2, 10}}},
		{"end inside the last epoch", 0, 21, entries},
		{"start inside the second epoch", 15, 30, []EpochEntry{{2, 15}, {3, 20}}},
		{"start at an epoch's start", 20, 30, []EpochEntry{{3, 20}}},
		{"start beyond the last epoch start", 25, 30, []EpochEntry{{3, 25}}},
		{"both", 5, 20, []EpochEntry{{1, 5}, {2, 10}}},
		{"empty log", 30, 30, []EpochEntry{{3, 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := trimEpochs(entries, tt.start, tt.end); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("trimEpochs(%d, %d): got %v, want %v", tt.start, tt.end, got, tt.want)
			}
		})
	}
}

func TestEpochCheckpointFormat(t *testing.T) {
	dir := t.TempDir()
	if err := writeEpochs(dir, []EpochEntry{{0, 0}, {4, 120}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, leaderEpochFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "0\n2\n0 0\n4 120\n"; got != want {
		t.Fatalf("checkpoint: got %q, want Kafka's format %q", got, want)
	}
	for _, bad := range []string{"1\n0\n", "0\n2\n0 0\n", "0\n2\n3 10\n2 20\n", "0\n1\nx 1\n", ""} {
		if err := os.WriteFile(filepath.Join(dir, leaderEpochFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readEpochs(dir); err == nil {
			t.Fatalf("readEpochs(%q): got nil error", bad)
		}
	}
}

// TestCrashRebuildsUnsyncedEpochs checks what a power failure may leave:
// batches of epochs that the unsynced leader-epoch checkpoint lacks, or an
// older checkpoint naming an epoch that a truncation replaced. Open after
// the crash rebuilds the last segment's epochs from its batches; the
// earlier segments' epochs, fsynced when the next segment was rolled, are
// kept as checkpointed.
func TestCrashRebuildsUnsyncedEpochs(t *testing.T) {
	batch := newBatch(t, 5, 100, time.Now().UnixMilli())
	cfg := testConfig()
	cfg.SegmentBytes = int64(2*len(batch) + 1)
	tests := []struct {
		name string
		// checkpoint is what the crash left in the checkpoint; nil: no
		// checkpoint. With asLeft the checkpoint is as the crash left it.
		checkpoint []EpochEntry
		want       []EpochEntry
		asLeft     bool
	}{
		{"as a process crash leaves it", nil, []EpochEntry{{0, 0}, {2, 10}, {5, 20}}, true},
		{"the last epoch's write lost", []EpochEntry{{0, 0}, {2, 10}}, []EpochEntry{{0, 0}, {2, 10}, {5, 20}}, false},
		{"the checkpoint lost", nil, []EpochEntry{{0, 0}, {2, 10}, {5, 20}}, false},
		{"a truncated epoch's write kept", []EpochEntry{{0, 0}, {2, 10}, {4, 20}}, []EpochEntry{{0, 0}, {2, 10}, {5, 20}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, cfg)
			// Segments 0..9, 10..19 and 20..24: epoch 5 begins the last.
			for _, epoch := range []int32{0, 0, 2, 2, 5} {
				if _, err := l.Append(batch, epoch); err != nil {
					t.Fatal(err)
				}
			}
			l.crash()
			if tt.asLeft {
				// Written when segment 20 was rolled, without epoch 5.
			} else if tt.checkpoint == nil {
				removeFile(t, filepath.Join(dir, leaderEpochFile))
			} else if err := writeEpochs(dir, tt.checkpoint); err != nil {
				t.Fatal(err)
			}
			l = openTestLog(t, dir, cfg)
			if got := l.Epochs(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Epochs after the crash: got %v, want %v", got, tt.want)
			}
			if epoch, end := l.EndOffsetForEpoch(2); epoch != 2 || end != 20 {
				t.Fatalf("EndOffsetForEpoch(2): got %d, %d, want 2, 20", epoch, end)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := readEpochs(dir)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("checkpoint after Close: got %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

// TestEpochCheckpointWrittenWithBatches checks that an appended epoch
// is checkpointed by the next Flush, not in the append path.
func TestEpochCheckpointWrittenWithBatches(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, testConfig())
	if _, err := l.Append(newBatch(t, 1, 10, time.Now().UnixMilli()), 3); err != nil {
		t.Fatal(err)
	}
	if got, err := readEpochs(dir); err == nil && len(got) > 0 {
		t.Fatalf("checkpoint after an append: got %v, want it written by the next flush", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := readEpochs(dir); err != nil || !reflect.DeepEqual(got, []EpochEntry{{3, 0}}) {
		t.Fatalf("checkpoint after Flush: got %v, %v, want [{3 0}]", got, err)
	}
}

// TestLeaderEndOffsetFor: a leader that has not written in its epoch yet
// answers as if its epoch began at its log end when it was elected
// (Kafka's leader puts it in its cache then), so a replica whose last
// batch came from an epoch between the two hears where the leader's
// previous epoch ended instead of UNDEFINED; once the leader has written,
// the answers are its log's.
func TestLeaderEndOffsetFor(t *testing.T) {
	epochs := []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 40}}
	for _, c := range []struct {
		name      string
		epochs    []EpochEntry
		logEnd    int64
		leader    int32
		start     int64
		asked     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{"its own epoch", epochs, 60, 5, 60, 5, 5, 60},
		{"an epoch between its last batch's and its own", epochs, 60, 5, 60, 4, 3, 60},
		{"its last batch's epoch", epochs, 60, 5, 60, 3, 3, 60},
		{"an older epoch", epochs, 60, 5, 60, 2, 1, 40},
		{"below every epoch", []EpochEntry{{Epoch: 2, StartOffset: 10}}, 60, 5, 60, 1, 1, 10},
		{"above its own", epochs, 60, 5, 60, 6, -1, -1},
		{"no batches yet", nil, 0, 5, 0, 3, 3, 0},
		{"written in its epoch: the log's answer", append(epochs, EpochEntry{Epoch: 5, StartOffset: 60}), 70, 5, 60, 4, 3, 60},
		{"written in its epoch, its own", append(epochs, EpochEntry{Epoch: 5, StartOffset: 60}), 70, 5, 60, 5, 5, 70},
		{"no leader epoch: the log's answer", epochs, 60, -1, 0, 4, -1, -1},
	} {
		e, end := LeaderEndOffsetFor(c.epochs, c.logEnd, c.leader, c.start, c.asked)
		if e != c.wantEpoch || end != c.wantEnd {
			t.Errorf("%s: epoch %d: got %d, %d; want %d, %d", c.name, c.asked, e, end, c.wantEpoch, c.wantEnd)
		}
	}
}
