package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzAppend feeds arbitrary bytes to Append and AppendAsFollower, as a
// produce or fetch response from the network may: each call either fails
// with ErrCorruptMessage or ErrUnsupportedMagic and writes nothing, or
// stores batches that read back whole and byte for byte.
func FuzzAppend(f *testing.F) {
	good := newBatch(f, 3, 20, 1000)
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add(good[:len(good)-1])
	f.Add(good[:batchHeaderSize])
	f.Add([]byte{})
	bad := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(bad[fieldBatchLength:], 0x7fffffff)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, records []byte) {
		l := openTestLog(t, t.TempDir(), testConfig())
		res, err := l.Append(records, 3)
		if err != nil {
			if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrUnsupportedMagic) && !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("Append: unexpected error %v", err)
			}
			if l.EndOffset() != 0 {
				t.Fatalf("a refused append moved EndOffset to %d", l.EndOffset())
			}
			return
		}
		got, err := l.Read(0, len(records))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(records) || !sameExceptOffsetAndEpoch(got[:batchHeaderSize], records[:batchHeaderSize]) {
			t.Fatalf("read back %d bytes, want %d", len(got), len(records))
		}
		if res.LastOffset+1 != l.EndOffset() {
			t.Fatalf("LastOffset %d, EndOffset %d", res.LastOffset, l.EndOffset())
		}
		// The stored bytes are a valid follower fetch for another log.
		follower := openTestLog(t, t.TempDir(), testConfig())
		if _, err := follower.AppendAsFollower(got); err != nil {
			t.Fatalf("AppendAsFollower of the leader's bytes: %v", err)
		}
		copied, err := follower.Read(0, len(got))
		if err != nil || !bytes.Equal(copied, got) {
			t.Fatalf("follower read back %d bytes (error %v), want the leader's %d", len(copied), err, len(got))
		}
	})
}

// FuzzConvertLegacy feeds arbitrary bytes to ConvertLegacy, as a produce
// request of version 0 to 2 may carry them: each call either fails with
// one of the errors the broker maps to a Kafka code, or returns one v2
// batch that validates as a producer's and reads back, down-converted to
// either legacy magic, as records of the same keys and values.
func FuzzConvertLegacy(f *testing.F) {
	kvs := someKVs(4)
	for _, magic := range []int8{0, 1} {
		f.Add(legacySet(magic, 0, kvs))
		for _, codec := range []int16{codecGzip, codecSnappy, codecLZ4} {
			f.Add(wrapper(f, magic, codec, "", kvs))
		}
	}
	f.Add(wrapper(f, 0, codecLZ4, "kafka-0.9", kvs))
	f.Add(encodeLegacy(1, 0, codecGzip, legacyKV{value: compressWith(f, codecGzip, "", wrapper(f, 1, codecGzip, "", kvs))}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, records []byte) {
		batch, err := ConvertLegacy(records, ProduceValidation{MaxDecompressedBytes: 1 << 20})
		if err != nil {
			for _, want := range []error{ErrCorruptMessage, ErrInvalidRecord, ErrUnsupportedMagic, ErrUnsupportedCompression, ErrRecordTooLarge} {
				if errors.Is(err, want) {
					return
				}
			}
			t.Fatalf("ConvertLegacy: unexpected error %v", err)
		}
		converted, _ := readV2(t, batch)
		for _, magic := range []int8{0, 1} {
			down, err := DownConvert(batch, magic, 0, 1<<30)
			if err != nil {
				t.Fatalf("DownConvert to magic %d: %v", magic, err)
			}
			msgs := readLegacy(t, down)
			if len(msgs) != len(converted) {
				t.Fatalf("magic %d: %d messages, want %d", magic, len(msgs), len(converted))
			}
			for i, m := range msgs {
				r := converted[i]
				if m.offset != r.offset || !bytes.Equal(m.key, r.key) || (m.key == nil) != (r.key == nil) || !bytes.Equal(m.value, r.value) || (m.value == nil) != (r.value == nil) {
					t.Fatalf("magic %d message %d: got offset %d key %q value %q, want offset %d key %q value %q", magic, i, m.offset, m.key, m.value, r.offset, r.key, r.value)
				}
			}
		}
	})
}
