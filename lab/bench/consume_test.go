package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchConsume runs `tripod bench consume` comparing two brokers'
// binaries (the same one twice): each gets a cluster of its own, the
// runs alternate between them, every run reads every record once, and
// the brokers' CPU is measured.
func TestBenchConsume(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "consume.json")
	out, _ := runBench(t, 3*time.Minute, "bench", "consume", "--brokers", "1", "--replication-factor", "1", "--partitions", "3",
		"--records", "5000", "--record-size", "512", "--runs", "2", "--broker-binary", tripodBin+","+tripodBin, "--json", jsonPath,
		"--broker-gomaxprocs", "1")
	if n := strings.Count(string(out), "records, 2.56 MB in "); n != 4 {
		t.Fatalf("%d run lines reading 5000 records of 512 B, want 4 (2 runs of 2 clusters):\n%s", n, out)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var runs []consumeResult
	if err := json.Unmarshal(b, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("--json has %d runs, want 4", len(runs))
	}
	for i, r := range runs {
		if r.Run != i/2+1 || r.Records != 5000 || r.BrokerCPUSeconds < 0 || r.MBPerSec <= 0 {
			t.Errorf("run %d: %+v; want run %d, 5000 records, the brokers' CPU and a rate", i, r, i/2+1)
		}
	}
}

// TestBenchConsumeRefusesBadFlags: a bad value is refused, named, before
// anything starts.
func TestBenchConsumeRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--records", "0"},
		{"--record-size", "0"},
		{"--replication-factor", "4"},
		{"--runs", "0"},
		{"--broker-binary", "/nonexistent/tripod"},
		{"--coord", "consul"},
	} {
		b, err := exec.Command(tripodBin, append([]string{"bench", "consume"}, args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(b), args[0]) {
			t.Errorf("tripod bench consume %s: %v, output %q; want a refusal naming %s", strings.Join(args, " "), err, b, args[0])
		}
	}
}
