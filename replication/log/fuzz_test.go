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
