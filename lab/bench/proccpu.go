package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processesCPU returns the CPU time the processes pids have used so far,
// in seconds: the sum over each one's threads of the time the scheduler
// ran them (/proc/PID/task/TID/schedstat, in nanoseconds). /proc/PID/stat
// gives the same in clock ticks of 10 ms, too coarse for a run of a tenth
// of a second. A thread that ends takes its time with it; Go's runtime
// keeps its threads, and so do tripod and kfake.
func processesCPU(pids []int) (float64, error) {
	var ns int64
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/task"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
		}
		read := 0
		for _, task := range tasks {
			b, err := os.ReadFile(dir + "/" + task.Name() + "/schedstat")
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue // the thread ended since the directory was read
			}
			if err != nil {
				return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
			}
			n, err := parseSchedstat(b)
			if err != nil {
				return 0, fmt.Errorf("CPU time of process %d, thread %s: %w", pid, task.Name(), err)
			}
			ns += n
			read++
		}
		if read == 0 {
			// Every thread cannot have ended while the process lives: the
			// kernel keeps no schedstat (built without CONFIG_SCHED_INFO).
			return 0, fmt.Errorf("CPU time of process %d: no thread has a schedstat in %s", pid, dir)
		}
	}
	return float64(ns) / 1e9, nil
}

// parseSchedstat returns the time on CPU, in nanoseconds, of a thread's
// schedstat: "on-CPU-ns wait-ns timeslices".
func parseSchedstat(b []byte) (int64, error) {
	fields := strings.Fields(string(b))
	if len(fields) != 3 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", b)
	}
	n, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("schedstat %q: on-CPU time is not a count of nanoseconds", b)
	}
	return n, nil
}

// selfCPU returns the CPU time, user and system, this process has used so
// far, in seconds (getrusage, to the microsecond).
func selfCPU() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("this process's CPU time: %w", err)
	}
	return tvSeconds(ru.Utime) + tvSeconds(ru.Stime), nil
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}
