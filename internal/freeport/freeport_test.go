package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrsBelowEphemeralRange checks that Addrs gives distinct
// loopback addresses a listener can bind, with ports below the kernel's
// ephemeral range where there is room, so that no client connection of
// another process takes one before the broker binds it.
func TestAddrsBelowEphemeralRange(t *testing.T) {
	addrs, err := Addrs(8)
	if err != nil {
		t.Fatalf("Addrs: %v", err)
	}
	low, high := BelowEphemeral()
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Errorf("address %s given twice", a)
		}
		seen[a] = true
		_, portText, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatalf("address %q: %v", a, err)
		}
		port, _ := strconv.Atoi(portText)
		if high > low && (port < low || port >= high) {
			t.Errorf("address %s: got port %d, want one in [%d, %d), below the ephemeral range", a, port, low, high)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("listen on %s: got %v, want it free", a, err)
			continue
		}
		l.Close()
	}
}

// TestAddrsNeverRepeatsAcrossCalls checks that ports given by separate
// calls, none of them bound yet, are all distinct: 3 000 draws of one
// port each from the ~22 000 below the ephemeral range would repeat
// about 200 times by chance.
func TestAddrsNeverRepeatsAcrossCalls(t *testing.T) {
	seen := map[string]bool{}
	for range 3000 {
		addrs, err := Addrs(1)
		if err != nil {
			t.Fatalf("Addrs: %v", err)
		}
		if seen[addrs[0]] {
			t.Fatalf("address %s given twice within a minute", addrs[0])
		}
		seen[addrs[0]] = true
	}
}
