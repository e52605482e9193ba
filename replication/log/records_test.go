package log

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEachRecordReadsEveryBatchKind: records built by BuildBatch, by a
// producer with each codec, a compacted batch with gaps and a truncated
// tail all come back with their offsets, keys and values, and NextOffset
// says where the next read starts.
func TestEachRecordReadsEveryBatchKind(t *testing.T) {
	built := BuildBatch([]KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b")}, {Value: []byte("3")}}, time.UnixMilli(5000))
	setBaseOffset(built, 10)
	var got []string
	collect := func(offset int64, key, value []byte) error {
		got = append(got, fmt.Sprintf("%d:%s=%s/%t/%t", offset, key, value, key == nil, value == nil))
		return nil
	}
	if err := EachRecord(built, collect); err != nil {
		t.Fatalf("each record of a built batch: %v", err)
	}
	want := []string{"10:a=1/false/false", "11:b=/false/true", "12:=3/true/false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("built batch: got %v, want %v", got, want)
	}
	if next, ok := NextOffset(built); !ok || next != 13 {
		t.Fatalf("next offset after the built batch: %d %t, want 13", next, ok)
	}
	if BuildBatch(nil, time.Now()) != nil {
		t.Fatal("a batch of no records built")
	}

	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		b := timedBatch(t, timedSpec{baseOffset: 100, firstTimestamp: 1000, lastOffsetDelta: 9, codec: &codec,
			records: []timedRecord{{offsetDelta: 0}, {offsetDelta: 4}, {offsetDelta: 9}}})
		got = nil
		if err := EachRecord(append(b, b[:20]...), collect); err != nil {
			t.Fatalf("compressed batch with a cut tail: %v", err)
		}
		want := []string{"100:key-0=value-0/false/false", "104:key-1=value-1/false/false", "109:key-2=value-2/false/false"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("compressed batch: got %v, want %v", got, want)
		}
		if next, ok := NextOffset(append(b, b[:20]...)); !ok || next != 110 {
			t.Fatalf("next offset after a compacted batch: %d %t, want 110", next, ok)
		}
	}
	if _, ok := NextOffset(built[:30]); ok {
		t.Fatal("a next offset from a cut batch alone")
	}
}
