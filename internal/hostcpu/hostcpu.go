// Package hostcpu reads the machine's CPU time from /proc/stat, so that a
// benchmark can say how busy the machine was while it measured and how
// much of its CPU time the hypervisor gave to other guests (steal). On a
// virtual machine a run's tail latencies can be the host's other tenants
// rather than the code measured: a few percent of steal turn a
// millisecond's wait for a CPU into tens.
package hostcpu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Sample is the machine's cumulative CPU time, in the kernel's clock
// ticks, over all CPUs (the "cpu" line of /proc/stat).
type Sample struct {
	// Busy is user, nice, system, irq and softirq time (guest time is
	// counted in user); Idle is idle and iowait; Steal is time a virtual
	// CPU was ready to run while the hypervisor ran something else.
	Busy, Idle, Steal uint64
}

// Usage is how the machine's CPU time was spent over an interval, as
// fractions of it (0 to 1; they sum to 1).
type Usage struct {
	Busy, Idle, Steal float64
}

// Read returns the machine's CPU time now. It fails where /proc/stat
// cannot be read (outside Linux).
func Read() (Sample, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return Sample{}, err
	}
	defer f.Close()
	return parse(f)
}

// parse reads the "cpu" line of a /proc/stat.
func parse(r io.Reader) (Sample, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]
		if len(fields) < 9 {
			return Sample{}, fmt.Errorf("/proc/stat: cpu line has %d fields, want at least 9", len(fields))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(fields[i+1], 10, 64)
			if err != nil {
				return Sample{}, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		return Sample{Busy: v[0] + v[1] + v[2] + v[5] + v[6], Idle: v[3] + v[4], Steal: v[7]}, nil
	}
	if err := sc.Err(); err != nil {
		return Sample{}, err
	}
	return Sample{}, errors.New("/proc/stat: no cpu line")
}

// Since returns how the CPU time between prev and s was spent; all zero
// when no tick passed.
func (s Sample) Since(prev Sample) Usage {
	busy, idle, steal := sub(s.Busy, prev.Busy), sub(s.Idle, prev.Idle), sub(s.Steal, prev.Steal)
	total := float64(busy + idle + steal)
	if total == 0 {
		return Usage{}
	}
	return Usage{Busy: float64(busy) / total, Idle: float64(idle) / total, Steal: float64(steal) / total}
}

// sub is a-b, 0 if a counter went backwards (the kernel's idle counter
// can, on some kernels, across a CPU going offline).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
