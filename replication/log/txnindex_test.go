package log

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestTxnIndex appends aborted transactions, reads them back after a
// reopen, collects what read_committed fetches need as Kafka's
// TransactionIndexTest does, and truncates.
func TestTxnIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.txnindex")
	x, err := OpenTxnIndex(path)
	if err != nil {
		t.Fatalf("open a missing index: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file exists before the first append: %v", err)
	}
	entries := []AbortedTxn{
		{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11},
		{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 13},
		{ProducerID: 2, FirstOffset: 18, LastOffset: 35, LastStableOffset: 25},
		{ProducerID: 3, FirstOffset: 32, LastOffset: 50, LastStableOffset: 40},
	}
	for _, a := range entries {
		if err := x.Append(a); err != nil {
			t.Fatalf("append %+v: %v", a, err)
		}
	}
	if err := x.Append(AbortedTxn{ProducerID: 4, FirstOffset: 1, LastOffset: 50, LastStableOffset: 51}); err == nil {
		t.Fatal("an entry whose marker does not follow the last one: got no error")
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 4*34 {
		t.Fatalf("file: %v %v, want 4 entries of 34 bytes", info, err)
	}
	x, err = OpenTxnIndex(path)
	if err != nil || !reflect.DeepEqual(x.Entries(), entries) {
		t.Fatalf("reopened: %+v %v, want %+v", x.Entries(), err, entries)
	}
	for _, c := range []struct {
		fetch, upper int64
		want         []AbortedTxn
		complete     bool
	}{
		{0, 32, entries[:3], true},
		{0, 100, entries, false},
		{11, 32, entries[1:3], true},
		{36, 100, entries[3:], false},
		{0, 5, entries[:1], true},
	} {
		got, complete := x.Collect(c.fetch, c.upper)
		if !reflect.DeepEqual(got, c.want) || complete != c.complete {
			t.Errorf("collect from %d up to %d: got %+v %v, want %+v %v", c.fetch, c.upper, got, complete, c.want, c.complete)
		}
	}
	if err := x.TruncateTo(35); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(AbortedTxn{ProducerID: 5, FirstOffset: 36, LastOffset: 40, LastStableOffset: 41}); err != nil {
		t.Fatalf("append after the truncation: %v", err)
	}
	x.Close()
	x, err = OpenTxnIndex(path)
	want := append(append([]AbortedTxn(nil), entries[:2]...), AbortedTxn{ProducerID: 5, FirstOffset: 36, LastOffset: 40, LastStableOffset: 41})
	if err != nil || !reflect.DeepEqual(x.Entries(), want) {
		t.Fatalf("after truncating to 35 and appending: %+v %v, want %+v", x.Entries(), err, want)
	}
	if err := x.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file after Delete: %v", err)
	}
}

// TestTxnIndexCorrupt refuses a file of a partial entry, an unknown
// version or entries out of order.
func TestTxnIndexCorrupt(t *testing.T) {
	dir := t.TempDir()
	entry := func(version int16, last int64) []byte {
		b := make([]byte, 34)
		b[0], b[1] = byte(version>>8), byte(version)
		b[25] = byte(last)
		return b
	}
	for name, data := range map[string][]byte{
		"partial":      make([]byte, 40),
		"version 1":    entry(1, 5),
		"out of order": append(entry(0, 9), entry(0, 3)...),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenTxnIndex(path); !errors.Is(err, ErrCorruptTxnIndex) {
			t.Errorf("%s: got %v, want ErrCorruptTxnIndex", name, err)
		}
	}
}
