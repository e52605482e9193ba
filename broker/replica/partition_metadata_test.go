package replica

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// TestClaimPartitionDir checks partition.metadata's rule: a new or
// unmarked directory is claimed (the file written, the log kept), one of
// the same topic ID is kept, and one naming another topic ID (a deleted
// topic of the same name) is moved aside, marked for deletion, before the
// new topic's log opens.
func TestClaimPartitionDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	old, fresh := [16]byte{1}, [16]byte{2}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	segment := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(segment, []byte("old records"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stale, err := ClaimPartitionDir(dir, old); err != nil || stale != "" {
		t.Fatalf("claim an unmarked dir: got stale %q, %v; want none", stale, err)
	}
	if id, ok, err := readPartitionTopicID(dir); err != nil || !ok || id != old {
		t.Fatalf("partition.metadata after the claim: %x %t %v, want %x", id, ok, err, old)
	}
	if stale, err := ClaimPartitionDir(dir, old); err != nil || stale != "" {
		t.Fatalf("claim by the same topic ID: got stale %q, %v; want none", stale, err)
	}
	if _, err := os.Stat(segment); err != nil {
		t.Fatalf("the log of the same topic: %v, want it kept", err)
	}
	stale, err := ClaimPartitionDir(dir, fresh)
	if err != nil || !strings.HasPrefix(stale, dir+".") || !strings.HasSuffix(stale, tlog.DeletedSuffix) {
		t.Fatalf("claim by another topic ID: got stale %q, %v; want %s.ID%s", stale, err, dir, tlog.DeletedSuffix)
	}
	if _, err := os.Stat(segment); !os.IsNotExist(err) {
		t.Fatalf("the deleted topic's segment: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(stale, filepath.Base(segment))); err != nil {
		t.Fatalf("the deleted topic's segment moved aside: %v", err)
	}
	if id, ok, _ := readPartitionTopicID(dir); !ok || id != fresh {
		t.Fatalf("partition.metadata after the new claim: %x, want %x", id, fresh)
	}
	if stale, err := ClaimPartitionDir(dir, [16]byte{}); err != nil || stale != "" {
		t.Fatalf("claim without a topic ID: got stale %q, %v; want nothing done", stale, err)
	}
	if err := os.WriteFile(filepath.Join(dir, partitionMetadataFile), []byte("version: 0\ntopic_id: !!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ClaimPartitionDir(dir, fresh); err == nil {
		t.Fatal("claim of a dir with a corrupt partition.metadata: got nil, want an error")
	}
}
