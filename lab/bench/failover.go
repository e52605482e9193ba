package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/createtopics"
	"github.com/tripodmq/tripod/internal/hostcpu"
	"github.com/tripodmq/tripod/lab"
)

// FailoverCases are the brokers `tripod bench failover` fails: the
// broker leading the most partitions, the controller, or every broker of
// the leader case's broker's rack (zone).
var FailoverCases = []string{"leader", "controller", "zone"}

// failoverRacks are the brokers' racks (broker.rack), round robin, when
// case zone runs: one per replica of a partition (lab.Brokers), so that
// the rack-aware placement puts one replica of each in every rack.
var failoverRacks = []string{"az1", "az2", "az3"}

// failoverKinds are the ways it fails them: crash (SIGKILL: the kernel
// refuses connections to the broker's port at once), pause (SIGSTOP for
// longer than the session: the kernel still accepts connections) and cut
// (the broker's Kafka and coordination proxies dropped: nothing answers,
// on ZooKeeper and etcd only, since Raft's transport is not proxied).
var failoverKinds = []string{"crash", "pause", "cut"}

// failoverCaseName is the case of a run, as failover.json and the table
// name it: the broker failed, then the failure unless it is a crash
// ("leader", "controller-pause", "leader-cut").
func failoverCaseName(broker, kind string) string {
	if kind == "crash" {
		return broker
	}
	return broker + "-" + kind
}

// splitFailoverCase is failoverCaseName's inverse.
func splitFailoverCase(kase string) (broker, kind string) {
	if b, k, ok := strings.Cut(kase, "-"); ok {
		return b, k
	}
	return kase, "crash"
}

// FailoverConfig is what `tripod bench failover` measures, and how.
// Validation errors name the CLI's flags.
type FailoverConfig struct {
	// Coords are the coordination backends compared: raft, zk, etcd.
	Coords []string
	// Brokers is how many brokers each cluster runs, at least
	// lab.Brokers (3), the topics' replication factor; default 3.
	Brokers int
	// Voters is, on raft, how many of the brokers (ids 1..Voters) vote
	// in the Raft quorum, the others joining as observers; 0: every
	// broker. ZooKeeper and etcd keep their own quorum and ignore it.
	Voters int
	// Partitions are the partition counts, one cluster each, spread evenly
	// over Topics topics.
	Partitions []int
	Topics     int
	// Runs is the number of failures per case, backend and partition
	// count.
	Runs int
	// Cases are the brokers failed (FailoverCases; default leader and
	// controller); Kinds how they are failed: crash, pause or cut.
	Cases []string
	Kinds []string
	// Out is the directory failover.json and failover.svg are written to.
	Out string
	// SessionTimeout is every broker's session timeout.
	SessionTimeout time.Duration
	// EtcdEndpoints and ZKConnect name the user's coordination servers
	// (comma lists); empty: the benchmark starts its own.
	EtcdEndpoints string
	ZKConnect     string
	// Rate is the records/s the producer writes to each partition written,
	// the first ProducePartitions (0: all).
	Rate              float64
	ProducePartitions int
	// Sets are broker properties key=value for every broker.
	Sets []string
	// ClientBackoff is the producer's retry backoff and metadata min age.
	ClientBackoff time.Duration
	// BrokerGoMaxProcs is the GOMAXPROCS of each broker; 0: this
	// process's own.
	BrokerGoMaxProcs int
	// PollInterval is how often each live broker's Metadata is read after
	// a failure.
	PollInterval time.Duration
	// RecoverTimeout bounds a failover; ISRTimeout a failed broker's way
	// back into every ISR.
	RecoverTimeout time.Duration
	ISRTimeout     time.Duration
	// Keep keeps the brokers' data and logs.
	Keep bool
	// LogLevel is the brokers' log level.
	LogLevel string
	// Binary is the tripod executable whose `serve` the brokers run;
	// empty: this process's own.
	Binary string
	// BackgroundLoad is how many CPUs another process keeps busy from
	// the first cluster's start to the end (startBackgroundLoad); 0:
	// none.
	BackgroundLoad int

	runCases []string // every case × kind, as failoverCaseName names them
}

// DefaultFailoverConfig returns the defaults of `tripod bench failover`.
func DefaultFailoverConfig() FailoverConfig {
	return FailoverConfig{
		Coords:         []string{"raft", "zk", "etcd"},
		Brokers:        lab.Brokers,
		Partitions:     []int{1, 100},
		Topics:         1,
		Runs:           3,
		Cases:          []string{"leader", "controller"},
		Kinds:          []string{"crash"},
		Out:            "failover-results",
		SessionTimeout: 2 * time.Second,
		Rate:           20,
		ClientBackoff:  100 * time.Millisecond,
		PollInterval:   10 * time.Millisecond,
		RecoverTimeout: time.Minute,
		ISRTimeout:     3 * time.Minute,
		LogLevel:       "info",
	}
}

// validate checks the flags and names the first bad one.
func (o *FailoverConfig) validate() error {
	if len(o.Coords) == 0 {
		return errors.New("--coord: give at least one of raft, zk, etcd")
	}
	for i, c := range o.Coords {
		o.Coords[i] = strings.TrimSpace(c)
		if !slices.Contains(cluster.Backends, o.Coords[i]) {
			return fmt.Errorf("--coord %q: must be one of raft, zk, etcd", c)
		}
	}
	if o.Brokers < lab.Brokers || o.Brokers > 100 {
		return fmt.Errorf("--brokers %d: must be between %d (the replication factor) and 100", o.Brokers, lab.Brokers)
	}
	if o.Voters < 0 || o.Voters > o.Brokers {
		return fmt.Errorf("--voters %d: must be between 1 and %d (--brokers), or 0 for every broker", o.Voters, o.Brokers)
	}
	if len(o.Partitions) == 0 {
		return errors.New("--partitions: give at least one count")
	}
	for _, p := range o.Partitions {
		if p < 1 || p > 100000 {
			return fmt.Errorf("--partitions %d: must be between 1 and 100000", p)
		}
	}
	if o.Topics < 1 || o.Topics > 10000 {
		return fmt.Errorf("--topics %d: must be between 1 and 10000", o.Topics)
	}
	for _, p := range o.Partitions {
		if p%o.Topics != 0 {
			return fmt.Errorf("--topics %d: must divide every --partitions count (%d does not)", o.Topics, p)
		}
	}
	if o.Runs < 1 || o.Runs > 1000 {
		return fmt.Errorf("--runs %d: must be between 1 and 1000", o.Runs)
	}
	if len(o.Cases) == 0 {
		return errors.New("--case: give at least one of leader, controller, zone")
	}
	for i, c := range o.Cases {
		o.Cases[i] = strings.TrimSpace(c)
		if !slices.Contains(FailoverCases, o.Cases[i]) {
			return fmt.Errorf("--case %q: must be leader, controller or zone", c)
		}
	}
	if err := o.checkZoneQuorum(); err != nil {
		return err
	}
	if len(o.Kinds) == 0 {
		return errors.New("--failure: give at least one of crash, pause, cut")
	}
	o.runCases = nil
	for i, k := range o.Kinds {
		o.Kinds[i] = strings.TrimSpace(k)
		if !slices.Contains(failoverKinds, o.Kinds[i]) {
			return fmt.Errorf("--failure %q: must be crash, pause or cut", k)
		}
	}
	for _, k := range o.Kinds {
		for _, c := range o.Cases {
			o.runCases = append(o.runCases, failoverCaseName(c, k))
		}
	}
	if o.Out == "" {
		return errors.New("--out: required")
	}
	if o.SessionTimeout < time.Second || o.SessionTimeout > 5*time.Minute {
		return fmt.Errorf("--session-timeout %v: must be between 1s and 5m", o.SessionTimeout)
	}
	if o.ProducePartitions < 0 {
		return fmt.Errorf("--produce-partitions %d: must be 0 (all) or more", o.ProducePartitions)
	}
	if o.Rate <= 0 || o.Rate > 1000 {
		return fmt.Errorf("--rate %v: must be above 0 and at most 1000 records/s per partition", o.Rate)
	}
	if err := validateBrokerGoMaxProcs(o.BrokerGoMaxProcs); err != nil {
		return err
	}
	if err := validateBackgroundLoad(o.BackgroundLoad); err != nil {
		return err
	}
	if o.ClientBackoff < time.Millisecond || o.ClientBackoff > time.Minute {
		return fmt.Errorf("--client-backoff %v: must be between 1ms and 1m", o.ClientBackoff)
	}
	if o.PollInterval < time.Millisecond || o.PollInterval > 10*time.Second {
		return fmt.Errorf("--poll-interval %v: must be between 1ms and 10s", o.PollInterval)
	}
	if o.RecoverTimeout < o.SessionTimeout {
		return fmt.Errorf("--recover-timeout %v: must be at least --session-timeout %v", o.RecoverTimeout, o.SessionTimeout)
	}
	if o.ISRTimeout < time.Second {
		return fmt.Errorf("--isr-timeout %v: must be at least 1s", o.ISRTimeout)
	}
	return lab.CheckBrokerFlags(o.LogLevel, o.Sets)
}

// Failover runs every backend × partition count of cfg, prints the table
// to out and progress to errOut, and writes the JSON and the chart. It
// fails when a series could not be measured or an acknowledged record was
// lost, after writing them.
func Failover(ctx context.Context, cfg FailoverConfig, out, errOut io.Writer) error {
	opts := &cfg
	if err := opts.validate(); err != nil {
		return err
	}
	ws, err := newWorkspace(opts.Binary, opts.Out, "tripod-failover-", opts.Keep)
	if err != nil {
		return err
	}
	defer ws.close(errOut)
	self, root, servers := ws.self, ws.root, ws.servers
	if o := slices.DeleteFunc(slices.Clone(opts.Coords), func(c string) bool { return c == "raft" }); opts.Voters > 0 && len(o) > 0 {
		fmt.Fprintf(errOut, "note: --voters is ignored with --coord %s, which keeps its own quorum\n", strings.Join(o, ","))
	}

	report := &failoverReport{
		Command:          strings.Join(os.Args, " "),
		Started:          time.Now(),
		Brokers:          opts.Brokers,
		RaftVoters:       raftVoters(opts),
		SessionTimeoutMs: float64(opts.SessionTimeout.Milliseconds()),
		RatePerPartition: opts.Rate,
		ClientBackoffMs:  float64(opts.ClientBackoff.Milliseconds()),
		BrokerGoMaxProcs: brokerGoMaxProcs(opts.BrokerGoMaxProcs),
		BackgroundLoad:   opts.BackgroundLoad,
		Sets:             opts.Sets,
	}
	stopLoad, err := startBackgroundLoad(self, opts.BackgroundLoad)
	if err != nil {
		return err
	}
	loadStopped := false
	defer func() {
		if !loadStopped {
			stopLoad()
		}
	}()
	if slices.Contains(opts.Cases, "zone") {
		report.Racks = failoverRacks
	}
	prog := &progressLine{w: errOut, total: len(opts.Coords) * len(opts.Partitions) * len(opts.runCases) * opts.Runs}
	var failures []string
	for _, backend := range opts.Coords {
		for _, partitions := range opts.Partitions {
			if ctx.Err() != nil {
				break
			}
			s := &failoverSeries{Backend: backend, Partitions: partitions}
			report.Series = append(report.Series, s)
			dir := filepath.Join(root, fmt.Sprintf("%s-p%d", backend, partitions))
			doneBefore := prog.done
			err := runFailoverSeries(ctx, opts, self, dir, servers, s, prog)
			// A series that stopped early counts its runs as done, so the bar
			// still reaches its end.
			prog.done = doneBefore + len(opts.runCases)*opts.Runs
			if err != nil {
				s.Error = err.Error()
				failures = append(failures, fmt.Sprintf("%s with %d partitions: %v", backend, partitions, err))
				prog.note(fmt.Sprintf("%s, %d partitions: %v (broker logs in %s)", backend, partitions, err, dir))
			}
			if s.Lost > 0 {
				failures = append(failures, fmt.Sprintf("%s with %d partitions: %d acknowledged records lost (e.g. %s)",
					backend, partitions, s.Lost, strings.Join(s.LostSample, " ")))
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
	report.BackgroundLoadCPUSeconds = stopLoad().Seconds()
	loadStopped = true
	report.Rows = buildRows(report.Series, opts.runCases)

	if err := writeFailoverTable(out, report.Rows); err != nil {
		return err
	}
	minISR := "min.insync.replicas 2"
	for _, s := range report.Series {
		if s.MinInsyncReplicas != 2 {
			minISR = "min.insync.replicas not set (the brokers rejected it)"
		}
	}
	quorum := ""
	if report.RaftVoters > 0 {
		quorum = fmt.Sprintf(" (%d voting in the raft quorum)", report.RaftVoters)
	}
	racks := ""
	if len(report.Racks) > 0 {
		racks = fmt.Sprintf(" in racks %s round robin (case zone kills every broker of one)", strings.Join(report.Racks, ","))
	}
	load := ""
	if opts.BackgroundLoad > 0 {
		load = fmt.Sprintf(", another process kept %d CPU(s) busy (it had %.0f CPU s of the %.0f s)", opts.BackgroundLoad, report.BackgroundLoadCPUSeconds, report.WallSeconds)
	}
	fmt.Fprintf(out, "%d brokers%s%s, session timeout %v, %g records/s per partition, acks=all, RF %d, %s, brokers' GOMAXPROCS %d%s; times in ms after SIGKILL (unavailability: last ack before to first ack after); wall time %.0fs\n",
		opts.Brokers, quorum, racks, opts.SessionTimeout, opts.Rate, lab.Brokers, minISR, report.BrokerGoMaxProcs, load, report.WallSeconds)
	writeMachineCPU(out, report.Series)
	for _, s := range report.Series {
		if s.TopicReadyMs > 0 {
			what := "every leader acknowledged an acks=all write"
			if s.ProducedPartitions < s.Partitions {
				what = fmt.Sprintf("the leader of each of the %d partitions written acknowledged an acks=all write", s.ProducedPartitions)
			}
			ready := "topic ready"
			if len(s.Topics) > 1 {
				ready = fmt.Sprintf("%d topics ready", len(s.Topics))
			}
			fmt.Fprintf(out, "%s, %d partitions: %s (%s) %.0f ms after CreateTopics\n", s.Backend, s.Partitions, ready, what, s.TopicReadyMs)
		}
		for _, r := range s.Runs {
			if len(r.KilledBrokers) > 0 {
				fmt.Fprintf(out, "%s, %d partitions, %s run %d: killed %s, which led %d partitions\n",
					s.Backend, s.Partitions, r.Case, r.Run, r.killedDescription(), len(r.Partitions))
			}
		}
		if s.ProducedPartitions < s.Partitions {
			for _, r := range s.Runs {
				if r.LeadersVisibleMaxMs != nil {
					fmt.Fprintf(out, "%s, %d partitions, %s run %d: a new leader for every one of the %d partitions %s led in a live broker's Metadata %.0f ms after the kill\n",
						s.Backend, s.Partitions, r.Case, r.Run, len(r.Partitions), r.killedDescription(), *r.LeadersVisibleMaxMs)
				}
			}
		}
	}
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return fmt.Errorf("encode failover results: %w", err)
	}
	jsonPath := filepath.Join(opts.Out, "failover.json")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", jsonPath, err)
	}
	svgPath := filepath.Join(opts.Out, "failover.svg")
	if err := os.WriteFile(svgPath, failoverChart(report), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", svgPath, err)
	}
	fmt.Fprintf(out, "wrote %s and %s\n", jsonPath, svgPath)
	if ctx.Err() != nil {
		return fmt.Errorf("failover benchmark interrupted: %w", ctx.Err())
	}
	if len(failures) > 0 {
		return fmt.Errorf("failover benchmark: %s", strings.Join(failures, "; "))
	}
	return nil
}

// checkZoneQuorum refuses case zone on raft when one rack holds so many
// of the voters (brokers 1..--voters, in failoverRacks round robin) that
// losing it loses the Raft quorum: no partition of the zone's could get
// a new leader, and the run would measure only its deadline.
func (o *FailoverConfig) checkZoneQuorum() error {
	voters := raftVoters(o)
	if !slices.Contains(o.Cases, "zone") || voters == 0 {
		return nil
	}
	// Rack az1 holds the most voters: 1, 4, 7, ...
	inRack := (voters + len(failoverRacks) - 1) / len(failoverRacks)
	if voters-inRack > voters/2 {
		return nil
	}
	flag := fmt.Sprintf("--voters %d", voters)
	if o.Voters == 0 {
		flag = fmt.Sprintf("--brokers %d (every broker voting)", voters)
	}
	return fmt.Errorf("%s: with --case zone on raft, rack %s holds %d of the %d Raft voters and losing it loses the quorum; give --voters 3, 5 or more",
		flag, failoverRacks[0], inRack, voters)
}

// raftVoters is how many brokers vote in the Raft quorum of a raft
// series, or 0 when o measures no raft series.
func raftVoters(o *FailoverConfig) int {
	switch {
	case !slices.Contains(o.Coords, "raft"):
		return 0
	case o.Voters == 0:
		return o.Brokers
	}
	return o.Voters
}

// failoverTopics is how a series' partitions spread over its topics
// (--topics): the benchmark numbers them 0 to n-1, and topic i's
// partitions 0 to per-1 are numbers i×per to (i+1)×per-1. The producer
// writes the lowest numbers (--produce-partitions).
type failoverTopics struct {
	names []string
	per   int
	index map[string]int
}

// newFailoverTopics names the topics of backend's series: failover-raft
// for one, failover-raft-0 to failover-raft-(n-1) for several.
func newFailoverTopics(backend string, topics, partitions int) failoverTopics {
	l := failoverTopics{per: partitions / topics, index: make(map[string]int, topics)}
	for i := range topics {
		name := "failover-" + backend
		if topics > 1 {
			name += "-" + strconv.Itoa(i)
		}
		l.names = append(l.names, name)
		l.index[name] = i
	}
	return l
}

// total is the number of partitions over every topic.
func (l failoverTopics) total() int { return len(l.names) * l.per }

// locate returns the topic and partition of number n.
func (l failoverTopics) locate(n int) (string, int32) {
	return l.names[n/l.per], int32(n % l.per)
}

// number returns the number of topic's partition p, or -1 when it is not
// one of the series'.
func (l failoverTopics) number(topic string, p int32) int {
	i, ok := l.index[topic]
	if !ok || p < 0 || int(p) >= l.per {
		return -1
	}
	return i*l.per + int(p)
}

// name returns number n as Kafka's tools print a partition: topic-partition.
func (l failoverTopics) name(n int) string {
	t, p := l.locate(n)
	return t + "-" + strconv.Itoa(int(p))
}

// ledBy returns the numbers of the partitions that md says one of ids
// leads, in order, and each one's leader by number.
func (l failoverTopics) ledBy(md *cluster.Metadata, ids []int32) ([]int32, map[int32]int32) {
	var out []int32
	leaders := map[int32]int32{}
	for _, t := range l.names {
		for _, p := range md.Partitions[t] {
			if n := l.number(t, p.Partition); n >= 0 && slices.Contains(ids, p.Leader) {
				out = append(out, int32(n))
				leaders[int32(n)] = p.Leader
			}
		}
	}
	slices.Sort(out)
	return out, leaders
}

// zoneOf returns the brokers of c in the rack of broker id, by id, and
// that rack; it fails when the topics' partitions of md do not have one
// replica in each of failoverRacks, as the rack-aware placement gives
// them, since a zone's loss would then cost a partition more than one
// replica.
func zoneOf(c *cluster.Cluster, md *cluster.Metadata, topics []string, id int32) ([]int32, string, error) {
	racks := map[int32]string{}
	for _, b := range c.Brokers() {
		racks[b.ID] = b.Rack
	}
	rack := racks[id]
	if rack == "" {
		return nil, "", fmt.Errorf("case zone: broker %d has no rack", id)
	}
	for _, t := range topics {
		for _, p := range md.Partitions[t] {
			spanned := map[string]bool{}
			for _, r := range p.Replicas {
				spanned[racks[r]] = true
			}
			if len(spanned) != len(failoverRacks) || len(p.Replicas) != len(failoverRacks) {
				return nil, "", fmt.Errorf("case zone: partition %s-%d has replicas %v, want one in each of racks %s", t, p.Partition, p.Replicas, strings.Join(failoverRacks, ","))
			}
		}
	}
	var zone []int32
	for _, b := range c.Brokers() {
		if b.Rack == rack {
			zone = append(zone, b.ID)
		}
	}
	slices.Sort(zone)
	return zone, rack, nil
}

// failoverSession is one series' running state: its cluster, producer,
// acknowledgement tracker and per-broker Metadata clients.
type failoverSession struct {
	opts    *FailoverConfig
	series  *failoverSeries
	c       *cluster.Cluster
	topics  failoverTopics
	tracker *ackTracker
	// mdClients holds one client per broker, seeded with that broker only.
	mdClients map[int32]*kgo.Client
	// admin is a client of the whole cluster; producer writes the load.
	admin, producer *kgo.Client

	stopProducing chan struct{}
	producing     sync.WaitGroup
	stopped       bool
}

// runFailoverSeries measures one backend and partition count into s.
func runFailoverSeries(ctx context.Context, opts *FailoverConfig, self, dir string, servers *lab.CoordServers, s *failoverSeries, prog *progressLine) error {
	sess, err := startSeries(ctx, opts, self, dir, servers, s, prog, nil)
	if err != nil {
		return err
	}
	defer sess.close()

	var runErr error
cases:
	for _, kase := range opts.runCases {
		if _, kind := splitFailoverCase(kase); kind == "cut" && s.Backend == "raft" {
			prog.note(fmt.Sprintf("raft: case %s not run: the Raft transport is not proxied, so a cut broker keeps its session", kase))
			prog.done += opts.Runs
			continue
		}
		for run := 1; run <= opts.Runs; run++ {
			if err := ctx.Err(); err != nil {
				runErr = err
				break cases
			}
			r, err := sess.measureRun(ctx, kase, run, prog)
			if r != nil {
				s.Runs = append(s.Runs, r)
			}
			prog.runDone()
			if err != nil {
				runErr = fmt.Errorf("%s run %d: %w", kase, run, err)
				break cases
			}
		}
	}
	return errors.Join(runErr, sess.finish(ctx, prog))
}

// startSeries starts the cluster of series s on its backend, creates its
// topics, and starts the producer on them; it returns once every written
// partition has acknowledged an acks=all write. edit, if not nil, adjusts
// the cluster's configuration before it starts. The caller ends the load
// with finish and releases the cluster with close.
func startSeries(ctx context.Context, opts *FailoverConfig, self, dir string, servers *lab.CoordServers, s *failoverSeries, prog *progressLine, edit func(*cluster.Config)) (_ *failoverSession, err error) {
	name := fmt.Sprintf("tripod-failover-%d-%s-p%d", time.Now().UnixNano(), s.Backend, s.Partitions)
	prog.show(s, "", 0, "starting the cluster")
	cfg := cluster.DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Backend, cfg.Brokers = self, dir, s.Backend, opts.Brokers
	if s.Backend == "raft" {
		cfg.Voters = opts.Voters
	}
	cfg.SessionTimeout, cfg.Sets, cfg.LogLevel = opts.SessionTimeout, opts.Sets, opts.LogLevel
	cfg.GoMaxProcs = opts.BrokerGoMaxProcs
	if slices.Contains(opts.Cases, "zone") {
		cfg.Racks = failoverRacks
	}
	if slices.Contains(opts.Kinds, "cut") && s.Backend != "raft" {
		cfg.Proxies, cfg.CoordProxies = true, true
	}
	if err := servers.Configure(&cfg, opts.ZKConnect, opts.EtcdEndpoints, name); err != nil {
		return nil, err
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := cluster.Start(cfg)
	if err != nil {
		return nil, err
	}
	sess := &failoverSession{opts: opts, series: s, c: c, topics: newFailoverTopics(s.Backend, opts.Topics, s.Partitions),
		mdClients: map[int32]*kgo.Client{}, stopProducing: make(chan struct{})}
	defer func() {
		if err != nil {
			sess.close()
		}
	}()
	if err := c.WaitServing(ctx, time.Minute); err != nil {
		return nil, fmt.Errorf("cluster does not serve: %w", err)
	}
	s.Topic = sess.topics.names[0]
	if len(sess.topics.names) > 1 {
		s.Topics = sess.topics.names
	}
	s.ProducedPartitions = sess.produced()
	for _, b := range c.Brokers() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
		if err != nil {
			return nil, fmt.Errorf("metadata client for broker %d: %w", b.ID, err)
		}
		sess.mdClients[b.ID] = cl
	}

	prog.show(s, "", 0, "creating the topics")
	if sess.admin, err = kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...)); err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	createdAt := time.Now()
	minISR, err := createFailoverTopics(ctx, sess.admin, sess.topics.names, sess.topics.per)
	if err != nil {
		return nil, err
	}
	s.MinInsyncReplicas = minISR
	if minISR == 0 {
		prog.note(fmt.Sprintf("%s: the brokers reject topic config min.insync.replicas; topic %s was created without it", s.Backend, s.Topic))
	}
	for _, t := range sess.topics.names {
		if err := waitTopicLeaders(ctx, c.Bootstrap()[0], t, sess.topics.per); err != nil {
			return nil, err
		}
	}

	sess.tracker = newAckTracker(sess.topics, sess.produced())
	sess.producer, err = kgo.NewClient(
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1<<20),
		// Kafka's Java producer retries after retry.backoff.ms (100 ms) and
		// refreshes metadata as soon as a send fails; franz-go's defaults
		// (250 ms to 5 s backoff, 5 s metadata min age) would measure the
		// client rather than the cluster.
		kgo.RetryBackoffFn(func(int) time.Duration { return opts.ClientBackoff }),
		kgo.MetadataMinAge(opts.ClientBackoff),
		kgo.WithHooks(sess.tracker),
	)
	if err != nil {
		return nil, fmt.Errorf("producer client: %w", err)
	}
	sess.producing.Add(1)
	// The produce loop is owned by the session: it ends when
	// stopProducing is closed, or ctx ends, and stop waits for it.
	go func() {
		defer sess.producing.Done()
		sess.produce(ctx, sess.producer, sess.stopProducing)
	}()

	// The topic is ready once every partition's leader has acknowledged
	// an acks=all write.
	prog.show(s, "", 0, "waiting for every partition's first acknowledgement")
	err = cluster.WaitFor(ctx, opts.ISRTimeout, func() error {
		if p := sess.tracker.staleSince(createdAt); p >= 0 {
			return fmt.Errorf("partition %s has acknowledged nothing yet", sess.topics.name(p))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("topic %s not ready: %w", s.Topic, err)
	}
	s.TopicReadyMs = *msSince(sess.tracker.lastFirstAck(), createdAt)
	return sess, nil
}

// stop ends the produce loop and waits for it.
func (s *failoverSession) stop() {
	if !s.stopped {
		s.stopped = true
		close(s.stopProducing)
		s.producing.Wait()
	}
}

// finish ends the load, waits for every record sent to be acknowledged
// or failed, reads every partition back and counts the series' records,
// so that the comparison covers them all.
func (s *failoverSession) finish(ctx context.Context, prog *progressLine) error {
	s.stop()
	prog.show(s.series, "", 0, "waiting for the last acknowledgements")
	flushCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	ferr := s.producer.Flush(flushCtx)
	cancel()
	var err error
	if ferr != nil {
		err = fmt.Errorf("flush the producer: %w", ferr)
	}
	prog.show(s.series, "", 0, "reading every partition back")
	if verr := s.verify(ctx); verr != nil {
		err = errors.Join(err, verr)
	}
	s.tracker.fill(s.series)
	if s.series.Failed > 0 {
		prog.note(fmt.Sprintf("%s, %d partitions: %d records failed for good (first: %v)", s.series.Backend, s.series.Partitions, s.series.Failed, s.tracker.firstError()))
	}
	return err
}

// close stops the load, closes the clients and the cluster.
func (s *failoverSession) close() {
	if s.producer != nil {
		s.stop()
		s.producer.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	for _, cl := range s.mdClients {
		cl.Close()
	}
	s.c.Close()
}

// createFailoverTopics creates topics, each with partitions partitions,
// replication factor 3 and min.insync.replicas=2, in one CreateTopics,
// and returns the min.insync.replicas they have: 0 when the brokers reject
// that config and the topics were created without it.
func createFailoverTopics(ctx context.Context, cl *kgo.Client, topics []string, partitions int) (int, error) {
	create := func(configs map[string]string) error {
		var specs []createtopics.Topic
		for _, topic := range topics {
			specs = append(specs, createtopics.Topic{Name: topic, Partitions: int32(partitions), ReplicationFactor: lab.Brokers, Configs: configs})
		}
		req := createtopics.Request(time.Minute, specs...)
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("create topic %s: %w", topics[0], err)
		}
		var timedOut error
		for i, t := range resp.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); errors.Is(err, kerr.RequestTimedOut) {
				timedOut = fmt.Errorf("create topic %s: %w", t.Topic, err)
			} else if err := createtopics.TopicError(&resp.Topics[i]); err != nil {
				return err
			}
		}
		return timedOut
	}
	err := create(map[string]string{"min.insync.replicas": "2"})
	if err == nil || errors.Is(err, kerr.RequestTimedOut) {
		// A timed-out CreateTopics still created the topic, as in Kafka;
		// its leaders are waited for next.
		return 2, nil
	}
	if errors.Is(err, kerr.InvalidConfig) && strings.Contains(err.Error(), "min.insync.replicas") {
		return 0, create(nil)
	}
	return 0, err
}

// produced is how many partitions the producer writes: the first
// --produce-partitions, or all.
func (s *failoverSession) produced() int {
	if n := s.opts.ProducePartitions; n > 0 && n < s.topics.total() {
		return n
	}
	return s.topics.total()
}

// produce writes one record to every partition written (produced) each 1/rate seconds until
// stop is closed or ctx ends. Record values are the partition's next
// sequence number (8 bytes) and the partition (4 bytes).
func (s *failoverSession) produce(ctx context.Context, cl *kgo.Client, stop <-chan struct{}) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.opts.Rate))
	defer tick.Stop()
	for {
		for n := range s.produced() {
			seq := s.tracker.next(n)
			topic, p := s.topics.locate(n)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: encodeFailoverValue(int32(n), seq)}, s.tracker.done)
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// waitSteady waits until every broker runs and every live broker agrees
// on the controller and on each partition's leader, leader epoch and ISR,
// with every ISR full; it returns one broker's view, the baseline a kill
// is measured against.
func (s *failoverSession) waitSteady(ctx context.Context, timeout time.Duration) (*cluster.Metadata, error) {
	return lab.WaitSteady(ctx, s.c, s.topics.names, s.topics.per, timeout)
}

// pickVictim returns the broker to kill in kase: the controller, or (case
// leader, and zone, which kills its rack) the broker leading the most
// partitions, preferring one that is not the controller so that the
// cases measure different things.
func pickVictim(base *cluster.Metadata, topics []string, kase string) int32 {
	if kase == "controller" {
		return base.ControllerID
	}
	counts := map[int32]int{}
	for _, t := range topics {
		for id, n := range base.LeaderCounts(t) {
			counts[id] += n
		}
	}
	best, bestCount := int32(-1), -1
	for _, id := range base.Brokers {
		if id != base.ControllerID && counts[id] > bestCount {
			best, bestCount = id, counts[id]
		}
	}
	if bestCount <= 0 {
		return base.ControllerID // Only the controller leads anything.
	}
	return best
}

// measureRun waits for a steady cluster, kills one broker per kase (case
// zone: every broker of its rack at once) and measures the failover,
// then restarts the brokers and measures how long until every ISR is
// full again (their rejoin).
func (s *failoverSession) measureRun(ctx context.Context, kase string, run int, prog *progressLine) (*failoverRun, error) {
	prog.show(s.series, kase, run, "waiting for a steady cluster")
	base, err := s.waitSteady(ctx, s.opts.ISRTimeout)
	if err != nil {
		return nil, fmt.Errorf("cluster not steady before the kill (every broker live, every ISR full, all agreeing): %w", err)
	}
	// Every partition acknowledges a write after the cluster is steady, so
	// each has a last acknowledgement before the kill, and the producer has
	// no backlog: no more than half a second of records waits for its
	// acknowledgement (a new cluster's followers take a while to start
	// replicating every partition, and a kill then would measure that).
	steadyAt := time.Now()
	backlog := 1 + int(s.opts.Rate/2)
	err = cluster.WaitFor(ctx, s.opts.ISRTimeout, func() error {
		if p := s.tracker.staleSince(steadyAt); p >= 0 {
			return fmt.Errorf("partition %s has acknowledged nothing since the cluster was steady (producer failures: %d, first: %v)", s.topics.name(p), s.tracker.failedCount(), s.tracker.firstError())
		}
		if p := s.tracker.backlogged(backlog); p >= 0 {
			return fmt.Errorf("partition %s has more than %d records waiting for their acknowledgement", s.topics.name(p), backlog)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	broker, kind := splitFailoverCase(kase)
	victim := pickVictim(base, s.topics.names, broker)
	victims, rack := []int32{victim}, ""
	if broker == "zone" {
		if victims, rack, err = zoneOf(s.c, base, s.topics.names, victim); err != nil {
			return nil, err
		}
	}
	isVictim := func(id int32) bool { return slices.Contains(victims, id) }
	affected, oldLeaders := s.topics.ledBy(base, victims)
	r := &failoverRun{Case: kase, Run: run, Killed: victim, Controller: base.ControllerID, KilledWasController: isVictim(base.ControllerID)}
	if broker == "zone" {
		r.KilledBrokers, r.Rack = victims, rack
	}
	prog.show(s.series, kase, run, fmt.Sprintf("%s %s, leading %d partitions", kind, r.killedDescription(), len(affected)))
	var fails, recovers []func() error
	for _, id := range victims {
		fail, recover := failoverActions(s.c.Broker(id), kind)
		if fail == nil {
			return nil, fmt.Errorf("failure %s: broker %d has no proxies", kind, id)
		}
		fails, recovers = append(fails, fail), append(recovers, recover)
	}
	written := slices.DeleteFunc(slices.Clone(affected), func(p int32) bool { return int(p) >= s.produced() })
	cpuAtKill, cpuErr := hostcpu.Read()
	killAt := s.tracker.arm(victims, written)
	r.KilledAt = killAt
	// A zone's brokers fail together: one signal after the other, with
	// nothing in between.
	for _, fail := range fails {
		if err := fail(); err != nil {
			s.tracker.disarm()
			return r, err
		}
	}

	// Poll every live broker's Metadata until the controller has acted
	// and every affected partition names a new leader and acknowledged a
	// write from it, or the deadline passes. Once the polls have told
	// all they can (detection, membership, a new controller when the
	// old one was killed, every new leader), the loop only waits for the
	// acknowledgements: decoding the Metadata of every partition from
	// each live broker every PollInterval takes CPU the recovering
	// brokers need.
	var detectedAt, membershipAt, controllerAt time.Time
	visible := make(map[int32]time.Time, len(affected))
	visibleLeader := make(map[int32]int32, len(affected))
	polled := func() bool {
		return !detectedAt.IsZero() && !membershipAt.IsZero() && len(visible) == len(affected) &&
			(!r.KilledWasController || !controllerAt.IsZero())
	}
	deadline := killAt.Add(s.opts.RecoverTimeout)
	tick := time.NewTicker(s.opts.PollInterval)
	defer tick.Stop()
	for {
		for _, id := range base.Brokers {
			if isVictim(id) || polled() {
				continue
			}
			md, err := fastMetadata(ctx, s.mdClients[id], s.topics.names)
			if err != nil {
				continue // Counted as no news; the deadline bounds the wait.
			}
			seen := time.Now()
			if detectedAt.IsZero() {
				if signal := metadataChange(base, md, s.topics.names, isVictim); signal != "" {
					detectedAt, r.DetectionSignal = seen, fmt.Sprintf("broker %d: %s", id, signal)
				}
			}
			if membershipAt.IsZero() && !slices.ContainsFunc(md.Brokers, isVictim) {
				membershipAt = seen
			}
			if controllerAt.IsZero() && md.ControllerID >= 0 && md.ControllerID != base.ControllerID && !isVictim(md.ControllerID) {
				controllerAt = seen
			}
			for _, t := range s.topics.names {
				for _, p := range md.Partitions[t] {
					n := int32(s.topics.number(t, p.Partition))
					// oldLeaders holds the affected partitions: a set,
					// since a scan of affected for each of the others
					// cost tens of milliseconds a poll at 10 000.
					_, wasLed := oldLeaders[n]
					if _, ok := visible[n]; !ok && wasLed && p.Leader >= 0 && !isVictim(p.Leader) {
						visible[n] = seen
						visibleLeader[n] = p.Leader
					}
				}
			}
		}
		if !detectedAt.IsZero() && len(visible) == len(affected) && s.tracker.pending() == 0 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			s.tracker.disarm()
			return r, ctx.Err()
		case <-tick.C:
		}
	}
	acks := s.tracker.disarm()
	if cpuErr == nil {
		if cpu, err := hostcpu.Read(); err == nil {
			r.setMachineCPU(cpu.Since(cpuAtKill))
		}
	}

	r.DetectionMs = msSince(detectedAt, killAt)
	r.MembershipMs = msSince(membershipAt, killAt)
	r.NewControllerMs = msSince(controllerAt, killAt)
	var electionMax, visibleMax time.Time
	for _, p := range affected {
		if visible[p].After(visibleMax) {
			visibleMax = visible[p]
		}
		topic, partition := s.topics.locate(int(p))
		if int(p) >= s.produced() {
			// Not written to: recovered once a live broker names its new
			// leader.
			pf := partitionFailover{Topic: topic, Partition: partition, OldLeader: oldLeaders[p], NewLeader: -1, LeaderVisibleMs: msSince(visible[p], killAt)}
			if visible[p].IsZero() {
				r.Unrecovered = append(r.Unrecovered, s.topics.name(int(p)))
			} else {
				pf.NewLeader = visibleLeader[p]
			}
			r.Partitions = append(r.Partitions, pf)
			continue
		}
		a := acks[p]
		pf := partitionFailover{
			Topic:            topic,
			Partition:        partition,
			OldLeader:        oldLeaders[p],
			NewLeader:        -1,
			LeaderVisibleMs:  msSince(visible[p], killAt),
			LastAckBeforeMs:  msSince(a.lastBefore, killAt),
			ElectionMs:       msSince(a.firstAfter, killAt),
			UnavailabilityMs: nil,
		}
		if !a.firstAfter.IsZero() {
			pf.NewLeader = a.firstAfterNode
			if !a.lastBefore.IsZero() {
				pf.UnavailabilityMs = msSince(a.firstAfter, a.lastBefore)
			}
			if a.firstAfter.After(electionMax) {
				electionMax = a.firstAfter
			}
		} else {
			r.Unrecovered = append(r.Unrecovered, s.topics.name(int(p)))
		}
		r.Partitions = append(r.Partitions, pf)
	}
	if len(r.Unrecovered) == 0 {
		r.ElectionMaxMs = msSince(electionMax, killAt)
		r.LeadersVisibleMaxMs = msSince(visibleMax, killAt)
	}

	var errs []error
	if detectedAt.IsZero() {
		errs = append(errs, fmt.Errorf("no live broker showed a changed leader, leader epoch or ISR within %v of killing %s", s.opts.RecoverTimeout, r.killedDescription()))
	}
	if len(r.Unrecovered) > 0 {
		errs = append(errs, fmt.Errorf("%d of the %d partitions %s led acknowledged no write from a new leader (or, not written to, named none) within %v (e.g. partition %s)",
			len(r.Unrecovered), len(affected), r.killedDescription(), s.opts.RecoverTimeout, r.Unrecovered[0]))
	}
	if len(errs) > 0 {
		return r, errors.Join(errs...)
	}

	prog.show(s.series, kase, run, fmt.Sprintf("%s back (%s), waiting for full ISRs", r.killedDescription(), kind))
	restartAt := time.Now()
	for _, recover := range recovers {
		if err := recover(); err != nil {
			return r, err
		}
	}
	if _, err := s.waitSteady(ctx, s.opts.ISRTimeout); err != nil {
		return r, fmt.Errorf("%s restarted, but the ISRs are not full again: %w", r.killedDescription(), err)
	}
	r.RejoinMs = *msSince(time.Now(), restartAt)
	return r, nil
}

// failoverActions returns how a run fails broker b in the way kind
// names, and how it brings it back: crash is SIGKILL then a restart,
// pause SIGSTOP then SIGCONT, cut drops its Kafka and coordination
// proxies then heals them. fail is nil when kind needs proxies b lacks.
func failoverActions(b *cluster.Broker, kind string) (fail, recover func() error) {
	switch kind {
	case "pause":
		return b.Pause, b.Resume
	case "cut":
		if b.Proxy == nil || b.CoordProxy == nil {
			return nil, nil
		}
		return func() error { b.Proxy.Cut(); b.CoordProxy.Cut(); return nil },
			func() error { b.Proxy.Heal(); b.CoordProxy.Heal(); return nil }
	}
	return b.Kill, b.Start
}

// metadataChange describes the first partition of topics in md that shows
// the controller acting on the failure of the brokers isVictim names: a
// victim in the partition's ISR in base is out of it, or the partition
// lost its leader; it returns "" when none does. Other changes are not
// the failure's: a preferred-leader election that the controller
// (auto.leader.rebalance.enable) decided as the kill came moves leaders
// but keeps every replica in the ISR, and counted, it once set a
// detection at 465 ms, before any session could have ended.
func metadataChange(base, md *cluster.Metadata, topics []string, isVictim func(int32) bool) string {
	for _, topic := range topics {
		before := base.Partitions[topic]
		for _, p := range md.Partitions[topic] {
			if int(p.Partition) >= len(before) {
				continue
			}
			b := before[p.Partition]
			left := slices.ContainsFunc(b.ISR, func(id int32) bool { return isVictim(id) && !slices.Contains(p.ISR, id) })
			if left || (p.Leader < 0 && b.Leader >= 0) {
				return fmt.Sprintf("partition %s-%d leader %d epoch %d ISR %v, was leader %d epoch %d ISR %v",
					topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, b.Leader, b.LeaderEpoch, b.ISR)
			}
		}
	}
	return ""
}

// fastMetadata asks the seed broker of cl, and only it, for the metadata of
// topics. cl stays connected, so polling it costs one round trip.
func fastMetadata(ctx context.Context, cl *kgo.Client, topics []string) (*cluster.Metadata, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("metadata: client has no seed broker")
	}
	kresp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	md := &cluster.Metadata{From: -1, ControllerID: resp.ControllerID, Partitions: map[string][]cluster.Partition{}, TopicErrs: map[string]error{}}
	for _, b := range resp.Brokers {
		md.Brokers = append(md.Brokers, b.NodeID)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			md.TopicErrs[*t.Topic] = err
		}
		parts := make([]cluster.Partition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			parts = append(parts, cluster.Partition{Topic: *t.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR})
		}
		slices.SortFunc(parts, func(a, b cluster.Partition) int { return int(a.Partition - b.Partition) })
		md.Partitions[*t.Topic] = parts
	}
	return md, nil
}

// verify reads every partition from its start to its end offset and marks
// the records read, so that fill can count the acknowledged ones missing.
func (s *failoverSession) verify(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	seeds := s.c.Bootstrap()
	ends := make(map[int]int64, s.topics.total())
	offsets := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for _, topic := range s.topics.names {
		var topicEnds map[int32]int64
		err := cluster.WaitFor(ctx, time.Minute, func() error {
			var err error
			topicEnds, err = lab.ListEndOffsets(ctx, seeds, topic, s.topics.per)
			return err
		})
		if err != nil {
			return fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		offsets[topic] = map[int32]kgo.Offset{}
		for p, end := range topicEnds {
			offsets[topic][p] = kgo.NewOffset().AtStart()
			ends[s.topics.number(topic, p)] = end
			if end > 0 {
				remaining++
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(offsets),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return fmt.Errorf("consumer client: %w", err)
	}
	defer cl.Close()
	done := map[int]bool{}
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s back: %d partitions not read to their end offset: %w", s.series.Topic, remaining, ctx.Err())
		}
		fetches.EachError(func(_ string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			// Retriable errors (a leader moving) are retried by the client.
		})
		fetches.EachRecord(func(r *kgo.Record) {
			s.tracker.seen(r.Topic, r.Partition, r.Value)
			n := s.topics.number(r.Topic, r.Partition)
			if n >= 0 && !done[n] && r.Offset+1 >= ends[n] {
				done[n] = true
				remaining--
			}
		})
	}
	return nil
}

// progressLine is the one-line progress bar on stderr: runs done of all,
// and what the benchmark does now. Only the benchmark's goroutine uses it.
type progressLine struct {
	w     io.Writer
	total int
	done  int
	last  int
	line  string
}

// show redraws the line for series s, case kase, run (0: none) and stage.
func (p *progressLine) show(s *failoverSeries, kase string, run int, stage string) {
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = p.done * width / p.total
	}
	where := fmt.Sprintf("%s P=%d", s.Backend, s.Partitions)
	if kase != "" {
		where += " " + kase + " run " + strconv.Itoa(run)
	}
	p.line = fmt.Sprintf("[%s%s] %d/%d runs  %s: %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.done, p.total, where, stage)
	p.draw()
}

func (p *progressLine) draw() {
	pad := max(0, p.last-len(p.line))
	fmt.Fprintf(p.w, "\r%s%s", p.line, strings.Repeat(" ", pad))
	p.last = len(p.line)
}

// runDone counts one run as done.
func (p *progressLine) runDone() { p.done++ }

// note prints msg on a line of its own above the progress line.
func (p *progressLine) note(msg string) {
	fmt.Fprintf(p.w, "\r%s\r%s\n", strings.Repeat(" ", p.last), msg)
	p.last = 0
	if p.line != "" {
		p.draw()
	}
}

// end finishes the progress line.
func (p *progressLine) end() {
	fmt.Fprintf(p.w, "\r[%s] %d/%d runs  done%s\n", strings.Repeat("#", 24), p.done, p.total, strings.Repeat(" ", max(0, p.last-40)))
}
