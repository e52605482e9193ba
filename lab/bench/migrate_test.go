package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchMigrate runs `tripod bench migrate` for one move, etcd to
// Raft, of a loaded 6-partition cluster, and checks that the table has
// its row with 0 records lost, and that migrate.json holds the
// migration's time, the metadata writes' longest wait, and latencies
// before, during and after it.
func TestBenchMigrate(t *testing.T) {
	out := t.TempDir()
	b, _ := runBench(t, 3*time.Minute, "bench", "migrate", "--direction", "etcd:raft", "--partitions", "6", "--before", "2s", "--after", "2s", "--out", out)
	// from, to, partitions, 3 times, 9 latencies, acked, lost.
	row := regexp.MustCompile(`(?m)^\s*etcd\s+raft\s+6(\s+\d+){3}(\s+\d+\.\d){9}\s+[1-9]\d*\s+0\s*$`)
	if !row.Match(b) {
		t.Errorf("no table row for etcd to raft, 6 partitions, every figure measured, records acknowledged and 0 lost")
	}
	b, err := os.ReadFile(filepath.Join(out, "migrate.json"))
	if err != nil {
		t.Fatalf("read migrate.json: %v", err)
	}
	var report migrateReport
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatalf("decode migrate.json: %v\n%s", err, b)
	}
	if len(report.Series) != 1 {
		t.Fatalf("migrate.json holds %d series, want 1", len(report.Series))
	}
	s := report.Series[0]
	if s.Backend != "etcd" || s.To != "raft" || s.Partitions != 6 || s.Error != "" {
		t.Errorf("series %s to %s with %d partitions (error %q), want etcd to raft with 6", s.Backend, s.To, s.Partitions, s.Error)
	}
	if s.MigrationMs <= 0 || s.WritesRefusedMs <= 0 || s.WritesGapBeforeMs <= 0 {
		t.Errorf("migration %v ms, writes refused %v ms, gap before %v ms: want each measured", s.MigrationMs, s.WritesRefusedMs, s.WritesGapBeforeMs)
	}
	if !strings.Contains(strings.Join(s.Output, "\n"), "every broker is on raft") {
		t.Errorf("tripod migrate's output does not say every broker is on raft:\n%s", strings.Join(s.Output, "\n"))
	}
	for what, st := range map[string]latencyStats{"before": s.Before, "during": s.During, "after": s.After} {
		if st.N == 0 || st.P50 <= 0 || st.P99 < st.P50 || st.Max < st.P99 {
			t.Errorf("latency %s the migration: %+v, want records with ordered percentiles", what, st)
		}
	}
	if s.Acked == 0 || s.Lost != 0 || s.Consumed < s.Acked {
		t.Errorf("%d acknowledged, %d read back, %d lost; want some acknowledged, all read back, 0 lost (e.g. %v)", s.Acked, s.Consumed, s.Lost, s.LostSample)
	}
}

// TestBenchMigrateRefusesBadFlags checks that a direction that does not
// move, or names no backend, is refused by name before anything starts.
func TestBenchMigrateRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--direction", "zk:zk"},
		{"--direction", "zk"},
		{"--direction", "zk:consul"},
		{"--partitions", "0"},
		{"--before", "0s"},
	} {
		cmd := exec.Command(tripodBin, append([]string{"bench", "migrate"}, args...)...)
		b, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(b), args[0]) {
			t.Errorf("tripod bench migrate %s: %v, output %q; want a refusal naming %s", strings.Join(args, " "), err, b, args[0])
		}
	}
}
