package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeBatch is an uncompressed v2 batch of values at base (the CRC is
// not checked by ReadLog and left zero).
func encodeBatch(base int64, epoch int32, values ...string) []byte {
	var records []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // Length 0 encodes in one byte.
		records = append(records, r.AppendTo(nil)...)
	}
	b := kmsg.RecordBatch{
		FirstOffset: base, PartitionLeaderEpoch: epoch, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: records,
	}
	b.Length = int32(49 + len(records))
	return b.AppendTo(nil)
}

// TestReadLog: records of two segments are read in offset order with
// their epochs; a torn tail is ignored; a missing partition is empty.
func TestReadLog(t *testing.T) {
	b := &Broker{ID: 1, DataDir: t.TempDir()}
	dir := filepath.Join(b.DataDir, "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := append(encodeBatch(0, 0, "a", "b"), encodeBatch(2, 1, "c")...)
	torn := encodeBatch(4, 2, "e")
	second := append(encodeBatch(3, 2, "d"), torn[:len(torn)-3]...)
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), first, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000003.log"), second, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := b.ReadLog("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		offset int64
		epoch  int32
		value  string
	}{{0, 0, "a"}, {1, 0, "b"}, {2, 1, "c"}, {3, 2, "d"}}
	if len(got) != len(want) {
		t.Fatalf("got %d records %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].Offset != w.offset || got[i].LeaderEpoch != w.epoch || string(got[i].Value) != w.value {
			t.Errorf("record %d: got offset %d epoch %d value %q, want %d %d %q", i, got[i].Offset, got[i].LeaderEpoch, got[i].Value, w.offset, w.epoch, w.value)
		}
	}
	if none, err := b.ReadLog("t", 1); err != nil || len(none) != 0 {
		t.Fatalf("missing partition: got %v, %v; want no records", none, err)
	}

	if err := os.WriteFile(filepath.Join(b.DataDir, hwCheckpointFile), []byte("0\n2\nt 0 3\nu 1 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if hw, ok, err := b.CheckpointedHW("u", 1); err != nil || !ok || hw != 7 {
		t.Fatalf("checkpointed hw of u-1: got %d %v %v, want 7 true nil", hw, ok, err)
	}
	if _, ok, err := b.CheckpointedHW("t", 1); err != nil || ok {
		t.Fatalf("checkpointed hw of t-1: got %v %v, want false nil", ok, err)
	}
}
