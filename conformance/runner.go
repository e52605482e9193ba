package conformance

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Outcomes of a case run by RunAll.
const (
	OutcomePass          = "pass"
	OutcomeFail          = "fail"
	OutcomeNotApplicable = "n/a"
)

// Result is how one case of the suite ended under RunAll.
type Result struct {
	// Case is "Group/Case".
	Case string
	// Outcome is OutcomePass, OutcomeFail or OutcomeNotApplicable.
	Outcome string
	// Duration is how long the case ran, cleanups included.
	Duration time.Duration
	// Message holds the case's logs and failures (one a line, failures
	// prefixed "FAIL: "), or why the case does not apply.
	Message string
}

// caseBound is how long RunAll lets a case run before it reports it
// failed and moves on: far beyond any case's own deadlines, so reaching it
// means a backend call ignored its context.
const caseBound = 5 * time.Minute

// RunAll runs every case of the suite against h outside `go test`, one
// after another, and returns their results in order: the backend's cases
// (those Run runs) and the controller's (those RunController runs), so
// that a user's ZooKeeper or etcd is checked with tripod's controller
// standing on it too. Cases needing a
// capability h's clusters lack are reported n/a. When ctx ends, the case
// running is abandoned (reported failed) and the rest are not run. Progress
// (one line per case as it ends) goes to progress when it is not nil.
func RunAll(ctx context.Context, h Harness, progress io.Writer) []Result {
	return RunAllWith(ctx, h, RunOptions{}, progress)
}

// RunOptions adjust what RunAllWith runs.
type RunOptions struct {
	// MigrateFrom, when not nil, is the harness of the backend the
	// controller's cases start on: they run on clusters that started
	// there and were migrated to h (MigratedHarness(MigrateFrom, h)),
	// named "<from>-to-<h>/Controller/<Case>", while the backend's own
	// cases run on h.
	MigrateFrom Harness
	// Match, when not nil, selects the cases to run by their name, as
	// Result.Case gives it; the others are neither run nor reported.
	Match func(name string) bool
}

// RunAllWith is RunAll adjusted by opts.
func RunAllWith(ctx context.Context, h Harness, opts RunOptions, progress io.Writer) []Result {
	if progress == nil {
		progress = io.Discard
	}
	var results []Result
	for _, pc := range plan(h, opts) {
		tc := pc.tc
		if ctx.Err() != nil {
			results = append(results, Result{Case: pc.name, Outcome: OutcomeFail, Message: "not run: " + ctx.Err().Error()})
			continue
		}
		var r Result
		if tc.needs != needsNothing {
			caps, probe := probeCapabilities(ctx, pc.h)
			if probe.Outcome == OutcomeFail {
				r = probe
				r.Case = pc.name
			} else if !caps.allows(tc.needs) {
				r = Result{Case: pc.name, Outcome: OutcomeNotApplicable, Message: fmt.Sprintf("%s clusters are not a %v", pc.h.Name(), tc.needs)}
			}
		}
		if r.Outcome == "" {
			r = runCase(ctx, pc.name, func(t T) { tc.run(t, pc.h) })
		}
		results = append(results, r)
		fmt.Fprintf(progress, "%-4s %-48s %v\n", r.Outcome, r.Case, r.Duration.Round(10*time.Millisecond))
	}
	return results
}

// plannedCase is a case RunAllWith runs: its name and the harness it
// runs on.
type plannedCase struct {
	name string
	tc   testCase
	h    *probingHarness
}

// plan returns the cases RunAllWith runs against h with opts, in order.
func plan(h Harness, opts RunOptions) []plannedCase {
	ph := &probingHarness{Harness: h}
	controllerH, prefix := ph, ""
	if opts.MigrateFrom != nil {
		controllerH = &probingHarness{Harness: MigratedHarness(opts.MigrateFrom, h)}
		prefix = controllerH.Name() + "/"
	}
	var planned []plannedCase
	for _, tc := range runAllCases() {
		pc := plannedCase{name: tc.fullName(), tc: tc, h: ph}
		if tc.group == controllerGroup {
			pc.name, pc.h = prefix+pc.name, controllerH
		}
		if opts.Match == nil || opts.Match(pc.name) {
			planned = append(planned, pc)
		}
	}
	return planned
}

// runAllCases is every case RunAll runs, in order: the backend's cases
// with the controller's before the Availability group, which stays last.
func runAllCases() []testCase {
	var all []testCase
	inserted := false
	for _, tc := range cases() {
		if tc.group == "Availability" && !inserted {
			all = append(all, controllerCases()...)
			inserted = true
		}
		all = append(all, tc)
	}
	if !inserted {
		all = append(all, controllerCases()...)
	}
	return all
}

// probeCapabilities returns the capabilities of ph's clusters, making a
// one-backend cluster to learn them when no case has made one.
func probeCapabilities(ctx context.Context, ph *probingHarness) (capabilities, Result) {
	var caps capabilities
	r := runCase(ctx, "probe", func(t T) { caps = ph.capabilities(t) })
	return caps, r
}

// runCase runs fn with a fresh runnerT in a goroutine of its own (so
// Fatalf can end it with runtime.Goexit), runs its cleanups, and returns
// its result.
func runCase(ctx context.Context, name string, fn func(t T)) Result {
	t := &runnerT{name: name}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.runCleanups()
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("panic: %v", p)
			}
		}()
		fn(t)
	}()
	timer := time.NewTimer(caseBound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Errorf("case still running after %v: abandoned", caseBound)
	case <-ctx.Done():
		t.Errorf("abandoned: %v", ctx.Err())
	}
	r := Result{Case: name, Outcome: OutcomePass, Duration: time.Since(start), Message: t.output()}
	if t.Failed() {
		r.Outcome = OutcomeFail
	}
	return r
}

// runnerT is the T of RunAll: it records failures and logs, ends the case
// on Fatalf with runtime.Goexit (it must be called from the case's
// goroutine, as with testing.T), and runs cleanups last-in first-out.
type runnerT struct {
	name string

	mu       sync.Mutex
	failed   bool
	logs     []string
	cleanups []func()
	tempDirs int
}

// Helper implements T; RunAll reports no file:line.
func (t *runnerT) Helper() {}

// Name implements T.
func (t *runnerT) Name() string { return t.name }

// Logf implements T.
func (t *runnerT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, fmt.Sprintf(format, args...))
}

// Errorf implements T: the case fails and goes on.
func (t *runnerT) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	t.logs = append(t.logs, "FAIL: "+fmt.Sprintf(format, args...))
}

// Fatalf implements T: the case fails and its goroutine ends (its
// cleanups still run).
func (t *runnerT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

// Failed implements T.
func (t *runnerT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Cleanup implements T.
func (t *runnerT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// TempDir implements T: a new directory removed after the cleanups that
// were registered before it.
func (t *runnerT) TempDir() string {
	t.mu.Lock()
	t.tempDirs++
	n := t.tempDirs
	t.mu.Unlock()
	pattern := strings.NewReplacer("/", "_", " ", "_").Replace(t.name) + fmt.Sprintf("-%d-*", n)
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("TempDir: remove %s: %v", dir, err)
		}
	})
	return dir
}

// runCleanups runs the cleanups last-in first-out, each even if an
// earlier one called Fatalf or panicked.
func (t *runnerT) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		t.runCleanup(f)
	}
}

// runCleanup runs one cleanup in a goroutine of its own so that a Fatalf
// in it ends only that cleanup.
func (t *runnerT) runCleanup(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("cleanup panic: %v", p)
			}
		}()
		f()
	}()
	<-done
}

// output returns the case's logs and failures, in order, one a line.
func (t *runnerT) output() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.logs, "\n")
}
