package log

import (
	"errors"
	"testing"
	"time"
)

// TestMarkerRoundTrip builds commit and abort markers, appends them to a
// log as a leader appends a coordinator's marker, and reads them back
// from the log: a control batch of the producer, with the transactional
// and control attributes, that readers of records skip.
func TestMarkerRoundTrip(t *testing.T) {
	l := openTestLog(t, t.TempDir(), DefaultConfig())
	now := time.UnixMilli(1_700_000_000_000)
	for i, want := range []Marker{
		{ProducerID: 4000, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 7},
		{ProducerID: 4001, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 8},
	} {
		batch := BuildMarker(want.ProducerID, want.ProducerEpoch, want.CoordinatorEpoch, want.Commit, now)
		got, err := ReadMarker(batch)
		if err != nil || got != want {
			t.Fatalf("marker %d: got %+v %v, want %+v", i, got, err, want)
		}
		var info BatchInfo
		if err := EachBatch(batch, true, func(b BatchInfo) { info = b }); err != nil {
			t.Fatalf("marker %d: %v", i, err)
		}
		if info.Attributes&(attrTransactional|attrControl) != attrTransactional|attrControl || info.ProducerID != want.ProducerID ||
			info.ProducerEpoch != want.ProducerEpoch || info.MaxTimestamp != now.UnixMilli() {
			t.Fatalf("marker %d header: %+v", i, info)
		}
		if _, err := l.AppendAsFollower(withBaseOffset(batch, l.EndOffset())); err != nil {
			t.Fatalf("append marker %d: %v", i, err)
		}
	}
	data, err := l.ReadUpTo(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	if err := EachRecord(data, func(int64, []byte, []byte) error { records++; return nil }); err != nil || records != 0 {
		t.Fatalf("records read past the markers: %d %v, want none", records, err)
	}
}

// TestReadMarkerRefuses: a batch that is not a control batch, a control
// record of an unknown type, and a corrupt batch are refused.
func TestReadMarkerRefuses(t *testing.T) {
	now := time.Now()
	if _, err := ReadMarker(BuildBatch([]KV{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 1}}}, now)); !errors.Is(err, ErrCorruptMessage) {
		t.Errorf("a data batch: got %v, want ErrCorruptMessage", err)
	}
	odd := buildBatchAs([]KV{{Key: []byte{0, 0, 0, 9}, Value: []byte{0, 0, 0, 0, 0, 1}}}, now, attrTransactional|attrControl, 1, 0)
	if _, err := ReadMarker(odd); !errors.Is(err, ErrCorruptMessage) {
		t.Errorf("control type 9: got %v, want ErrCorruptMessage", err)
	}
	bad := BuildMarker(1, 0, 0, true, now)
	bad[len(bad)-1] ^= 0xff
	if _, err := ReadMarker(bad); !errors.Is(err, ErrCorruptMessage) {
		t.Errorf("a marker with a bad CRC: got %v, want ErrCorruptMessage", err)
	}
}
