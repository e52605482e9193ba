package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
	"github.com/tripodmq/tripod/internal/verify"
)

// The exit codes of `tripod verify`.
const (
	verifyExitAnomaly = 1 // an anomaly check found something
	verifyExitFailed  = 2 // the run itself failed
)

// verifyOptions are the flags of `tripod verify`.
type verifyOptions struct {
	coord          string
	duration       time.Duration
	faults         []string
	seed           uint64
	partitions     int
	producers      []string
	consumers      int
	rate           float64
	out            string
	bootstrap      string
	zkConnect      string
	etcdEndpoints  string
	sessionTimeout time.Duration
	steadyTimeout  time.Duration
	keep           bool
	logLevel       string
	sets           []string

	// Filled by validate and the command.
	seedSet     bool
	faultsSet   bool
	producerSet []producerSpec
}

// producerSpec is one producer of the workload.
type producerSpec struct {
	name string
	kind verify.Kind
}

// newVerifyCmd builds `tripod verify`.
func newVerifyCmd() *cobra.Command {
	opts := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a tripod cluster for lost, duplicated and misread records under faults (Jepsen-style)",
		Long: `Check tripod's safety the way Jepsen's Kafka test does. Unless --bootstrap names
an existing cluster, it starts 3 brokers of this binary on --coord (each behind
a cuttable proxy), with min.insync.replicas=2, unclean.leader.election.enable=false
and replication.truncation=epoch, and creates a topic of --partitions
partitions with replication factor 3.

For --duration, --producers write unique values (producer name and sequence)
round robin to every partition at --rate records/s each, every producer through
another broker: idempotent (acks=all), plain (acks=all, not idempotent) and
acks1 (acks=1). --consumers read every partition from its start by assignment.
Meanwhile faults from --faults are injected one at a time, from a schedule drawn
from --seed, each once the cluster is steady (every broker live, every ISR
full), on the leader of a random partition, the controller or a random broker:

  kill     SIGKILL, then start again
  pause    SIGSTOP for longer than --session-timeout, then SIGCONT
  cut      the broker's Kafka proxy cut for longer than --session-timeout
           (clients and followers cannot reach it; its session lives on)
  restart  SIGTERM (a controlled shutdown), then start again
  coord    the ZooKeeper or etcd server stopped and started again (zk and
           etcd only, and only a server this command started)

The run lasts --duration, and longer if need be until every kind in --faults
has been injected once. Then every fault is healed, the cluster waits to be steady, and
a fresh consumer reads every partition from its start to its end offset. The
history is then checked for: lost (acknowledged, missing from the log),
duplicated (one value at two offsets), inconsistent-offsets (two values read at
one offset), non-monotonic (a consumer's offsets going back), skipped (a
consumer stepping over an offset known to hold a value) and wrong-offset
(acknowledged at one offset, read at another), counted per producer kind.
acks1 losses and misplacements, and plain duplicates, are reported but are not
anomalies.

It prints the fault log as it goes, then a table, and writes everything to
--out as JSON. Exit status: 0 when every check is clean, 1 when an anomaly was
found, 2 when the run itself failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.seedSet = cmd.Flags().Changed("seed")
			opts.faultsSet = cmd.Flags().Changed("faults")
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runVerify(ctx, opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitCodeError{code: verifyExitFailed, err: err}
	})
	f := cmd.Flags()
	f.StringVar(&opts.coord, "coord", "raft", "coordination backend of the cluster it starts: raft, zk or etcd")
	f.DurationVar(&opts.duration, "duration", 60*time.Second, "how long the workload and the faults run")
	f.StringSliceVar(&opts.faults, "faults", verifyFaultKinds, "fault kinds to inject: kill, pause, cut, restart, coord (comma list; empty for none)")
	f.Uint64Var(&opts.seed, "seed", 0, "seed of the fault schedule (default: from the clock; printed so that a run can be replayed)")
	f.IntVar(&opts.partitions, "partitions", 6, "partitions of the topic")
	f.StringSliceVar(&opts.producers, "producers", []string{"idempotent=2", "plain=1", "acks1=1"}, "producers per kind, KIND=COUNT with KIND idempotent, plain or acks1 (comma list)")
	f.IntVar(&opts.consumers, "consumers", 2, "consumers reading every partition during the run")
	f.Float64Var(&opts.rate, "rate", 100, "records/s each producer writes, over all partitions")
	f.StringVar(&opts.out, "out", "verify.json", "file the result is written to as JSON")
	f.StringVar(&opts.bootstrap, "bootstrap", "", "HOST:PORT[,HOST:PORT] of an existing cluster to check (at least 3 brokers); faults are then left to the user")
	f.StringVar(&opts.zkConnect, "zk-connect", "", "with --coord zk: ZooKeeper HOST:PORT[,HOST:PORT] of yours; empty: a local ZooKeeper from Debian's zookeeper package")
	f.StringVar(&opts.etcdEndpoints, "etcd-endpoints", "", "with --coord etcd: etcd client URLs of yours, comma separated; empty: an embedded etcd")
	f.DurationVar(&opts.sessionTimeout, "session-timeout", 2*time.Second, "every broker's session timeout (failure detection time); pause and cut last longer")
	f.DurationVar(&opts.steadyTimeout, "steady-timeout", 2*time.Minute, "how long the cluster may take to be steady again after a fault")
	f.BoolVar(&opts.keep, "keep", false, "keep the brokers' data and logs (always kept when a run fails or finds an anomaly)")
	f.StringVar(&opts.logLevel, "broker-log-level", "info", "brokers' log level: trace, debug, info, warn or error")
	f.StringArrayVar(&opts.sets, "set", nil, "broker property key=value for every broker, after verify's own (repeatable)")
	return cmd
}

// validate checks the flags, names the first bad one, and parses
// --producers.
func (o *verifyOptions) validate() error {
	if !slices.Contains(cluster.Backends, o.coord) {
		return fmt.Errorf("--coord %q: must be one of raft, zk, etcd", o.coord)
	}
	if o.duration < time.Second || o.duration > 24*time.Hour {
		return fmt.Errorf("--duration %v: must be between 1s and 24h", o.duration)
	}
	var faults []string
	for _, k := range o.faults {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !slices.Contains(verifyFaultKinds, k) {
			return fmt.Errorf("--faults %q: must be among %s", k, strings.Join(verifyFaultKinds, ", "))
		}
		if !slices.Contains(faults, k) {
			faults = append(faults, k)
		}
	}
	o.faults = faults
	if o.bootstrap != "" {
		if o.faultsSet && len(o.faults) > 0 {
			return errors.New("--faults: not with --bootstrap; faults on an existing cluster are left to you")
		}
		if o.zkConnect != "" || o.etcdEndpoints != "" {
			return errors.New("--bootstrap: not with --zk-connect or --etcd-endpoints (those are for the cluster verify starts)")
		}
		o.faults = nil
	}
	if o.zkConnect != "" && o.coord != "zk" {
		return fmt.Errorf("--zk-connect: only with --coord zk, not %s", o.coord)
	}
	if o.etcdEndpoints != "" && o.coord != "etcd" {
		return fmt.Errorf("--etcd-endpoints: only with --coord etcd, not %s", o.coord)
	}
	if o.partitions < 1 || o.partitions > 1000 {
		return fmt.Errorf("--partitions %d: must be between 1 and 1000", o.partitions)
	}
	o.producerSet = nil
	counts := map[verify.Kind]int{}
	for _, spec := range o.producers {
		kindName, countText, ok := strings.Cut(strings.TrimSpace(spec), "=")
		if !ok {
			return fmt.Errorf("--producers %q: want KIND=COUNT, KIND one of idempotent, plain, acks1", spec)
		}
		kind, err := verify.ParseKind(kindName)
		if err != nil {
			return fmt.Errorf("--producers %q: kind must be idempotent, plain or acks1", spec)
		}
		n, err := strconv.Atoi(countText)
		if err != nil || n < 0 || n > 16 {
			return fmt.Errorf("--producers %q: count must be between 0 and 16", spec)
		}
		counts[kind] = n
	}
	for _, k := range verify.Kinds {
		for range counts[k] {
			o.producerSet = append(o.producerSet, producerSpec{name: "p" + strconv.Itoa(len(o.producerSet)+1), kind: k})
		}
	}
	if len(o.producerSet) == 0 {
		return errors.New("--producers: give at least one producer, e.g. idempotent=1")
	}
	if o.consumers < 1 || o.consumers > 16 {
		return fmt.Errorf("--consumers %d: must be between 1 and 16", o.consumers)
	}
	if o.rate <= 0 || o.rate > 1000 {
		return fmt.Errorf("--rate %v: must be above 0 and at most 1000 records/s per producer", o.rate)
	}
	if o.out == "" {
		return errors.New("--out: required")
	}
	if o.sessionTimeout < time.Second || o.sessionTimeout > 5*time.Minute {
		return fmt.Errorf("--session-timeout %v: must be between 1s and 5m", o.sessionTimeout)
	}
	if o.steadyTimeout < 10*time.Second {
		return fmt.Errorf("--steady-timeout %v: must be at least 10s", o.steadyTimeout)
	}
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error"}, o.logLevel) {
		return fmt.Errorf("--broker-log-level %q: must be trace, debug, info, warn or error", o.logLevel)
	}
	for _, kv := range o.sets {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
	}
	return nil
}

// verifyReport is what --out holds.
type verifyReport struct {
	Command         string                 `json:"command"`
	Seed            uint64                 `json:"seed"`
	Coord           string                 `json:"coord"`
	Bootstrap       string                 `json:"bootstrap,omitempty"`
	DurationS       float64                `json:"duration_s"`
	SessionTimeoutS float64                `json:"session_timeout_s"`
	Topic           string                 `json:"topic"`
	Partitions      int                    `json:"partitions"`
	RatePerProducer float64                `json:"rate_per_producer"`
	Producers       []verifyProducerReport `json:"producers"`
	Consumers       []verifyConsumerReport `json:"consumers"`
	// FaultKinds are the kinds asked for and applicable; Faults the
	// faults injected.
	FaultKinds []string      `json:"fault_kinds"`
	Faults     []faultRecord `json:"faults"`
	// FaultCounts counts the faults injected per kind.
	FaultCounts map[string]int `json:"fault_counts"`
	Notes       []string       `json:"notes,omitempty"`
	// Result holds the checks' counts per kind and their examples.
	Result *verify.Result `json:"result"`
	// Valid is true when the run completed and found no anomaly.
	Valid   bool    `json:"valid"`
	Error   string  `json:"error,omitempty"`
	WallS   float64 `json:"wall_s"`
	DataDir string  `json:"data_dir,omitempty"`
}

// verifyProducerReport is one producer in the report.
type verifyProducerReport struct {
	Name       string      `json:"name"`
	Kind       verify.Kind `json:"kind"`
	Seeds      []string    `json:"seeds"`
	Attempted  int         `json:"attempted"`
	Acked      int         `json:"acked"`
	Failed     int         `json:"failed"`
	FirstError string      `json:"first_error,omitempty"`
}

// verifyConsumerReport is one consumer in the report.
type verifyConsumerReport struct {
	Name        string `json:"name"`
	Reads       int    `json:"reads"`
	FetchErrors int    `json:"fetch_errors"`
}

// verifyRun is one run's state, used by the command's goroutine only.
type verifyRun struct {
	opts   *verifyOptions
	out    io.Writer
	report *verifyReport
	start  time.Time
	c      *cluster.Cluster // nil with --bootstrap
	topic  string
	// seeds are the addresses clients start from, one list per broker
	// (own cluster: each broker's advertised address).
	seeds [][]string
	// allSeeds are every broker's address, for admin and the final read.
	allSeeds []string
}

// note prints a note and keeps it in the report.
func (r *verifyRun) note(msg string) {
	fmt.Fprintf(r.out, "note: %s\n", msg)
	r.report.Notes = append(r.report.Notes, msg)
}

// runVerify runs the check and returns nil, or an exitCodeError with
// verifyExitAnomaly or verifyExitFailed.
func runVerify(ctx context.Context, opts *verifyOptions, out, errOut io.Writer) error {
	failed := func(err error) error { return &exitCodeError{code: verifyExitFailed, err: err} }
	if err := opts.validate(); err != nil {
		return failed(err)
	}
	if !opts.seedSet {
		opts.seed = uint64(time.Now().UnixNano())
	}
	r := &verifyRun{opts: opts, out: out, start: time.Now()}
	r.report = &verifyReport{
		Command:         strings.Join(os.Args, " "),
		Seed:            opts.seed,
		Coord:           opts.coord,
		Bootstrap:       opts.bootstrap,
		DurationS:       opts.duration.Seconds(),
		SessionTimeoutS: opts.sessionTimeout.Seconds(),
		Partitions:      opts.partitions,
		RatePerProducer: opts.rate,
		Faults:          []faultRecord{},
		FaultCounts:     map[string]int{},
	}
	if opts.bootstrap != "" {
		r.report.Coord = ""
	}
	var kinds []string
	for _, p := range opts.producerSet {
		kinds = append(kinds, p.name+"="+p.kind.String())
	}
	where := "coord " + opts.coord
	if opts.bootstrap != "" {
		where = "cluster at " + opts.bootstrap
	}
	fmt.Fprintf(out, "tripod verify: %s, %v, faults %s, seed %d (replay with --seed %d)\n  %d partitions, producers %s at %g records/s each, %d consumers\n",
		where, opts.duration, orNone(opts.faults), opts.seed, opts.seed, opts.partitions, strings.Join(kinds, " "), opts.rate, opts.consumers)

	root, err := os.MkdirTemp("", "tripod-verify-")
	if err != nil {
		return failed(fmt.Errorf("temporary data dir: %w", err))
	}
	runErr := r.run(ctx, root)
	r.report.WallS = time.Since(r.start).Seconds()
	res := r.report.Result
	anomalies := res != nil && res.Anomalies > 0
	if runErr != nil {
		r.report.Error = runErr.Error()
	}
	r.report.Valid = runErr == nil && !anomalies
	keep := opts.keep || !r.report.Valid
	if keep && opts.bootstrap == "" {
		r.report.DataDir = root
	}
	if res != nil {
		printVerifyResult(out, r.report)
	}
	b, err := json.MarshalIndent(r.report, "", "  ")
	if err == nil {
		err = os.WriteFile(opts.out, append(b, '\n'), 0o644)
	}
	if err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("write --out %s: %w", opts.out, err))
	} else {
		fmt.Fprintf(out, "wrote %s\n", opts.out)
	}
	if keep && opts.bootstrap == "" {
		fmt.Fprintf(errOut, "brokers' data and logs kept in %s\n", root)
	} else {
		os.RemoveAll(root)
	}
	switch {
	case runErr != nil:
		return failed(fmt.Errorf("verify run failed: %w", runErr))
	case anomalies:
		var found []string
		for _, cr := range res.Checks {
			if cr.Anomalies > 0 {
				found = append(found, fmt.Sprintf("%s %d", cr.Name, cr.Anomalies))
			}
		}
		return &exitCodeError{code: verifyExitAnomaly, err: fmt.Errorf("verify: %d anomalies found (%s); seed %d", res.Anomalies, strings.Join(found, ", "), opts.seed)}
	}
	return nil
}

// orNone joins list with commas, or says "none".
func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ",")
}

// run sets the cluster up, runs the workload and the faults, reads every
// partition back and checks the history into r.report.Result. The history
// is checked whenever any was recorded, even when the run failed later.
func (r *verifyRun) run(ctx context.Context, root string) error {
	opts := r.opts
	servers := &coordServers{dir: root}
	defer servers.Close()
	if opts.bootstrap == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this binary to run brokers: %w", err)
		}
		cfg := cluster.DefaultConfig()
		cfg.Binary, cfg.Dir, cfg.Backend, cfg.Brokers = self, filepath.Join(root, "cluster"), opts.coord, failoverBrokers
		cfg.SessionTimeout, cfg.LogLevel, cfg.Proxies = opts.sessionTimeout, opts.logLevel, true
		cfg.Sets = append([]string{
			"min.insync.replicas=2",
			"unclean.leader.election.enable=false",
			"replication.truncation=epoch",
			// A follower cut off leaves the ISR within the cut, so that cuts
			// exercise ISR changes and not only waiting.
			"replica.lag.time.max.ms=" + strconv.FormatInt(opts.sessionTimeout.Milliseconds(), 10),
		}, opts.sets...)
		name := fmt.Sprintf("tripod-verify-%d", time.Now().UnixNano())
		if err := servers.configure(&cfg, opts.zkConnect, opts.etcdEndpoints, name); err != nil {
			return err
		}
		c, err := cluster.Start(cfg)
		if err != nil {
			return fmt.Errorf("start the cluster: %w", err)
		}
		defer c.Close()
		if err := c.WaitServing(ctx, time.Minute); err != nil {
			return fmt.Errorf("cluster does not serve: %w", err)
		}
		r.c, r.topic = c, "verify"
		for _, b := range c.Brokers() {
			r.seeds = append(r.seeds, []string{b.Advertised()})
		}
		r.allSeeds = c.Bootstrap()
	} else {
		r.topic = fmt.Sprintf("verify-%d", time.Now().UnixNano())
		addrs, err := brokerAddrs(ctx, strings.Split(opts.bootstrap, ","))
		if err != nil {
			return fmt.Errorf("--bootstrap %s: %w", opts.bootstrap, err)
		}
		// Each client starts from another broker, and falls back on the
		// others.
		r.allSeeds = addrs
		for i := range addrs {
			r.seeds = append(r.seeds, append(slices.Clone(addrs[i:]), addrs[:i]...))
		}
	}
	r.report.Topic = r.topic

	if err := r.createTopic(ctx); err != nil {
		return err
	}
	if err := r.waitSteady(ctx); err != nil {
		return fmt.Errorf("cluster not steady after creating %s: %w", r.topic, err)
	}

	runner := r.faultRunner(servers)
	if runner != nil {
		r.report.FaultKinds = runner.kinds
	}

	// The workload: producers and consumers, each on its own goroutine,
	// all owned by this function and awaited before the final read.
	var producers []*verifyProducer
	defer func() {
		for _, p := range producers {
			p.client.Close()
		}
	}()
	for i, spec := range opts.producerSet {
		p, err := newVerifyProducer(spec.name, spec.kind, r.topic, r.seeds[i%len(r.seeds)])
		if err != nil {
			return err
		}
		producers = append(producers, p)
	}
	var consumers []*verifyConsumer
	for i := range opts.consumers {
		c, err := newVerifyConsumer("c"+strconv.Itoa(i+1), r.topic, opts.partitions, r.seeds[(i+1)%len(r.seeds)])
		if err != nil {
			for _, c := range consumers {
				c.client.Close()
			}
			return err
		}
		consumers = append(consumers, c)
	}
	stopProducing := make(chan struct{})
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	var producing, consuming sync.WaitGroup
	for _, p := range producers {
		producing.Add(1)
		go func() {
			defer producing.Done()
			p.run(ctx, stopProducing, opts.partitions, opts.rate)
		}()
	}
	for _, c := range consumers {
		consuming.Add(1)
		go func() {
			defer consuming.Done()
			c.run(consumeCtx)
		}()
	}
	stopWorkload := sync.OnceFunc(func() {
		close(stopProducing)
		producing.Wait()
		var flushing sync.WaitGroup
		for _, p := range producers {
			flushing.Add(1)
			go func() {
				defer flushing.Done()
				p.finish(ctx, 30*time.Second)
			}()
		}
		flushing.Wait()
		stopConsuming()
		consuming.Wait()
	})
	defer stopWorkload()

	// The faults, on this goroutine, until the duration ends and every
	// kind has been injected once.
	durationCtx, cancel := context.WithTimeout(ctx, opts.duration)
	var faultErr error
	if runner != nil {
		faultErr = runner.run(ctx, durationCtx, newFaultPlan(opts.seed, runner.kinds, opts.sessionTimeout))
		r.report.Faults = runner.faults
		for _, f := range runner.faults {
			r.report.FaultCounts[f.Kind]++
		}
	}
	<-durationCtx.Done()
	cancel()
	stopWorkload()

	var runErr error
	if faultErr != nil {
		runErr = faultErr
	}
	if ctx.Err() != nil {
		runErr = errors.Join(runErr, fmt.Errorf("interrupted: %w", ctx.Err()))
	}
	var final *verifyConsumer
	if runErr == nil {
		fmt.Fprintf(r.out, "%7.1fs  workload stopped; waiting for a steady cluster and reading every partition back\n", time.Since(r.start).Seconds())
		if err := r.waitSteady(ctx); err != nil {
			runErr = fmt.Errorf("cluster not steady after the faults were healed: %w", err)
		} else {
			var err error
			final, err = readAll(ctx, r.topic, opts.partitions, r.allSeeds, ackedEnds(producers), 2*time.Minute)
			if err != nil {
				runErr = err
			}
		}
	}

	h := verify.History{}
	for _, p := range producers {
		writes, rep := p.report()
		h.Producers = append(h.Producers, verify.Producer{Name: p.name, Kind: p.kind})
		h.Writes = append(h.Writes, writes...)
		r.report.Producers = append(r.report.Producers, rep)
	}
	for _, c := range consumers {
		h.Consumers = append(h.Consumers, verify.Consumer{Name: c.name, Reads: c.reads})
		r.report.Consumers = append(r.report.Consumers, verifyConsumerReport{Name: c.name, Reads: len(c.reads), FetchErrors: c.errs})
	}
	if final != nil && runErr == nil {
		h.Consumers = append(h.Consumers, verify.Consumer{Name: final.name, Final: true, Reads: final.reads})
		r.report.Consumers = append(r.report.Consumers, verifyConsumerReport{Name: final.name, Reads: len(final.reads), FetchErrors: final.errs})
	}
	res := verify.Check(h)
	r.report.Result = &res
	if runErr == nil && res.Acked.Total() == 0 {
		runErr = errors.New("no write was acknowledged: the cluster never accepted the workload")
	}
	if runErr == nil && res.Reads == 0 {
		runErr = errors.New("no record was read")
	}
	return runErr
}

// faultRunner returns the runner of the faults that apply to this run,
// noting those that do not, or nil when there are none.
func (r *verifyRun) faultRunner(servers *coordServers) *faultRunner {
	if r.c == nil || len(r.opts.faults) == 0 {
		if r.opts.bootstrap != "" {
			r.note("faults on an existing cluster are left to you (--bootstrap)")
		}
		return nil
	}
	runner := &faultRunner{
		c: r.c, zk: servers.zk, etcd: servers.etcd, topic: r.topic, partitions: r.opts.partitions,
		start: r.start, steadyTimeout: r.opts.steadyTimeout, out: r.out,
	}
	for _, k := range r.opts.faults {
		if k == "coord" {
			switch {
			case r.opts.coord == "raft":
				r.note("fault coord skipped: with raft the brokers are the coordination service (kill, pause and restart hit it)")
				continue
			case servers.zk == nil && servers.etcd == nil:
				r.note("fault coord skipped: the coordination server is yours (--zk-connect, --etcd-endpoints), verify does not restart it")
				continue
			}
		}
		runner.kinds = append(runner.kinds, k)
	}
	if len(runner.kinds) == 0 {
		return nil
	}
	return runner
}

// brokerAddrs returns the address of every broker the cluster at seeds
// lists in its Metadata, by broker id.
func brokerAddrs(ctx context.Context, seeds []string) ([]string, error) {
	cl, err := kgo.NewClient(verifyClientOpts("verify-admin", seeds)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	slices.SortFunc(resp.Brokers, func(a, b kmsg.MetadataResponseBroker) int { return int(a.NodeID - b.NodeID) })
	var addrs []string
	for _, b := range resp.Brokers {
		addrs = append(addrs, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	if len(addrs) < failoverBrokers {
		return nil, fmt.Errorf("lists %d brokers %v, want at least %d for a topic of replication factor %d", len(addrs), addrs, failoverBrokers, failoverBrokers)
	}
	return addrs, nil
}

// createTopic creates the run's topic: --partitions partitions,
// replication factor 3, min.insync.replicas=2 and no unclean election.
func (r *verifyRun) createTopic(ctx context.Context) error {
	cl, err := kgo.NewClient(verifyClientOpts("verify-admin", r.allSeeds)...)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	req := createtopics.Request(time.Minute, createtopics.Topic{
		Name: r.topic, Partitions: int32(r.opts.partitions), ReplicationFactor: failoverBrokers,
		Configs: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}})
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	resp, err := req.RequestWith(cctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", r.topic, err)
	}
	for i := range resp.Topics {
		if err := createtopics.TopicError(&resp.Topics[i]); err != nil {
			return err
		}
	}
	return nil
}

// waitSteady waits up to --steady-timeout until the cluster is steady: for
// its own cluster every broker live and agreeing, every ISR full; for
// --bootstrap every partition with a leader and every replica in its ISR.
func (r *verifyRun) waitSteady(ctx context.Context) error {
	if r.c != nil {
		_, err := waitSteadyCluster(ctx, r.c, []string{r.topic}, r.opts.partitions, r.opts.steadyTimeout)
		return err
	}
	return cluster.WaitFor(ctx, r.opts.steadyTimeout, func() error {
		var lastErr error
		for _, addr := range r.allSeeds {
			md, err := cluster.MetadataFrom(ctx, addr, r.topic)
			if err != nil {
				lastErr = err
				continue
			}
			if err := md.TopicErrs[r.topic]; err != nil {
				return err
			}
			parts := md.Partitions[r.topic]
			if len(parts) != r.opts.partitions {
				return fmt.Errorf("%d partitions of %s, want %d", len(parts), r.topic, r.opts.partitions)
			}
			for _, p := range parts {
				if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
					return fmt.Errorf("partition %d: leader %d, replicas %v, ISR %v; want a leader and every replica in the ISR", p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
			return nil
		}
		return lastErr
	})
}

// printVerifyResult prints the faults injected, the table of checks and
// the figures and examples of a run.
func printVerifyResult(out io.Writer, rep *verifyReport) {
	res := rep.Result
	fmt.Fprintln(out)
	if len(rep.Faults) > 0 {
		var parts []string
		for _, k := range verifyFaultKinds {
			if n := rep.FaultCounts[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(out, "faults injected: %d (%s)\n", len(rep.Faults), strings.Join(parts, ", "))
	}
	const row = "%-22s %10v %7v %7v  %s\n"
	fmt.Fprintf(out, row, "check", "idempotent", "plain", "acks1", "verdict")
	for _, cr := range res.Checks {
		fmt.Fprintf(out, row, cr.Name, cr.Counts.Idempotent, cr.Counts.Plain, cr.Counts.AcksOne, verdict(cr))
	}
	fmt.Fprintf(out, "acknowledged: idempotent %d, plain %d, acks1 %d (of %d, %d, %d sent)\n",
		res.Acked.Idempotent, res.Acked.Plain, res.Acked.AcksOne, res.Attempted.Idempotent, res.Attempted.Plain, res.Attempted.AcksOne)
	fmt.Fprintf(out, "read: %d distinct values written (idempotent %d, plain %d, acks1 %d); %d records read by %d consumers",
		res.Read.Total(), res.Read.Idempotent, res.Read.Plain, res.Read.AcksOne, res.Reads, len(rep.Consumers))
	if res.Unknown > 0 {
		fmt.Fprintf(out, "; %d values read that no producer wrote", res.Unknown)
	}
	fmt.Fprintln(out)
	for _, cr := range res.Checks {
		for i, ex := range cr.Examples {
			if i == 3 {
				break
			}
			fmt.Fprintf(out, "  %s: %s\n", cr.Name, ex)
		}
	}
	switch {
	case rep.Error != "":
		fmt.Fprintf(out, "RUN FAILED: %s\n", rep.Error)
	case res.Anomalies > 0:
		fmt.Fprintf(out, "INVALID: %d anomalies\n", res.Anomalies)
	default:
		fmt.Fprintln(out, "valid: no anomaly")
	}
}

// verdict says whether a check found an anomaly, or what it found that the
// producers' kinds allow.
func verdict(cr verify.CheckResult) string {
	if cr.Anomalies > 0 {
		return "ANOMALY"
	}
	var allowed []string
	for _, k := range verify.Kinds {
		if cr.Counts.Of(k) > 0 && !verify.IsAnomaly(cr.Name, k) {
			allowed = append(allowed, k.String())
		}
	}
	if len(allowed) > 0 {
		return "ok (" + strings.Join(allowed, ", ") + " allowed)"
	}
	return "ok"
}
