package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
	"github.com/tripodmq/tripod/internal/gcfloor"
	"github.com/tripodmq/tripod/internal/hostcpu"
)

// OMBConfig is what `tripod bench omb` runs, and on which cluster.
// Validation errors name the CLI's flags.
type OMBConfig struct {
	// Workload is the path of the OMB workload file (--workload).
	Workload string
	// Bootstrap is HOST:PORT[,HOST:PORT] of an existing cluster; empty:
	// the benchmark starts Brokers brokers of Binary on Coord.
	Bootstrap        string
	Coord            string
	Brokers          int
	BrokerGoMaxProcs int
	Binary           string
	// ClientOpts are the franz-go options of the CLI's security flags
	// (--tls, --sasl-*), for a --bootstrap cluster that asks for them.
	ClientOpts []kgo.Opt
	// ReplicationFactor of the workload's topics; Acks of its producers.
	ReplicationFactor int
	Acks              string
	// Duration and Warmup, when set, replace the workload's
	// testDurationMinutes and warmupDurationMinutes (--duration,
	// --warmup), so that a user can run a workload briefly.
	Duration, Warmup *time.Duration
	// Window is how often the rates and latencies are sampled, OMB's 10 s.
	Window time.Duration
	// Linger and BatchBytes are the producers' linger.ms and batch.size:
	// by default OMB's Kafka driver's (driver-kafka/kafka-latency.yaml),
	// 1 ms and 131072.
	Linger     time.Duration
	BatchBytes int
	// MaxInFlight bounds the records a producer has sent and not yet had
	// acknowledged at producerRate 0 (max rate).
	MaxInFlight int
	// DrainTimeout bounds the wait, after the producers stop, for the
	// consumers to read every acknowledged record.
	DrainTimeout time.Duration
	// Out is the directory of the JSON and the chart.
	Out string
	// Sets are broker properties key=value for every started broker
	// (--set).
	Sets []string
	// HeapFloor is the smallest heap goal of this process's garbage
	// collector, which runs the clients (--heap-floor, internal/gcfloor);
	// 0, or GOGC set in the environment: Go's default pacing.
	HeapFloor int64
	// Profile, when set, is the directory into which the brokers the
	// benchmark starts and this process write their execution traces and
	// CPU profiles over the test duration (--profile; see profiles).
	Profile string
}

// DefaultOMBConfig returns the defaults of `tripod bench omb`.
func DefaultOMBConfig() OMBConfig {
	return OMBConfig{
		Coord: "raft", Brokers: 3, ReplicationFactor: 3, Acks: "all",
		Window: 10 * time.Second, Linger: time.Millisecond, BatchBytes: 131072,
		MaxInFlight: 1000, DrainTimeout: time.Minute, Out: "omb-results", HeapFloor: 256 << 20,
	}
}

// validate checks the flags and names the first bad one.
func (o *OMBConfig) validate() error {
	if o.Workload == "" {
		return errors.New("--workload: give an OpenMessaging Benchmark workload file (lab/bench/omb/workloads/*.yaml)")
	}
	pc := o.produceConfig()
	if pc.Bootstrap == "" {
		if o.Brokers < 1 || o.Brokers > 100 {
			return fmt.Errorf("--brokers %d: must be between 1 and 100", o.Brokers)
		}
		if err := validateBenchCoord(o.Coord); err != nil {
			return err
		}
		if o.ReplicationFactor > o.Brokers {
			return fmt.Errorf("--replication-factor %d: more than the %d brokers of --brokers", o.ReplicationFactor, o.Brokers)
		}
		if err := validateBrokerGoMaxProcs(o.BrokerGoMaxProcs); err != nil {
			return err
		}
		if o.Profile != "" && o.Coord == Kfake {
			return errors.New("--profile: traces tripod's brokers, not kfake; give --coord raft, zk or etcd")
		}
	} else if o.Profile != "" {
		return errors.New("--profile: traces the brokers this command starts, not a --bootstrap cluster's; profile those with tripod serve --pprof")
	}
	if err := validateBrokerSets(o.Bootstrap, o.Coord, o.Sets); err != nil {
		return err
	}
	if o.ReplicationFactor < 1 || o.ReplicationFactor > 32767 {
		return fmt.Errorf("--replication-factor %d: must be between 1 and 32767", o.ReplicationFactor)
	}
	if _, err := parseAcks(o.Acks); err != nil {
		return err
	}
	if o.Duration != nil && (*o.Duration <= 0 || *o.Duration > 7*24*time.Hour) {
		return fmt.Errorf("--duration %v: must be above 0 and at most 168h", *o.Duration)
	}
	if o.Warmup != nil && (*o.Warmup < 0 || *o.Warmup > 7*24*time.Hour) {
		return fmt.Errorf("--warmup %v: must be between 0 and 168h", *o.Warmup)
	}
	if o.Window < 100*time.Millisecond || o.Window > time.Hour {
		return fmt.Errorf("--window %v: must be between 100ms and 1h", o.Window)
	}
	if o.Linger < 0 || o.Linger > time.Minute {
		return fmt.Errorf("--linger %v: must be between 0 and 1m", o.Linger)
	}
	if o.BatchBytes < 1 || o.BatchBytes > 1<<30 {
		return fmt.Errorf("--batch-size %d: must be between 1 and 1073741824", o.BatchBytes)
	}
	if o.MaxInFlight < 1 || o.MaxInFlight > 1000000 {
		return fmt.Errorf("--max-in-flight %d: must be between 1 and 1000000", o.MaxInFlight)
	}
	if o.DrainTimeout <= 0 {
		return fmt.Errorf("--drain-timeout %v: must be above 0", o.DrainTimeout)
	}
	if o.Out == "" {
		return errors.New("--out: give a directory")
	}
	if o.HeapFloor < 0 || o.HeapFloor > 1<<40 {
		return fmt.Errorf("--heap-floor %d: must be 0 (off) or a size in bytes up to 1 TiB", o.HeapFloor)
	}
	return nil
}

// produceConfig is the part of o that benchCluster, shared with `tripod
// bench produce`, reads.
func (o *OMBConfig) produceConfig() *ProduceConfig {
	return &ProduceConfig{Bootstrap: o.Bootstrap, Coord: o.Coord, Brokers: o.Brokers,
		BrokerGoMaxProcs: o.BrokerGoMaxProcs, Binary: o.Binary, Pprof: o.Profile != "", Sets: o.Sets}
}

// ombLatencyMaxMicros is the largest latency the histograms hold, an
// hour; a larger one is clamped to it.
const ombLatencyMaxMicros = int64(time.Hour / time.Microsecond)

// newLatencyHistogram returns a histogram of microseconds from 1 µs to an
// hour at 3 significant digits, as OMB's (HdrHistogram) are.
func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, ombLatencyMaxMicros, 3)
}

// recordMicros records d in h, in microseconds, clamped to h's range.
func recordMicros(h *hdrhistogram.Histogram, d time.Duration) {
	h.RecordValue(min(max(int64(d/time.Microsecond), 1), ombLatencyMaxMicros))
}

// ombStats are the counters and histograms the producers and consumers
// of one run update: the totals, and the current window's and the
// current phase's histograms (the phase's are reset when the warm-up
// ends, so the aggregates leave it out).
type ombStats struct {
	sent, sendErrors, sentBytes atomic.Int64
	received, receivedBytes     atomic.Int64
	// acked counts the records acknowledged without error: what the
	// consumers must read by the end.
	acked atomic.Int64
	// fetchErrors counts the errors the consumers' polls returned;
	// firstSendErr and firstFetchErr keep the first of each, for the
	// user.
	fetchErrors                 atomic.Int64
	firstSendErr, firstFetchErr atomic.Pointer[error]
	// progress is nudged, without blocking, whenever a consumer reads.
	progress chan struct{}

	mu                          sync.Mutex
	pubWindow, e2eWindow        *hdrhistogram.Histogram
	pubAggregate, e2eAggregate  *hdrhistogram.Histogram
	delayWindow, delayAggregate *hdrhistogram.Histogram
	e2eSamples                  int64
}

func newOMBStats() *ombStats {
	return &ombStats{progress: make(chan struct{}, 1),
		pubWindow: newLatencyHistogram(), e2eWindow: newLatencyHistogram(),
		pubAggregate: newLatencyHistogram(), e2eAggregate: newLatencyHistogram(),
		delayWindow: newLatencyHistogram(), delayAggregate: newLatencyHistogram()}
}

// published records an acknowledged send: its latency from send to ack.
func (s *ombStats) published(lat time.Duration) {
	s.acked.Add(1)
	s.mu.Lock()
	recordMicros(s.pubWindow, lat)
	recordMicros(s.pubAggregate, lat)
	s.mu.Unlock()
}

// delayed records how late a fixed-rate send was against its schedule,
// OMB's publish delay.
func (s *ombStats) delayed(d time.Duration) {
	s.mu.Lock()
	recordMicros(s.delayWindow, d)
	recordMicros(s.delayAggregate, d)
	s.mu.Unlock()
}

// consumed records the end-to-end latencies of records read at once.
func (s *ombStats) consumed(lats []time.Duration, bytes int64) {
	s.mu.Lock()
	for _, l := range lats {
		recordMicros(s.e2eWindow, l)
		recordMicros(s.e2eAggregate, l)
	}
	s.e2eSamples += int64(len(lats))
	s.mu.Unlock()
	s.received.Add(int64(len(lats)))
	s.receivedBytes.Add(bytes)
	select {
	case s.progress <- struct{}{}:
	default:
	}
}

// OMB runs the workload of cfg on the cluster of cfg.Bootstrap, or on one
// it starts and stops, prints a line per window and a summary to out,
// and writes the result (OMB's TestResult fields) as JSON and an SVG
// chart to cfg.Out.
func OMB(ctx context.Context, cfg OMBConfig, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	w, err := LoadOMBWorkload(cfg.Workload)
	if err != nil {
		return err
	}
	testDur := time.Duration(w.TestDurationMinutes) * time.Minute
	if cfg.Duration != nil {
		testDur = *cfg.Duration
	}
	if testDur <= 0 {
		return fmt.Errorf("workload %s: testDurationMinutes 0 and no --duration: nothing to measure", cfg.Workload)
	}
	warmup := time.Duration(w.WarmupDurationMinutes) * time.Minute
	if cfg.Warmup != nil {
		warmup = *cfg.Warmup
	}
	if _, set := os.LookupEnv("GOGC"); !set && cfg.HeapFloor > 0 {
		// The clients' own collections would enter the latencies they
		// measure: at 50 000 msg/s of 1 KiB, Go's default goal (twice a
		// live heap of a few MiB) collected 18 times a second, 14 % of
		// the time marking and 0.4 s stopped in 20 s of a run. OMB's
		// clients run in JVMs with heaps of gigabytes.
		floor := gcfloor.Start(uint64(cfg.HeapFloor))
		defer floor.Stop()
	}
	r := &ombRun{cfg: &cfg, w: w, stats: newOMBStats(), out: out,
		prefix: fmt.Sprintf("omb-%d", time.Now().UnixNano())}
	if cfg.Profile != "" {
		c, stop, err := startBenchCluster(ctx, cfg.produceConfig(), out)
		if err != nil {
			return err
		}
		defer stop()
		r.seeds = c.Bootstrap()
		r.profiles = &profiles{dir: cfg.Profile, brokers: map[int32]string{}}
		for _, b := range c.Brokers() {
			r.profiles.brokers[b.ID] = b.MetricsAddr
		}
	} else {
		t, err := benchCluster(ctx, cfg.produceConfig(), out)
		if err != nil {
			return err
		}
		defer t.stop()
		r.seeds = t.seeds
	}
	res, err := r.run(ctx, warmup, testDur)
	if err != nil {
		return err
	}
	return res.write(cfg.Out, out)
}

// ombRun is one run of a workload.
type ombRun struct {
	cfg    *OMBConfig
	w      *OMBWorkload
	seeds  []string
	stats  *ombStats
	out    io.Writer
	prefix string
	topics []string
	// groups are the subscriptions' consumer groups, deleted with the
	// topics at the end.
	groups []string
	// profiles, when set, captures the test duration's traces and
	// profiles.
	profiles *profiles
}

// client returns a franz-go client of the run's cluster with opts.
func (r *ombRun) client(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(r.seeds...)}, r.cfg.ClientOpts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", strings.Join(r.seeds, ","), err)
	}
	return cl, nil
}

// run creates the topics, starts the consumers and producers, samples
// the warm-up and the test, stops the producers, waits for the consumers
// to read every acknowledged record and returns the result.
func (r *ombRun) run(ctx context.Context, warmup, testDur time.Duration) (*ombResult, error) {
	admin, err := r.client()
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	for i := range r.w.Topics {
		r.topics = append(r.topics, fmt.Sprintf("%s-topic-%04d", r.prefix, i))
	}
	for _, t := range r.topics {
		if err := createtopics.Create(ctx, admin, createtopics.Topic{Name: t, Partitions: int32(r.w.PartitionsPerTopic), ReplicationFactor: int16(r.cfg.ReplicationFactor)}); err != nil {
			return nil, err
		}
	}
	defer func() {
		// Deleting the topics and groups (the consumers have stopped by
		// now) keeps a --bootstrap cluster's disk from filling up and its
		// group list clean; a failure here does not change the figures.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		adm := kadm.NewClient(admin)
		if len(r.groups) > 0 {
			adm.DeleteGroups(delCtx, r.groups...)
		}
		adm.DeleteTopics(delCtx, r.topics...)
	}()
	if err := r.waitLeaders(ctx, admin); err != nil {
		return nil, err
	}

	// The consumers read until consumeCtx ends; every one is waited for.
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	var consumers sync.WaitGroup
	defer func() {
		stopConsumers()
		consumers.Wait()
	}()
	if r.groups, err = r.startConsumers(consumeCtx, &consumers); err != nil {
		return nil, err
	}
	if err := r.waitGroupsStable(ctx, admin, r.groups); err != nil {
		return nil, err
	}
	fmt.Fprintf(r.out, "workload %q: %d topic(s) × %d partitions, RF %d, acks=%s, %d B messages, %d producer(s) and %d subscription(s) × %d consumer(s) per topic, %s, keys %s; warm-up %v, test %v\n",
		r.w.Name, r.w.Topics, r.w.PartitionsPerTopic, r.cfg.ReplicationFactor, r.cfg.Acks, r.w.MessageSize,
		r.w.ProducersPerTopic, r.w.SubscriptionsPerTopic, r.w.ConsumerPerSubscription, rateText(r.w.ProducerRate), r.w.KeyDistributor, warmup, testDur)

	produceCtx, stopProducers := context.WithCancel(ctx)
	var producers sync.WaitGroup
	defer func() {
		stopProducers()
		producers.Wait()
	}()
	if err := r.startProducers(produceCtx, &producers); err != nil {
		return nil, err
	}

	res := newOMBResult(r.w, r.cfg, warmup, testDur)
	if warmup > 0 {
		fmt.Fprintf(r.out, "----- warm-up (%v, left out of the result) -----\n", warmup)
		if err := r.sample(ctx, warmup, nil); err != nil {
			return nil, err
		}
		r.stats.mu.Lock()
		r.stats.pubAggregate.Reset()
		r.stats.e2eAggregate.Reset()
		r.stats.delayAggregate.Reset()
		r.stats.mu.Unlock()
	}
	fmt.Fprintf(r.out, "----- benchmark (%v) -----\n", testDur)
	waitProfiles := func() error { return nil }
	if r.profiles != nil {
		if waitProfiles, err = r.profiles.capture(ctx, testDur, r.out); err != nil {
			return nil, err
		}
	}
	if err := r.sample(ctx, testDur, res); err != nil {
		waitProfiles()
		return nil, err
	}
	if err := waitProfiles(); err != nil {
		return nil, err
	}
	stopProducers()
	producers.Wait()
	if err := r.drain(ctx); err != nil {
		return nil, err
	}
	r.stats.mu.Lock()
	res.aggregate(r.stats)
	r.stats.mu.Unlock()
	res.MessagesSent = r.stats.sent.Load()
	res.MessagesAcknowledged = r.stats.acked.Load()
	res.MessagesReceived = r.stats.received.Load()
	res.EndToEndLatencySamples = r.stats.e2eSamples
	res.SendErrors = r.stats.sendErrors.Load()
	res.FetchErrors = r.stats.fetchErrors.Load()
	if e := r.stats.firstSendErr.Load(); e != nil {
		res.FirstSendError = (*e).Error()
	}
	if e := r.stats.firstFetchErr.Load(); e != nil {
		res.FirstFetchError = (*e).Error()
	}
	return res, nil
}

// waitLeaders waits until every partition of the run's topics has a
// leader, asking through the run's own client (with the user's security
// flags), so that the first records' latency does not include the
// topics' creation.
func (r *ombRun) waitLeaders(ctx context.Context, admin *kgo.Client) error {
	adm := kadm.NewClient(admin)
	err := cluster.WaitFor(ctx, time.Minute, func() error {
		md, err := adm.Metadata(ctx, r.topics...)
		if err != nil {
			return err
		}
		for _, t := range r.topics {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil {
				return fmt.Errorf("topic %s: not in metadata (%v)", t, td.Err)
			}
			if len(td.Partitions) != r.w.PartitionsPerTopic {
				return fmt.Errorf("topic %s: %d partitions, want %d", t, len(td.Partitions), r.w.PartitionsPerTopic)
			}
			for _, p := range td.Partitions {
				if p.Leader < 0 || p.Err != nil {
					return fmt.Errorf("partition %s-%d: no leader (%v)", t, p.Partition, p.Err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("topics without a leader for every partition: %w", err)
	}
	return nil
}

// rateText describes a producerRate.
func rateText(rate int) string {
	if rate == 0 {
		return "max rate"
	}
	return fmt.Sprintf("%d msg/s", rate)
}

// startConsumers starts consumerPerSubscription consumers in each
// subscription (a consumer group) of each topic, as OMB does, reading
// from the earliest offset; it returns the groups.
func (r *ombRun) startConsumers(ctx context.Context, wg *sync.WaitGroup) ([]string, error) {
	var groups []string
	for ti, topic := range r.topics {
		for s := range r.w.SubscriptionsPerTopic {
			group := fmt.Sprintf("%s-sub-%04d-%03d", r.prefix, ti, s)
			groups = append(groups, group)
			for range r.w.ConsumerPerSubscription {
				cl, err := r.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(10<<20))
				if err != nil {
					return nil, err
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer cl.Close()
					r.consume(ctx, cl)
				}()
			}
		}
	}
	return groups, nil
}

// consume reads records until ctx ends and records each one's end-to-end
// latency: the time it was read minus the send time at its head.
func (r *ombRun) consume(ctx context.Context, cl *kgo.Client) {
	var lats []time.Duration
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		now := time.Now().UnixNano()
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			r.stats.fetchErrors.Add(1)
			err = fmt.Errorf("partition %s-%d: %w", topic, partition, err)
			r.stats.firstFetchErr.CompareAndSwap(nil, &err)
		})
		lats = lats[:0]
		var bytes int64
		fetches.EachRecord(func(rec *kgo.Record) {
			if len(rec.Value) < ombTimestampBytes {
				return
			}
			sent := int64(binary.BigEndian.Uint64(rec.Value))
			lats = append(lats, time.Duration(now-sent))
			bytes += int64(len(rec.Value))
		})
		if len(lats) > 0 {
			r.stats.consumed(lats, bytes)
		}
	}
}

// waitGroupsStable waits until every subscription's group is stable with
// all its consumers and every partition of its topic assigned, so that
// the first records' end-to-end latency does not include a rebalance.
func (r *ombRun) waitGroupsStable(ctx context.Context, admin *kgo.Client, groups []string) error {
	adm := kadm.NewClient(admin)
	err := cluster.WaitFor(ctx, 2*time.Minute, func() error {
		described, err := adm.DescribeGroups(ctx, groups...)
		if err != nil {
			return err
		}
		for _, g := range groups {
			d, ok := described[g]
			if !ok || d.Err != nil {
				return fmt.Errorf("group %s: not described (%v)", g, d.Err)
			}
			if d.State != "Stable" || len(d.Members) != r.w.ConsumerPerSubscription {
				return fmt.Errorf("group %s: %s with %d members, want Stable with %d", g, d.State, len(d.Members), r.w.ConsumerPerSubscription)
			}
			assigned := 0
			for _, m := range d.Members {
				if a, ok := m.Assigned.AsConsumer(); ok {
					for _, t := range a.Topics {
						assigned += len(t.Partitions)
					}
				}
			}
			if assigned != r.w.PartitionsPerTopic {
				return fmt.Errorf("group %s: %d partitions assigned, want %d", g, assigned, r.w.PartitionsPerTopic)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("consumer groups not ready: %w", err)
	}
	return nil
}

// startProducers starts producersPerTopic producers per topic, each with
// its share of producerRate, or at max rate.
func (r *ombRun) startProducers(ctx context.Context, wg *sync.WaitGroup) error {
	acks, err := parseAcks(r.cfg.Acks)
	if err != nil {
		return err
	}
	n := r.w.Topics * r.w.ProducersPerTopic
	rate := float64(r.w.ProducerRate) / float64(n)
	for _, topic := range r.topics {
		for range r.w.ProducersPerTopic {
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks),
				kgo.ProducerLinger(r.cfg.Linger), kgo.ProducerBatchMaxBytes(int32(r.cfg.BatchBytes)),
				kgo.ProducerBatchCompression(kgo.NoCompression())}
			if r.cfg.Acks != "all" && r.cfg.Acks != "-1" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl, err := r.client(opts...)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cl.Close()
				r.produce(ctx, cl, rate)
			}()
		}
	}
	return nil
}

// produce sends records until ctx ends, at rate records/s spread evenly
// (every due record is sent, then it waits for the next one), or for rate
// 0 as fast as the cluster acknowledges with at most MaxInFlight records
// unacknowledged; then it waits for every sent record's ack.
func (r *ombRun) produce(ctx context.Context, cl *kgo.Client, rate float64) {
	keys := newKeyDistributor(r.w.KeyDistributor)
	inFlight := make(chan struct{}, r.cfg.MaxInFlight)
	var acks sync.WaitGroup
	defer acks.Wait()
	send := func() {
		value := make([]byte, len(r.w.payload))
		copy(value, r.w.payload)
		sent := time.Now()
		binary.BigEndian.PutUint64(value, uint64(sent.UnixNano()))
		acks.Add(1)
		r.stats.sent.Add(1)
		r.stats.sentBytes.Add(int64(len(value)))
		// The record's context is not ctx: records sent before the end are
		// waited for, not aborted.
		cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Key: keys(), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				r.stats.sendErrors.Add(1)
				r.stats.firstSendErr.CompareAndSwap(nil, &err)
			} else {
				r.stats.published(time.Since(sent))
			}
			if rate == 0 {
				<-inFlight
			}
			acks.Done()
		})
	}
	if rate == 0 {
		for {
			select {
			case <-ctx.Done():
				return
			case inFlight <- struct{}{}:
				send()
			}
		}
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := int64(0); ; {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// Send every record due by now: record i is due at start + i/rate.
		elapsed := time.Since(start)
		for ; float64(i) <= elapsed.Seconds()*rate && ctx.Err() == nil; i++ {
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			r.stats.delayed(time.Since(due))
			send()
		}
		next := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		timer.Reset(time.Until(next))
	}
}

// newKeyDistributor returns the record keys of OMB's KeyDistributorType:
// none, a round robin over 10 000 keys, or a random key per record.
func newKeyDistributor(kind string) func() []byte {
	switch kind {
	case "KEY_ROUND_ROBIN":
		const n = 10000
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = []byte("key-" + strconv.Itoa(i))
		}
		i := 0
		return func() []byte {
			k := keys[i%n]
			i++
			return k
		}
	case "RANDOM_NANO":
		return func() []byte {
			return strconv.AppendInt(nil, time.Now().UnixNano()^mrand.Int64(), 10)
		}
	}
	return func() []byte { return nil }
}

// sample prints, and with res records, one line of rates, backlog and
// latencies per window for d.
func (r *ombRun) sample(ctx context.Context, d time.Duration, res *ombResult) error {
	end := time.Now().Add(d)
	last := time.Now()
	s := r.stats
	lastSent, lastErr, lastBytes := s.sent.Load(), s.sendErrors.Load(), s.sentBytes.Load()
	lastRecv, lastRecvBytes := s.received.Load(), s.receivedBytes.Load()
	// The machine's CPU time, where it can be read: a window's figures
	// and the test's.
	startCPU, cpuErr := hostcpu.Read()
	lastCPU := startCPU
	ticker := time.NewTicker(r.cfg.Window)
	defer ticker.Stop()
	for {
		final := false
		wait := time.NewTimer(time.Until(end))
		select {
		case <-ctx.Done():
			wait.Stop()
			return ctx.Err()
		case <-ticker.C:
		case <-wait.C:
			final = true
		}
		wait.Stop()
		now := time.Now()
		secs := now.Sub(last).Seconds()
		sent, sendErr, sentBytes := s.sent.Load(), s.sendErrors.Load(), s.sentBytes.Load()
		recv, recvBytes := s.received.Load(), s.receivedBytes.Load()
		win := ombWindow{
			PublishRate:      float64(sent-lastSent) / secs,
			PublishErrorRate: float64(sendErr-lastErr) / secs,
			PublishMBps:      float64(sentBytes-lastBytes) / (1 << 20) / secs,
			ConsumeRate:      float64(recv-lastRecv) / secs,
			ConsumeMBps:      float64(recvBytes-lastRecvBytes) / (1 << 20) / secs,
			Backlog:          sent*int64(r.w.SubscriptionsPerTopic) - recv,
		}
		if cpuErr == nil {
			if cpu, err := hostcpu.Read(); err == nil {
				win.CPU, win.HasCPU = cpu.Since(lastCPU), true
				lastCPU = cpu
			}
		}
		s.mu.Lock()
		win.Publish = percentiles(s.pubWindow)
		win.EndToEnd = percentiles(s.e2eWindow)
		win.DelayMicros = percentiles(s.delayWindow)
		s.pubWindow.Reset()
		s.e2eWindow.Reset()
		s.delayWindow.Reset()
		s.mu.Unlock()
		fmt.Fprintln(r.out, win.line())
		if res != nil {
			res.addWindow(win)
		}
		last, lastSent, lastErr, lastBytes, lastRecv, lastRecvBytes = now, sent, sendErr, sentBytes, recv, recvBytes
		if final || !now.Before(end) {
			if res != nil && cpuErr == nil && lastCPU != startCPU {
				res.setTestCPU(lastCPU.Since(startCPU))
			}
			return nil
		}
	}
}

// drain waits until every subscription has read every acknowledged
// record, or fails after DrainTimeout saying how many it did not.
func (r *ombRun) drain(ctx context.Context) error {
	want := r.stats.acked.Load() * int64(r.w.SubscriptionsPerTopic)
	timeout := time.NewTimer(r.cfg.DrainTimeout)
	defer timeout.Stop()
	for r.stats.received.Load() < want {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			why := "no fetch error"
			if e := r.stats.firstFetchErr.Load(); e != nil {
				why = fmt.Sprintf("%d fetch errors, the first: %v", r.stats.fetchErrors.Load(), *e)
			}
			return fmt.Errorf("after %v (--drain-timeout) the consumers had read %d of the %d acknowledged records (%d per subscription; %s)",
				r.cfg.DrainTimeout, r.stats.received.Load(), want, want/int64(r.w.SubscriptionsPerTopic), why)
		case <-r.stats.progress:
		}
	}
	return nil
}
