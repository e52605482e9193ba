package conformance

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestRunCaseFatalfEndsCaseAndRunsCleanupsLIFO checks the runner's T: a
// Fatalf ends the case where it is called, cleanups run last-in first-out
// even when one of them fails, and TempDir's directory is gone afterwards.
func TestRunCaseFatalfEndsCaseAndRunsCleanupsLIFO(t *testing.T) {
	var order []string
	var dir string
	reachedAfterFatal := false
	r := runCase(context.Background(), "Group/Case", func(rt T) {
		dir = rt.TempDir()
		rt.Cleanup(func() { order = append(order, "first") })
		rt.Cleanup(func() {
			order = append(order, "second")
			rt.Fatalf("cleanup failed")
		})
		rt.Cleanup(func() { order = append(order, "third") })
		rt.Logf("before the failure")
		rt.Fatalf("got %d, want %d", 1, 2)
		reachedAfterFatal = true
	})
	if reachedAfterFatal {
		t.Errorf("code after Fatalf ran, want the case ended")
	}
	if want := []string{"third", "second", "first"}; !reflect.DeepEqual(order, want) {
		t.Errorf("cleanup order: got %v, want %v", order, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("TempDir %s after the case: stat error %v, want it removed", dir, err)
	}
	if r.Outcome != OutcomeFail || r.Case != "Group/Case" {
		t.Errorf("result: got %q %q, want %q %q", r.Case, r.Outcome, "Group/Case", OutcomeFail)
	}
	for _, want := range []string{"before the failure", "FAIL: got 1, want 2", "FAIL: cleanup failed"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message %q: want it to contain %q", r.Message, want)
		}
	}
}

// TestRunCasePassAndPanic checks that a case without failures passes with
// its logs as the message and that a panicking case fails instead of
// taking the process down.
func TestRunCasePassAndPanic(t *testing.T) {
	r := runCase(context.Background(), "Group/Pass", func(rt T) { rt.Logf("measured %d", 42) })
	if r.Outcome != OutcomePass || r.Message != "measured 42" {
		t.Errorf("passing case: got %q %q, want %q %q", r.Outcome, r.Message, OutcomePass, "measured 42")
	}
	r = runCase(context.Background(), "Group/Panic", func(rt T) { panic("boom") })
	if r.Outcome != OutcomeFail || !strings.Contains(r.Message, "panic: boom") {
		t.Errorf("panicking case: got %q %q, want %q with the panic", r.Outcome, r.Message, OutcomeFail)
	}
}

// TestCasesNamedAndGrouped checks the case table: unique Group/Case names
// and the Availability group, whose cases need optional interfaces, last.
func TestCasesNamedAndGrouped(t *testing.T) {
	seen := map[string]bool{}
	availability := false
	for _, tc := range cases() {
		if seen[tc.fullName()] {
			t.Errorf("case %s listed twice", tc.fullName())
		}
		seen[tc.fullName()] = true
		if tc.group == "Availability" {
			availability = true
		} else if availability {
			t.Errorf("case %s after the Availability group, want Availability last", tc.fullName())
		}
		if tc.needs != needsNothing && tc.group != "Availability" {
			t.Errorf("case %s needs %v outside the Availability group", tc.fullName(), tc.needs)
		}
	}
	if len(seen) < 15 {
		t.Errorf("got %d cases, want at least 15", len(seen))
	}
}

// TestRunAllRunsControllerCases checks that `tripod conformance` (RunAll)
// runs the controller's cases as well as the backend's, each once, with
// the Availability group still last.
func TestRunAllRunsControllerCases(t *testing.T) {
	all := runAllCases()
	seen := map[string]int{}
	for _, tc := range all {
		seen[tc.fullName()]++
	}
	for _, tc := range append(cases(), controllerCases()...) {
		if seen[tc.fullName()] != 1 {
			t.Errorf("case %s: run %d times by RunAll, want once", tc.fullName(), seen[tc.fullName()])
		}
	}
	if len(all) != len(cases())+len(controllerCases()) {
		t.Errorf("got %d cases, want %d", len(all), len(cases())+len(controllerCases()))
	}
	availability := false
	for _, tc := range all {
		if tc.group == "Availability" {
			availability = true
		} else if availability {
			t.Errorf("case %s after the Availability group, want Availability last", tc.fullName())
		}
	}
}

// namedHarness is a Harness that only has a name: plan never makes a
// cluster.
type namedHarness struct {
	Harness
	name string
}

func (h namedHarness) Name() string { return h.name }

// TestPlanMigrateFromAndMatch checks what RunAllWith runs: with
// MigrateFrom, the controller's cases on the migrated harness, named
// after it, and the backend's on the target's; with Match, only the
// cases whose names it selects.
func TestPlanMigrateFromAndMatch(t *testing.T) {
	etcd, zk := namedHarness{name: "etcd"}, namedHarness{name: "zk"}
	planned := plan(etcd, RunOptions{MigrateFrom: zk})
	if len(planned) != len(runAllCases()) {
		t.Fatalf("got %d cases, want %d", len(planned), len(runAllCases()))
	}
	for i, pc := range planned {
		tc := runAllCases()[i]
		wantName, wantHarness := tc.fullName(), "etcd"
		if tc.group == controllerGroup {
			wantName, wantHarness = "zk-to-etcd/"+tc.fullName(), "zk-to-etcd"
		}
		if pc.name != wantName || pc.h.Name() != wantHarness {
			t.Errorf("case %d: got %s on %s, want %s on %s", i, pc.name, pc.h.Name(), wantName, wantHarness)
		}
	}
	if plain := plan(etcd, RunOptions{}); plain[len(plain)-1].name != runAllCases()[len(runAllCases())-1].fullName() {
		t.Errorf("without MigrateFrom: last case %s, want %s", plain[len(plain)-1].name, runAllCases()[len(runAllCases())-1].fullName())
	}
	match := func(name string) bool { return strings.HasPrefix(name, "zk-to-etcd/Controller/") }
	var names []string
	for _, pc := range plan(etcd, RunOptions{MigrateFrom: zk, Match: match}) {
		names = append(names, pc.name)
	}
	var want []string
	for _, tc := range controllerCases() {
		want = append(want, "zk-to-etcd/"+tc.fullName())
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("with Match: got %v, want %v", names, want)
	}
}
