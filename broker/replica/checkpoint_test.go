package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestHWCheckpointRoundTrip: what WriteHWCheckpoint writes in a log dir,
// ReadHWCheckpoints reads back, each entry with the dir holding it, until
// it is forgotten; a dir without the file reads as empty.
func TestHWCheckpointRoundTrip(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	orders0 := coord.TopicPartition{Topic: "orders", Partition: 0}
	orders1 := coord.TopicPartition{Topic: "orders", Partition: 1}
	if err := WriteHWCheckpoint(a, map[coord.TopicPartition]int64{orders0: 42, orders1: 7}); err != nil {
		t.Fatalf("write checkpoint: %v", err)
	}
	c, err := ReadHWCheckpoints([]string{a, b})
	if err != nil {
		t.Fatalf("read checkpoints: %v", err)
	}
	if got := c.Lookup(orders0); got != 42 {
		t.Errorf("orders-0: got high watermark %d, want 42", got)
	}
	dirs := map[coord.TopicPartition]string{}
	c.Range(func(tp coord.TopicPartition, dir string, hw int64) { dirs[tp] = dir })
	if len(dirs) != 2 || dirs[orders0] != a || dirs[orders1] != a {
		t.Errorf("got entries in %v, want orders-0 and orders-1 in %s", dirs, a)
	}
	c.Forget(orders0)
	if got := c.Lookup(orders0); got != 0 {
		t.Errorf("orders-0 forgotten: got high watermark %d, want 0", got)
	}
	data, err := os.ReadFile(filepath.Join(a, hwCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n2\norders 0 42\norders 1 7\n"; string(data) != want {
		t.Errorf("got checkpoint file %q, want %q", data, want)
	}
}

// TestReadHWCheckpointsRefusesACorruptFile: a count that does not match
// the entries is an error, not an empty checkpoint.
func TestReadHWCheckpointsRefusesACorruptFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, hwCheckpointFile), []byte("0\n3\norders 0 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHWCheckpoints([]string{dir}); err == nil {
		t.Fatal("got no error, want the count mismatch refused")
	}
}

// TestLockLogDirs: a log dir locked once cannot be locked again until its
// lock is released.
func TestLockLogDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	locks, err := LockLogDirs([]string{dir})
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if _, err := LockLogDirs([]string{dir}); err == nil {
		t.Fatal("second lock: got no error, want the dir in use")
	}
	for _, f := range locks {
		f.Close()
	}
	again, err := LockLogDirs([]string{dir})
	if err != nil {
		t.Fatalf("lock after release: got %v, want no error", err)
	}
	for _, f := range again {
		f.Close()
	}
}
