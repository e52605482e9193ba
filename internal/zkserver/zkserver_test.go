package zkserver_test

import (
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
