package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/hostcpu"
	"github.com/tripodmq/tripod/internal/zkserver"
	"github.com/tripodmq/tripod/lab"
)

// ProduceConfig is what `tripod bench produce` measures, and on which
// cluster. Validation errors name the CLI's flags.
type ProduceConfig struct {
	// Bootstrap is HOST:PORT[,HOST:PORT] of an existing cluster (--bootstrap);
	// empty: the benchmark starts one of Brokers brokers on Coord.
	Bootstrap string
	Coord     string
	Brokers   int
	// Records is the number of records each run produces.
	Records int
	// RecordSizes, Acks and ReplicationFactors are the values each run
	// combines; every combination is one run on a fresh topic of Partitions
	// partitions.
	RecordSizes        []int
	Acks               []string
	ReplicationFactors []int
	Partitions         int
	// Throughput caps each run's records/s; -1 for none.
	Throughput float64
	// JSONPath is the file every run's figures are written to; empty for
	// none.
	JSONPath string
	// Timeout bounds one run: topic creation and produce.
	Timeout time.Duration
	// Linger, BatchBytes and MaxInFlight shape the producer's batching,
	// and so its latency: kafka-producer-perf-test's linger.ms (0),
	// batch.size and max.in.flight.requests.per.connection.
	Linger      time.Duration
	BatchBytes  int
	MaxInFlight int
	// BrokerGoMaxProcs is the GOMAXPROCS of each broker started
	// (--broker-gomaxprocs); 0: this process's own.
	BrokerGoMaxProcs int
	// Compression is the producer's compression.type: none, gzip,
	// snappy, lz4 or zstd.
	Compression string
	// Binary is the tripod executable whose `serve` the started brokers
	// run; empty: this process's own.
	Binary string
	// Pprof makes the started brokers serve Go's runtime profiles on
	// their metrics listener (cluster.Config.Pprof).
	Pprof bool
	// Sets are broker properties key=value for every started broker.
	Sets []string
}

// DefaultProduceConfig returns the defaults of `tripod bench produce`.
func DefaultProduceConfig() ProduceConfig {
	return ProduceConfig{
		Coord:              "raft",
		Brokers:            3,
		Records:            200000,
		RecordSizes:        []int{100},
		Acks:               []string{"1", "all"},
		ReplicationFactors: []int{1, 3},
		Partitions:         6,
		Throughput:         -1,
		Timeout:            10 * time.Minute,
		BatchBytes:         1000012,
		MaxInFlight:        5,
		Compression:        "none",
	}
}

// produceResult is one run of `tripod bench produce`: the figures
// kafka-producer-perf-test prints, for one acks, replication factor and
// record size.
type produceResult struct {
	Acks              string  `json:"acks"`
	ReplicationFactor int     `json:"replication_factor"`
	RecordSize        int     `json:"record_size"`
	Partitions        int     `json:"partitions"`
	Topic             string  `json:"topic"`
	Records           int     `json:"records"`
	Seconds           float64 `json:"seconds"`
	RecordsPerSec     float64 `json:"records_per_sec"`
	MBPerSec          float64 `json:"mb_per_sec"`
	AvgMs             float64 `json:"avg_latency_ms"`
	MaxMs             float64 `json:"max_latency_ms"`
	P50Ms             float64 `json:"p50_latency_ms"`
	P95Ms             float64 `json:"p95_latency_ms"`
	P99Ms             float64 `json:"p99_latency_ms"`
	P999Ms            float64 `json:"p999_latency_ms"`
	// LingerMs, BatchBytes and MaxInFlight are the producer settings the
	// run used.
	LingerMs    float64 `json:"linger_ms"`
	BatchBytes  int     `json:"batch_size"`
	MaxInFlight int     `json:"max_in_flight"`
	// Compression is the producer's compression.type.
	Compression string `json:"compression"`
	// BrokerGoMaxProcs is the GOMAXPROCS of the brokers the benchmark
	// started; 0 with --bootstrap, whose brokers it does not know.
	BrokerGoMaxProcs int `json:"broker_gomaxprocs,omitempty"`
	// BrokerCPUSeconds is the CPU time the cluster's processes used from
	// the first record sent to the last acknowledged (tripod's brokers, or
	// kfake's process), BrokerCPUPerMillion the same per million records;
	// -1 with --bootstrap, whose processes the benchmark does not know.
	BrokerCPUSeconds    float64 `json:"broker_cpu_seconds"`
	BrokerCPUPerMillion float64 `json:"broker_cpu_seconds_per_million_records"`
	// ProducerCPUSeconds is the CPU time of this process, the producer,
	// over the same time, ProducerCPUPerMillion the same per million
	// records.
	ProducerCPUSeconds    float64 `json:"producer_cpu_seconds"`
	ProducerCPUPerMillion float64 `json:"producer_cpu_seconds_per_million_records"`
	// MachineCPUBusyPct and MachineCPUStealPct are how the machine's CPU
	// time was spent over the same time, in percent: busy, and stolen by
	// the hypervisor for other guests. Absent where /proc/stat cannot be
	// read.
	MachineCPUBusyPct  *float64 `json:"machine_cpu_busy_pct,omitempty"`
	MachineCPUStealPct *float64 `json:"machine_cpu_steal_pct,omitempty"`
}

// runCPU is the CPU time counters read at one end of a timed run.
type runCPU struct {
	brokers   float64 // seconds, of the cluster's processes; -1 unknown
	producer  float64 // seconds, of this process
	machine   hostcpu.Sample
	machineOK bool
}

// readRunCPU reads the CPU counters of a run against the cluster whose
// processes are pids (none: --bootstrap's, unknown).
func readRunCPU(pids []int) (runCPU, error) {
	c := runCPU{brokers: -1}
	if len(pids) > 0 {
		b, err := processesCPU(pids)
		if err != nil {
			return runCPU{}, err
		}
		c.brokers = b
	}
	p, err := selfCPU()
	if err != nil {
		return runCPU{}, err
	}
	c.producer = p
	c.machine, err = hostcpu.Read()
	c.machineOK = err == nil
	return c, nil
}

// setCPU records the CPU used between the counters at the run's start and
// end.
func (r *produceResult) setCPU(start, end runCPU) {
	perMillion := func(secs float64) float64 { return secs / (float64(r.Records) / 1e6) }
	r.BrokerCPUSeconds, r.BrokerCPUPerMillion = -1, -1
	if start.brokers >= 0 && end.brokers >= 0 {
		r.BrokerCPUSeconds = end.brokers - start.brokers
		r.BrokerCPUPerMillion = perMillion(r.BrokerCPUSeconds)
	}
	r.ProducerCPUSeconds = end.producer - start.producer
	r.ProducerCPUPerMillion = perMillion(r.ProducerCPUSeconds)
	if start.machineOK && end.machineOK {
		u := end.machine.Since(start.machine)
		busy, steal := 100*u.Busy, 100*u.Steal
		r.MachineCPUBusyPct, r.MachineCPUStealPct = &busy, &steal
	}
}

// cpuLine says where the run's CPU went: the cluster's processes, the
// producer and the machine as a whole.
func (r produceResult) cpuLine() string {
	// Seconds to the millisecond: a run of 200 000 records takes a tenth
	// of a second.
	secs := func(v float64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	line := fmt.Sprintf("CPU from the first record to the last ack: brokers %s s (%s s per million records), producer %s s (%s s per million records)",
		secs(r.BrokerCPUSeconds), cpuCell(r.BrokerCPUPerMillion), secs(r.ProducerCPUSeconds), cpuCell(r.ProducerCPUPerMillion))
	if r.MachineCPUBusyPct != nil {
		line += fmt.Sprintf("; machine %.1f%% busy, %.1f%% steal", *r.MachineCPUBusyPct, *r.MachineCPUStealPct)
	}
	return line
}

// startedBrokerProcs is the GOMAXPROCS of the brokers the benchmark
// starts, 0 with --bootstrap.
func (o *ProduceConfig) startedBrokerProcs() int {
	if o.Bootstrap != "" {
		return 0
	}
	return brokerGoMaxProcs(o.BrokerGoMaxProcs)
}

// validate checks the flags and names the first bad one.
func (o *ProduceConfig) validate() error {
	if o.Bootstrap == "" {
		if o.Brokers < 1 || o.Brokers > 100 {
			return fmt.Errorf("--brokers %d: must be between 1 and 100", o.Brokers)
		}
		if err := validateBenchCoord(o.Coord); err != nil {
			return err
		}
	}
	if err := validateBrokerSets(o.Bootstrap, o.Coord, o.Sets); err != nil {
		return err
	}
	if o.Records < 1 {
		return fmt.Errorf("--records %d: must be at least 1", o.Records)
	}
	if len(o.RecordSizes) == 0 {
		return errors.New("--record-size: give at least one size")
	}
	for _, s := range o.RecordSizes {
		if s < 1 || s > 1<<20 {
			return fmt.Errorf("--record-size %d: must be between 1 and 1048576", s)
		}
	}
	if len(o.Acks) == 0 {
		return errors.New("--acks: give at least one of 1, all")
	}
	for _, a := range o.Acks {
		if _, err := parseAcks(a); err != nil {
			return err
		}
	}
	if len(o.ReplicationFactors) == 0 {
		return errors.New("--replication-factor: give at least one")
	}
	for _, rf := range o.ReplicationFactors {
		if rf < 1 || rf > 32767 {
			return fmt.Errorf("--replication-factor %d: must be between 1 and 32767", rf)
		}
		if o.Bootstrap == "" && rf > o.Brokers {
			return fmt.Errorf("--replication-factor %d: more than the %d brokers of --brokers", rf, o.Brokers)
		}
	}
	if err := validateBrokerGoMaxProcs(o.BrokerGoMaxProcs); err != nil {
		return err
	}
	if o.Linger < 0 || o.Linger > time.Minute {
		return fmt.Errorf("--linger %v: must be between 0 and 1m", o.Linger)
	}
	if o.BatchBytes < 1 || o.BatchBytes > 1<<30 {
		return fmt.Errorf("--batch-size %d: must be between 1 and 1073741824", o.BatchBytes)
	}
	if o.MaxInFlight < 1 || o.MaxInFlight > 1000 {
		return fmt.Errorf("--max-in-flight %d: must be between 1 and 1000", o.MaxInFlight)
	}
	if _, err := parseCompression(o.Compression); err != nil {
		return err
	}
	if o.Partitions < 1 || o.Partitions > 100000 {
		return fmt.Errorf("--partitions %d: must be between 1 and 100000", o.Partitions)
	}
	if o.Throughput == 0 || o.Throughput < -1 {
		return fmt.Errorf("--throughput %v: must be -1 (unlimited) or above 0", o.Throughput)
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be above 0", o.Timeout)
	}
	return nil
}

// parseCompression maps a --compression value, Kafka's compression.type,
// to franz-go's codec.
func parseCompression(c string) (kgo.CompressionCodec, error) {
	switch c {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression %q: must be one of none, gzip, snappy, lz4, zstd", c)
}

// benchPayloads returns the record values of one record size. Without
// compression every record carries the same random bytes, as
// kafka-producer-perf-test's do. With it, identical records would
// compress to almost nothing and turn MB/s into a compression figure, so
// records cycle through distinct values of random capital letters (the
// perf tool's alphabet), at most 64 MiB of them.
func benchPayloads(size int, compression string) [][]byte {
	if compression == "none" {
		p := make([]byte, size)
		rand.Read(p)
		return [][]byte{p}
	}
	n := max(1, min(1024, (64<<20)/size))
	payloads := make([][]byte, n)
	for i := range payloads {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte('A' + mrand.IntN(26))
		}
		payloads[i] = p
	}
	return payloads
}

// parseAcks maps an --acks value to franz-go's acks.
func parseAcks(a string) (kgo.Acks, error) {
	switch strings.TrimSpace(a) {
	case "1":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	}
	return kgo.Acks{}, fmt.Errorf("--acks %q: must be 1 or all", a)
}

// Produce runs every combination of cfg on the cluster of cfg.Bootstrap,
// or on one it starts and stops, and prints the results to out.
func Produce(ctx context.Context, cfg ProduceConfig, out io.Writer) error {
	opts := &cfg
	if err := opts.validate(); err != nil {
		return err
	}
	target, err := benchCluster(ctx, opts, out)
	if err != nil {
		return err
	}
	defer target.stop()

	payloads := map[int][][]byte{}
	for _, size := range opts.RecordSizes {
		payloads[size] = benchPayloads(size, opts.Compression)
	}
	runID := time.Now().UnixNano()
	var results []produceResult
	for _, size := range opts.RecordSizes {
		for _, rf := range opts.ReplicationFactors {
			for _, acks := range opts.Acks {
				acks = strings.TrimSpace(acks)
				if acks == "-1" {
					acks = "all"
				}
				topic := fmt.Sprintf("bench-%d-acks%s-rf%d-%db", runID, acks, rf, size)
				fmt.Fprintf(out, "== acks=%s replication-factor=%d record-size=%d B partitions=%d linger=%v batch-size=%d max-in-flight=%d compression=%s topic=%s\n",
					acks, rf, size, opts.Partitions, opts.Linger, opts.BatchBytes, inFlight(acks, opts), opts.Compression, topic)
				runCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
				res, err := benchProduceRun(runCtx, target, topic, acks, rf, payloads[size], opts)
				cancel()
				if err != nil {
					return err
				}
				fmt.Fprintln(out, res.line())
				fmt.Fprintln(out, res.cpuLine())
				results = append(results, res)
			}
		}
	}

	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ACKS\tRF\tSIZE(B)\tRECORDS\tRECORDS/S\tMB/S\tAVG(ms)\tP50\tP95\tP99\tP99.9\tMAX(ms)\tBROKER_CPU_PER_M(s)\tPRODUCER_CPU_PER_M(s)\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%s\t%s\t\n",
			r.Acks, r.ReplicationFactor, r.RecordSize, r.Records, r.RecordsPerSec, r.MBPerSec,
			r.AvgMs, r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms, r.MaxMs, cpuCell(r.BrokerCPUPerMillion), cpuCell(r.ProducerCPUPerMillion))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeJSONFlag(opts.JSONPath, results)
}

// inFlight is the produce requests a run of acks keeps in flight per
// broker: --max-in-flight, or 5 for acks=all, whose idempotent producer
// takes no other number.
func inFlight(acks string, opts *ProduceConfig) int {
	if acks == "all" {
		return 5
	}
	return opts.MaxInFlight
}

// line formats r as kafka-producer-perf-test's final line.
func (r produceResult) line() string {
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.",
		r.Records, r.RecordsPerSec, r.MBPerSec, r.AvgMs, r.MaxMs, r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms)
}

// benchTarget is the cluster a benchmark measures.
type benchTarget struct {
	seeds []string
	// pids are the processes serving it, when the benchmark started them
	// (tripod's brokers, or kfake's one process); nil for --bootstrap's.
	pids []int
	// stop stops what the benchmark started.
	stop func()
}

// benchCluster returns the cluster a benchmark measures: --bootstrap's,
// or a cluster it starts (startBenchCluster, or kfake with --coord
// kfake).
func benchCluster(ctx context.Context, opts *ProduceConfig, out io.Writer) (benchTarget, error) {
	if opts.Bootstrap == "" && opts.Coord == Kfake {
		return startKfake(opts, out)
	}
	if opts.Bootstrap == "" {
		c, stop, err := startBenchCluster(ctx, opts, out)
		if err != nil {
			return benchTarget{}, err
		}
		return benchTarget{seeds: c.Bootstrap(), pids: brokersOf(c), stop: stop}, nil
	}
	t := benchTarget{stop: func() {}}
	for _, s := range strings.Split(opts.Bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			t.seeds = append(t.seeds, s)
		}
	}
	if len(t.seeds) == 0 {
		return benchTarget{}, fmt.Errorf("--bootstrap %q: want HOST:PORT[,HOST:PORT]", opts.Bootstrap)
	}
	return t, nil
}

// validateBrokerSets checks the --set broker properties of a benchmark:
// key=value, and only for the tripod brokers it starts.
func validateBrokerSets(bootstrap, coord string, sets []string) error {
	switch {
	case len(sets) == 0:
		return nil
	case bootstrap != "":
		return errors.New("--set: sets the properties of the brokers this command starts, not a --bootstrap cluster's")
	case coord == Kfake:
		return errors.New("--set: sets tripod's broker properties, not kfake's; give --coord raft, zk or etcd")
	}
	return lab.CheckSets(sets)
}

// validateBenchCoord checks the --coord of a benchmark that starts its
// cluster: a backend, or kfake for comparison.
func validateBenchCoord(coord string) error {
	if !slices.Contains(cluster.Backends, coord) && coord != Kfake {
		return fmt.Errorf("--coord %q: must be one of raft, zk, etcd, or kfake (franz-go's fake cluster, for comparison)", coord)
	}
	return nil
}

// startBenchCluster starts a cluster of opts.Binary (empty: this binary)
// as `tripod dev` does, waits until it serves and returns it and a
// function that stops it and everything started for it.
func startBenchCluster(ctx context.Context, opts *ProduceConfig, out io.Writer) (c *cluster.Cluster, stop func(), err error) {
	self, err := lab.Binary(opts.Binary)
	if err != nil {
		return nil, nil, fmt.Errorf("find this binary to run brokers: %w", err)
	}
	dir, err := os.MkdirTemp("", "tripod-bench-")
	if err != nil {
		return nil, nil, fmt.Errorf("temporary data dir: %w", err)
	}
	var cleanups []func()
	stop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })

	cfg := cluster.DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Backend, cfg.Brokers = self, filepath.Join(dir, "brokers"), opts.Coord, opts.Brokers
	cfg.GoMaxProcs = opts.BrokerGoMaxProcs
	cfg.Metrics, cfg.Pprof = opts.Pprof, opts.Pprof
	cfg.Sets = opts.Sets
	switch opts.Coord {
	case "zk":
		zk, err := zkserver.Start(filepath.Join(dir, "zookeeper"), zkserver.DefaultConfig())
		if err != nil {
			return nil, nil, fmt.Errorf("start a local zookeeper (Debian package zookeeper): %w", err)
		}
		cleanups = append(cleanups, func() { zk.Close() })
		cfg.ZKConnect = zk.Addr() + "/tripod"
	case "etcd":
		etcd, err := etcdserver.Start(filepath.Join(dir, "etcd"))
		if err != nil {
			return nil, nil, fmt.Errorf("start an embedded etcd: %w", err)
		}
		cleanups = append(cleanups, func() { etcd.Close() })
		cfg.EtcdEndpoints = etcd.Endpoints()
	}
	c, err = cluster.Start(cfg)
	if err != nil {
		return nil, nil, err
	}
	cleanups = append(cleanups, func() {
		if serr := c.Stop(30 * time.Second); serr != nil {
			fmt.Fprintf(out, "stop the brokers: %v\n", serr)
		}
		c.Close()
	})
	if err := c.WaitServing(ctx, time.Minute); err != nil {
		return nil, nil, fmt.Errorf("cluster of %d brokers on %s does not serve (logs in %s): %w", opts.Brokers, opts.Coord, dir, err)
	}
	fmt.Fprintf(out, "started %d brokers on %s, GOMAXPROCS %d each: %s\n", opts.Brokers, opts.Coord, opts.startedBrokerProcs(), strings.Join(c.Bootstrap(), ","))
	return c, stop, nil
}

// benchProduceRun creates topic, waits until every partition has a leader,
// produces opts.Records records, cycling through payloads, with the given acks and returns
// the figures. It fails if any record is not acknowledged.
func benchProduceRun(ctx context.Context, target benchTarget, topic, acks string, rf int, payloads [][]byte, opts *ProduceConfig) (produceResult, error) {
	seeds := target.seeds
	kacks, err := parseAcks(acks)
	if err != nil {
		return produceResult{}, err
	}
	// Uncompressed unless --compression says otherwise, as
	// kafka-producer-perf-test's default compression.type=none: franz-go's
	// default snappy would shrink the repeated payload to almost nothing
	// and turn MB/s into a compression figure.
	codec, err := parseCompression(opts.Compression)
	if err != nil {
		return produceResult{}, err
	}
	// franz-go lingers 10 ms by default, which every latency would carry;
	// the perf tool's Java producer lingers 0 ms.
	clOpts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kacks),
		kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(opts.Linger),
		kgo.ProducerBatchMaxBytes(int32(opts.BatchBytes))}
	if acks != "all" {
		// franz-go's idempotent producer requires acks=all; it keeps 5
		// requests in flight per broker, as Kafka's idempotent producer
		// may, and takes no other number.
		clOpts = append(clOpts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(opts.MaxInFlight))
	}
	cl, err := kgo.NewClient(clOpts...)
	if err != nil {
		return produceResult{}, fmt.Errorf("client for %s: %w", strings.Join(seeds, ","), err)
	}
	defer cl.Close()
	if err := createtopics.Create(ctx, cl, createtopics.Topic{Name: topic, Partitions: int32(opts.Partitions), ReplicationFactor: int16(rf)}); err != nil {
		return produceResult{}, err
	}
	defer func() {
		// Deleting the topic keeps a --bootstrap cluster's disk from filling
		// up; a failure here does not change the figures.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		kadm.NewClient(cl).DeleteTopic(delCtx, topic)
	}()
	if err := waitTopicLeaders(ctx, seeds[0], topic, opts.Partitions); err != nil {
		return produceResult{}, err
	}
	if err := primeProducer(ctx, cl, topic, opts.Partitions, payloads[0]); err != nil {
		return produceResult{}, err
	}

	n := opts.Records
	latencies := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
	)
	// One Add for all records: an Add per record, on the counter that the
	// acknowledgements' Done change from another core, took about 7 % of
	// this process's CPU samples at a million records a second.
	wg.Add(n)
	cpu0, err := readRunCPU(target.pids)
	if err != nil {
		return produceResult{}, err
	}
	start := time.Now()
	for i := range n {
		if opts.Throughput > 0 {
			// Pace the sends: record i is due at start + i/throughput.
			due := start.Add(time.Duration(float64(i) / opts.Throughput * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		sent := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, func(_ *kgo.Record, err error) {
			latencies[i] = time.Since(sent)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := readRunCPU(target.pids)
	if err != nil {
		return produceResult{}, err
	}
	if f := failed.Load(); f > 0 {
		return produceResult{}, fmt.Errorf("produce to topic %s: %d of %d records not acknowledged: %w", topic, f, n, *firstErr.Load())
	}

	slices.Sort(latencies)
	var sum time.Duration
	for _, l := range latencies {
		sum += l
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	// pct is the p-quantile in milliseconds, to the microsecond: whole
	// milliseconds, as kafka-producer-perf-test prints them, would show a
	// sub-millisecond p99 as 0.
	pct := func(p float64) float64 {
		return ms(latencies[min(int(p*float64(n)), n-1)])
	}
	secs := elapsed.Seconds()
	res := produceResult{
		Acks:              acks,
		ReplicationFactor: rf,
		RecordSize:        len(payloads[0]),
		Partitions:        opts.Partitions,
		Topic:             topic,
		Records:           n,
		Seconds:           secs,
		RecordsPerSec:     float64(n) / secs,
		MBPerSec:          float64(n) * float64(len(payloads[0])) / (1024 * 1024) / secs,
		AvgMs:             ms(sum) / float64(n),
		MaxMs:             ms(latencies[n-1]),
		P50Ms:             pct(0.5),
		P95Ms:             pct(0.95),
		P99Ms:             pct(0.99),
		P999Ms:            pct(0.999),
		LingerMs:          ms(opts.Linger),
		BatchBytes:        opts.BatchBytes,
		MaxInFlight:       inFlight(acks, opts),
		BrokerGoMaxProcs:  opts.startedBrokerProcs(),
		Compression:       opts.Compression,
	}
	res.setCPU(cpu0, cpu1)
	return res, nil
}

// primeProducer sends one record of payload to every partition of topic
// and waits until each is acknowledged, before the clock starts: what the
// producer does once (learn the topic's partitions, get its producer id,
// connect to every leader) and the followers' first fetches of the new
// partitions would otherwise be paid by the first records timed, a
// tenth of a second in which a paced run queues thousands of records.
// The records are keyed so that the producer's default partitioner, which
// hashes keys as Kafka's does, sends one to each partition.
func primeProducer(ctx context.Context, cl *kgo.Client, topic string, partitions int, payload []byte) error {
	hash := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	covered := make([]bool, partitions)
	var records []*kgo.Record
	for k := 0; len(records) < partitions; k++ {
		key := []byte("prime-" + strconv.Itoa(k))
		if p := hash.Partition(&kgo.Record{Key: key}, partitions); !covered[p] {
			covered[p] = true
			records = append(records, &kgo.Record{Key: key, Value: payload})
		}
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("prime the producer on topic %s: %w", topic, err)
	}
	return nil
}

// waitTopicLeaders waits until the broker at addr names a leader for each
// of the partitions of topic, so that the first records' latency does not
// include the topic's creation.
func waitTopicLeaders(ctx context.Context, addr, topic string, partitions int) error {
	err := cluster.WaitFor(ctx, time.Minute, func() error {
		md, err := cluster.MetadataFrom(ctx, addr, topic)
		if err != nil {
			return err
		}
		if err := md.TopicErrs[topic]; err != nil {
			return err
		}
		ps := md.Partitions[topic]
		if len(ps) != partitions {
			return fmt.Errorf("%d partitions, want %d", len(ps), partitions)
		}
		for _, p := range ps {
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.Partition)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("topic %s has no leader for every partition: %w", topic, err)
	}
	return nil
}
