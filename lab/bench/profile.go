package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"
)

// profiles captures, over one phase of a benchmark, the execution trace,
// CPU profile and heap allocations of every broker the benchmark started
// (served by `tripod serve --pprof` at /debug/pprof/) and the execution
// trace and CPU profile of this process, which runs the clients, into a
// directory: broker-N.trace, broker-N.cpu.pprof, broker-N.allocs.pprof,
// client.trace and client.cpu.pprof, for `go tool trace` and `go tool
// pprof`. A stall in the figures shows in the traces as what every
// process was doing then: collecting garbage, waiting on a lock, a
// syscall or the network, or not running at all; the allocations (`go
// tool pprof -sample_index=alloc_space`) say what makes a broker collect.
type profiles struct {
	dir string
	// brokers maps a broker's id to its metrics listener's HOST:PORT.
	brokers map[int32]string
}

// capture starts capturing for d (rounded up to whole seconds, as
// /debug/pprof/ takes them) and returns a function that waits until every
// capture has ended and its file is written, and reports the first
// failure. It writes where the files are and the wall-clock time the
// captures start, which `go tool trace` shows as 0.
func (p *profiles) capture(ctx context.Context, d time.Duration, out io.Writer) (wait func() error, err error) {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("--profile %s: %w", p.dir, err)
	}
	secs := int(math.Ceil(d.Seconds()))
	traceFile, err := os.Create(filepath.Join(p.dir, "client.trace"))
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	cpuFile, err := os.Create(filepath.Join(p.dir, "client.cpu.pprof"))
	if err != nil {
		traceFile.Close()
		return nil, fmt.Errorf("--profile: %w", err)
	}
	if err := pprof.StartCPUProfile(cpuFile); err != nil {
		traceFile.Close()
		cpuFile.Close()
		return nil, fmt.Errorf("--profile: CPU profile of this process: %w", err)
	}
	if err := trace.Start(traceFile); err != nil {
		pprof.StopCPUProfile()
		traceFile.Close()
		cpuFile.Close()
		return nil, fmt.Errorf("--profile: execution trace of this process: %w", err)
	}
	fmt.Fprintf(out, "profiling %d broker(s) and this process for %d s from %s into %s\n",
		len(p.brokers), secs, time.Now().Format("15:04:05.000"), p.dir)

	var wg sync.WaitGroup
	errs := make([]error, 3*len(p.brokers)+1)
	i := 0
	for id, addr := range p.brokers {
		for _, kind := range []struct{ path, file string }{
			{fmt.Sprintf("/debug/pprof/trace?seconds=%d", secs), fmt.Sprintf("broker-%d.trace", id)},
			{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), fmt.Sprintf("broker-%d.cpu.pprof", id)},
			// A delta profile: what the broker allocated over the
			// phase only.
			{fmt.Sprintf("/debug/pprof/allocs?seconds=%d", secs), fmt.Sprintf("broker-%d.allocs.pprof", id)},
		} {
			wg.Add(1)
			go func(slot int) {
				defer wg.Done()
				errs[slot] = fetchProfile(ctx, "http://"+addr+kind.path, filepath.Join(p.dir, kind.file), time.Duration(secs+30)*time.Second)
			}(i)
			i++
		}
	}
	wg.Add(1)
	go func(slot int) {
		defer wg.Done()
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-ctx.Done():
		}
		trace.Stop()
		pprof.StopCPUProfile()
		errs[slot] = errors.Join(traceFile.Close(), cpuFile.Close())
	}(i)
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}, nil
}

// fetchProfile GETs url, a /debug/pprof/ profile that takes its time, into
// the file path, within timeout.
func fetchProfile(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %s: %s", url, resp.Status, msg)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", url, err)
	}
	return f.Close()
}
