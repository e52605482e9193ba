package replication

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/replication/log"
)

// The v2 record batch header fields the tests write (Kafka's
// DefaultRecordBatch), to build and damage raw batches.
const (
	batchFieldLength      = 8  // int32: bytes after this field
	batchFieldMagic       = 16 // int8
	batchFieldCRC         = 17 // uint32: CRC-32C of attributes..end
	batchFieldAttributes  = 21 // int16
	batchFieldRecordCount = 57 // int32

	// batchHeaderLen is the size of a v2 batch without its records.
	batchHeaderLen = 61
	// batchLengthOverhead is the bytes before the records that the length
	// field does not count.
	batchLengthOverhead = 12
)

// crcTable is the CRC-32C table of the v2 batch checksum.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// spec describes a batch of n records from producer id at epoch, starting
// at sequence seq.
type spec struct {
	id    int64
	epoch int16
	seq   int32
	n     int32
}

// producerBatch encodes s as a producer sends it, with franz-go's kmsg:
// base offset 0, n records of valueSize bytes, maxTimestamp ts, and a
// valid CRC-32C.
func producerBatch(tb testing.TB, s spec, valueSize int, ts int64) []byte {
	tb.Helper()
	var records []byte
	for i := range s.n {
		r := kmsg.Record{
			OffsetDelta: i,
			Key:         fmt.Appendf(nil, "key-%d", i),
			Value:       bytes.Repeat([]byte{'v'}, valueSize),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      s.n - 1,
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           s.id,
		ProducerEpoch:        s.epoch,
		FirstSequence:        s.seq,
		NumRecords:           s.n,
		Records:              records,
	}
	rb.Length = int32(batchHeaderLen - batchLengthOverhead + len(records))
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[batchFieldCRC:], crc32.Checksum(raw[batchFieldAttributes:], crcTable))
	return raw
}

// metas parses the batches of specs as one produce request's records.
func metas(tb testing.TB, specs ...spec) []BatchMeta {
	tb.Helper()
	var records []byte
	for _, s := range specs {
		records = append(records, producerBatch(tb, s, 8, 1000)...)
	}
	m, err := ParseBatchMeta(records)
	if err != nil {
		tb.Fatalf("parse %v: %v", specs, err)
	}
	return m
}

// offsets is the log offsets an appended batch got: first and last.
type offsets struct{ first, last int64 }

// appendSpecs records specs as appended one by one from offset 100, as a
// log would place them, and returns each batch's offsets.
func appendSpecs(tb testing.TB, p *Producers, specs ...spec) []offsets {
	tb.Helper()
	next := int64(100)
	var out []offsets
	for _, s := range specs {
		p.Appended(metas(tb, s), next)
		out = append(out, offsets{next, next + int64(s.n) - 1})
		next += int64(s.n)
	}
	return out
}

// fiveAfterOne is producer 7's history in most cases: six batches of two
// records at epoch 3, sequences 0..11, so the last five are 2..11.
var fiveAfterOne = []spec{{7, 3, 0, 2}, {7, 3, 2, 2}, {7, 3, 4, 2}, {7, 3, 6, 2}, {7, 3, 8, 2}, {7, 3, 10, 2}}

func TestProducersCheck(t *testing.T) {
	const maxSeq = math.MaxInt32
	for _, tc := range []struct {
		name    string
		history []spec
		request []spec
		// dup is the index in history of the batch Check must return.
		dup int
		err error
	}{
		{"in order after the last batch", fiveAfterOne, []spec{{7, 3, 12, 1}}, -1, nil},
		{"in order first batch of a known producer", []spec{{7, 3, 0, 1}}, []spec{{7, 3, 1, 5}}, -1, nil},
		{"retry of the 5th from last", fiveAfterOne, []spec{{7, 3, 2, 2}}, 1, nil},
		{"retry of the 4th from last", fiveAfterOne, []spec{{7, 3, 4, 2}}, 2, nil},
		{"retry of the 3rd from last", fiveAfterOne, []spec{{7, 3, 6, 2}}, 3, nil},
		{"retry of the 2nd from last", fiveAfterOne, []spec{{7, 3, 8, 2}}, 4, nil},
		{"retry of the last", fiveAfterOne, []spec{{7, 3, 10, 2}}, 5, nil},
		{"retry of the 6th from last is out of order", fiveAfterOne, []spec{{7, 3, 0, 2}}, -1, ErrOutOfOrderSequence},
		{"retained start with another length is out of order", fiveAfterOne, []spec{{7, 3, 10, 1}}, -1, ErrOutOfOrderSequence},
		{"gap", fiveAfterOne, []spec{{7, 3, 13, 1}}, -1, ErrOutOfOrderSequence},
		{"reorder: next but one arrives first", fiveAfterOne, []spec{{7, 3, 14, 2}}, -1, ErrOutOfOrderSequence},
		{"epoch bump starting at 0", fiveAfterOne, []spec{{7, 4, 0, 3}}, -1, nil},
		{"epoch bump not starting at 0", fiveAfterOne, []spec{{7, 4, 12, 1}}, -1, ErrOutOfOrderSequence},
		{"older epoch is fenced", fiveAfterOne, []spec{{7, 2, 12, 1}}, -1, ErrProducerFenced},
		{"retry from before an epoch bump is fenced", []spec{{7, 3, 0, 2}, {7, 4, 0, 1}}, []spec{{7, 3, 0, 2}}, -1, ErrProducerFenced},
		{"new epoch's batches are retained", []spec{{7, 3, 0, 2}, {7, 4, 0, 1}}, []spec{{7, 4, 0, 1}}, 1, nil},
		{"old epoch's sequence is forgotten", []spec{{7, 3, 0, 2}, {7, 4, 0, 1}}, []spec{{7, 4, 2, 1}}, -1, ErrOutOfOrderSequence},
		{"unknown producer at a non-zero sequence", fiveAfterOne, []spec{{8, 0, 42, 1}}, -1, nil},
		{"unknown producer at any epoch", nil, []spec{{8, 9, 7, 3}, {8, 9, 100, 1}}, -1, nil},
		{"other producers do not interfere", []spec{{7, 3, 0, 2}, {8, 0, 0, 5}}, []spec{{7, 3, 2, 1}, {8, 0, 5, 1}}, -1, nil},
		{"no producer id is never checked", []spec{{-1, -1, -1, 2}}, []spec{{-1, -1, -1, 2}, {-1, -1, 99, 1}}, -1, nil},
		{"no producer id next to a checked one", fiveAfterOne, []spec{{-1, -1, -1, 1}, {7, 3, 13, 1}}, -1, ErrOutOfOrderSequence},
		{"a request's batches follow each other", fiveAfterOne, []spec{{7, 3, 12, 2}, {7, 3, 14, 1}}, -1, nil},
		{"a gap inside a request", fiveAfterOne, []spec{{7, 3, 12, 2}, {7, 3, 15, 1}}, -1, ErrOutOfOrderSequence},
		{"an epoch bump inside a request", fiveAfterOne, []spec{{7, 3, 12, 2}, {7, 4, 0, 1}, {7, 4, 1, 1}}, -1, nil},
		{"a request's batch repeated is out of order, not a duplicate", fiveAfterOne, []spec{{7, 3, 12, 2}, {7, 3, 12, 2}}, -1, ErrOutOfOrderSequence},
		{"a later batch that is a retry answers the request", fiveAfterOne, []spec{{7, 3, 12, 2}, {7, 3, 10, 2}}, 5, nil},
		{"a coordinator's batch without a sequence: the epoch only", fiveAfterOne, []spec{{7, 3, -1, 2}}, -1, nil},
		{"a coordinator's batch is never a duplicate", []spec{{7, 3, -1, 1}}, []spec{{7, 3, -1, 1}}, -1, nil},
		{"a coordinator's batch of a new epoch", fiveAfterOne, []spec{{7, 4, -1, 1}}, -1, nil},
		{"a coordinator's batch of an older epoch is fenced", fiveAfterOne, []spec{{7, 2, -1, 1}}, -1, ErrProducerFenced},
		{"wrap: after MaxInt32 comes 0", []spec{{7, 3, maxSeq - 1, 2}}, []spec{{7, 3, 0, 1}}, -1, nil},
		{"wrap: MaxInt32+1 is not a sequence", []spec{{7, 3, maxSeq - 1, 2}}, []spec{{7, 3, 1, 1}}, -1, ErrOutOfOrderSequence},
		{"wrap: a batch across MaxInt32", []spec{{7, 3, maxSeq - 3, 2}}, []spec{{7, 3, maxSeq - 1, 4}}, -1, nil},
		{"wrap: after a batch across MaxInt32", []spec{{7, 3, maxSeq - 3, 2}, {7, 3, maxSeq - 1, 4}}, []spec{{7, 3, 2, 1}}, -1, nil},
		{"wrap: retry of a batch across MaxInt32", []spec{{7, 3, maxSeq - 3, 2}, {7, 3, maxSeq - 1, 4}}, []spec{{7, 3, maxSeq - 1, 4}}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProducers()
			placed := appendSpecs(t, p, tc.history...)
			before := snapshot(p)
			dup, err := p.Check(metas(t, tc.request...))
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("got error %v, want %v", err, tc.err)
			}
			switch {
			case tc.dup < 0 && dup != nil:
				t.Fatalf("got duplicate %+v, want none", *dup)
			case tc.dup >= 0 && dup == nil:
				t.Fatalf("got no duplicate, want batch %d of the history at %v", tc.dup, placed[tc.dup])
			case tc.dup >= 0:
				want := tc.history[tc.dup]
				if got := (offsets{dup.FirstOffset, dup.LastOffset}); got != placed[tc.dup] {
					t.Fatalf("got duplicate at offsets %v, want %v", got, placed[tc.dup])
				}
				if dup.ProducerID != want.id || dup.ProducerEpoch != want.epoch || dup.BaseSequence != want.seq {
					t.Fatalf("got duplicate %+v, want %+v", *dup, want)
				}
			}
			if after := snapshot(p); !reflect.DeepEqual(after, before) {
				t.Fatalf("Check changed the state: got %v, want %v", after, before)
			}
		})
	}
}

// snapshot copies the state, for comparisons.
func snapshot(p *Producers) map[int64]producerEntry {
	out := make(map[int64]producerEntry, len(p.entries))
	for id, e := range p.entries {
		out[id] = producerEntry{epoch: e.epoch, batches: slices.Clone(e.batches)}
	}
	return out
}

// TestProducersRetriesOfTheSameSequence follows one producer through a
// run of produces, each checked and then appended as the broker does, and
// retries every batch: those still among the last five are answered with
// their offsets, older ones are out of order, and nothing is recorded
// twice.
func TestProducersRetriesOfTheSameSequence(t *testing.T) {
	p := NewProducers()
	next := int64(0)
	var placed []offsets
	for i := range int32(12) {
		batch := metas(t, spec{1, 0, 3 * i, 3})
		if dup, err := p.Check(batch); dup != nil || err != nil {
			t.Fatalf("batch %d: got (%v, %v), want it accepted", i, dup, err)
		}
		p.Appended(batch, next)
		placed = append(placed, offsets{next, next + 2})
		next += 3
		for j := int32(0); j <= i; j++ {
			dup, err := p.Check(metas(t, spec{1, 0, 3 * j, 3}))
			retained := i-j < ProducerBatchesRetained
			switch {
			case retained && (err != nil || dup == nil || (offsets{dup.FirstOffset, dup.LastOffset}) != placed[j]):
				t.Fatalf("after batch %d, retry of %d: got (%v, %v), want the duplicate at %v", i, j, dup, err, placed[j])
			case !retained && (dup != nil || !errors.Is(err, ErrOutOfOrderSequence)):
				t.Fatalf("after batch %d, retry of %d: got (%v, %v), want %v", i, j, dup, err, ErrOutOfOrderSequence)
			}
		}
	}
	if got := len(p.entries[1].batches); got != ProducerBatchesRetained {
		t.Fatalf("got %d retained batches, want %d", got, ProducerBatchesRetained)
	}
}

func TestParseBatchMeta(t *testing.T) {
	a := producerBatch(t, spec{5, 2, math.MaxInt32 - 1, 4}, 10, 1234)
	b := producerBatch(t, spec{-1, -1, -1, 1}, 10, 99)
	got, err := ParseBatchMeta(append(slices.Clone(a), b...))
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchMeta{
		{ProducerID: 5, ProducerEpoch: 2, BaseSequence: math.MaxInt32 - 1, LastSequence: 1, FirstOffset: 0, LastOffset: 3, MaxTimestamp: 1234},
		{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1, FirstOffset: 0, LastOffset: 0, MaxTimestamp: 99},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}

	for _, commit := range []bool{false, true} {
		marker := log.BuildMarker(5, 2, 7, commit, time.UnixMilli(1234))
		if got, err := ParseBatchMeta(marker); err != nil || !got[0].Transactional || !got[0].Control || got[0].Commit != commit {
			t.Fatalf("got %+v, %v, want a transactional control batch, commit %v", got, err, commit)
		}
	}
	// A control batch whose control record is not a marker's is corrupt.
	attrs := slices.Clone(a)
	binary.BigEndian.PutUint16(attrs[batchFieldAttributes:], attrTransactional|attrControl)
	binary.BigEndian.PutUint32(attrs[batchFieldCRC:], crc32.Checksum(attrs[batchFieldAttributes:], crcTable))
	if got, err := ParseBatchMeta(attrs); !errors.Is(err, log.ErrCorruptMessage) {
		t.Fatalf("control batch of data records: got %+v, %v, want ErrCorruptMessage", got, err)
	}

	badCRC := slices.Clone(a)
	badCRC[len(badCRC)-1] ^= 1
	magic1 := slices.Clone(a)
	magic1[batchFieldMagic] = 1
	long := slices.Clone(a)
	binary.BigEndian.PutUint32(long[batchFieldLength:], uint32(len(a)))
	count := slices.Clone(a)
	binary.BigEndian.PutUint32(count[batchFieldRecordCount:], 3)
	binary.BigEndian.PutUint32(count[batchFieldCRC:], crc32.Checksum(count[batchFieldAttributes:], crcTable))
	if got, err := ParseBatchHeaders(badCRC); err != nil || got[0].BaseSequence != math.MaxInt32-1 {
		t.Fatalf("ParseBatchHeaders of a batch with a bad crc: got (%+v, %v), want it parsed", got, err)
	}
	for _, tc := range []struct {
		name    string
		records []byte
		want    error
	}{
		{"empty", nil, log.ErrCorruptMessage},
		{"shorter than a header", a[:batchHeaderLen-1], log.ErrCorruptMessage},
		{"torn second batch", append(slices.Clone(a), b[:len(b)-1]...), log.ErrCorruptMessage},
		{"bad crc", badCRC, log.ErrCorruptMessage},
		{"magic 1", magic1, log.ErrUnsupportedMagic},
		{"length past the end", long, log.ErrCorruptMessage},
		{"record count not last offset delta + 1", count, log.ErrCorruptMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := ParseBatchMeta(tc.records); !errors.Is(err, tc.want) {
				t.Fatalf("got (%v, %v), want %v", got, err, tc.want)
			}
		})
	}
}

// openTestLog opens a log in a fresh directory with small segments, so
// Load reads across segments and across its 1 MiB chunks.
func openTestLog(t *testing.T) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 256 << 10
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestProducersLoad writes two producers' batches (one bumping its epoch
// midway) and a plain producer's to a real log, through Check, Append and
// Appended as the leader does, then rebuilds the state with Load and
// wants the same; over 1 MiB of batches so Load reads several chunks and
// segments. Then it truncates the log and checks TruncateTo against Load.
func TestProducersLoad(t *testing.T) {
	l := openTestLog(t)
	leader := NewProducers()
	seq := map[int64]int32{}
	epoch := map[int64]int16{10: 0, 11: 5}
	for i := range 60 {
		id := int64(10 + i%3)
		if id == 12 {
			id = NoProducerID
		}
		if i == 31 {
			epoch[11], seq[11] = 6, 0
		}
		n := int32(1 + i%4)
		s := spec{id, epoch[id], seq[id], n}
		if id == NoProducerID {
			s.epoch, s.seq = NoProducerEpoch, NoSequence
		}
		records := producerBatch(t, s, 24<<10/int(n), int64(1000+i))
		appendAccepted(t, leader, l, records, fmt.Sprintf("batch %d %+v", i, s))
		seq[id] += n
	}
	if l.EndOffset() <= 0 {
		t.Fatal("nothing appended")
	}
	loaded := NewProducers()
	loaded.Appended(metas(t, spec{99, 0, 0, 1}), 0) // Load forgets what was there.
	if err := l.LoadProducers(loaded); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshot(loaded), snapshot(leader); !reflect.DeepEqual(got, want) {
		t.Fatalf("Load: got %v, want %v", got, want)
	}
	if got := loaded.Len(); got != 2 {
		t.Fatalf("got %d producers, want 2", got)
	}

	// Cut the last two batches of producers 10 and 11; each keeps three,
	// so TruncateTo is exact without reading the log.
	cut := leader.entries[10].batches[3].FirstOffset
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	truncated := NewProducers()
	if err := l.LoadProducers(truncated); err != nil {
		t.Fatal(err)
	}
	if reload := leader.TruncateTo(cut); reload {
		t.Fatal("TruncateTo asked for a reload, want none: every producer keeps a batch")
	}
	for id, e := range truncated.entries {
		kept := leader.entries[id]
		if kept.epoch != e.epoch || kept.lastSequence() != e.lastSequence() {
			t.Fatalf("producer %d after TruncateTo: epoch %d sequence %d, Load says %d and %d",
				id, kept.epoch, kept.lastSequence(), e.epoch, e.lastSequence())
		}
		if !slices.Equal(kept.batches, e.batches[len(e.batches)-len(kept.batches):]) {
			t.Fatalf("producer %d after TruncateTo: got batches %v, want a suffix of %v", id, kept.batches, e.batches)
		}
	}
	if got, want := slices.Sorted(maps.Keys(leader.entries)), slices.Sorted(maps.Keys(truncated.entries)); !slices.Equal(got, want) {
		t.Fatalf("producers after TruncateTo: got %v, want %v", got, want)
	}

	// Cutting below every retained batch of a producer needs a reload.
	if reload := leader.TruncateTo(leader.entries[11].batches[0].FirstOffset); !reload {
		t.Fatal("TruncateTo forgot producer 11 without asking for a reload")
	}
}

// TestProducersFollowerMatchesLeader appends the leader's batches as a
// follower copies them (AppendAsFollower, then Appended with the batches'
// own offsets), so a follower that becomes leader answers retries as the
// old leader would.
func TestProducersFollowerMatchesLeader(t *testing.T) {
	leaderLog, followerLog := openTestLog(t), openTestLog(t)
	leader, follower := NewProducers(), NewProducers()
	for i := range int32(8) {
		records := producerBatch(t, spec{3, 1, 2 * i, 2}, 16, 5)
		batch, err := ParseBatchMeta(records)
		if err != nil {
			t.Fatal(err)
		}
		res, err := leaderLog.Append(records, 1)
		if err != nil {
			t.Fatal(err)
		}
		leader.Appended(batch, res.BaseOffset)
		fetched, err := leaderLog.Read(res.BaseOffset, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		copied, err := ParseBatchHeaders(fetched)
		if err != nil {
			t.Fatal(err)
		}
		fres, err := followerLog.AppendAsFollower(fetched)
		if err != nil {
			t.Fatal(err)
		}
		follower.Appended(copied, fres.BaseOffset)
	}
	if got, want := snapshot(follower), snapshot(leader); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower: got %v, want %v", got, want)
	}
	dup, err := follower.Check(metas(t, spec{3, 1, 14, 2}))
	if err != nil || dup == nil || dup.FirstOffset != 14 || dup.LastOffset != 15 {
		t.Fatalf("retry at the new leader: got (%v, %v), want the duplicate at offsets 14..15", dup, err)
	}
}

// TestProducersTruncateTo cuts producer 7's six single-record batches at
// offsets 100..105 (the last five retained) and producer 8's one batch
// at 106..107, at every offset around them.
func TestProducersTruncateTo(t *testing.T) {
	for _, tc := range []struct {
		offset int64
		// kept is how many of producer 7's batches stay retained; 0
		// means it is forgotten.
		kept   int
		keeps8 bool
		reload bool
	}{
		{108, 5, true, false},
		{107, 5, false, true},
		{106, 5, false, true},
		{105, 4, false, true},
		{102, 1, false, true},
		{101, 0, false, true},
		{0, 0, false, true},
	} {
		t.Run(fmt.Sprint(tc.offset), func(t *testing.T) {
			p := NewProducers()
			appendSpecs(t, p, spec{7, 0, 0, 1}, spec{7, 0, 1, 1}, spec{7, 0, 2, 1}, spec{7, 0, 3, 1}, spec{7, 0, 4, 1}, spec{7, 0, 5, 1}, spec{8, 0, 0, 2})
			if got := p.TruncateTo(tc.offset); got != tc.reload {
				t.Fatalf("got reload %v, want %v", got, tc.reload)
			}
			if _, ok := p.entries[8]; ok != tc.keeps8 {
				t.Fatalf("producer 8 kept: got %v, want %v", ok, tc.keeps8)
			}
			e := p.entries[7]
			switch {
			case tc.kept == 0 && e != nil:
				t.Fatalf("producer 7: got %d batches, want it forgotten", len(e.batches))
			case tc.kept > 0 && (e == nil || len(e.batches) != tc.kept):
				t.Fatalf("producer 7: got %v, want %d batches", e, tc.kept)
			case tc.kept > 0 && e.lastSequence() != int32(tc.kept):
				t.Fatalf("producer 7: got last sequence %d, want %d", e.lastSequence(), tc.kept)
			}
		})
	}
}

// TestProducersExpire forgets the producers whose last batch is older
// than the cut and keeps the others, however old their earlier batches.
func TestProducersExpire(t *testing.T) {
	p := NewProducers()
	for _, b := range []struct {
		id int64
		ts int64
	}{{1, 100}, {2, 200}, {1, 300}, {3, 150}} {
		records := producerBatch(t, spec{b.id, 0, int32(len(p.entries)), 1}, 1, b.ts)
		batch, err := ParseBatchMeta(records)
		if err != nil {
			t.Fatal(err)
		}
		p.Appended(batch, 0)
	}
	if got := p.Expire(200); got != 1 {
		t.Fatalf("Expire(200): got %d expired, want 1 (producer 3)", got)
	}
	if got := slices.Sorted(maps.Keys(p.entries)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("got producers %v, want [1 2]", got)
	}
	// An expired producer is unknown again: any sequence is accepted.
	if dup, err := p.Check(metas(t, spec{3, 0, 77, 1})); dup != nil || err != nil {
		t.Fatalf("expired producer: got (%v, %v), want it accepted", dup, err)
	}
}

// TestProducersActive lists the producers a partition remembers, by id,
// with the epoch, last sequence and last timestamp of each one's latest
// batch; a new epoch restarts the sequence.
func TestProducersActive(t *testing.T) {
	p := NewProducers()
	if got := p.Active(); len(got) != 0 {
		t.Fatalf("Active of an empty state: got %v, want none", got)
	}
	for _, b := range []struct {
		s  spec
		ts int64
	}{{spec{9, 0, 0, 3}, 100}, {spec{4, 2, 0, 1}, 150}, {spec{9, 0, 3, 2}, 200}, {spec{4, 3, 0, 2}, 250}} {
		batch, err := ParseBatchMeta(producerBatch(t, b.s, 1, b.ts))
		if err != nil {
			t.Fatal(err)
		}
		p.Appended(batch, 0)
	}
	want := []ProducerState{
		{ProducerID: 4, ProducerEpoch: 3, LastSequence: 1, LastTimestamp: 250, CurrentTxnStartOffset: -1, CoordinatorEpoch: -1},
		{ProducerID: 9, ProducerEpoch: 0, LastSequence: 4, LastTimestamp: 200, CurrentTxnStartOffset: -1, CoordinatorEpoch: -1},
	}
	if got := p.Active(); !slices.Equal(got, want) {
		t.Fatalf("Active: got %+v, want %+v", got, want)
	}
}

func BenchmarkProducersCheck(b *testing.B) {
	p := NewProducers()
	for id := range int64(1000) {
		p.Appended(metas(b, spec{id, 0, 0, 5}), id*5)
	}
	batch := metas(b, spec{500, 0, 5, 5})
	b.ReportAllocs()
	for b.Loop() {
		if dup, err := p.Check(batch); dup != nil || err != nil {
			b.Fatal(dup, err)
		}
	}
}

// BenchmarkParseBatchMeta measures the header parse and CRC-32C check of
// a 1 MiB produce.
func BenchmarkParseBatchMeta(b *testing.B) {
	records := producerBatch(b, spec{1, 0, 0, 64}, 16<<10, 1)
	b.SetBytes(int64(len(records)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseBatchMeta(records); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProducersLoad measures rebuilding the state from a 64 MiB log
// of 16 KiB batches of 100 producers.
func BenchmarkProducersLoad(b *testing.B) {
	cfg := log.DefaultConfig()
	l, err := log.Open(b.TempDir(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	seq := map[int64]int32{}
	var size int64
	for i := 0; size < 64<<20; i++ {
		id := int64(i % 100)
		records := producerBatch(b, spec{id, 0, seq[id], 16}, 1<<10, 1)
		if _, err := l.Append(records, 0); err != nil {
			b.Fatal(err)
		}
		seq[id] += 16
		size += int64(len(records))
	}
	p := NewProducers()
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		if err := l.LoadProducers(p); err != nil {
			b.Fatal(err)
		}
	}
}

// appendAccepted checks records as a leader does (what must be a new
// batch of its producer), appends them to l and records them in p,
// failing the test, named by what, if p refuses them.
func appendAccepted(t *testing.T, p *Producers, l *log.Log, records []byte, what string) {
	t.Helper()
	batch, err := ParseBatchMeta(records)
	if err != nil {
		t.Fatal(err)
	}
	if dup, err := p.Check(batch); dup != nil || err != nil {
		t.Fatalf("%s: got (%v, %v), want it accepted", what, dup, err)
	}
	res, err := l.Append(records, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Appended(batch, res.BaseOffset)
}
