package verify

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	history "github.com/tripodmq/tripod/internal/verify"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// TestVerifyUnderFaults runs `tripod verify` on each backend with every
// fault kind that applies to it, two runs at a time, and checks that it exits 0 (no anomaly), and that its JSON
// shows a fault of each kind injected and healed, writes acknowledged
// and records read (for the transaction workload: transactions committed,
// and the transform's output checked too). The records workload on etcd
// runs with --racks: its consumers read from followers of their rack
// (KIP-392) through the faults.
func TestVerifyUnderFaults(t *testing.T) {
	type verifyCase struct {
		backend, workload, duration string
		faults                      []string
		racks                       bool
	}
	var cases []verifyCase
	// Every fault kind that applies, on each backend, for each workload:
	// the run lasts until each kind was injected once, so the durations
	// are short.
	for _, workload := range []string{WorkloadRecords, WorkloadTxn} {
		cases = append(cases,
			// Raft has no coordination server apart from the brokers.
			verifyCase{backend: "raft", workload: workload, duration: "20s", faults: []string{"kill", "pause", "cut", "restart"}},
			verifyCase{backend: "zk", workload: workload, duration: "25s", faults: FaultKinds},
			verifyCase{backend: "etcd", workload: workload, duration: "25s", faults: FaultKinds, racks: workload == WorkloadRecords})
	}
	for _, tc := range cases {
		name := tc.workload + "/" + tc.backend
		if tc.racks {
			name += "/racks"
		}
		t.Run(name, func(t *testing.T) {
			// Each run starts its own cluster and servers on free ports and
			// mostly waits out its faults: two at a time halve the package's
			// time in make test.
			t.Parallel()
			if tc.backend == "zk" {
				zkserver.Require(t)
			}
			out := filepath.Join(t.TempDir(), "verify.json")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := []string{"verify", "--coord", tc.backend, "--workload", tc.workload, "--duration", tc.duration, "--seed", "7",
				"--faults", strings.Join(tc.faults, ","), "--out", out}
			if tc.racks {
				args = append(args, "--racks")
			}
			cmd := exec.CommandContext(ctx, tripodBin, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			stdout, err := cmd.Output()
			t.Logf("tripod %s (%.0fs):\n%s", strings.Join(args, " "), time.Since(start).Seconds(), stdout)
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				t.Errorf("tripod verify: exit status %d, want 0; stderr:\n%s", exitErr.ExitCode(), stderr.String())
			} else if err != nil {
				t.Fatalf("tripod verify: %v; stderr:\n%s", err, stderr.String())
			}

			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("read %s: %v", out, err)
			}
			var rep verifyReport
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("decode %s: %v\n%s", out, err, b)
			}
			if rep.Seed != 7 || rep.Coord != tc.backend {
				t.Errorf("report: seed %d, coord %q; want 7 and %q", rep.Seed, rep.Coord, tc.backend)
			}
			if rep.Error != "" || !rep.Valid {
				t.Errorf("report: valid %v, error %q; want valid and no error", rep.Valid, rep.Error)
			}
			if !reflect.DeepEqual(rep.FaultKinds, tc.faults) {
				t.Errorf("report: fault kinds %v, want %v", rep.FaultKinds, tc.faults)
			}
			for _, kind := range tc.faults {
				if rep.FaultCounts[kind] == 0 {
					t.Errorf("no %s fault injected; faults: %+v", kind, rep.Faults)
				}
			}
			for _, f := range rep.Faults {
				if f.HealedAtS == nil || *f.HealedAtS < f.AtS || f.Error != "" {
					t.Errorf("fault %s of %s at %.1fs: healed at %v, error %q; want healed after it, no error", f.Kind, f.Target, f.AtS, f.HealedAtS, f.Error)
				}
			}
			res := rep.Result
			if res == nil {
				t.Fatal("report has no result")
			}
			kinds := []history.Kind{history.Idempotent, history.Plain, history.AcksOne}
			if tc.workload == WorkloadTxn {
				kinds = []history.Kind{history.Transactional}
				tr := rep.Transform
				if tr == nil || tr.Acked.Transactional == 0 || tr.Read.Transactional == 0 {
					t.Errorf("the transform's output: %+v; want transactions committed and read", tr)
				}
			}
			for _, k := range kinds {
				if res.Acked.Of(k) == 0 || res.Read.Of(k) == 0 {
					t.Errorf("%s: %d acknowledged, %d read; want some of each", k, res.Acked.Of(k), res.Read.Of(k))
				}
			}
			if len(res.Checks) != len(history.Checks) {
				t.Errorf("result has %d checks, want %d", len(res.Checks), len(history.Checks))
			}
			if n := len(rep.Consumers); n < 3 || rep.Consumers[n-1].Name != "final" || rep.Consumers[n-1].Reads == 0 {
				t.Errorf("consumers %+v, want 2 and the final read, each with records", rep.Consumers)
			}
		})
	}
}

// TestFaultScheduleIsDeterministic checks that one seed gives one fault
// schedule, another seed another, and that every kind comes within the
// first round.
func TestFaultScheduleIsDeterministic(t *testing.T) {
	draw := func(seed uint64) []plannedFault {
		plan := newFaultPlan(seed, FaultKinds, 2*time.Second)
		var out []plannedFault
		for range 20 {
			out = append(out, plan.next())
		}
		return out
	}
	a, b := draw(42), draw(42)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 gave two schedules:\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(a, draw(43)) {
		t.Errorf("seeds 42 and 43 gave the same schedule")
	}
	var first []string
	for _, f := range a[:len(FaultKinds)] {
		first = append(first, f.Kind)
	}
	slices.Sort(first)
	want := slices.Sorted(slices.Values(FaultKinds))
	if !slices.Equal(first, want) {
		t.Errorf("first round has kinds %v, want each of %v once", first, want)
	}
	for _, f := range a {
		if (f.Kind == "pause" || f.Kind == "cut") && f.Hold <= 2*time.Second {
			t.Errorf("%s held %v, want longer than the 2s session timeout", f.Kind, f.Hold)
		}
		if !slices.Contains(verifyFaultTargets, f.Target) || f.Wait <= 0 || f.Hold <= 0 {
			t.Errorf("fault %+v: want a known target and positive wait and hold", f)
		}
	}
}
