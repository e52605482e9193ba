package zkserver_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tripodmq/tripod/internal/zkserver"
)

func TestStandaloneServesAndRestartsOnSamePort(t *testing.T) {
	s := zkserver.StartForTest(t, 1)
	out, err := zkserver.FourLetter(s.Addr(), "ruok")
	if err != nil || out != "imok" {
		t.Fatalf("ruok: got %q, %v, want imok", out, err)
	}
	addr := s.Addr()
	if err := s.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if s.Addr() != addr {
		t.Fatalf("address after restart: got %s, want %s", s.Addr(), addr)
	}
	out, err = zkserver.FourLetter(s.Addr(), "srvr")
	if err != nil || !strings.Contains(out, "Mode: standalone") {
		t.Fatalf("srvr after restart: got %q, %v, want Mode: standalone", out, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := zkserver.FourLetter(addr, "ruok"); err == nil {
		t.Fatalf("server still answers after Close")
	}
}

func TestEnsembleOfThreeElectsALeader(t *testing.T) {
	s := zkserver.StartForTest(t, 3)
	if got := len(strings.Split(s.Connect(), ",")); got != 3 {
		t.Fatalf("connect string %q: got %d servers, want 3", s.Connect(), got)
	}
	leaders := 0
	for _, addr := range s.Addrs() {
		out, err := zkserver.FourLetter(addr, "srvr")
		if err != nil {
			t.Fatalf("srvr %s: %v", addr, err)
		}
		if strings.Contains(out, "Mode: leader") {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("leaders: got %d, want 1", leaders)
	}
}

func TestFixedHeapStartsTheJVMWithItsWholeHeap(t *testing.T) {
	zkserver.Require(t)
	dir := t.TempDir()
	cfg := zkserver.DefaultConfig()
	cfg.HeapMB, cfg.FixedHeap = 64, true
	s, err := zkserver.Start(dir, cfg)
	if err != nil {
		t.Fatalf("start zookeeper with a fixed heap: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	args := javaArgs(t, dir)
	for _, want := range []string{"-Xms64m", "-Xmx64m"} {
		if !slices.Contains(args, want) {
			t.Errorf("java arguments %q: want %s", args, want)
		}
	}
}

// javaArgs is the command line of the running java process whose
// arguments name a file under dir (its zoo.cfg).
func javaArgs(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "java" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, dir) }) {
			return args
		}
	}
	t.Fatalf("no java process with an argument under %s", dir)
	return nil
}
