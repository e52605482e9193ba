package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOMBRun runs `tripod bench omb` on a 3-broker Raft cluster it starts
// itself, and with --coord kfake on franz-go's fake cluster, with a
// workload of 1 topic × 2 partitions, 2 subscriptions of 2 consumers each
// and 1 producer at 100 msg/s, for 3 s without warm-up, and checks that
// every acknowledged message was read by both subscriptions, each with
// its end-to-end latency, and that the JSON holds OMB's TestResult
// fields.
func TestOMBRun(t *testing.T) {
	for _, c := range []struct{ coord, started string }{
		{"raft", "started 3 brokers on raft"},
		{Kfake, "started kfake with 3 brokers"},
	} {
		t.Run(c.coord, func(t *testing.T) { testOMBRun(t, c.coord, c.started) })
	}
}

func testOMBRun(t *testing.T, coord, started string) {
	dir := t.TempDir()
	workload := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(workload, []byte(`name: tiny
topics: 1
partitionsPerTopic: 2
keyDistributor: "KEY_ROUND_ROBIN"
messageSize: 64
subscriptionsPerTopic: 2
consumerPerSubscription: 2
producersPerTopic: 1
producerRate: 100
consumerBacklogSizeGB: 0
testDurationMinutes: 15
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, profile := filepath.Join(dir, "out"), filepath.Join(dir, "profile")
	args := []string{"bench", "omb", "--workload", workload, "--duration", "3s", "--warmup", "0s",
		"--window", "1s", "--out", out, "--broker-gomaxprocs", "1", "--coord", coord}
	if coord != Kfake {
		// tripod's brokers also trace themselves, with a broker property.
		args = append(args, "--profile", profile, "--set", "log.writeback.bytes=65536")
	}
	stdout, _ := runBench(t, 2*time.Minute, args...)
	for _, s := range []string{started, "Pub rate", "LATENCY (ms)", "end-to-end", "Machine CPU busy", "machine CPU over the test"} {
		if !strings.Contains(string(stdout), s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if coord != Kfake {
		checkProfiles(t, profile, 3)
	}
	results, _ := filepath.Glob(filepath.Join(out, "tiny-*.json"))
	charts, _ := filepath.Glob(filepath.Join(out, "tiny-*.svg"))
	if len(results) != 1 || len(charts) != 1 {
		t.Fatalf("--out holds results %v and charts %v, want one of each", results, charts)
	}
	b, err := os.ReadFile(results[0])
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatalf("decode %s: %v", results[0], err)
	}
	for _, k := range []string{"workload", "messageSize", "topics", "partitions", "producersPerTopic", "consumersPerTopic",
		"publishRate", "consumeRate", "backlog", "publishLatency50pct", "publishLatency75pct", "publishLatency95pct",
		"publishLatency99pct", "publishLatency999pct", "publishLatency9999pct", "publishLatencyMax",
		"endToEndLatency50pct", "endToEndLatency9999pct", "endToEndLatencyMax",
		"aggregatedPublishLatency50pct", "aggregatedPublishLatency99pct", "aggregatedPublishLatency9999pct", "aggregatedPublishLatencyMax",
		"aggregatedEndToEndLatency50pct", "aggregatedEndToEndLatency99pct", "aggregatedEndToEndLatency9999pct", "aggregatedEndToEndLatencyMax"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks OMB's field %s", k)
		}
	}
	var res ombResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.MessagesAcknowledged == 0 || res.MessagesAcknowledged != res.MessagesSent {
		t.Errorf("%d messages sent, %d acknowledged: want all of at least one", res.MessagesSent, res.MessagesAcknowledged)
	}
	if want := 2 * res.MessagesAcknowledged; res.MessagesReceived != want || res.EndToEndLatencySamples != want {
		t.Errorf("%d messages received with %d end-to-end latencies, want each of the %d acknowledged by both subscriptions: %d",
			res.MessagesReceived, res.EndToEndLatencySamples, res.MessagesAcknowledged, want)
	}
	if res.SendErrors != 0 || res.FetchErrors != 0 {
		t.Errorf("%d send errors (first %q), %d fetch errors (first %q): want none", res.SendErrors, res.FirstSendError, res.FetchErrors, res.FirstFetchError)
	}
	if len(res.PublishRate) == 0 || len(res.PublishRate) != len(res.EndToEndLatency99pct) || len(res.Backlog) != len(res.PublishRate) {
		t.Errorf("windows: %d publish rates, %d end-to-end p99s, %d backlogs: want the same number, at least 1",
			len(res.PublishRate), len(res.EndToEndLatency99pct), len(res.Backlog))
	}
	// The machine's CPU, read from /proc/stat: per window, and over the
	// test; a run that sends and receives is busy some of the time.
	if len(res.MachineCPUBusyPct) != len(res.PublishRate) || len(res.MachineCPUStealPct) != len(res.PublishRate) {
		t.Errorf("machine CPU: %d busy and %d steal figures for %d windows, want one each per window",
			len(res.MachineCPUBusyPct), len(res.MachineCPUStealPct), len(res.PublishRate))
	}
	if b, st := res.TestMachineCPUBusyPct, res.TestMachineCPUStealPct; b == nil || st == nil || *b <= 0 || *b+*st > 100.001 || *st < 0 {
		t.Errorf("machine CPU over the test: busy %v, steal %v: want busy above 0 and busy plus steal at most 100 %%", b, st)
	}
	if res.AggregatedEndToEndLatency50pct <= 0 || res.AggregatedEndToEndLatencyMax < res.AggregatedEndToEndLatency9999pct ||
		res.AggregatedPublishLatency50pct <= 0 || res.AggregatedPublishLatencyMax < res.AggregatedPublishLatency9999pct {
		t.Errorf("aggregated latencies: publish p50 %v max %v, end-to-end p50 %v max %v: want above 0, max at least p99.99",
			res.AggregatedPublishLatency50pct, res.AggregatedPublishLatencyMax, res.AggregatedEndToEndLatency50pct, res.AggregatedEndToEndLatencyMax)
	}
}

// checkProfiles checks that dir holds what --profile captures from
// brokers brokers and from the benchmark's own process: Go execution
// traces (they start "go 1.") and CPU profiles (gzipped protobufs), and
// each broker's allocations (gzipped protobufs too).
func checkProfiles(t *testing.T, dir string, brokers int) {
	t.Helper()
	names := []string{"client"}
	for id := 1; id <= brokers; id++ {
		names = append(names, fmt.Sprintf("broker-%d", id))
	}
	for _, name := range names {
		trace, err := os.ReadFile(filepath.Join(dir, name+".trace"))
		if err != nil || !bytes.HasPrefix(trace, []byte("go 1.")) {
			t.Errorf("%s.trace: %d bytes starting %q, error %v: want a Go execution trace", name, len(trace), trace[:min(len(trace), 8)], err)
		}
		cpu, err := os.ReadFile(filepath.Join(dir, name+".cpu.pprof"))
		if err != nil || !bytes.HasPrefix(cpu, []byte{0x1f, 0x8b}) {
			t.Errorf("%s.cpu.pprof: %d bytes, error %v: want a gzipped CPU profile", name, len(cpu), err)
		}
		if name == "client" {
			continue
		}
		allocs, err := os.ReadFile(filepath.Join(dir, name+".allocs.pprof"))
		if err != nil || !bytes.HasPrefix(allocs, []byte{0x1f, 0x8b}) {
			t.Errorf("%s.allocs.pprof: %d bytes, error %v: want a gzipped allocation profile", name, len(allocs), err)
		}
	}
}

// TestOMBRefusesBadFlags checks that tripod bench omb names the flag and
// its range for a value outside it, before starting anything.
func TestOMBRefusesBadFlags(t *testing.T) {
	zero, negative := time.Duration(0), -time.Second
	for _, c := range []struct {
		set  func(*OMBConfig)
		want string
	}{
		{func(c *OMBConfig) { c.Workload = "" }, "--workload: give an OpenMessaging Benchmark workload file"},
		{func(c *OMBConfig) { c.Duration = &zero }, "--duration 0s: must be above 0 and at most 168h"},
		{func(c *OMBConfig) { c.Warmup = &negative }, "--warmup -1s: must be between 0 and 168h"},
		{func(c *OMBConfig) { c.Acks = "2" }, `--acks "2": must be 1 or all`},
		{func(c *OMBConfig) { c.ReplicationFactor = 4 }, "--replication-factor 4: more than the 3 brokers of --brokers"},
		{func(c *OMBConfig) { c.MaxInFlight = 0 }, "--max-in-flight 0: must be between 1 and 1000000"},
		{func(c *OMBConfig) { c.Window = time.Millisecond }, "--window 1ms: must be between 100ms and 1h"},
		{func(c *OMBConfig) { c.Coord = "kafka" }, `--coord "kafka": must be one of raft, zk, etcd, or kfake (franz-go's fake cluster, for comparison)`},
		{func(c *OMBConfig) { c.Sets = []string{"log.writeback.bytes"} }, `--set "log.writeback.bytes": want key=value`},
		{func(c *OMBConfig) { c.Coord, c.Sets = Kfake, []string{"a=b"} }, "--set: sets tripod's broker properties, not kfake's"},
		{func(c *OMBConfig) { c.Bootstrap, c.Sets = "127.0.0.1:9092", []string{"a=b"} }, "--set: sets the properties of the brokers this command starts"},
		{func(c *OMBConfig) { c.Coord, c.Profile = Kfake, "p" }, "--profile: traces tripod's brokers, not kfake"},
		{func(c *OMBConfig) { c.Bootstrap, c.Profile = "127.0.0.1:9092", "p" }, "--profile: traces the brokers this command starts"},
		{func(c *OMBConfig) { c.HeapFloor = -1 }, "--heap-floor -1: must be 0 (off) or a size in bytes up to 1 TiB"},
	} {
		cfg := DefaultOMBConfig()
		cfg.Workload, cfg.Binary = "omb/workloads/1-topic-16-partitions-1kb.yaml", "/nonexistent/tripod"
		c.set(&cfg)
		if err := OMB(context.Background(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
