package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/lab"
)

// MigrateDirections are the six moves `tripod bench migrate` measures by
// default, each "from:to".
var MigrateDirections = []string{"zk:etcd", "zk:raft", "etcd:zk", "etcd:raft", "raft:zk", "raft:etcd"}

// MigrateConfig is what `tripod bench migrate` measures, and how.
// Validation errors name the CLI's flags.
type MigrateConfig struct {
	// Directions are the moves measured, each "from:to" with two
	// different backends of raft, zk, etcd; one cluster each per
	// partition count.
	Directions []string
	// Partitions are the partition counts of the topic, one cluster each.
	Partitions []int
	// Rate is the records/s the producer writes to each partition.
	Rate float64
	// Before is how long the load runs, measured, before the migration
	// starts; After how long it runs after the migration ended.
	Before, After time.Duration
	// ProbeInterval is how often a metadata write (a topic config change)
	// is sent while the load runs.
	ProbeInterval time.Duration
	// Timeout bounds each migration (tripod migrate --timeout).
	Timeout time.Duration
	// SessionTimeout is every broker's session timeout.
	SessionTimeout time.Duration
	// ClientBackoff is the producer's retry backoff and metadata min age.
	ClientBackoff time.Duration
	// Sets are broker properties key=value for every broker.
	Sets []string
	// BrokerGoMaxProcs is the GOMAXPROCS of each broker; 0: this
	// process's own.
	BrokerGoMaxProcs int
	// Out is the directory migrate.json is written to.
	Out string
	// Keep keeps the brokers' data and logs.
	Keep bool
	// LogLevel is the brokers' log level.
	LogLevel string
	// Binary is the tripod executable whose `serve` and `migrate` run;
	// empty: this process's own.
	Binary string
}

// DefaultMigrateConfig returns the defaults of `tripod bench migrate`.
func DefaultMigrateConfig() MigrateConfig {
	return MigrateConfig{
		Directions:     slices.Clone(MigrateDirections),
		Partitions:     []int{1000},
		Rate:           2,
		Before:         10 * time.Second,
		After:          10 * time.Second,
		ProbeInterval:  50 * time.Millisecond,
		Timeout:        5 * time.Minute,
		SessionTimeout: 6 * time.Second,
		ClientBackoff:  100 * time.Millisecond,
		Out:            "migrate-results",
		LogLevel:       "info",
	}
}

// validate checks the flags and names the first bad one.
func (o *MigrateConfig) validate() error {
	if len(o.Directions) == 0 {
		return errors.New("--direction: give at least one FROM:TO, e.g. zk:etcd")
	}
	for _, d := range o.Directions {
		from, to, ok := strings.Cut(d, ":")
		if !ok || !slices.Contains(cluster.Backends, from) || !slices.Contains(cluster.Backends, to) || from == to {
			return fmt.Errorf("--direction %q: must be FROM:TO with two different backends of raft, zk, etcd", d)
		}
	}
	if len(o.Partitions) == 0 {
		return errors.New("--partitions: give at least one partition count")
	}
	for _, p := range o.Partitions {
		if p < 1 || p > 100000 {
			return fmt.Errorf("--partitions %d: must be between 1 and 100000", p)
		}
	}
	switch {
	case o.Rate <= 0 || o.Rate > 1000:
		return fmt.Errorf("--rate %g: must be above 0 and at most 1000 records/s per partition", o.Rate)
	case o.Before < time.Second || o.Before > time.Hour:
		return fmt.Errorf("--before %v: must be between 1s and 1h", o.Before)
	case o.After < time.Second || o.After > time.Hour:
		return fmt.Errorf("--after %v: must be between 1s and 1h", o.After)
	case o.ProbeInterval < 10*time.Millisecond || o.ProbeInterval > 10*time.Second:
		return fmt.Errorf("--probe-interval %v: must be between 10ms and 10s", o.ProbeInterval)
	case o.Timeout < 10*time.Second || o.Timeout > 24*time.Hour:
		return fmt.Errorf("--timeout %v: must be between 10s and 24h", o.Timeout)
	case o.SessionTimeout < time.Second || o.SessionTimeout > 5*time.Minute:
		return fmt.Errorf("--session-timeout %v: must be between 1s and 5m", o.SessionTimeout)
	case o.ClientBackoff < 0 || o.ClientBackoff > time.Minute:
		return fmt.Errorf("--client-backoff %v: must be between 0 and 1m", o.ClientBackoff)
	}
	if err := validateBrokerGoMaxProcs(o.BrokerGoMaxProcs); err != nil {
		return err
	}
	return lab.CheckBrokerFlags(o.LogLevel, o.Sets)
}

// failoverConfig is the load bench failover would run with o's settings:
// 3 brokers, one topic, every partition written.
func (o *MigrateConfig) failoverConfig() *FailoverConfig {
	f := DefaultFailoverConfig()
	f.Topics, f.Rate, f.SessionTimeout, f.ClientBackoff = 1, o.Rate, o.SessionTimeout, o.ClientBackoff
	f.Sets, f.BrokerGoMaxProcs, f.LogLevel = o.Sets, o.BrokerGoMaxProcs, o.LogLevel
	return &f
}

// migrateReport is migrate.json.
type migrateReport struct {
	Command          string           `json:"command"`
	Started          time.Time        `json:"started"`
	SessionTimeoutMs float64          `json:"session_timeout_ms"`
	RatePerPartition float64          `json:"rate_per_partition"`
	ProbeIntervalMs  float64          `json:"probe_interval_ms"`
	BrokerGoMaxProcs int              `json:"broker_gomaxprocs"`
	Series           []*migrateSeries `json:"series"`
	Lost             int64            `json:"lost"`
	WallSeconds      float64          `json:"wall_seconds"`
}

// migrateSeries is one migration of a loaded cluster: its load (the
// source's backend, the partitions, the records) and what the migration
// cost it.
type migrateSeries struct {
	failoverSeries
	To string `json:"to"`
	// MigrationMs is how long `tripod migrate` ran, from its start to
	// every broker registered on the target and both sides compared.
	MigrationMs float64 `json:"migration_ms"`
	// WritesRefusedMs is the longest time without a metadata write
	// completing, among the spans that overlap the migration;
	// WritesGapBeforeMs the same before it (the probe's own cadence and
	// the controller's commit time).
	WritesRefusedMs   float64 `json:"writes_refused_ms"`
	WritesGapBeforeMs float64 `json:"writes_gap_before_ms"`
	// Before, During and After are the acknowledgement latencies of the
	// records produced in the --before window, while tripod migrate ran,
	// and in the --after window.
	Before latencyStats `json:"before"`
	During latencyStats `json:"during"`
	After  latencyStats `json:"after"`
	// Output is what tripod migrate printed.
	Output []string `json:"output,omitempty"`
}

// latencyStats summarises produce latencies, in milliseconds.
type latencyStats struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// newLatencyStats summarises the latencies of samples acknowledged in
// [from, to).
func newLatencyStats(samples []ackSample, from, to time.Time) latencyStats {
	var ms []float64
	for _, s := range samples {
		if !s.at.Before(from) && s.at.Before(to) {
			ms = append(ms, float64(s.latency)/float64(time.Millisecond))
		}
	}
	if len(ms) == 0 {
		return latencyStats{}
	}
	slices.Sort(ms)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ms)))) - 1
		return math.Round(ms[max(i, 0)]*10) / 10
	}
	return latencyStats{N: len(ms), P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: at(1)}
}

// Migrate runs `tripod bench migrate`: for every direction and partition
// count it starts a cluster on the source under an acks=all load, lets
// it run --before, moves it to the target with `tripod migrate` while a
// probe keeps changing a topic config, lets it run --after, reads every
// partition back, and reports how long metadata writes were refused, how
// long the migration took, and produce latency before, during and after.
func Migrate(ctx context.Context, cfg MigrateConfig, out, errOut io.Writer) error {
	opts := &cfg
	if err := opts.validate(); err != nil {
		return err
	}
	ws, err := newWorkspace(opts.Binary, opts.Out, "tripod-migrate-", opts.Keep)
	if err != nil {
		return err
	}
	defer ws.close(errOut)
	self, root, servers := ws.self, ws.root, ws.servers

	report := &migrateReport{
		Command:          strings.Join(os.Args, " "),
		Started:          time.Now(),
		SessionTimeoutMs: float64(opts.SessionTimeout.Milliseconds()),
		RatePerPartition: opts.Rate,
		ProbeIntervalMs:  float64(opts.ProbeInterval.Milliseconds()),
		BrokerGoMaxProcs: brokerGoMaxProcs(opts.BrokerGoMaxProcs),
	}
	prog := &progressLine{w: errOut, total: len(opts.Directions) * len(opts.Partitions)}
	var failures []string
	for _, d := range opts.Directions {
		from, to, _ := strings.Cut(d, ":")
		for _, partitions := range opts.Partitions {
			if ctx.Err() != nil {
				break
			}
			s := &migrateSeries{failoverSeries: failoverSeries{Backend: from, Partitions: partitions}, To: to}
			report.Series = append(report.Series, s)
			dir := filepath.Join(root, fmt.Sprintf("%s-to-%s-p%d", from, to, partitions))
			err := runMigrateSeries(ctx, opts, self, dir, servers, s, prog)
			prog.runDone()
			if err != nil {
				s.Error = err.Error()
				failures = append(failures, fmt.Sprintf("%s to %s with %d partitions: %v", from, to, partitions, err))
				prog.note(fmt.Sprintf("%s to %s, %d partitions: %v (broker logs in %s)", from, to, partitions, err, dir))
			}
			if s.Lost > 0 {
				failures = append(failures, fmt.Sprintf("%s to %s with %d partitions: %d acknowledged records lost (e.g. %s)",
					from, to, partitions, s.Lost, strings.Join(s.LostSample, " ")))
			}
			if err != nil || s.Lost > 0 {
				ws.keep = true
				s.DataDir = dir
			}
			report.Lost += s.Lost
		}
	}
	prog.end()
	report.WallSeconds = time.Since(report.Started).Seconds()

	if err := writeMigrateTable(out, report.Series); err != nil {
		return err
	}
	fmt.Fprintf(out, "3 brokers, session timeout %v, %g records/s per partition, acks=all, RF 3, min.insync.replicas 2, brokers' GOMAXPROCS %d; a topic config changed every %v; wall time %.0fs\n",
		opts.SessionTimeout, opts.Rate, report.BrokerGoMaxProcs, opts.ProbeInterval, report.WallSeconds)
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return fmt.Errorf("encode migrate results: %w", err)
	}
	jsonPath := filepath.Join(opts.Out, "migrate.json")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", jsonPath, err)
	}
	fmt.Fprintf(out, "wrote %s\n", jsonPath)
	if ctx.Err() != nil {
		return fmt.Errorf("migrate benchmark interrupted: %w", ctx.Err())
	}
	if len(failures) > 0 {
		return fmt.Errorf("migrate benchmark: %s", strings.Join(failures, "; "))
	}
	return nil
}

// runMigrateSeries measures one migration into s.
func runMigrateSeries(ctx context.Context, opts *MigrateConfig, self, dir string, servers *lab.CoordServers, s *migrateSeries, prog *progressLine) error {
	sess, err := startSeries(ctx, opts.failoverConfig(), self, dir, servers, &s.failoverSeries, prog, nil)
	if err != nil {
		return err
	}
	defer sess.close()
	target, err := servers.MigrationTarget(s.To, "", "", fmt.Sprintf("tripod-migrated-%d", time.Now().UnixNano()), sess.c.Brokers())
	if err != nil {
		return err
	}

	sess.tracker.startSampling()
	probe := newWriteProbe(sess, opts.ProbeInterval)
	defer probe.stop()
	began := time.Now()
	if !lab.Sleep(ctx, opts.Before) {
		return ctx.Err()
	}

	prog.show(&s.failoverSeries, "", 0, "migrating to "+s.To)
	args := lab.MigrateArgs(s.To, target, sess.c.Bootstrap(), opts.Timeout)
	start := time.Now()
	var output bytes.Buffer
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	end := time.Now()
	s.MigrationMs = *msSince(end, start)
	s.Output = strings.Split(strings.TrimSpace(output.String()), "\n")
	if runErr != nil {
		runErr = fmt.Errorf("tripod %s: %w; it printed:\n%s", strings.Join(args, " "), runErr, output.String())
	}

	if runErr == nil {
		prog.show(&s.failoverSeries, "", 0, "running on "+s.To)
		if !lab.Sleep(ctx, opts.After) {
			runErr = ctx.Err()
		}
	}
	finished := time.Now()
	probe.stop()
	writes := probe.completions()
	s.WritesGapBeforeMs = longestGap(writes, began, start)
	s.WritesRefusedMs = longestGap(writes, start, end)
	samples := sess.tracker.takeSamples()
	s.Before = newLatencyStats(samples, began, start)
	s.During = newLatencyStats(samples, start, end)
	s.After = newLatencyStats(samples, end, finished)
	if err := probe.failure(); err != nil && runErr == nil {
		runErr = err
	}
	return errors.Join(runErr, sess.finish(ctx, prog))
}

// longestGap returns, in milliseconds, the longest time between two
// successive completions of done (sorted) among the spans that overlap
// [from, to).
func longestGap(done []time.Time, from, to time.Time) float64 {
	var gap time.Duration
	for i := 1; i < len(done); i++ {
		if done[i].Before(from) || !done[i-1].Before(to) {
			continue
		}
		gap = max(gap, done[i].Sub(done[i-1]))
	}
	return math.Round(float64(gap)/float64(time.Microsecond)) / 1000
}

// writeProbe changes a config of the series' topic every interval, one
// change at a time, and keeps when each change was acknowledged: a
// metadata write through the controller, refused while the migration
// freezes the source.
type writeProbe struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu        sync.Mutex
	completed []time.Time
	err       error // the first error that is not the refusal of a frozen source
}

// newWriteProbe starts the probe of sess's topic.
func newWriteProbe(sess *failoverSession, interval time.Duration) *writeProbe {
	p := &writeProbe{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			p.write(sess, n)
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// write sends change n: retention.ms alternates between two values a
// minute apart.
func (p *writeProbe) write(sess *failoverSession, n int) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, sess.series.Topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = "retention.ms", kmsg.IncrementalAlterConfigOpSet
	v := fmt.Sprint(604800000 + 60000*(n%2))
	c.Value = &v
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := req.RequestWith(ctx, sess.admin)
	if err == nil && len(resp.Resources) == 1 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		p.completed = append(p.completed, time.Now())
	case errors.Is(err, kerr.RequestTimedOut), errors.Is(err, kerr.NotController), errors.Is(err, context.Canceled):
		// Refused while the source is frozen, or asked of a broker that
		// is no longer the controller: the next change retries.
	case p.err == nil:
		p.err = fmt.Errorf("metadata write probe: %w", err)
	}
}

// stop ends the probe and waits for it.
func (p *writeProbe) stop() {
	p.once.Do(func() { close(p.done) })
	p.wg.Wait()
}

// completions returns when each change was acknowledged, in order.
func (p *writeProbe) completions() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.completed)
}

// failure returns the probe's first unexpected error, or nil.
func (p *writeProbe) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// writeMigrateTable prints one row per series: the migration's time, how
// long metadata writes were refused, and produce latency before, during
// and after, in ms.
func writeMigrateTable(w io.Writer, series []*migrateSeries) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "FROM\tTO\tPARTITIONS\tMIGRATION\tWRITES_REFUSED\tGAP_BEFORE\tBEFORE_P50\tBEFORE_P99\tBEFORE_MAX\tDURING_P50\tDURING_P99\tDURING_MAX\tAFTER_P50\tAFTER_P99\tAFTER_MAX\tACKED\tLOST\t")
	for _, s := range series {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t", s.Backend, s.To, s.Partitions, s.MigrationMs, s.WritesRefusedMs, s.WritesGapBeforeMs)
		for _, st := range []latencyStats{s.Before, s.During, s.After} {
			if st.N == 0 {
				fmt.Fprint(tw, "-\t-\t-\t")
				continue
			}
			fmt.Fprintf(tw, "%.1f\t%.1f\t%.1f\t", st.P50, st.P99, st.Max)
		}
		fmt.Fprintf(tw, "%d\t%d\t\n", s.Acked, s.Lost)
	}
	return tw.Flush()
}
