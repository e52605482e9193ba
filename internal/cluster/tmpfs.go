package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size ("2m") at dir until the test ends: a
// real file system that fills up, for the disk-fault tests. Without the
// right to mount (tests run as root here) the test is skipped, or fails
// when CI is "true".
func MountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create %s: %v", dir, err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("mount a %s tmpfs at %s: %v: %s", size, dir, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// FillFileSystem writes the file path until its file system is full
// (ENOSPC), down to the last byte it takes.
func FillFileSystem(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: got %v, want ENOSPC at the end", path, err)
			}
			break
		}
	}
	// The last pages: tmpfs may still take writes smaller than a chunk.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
}
