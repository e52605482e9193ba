package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestIsStorageError tells a failing disk from other errors.
func TestIsStorageError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("write segment 0: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.EIO}), true},
		{&os.PathError{Op: "mkdir", Path: "x", Err: syscall.ENOTDIR}, false},
		{errors.New("log: corrupt record batch"), false},
		{nil, false},
	} {
		if got := IsStorageError(tc.err); got != tc.want {
			t.Errorf("IsStorageError(%v): got %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestLogDirsOffline: a failed log dir is offline once (a second failure
// changes nothing), its partitions are placed in the other dir, and with
// no dir online a placement is ErrLogDirOffline; a replica marked offline
// stays so.
func TestLogDirsOffline(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	d, err := OpenLogDirs([]string{a, b})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer d.Unlock()
	if d.Offline(a) || d.OfflineCount() != 0 || len(d.Online()) != 2 {
		t.Fatalf("got offline %v, count %d, online %v; want every dir online", d.Offline(a), d.OfflineCount(), d.Online())
	}
	cause := &os.PathError{Op: "write", Path: a, Err: syscall.EIO}
	if failed, online := d.Fail(a, cause); !failed || online != 1 {
		t.Fatalf("first failure: got failed %t online %d, want true 1", failed, online)
	}
	d.Announce()
	d.Announce()
	select {
	case <-d.Failed():
	default:
		t.Fatal("Failed: got no signal, want one")
	}
	if failed, _ := d.Fail(a, cause); failed {
		t.Fatal("second failure: got failed, want the dir offline already")
	}
	if !d.Offline(a) || !d.PartitionDirOffline(filepath.Join(a, "orders-0")) || d.PartitionDirOffline(filepath.Join(b, "orders-0")) {
		t.Fatalf("got a offline %t, want a offline and b online", d.Offline(a))
	}
	if dir, err := d.Place("orders", 0); err != nil || filepath.Dir(dir) != b {
		t.Fatalf("place: got %q, %v; want a dir in %s", dir, err, b)
	}
	d.Fail(b, cause)
	if _, err := d.Place("orders", 1); !errors.Is(err, ErrLogDirOffline) {
		t.Fatalf("place with no dir online: got %v, want ErrLogDirOffline", err)
	}
	tp := coord.TopicPartition{Topic: "orders", Partition: 2}
	d.MarkReplicaOffline(tp)
	if !d.ReplicaOffline(tp) || d.ReplicaOffline(coord.TopicPartition{Topic: "orders", Partition: 3}) {
		t.Fatal("got the wrong replicas offline, want orders-2 only")
	}
}

// TestZeroLogDirs: the zero LogDirs answers everything online and can
// still record a failure.
func TestZeroLogDirs(t *testing.T) {
	var d LogDirs
	tp := coord.TopicPartition{Topic: "orders", Partition: 0}
	if d.Offline("/x") || d.ReplicaOffline(tp) || d.OfflineCount() != 0 {
		t.Fatal("got something offline, want nothing")
	}
	d.Announce()
	if failed, _ := d.Fail("/x", errors.New("disk gone")); !failed || !d.Offline("/x") {
		t.Fatal("got the failure unrecorded, want /x offline")
	}
	d.MarkReplicaOffline(tp)
	if !d.ReplicaOffline(tp) {
		t.Fatal("got orders-0 online, want it offline")
	}
	d.Unlock()
}
