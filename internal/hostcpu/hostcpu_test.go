package hostcpu

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseSumsTheCPULine(t *testing.T) {
	const stat = `cpu  100 5 50 800 20 3 2 20 0 0
cpu0 50 2 25 400 10 1 1 10 0 0
intr 12345
`
	s, err := parse(strings.NewReader(stat))
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{Busy: 100 + 5 + 50 + 3 + 2, Idle: 800 + 20, Steal: 20}
	if s != want {
		t.Fatalf("parse = %+v, want %+v", s, want)
	}
}

func TestParseRefusesAShortCPULine(t *testing.T) {
	for _, stat := range []string{"cpu 1 2 3 4\n", "intr 1\n", "cpu 1 2 3 4 5 6 7 x\n"} {
		if _, err := parse(strings.NewReader(stat)); err == nil {
			t.Errorf("parse(%q) succeeded", stat)
		}
	}
}

func TestSinceIsTheIntervalsShares(t *testing.T) {
	prev := Sample{Busy: 100, Idle: 300, Steal: 10}
	u := Sample{Busy: 160, Idle: 330, Steal: 20}.Since(prev)
	// 60 busy, 30 idle, 10 steal of 100 ticks.
	if math.Abs(u.Busy-0.6) > 1e-9 || math.Abs(u.Idle-0.3) > 1e-9 || math.Abs(u.Steal-0.1) > 1e-9 {
		t.Fatalf("Since = %+v, want busy 0.6, idle 0.3, steal 0.1", u)
	}
	if z := prev.Since(prev); z != (Usage{}) {
		t.Fatalf("Since over no ticks = %+v, want zero", z)
	}
	// A counter that went backwards counts as no time, not as 2^64.
	if u := (Sample{Busy: 150, Idle: 290, Steal: 10}).Since(prev); u.Busy != 1 {
		t.Fatalf("Since with idle going backwards = %+v, want all busy", u)
	}
}

// TestReadSeesThisProcessSpin reads the real /proc/stat around a busy
// loop: the machine was busy for part of it.
func TestReadSeesThisProcessSpin(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	before, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	var after Sample
	// Spin until the kernel has counted some busy ticks (10 ms each at
	// the usual USER_HZ of 100), with a deadline.
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for after.Busy <= before.Busy {
		for i := range 1 << 20 {
			x += i
		}
		if after, err = Read(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no busy tick counted in 10 s of spinning: before %+v, after %+v", before, after)
		}
	}
	if u := after.Since(before); u.Busy <= 0 || u.Busy+u.Idle+u.Steal < 0.999 {
		t.Fatalf("Since = %+v, want some busy time and shares summing to 1 (spun %d)", u, x)
	}
}
