package bench

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/createtopics"
)

// benchHeaderLine and benchResultLine match the lines `tripod bench
// produce` prints per run.
var (
	benchHeaderLine = regexp.MustCompile(`^== acks=(\S+) replication-factor=(\d+) record-size=(\d+) B `)
	benchCPULine    = regexp.MustCompile(`^CPU from the first record to the last ack: brokers ([\d.]+) s \(([\d.]+) s per million records\), producer ([\d.]+) s \(([\d.]+) s per million records\); machine ([\d.]+)% busy, ([\d.]+)% steal$`)
	benchResultLine = regexp.MustCompile(`^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th\.$`)
)

// TestBenchProduce runs `tripod bench produce` on a 3-broker Raft cluster
// it starts itself, for acks 1 and all at replication factors 1 and 3, and
// checks that it prints one header and one kafka-producer-perf-test line
// per combination with plausible figures, and writes the same runs to
// --json.
func TestBenchProduce(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	out, _ := runBench(t, 2*time.Minute, "bench", "produce", "--coord", "raft", "--brokers", "3", "--records", "2000",
		"--record-size", "100", "--acks", "1,all", "--replication-factor", "1,3", "--json", jsonPath,
		"--broker-gomaxprocs", "1")

	type combo struct {
		acks string
		rf   int
	}
	seen := map[combo]bool{}
	var pending *combo
	results, cpuLines := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		if m := benchCPULine.FindStringSubmatch(line); m != nil {
			cpuLines++
			brokers, _ := strconv.ParseFloat(m[1], 64)
			producer, _ := strconv.ParseFloat(m[3], 64)
			if brokers <= 0 || producer <= 0 {
				t.Errorf("%q: want the brokers and the producer to have used CPU during the run", line)
			}
			continue
		}
		if m := benchHeaderLine.FindStringSubmatch(line); m != nil {
			rf, _ := strconv.Atoi(m[2])
			pending = &combo{m[1], rf}
			if m[3] != "100" {
				t.Errorf("header %q: record size %s, want 100", line, m[3])
			}
			if !strings.Contains(line, " linger=0s batch-size=1000012 max-in-flight=5 ") {
				t.Errorf("header %q: want the producer settings linger=0s batch-size=1000012 max-in-flight=5", line)
			}
			continue
		}
		m := benchResultLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		results++
		if pending == nil {
			t.Fatalf("result line %q without a header before it", line)
		}
		seen[*pending] = true
		pending = nil
		f := make([]float64, len(m))
		for i := 1; i < len(m); i++ {
			f[i], _ = strconv.ParseFloat(m[i], 64)
		}
		if f[1] != 2000 {
			t.Errorf("%q: %v records sent, want 2000", line, f[1])
		}
		if f[2] <= 0 || f[3] <= 0 {
			t.Errorf("%q: records/sec %v and MB/sec %v, want both above 0", line, f[2], f[3])
		}
		if f[4] <= 0 || f[4] > f[5] {
			t.Errorf("%q: avg latency %v ms, want above 0 and at most the max %v ms", line, f[4], f[5])
		}
		if !(f[6] <= f[7] && f[7] <= f[8] && f[8] <= f[9] && f[9] <= f[5]) {
			t.Errorf("%q: percentiles 50/95/99/99.9 = %v/%v/%v/%v ms, want rising and at most the max %v ms", line, f[6], f[7], f[8], f[9], f[5])
		}
	}
	if results != 4 || cpuLines != 4 {
		t.Errorf("%d result lines and %d CPU lines, want 4 of each", results, cpuLines)
	}
	for _, c := range []combo{{"1", 1}, {"all", 1}, {"1", 3}, {"all", 3}} {
		if !seen[c] {
			t.Errorf("no result for acks=%s replication-factor=%d", c.acks, c.rf)
		}
	}
	if !strings.Contains(string(out), "RECORDS/S") {
		t.Errorf("no summary table in the output")
	}
	if !strings.Contains(string(out), "started 3 brokers on raft, GOMAXPROCS 1 each: ") {
		t.Errorf("no line saying the 3 brokers started with GOMAXPROCS 1")
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatalf("read --json file: %v", err)
	}
	var runs []produceResult
	if err := json.Unmarshal(b, &runs); err != nil {
		t.Fatalf("decode --json file: %v\n%s", err, b)
	}
	if len(runs) != 4 {
		t.Fatalf("--json holds %d runs, want 4", len(runs))
	}
	for _, r := range runs {
		if r.Records != 2000 || r.RecordSize != 100 || r.RecordsPerSec <= 0 || r.BrokerGoMaxProcs != 1 {
			t.Errorf("--json run %+v: want 2000 records of 100 B at a rate above 0, brokers on GOMAXPROCS 1", r)
		}
		checkProduceCPU(t, r)
	}
}

// checkProduceCPU checks the CPU figures of a run against a cluster the
// benchmark started: the brokers and the producer both used some, per
// million records is the same scaled, and the machine's shares are
// percentages.
func checkProduceCPU(t *testing.T, r produceResult) {
	t.Helper()
	if r.BrokerCPUSeconds <= 0 || r.ProducerCPUSeconds <= 0 {
		t.Errorf("--json run acks=%s rf=%d: broker CPU %v s, producer CPU %v s, want both above 0", r.Acks, r.ReplicationFactor, r.BrokerCPUSeconds, r.ProducerCPUSeconds)
	}
	million := float64(r.Records) / 1e6
	if d := r.BrokerCPUPerMillion*million - r.BrokerCPUSeconds; d > 1e-9 || d < -1e-9 {
		t.Errorf("--json run: broker CPU %v s per million records for %d records, want %v s in all", r.BrokerCPUPerMillion, r.Records, r.BrokerCPUSeconds)
	}
	if r.MachineCPUBusyPct == nil || r.MachineCPUStealPct == nil {
		t.Fatalf("--json run: no machine CPU figures")
	}
	if b, s := *r.MachineCPUBusyPct, *r.MachineCPUStealPct; b < 0 || s < 0 || b+s > 100.0001 {
		t.Errorf("--json run: machine %v%% busy, %v%% steal, want shares of 100", b, s)
	}
}

// TestBenchProduceKfake checks that a run against kfake counts kfake's
// process as the brokers' CPU.
func TestBenchProduceKfake(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	out, _ := runBench(t, 2*time.Minute, "bench", "produce", "--coord", "kfake", "--records", "20000",
		"--record-size", "100", "--acks", "all", "--replication-factor", "1", "--json", jsonPath)
	if !strings.Contains(string(out), "started kfake with 3 brokers") {
		t.Fatalf("no line saying kfake started:\n%s", out)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatalf("read --json file: %v", err)
	}
	var runs []produceResult
	if err := json.Unmarshal(b, &runs); err != nil || len(runs) != 1 {
		t.Fatalf("--json file: %v, want one run:\n%s", err, b)
	}
	checkProduceCPU(t, runs[0])
}

// TestPrimeProducer checks that primeProducer leaves exactly one record
// in every partition of a topic, keyed so that the producer's default
// partitioner put it there, and that the records it sent were
// acknowledged (its client then knows the topic and holds a producer id).
func TestPrimeProducer(t *testing.T) {
	// A session long enough that a broker stays live for the controller a
	// while, crash probes off, as the CLI's cluster tests run.
	cfg, err := env.Configure("raft", 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SessionTimeout, cfg.Sets = 20*time.Second, []string{"broker.crash.probe.interval.ms=0"}
	c := env.StartForTest(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, partitions = "primed", 7
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := createtopics.Create(ctx, cl, createtopics.Topic{Name: topic, Partitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := waitTopicLeaders(ctx, c.Bootstrap()[0], topic, partitions); err != nil {
		t.Fatal(err)
	}
	if err := primeProducer(ctx, cl, topic, partitions, []byte("value")); err != nil {
		t.Fatalf("primeProducer: %v", err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		end, ok := ends.Lookup(topic, p)
		if !ok || end.Err != nil || end.Offset != 1 {
			t.Errorf("partition %d: end offset %+v, want 1 (one priming record)", p, end)
		}
	}
}

// TestBenchRefusesBadBrokerGoMaxProcs checks that both benchmarks name
// --broker-gomaxprocs and its range when given a value outside it, before
// starting anything.
func TestBenchRefusesBadBrokerGoMaxProcs(t *testing.T) {
	for _, bench := range []string{"produce", "failover"} {
		for _, v := range []int{-1, 1025} {
			var err error
			if bench == "produce" {
				cfg := DefaultProduceConfig()
				cfg.BrokerGoMaxProcs, cfg.Binary = v, "/nonexistent/tripod"
				err = Produce(context.Background(), cfg, io.Discard)
			} else {
				cfg := DefaultFailoverConfig()
				cfg.BrokerGoMaxProcs, cfg.Binary, cfg.Out = v, "/nonexistent/tripod", t.TempDir()
				err = Failover(context.Background(), cfg, io.Discard, io.Discard)
			}
			if want := "--broker-gomaxprocs " + strconv.Itoa(v) + ": must be between 0 and 1024"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("tripod bench %s --broker-gomaxprocs %d: got %v, want %q", bench, v, err, want)
			}
		}
	}
}

// TestBenchCompressionFlag checks that --compression takes Kafka's
// compression.type names and refuses another by name, and that compressed
// runs send records that differ from one another, so that the codec
// compresses records, not one record repeated.
func TestBenchCompressionFlag(t *testing.T) {
	for _, c := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		if _, err := parseCompression(c); err != nil {
			t.Errorf("--compression %s: got %v, want it accepted", c, err)
		}
	}
	if _, err := parseCompression("brotli"); err == nil || !strings.Contains(err.Error(), "--compression") {
		t.Errorf("--compression brotli: got %v, want an error naming --compression", err)
	}
	if got := len(benchPayloads(100, "none")); got != 1 {
		t.Errorf("uncompressed payloads: got %d, want 1 repeated", got)
	}
	payloads := benchPayloads(1024, "zstd")
	distinct := map[string]bool{}
	for _, p := range payloads {
		if len(p) != 1024 {
			t.Fatalf("payload of %d bytes, want 1024", len(p))
		}
		distinct[string(p)] = true
	}
	if len(payloads) < 2 || len(distinct) != len(payloads) {
		t.Errorf("compressed payloads: got %d distinct of %d, want at least 2, all distinct", len(distinct), len(payloads))
	}
}

// TestBenchProduceRefusesBadSets checks that bench produce names --set
// when a value is not key=value or when it has no tripod brokers of its
// own to set, before starting anything.
func TestBenchProduceRefusesBadSets(t *testing.T) {
	for _, c := range []struct {
		set  func(*ProduceConfig)
		want string
	}{
		{func(c *ProduceConfig) { c.Sets = []string{"replica.fetch.wait.max.ms"} }, `--set "replica.fetch.wait.max.ms": want key=value`},
		{func(c *ProduceConfig) { c.Coord, c.Sets = Kfake, []string{"a=b"} }, "--set: sets tripod's broker properties, not kfake's"},
		{func(c *ProduceConfig) { c.Bootstrap, c.Sets = "127.0.0.1:9092", []string{"a=b"} }, "--set: sets the properties of the brokers this command starts"},
	} {
		cfg := DefaultProduceConfig()
		cfg.Binary = "/nonexistent/tripod"
		c.set(&cfg)
		if err := Produce(context.Background(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
