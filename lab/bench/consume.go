package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
)

// ConsumeConfig is what `tripod bench consume` measures, and on which
// cluster. Validation errors name the CLI's flags.
type ConsumeConfig struct {
	// Bootstrap is HOST:PORT[,HOST:PORT] of an existing cluster
	// (--bootstrap); empty: the benchmark starts Brokers brokers on Coord
	// for each of BrokerBinaries.
	Bootstrap string
	Coord     string
	Brokers   int
	// BrokerBinaries are the tripod executables whose brokers are
	// measured side by side (--broker-binary), each on a cluster of its
	// own, the runs alternating between them; empty: this binary.
	BrokerBinaries []string
	// Records of RecordSize bytes are produced into a topic of
	// Partitions partitions and ReplicationFactor, then read Runs times.
	Records           int
	RecordSize        int
	Partitions        int
	ReplicationFactor int
	Runs              int
	// BrokerGoMaxProcs is the GOMAXPROCS of each broker started; 0: this
	// process's own.
	BrokerGoMaxProcs int
	// Timeout bounds the fill and each run.
	Timeout time.Duration
	// JSONPath is the file every run's figures are written to; empty for
	// none.
	JSONPath string
}

// DefaultConsumeConfig returns the defaults of `tripod bench consume`.
func DefaultConsumeConfig() ConsumeConfig {
	return ConsumeConfig{
		Coord:             "raft",
		Brokers:           3,
		Records:           1000000,
		RecordSize:        1024,
		Partitions:        6,
		ReplicationFactor: 3,
		Runs:              5,
		Timeout:           10 * time.Minute,
	}
}

// validate checks the flags and names the first bad one.
func (o *ConsumeConfig) validate() error {
	switch {
	case o.Bootstrap != "" && len(o.BrokerBinaries) > 0:
		return fmt.Errorf("--broker-binary: the brokers of --bootstrap are not started by the benchmark")
	case o.Bootstrap == "" && (o.Brokers < 1 || o.Brokers > 100):
		return fmt.Errorf("--brokers %d: must be between 1 and 100", o.Brokers)
	case o.Bootstrap == "" && o.Coord != "raft" && o.Coord != "zk" && o.Coord != "etcd":
		return fmt.Errorf("--coord %q: must be raft, zk or etcd", o.Coord)
	case o.Records < 1 || o.Records > 1e9:
		return fmt.Errorf("--records %d: must be between 1 and 1000000000", o.Records)
	case o.RecordSize < 1 || o.RecordSize > 1<<20:
		return fmt.Errorf("--record-size %d: must be between 1 and 1048576", o.RecordSize)
	case o.Partitions < 1 || o.Partitions > 10000:
		return fmt.Errorf("--partitions %d: must be between 1 and 10000", o.Partitions)
	case o.ReplicationFactor < 1 || (o.Bootstrap == "" && o.ReplicationFactor > o.Brokers):
		return fmt.Errorf("--replication-factor %d: must be between 1 and --brokers (%d)", o.ReplicationFactor, o.Brokers)
	case o.Runs < 1 || o.Runs > 1000:
		return fmt.Errorf("--runs %d: must be between 1 and 1000", o.Runs)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout %v: must be positive", o.Timeout)
	}
	if err := validateBrokerGoMaxProcs(o.BrokerGoMaxProcs); err != nil {
		return err
	}
	for _, b := range o.BrokerBinaries {
		if st, err := os.Stat(b); err != nil || st.IsDir() {
			return fmt.Errorf("--broker-binary %s: not an executable file", b)
		}
	}
	return nil
}

// consumeTarget is one cluster the runs read from: its brokers' binary,
// bootstrap servers and processes (none with --bootstrap).
type consumeTarget struct {
	binary string
	seeds  []string
	pids   []int
	topic  string
}

// consumeResult is one run: a fresh consumer reading the whole topic from
// its start, kafka-consumer-perf-test's figures and the brokers' CPU.
type consumeResult struct {
	Binary        string  `json:"broker_binary,omitempty"`
	Run           int     `json:"run"`
	Records       int     `json:"records"`
	MB            float64 `json:"data_consumed_mb"`
	Seconds       float64 `json:"seconds"`
	MBPerSec      float64 `json:"mb_per_sec"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// BrokerCPUSeconds is the CPU time (user and system) the brokers
	// used during the run, BrokerCPUPerGB the same per GB (10^9 bytes)
	// of record values read; -1 with --bootstrap.
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds"`
	BrokerCPUPerGB   float64 `json:"broker_cpu_seconds_per_gb"`
}

// Consume runs `tripod bench consume`: it fills a topic on each cluster,
// then, Runs times, has a fresh consumer read it from the start, the
// clusters taking turns, and prints each run and a summary.
func Consume(ctx context.Context, cfg ConsumeConfig, out io.Writer) error {
	opts := &cfg
	if err := opts.validate(); err != nil {
		return err
	}
	var targets []*consumeTarget
	if opts.Bootstrap != "" {
		t, err := benchCluster(ctx, &ProduceConfig{Bootstrap: opts.Bootstrap}, out)
		if err != nil {
			return err
		}
		targets = append(targets, &consumeTarget{seeds: t.seeds})
	} else {
		binaries := opts.BrokerBinaries
		if len(binaries) == 0 {
			binaries = []string{""}
		}
		for _, bin := range binaries {
			pc := &ProduceConfig{Coord: opts.Coord, Brokers: opts.Brokers, BrokerGoMaxProcs: opts.BrokerGoMaxProcs, Binary: bin}
			c, stop, err := startBenchCluster(ctx, pc, out)
			if err != nil {
				return err
			}
			defer stop()
			targets = append(targets, &consumeTarget{binary: bin, seeds: c.Bootstrap(), pids: brokersOf(c)})
		}
	}
	runID := time.Now().UnixNano()
	for i, t := range targets {
		t.topic = fmt.Sprintf("bench-consume-%d-%d", runID, i)
		fctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		err := fillTopic(fctx, t, opts, out)
		cancel()
		if err != nil {
			return err
		}
	}
	var results []consumeResult
	for run := 1; run <= opts.Runs; run++ {
		for _, t := range targets {
			rctx, cancel := context.WithTimeout(ctx, opts.Timeout)
			res, err := consumeRun(rctx, t, opts)
			cancel()
			if err != nil {
				return err
			}
			res.Run = run
			fmt.Fprintln(out, res.line())
			results = append(results, res)
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "BROKERS\tRUN\tRECORDS\tMB\tSECONDS\tMB/S\tRECORDS/S\tBROKER_CPU(s)\tBROKER_CPU_PER_GB(s)\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.2f\t%.1f\t%.0f\t%s\t%s\t\n", binaryName(r.Binary), r.Run, r.Records, r.MB, r.Seconds, r.MBPerSec, r.RecordsPerSec,
			cpuCell(r.BrokerCPUSeconds), cpuCell(r.BrokerCPUPerGB))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeJSONFlag(opts.JSONPath, results)
}

// fillTopic creates t's topic and produces opts.Records records into it,
// acks=1 in batches of up to 1 MB, every record acknowledged.
func fillTopic(ctx context.Context, t *consumeTarget, opts *ConsumeConfig, out io.Writer) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.seeds...), kgo.DefaultProduceTopic(t.topic), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return fmt.Errorf("client for %s: %w", strings.Join(t.seeds, ","), err)
	}
	defer cl.Close()
	if err := createtopics.Create(ctx, cl, createtopics.Topic{Name: t.topic, Partitions: int32(opts.Partitions), ReplicationFactor: int16(opts.ReplicationFactor)}); err != nil {
		return err
	}
	if err := waitTopicLeaders(ctx, t.seeds[0], t.topic, opts.Partitions); err != nil {
		return err
	}
	payloads := benchPayloads(opts.RecordSize, "none")
	start := time.Now()
	errs := make(chan error, 1)
	for i := range opts.Records {
		cl.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("fill topic %s: %w", t.topic, err)
	}
	select {
	case err := <-errs:
		return fmt.Errorf("fill topic %s: %w", t.topic, err)
	default:
	}
	fmt.Fprintf(out, "%s: produced %d records of %d B into %s (%d partitions, replication factor %d) in %v\n",
		binaryName(t.binary), opts.Records, opts.RecordSize, t.topic, opts.Partitions, opts.ReplicationFactor, time.Since(start).Round(time.Millisecond))
	return nil
}

// consumeRun reads t's whole topic from its start with a fresh consumer
// and returns the figures; it fails unless every record is read once.
func consumeRun(ctx context.Context, t *consumeTarget, opts *ConsumeConfig) (consumeResult, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.seeds...), kgo.ConsumeTopics(t.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return consumeResult{}, fmt.Errorf("client for %s: %w", strings.Join(t.seeds, ","), err)
	}
	defer cl.Close()
	cpu0, err := processesCPU(t.pids)
	if err != nil {
		return consumeResult{}, err
	}
	start := time.Now()
	read, bytes := 0, 0
	next := map[int32]int64{}
	for read < opts.Records {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return consumeResult{}, fmt.Errorf("read %s after %d of %d records: %w", t.topic, read, opts.Records, err)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] && bad == nil {
				bad = fmt.Errorf("partition %d: record at offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition] = r.Offset + 1
			read++
			bytes += len(r.Value)
		})
		if bad != nil {
			return consumeResult{}, fmt.Errorf("read %s: %w", t.topic, bad)
		}
	}
	secs := time.Since(start).Seconds()
	res := consumeResult{Binary: t.binary, Records: read, MB: float64(bytes) / 1e6, Seconds: secs,
		MBPerSec: float64(bytes) / 1e6 / secs, RecordsPerSec: float64(read) / secs, BrokerCPUSeconds: -1, BrokerCPUPerGB: -1}
	if read != opts.Records {
		return consumeResult{}, fmt.Errorf("read %d records of %s, want %d", read, t.topic, opts.Records)
	}
	if len(t.pids) > 0 {
		cpu1, err := processesCPU(t.pids)
		if err != nil {
			return consumeResult{}, err
		}
		res.BrokerCPUSeconds = cpu1 - cpu0
		res.BrokerCPUPerGB = res.BrokerCPUSeconds / (float64(bytes) / 1e9)
	}
	return res, nil
}

// line formats r as kafka-consumer-perf-test's figures, with the brokers'
// CPU.
func (r consumeResult) line() string {
	return fmt.Sprintf("%s run %d: %d records, %.2f MB in %.2f s: %.2f MB/sec, %.1f records/sec; broker CPU %s s, %s s per GB",
		binaryName(r.Binary), r.Run, r.Records, r.MB, r.Seconds, r.MBPerSec, r.RecordsPerSec, cpuCell(r.BrokerCPUSeconds), cpuCell(r.BrokerCPUPerGB))
}

// binaryName names a run's brokers: their binary, or "this" for this
// one.
func binaryName(b string) string {
	if b == "" {
		return "this"
	}
	return b
}

// cpuCell formats a CPU figure, "-" when unknown (negative).
func cpuCell(v float64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// brokersOf is the processes of c's brokers.
func brokersOf(c *cluster.Cluster) []int {
	var pids []int
	for _, b := range c.Brokers() {
		pids = append(pids, b.PID())
	}
	return pids
}
