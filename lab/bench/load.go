package bench

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// validateBackgroundLoad checks --background-load: whole cores, at most
// the machine's.
func validateBackgroundLoad(cores int) error {
	if n := runtime.NumCPU(); cores < 0 || cores > n {
		return fmt.Errorf("--background-load %d: must be between 0 (none) and %d (this machine's CPUs)", cores, n)
	}
	return nil
}

// startBackgroundLoad keeps cores CPUs busy in another process, `tripod
// bench spin` of the tripod executable self, as another tenant of a
// broker's machine would: the brokers, the coordination servers and the
// benchmark's clients share what is left. The process dies with this one;
// stop ends it, waits for it and returns the CPU time it had. Zero cores
// starts nothing.
func startBackgroundLoad(self string, cores int) (stop func() time.Duration, err error) {
	if cores == 0 {
		return func() time.Duration { return 0 }, nil
	}
	cmd := exec.Command(self, "bench", "spin", "--cores", strconv.Itoa(cores))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("--background-load: start %s bench spin: %w", self, err)
	}
	return func() time.Duration {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}, nil
}

// Spin keeps cores CPUs busy, hashing, until ctx ends: the load `bench
// failover --background-load` runs beside the brokers.
func Spin(ctx context.Context, cores int) error {
	if cores < 1 || cores > runtime.NumCPU() {
		return fmt.Errorf("--cores %d: must be between 1 and %d (this machine's CPUs)", cores, runtime.NumCPU())
	}
	runtime.GOMAXPROCS(cores)
	var wg sync.WaitGroup
	for range cores {
		wg.Go(func() {
			buf := make([]byte, 4096)
			for ctx.Err() == nil {
				for range 1000 {
					sum := sha256.Sum256(buf)
					buf[0] = sum[0]
				}
			}
		})
	}
	wg.Wait()
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}
