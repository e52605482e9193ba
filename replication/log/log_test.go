package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"segment bytes too small", func(c *Config) { c.SegmentBytes = 10 }, "log.segment.bytes 10: must be between 14 and 2147483647"},
		{"segment bytes too large", func(c *Config) { c.SegmentBytes = 1 << 31 }, "log.segment.bytes 2147483648: must be between 14 and 2147483647"},
		{"segment bytes minimum", func(c *Config) { c.SegmentBytes = 14 }, ""},
		{"roll time zero", func(c *Config) { c.RollTime = 0 }, "log.roll.ms 0: must be between 1 and"},
		{"retention bytes below -1", func(c *Config) { c.RetentionBytes = -2 }, "log.retention.bytes -2: must be between -1 (no limit) and"},
		{"retention bytes zero", func(c *Config) { c.RetentionBytes = 0 }, ""},
		{"retention time forever", func(c *Config) { c.RetentionTime = -1 }, ""},
		{"retention time forever in ms", func(c *Config) { c.RetentionTime = -time.Millisecond }, ""},
		{"retention time negative", func(c *Config) { c.RetentionTime = -5 * time.Millisecond }, "log.retention.ms -5: must be -1 (keep forever) or between 0 and"},
		{"index interval negative", func(c *Config) { c.IndexIntervalBytes = -1 }, "log.index.interval.bytes -1: must be between 0 and 2147483647"},
		{"flush messages zero", func(c *Config) { c.FlushMessages = 0 }, "log.flush.interval.messages 0: must be between 1 and"},
		{"flush interval negative", func(c *Config) { c.FlushInterval = -time.Second }, "log.flush.interval.ms -1000: must be between 0 (never on time) and"},
		{"writeback below a page", func(c *Config) { c.WritebackBytes = 4095 }, "log.writeback.bytes 4095: must be 0 (off) or between 4096 and 1073741824"},
		{"writeback off", func(c *Config) { c.WritebackBytes = 0 }, ""},
		{"writeback above 1 GiB", func(c *Config) { c.WritebackBytes = 1<<30 + 1 }, "log.writeback.bytes 1073741825: must be 0 (off) or between 4096 and 1073741824"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.modify(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("Validate: got %v, want %q", err, tt.want)
			}
			if tt.want != "" {
				if _, err := Open(t.TempDir(), cfg); err == nil {
					t.Fatalf("Open with an invalid config: got nil error")
				}
			}
		})
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	l := openTestLog(t, t.TempDir(), testConfig())
	// Appends of one, two and three batches, with various record counts.
	appends := [][][]byte{
		{newBatch(t, 1, 10, 1000)},
		{newBatch(t, 5, 100, 2000), newBatch(t, 3, 50, 3000)},
		{newBatch(t, 2, 0, 4000), newBatch(t, 10, 20, 5000), newBatch(t, 1, 300, 6000)},
	}
	var sent [][]byte
	var want int64
	for i, batches := range appends {
		var records []byte
		var count int64
		for _, b := range batches {
			records = append(records, b...)
			count += int64(binary.BigEndian.Uint32(b[fieldRecordCount:]))
		}
		before := append([]byte(nil), records...)
		res, err := l.Append(records, int32(7+i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if !bytes.Equal(records, before) {
			t.Fatalf("append %d modified the caller's records", i)
		}
		if res.BaseOffset != want || res.LastOffset != want+count-1 || res.Records != count {
			t.Fatalf("append %d: got %+v, want BaseOffset %d LastOffset %d Records %d", i, res, want, want+count-1, count)
		}
		want += count
		sent = append(sent, batches...)
	}
	if got := l.EndOffset(); got != want {
		t.Fatalf("EndOffset: got %d, want %d", got, want)
	}
	if got := l.StartOffset(); got != 0 {
		t.Fatalf("StartOffset: got %d, want 0", got)
	}
	stored := readAllFrom(t, l, 0)
	if len(stored) != len(sent) {
		t.Fatalf("read %d batches, want %d", len(stored), len(sent))
	}
	epochs := []int32{7, 8, 8, 9, 9, 9}
	var offset int64
	for i, sb := range stored {
		if !sameExceptOffsetAndEpoch(sb.raw, sent[i]) {
			t.Fatalf("batch %d: stored bytes differ from the bytes sent beyond baseOffset and partitionLeaderEpoch", i)
		}
		if sb.baseOffset != offset || sb.leaderEpoch != epochs[i] {
			t.Fatalf("batch %d: got base offset %d epoch %d, want %d epoch %d", i, sb.baseOffset, sb.leaderEpoch, offset, epochs[i])
		}
		offset = sb.lastOffset + 1
	}
	// Every offset, including one inside a batch, reads from its batch.
	for o := int64(0); o < want; o++ {
		b, err := l.Read(o, 1)
		if err != nil {
			t.Fatalf("Read(%d): %v", o, err)
		}
		got := decodeBatches(t, b)
		if len(got) != 1 || got[0].baseOffset > o || got[0].lastOffset < o {
			t.Fatalf("Read(%d): got %d batches, first %+v, want the one batch holding %d", o, len(got), got[0], o)
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := openTestLog(t, t.TempDir(), testConfig())
	batch := newBatch(t, 4, 100, 1000) // Offsets 0-3, 4-7, ...
	size := len(batch)
	for range 10 {
		mustAppend(t, l, batch)
	}
	tests := []struct {
		name     string
		offset   int64
		maxBytes int
		want     []int64 // base offsets of the batches returned
		err      error
	}{
		{"zero bytes still gives one batch", 0, 0, []int64{0}, nil},
		{"less than a batch gives one batch", 4, size - 1, []int64{4}, nil},
		{"exactly one batch", 4, size, []int64{4}, nil},
		{"just under two batches", 4, 2*size - 1, []int64{4}, nil},
		{"exactly two batches", 4, 2 * size, []int64{4, 8}, nil},
		{"offset inside a batch starts at that batch", 6, 2 * size, []int64{4, 8}, nil},
		{"everything", 0, 1 << 20, []int64{0, 4, 8, 12, 16, 20, 24, 28, 32, 36}, nil},
		{"last batch", 39, 1 << 20, []int64{36}, nil},
		{"at the end offset", 40, 1 << 20, nil, nil},
		{"above the end offset", 41, 1 << 20, nil, ErrOffsetOutOfRange},
		{"negative offset", -1, 1 << 20, nil, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := l.Read(tt.offset, tt.maxBytes)
			wantErr(t, "Read", err, tt.err)
			var got []int64
			for _, sb := range decodeBatches(t, b) {
				got = append(got, sb.baseOffset)
			}
			if !equalInt64s(got, tt.want) {
				t.Fatalf("Read(%d, %d): got batches at %v, want %v", tt.offset, tt.maxBytes, got, tt.want)
			}
		})
	}
}

func TestReadUpTo(t *testing.T) {
	l := openTestLog(t, t.TempDir(), testConfig())
	batch := newBatch(t, 4, 100, 1000)
	for range 5 {
		mustAppend(t, l, batch) // Batches at 0, 4, 8, 12, 16; end 20.
	}
	tests := []struct {
		name      string
		offset    int64
		maxOffset int64
		want      []int64
		err       error
	}{
		{"high watermark at a batch boundary", 0, 8, []int64{0, 4}, nil},
		{"high watermark inside a batch excludes it", 0, 10, []int64{0, 4}, nil},
		{"high watermark before the first batch ends", 0, 3, nil, nil},
		{"read at the high watermark", 8, 8, nil, nil},
		{"read between high watermark and end", 12, 8, nil, nil},
		{"high watermark at the end", 4, 20, []int64{4, 8, 12, 16}, nil},
		{"high watermark beyond the end", 16, 100, []int64{16}, nil},
		{"above the end offset", 21, 8, nil, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := l.ReadUpTo(tt.offset, 1<<20, tt.maxOffset)
			wantErr(t, "ReadUpTo", err, tt.err)
			var got []int64
			for _, sb := range decodeBatches(t, b) {
				got = append(got, sb.baseOffset)
			}
			if !equalInt64s(got, tt.want) {
				t.Fatalf("ReadUpTo(%d, maxOffset %d): got batches at %v, want %v", tt.offset, tt.maxOffset, got, tt.want)
			}
		})
	}
}

func TestRollBySize(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	batch := newBatch(t, 10, 100, 1000)
	cfg.SegmentBytes = int64(3*len(batch) + 10) // Three batches per segment.
	l := openTestLog(t, dir, cfg)
	for range 10 {
		mustAppend(t, l, batch)
	}
	// One append of several batches is split over segments too.
	mustAppend(t, l, bytes.Repeat(batch, 5))
	bases := segmentFiles(t, dir)
	want := []int64{0, 30, 60, 90, 120}
	if !equalInt64s(bases, want) {
		t.Fatalf("segments: got %v, want %v", bases, want)
	}
	for _, base := range bases {
		fi, err := os.Stat(segmentPath(dir, base, logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > cfg.SegmentBytes {
			t.Fatalf("segment %d: %d bytes, above log.segment.bytes %d", base, fi.Size(), cfg.SegmentBytes)
		}
	}
	// A read spans segments.
	b, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(decodeBatches(t, b)); got != 15 {
		t.Fatalf("Read(0) across segments: got %d batches, want 15", got)
	}
	if got := len(readAllFrom(t, l, 0)); got != 15 {
		t.Fatalf("read back %d batches, want 15", got)
	}
}

func TestRollByAge(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.RollTime = time.Hour
	cfg.RetentionTime = -1
	l := openTestLog(t, dir, cfg)
	clock := newTestClock()
	l.now = clock.Now
	batch := newBatch(t, 2, 10, 1000)

	mustAppend(t, l, batch)
	clock.Advance(59 * time.Minute)
	mustAppend(t, l, batch)
	if got := segmentFiles(t, dir); !equalInt64s(got, []int64{0}) {
		t.Fatalf("segments before log.roll.ms: got %v, want [0]", got)
	}
	// An append after the segment's first batch is older than RollTime rolls.
	clock.Advance(2 * time.Minute)
	mustAppend(t, l, batch)
	if got := segmentFiles(t, dir); !equalInt64s(got, []int64{0, 4}) {
		t.Fatalf("segments after an append past log.roll.ms: got %v, want [0 4]", got)
	}
	// EnforceRetention rolls an old active segment with no append.
	mustAppend(t, l, batch)
	if _, err := l.EnforceRetention(clock.Now().Add(30 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); !equalInt64s(got, []int64{0, 4}) {
		t.Fatalf("segments before log.roll.ms: got %v, want [0 4]", got)
	}
	if _, err := l.EnforceRetention(clock.Now().Add(61 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); !equalInt64s(got, []int64{0, 4, 8}) {
		t.Fatalf("segments after EnforceRetention past log.roll.ms: got %v, want [0 4 8]", got)
	}
	// An empty active segment is never rolled.
	if _, err := l.EnforceRetention(clock.Now().Add(10 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); !equalInt64s(got, []int64{0, 4, 8}) {
		t.Fatalf("segments after EnforceRetention on an empty segment: got %v, want [0 4 8]", got)
	}
	if got := len(readAllFrom(t, l, 0)); got != 4 {
		t.Fatalf("read back %d batches, want 4", got)
	}
}

func TestRetention(t *testing.T) {
	batch := newBatch(t, 10, 100, 0)
	size := int64(len(batch))
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		retentionBytes int64
		retentionTime  time.Duration
		// timestamps are the first record timestamps of the batches, two
		// per segment.
		timestamps  []time.Time
		wantDeleted int
		wantStart   int64
	}{
		{
			name:           "size keeps the newest segments",
			retentionBytes: 4 * size, retentionTime: -1,
			timestamps:  repeatTime(now, 8),
			wantDeleted: 2, wantStart: 40,
		},
		{
			// As Kafka: a segment goes only if the rest still holds
			// log.retention.bytes.
			name:           "size never cuts below the limit",
			retentionBytes: 5 * size, retentionTime: -1,
			timestamps:  repeatTime(now, 8),
			wantDeleted: 1, wantStart: 20,
		},
		{
			name:           "size limit above the log deletes nothing",
			retentionBytes: 100 * size, retentionTime: -1,
			timestamps:  repeatTime(now, 8),
			wantDeleted: 0, wantStart: 0,
		},
		{
			name:           "size zero deletes all but the active segment",
			retentionBytes: 0, retentionTime: -1,
			timestamps:  repeatTime(now, 8),
			wantDeleted: 3, wantStart: 60,
		},
		{
			name:           "time deletes segments whose newest record is old",
			retentionBytes: -1, retentionTime: time.Hour,
			timestamps: []time.Time{
				now.Add(-3 * time.Hour), now.Add(-2 * time.Hour),
				now.Add(-2 * time.Hour), now.Add(-61 * time.Minute),
				now.Add(-2 * time.Hour), now.Add(-30 * time.Minute), // Newest record is recent: kept.
				now.Add(-5 * time.Hour), now.Add(-5 * time.Hour), // Active: never deleted.
			},
			wantDeleted: 2, wantStart: 40,
		},
		{
			name:           "time stops at the first segment kept",
			retentionBytes: -1, retentionTime: time.Hour,
			timestamps: []time.Time{
				now, now,
				now.Add(-2 * time.Hour), now.Add(-2 * time.Hour),
				now, now,
				now, now,
			},
			wantDeleted: 0, wantStart: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = 2*size + 1
			cfg.RetentionBytes = tt.retentionBytes
			cfg.RetentionTime = tt.retentionTime
			l := openTestLog(t, dir, cfg)
			for _, ts := range tt.timestamps {
				mustAppend(t, l, newBatch(t, 10, 100, ts.UnixMilli()))
			}
			if got := segmentFiles(t, dir); len(got) != len(tt.timestamps)/2 {
				t.Fatalf("segments before retention: got %v, want %d", got, len(tt.timestamps)/2)
			}
			n, err := l.EnforceRetention(now)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantDeleted {
				t.Fatalf("EnforceRetention deleted %d segments, want %d", n, tt.wantDeleted)
			}
			if got := l.StartOffset(); got != tt.wantStart {
				t.Fatalf("StartOffset: got %d, want %d", got, tt.wantStart)
			}
			if got := segmentFiles(t, dir); len(got) != len(tt.timestamps)/2-tt.wantDeleted || got[0] != tt.wantStart {
				t.Fatalf("segments after retention: got %v, want %d starting at %d", got, len(tt.timestamps)/2-tt.wantDeleted, tt.wantStart)
			}
			if tt.wantStart > 0 {
				_, err := l.Read(tt.wantStart-1, 1<<20)
				wantErr(t, "Read below the log start offset", err, ErrOffsetOutOfRange)
			}
			if got := len(readAllFrom(t, l, tt.wantStart)); got != len(tt.timestamps)-2*tt.wantDeleted {
				t.Fatalf("read back %d batches, want %d", got, len(tt.timestamps)-2*tt.wantDeleted)
			}
			// The log start offset survives a restart.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openTestLog(t, dir, cfg)
			if got := l2.StartOffset(); got != tt.wantStart {
				t.Fatalf("StartOffset after reopen: got %d, want %d", got, tt.wantStart)
			}
			if got := l2.EndOffset(); got != int64(10*len(tt.timestamps)) {
				t.Fatalf("EndOffset after reopen: got %d, want %d", got, 10*len(tt.timestamps))
			}
		})
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		mustAppend(t, l, newBatch(t, 1+i%7, 50+i*3, int64(1000+i)))
	}
	before := readAllFrom(t, l, 0)
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segmentFiles(t, dir)) < 3 {
		t.Fatalf("want several segments, got %v", segmentFiles(t, dir))
	}
	l = openTestLog(t, dir, cfg)
	if got := l.EndOffset(); got != end {
		t.Fatalf("EndOffset after reopen: got %d, want %d", got, end)
	}
	after := readAllFrom(t, l, 0)
	if len(after) != len(before) {
		t.Fatalf("after reopen read %d batches, want %d", len(after), len(before))
	}
	for i := range before {
		if !bytes.Equal(after[i].raw, before[i].raw) {
			t.Fatalf("batch %d differs after reopen", i)
		}
	}
	res := mustAppend(t, l, newBatch(t, 3, 10, 5000))
	if res.BaseOffset != end {
		t.Fatalf("append after reopen: got base offset %d, want %d", res.BaseOffset, end)
	}
}

func TestRecoverDamagedTail(t *testing.T) {
	batch := newBatch(t, 5, 200, 1000)
	size := int64(len(batch))
	tests := []struct {
		name string
		// damage changes the files of the last segment, given the path of
		// its .log file. The log holds 20 batches of 5 records (offsets
		// 0..99) of size bytes each, in one segment.
		damage func(t *testing.T, logPath string)
		// wantEnd is the log end offset after recovery.
		wantEnd int64
		// crashOnly runs the case only as a crash (no clean Close): after
		// a clean Close only the batches from the last index entry on are
		// verified.
		crashOnly bool
		// closeOnly runs the case only after a clean Close: after a crash
		// the index files are rebuilt anyway.
		closeOnly bool
	}{
		{name: "cut inside the last header", damage: func(t *testing.T, p string) { truncateFile(t, p, 19*size+30) }, wantEnd: 95},
		{name: "cut inside the last records", damage: func(t *testing.T, p string) { truncateFile(t, p, 20*size-1) }, wantEnd: 95},
		{name: "cut inside an earlier batch", damage: func(t *testing.T, p string) { truncateFile(t, p, 10*size+100) }, wantEnd: 50},
		{name: "cut after eleven bytes", damage: func(t *testing.T, p string) { truncateFile(t, p, 11) }, wantEnd: 0},
		{name: "flipped byte in the last batch", damage: func(t *testing.T, p string) { flipByte(t, p, 19*size+size/2) }, wantEnd: 95},
		{name: "flipped byte in the tenth batch", damage: func(t *testing.T, p string) { flipByte(t, p, 9*size+100) }, wantEnd: 45, crashOnly: true},
		{name: "bad length in the last batch", damage: func(t *testing.T, p string) { writeAt(t, p, 19*size+fieldBatchLength, []byte{0x7f, 0, 0, 0}) }, wantEnd: 95},
		{name: "zeros after the last batch", damage: func(t *testing.T, p string) { writeAt(t, p, 20*size, make([]byte, 4096)) }, wantEnd: 100},
		// Offsets may jump forward (compacted batches), never back.
		{name: "offset going back in the last batch", damage: func(t *testing.T, p string) { writeAt(t, p, 19*size, []byte{0, 0, 0, 0, 0, 0, 0, 91}) }, wantEnd: 95},
		{name: "offset index removed", damage: func(t *testing.T, p string) { removeFile(t, indexPath(p)) }, wantEnd: 100, closeOnly: true},
		{name: "time index removed", damage: func(t *testing.T, p string) { removeFile(t, timeIndexPath(p)) }, wantEnd: 100, closeOnly: true},
		{name: "offset index torn", damage: func(t *testing.T, p string) { truncateFile(t, indexPath(p), fileSize(t, indexPath(p))-3) }, wantEnd: 100, closeOnly: true},
		{name: "offset index garbage", damage: func(t *testing.T, p string) { writeAt(t, indexPath(p), 0, bytes.Repeat([]byte{0xff}, 16)) }, wantEnd: 100, closeOnly: true},
		{name: "index entries beyond a cut tail", damage: func(t *testing.T, p string) { truncateFile(t, p, 2*size+5) }, wantEnd: 10},
	}
	for _, tt := range tests {
		for _, crash := range []bool{false, true} {
			if (tt.crashOnly && !crash) || (tt.closeOnly && crash) {
				continue
			}
			name := tt.name + " after close"
			if crash {
				name = tt.name + " after a crash"
			}
			t.Run(name, func(t *testing.T) {
				testRecoverDamagedTail(t, batch, tt.damage, tt.wantEnd, crash)
			})
		}
	}
}

// testRecoverDamagedTail writes 20 copies of batch (5 records each),
// closes the log (cleanly, or as a crash would leave it), damages the last
// segment and checks that reopening keeps the batches below wantEnd
// byte for byte, cuts the file after them and accepts new writes at
// wantEnd, also after another restart.
func testRecoverDamagedTail(t *testing.T, batch []byte, damage func(*testing.T, string), wantEnd int64, crash bool) {
	size := int64(len(batch))
	dir := t.TempDir()
	cfg := testConfig()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		mustAppend(t, l, batch)
	}
	want := readAllFrom(t, l, 0)
	if crash {
		l.crash()
	} else if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, lastSegmentPath(t, dir))

	l = openTestLog(t, dir, cfg)
	if got := l.EndOffset(); got != wantEnd {
		t.Fatalf("EndOffset after recovery: got %d, want %d", got, wantEnd)
	}
	got := readAllFrom(t, l, 0)
	if int64(len(got)) != wantEnd/5 {
		t.Fatalf("recovered %d batches, want %d", len(got), wantEnd/5)
	}
	for i := range got {
		if !bytes.Equal(got[i].raw, want[i].raw) {
			t.Fatalf("batch %d differs after recovery", i)
		}
	}
	if fs := fileSize(t, lastSegmentPath(t, dir)); fs != wantEnd/5*size {
		t.Fatalf("segment file after recovery: %d bytes, want %d", fs, wantEnd/5*size)
	}
	checkIndexes(t, dir)
	res := mustAppend(t, l, batch)
	if res.BaseOffset != wantEnd {
		t.Fatalf("append after recovery: got base offset %d, want %d", res.BaseOffset, wantEnd)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	if got := l.EndOffset(); got != wantEnd+5 {
		t.Fatalf("EndOffset after a second reopen: got %d, want %d", got, wantEnd+5)
	}
	if got := len(readAllFrom(t, l, 0)); int64(got) != wantEnd/5+1 {
		t.Fatalf("after a second reopen read %d batches, want %d", got, wantEnd/5+1)
	}
	checkIndexes(t, dir)
}

func TestCrashKeepsAcknowledgedAppends(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 10
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for i := range 50 {
		end = mustAppend(t, l, newBatch(t, 1+i%4, 300, int64(i))).LastOffset + 1
	}
	want := readAllFrom(t, l, 0)
	// The process dies: no fsync, no Close. The page cache keeps what the
	// write calls returned.
	l.crash()
	l = openTestLog(t, dir, cfg)
	if got := l.EndOffset(); got != end {
		t.Fatalf("EndOffset after a crash: got %d, want %d", got, end)
	}
	got := readAllFrom(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("after a crash read %d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].raw, want[i].raw) {
			t.Fatalf("batch %d differs after a crash", i)
		}
	}
	checkIndexes(t, dir)
}

// crash closes the log's files as the death of the process would: nothing
// is fsynced and no clean-shutdown marker is written.
func (l *Log) crash() {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	for _, s := range l.segments {
		s.close()
	}
}

func TestRecoverOnlyTheLastSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	batch := newBatch(t, 5, 200, 1000)
	cfg.SegmentBytes = int64(4 * len(batch))
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustAppend(t, l, batch) // Segments at 0, 20 and 40.
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn last segment loses only its tail; earlier segments are kept.
	truncateFile(t, segmentPath(dir, 40, logSuffix), int64(len(batch))+7)
	l = openTestLog(t, dir, cfg)
	if got := l.EndOffset(); got != 45 {
		t.Fatalf("EndOffset: got %d, want 45", got)
	}
	if got := len(readAllFrom(t, l, 0)); got != 9 {
		t.Fatalf("read back %d batches, want 9", got)
	}
	// A last segment torn to nothing leaves the earlier ones whole.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	truncateFile(t, segmentPath(dir, 40, logSuffix), 3)
	l = openTestLog(t, dir, cfg)
	if got := l.EndOffset(); got != 40 {
		t.Fatalf("EndOffset: got %d, want 40", got)
	}
	if res := mustAppend(t, l, batch); res.BaseOffset != 40 {
		t.Fatalf("append: got base offset %d, want 40", res.BaseOffset)
	}
}

func TestAppendRefusesBadBatches(t *testing.T) {
	good := newBatch(t, 3, 50, 1000)
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[fieldCRC:], crcOf(b))
		return b
	}
	tests := []struct {
		name    string
		records []byte
		want    error
	}{
		{"empty", nil, ErrCorruptMessage},
		{"bad crc", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorruptMessage},
		{"magic 1", mutate(func(b []byte) []byte { b[fieldMagic] = 1; return b }), ErrUnsupportedMagic},
		{"magic 0", mutate(func(b []byte) []byte { b[fieldMagic] = 0; return b }), ErrUnsupportedMagic},
		{"shorter than a header", good[:40], ErrCorruptMessage},
		{"cut in the records", good[:len(good)-1], ErrCorruptMessage},
		{"length below a header", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[fieldBatchLength:], 10); return b }), ErrCorruptMessage},
		{"length past the end", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[fieldBatchLength:], 1<<20); return b }), ErrCorruptMessage},
		{"negative length", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[fieldBatchLength:], 0xffffff00); return b }), ErrCorruptMessage},
		{"record count above last offset delta", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[fieldRecordCount:], 4)
			return recrc(b)
		}), ErrCorruptMessage},
		{"record count below last offset delta", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[fieldLastOffsetDelta:], 5)
			return recrc(b)
		}), ErrCorruptMessage},
		{"negative last offset delta", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[fieldLastOffsetDelta:], 0xffffffff)
			binary.BigEndian.PutUint32(b[fieldRecordCount:], 0)
			return recrc(b)
		}), ErrCorruptMessage},
		{"second batch corrupt", append(append([]byte(nil), good...), mutate(func(b []byte) []byte { b[70] ^= 0x10; return b })...), ErrCorruptMessage},
		{"trailing bytes after a good batch", append(append([]byte(nil), good...), 0, 0, 0), ErrCorruptMessage},
	}
	// followerOK holds the batches only a producer may not send: a
	// follower copies compacted batches, which have fewer records than
	// offsets.
	followerOK := map[string]bool{"record count below last offset delta": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, testConfig())
			mustAppend(t, l, good)
			sizeBefore := fileSize(t, lastSegmentPath(t, dir))
			_, err := l.Append(tt.records, 0)
			wantErr(t, "Append", err, tt.want)
			if got := l.EndOffset(); got != 3 {
				t.Fatalf("EndOffset after a refused append: got %d, want 3", got)
			}
			if got := fileSize(t, lastSegmentPath(t, dir)); got != sizeBefore {
				t.Fatalf("segment file after a refused append: %d bytes, want %d", got, sizeBefore)
			}
			_, err = l.AppendAsFollower(withBaseOffset(tt.records, 3))
			if followerOK[tt.name] {
				if err != nil {
					t.Fatalf("AppendAsFollower: got error %v, want none", err)
				}
				return
			}
			wantErr(t, "AppendAsFollower", err, tt.want)
			if got := l.EndOffset(); got != 3 {
				t.Fatalf("EndOffset after a refused follower append: got %d, want 3", got)
			}
		})
	}
}

func TestAppendRecordTooLarge(t *testing.T) {
	cfg := testConfig()
	small := newBatch(t, 1, 10, 1000)
	cfg.SegmentBytes = int64(len(small) + 100)
	l := openTestLog(t, t.TempDir(), cfg)
	_, err := l.Append(append(append([]byte(nil), small...), newBatch(t, 1, 200, 1000)...), 0)
	wantErr(t, "Append of a batch above log.segment.bytes", err, ErrRecordTooLarge)
	if got := l.EndOffset(); got != 0 {
		t.Fatalf("EndOffset: got %d, want 0", got)
	}
	// Batches that fit one per segment are accepted.
	mustAppend(t, l, bytes.Repeat(small, 3))
	if got := l.EndOffset(); got != 3 {
		t.Fatalf("EndOffset: got %d, want 3", got)
	}
}

func TestAppendAsFollower(t *testing.T) {
	leader := openTestLog(t, t.TempDir(), testConfig())
	for i := range 6 {
		if _, err := leader.Append(newBatch(t, 3, 40, int64(1000+i)), int32(i/2)); err != nil {
			t.Fatal(err)
		}
	}
	follower := openTestLog(t, t.TempDir(), testConfig())
	// The follower copies in two fetches; the bytes stay the leader's.
	first, err := leader.Read(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := follower.AppendAsFollower(first)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 2 || res.Records != 3 {
		t.Fatalf("first follower append: got %+v, want offsets 0..2, 3 records", res)
	}
	rest, err := leader.Read(3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// A fetch that does not start at the follower's end is refused.
	_, err = follower.AppendAsFollower(first)
	wantErr(t, "AppendAsFollower of batches already there", err, ErrUnexpectedOffset)
	gap, err := leader.Read(6, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Batches going back within one call are refused.
	_, err = follower.AppendAsFollower(append(append([]byte(nil), rest[:len(first)]...), first...))
	wantErr(t, "AppendAsFollower with batches going back", err, ErrUnexpectedOffset)
	// Offsets may jump forward, as over a compacted leader's dropped
	// batches.
	skipping := openTestLog(t, t.TempDir(), testConfig())
	if res, err := skipping.AppendAsFollower(gap); err != nil || res.BaseOffset != 6 {
		t.Fatalf("AppendAsFollower after a gap: got %+v, %v, want base offset 6", res, err)
	}
	if got, want := skipping.EndOffset(), leader.EndOffset(); got != want {
		t.Fatalf("EndOffset after a gap: got %d, want %d", got, want)
	}

	if _, err := follower.AppendAsFollower(rest); err != nil {
		t.Fatal(err)
	}
	want, got := readAllFrom(t, leader, 0), readAllFrom(t, follower, 0)
	if len(got) != len(want) {
		t.Fatalf("follower has %d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].raw, want[i].raw) {
			t.Fatalf("follower batch %d differs from the leader's", i)
		}
		if got[i].leaderEpoch != int32(i/2) {
			t.Fatalf("follower batch %d: leader epoch %d, want %d", i, got[i].leaderEpoch, i/2)
		}
	}
}

func TestTruncateTo(t *testing.T) {
	batch := newBatch(t, 5, 100, 1000)
	cfg := testConfig()
	cfg.SegmentBytes = int64(4*len(batch) + 1) // Segments at 0, 20, 40; end 50.
	tests := []struct {
		name      string
		offset    int64
		wantEnd   int64
		wantStart int64
		wantSegs  []int64
	}{
		{"at or above the end is a no-op", 50, 50, 0, []int64{0, 20, 40}},
		{"far above the end is a no-op", 500, 50, 0, []int64{0, 20, 40}},
		{"at a batch boundary in the active segment", 45, 45, 0, []int64{0, 20, 40}},
		{"inside a batch cuts from its start", 47, 45, 0, []int64{0, 20, 40}},
		{"at a segment's base", 40, 40, 0, []int64{0, 20, 40}},
		{"inside an earlier segment", 33, 30, 0, []int64{0, 20}},
		{"at the first batch's end", 5, 5, 0, []int64{0}},
		{"to the start", 0, 0, 0, []int64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, cfg)
			for range 10 {
				mustAppend(t, l, batch)
			}
			if err := l.TruncateTo(tt.offset); err != nil {
				t.Fatalf("TruncateTo(%d): %v", tt.offset, err)
			}
			check := func(when string) {
				t.Helper()
				if got := l.EndOffset(); got != tt.wantEnd {
					t.Fatalf("EndOffset %s: got %d, want %d", when, got, tt.wantEnd)
				}
				if got := l.StartOffset(); got != tt.wantStart {
					t.Fatalf("StartOffset %s: got %d, want %d", when, got, tt.wantStart)
				}
				if got := segmentFiles(t, dir); !equalInt64s(got, tt.wantSegs) {
					t.Fatalf("segments %s: got %v, want %v", when, got, tt.wantSegs)
				}
				if got := readAllFrom(t, l, tt.wantStart); int64(len(got)) != (tt.wantEnd-tt.wantStart)/5 {
					t.Fatalf("%s read %d batches, want %d", when, len(got), (tt.wantEnd-tt.wantStart)/5)
				}
				_, err := l.Read(tt.wantEnd+1, 1<<20)
				wantErr(t, "Read above the end "+when, err, ErrOffsetOutOfRange)
				checkIndexes(t, dir)
			}
			check("after truncation")
			res := mustAppend(t, l, batch)
			if res.BaseOffset != tt.wantEnd {
				t.Fatalf("append after truncation: got base offset %d, want %d", res.BaseOffset, tt.wantEnd)
			}
			if err := l.TruncateTo(tt.wantEnd); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTestLog(t, dir, cfg)
			check("after reopen")
		})
	}
}

// TestTruncateCreatesNoIndexFiles: cutting the tail of an active segment
// whose index files are not created yet (no fsync since its first
// bytes) leaves them uncreated, as a follower cutting thousands of tails
// at a failover must; once they exist, a cut cuts them too, and what was
// cut stays cut after a reopen.
func TestTruncateCreatesNoIndexFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.IndexIntervalBytes = 1 // an index entry per batch
	batch := newBatch(t, 5, 100, 1000)
	l := openTestLog(t, dir, cfg)
	for range 10 {
		mustAppend(t, l, batch)
	}
	indexFiles := func() []string {
		t.Helper()
		var found []string
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if _, err := os.Stat(segmentPath(dir, 0, suffix)); err == nil {
				found = append(found, suffix)
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
		return found
	}
	if err := l.TruncateTo(45); err != nil {
		t.Fatal(err)
	}
	if got := indexFiles(); len(got) != 0 {
		t.Fatalf("after a cut before the first fsync: index files %v exist, want none", got)
	}
	if got := len(readAllFrom(t, l, 0)); got != 9 {
		t.Fatalf("after the cut: read %d batches, want 9", got)
	}

	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := indexFiles(); len(got) != 2 {
		t.Fatalf("after Flush: index files %v, want both", got)
	}
	for range 3 {
		mustAppend(t, l, batch)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// The files now index offsets up to 59; the cut takes them to 39.
	if err := l.TruncateTo(40); err != nil {
		t.Fatal(err)
	}
	idx := readFile(t, segmentPath(dir, 0, indexSuffix))
	if len(idx) < offsetEntrySize {
		t.Fatalf("offset index after the cut: %d bytes, want entries up to offset 39", len(idx))
	}
	if last := binary.BigEndian.Uint32(idx[len(idx)-offsetEntrySize:]); last != 39 {
		t.Fatalf("offset index after the cut: last entry at offset %d, want 39", last)
	}
	checkIndexes(t, dir)
	mustAppend(t, l, batch)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	if got := len(readAllFrom(t, l, 0)); got != 9 {
		t.Fatalf("after reopen: read %d batches, want 9", got)
	}
	checkIndexes(t, dir)
}

func TestTruncateBelowStart(t *testing.T) {
	dir := t.TempDir()
	batch := newBatch(t, 5, 100, 1000)
	cfg := testConfig()
	cfg.SegmentBytes = int64(2*len(batch) + 1)
	cfg.RetentionBytes = 0
	l := openTestLog(t, dir, cfg)
	for range 6 {
		mustAppend(t, l, batch) // Segments at 0, 10, 20.
	}
	if _, err := l.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := l.StartOffset(); got != 20 {
		t.Fatalf("StartOffset: got %d, want 20", got)
	}
	if err := l.TruncateTo(12); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 12 || l.EndOffset() != 12 {
		t.Fatalf("after TruncateTo below the start: got start %d end %d, want 12 and 12", l.StartOffset(), l.EndOffset())
	}
	if got := segmentFiles(t, dir); !equalInt64s(got, []int64{12}) {
		t.Fatalf("segments: got %v, want [12]", got)
	}
	if res := mustAppend(t, l, batch); res.BaseOffset != 12 {
		t.Fatalf("append: got base offset %d, want 12", res.BaseOffset)
	}
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	if l.StartOffset() != 100 || l.EndOffset() != 100 {
		t.Fatalf("after TruncateFullyAndStartAt(100) and reopen: got start %d end %d, want 100 and 100", l.StartOffset(), l.EndOffset())
	}
	_, err := l.Read(99, 100)
	wantErr(t, "Read below the start", err, ErrOffsetOutOfRange)
}

func TestOffsetForTime(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	batch := newBatch(t, 5, 200, 0)
	cfg.SegmentBytes = int64(3*len(batch) + 1)
	l := openTestLog(t, dir, cfg)
	// Batch i holds offsets 5i..5i+4 with timestamps first..first+4; one
	// producer clock goes backwards (batch 4).
	firsts := []int64{1000, 2000, 3000, 4000, 2500, 5000, 6000, 7000}
	for _, ts := range firsts {
		mustAppend(t, l, newBatch(t, 5, 200, ts))
	}
	tests := []struct {
		ts         int64
		wantOffset int64
		wantTime   int64
		wantOK     bool
	}{
		{0, 0, 1000, true},
		{1002, 2, 1002, true},
		{1004, 4, 1004, true},
		{1005, 5, 2000, true},
		{2004, 9, 2004, true},
		// Batch 2 is the first whose maxTimestamp is at least 2502:
		// batch 4's record 22 (2502) is not looked for, as in Kafka.
		{2502, 10, 3000, true},
		{2504, 10, 3000, true},
		{3500, 15, 4000, true},
		{4005, 25, 5000, true},
		{6500, 35, 7000, true},
		{7003, 38, 7003, true},
		{7004, 39, 7004, true},
		{7005, 0, 0, false},
	}
	check := func(when string) {
		t.Helper()
		for _, tt := range tests {
			offset, ts, ok, err := l.OffsetForTime(tt.ts)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.wantOK || (ok && (offset != tt.wantOffset || ts != tt.wantTime)) {
				t.Fatalf("OffsetForTime(%d) %s: got %d, %d, %v, want %d, %d, %v", tt.ts, when, offset, ts, ok, tt.wantOffset, tt.wantTime, tt.wantOK)
			}
		}
	}
	check("while written")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	check("after reopen")
	// Rebuilt time indexes give the same answers.
	for _, base := range segmentFiles(t, dir) {
		removeFile(t, segmentPath(dir, base, timeIndexSuffix))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	check("after rebuilding the time indexes")
}

func TestFlushPolicy(t *testing.T) {
	batch := newBatch(t, 2, 10, 1000)
	t.Run("messages", func(t *testing.T) {
		cfg := testConfig()
		cfg.FlushMessages = 5
		l := openTestLog(t, t.TempDir(), cfg)
		for i, want := range []int64{2, 4, 0, 2, 4, 0} {
			mustAppend(t, l, batch)
			if got := l.unflushed(); got != want {
				t.Fatalf("after append %d: %d records unflushed, want %d", i, got, want)
			}
		}
	})
	t.Run("interval", func(t *testing.T) {
		cfg := testConfig()
		cfg.FlushInterval = time.Second
		l := openTestLog(t, t.TempDir(), cfg)
		clock := newTestClock()
		l.now = clock.Now
		mustAppend(t, l, batch)
		clock.Advance(500 * time.Millisecond)
		mustAppend(t, l, batch)
		if got := l.unflushed(); got != 4 {
			t.Fatalf("before log.flush.interval.ms: %d records unflushed, want 4", got)
		}
		clock.Advance(500 * time.Millisecond)
		mustAppend(t, l, batch)
		if got := l.unflushed(); got != 0 {
			t.Fatalf("after log.flush.interval.ms: %d records unflushed, want 0", got)
		}
		mustAppend(t, l, batch)
		if _, err := l.EnforceRetention(clock.Advance(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := l.unflushed(); got != 0 {
			t.Fatalf("after EnforceRetention past log.flush.interval.ms: %d records unflushed, want 0", got)
		}
	})
	t.Run("flush", func(t *testing.T) {
		l := openTestLog(t, t.TempDir(), testConfig())
		mustAppend(t, l, batch)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := l.unflushed(); got != 0 {
			t.Fatalf("after Flush: %d records unflushed, want 0", got)
		}
	})
}

// TestClosedAndDeleted: a closed log refuses every operation and reopens
// whole; Delete moves its files to a directory marked for deletion and
// frees its name.
func TestClosedAndDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	l, err := Open(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, newBatch(t, 1, 10, 1000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = l.Append(newBatch(t, 1, 10, 1000), 0)
	wantErr(t, "Append after Close", err, ErrClosed)
	_, err = l.Read(0, 100)
	wantErr(t, "Read after Close", err, ErrClosed)
	wantErr(t, "TruncateTo after Close", l.TruncateTo(0), ErrClosed)
	wantErr(t, "Flush after Close", l.Flush(), ErrClosed)
	_, err = l.EnforceRetention(time.Now())
	wantErr(t, "EnforceRetention after Close", err, ErrClosed)

	l, err = Open(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	gone, err := l.Delete()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log directory after Delete: got %v, want it gone", err)
	}
	// The files moved, unsynced and whole, to a name marked for
	// deletion beside the log's, which is free again at once.
	if filepath.Dir(gone) != filepath.Dir(dir) || !strings.HasPrefix(filepath.Base(gone), filepath.Base(dir)+".") || !strings.HasSuffix(gone, DeletedSuffix) {
		t.Fatalf("Delete moved the log to %s, want %s.ID%s", gone, dir, DeletedSuffix)
	}
	if segs, _ := filepath.Glob(filepath.Join(gone, "*"+logSuffix)); len(segs) == 0 {
		t.Fatalf("no segment file in %s after Delete", gone)
	}
	_, err = l.Read(0, 100)
	wantErr(t, "Read after Delete", err, ErrClosed)
	l, err = Open(dir, testConfig())
	if err != nil {
		t.Fatalf("open a log where a deleted one was: %v", err)
	}
	defer l.Close()
	if end := l.EndOffset(); end != 0 {
		t.Fatalf("log opened where a deleted one was ends at %d, want 0", end)
	}
}

// unflushed is the count of records appended since the last fsync.
func (l *Log) unflushed() int64 {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.unflushedRecords
}

// checkIndexes checks every segment's index files in dir against its log
// file: each offset-index entry points at the batch whose last offset it
// holds, and time-index entries increase and name offsets in the segment.
func checkIndexes(t *testing.T, dir string) {
	t.Helper()
	bases := segmentFiles(t, dir)
	for i, base := range bases {
		logBytes := readFile(t, segmentPath(dir, base, logSuffix))
		if _, err := os.Stat(segmentPath(dir, base, indexSuffix)); i == len(bases)-1 && errors.Is(err, os.ErrNotExist) {
			// The active segment's index files are created when it is
			// first rolled, flushed or closed with bytes.
			continue
		}
		idx := readFile(t, segmentPath(dir, base, indexSuffix))
		if len(idx)%offsetEntrySize != 0 {
			t.Fatalf("segment %d: offset index of %d bytes", base, len(idx))
		}
		for i := 0; i < len(idx); i += offsetEntrySize {
			rel := int64(binary.BigEndian.Uint32(idx[i:]))
			pos := int(binary.BigEndian.Uint32(idx[i+4:]))
			if pos+batchHeaderSize > len(logBytes) {
				t.Fatalf("segment %d: index entry %d points at byte %d beyond the %d-byte log", base, i/8, pos, len(logBytes))
			}
			h := parseBatchHeader(logBytes[pos:])
			if h.lastOffset() != base+rel {
				t.Fatalf("segment %d: index entry %d: offset %d at byte %d, batch there ends at %d", base, i/8, base+rel, pos, h.lastOffset())
			}
		}
		tidx := readFile(t, segmentPath(dir, base, timeIndexSuffix))
		if len(tidx)%timeEntrySize != 0 {
			t.Fatalf("segment %d: time index of %d bytes", base, len(tidx))
		}
		var lastTs int64 = -1
		for i := 0; i < len(tidx); i += timeEntrySize {
			ts := int64(binary.BigEndian.Uint64(tidx[i:]))
			if ts <= lastTs {
				t.Fatalf("segment %d: time index entry %d: timestamp %d after %d", base, i/12, ts, lastTs)
			}
			lastTs = ts
		}
	}
}

// equalInt64s reports whether a and b hold the same values (nil equals empty).
func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// repeatTime returns n copies of ts.
func repeatTime(ts time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = ts
	}
	return out
}

// crcOf computes the CRC-32C of the batch b.
func crcOf(b []byte) uint32 {
	h := parseBatchHeader(b)
	return crc32Checksum(b[fieldAttributes:h.size])
}

// withBaseOffset returns a copy of records whose first batch (if it has a
// header) has base offset offset, so follower appends meet the end offset.
func withBaseOffset(records []byte, offset int64) []byte {
	out := append([]byte(nil), records...)
	if len(out) >= 8 {
		setBaseOffset(out, offset)
	}
	return out
}

// indexPath is the offset index beside a .log path.
func indexPath(logPath string) string { return strings.TrimSuffix(logPath, logSuffix) + indexSuffix }

// timeIndexPath is the time index beside a .log path.
func timeIndexPath(logPath string) string {
	return strings.TrimSuffix(logPath, logSuffix) + timeIndexSuffix
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	b := readFile(t, path)
	writeAt(t, path, at, []byte{b[at] ^ 0x40})
}

func writeAt(t *testing.T, path string, at int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, at); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDescriptorsOnlyForSegmentsInUse checks that a log holds a
// descriptor for a segment's .log file only once the file was used (none
// for its index files), and releases them to its pool on Close.
func TestDescriptorsOnlyForSegmentsInUse(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.Files = NewFilePool(1000)
	batch := newBatch(t, 5, 100, 1000)
	cfg.SegmentBytes = int64(len(batch))
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustAppend(t, l, batch)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before := openDescriptors(t)
	l = openTestLog(t, dir, cfg)
	// A clean Open reads only the tail of the last segment.
	if got := openDescriptors(t) - before; got != 1 {
		t.Fatalf("a log of 10 segments opened cleanly holds %d file descriptors, want 1", got)
	}
	readAllFrom(t, l, 0)
	if got := openDescriptors(t) - before; got != 10 {
		t.Fatalf("after reading its 10 segments: %d file descriptors, want 10", got)
	}
	mustAppend(t, l, batch)
	if got := openDescriptors(t) - before; got != 11 {
		t.Fatalf("after a roll to 11 segments: %d file descriptors, want 11", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openDescriptors(t) - before; got != 0 {
		t.Fatalf("after Close: %d file descriptors, want 0", got)
	}
}

// openDescriptors counts the file descriptors the process holds.
func openDescriptors(tb testing.TB) int {
	tb.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatalf("count file descriptors: %v", err)
	}
	return len(entries)
}

func TestDamagedEarlierSegmentFailsReads(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	batch := newBatch(t, 5, 100, 1000)
	cfg.SegmentBytes = int64(3 * len(batch))
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		mustAppend(t, l, batch) // Segments at 0 and 15.
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Earlier segments are trusted on Open; a damaged one makes reads of
	// it fail rather than return garbage or loop.
	writeAt(t, segmentPath(dir, 0, logSuffix), int64(len(batch))+fieldBatchLength, []byte{0xff, 0xff, 0xff, 0xf4})
	l = openTestLog(t, dir, cfg)
	if _, err := l.Read(5, 1<<20); err == nil {
		t.Fatalf("Read of a damaged batch: got nil error")
	}
	if _, err := l.Read(0, 1<<20); err == nil {
		t.Fatalf("Read through a damaged batch: got nil error")
	}
	if _, err := l.Read(15, 1<<20); err != nil {
		t.Fatalf("Read of the intact segment: %v", err)
	}
}

// TestMaxTimestamp finds the batch with the largest timestamp below a
// high watermark, over whole segments (from their tails) and the one the
// watermark falls in (scanned), with a producer clock that goes back.
func TestMaxTimestamp(t *testing.T) {
	cfg := testConfig()
	batch := newBatch(t, 5, 200, 0)
	cfg.SegmentBytes = int64(3*len(batch) + 1)
	l := openTestLog(t, t.TempDir(), cfg)
	// Batch i holds offsets 5i..5i+4 with timestamps first..first+4, in
	// two segments of 3 and 2 batches.
	for _, first := range []int64{1000, 4000, 2500, 3000, 2000} {
		mustAppend(t, l, newBatch(t, 5, 200, first))
	}
	for _, tt := range []struct {
		upTo, wantOffset, wantTime int64
		wantOK                     bool
	}{
		{0, 0, 0, false},
		{4, 0, 0, false},
		{5, 4, 1004, true},
		{7, 4, 1004, true},
		{10, 9, 4004, true},
		{20, 9, 4004, true},
		{25, 9, 4004, true},
		{100, 9, 4004, true},
	} {
		offset, ts, ok, err := l.MaxTimestamp(tt.upTo)
		if err != nil {
			t.Fatal(err)
		}
		if ok != tt.wantOK || (ok && (offset != tt.wantOffset || ts != tt.wantTime)) {
			t.Errorf("MaxTimestamp(%d): got %d, %d, %v, want %d, %d, %v", tt.upTo, offset, ts, ok, tt.wantOffset, tt.wantTime, tt.wantOK)
		}
	}
}

// TestSetConfig: a running log takes a new segment size and retention at
// once (the next append rolls by the new size, the next retention pass
// deletes by the new limit), refuses an invalid config keeping its own,
// and keeps the index interval it was opened with.
func TestSetConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	batch := newBatch(t, 10, 100, 1000)
	l := openTestLog(t, dir, cfg)
	for range 6 {
		mustAppend(t, l, batch)
	}
	if bases := segmentFiles(t, dir); len(bases) != 1 {
		t.Fatalf("segments before: got %v, want one", bases)
	}
	bad := cfg
	bad.SegmentBytes = 1
	if err := l.SetConfig(bad); err == nil || !strings.Contains(err.Error(), "log.segment.bytes") {
		t.Fatalf("SetConfig with segment bytes 1: got %v, want an error naming log.segment.bytes", err)
	}
	next := cfg
	next.SegmentBytes = int64(2*len(batch) + 10) // Two batches per segment.
	next.IndexIntervalBytes = 1
	if err := l.SetConfig(next); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	for range 4 {
		mustAppend(t, l, batch)
	}
	if bases := segmentFiles(t, dir); !equalInt64s(bases, []int64{0, 60, 80}) {
		t.Fatalf("segments after a smaller log.segment.bytes: got %v, want [0 60 80]", bases)
	}
	if l.cfg.IndexIntervalBytes != cfg.IndexIntervalBytes {
		t.Fatalf("index interval: got %d, want %d as opened", l.cfg.IndexIntervalBytes, cfg.IndexIntervalBytes)
	}
	next.RetentionBytes = 0
	if err := l.SetConfig(next); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	if _, err := l.EnforceRetention(time.Now()); err != nil {
		t.Fatalf("EnforceRetention: %v", err)
	}
	if got := l.StartOffset(); got != 80 {
		t.Fatalf("log start after retention.bytes 0: got %d, want 80 (only the active segment kept)", got)
	}
}

// TestIdleLogHasOneSegmentFile checks that a log created and left empty
// holds one segment file (no index files) through a close and a reopen,
// and that its first bytes bring the index files.
func TestIdleLogHasOneSegmentFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openTestLog(t, dir, cfg)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, cfg)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(segmentPath(dir, 0, suffix)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s file of an idle log: got %v, want none", suffix, err)
		}
	}
	mustAppend(t, l, newBatch(t, 5, 100, time.Now().UnixMilli()))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, dir)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(segmentPath(dir, 0, suffix)); err != nil {
			t.Fatalf("%s file after an append and Close: %v", suffix, err)
		}
	}
	l = openTestLog(t, dir, cfg)
	if got := readAllFrom(t, l, 0); len(got) != 1 {
		t.Fatalf("reopened log: %d batches, want 1", len(got))
	}
}

// TestReadAtTheTail reads every offset of the last batch, the one a
// caught-up follower asks for, after appends (of one batch or two), after
// a truncation and after a reopen, and gets the batch holding it as the
// file has it; a read bounded below that batch's end gets nothing.
func TestReadAtTheTail(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, testConfig())
	check := func(when string) {
		t.Helper()
		end := l.EndOffset()
		all := readAllFrom(t, l, l.StartOffset())
		last := all[len(all)-1]
		for off := last.baseOffset; off < end; off++ {
			b, err := l.Read(off, 1<<20)
			if err != nil {
				t.Fatalf("%s: Read(%d): %v", when, off, err)
			}
			got := decodeBatches(t, b)
			if len(got) != 1 || got[0].baseOffset != last.baseOffset || !bytes.Equal(got[0].raw, last.raw) {
				t.Fatalf("%s: Read(%d) = %d batches from %v, want the last batch at %d", when, off, len(got), got, last.baseOffset)
			}
			if b, err := l.ReadUpTo(off, 1<<20, end-1); err != nil || len(b) != 0 {
				t.Fatalf("%s: ReadUpTo(%d, up to %d) = %d bytes, %v; want none", when, off, end-1, len(b), err)
			}
		}
	}
	for i := range 20 {
		records := newBatch(t, 1+i%3, 50, int64(i))
		if i%4 == 3 { // two batches in one append
			records = append(records, newBatch(t, 2, 40, int64(i))...)
		}
		mustAppend(t, l, records)
		check(fmt.Sprintf("after append %d", i))
	}
	if err := l.TruncateTo(l.EndOffset() - 4); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	check("after a truncation")
	mustAppend(t, l, newBatch(t, 2, 50, 100))
	check("after an append past the truncation")
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	l = openTestLog(t, dir, testConfig())
	check("after a reopen")
	mustAppend(t, l, newBatch(t, 3, 50, 200))
	check("after an append past the reopen")
}
