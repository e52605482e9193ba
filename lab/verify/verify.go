// Package verify is `tripod verify`: a Jepsen-style check of a tripod
// cluster. It starts a cluster of the tripod binary's `serve` processes
// (or uses the user's), runs producers and consumers on a topic while it
// injects faults from a seeded schedule, reads every partition back, and
// hands the history to internal/verify, which finds the anomalies.
// cmd/tripod parses the flags and calls Run. The server's code must not
// import it.
package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
	history "github.com/tripodmq/tripod/internal/verify"
	"github.com/tripodmq/tripod/lab"
)

// The exit codes of `tripod verify`, carried by an ExitError.
const (
	ExitAnomaly = 1 // an anomaly check found something
	ExitFailed  = 2 // the run itself failed
)

// ExitError is an error that ends `tripod verify` with its own exit code,
// ExitAnomaly or ExitFailed.
type ExitError struct {
	Code int
	Err  error
}

// Error implements error.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the error it carries.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the process's exit code.
func (e *ExitError) ExitCode() int { return e.Code }

// Config is what `tripod verify` checks, and how. Validation errors name
// the CLI's flags.
type Config struct {
	// Coord is the coordination backend of the cluster it starts.
	Coord string
	// MigrateTo, when set, is the backend the cluster moves to halfway
	// through Duration (`tripod migrate`), while the workload and the
	// faults go on; empty: no migration.
	MigrateTo string
	// Duration is how long the workload and the faults run.
	Duration time.Duration
	// Faults are the fault kinds injected (FaultKinds); FaultsSet says the
	// user chose them.
	Faults    []string
	FaultsSet bool
	// Seed is the fault schedule's seed; without SeedSet one is drawn from
	// the clock.
	Seed    uint64
	SeedSet bool
	// Partitions is the topic's partition count.
	Partitions int
	// Workload is what the clients do: WorkloadRecords or WorkloadTxn.
	Workload string
	// Producers are KIND=COUNT, KIND idempotent, plain, acks1 or txn
	// (ProducersSet says the user chose them); Consumers the number of
	// consumers reading during the run.
	Producers    []string
	ProducersSet bool
	Consumers    int
	// Rate is the records/s each producer writes, over all partitions.
	Rate float64
	// Out is the file the result is written to as JSON.
	Out string
	// Bootstrap is HOST:PORT[,HOST:PORT] of an existing cluster to check;
	// empty: it starts one.
	Bootstrap string
	// ZKConnect and EtcdEndpoints name the user's coordination servers;
	// empty: it starts its own.
	ZKConnect     string
	EtcdEndpoints string
	// SessionTimeout is every broker's session timeout; SteadyTimeout how
	// long the cluster may take to be steady after a fault.
	SessionTimeout time.Duration
	SteadyTimeout  time.Duration
	// Keep keeps the brokers' data and logs.
	Keep bool
	// LogLevel is the brokers' log level; Sets are broker properties
	// key=value for every broker, after verify's own.
	LogLevel string
	Sets     []string
	// Binary is the tripod executable whose `serve` the brokers run;
	// empty: this process's own.
	Binary string
	// Racks puts the brokers it starts in racks (VerifyRacks, one each)
	// with Kafka's rack-aware replica selector, and each consumer during
	// the run in one of them (client.rack), so that consumers read from
	// followers of their rack (KIP-392) through the faults.
	Racks bool

	// producerSet is Producers parsed, filled by validate.
	producerSet []producerSpec
}

// VerifyRacks are the racks of --racks: broker i in VerifyRacks[(i-1) % 3].
var VerifyRacks = []string{"az1", "az2", "az3"}

// rackAwareSelector is Kafka's replica.selector.class that serves a
// consumer from a replica of its rack.
const rackAwareSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// The workloads of --workload.
const (
	// WorkloadRecords: producers of the idempotent, plain and acks1
	// kinds, read_uncommitted consumers.
	WorkloadRecords = "records"
	// WorkloadTxn: transactional producers, some transactions aborted on
	// purpose, a consume-transform-produce stage, read_committed
	// consumers (runTxns).
	WorkloadTxn = "txn"
)

// DefaultConfig returns the defaults of `tripod verify`.
func DefaultConfig() Config {
	return Config{
		Coord:          "raft",
		Workload:       WorkloadRecords,
		Duration:       60 * time.Second,
		Faults:         slices.Clone(FaultKinds),
		Partitions:     6,
		Producers:      []string{"idempotent=2", "plain=1", "acks1=1"},
		Consumers:      2,
		Rate:           100,
		Out:            "verify.json",
		SessionTimeout: 2 * time.Second,
		SteadyTimeout:  2 * time.Minute,
		LogLevel:       "info",
	}
}

// producerSpec is one producer of the workload.
type producerSpec struct {
	name string
	kind history.Kind
}

// validate checks the flags, names the first bad one, and parses
// --producers.
func (o *Config) validate() error {
	if !slices.Contains(cluster.Backends, o.Coord) {
		return fmt.Errorf("--coord %q: must be one of raft, zk, etcd", o.Coord)
	}
	if o.Duration < time.Second || o.Duration > 24*time.Hour {
		return fmt.Errorf("--duration %v: must be between 1s and 24h", o.Duration)
	}
	var faults []string
	for _, k := range o.Faults {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !slices.Contains(FaultKinds, k) {
			return fmt.Errorf("--faults %q: must be among %s", k, strings.Join(FaultKinds, ", "))
		}
		if !slices.Contains(faults, k) {
			faults = append(faults, k)
		}
	}
	o.Faults = faults
	if o.Bootstrap != "" {
		if o.FaultsSet && len(o.Faults) > 0 {
			return errors.New("--faults: not with --bootstrap; faults on an existing cluster are left to you")
		}
		if o.ZKConnect != "" || o.EtcdEndpoints != "" {
			return errors.New("--bootstrap: not with --zk-connect or --etcd-endpoints (those are for the cluster verify starts)")
		}
		if o.Racks {
			return errors.New("--racks: not with --bootstrap; the racks of an existing cluster's brokers are its own")
		}
		o.Faults = nil
	}
	if o.MigrateTo != "" {
		switch {
		case o.Bootstrap != "":
			return errors.New("--migrate-to: not with --bootstrap (verify migrates only a cluster it starts)")
		case !slices.Contains(cluster.Backends, o.MigrateTo):
			return fmt.Errorf("--migrate-to %q: must be one of raft, zk, etcd", o.MigrateTo)
		case o.MigrateTo == o.Coord:
			return fmt.Errorf("--migrate-to %s: the cluster starts on --coord %s already; name another backend", o.MigrateTo, o.Coord)
		}
	}
	if o.ZKConnect != "" && o.Coord != "zk" && o.MigrateTo != "zk" {
		return fmt.Errorf("--zk-connect: only with --coord zk or --migrate-to zk, not --coord %s", o.Coord)
	}
	if o.EtcdEndpoints != "" && o.Coord != "etcd" && o.MigrateTo != "etcd" {
		return fmt.Errorf("--etcd-endpoints: only with --coord etcd or --migrate-to etcd, not --coord %s", o.Coord)
	}
	if o.Partitions < 1 || o.Partitions > 1000 {
		return fmt.Errorf("--partitions %d: must be between 1 and 1000", o.Partitions)
	}
	switch o.Workload {
	case WorkloadRecords:
	case WorkloadTxn:
		if !o.ProducersSet {
			o.Producers = []string{"txn=2"}
		}
	default:
		return fmt.Errorf("--workload %q: must be %s or %s", o.Workload, WorkloadRecords, WorkloadTxn)
	}
	o.producerSet = nil
	counts := map[history.Kind]int{}
	for _, spec := range o.Producers {
		kindName, countText, ok := strings.Cut(strings.TrimSpace(spec), "=")
		if !ok {
			return fmt.Errorf("--producers %q: want KIND=COUNT, KIND one of idempotent, plain, acks1", spec)
		}
		kind, err := history.ParseKind(kindName)
		if err != nil {
			return fmt.Errorf("--producers %q: kind must be idempotent, plain, acks1 or txn", spec)
		}
		if (kind == history.Transactional) != (o.Workload == WorkloadTxn) {
			return fmt.Errorf("--producers %q: --workload txn takes txn producers only, and txn producers need --workload txn", spec)
		}
		n, err := strconv.Atoi(countText)
		if err != nil || n < 0 || n > 16 {
			return fmt.Errorf("--producers %q: count must be between 0 and 16", spec)
		}
		counts[kind] = n
	}
	for _, k := range history.Kinds {
		for range counts[k] {
			o.producerSet = append(o.producerSet, producerSpec{name: "p" + strconv.Itoa(len(o.producerSet)+1), kind: k})
		}
	}
	if len(o.producerSet) == 0 {
		return errors.New("--producers: give at least one producer, e.g. idempotent=1")
	}
	if o.Consumers < 1 || o.Consumers > 16 {
		return fmt.Errorf("--consumers %d: must be between 1 and 16", o.Consumers)
	}
	if o.Rate <= 0 || o.Rate > 1000 {
		return fmt.Errorf("--rate %v: must be above 0 and at most 1000 records/s per producer", o.Rate)
	}
	if o.Out == "" {
		return errors.New("--out: required")
	}
	if o.SessionTimeout < time.Second || o.SessionTimeout > 5*time.Minute {
		return fmt.Errorf("--session-timeout %v: must be between 1s and 5m", o.SessionTimeout)
	}
	if o.SteadyTimeout < 10*time.Second {
		return fmt.Errorf("--steady-timeout %v: must be at least 10s", o.SteadyTimeout)
	}
	return lab.CheckBrokerFlags(o.LogLevel, o.Sets)
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
	// Workload is --workload.
	Workload string `json:"workload"`
	// Migration is the migration of --migrate-to, if any.
	Migration *migrationReport `json:"migration,omitempty"`
	// Result holds the checks' counts per kind and their examples.
	Result *history.Result `json:"result"`
	// Transform holds the checks of the transaction workload's output
	// topic, which its consume-transform-produce stage wrote.
	Transform *history.Result `json:"transform,omitempty"`
	// Valid is true when the run completed and found no anomaly.
	Valid   bool    `json:"valid"`
	Error   string  `json:"error,omitempty"`
	WallS   float64 `json:"wall_s"`
	DataDir string  `json:"data_dir,omitempty"`
}

// verifyProducerReport is one producer in the report.
type verifyProducerReport struct {
	Name       string       `json:"name"`
	Kind       history.Kind `json:"kind"`
	Seeds      []string     `json:"seeds"`
	Attempted  int          `json:"attempted"`
	Acked      int          `json:"acked"`
	Failed     int          `json:"failed"`
	FirstError string       `json:"first_error,omitempty"`
}

// verifyConsumerReport is one consumer in the report.
type verifyConsumerReport struct {
	Name        string `json:"name"`
	Reads       int    `json:"reads"`
	FetchErrors int    `json:"fetch_errors"`
}

// verifyRun is one run's state, used by the command's goroutine only.
type verifyRun struct {
	opts   *Config
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
	// migration is the migration of --migrate-to, nil without it.
	migration *migrationRun
}

// note prints a note and keeps it in the report.
func (r *verifyRun) note(msg string) {
	fmt.Fprintf(r.out, "note: %s\n", msg)
	r.report.Notes = append(r.report.Notes, msg)
}

// Run runs the check of cfg, printing the fault log and the result to out
// and notes on kept data to errOut, and returns nil, or an ExitError with
// ExitAnomaly or ExitFailed.
func Run(ctx context.Context, cfg Config, out, errOut io.Writer) error {
	opts := &cfg
	failed := func(err error) error { return &ExitError{Code: ExitFailed, Err: err} }
	if err := opts.validate(); err != nil {
		return failed(err)
	}
	if !opts.SeedSet {
		opts.Seed = uint64(time.Now().UnixNano())
	}
	// The fault log and the migration's lines come from two goroutines.
	out = &lineWriter{w: out}
	r := &verifyRun{opts: opts, out: out, start: time.Now()}
	r.report = &verifyReport{
		Command:         strings.Join(os.Args, " "),
		Seed:            opts.Seed,
		Coord:           opts.Coord,
		Bootstrap:       opts.Bootstrap,
		DurationS:       opts.Duration.Seconds(),
		SessionTimeoutS: opts.SessionTimeout.Seconds(),
		Partitions:      opts.Partitions,
		RatePerProducer: opts.Rate,
		Workload:        opts.Workload,
		Faults:          []faultRecord{},
		FaultCounts:     map[string]int{},
	}
	if opts.Bootstrap != "" {
		r.report.Coord = ""
	}
	if opts.MigrateTo != "" {
		r.report.Migration = &migrationReport{From: opts.Coord, To: opts.MigrateTo, Outcome: migrationNotStarted}
	}
	var kinds []string
	for _, p := range opts.producerSet {
		kinds = append(kinds, p.name+"="+p.kind.String())
	}
	where := "coord " + opts.Coord
	if opts.MigrateTo != "" {
		where += fmt.Sprintf(", migrating to %s at %v", opts.MigrateTo, opts.Duration/2)
	}
	if opts.Bootstrap != "" {
		where = "cluster at " + opts.Bootstrap
	}
	fmt.Fprintf(out, "tripod verify: %s, %v, workload %s, faults %s, seed %d (replay with --seed %d)\n  %d partitions, producers %s at %g records/s each, %d consumers\n",
		where, opts.Duration, opts.Workload, orNone(opts.Faults), opts.Seed, opts.Seed, opts.Partitions, strings.Join(kinds, " "), opts.Rate, opts.Consumers)

	root, err := os.MkdirTemp("", "tripod-verify-")
	if err != nil {
		return failed(fmt.Errorf("temporary data dir: %w", err))
	}
	runErr := r.run(ctx, root)
	r.report.WallS = time.Since(r.start).Seconds()
	res := r.report.Result
	total := 0
	var found []string
	for _, rs := range []*history.Result{res, r.report.Transform} {
		if rs == nil {
			continue
		}
		total += rs.Anomalies
		for _, cr := range rs.Checks {
			if cr.Anomalies > 0 {
				found = append(found, fmt.Sprintf("%s %d", cr.Name, cr.Anomalies))
			}
		}
	}
	anomalies := total > 0
	if runErr != nil {
		r.report.Error = runErr.Error()
	}
	r.report.Valid = runErr == nil && !anomalies
	keep := opts.Keep || !r.report.Valid
	if keep && opts.Bootstrap == "" {
		r.report.DataDir = root
	}
	if res != nil {
		printVerifyResult(out, r.report)
	}
	b, err := json.MarshalIndent(r.report, "", "  ")
	if err == nil {
		err = os.WriteFile(opts.Out, append(b, '\n'), 0o644)
	}
	if err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("write --out %s: %w", opts.Out, err))
	} else {
		fmt.Fprintf(out, "wrote %s\n", opts.Out)
	}
	if keep && opts.Bootstrap == "" {
		fmt.Fprintf(errOut, "brokers' data and logs kept in %s\n", root)
	} else {
		os.RemoveAll(root)
	}
	switch {
	case runErr != nil:
		return failed(fmt.Errorf("verify run failed: %w", runErr))
	case anomalies:
		return &ExitError{Code: ExitAnomaly, Err: fmt.Errorf("verify: %d anomalies found (%s); seed %d", total, strings.Join(found, ", "), opts.Seed)}
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
	servers := &lab.CoordServers{Dir: root}
	defer servers.Close()
	if opts.Bootstrap == "" {
		self, err := lab.Binary(opts.Binary)
		if err != nil {
			return fmt.Errorf("find this binary to run brokers: %w", err)
		}
		cfg := cluster.DefaultConfig()
		cfg.Binary, cfg.Dir, cfg.Backend, cfg.Brokers = self, filepath.Join(root, "cluster"), opts.Coord, lab.Brokers
		cfg.SessionTimeout, cfg.LogLevel, cfg.Proxies = opts.SessionTimeout, opts.LogLevel, true
		if opts.Racks {
			cfg.Racks = VerifyRacks
			opts.Sets = append([]string{"replica.selector.class=" + rackAwareSelector}, opts.Sets...)
		}
		cfg.Sets = append([]string{
			"min.insync.replicas=2",
			"unclean.leader.election.enable=false",
			"replication.truncation=fetch",
			// A follower cut off leaves the ISR within the cut, so that cuts
			// exercise ISR changes and not only waiting.
			"replica.lag.time.max.ms=" + strconv.FormatInt(opts.SessionTimeout.Milliseconds(), 10),
		}, opts.Sets...)
		name := fmt.Sprintf("tripod-verify-%d", time.Now().UnixNano())
		if err := servers.Configure(&cfg, opts.ZKConnect, opts.EtcdEndpoints, name); err != nil {
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
		if opts.MigrateTo != "" {
			r.migration, err = newMigrationRun(opts, servers, name+"-to-"+opts.MigrateTo, self, c, r.start, r.out)
			if err != nil {
				return err
			}
		}
		for _, b := range c.Brokers() {
			r.seeds = append(r.seeds, []string{b.Advertised()})
		}
		r.allSeeds = c.Bootstrap()
	} else {
		r.topic = fmt.Sprintf("verify-%d", time.Now().UnixNano())
		addrs, err := brokerAddrs(ctx, strings.Split(opts.Bootstrap, ","))
		if err != nil {
			return fmt.Errorf("--bootstrap %s: %w", opts.Bootstrap, err)
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
	if opts.Workload == WorkloadTxn {
		return r.runTxns(ctx, runner)
	}

	// The workload: producers and consumers, each on its own goroutine,
	// all owned by this function and awaited before the final read.
	producers, consumers, err := r.newClients()
	defer func() {
		for _, p := range producers {
			p.client.Close()
		}
	}()
	if err != nil {
		return err
	}
	stopProducing := make(chan struct{})
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	var producing, consuming sync.WaitGroup
	for _, p := range producers {
		producing.Add(1)
		go func() {
			defer producing.Done()
			p.run(ctx, stopProducing, opts.Partitions, opts.Rate)
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

	runErr := r.runFaults(ctx, runner)
	stopWorkload()
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
			final, err = readAll(ctx, r.topic, opts.Partitions, r.allSeeds, ackedEnds(producers), 2*time.Minute)
			if err != nil {
				runErr = err
			}
		}
	}

	h := history.History{}
	for _, p := range producers {
		writes, rep := p.report()
		h.Producers = append(h.Producers, history.Producer{Name: p.name, Kind: p.kind})
		h.Writes = append(h.Writes, writes...)
		r.report.Producers = append(r.report.Producers, rep)
	}
	for _, c := range consumers {
		h.Consumers = append(h.Consumers, history.Consumer{Name: c.name, Reads: c.reads})
		r.report.Consumers = append(r.report.Consumers, verifyConsumerReport{Name: c.name, Reads: len(c.reads), FetchErrors: c.errs})
	}
	if final != nil && runErr == nil {
		h.Consumers = append(h.Consumers, history.Consumer{Name: final.name, Final: true, Reads: final.reads})
		r.report.Consumers = append(r.report.Consumers, verifyConsumerReport{Name: final.name, Reads: len(final.reads), FetchErrors: final.errs})
	}
	res := history.Check(h)
	r.report.Result = &res
	if runErr == nil && res.Acked.Total() == 0 {
		runErr = errors.New("no write was acknowledged: the cluster never accepted the workload")
	}
	if runErr == nil && res.Reads == 0 {
		runErr = errors.New("no record was read")
	}
	return runErr
}

// newClients returns the run's producers, each starting from another
// broker, and its consumers, with extra options (an isolation level);
// on an error, the clients made so far are returned for closing.
func (r *verifyRun) newClients(consumerOpts ...kgo.Opt) ([]*verifyProducer, []*verifyConsumer, error) {
	var producers []*verifyProducer
	for i, spec := range r.opts.producerSet {
		p, err := newVerifyProducer(spec.name, spec.kind, r.topic, r.seeds[i%len(r.seeds)])
		if err != nil {
			return producers, nil, err
		}
		producers = append(producers, p)
	}
	var consumers []*verifyConsumer
	for i := range r.opts.Consumers {
		opts := consumerOpts
		if r.opts.Racks {
			// A consumer goes back to the leader from a follower that
			// died only when it rechecks (franz-go's default is 30 min).
			opts = append(slices.Clip(opts), kgo.Rack(VerifyRacks[i%len(VerifyRacks)]), kgo.RecheckPreferredReplicaInterval(5*time.Second))
		}
		c, err := newVerifyConsumer("c"+strconv.Itoa(i+1), r.topic, r.opts.Partitions, r.seeds[(i+1)%len(r.seeds)], opts...)
		if err != nil {
			for _, c := range consumers {
				c.client.Close()
			}
			return producers, nil, err
		}
		consumers = append(consumers, c)
	}
	return producers, consumers, nil
}

// runFaults injects the faults on this goroutine until --duration ends
// and every kind has been injected once (none without a runner), and
// records them in the report. With --migrate-to, the migration starts
// halfway through --duration on a goroutine of its own, which runFaults
// awaits: it may take the rest of --duration and --steady-timeout.
func (r *verifyRun) runFaults(ctx context.Context, runner *faultRunner) error {
	durationCtx, cancel := context.WithTimeout(ctx, r.opts.Duration)
	defer cancel()
	var migrated chan error
	if m := r.migration; m != nil {
		migrated = make(chan error, 1)
		half := r.opts.Duration / 2
		go func() { migrated <- m.run(ctx, half, r.opts.Duration-half+r.opts.SteadyTimeout) }()
	}
	var err error
	if runner != nil {
		err = runner.run(ctx, durationCtx, newFaultPlan(r.opts.Seed, runner.kinds, r.opts.SessionTimeout))
		r.report.Faults = runner.faults
		for _, f := range runner.faults {
			r.report.FaultCounts[f.Kind]++
		}
	}
	<-durationCtx.Done()
	if migrated != nil {
		err = errors.Join(err, <-migrated)
		r.report.Migration = r.migration.result()
	}
	return err
}

// faultRunner returns the runner of the faults that apply to this run,
// noting those that do not, or nil when there are none.
func (r *verifyRun) faultRunner(servers *lab.CoordServers) *faultRunner {
	if r.c == nil || len(r.opts.Faults) == 0 {
		if r.opts.Bootstrap != "" {
			r.note("faults on an existing cluster are left to you (--bootstrap)")
		}
		return nil
	}
	runner := &faultRunner{
		c: r.c, zk: servers.ZK(), etcd: servers.Etcd(), topic: r.topic, partitions: r.opts.Partitions,
		start: r.start, steadyTimeout: r.opts.SteadyTimeout, out: r.out,
		backend: func() string { return r.opts.Coord },
	}
	if m := r.migration; m != nil {
		runner.backend = m.backend
	}
	// A ZooKeeper or etcd server is this run's to restart when verify
	// started it; the coord fault applies while the cluster is on one.
	restartable := func(backend string) bool {
		return backend == "zk" && servers.ZK() != nil || backend == "etcd" && servers.Etcd() != nil
	}
	for _, k := range r.opts.Faults {
		if k == "coord" {
			from, to := r.opts.Coord, r.opts.MigrateTo
			switch {
			case to == "" && !restartable(from):
				r.note("fault coord skipped: " + coordSkipReason(from))
				continue
			case to != "" && !restartable(from) && !restartable(to):
				r.note(fmt.Sprintf("fault coord skipped: on %s and on %s alike, verify has no coordination server to restart", from, to))
				continue
			case to != "" && !restartable(from):
				r.note("fault coord only once the migration is done: until then " + coordSkipReason(from))
			case to != "" && !restartable(to):
				r.note("fault coord only until the migration is done: after it " + coordSkipReason(to))
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
	if len(addrs) < lab.Brokers {
		return nil, fmt.Errorf("lists %d brokers %v, want at least %d for a topic of replication factor %d", len(addrs), addrs, lab.Brokers, lab.Brokers)
	}
	return addrs, nil
}

// createTopic creates the run's topic: --partitions partitions,
// replication factor 3, min.insync.replicas=2 and no unclean election.
func (r *verifyRun) createTopic(ctx context.Context) error { return r.createTopicNamed(ctx, r.topic) }

// createTopicNamed creates topic as createTopic creates the run's topic.
func (r *verifyRun) createTopicNamed(ctx context.Context, topic string) error {
	cl, err := kgo.NewClient(verifyClientOpts("verify-admin", r.allSeeds)...)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	req := createtopics.Request(time.Minute, createtopics.Topic{
		Name: topic, Partitions: int32(r.opts.Partitions), ReplicationFactor: lab.Brokers,
		Configs: map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}})
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	resp, err := req.RequestWith(cctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
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
		_, err := lab.WaitSteady(ctx, r.c, []string{r.topic}, r.opts.Partitions, r.opts.SteadyTimeout)
		return err
	}
	return cluster.WaitFor(ctx, r.opts.SteadyTimeout, func() error {
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
			if len(parts) != r.opts.Partitions {
				return fmt.Errorf("%d partitions of %s, want %d", len(parts), r.topic, r.opts.Partitions)
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
	if m := rep.Migration; m != nil {
		if m.Outcome == migrationDone {
			fmt.Fprintf(out, "migration: %s to %s at %.1fs, done in %.1fs\n", m.From, m.To, m.StartS, m.DurationS)
		} else {
			fmt.Fprintf(out, "migration: %s to %s: %s\n", m.From, m.To, strings.ToUpper(m.Outcome))
		}
	}
	if len(rep.Faults) > 0 {
		var parts []string
		for _, k := range FaultKinds {
			if n := rep.FaultCounts[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(out, "faults injected: %d (%s)\n", len(rep.Faults), strings.Join(parts, ", "))
	}
	printChecks(out, res, len(rep.Consumers))
	if rep.Transform != nil {
		fmt.Fprintln(out, "the transform's output topic:")
		printChecks(out, rep.Transform, 1)
	}
	switch {
	case rep.Error != "":
		fmt.Fprintf(out, "RUN FAILED: %s\n", rep.Error)
	case res.Anomalies > 0 || rep.Transform != nil && rep.Transform.Anomalies > 0:
		n := res.Anomalies
		if rep.Transform != nil {
			n += rep.Transform.Anomalies
		}
		fmt.Fprintf(out, "INVALID: %d anomalies\n", n)
	default:
		fmt.Fprintln(out, "valid: no anomaly")
	}
}

// printChecks prints the table of res's checks, one column per producer
// kind that wrote, its figures, and up to three examples per check.
func printChecks(out io.Writer, res *history.Result, consumers int) {
	var kinds []history.Kind
	for _, k := range history.Kinds {
		if res.Attempted.Of(k) > 0 {
			kinds = append(kinds, k)
		}
	}
	fmt.Fprintf(out, "%-22s", "check")
	for _, k := range kinds {
		fmt.Fprintf(out, " %10s", k)
	}
	fmt.Fprintln(out, "  verdict")
	for _, cr := range res.Checks {
		fmt.Fprintf(out, "%-22s", cr.Name)
		for _, k := range kinds {
			fmt.Fprintf(out, " %10d", cr.Counts.Of(k))
		}
		fmt.Fprintf(out, "  %s\n", verdict(cr))
	}
	var acked, read []string
	for _, k := range kinds {
		acked = append(acked, fmt.Sprintf("%s %d of %d sent", k, res.Acked.Of(k), res.Attempted.Of(k)))
		read = append(read, fmt.Sprintf("%s %d", k, res.Read.Of(k)))
	}
	fmt.Fprintf(out, "acknowledged: %s\n", strings.Join(acked, ", "))
	fmt.Fprintf(out, "read: %d distinct values written (%s); %d records read by %d consumers",
		res.Read.Total(), strings.Join(read, ", "), res.Reads, consumers)
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
}

// verdict says whether a check found an anomaly, or what it found that the
// producers' kinds allow.
func verdict(cr history.CheckResult) string {
	if cr.Anomalies > 0 {
		return "ANOMALY"
	}
	var allowed []string
	for _, k := range history.Kinds {
		if cr.Counts.Of(k) > 0 && !history.IsAnomaly(cr.Name, k) {
			allowed = append(allowed, k.String())
		}
	}
	if len(allowed) > 0 {
		return "ok (" + strings.Join(allowed, ", ") + " allowed)"
	}
	return "ok"
}

// lineWriter serializes the writes of goroutines that each write whole
// lines in one Write (fmt.Fprintf does).
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
