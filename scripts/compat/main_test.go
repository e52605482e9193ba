package main

import (
	"strings"
	"testing"
	"time"
)

// TestRenderKeepsSuitesNotRun checks that a run of some suites (-suites
// sarama) rewrites their rows and sections and keeps the others' as the
// page had them.
func TestRenderKeepsSuitesNotRun(t *testing.T) {
	old := "# Client suites against tripod\n\nintro\n\n" +
		"| suite | version | cluster | passed | failed | skipped | time |\n| --- | --- | --- | --- | --- | --- | --- |\n" +
		"| franz-go (`./pkg/kgo`) | v1.22.3 | 3 brokers | 527 | 0 | 9 | 1m47s |\n" +
		"| sarama (`.`) | v1.61.1 | 5 brokers | 96 | 11 | 5 | 4m8s |\n" +
		"\n## franz-go v1.22.3\n\nRun 2026-12-04, tripod cd462db.\n\n| test | result | reason | message |\n| --- | --- | --- | --- |\n" +
		"| `TestSCRAMAuth` | skip | skipped by the suite: no seeds |  |\n" +
		"\n## sarama v1.61.1\n\nRun 2026-12-04, tripod cd462db.\n\n| test | result | reason | message |\n| --- | --- | --- | --- |\n" +
		"| `TestFuncConnectionFailure` | fail | needs toxiproxy | 501 |\n"
	var sarama suite
	for _, s := range suites {
		if s.name == "sarama" {
			sarama = s
		}
	}
	r := newResult(sarama, "v1.61.1")
	r.tests["TestFuncConnectionFailure"] = &test{name: "TestFuncConnectionFailure", status: "pass"}
	r.order = []string{"TestFuncConnectionFailure"}
	r.elapsed = 5 * time.Minute
	page := render([]*result{r}, "abc1234", "", old)

	for _, want := range []string{
		"| franz-go (`./pkg/kgo`) | v1.22.3 | 3 brokers | 527 | 0 | 9 | 1m47s |\n| sarama (`.`) | v1.61.1 | 5 brokers behind toxiproxy | 1 | 0 | 0 | 5m0s |\n",
		"\n## franz-go v1.22.3\n\nRun 2026-12-04, tripod cd462db.\n\n| test | result | reason | message |\n| --- | --- | --- | --- |\n" +
			"| `TestSCRAMAuth` | skip | skipped by the suite: no seeds |  |\n\n## sarama v1.61.1\n\nRun ",
		", tripod abc1234.\n\nEvery test passed.\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page without %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "501") || strings.Count(page, "## sarama") != 1 {
		t.Errorf("page kept sarama's old section:\n%s", page)
	}
}

// TestFailMessage checks the message of a t.Fatal and of a testify
// assertion, which reports on the lines after its file and line.
func TestFailMessage(t *testing.T) {
	for _, tc := range []struct {
		output []string
		want   string
	}{
		{[]string{"=== RUN   TestA", "    a_test.go:12: boom", "--- FAIL: TestA (0.00s)"}, "boom"},
		{[]string{
			"=== RUN   TestB",
			"    functional_admin_test.go:1085: ",
			"        \tError Trace:\t/tmp/sarama/functional_admin_test.go:1085",
			"        \tError:      \tTarget error should be in err chain:",
			"        \t            \texpected: \"x\"",
			"        \tTest:       \tTestB",
			"        \tMessages:   \tfailed to read",
			"--- FAIL: TestB (0.02s)",
		}, `Target error should be in err chain: expected: "x" failed to read`},
	} {
		if got := failMessage(&test{output: tc.output}); got != tc.want {
			t.Errorf("failMessage(%q) = %q, want %q", tc.output, got, tc.want)
		}
	}
}
