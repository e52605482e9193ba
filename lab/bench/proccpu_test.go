package bench

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessesCPUCountsAChildsSpin checks processesCPU against a real
// process keeping a CPU busy (`tripod bench spin`): its CPU time grows
// while it spins, and agrees with what /proc/PID/stat says in clock
// ticks.
func TestProcessesCPUCountsAChildsSpin(t *testing.T) {
	cmd := exec.Command(tripodBin, "bench", "spin", "--cores", "1")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tripod bench spin: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pids := []int{cmd.Process.Pid}
	deadline := time.Now().Add(30 * time.Second)
	var secs float64
	for {
		var err error
		if secs, err = processesCPU(pids); err != nil {
			t.Fatal(err)
		}
		if secs >= 0.3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spinning process used %v s of CPU in 30 s, want 0.3 s", secs)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
	cmd.Process.Kill()
	cmd.Wait()
	// A reaped process has no /proc entry: processesCPU says so.
	if _, err := processesCPU(pids); err == nil {
		t.Errorf("processesCPU of an ended process: no error")
	}

	// Against /proc/PID/stat, in ticks of 10 ms, of this process, whose
	// threads all live as long as it does.
	self := []int{os.Getpid()}
	precise, err := processesCPU(self)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	ticks := float64(utime+stime) / 100
	if d := precise - ticks; d < -0.05 || d > 0.05 {
		t.Errorf("this process: %v s from its threads' schedstat, %v s from /proc/self/stat, want within 0.05 s", precise, ticks)
	}
}

func TestParseSchedstat(t *testing.T) {
	if n, err := parseSchedstat([]byte("7799129 10308562 174\n")); err != nil || n != 7799129 {
		t.Errorf("parseSchedstat: %d, %v, want 7799129", n, err)
	}
	for _, bad := range []string{"", "1 2", "x 2 3", "-5 2 3"} {
		if _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q): no error", bad)
		}
	}
}
