package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestPercent checks the GOGC for a live heap and a floor: the base at or
// above the floor, enough for a goal of the floor below it, never below
// the base, bounded by Go's minimum goal for a tiny heap, and GOGC=off
// kept.
func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		base, want  int
	}{
		{64 * mib, 64 * mib, 100, 100},
		{100 * mib, 64 * mib, 100, 100},
		{4 * mib, 64 * mib, 100, 1500},
		{32 * mib, 64 * mib, 100, 100},
		{16 * mib, 64 * mib, 100, 300},
		{16 * mib, 64 * mib, 400, 400},
		// Below 4 MiB live, Go's minimum goal (4 MiB × GOGC/100) is
		// the larger one.
		{1 * mib, 64 * mib, 100, 1600},
		{1, 64 * mib, 100, 1600},
		{0, 64 * mib, 100, 1600},
		{0, 2 * mib, 100, 100},
		{4 * mib, 64 * mib, -1, -1},
	} {
		if got := Percent(tc.live, tc.floor, tc.base); got != tc.want {
			t.Errorf("Percent(live %d, floor %d, base %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
		}
	}
}

// gogc reads the GOGC in effect.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestFloor starts a floor far above this test's live heap, and checks
// that collections raise GOGC above the base until Stop restores it.
func TestFloor(t *testing.T) {
	base := gogc()
	f := Start(1 << 30)
	deadline := time.Now().Add(10 * time.Second)
	for gogc() <= base {
		if time.Now().After(deadline) {
			f.Stop()
			t.Fatalf("GOGC %d after collections with a 1 GiB floor, want above the base %d", gogc(), base)
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // let the cleanup goroutine run
	}
	f.Stop()
	f.Stop()
	if got := gogc(); got != base {
		t.Errorf("GOGC %d after Stop, want the base %d", got, base)
	}
	// A collection after Stop changes nothing.
	runtime.GC()
	runtime.GC()
	if got := gogc(); got != base {
		t.Errorf("GOGC %d after Stop and collections, want the base %d", got, base)
	}
	if prev := debug.SetGCPercent(base); prev != base {
		t.Errorf("GOGC %d, want %d", prev, base)
	}
}
