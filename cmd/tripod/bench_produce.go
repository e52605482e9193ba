package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// benchProduceOptions are the flags of `tripod bench produce`.
type benchProduceOptions struct {
	bootstrap   string
	coord       string
	brokers     int
	records     int
	recordSizes []int
	acks        []string
	rfs         []int
	partitions  int
	throughput  float64
	jsonPath    string
	timeout     time.Duration
	// linger, batchBytes and maxInFlight shape the producer's batching,
	// and so its latency: kafka-producer-perf-test's linger.ms (0),
	// batch.size and max.in.flight.requests.per.connection.
	linger      time.Duration
	batchBytes  int
	maxInFlight int
	// brokerProcs is --broker-gomaxprocs.
	brokerProcs int
	// compression is the producer's compression.type: none, gzip,
	// snappy, lz4 or zstd.
	compression string
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
}

// newBenchProduceCmd builds `tripod bench produce`.
func newBenchProduceCmd() *cobra.Command {
	opts := &benchProduceOptions{}
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Measure produce throughput and latency, like kafka-producer-perf-test",
		Long: `Measure produce throughput and per-record latency (send to ack) for every
combination of --acks, --replication-factor and --record-size, each on a
fresh topic, and print one kafka-producer-perf-test line per run and a
summary table. With --bootstrap it uses that cluster; without it, it starts
--brokers brokers of this binary on --coord (with a local ZooKeeper or an
embedded etcd as ` + "`tripod dev`" + ` does) and stops them at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runBenchProduce(ctx, opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.bootstrap, "bootstrap", "", "HOST:PORT[,HOST:PORT] of an existing cluster; empty: start one")
	f.StringVar(&opts.coord, "coord", "raft", "coordination backend of the cluster started without --bootstrap: raft, zk or etcd")
	f.IntVar(&opts.brokers, "brokers", 3, "brokers of the cluster started without --bootstrap")
	f.IntVar(&opts.records, "records", 200000, "records to produce per run")
	f.IntSliceVar(&opts.recordSizes, "record-size", []int{100}, "record value sizes in bytes (comma list or repeated)")
	f.StringSliceVar(&opts.acks, "acks", []string{"1", "all"}, "acks of the producer: 1 or all (comma list or repeated)")
	f.IntSliceVar(&opts.rfs, "replication-factor", []int{1, 3}, "replication factors of the topics (comma list or repeated)")
	f.IntVar(&opts.partitions, "partitions", 6, "partitions of every topic")
	f.Float64Var(&opts.throughput, "throughput", -1, "records/s cap per run; -1: unlimited")
	f.StringVar(&opts.jsonPath, "json", "", "file to write every run's figures to as JSON")
	f.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "how long one run (topic creation and produce) may take")
	f.DurationVar(&opts.linger, "linger", 0, "how long the producer waits to fill a batch (linger.ms); 0, kafka-producer-perf-test's default, sends at once")
	f.IntVar(&opts.batchBytes, "batch-size", 1000012, "largest record batch in bytes (batch.size)")
	f.IntVar(&opts.brokerProcs, "broker-gomaxprocs", 0, brokerGoMaxProcsUsage+" (without --bootstrap)")
	f.StringVar(&opts.compression, "compression", "none", "compression.type of the producer: none, gzip, snappy, lz4 or zstd; compressed runs send records of random letters that differ from one another, as real records do")
	f.IntVar(&opts.maxInFlight, "max-in-flight", 5, "produce requests in flight per broker (max.in.flight.requests.per.connection) of acks=1 runs; acks=all runs are idempotent, with 5")
	return cmd
}

// startedBrokerProcs is the GOMAXPROCS of the brokers the benchmark
// starts, 0 with --bootstrap.
func (o *benchProduceOptions) startedBrokerProcs() int {
	if o.bootstrap != "" {
		return 0
	}
	return brokerGoMaxProcs(o.brokerProcs)
}

// validate checks the flags and names the first bad one.
func (o *benchProduceOptions) validate() error {
	if o.bootstrap == "" {
		if o.brokers < 1 || o.brokers > 100 {
			return fmt.Errorf("--brokers %d: must be between 1 and 100", o.brokers)
		}
		if !slices.Contains(cluster.Backends, o.coord) {
			return fmt.Errorf("--coord %q: must be one of raft, zk, etcd", o.coord)
		}
	}
	if o.records < 1 {
		return fmt.Errorf("--records %d: must be at least 1", o.records)
	}
	if len(o.recordSizes) == 0 {
		return errors.New("--record-size: give at least one size")
	}
	for _, s := range o.recordSizes {
		if s < 1 || s > 1<<20 {
			return fmt.Errorf("--record-size %d: must be between 1 and 1048576", s)
		}
	}
	if len(o.acks) == 0 {
		return errors.New("--acks: give at least one of 1, all")
	}
	for _, a := range o.acks {
		if _, err := parseAcks(a); err != nil {
			return err
		}
	}
	if len(o.rfs) == 0 {
		return errors.New("--replication-factor: give at least one")
	}
	for _, rf := range o.rfs {
		if rf < 1 || rf > 32767 {
			return fmt.Errorf("--replication-factor %d: must be between 1 and 32767", rf)
		}
		if o.bootstrap == "" && rf > o.brokers {
			return fmt.Errorf("--replication-factor %d: more than the %d brokers of --brokers", rf, o.brokers)
		}
	}
	if err := validateBrokerGoMaxProcs(o.brokerProcs); err != nil {
		return err
	}
	if o.linger < 0 || o.linger > time.Minute {
		return fmt.Errorf("--linger %v: must be between 0 and 1m", o.linger)
	}
	if o.batchBytes < 1 || o.batchBytes > 1<<30 {
		return fmt.Errorf("--batch-size %d: must be between 1 and 1073741824", o.batchBytes)
	}
	if o.maxInFlight < 1 || o.maxInFlight > 1000 {
		return fmt.Errorf("--max-in-flight %d: must be between 1 and 1000", o.maxInFlight)
	}
	if _, err := parseCompression(o.compression); err != nil {
		return err
	}
	if o.partitions < 1 || o.partitions > 100000 {
		return fmt.Errorf("--partitions %d: must be between 1 and 100000", o.partitions)
	}
	if o.throughput == 0 || o.throughput < -1 {
		return fmt.Errorf("--throughput %v: must be -1 (unlimited) or above 0", o.throughput)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be above 0", o.timeout)
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

// runBenchProduce runs every combination of the options on the cluster of
// --bootstrap, or on one it starts and stops, and prints the results.
func runBenchProduce(ctx context.Context, opts *benchProduceOptions, out io.Writer) error {
	if err := opts.validate(); err != nil {
		return err
	}
	var seeds []string
	if opts.bootstrap != "" {
		for _, s := range strings.Split(opts.bootstrap, ",") {
			if s = strings.TrimSpace(s); s != "" {
				seeds = append(seeds, s)
			}
		}
		if len(seeds) == 0 {
			return fmt.Errorf("--bootstrap %q: want HOST:PORT[,HOST:PORT]", opts.bootstrap)
		}
	} else {
		bootstrap, stop, err := startBenchCluster(ctx, opts, out)
		if err != nil {
			return err
		}
		defer stop()
		seeds = bootstrap
	}

	payloads := map[int][][]byte{}
	for _, size := range opts.recordSizes {
		payloads[size] = benchPayloads(size, opts.compression)
	}
	runID := time.Now().UnixNano()
	var results []produceResult
	for _, size := range opts.recordSizes {
		for _, rf := range opts.rfs {
			for _, acks := range opts.acks {
				acks = strings.TrimSpace(acks)
				if acks == "-1" {
					acks = "all"
				}
				topic := fmt.Sprintf("bench-%d-acks%s-rf%d-%db", runID, acks, rf, size)
				fmt.Fprintf(out, "== acks=%s replication-factor=%d record-size=%d B partitions=%d linger=%v batch-size=%d max-in-flight=%d compression=%s topic=%s\n",
					acks, rf, size, opts.partitions, opts.linger, opts.batchBytes, inFlight(acks, opts), opts.compression, topic)
				runCtx, cancel := context.WithTimeout(ctx, opts.timeout)
				res, err := benchProduceRun(runCtx, seeds, topic, acks, rf, payloads[size], opts)
				cancel()
				if err != nil {
					return err
				}
				fmt.Fprintln(out, res.line())
				results = append(results, res)
			}
		}
	}

	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ACKS\tRF\tSIZE(B)\tRECORDS\tRECORDS/S\tMB/S\tAVG(ms)\tP50\tP95\tP99\tP99.9\tMAX(ms)\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n",
			r.Acks, r.ReplicationFactor, r.RecordSize, r.Records, r.RecordsPerSec, r.MBPerSec,
			r.AvgMs, r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if opts.jsonPath != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return fmt.Errorf("encode results: %w", err)
		}
		if err := os.WriteFile(opts.jsonPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--json %s: %w", opts.jsonPath, err)
		}
	}
	return nil
}

// inFlight is the produce requests a run of acks keeps in flight per
// broker: --max-in-flight, or 5 for acks=all, whose idempotent producer
// takes no other number.
func inFlight(acks string, opts *benchProduceOptions) int {
	if acks == "all" {
		return 5
	}
	return opts.maxInFlight
}

// line formats r as kafka-producer-perf-test's final line.
func (r produceResult) line() string {
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.",
		r.Records, r.RecordsPerSec, r.MBPerSec, r.AvgMs, r.MaxMs, r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms)
}

// startBenchCluster starts a cluster of this binary as `tripod dev` does,
// waits until it serves and returns its bootstrap servers and a function
// that stops it and everything started for it.
func startBenchCluster(ctx context.Context, opts *benchProduceOptions, out io.Writer) (bootstrap []string, stop func(), err error) {
	self, err := os.Executable()
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
	cfg.Binary, cfg.Dir, cfg.Backend, cfg.Brokers = self, filepath.Join(dir, "brokers"), opts.coord, opts.brokers
	cfg.GoMaxProcs = opts.brokerProcs
	switch opts.coord {
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
	c, err := cluster.Start(cfg)
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
		return nil, nil, fmt.Errorf("cluster of %d brokers on %s does not serve (logs in %s): %w", opts.brokers, opts.coord, dir, err)
	}
	fmt.Fprintf(out, "started %d brokers on %s, GOMAXPROCS %d each: %s\n", opts.brokers, opts.coord, opts.startedBrokerProcs(), strings.Join(c.Bootstrap(), ","))
	return c.Bootstrap(), stop, nil
}

// benchProduceRun creates topic, waits until every partition has a leader,
// produces opts.records records, cycling through payloads, with the given acks and returns
// the figures. It fails if any record is not acknowledged.
func benchProduceRun(ctx context.Context, seeds []string, topic, acks string, rf int, payloads [][]byte, opts *benchProduceOptions) (produceResult, error) {
	kacks, err := parseAcks(acks)
	if err != nil {
		return produceResult{}, err
	}
	// Uncompressed unless --compression says otherwise, as
	// kafka-producer-perf-test's default compression.type=none: franz-go's
	// default snappy would shrink the repeated payload to almost nothing
	// and turn MB/s into a compression figure.
	codec, err := parseCompression(opts.compression)
	if err != nil {
		return produceResult{}, err
	}
	// franz-go lingers 10 ms by default, which every latency would carry;
	// the perf tool's Java producer lingers 0 ms.
	clOpts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kacks),
		kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(opts.linger),
		kgo.ProducerBatchMaxBytes(int32(opts.batchBytes))}
	if acks != "all" {
		// franz-go's idempotent producer requires acks=all; it keeps 5
		// requests in flight per broker, as Kafka's idempotent producer
		// may, and takes no other number.
		clOpts = append(clOpts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(opts.maxInFlight))
	}
	cl, err := kgo.NewClient(clOpts...)
	if err != nil {
		return produceResult{}, fmt.Errorf("client for %s: %w", strings.Join(seeds, ","), err)
	}
	defer cl.Close()
	if err := createtopics.Create(ctx, cl, createtopics.Topic{Name: topic, Partitions: int32(opts.partitions), ReplicationFactor: int16(rf)}); err != nil {
		return produceResult{}, err
	}
	defer func() {
		// Deleting the topic keeps a --bootstrap cluster's disk from filling
		// up; a failure here does not change the figures.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		kadm.NewClient(cl).DeleteTopic(delCtx, topic)
	}()
	if err := waitTopicLeaders(ctx, seeds[0], topic, opts.partitions); err != nil {
		return produceResult{}, err
	}
	if err := primeProducer(ctx, cl, topic, opts.partitions, payloads[0]); err != nil {
		return produceResult{}, err
	}

	n := opts.records
	latencies := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
	)
	start := time.Now()
	for i := range n {
		if opts.throughput > 0 {
			// Pace the sends: record i is due at start + i/throughput.
			due := start.Add(time.Duration(float64(i) / opts.throughput * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		sent := time.Now()
		wg.Add(1)
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
	return produceResult{
		Acks:              acks,
		ReplicationFactor: rf,
		RecordSize:        len(payloads[0]),
		Partitions:        opts.partitions,
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
		LingerMs:          ms(opts.linger),
		BatchBytes:        opts.batchBytes,
		MaxInFlight:       inFlight(acks, opts),
		BrokerGoMaxProcs:  opts.startedBrokerProcs(),
		Compression:       opts.compression,
	}, nil
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
