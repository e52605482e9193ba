package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
)

// TestHWCheckpointRoundTrip: what WriteHWCheckpoint writes in a log dir,
// durably or not, ReadHWCheckpoints reads back, each entry with the dir
// holding it, until it is forgotten; a dir without the file reads as
// empty.
func TestHWCheckpointRoundTrip(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) { testHWCheckpointRoundTrip(t, durable) })
	}
}

func testHWCheckpointRoundTrip(t *testing.T, durable bool) {
	a, b := t.TempDir(), t.TempDir()
	orders0 := coord.TopicPartition{Topic: "orders", Partition: 0}
	orders1 := coord.TopicPartition{Topic: "orders", Partition: 1}
	if err := WriteHWCheckpoint(a, map[coord.TopicPartition]int64{orders0: 42, orders1: 7}, durable); err != nil {
		t.Fatalf("write checkpoint: %v", err)
	}
	c, err := ReadHWCheckpoints([]string{a, b}, hclog.NewNullLogger())
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

// TestReadHWCheckpointsSkipsAGarbledFile: a file that does not parse (a
// count that does not match the entries, or the zeros a power failure can
// leave) is logged with its path and read as empty; the other log dirs'
// checkpoints are still read.
func TestReadHWCheckpointsSkipsAGarbledFile(t *testing.T) {
	orders0 := coord.TopicPartition{Topic: "orders", Partition: 0}
	for name, garbled := range map[string]string{
		"count":  "0\n3\norders 0 42\n",
		"zeros":  "\x00\x00\x00\x00\x00\x00\x00\x00",
		"long":   strings.Repeat("\x00", 256<<10), // a 10 000-partition file's length, no newline
		"offset": "0\n1\norders 0 4x2\n",
	} {
		t.Run(name, func(t *testing.T) {
			bad, good := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(bad, hwCheckpointFile), []byte(garbled), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := WriteHWCheckpoint(good, map[coord.TopicPartition]int64{orders0: 42}, false); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			c, err := ReadHWCheckpoints([]string{bad, good}, hclog.New(&hclog.LoggerOptions{Output: &logged}))
			if err != nil {
				t.Fatalf("read checkpoints: %v", err)
			}
			if got := c.Lookup(orders0); got != 42 {
				t.Errorf("orders-0 from the readable dir: got high watermark %d, want 42", got)
			}
			n := 0
			c.Range(func(coord.TopicPartition, string, int64) { n++ })
			if n != 1 {
				t.Errorf("got %d entries, want only the readable dir's one", n)
			}
			if !strings.Contains(logged.String(), filepath.Join(bad, hwCheckpointFile)) {
				t.Errorf("log %q does not name the garbled file", logged.String())
			}
		})
	}
}

// TestReadHWCheckpointsRefusesAnUnreadableFile: a checkpoint that cannot
// be read at all (here a directory in its place) is an error, not an
// empty checkpoint: the disk, not the content, is at fault.
func TestReadHWCheckpointsRefusesAnUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, hwCheckpointFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHWCheckpoints([]string{dir}, hclog.NewNullLogger()); err == nil {
		t.Fatal("got no error, want the unreadable checkpoint refused")
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
