package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/console"
	"github.com/tripodmq/tripod/coord"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// devOptions are the flags of `tripod dev`.
type devOptions struct {
	brokers        int
	coord          string
	zkConnect      string
	etcdEndpoints  string
	etcdPrefix     string
	dataDir        string
	basePort       int
	proxyBasePort  int
	racks          string
	sessionTimeout time.Duration
	sets           []string
	logLevel       string
	tls            bool
	// pprof makes every broker serve its metrics and Go's runtime
	// profiles on a loopback port of its own.
	pprof bool
	// consoleListen is the HOST:PORT of the web console dev serves;
	// empty serves none.
	consoleListen string
	// voters is --voters, votersSet whether it was given.
	voters    int
	votersSet bool
}

// newDevCmd builds `tripod dev`: a local cluster of broker processes for
// trying tripod out, with the coordination service it needs.
func newDevCmd() *cobra.Command {
	opts := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of N broker processes until Ctrl-C",
		Long: `Run a local cluster of N broker processes, each a ` + "`tripod serve`" + ` of this
binary, on 127.0.0.1 ports from --base-port (Kafka) and --base-port+100
(Raft). With --coord zk and no --zk-connect a local ZooKeeper runs from
Debian's zookeeper package; with --coord etcd and no --etcd-endpoints an
embedded etcd runs in this process. It prints the bootstrap servers and,
per broker, its PID and how to stop or crash it; Ctrl-C stops everything.
With --console-listen HOST:PORT it also serves the web console of the
cluster (as ` + "`tripod console`" + ` does) and prints its URL: kill a broker and
watch the new leaders and the shrunk ISR appear.

With --racks az1,az2,az3 broker N is in rack (broker.rack) N-1 modulo
the racks' count, round-robin, and its line says so.

With --tls it makes a throwaway CA, a certificate the brokers present and
a client certificate (PEM files in the data dir's tls/), serves every
listener as SSL (the brokers reach each other over it too), and prints
the settings with which kcat, franz-go, Java clients and tripod's own
commands connect.

On raft, brokers 1..--voters (default: up to 3) vote in the quorum that
holds the cluster's metadata; the others join it as observers, which
` + "`tripod quorum add-voter`" + ` can promote.

With --client-proxy-base-port P the cluster sits behind proxies you run
(toxiproxy), as Kafka clients' own test clusters do: broker N gets a
second listener, CLIENT, on base-port+200+N-1 and tells clients it is at
127.0.0.1:P+N-1, where its proxy listens and forwards to CLIENT. The
brokers reach each other on their first listener, past the proxies, so
cutting a proxy cuts clients off a broker and not its replication.

With --pprof every broker serves its Prometheus metrics and Go's runtime
profiles (CPU, heap, allocations, goroutines, execution trace) on a free
loopback port, and dev prints each broker's URLs: profile the brokers
while your own client loads them, with go tool pprof or go tool trace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			opts.votersSet = cmd.Flags().Changed("voters")
			return runDev(ctx, opts, &lockedWriter{w: cmd.OutOrStdout()})
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.brokers, "brokers", 3, "number of brokers (ids 1..N)")
	f.StringVar(&opts.coord, "coord", "raft", "coordination backend: raft, zk or etcd")
	f.IntVar(&opts.voters, "voters", 0, "raft: brokers 1..V vote in the Raft quorum, the others observe (default min(--brokers, 3))")
	f.StringVar(&opts.zkConnect, "zk-connect", "", "ZooKeeper connect string host:port[,host:port][/chroot]; empty: run a local ZooKeeper")
	f.StringVar(&opts.etcdEndpoints, "etcd-endpoints", "", "etcd client URLs, comma separated; empty: run an embedded etcd")
	f.StringVar(&opts.etcdPrefix, "etcd-prefix", "/tripod", "etcd key prefix of the cluster")
	f.StringVar(&opts.dataDir, "data-dir", "", "directory for the brokers' data and logs (kept); empty: a temporary directory removed at exit")
	f.IntVar(&opts.basePort, "base-port", 19092, "Kafka port of broker 1; broker N listens on base-port+N-1, its Raft on base-port+100+N-1")
	f.IntVar(&opts.proxyBasePort, "client-proxy-base-port", 0, "advertise broker N to clients at 127.0.0.1:PORT+N-1, a proxy forwarding to its CLIENT listener on base-port+200+N-1; 0: no proxies")
	f.DurationVar(&opts.sessionTimeout, "session-timeout", 6*time.Second, "every broker's session timeout (failure detection time)")
	f.StringVar(&opts.racks, "racks", "", "comma-separated racks (broker.rack) assigned to brokers 1..N round-robin; empty: no racks")
	f.StringArrayVar(&opts.sets, "set", nil, "broker property key=value for every broker (repeatable)")
	f.StringVar(&opts.logLevel, "log-level", "info", "brokers' log level: trace, debug, info, warn or error")
	f.BoolVar(&opts.tls, "tls", false, "serve SSL listeners with a throwaway CA and certificates, and print the clients' settings")
	f.BoolVar(&opts.pprof, "pprof", false, "every broker serves its metrics (/metrics) and Go's runtime profiles (/debug/pprof/) on a free loopback port, printed per broker")
	f.StringVar(&opts.consoleListen, "console-listen", "", "HOST:PORT serving the web console of the cluster from this process (as `tripod console`); empty: no console")
	return cmd
}

// devRacks parses --racks, comma-separated broker.rack values, each
// non-empty and without control characters (which broker.rack refuses).
func devRacks(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var racks []string
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" || strings.ContainsFunc(r, unicode.IsControl) {
			return nil, fmt.Errorf("--racks %q: must be racks separated by commas, each non-empty and without control characters", s)
		}
		racks = append(racks, r)
	}
	return racks, nil
}

// runDev runs the cluster until ctx is done, then stops the brokers (a
// controlled shutdown each) and the servers it started.
func runDev(ctx context.Context, opts *devOptions, out io.Writer) (err error) {
	if opts.brokers < 1 || opts.brokers > 100 {
		return fmt.Errorf("--brokers %d: must be between 1 and 100", opts.brokers)
	}
	voters, err := devVoters(opts)
	if err != nil {
		return err
	}
	racks, err := devRacks(opts.racks)
	if err != nil {
		return err
	}
	// The console's port is taken first, so a port in use fails before
	// any broker starts.
	var consoleLn net.Listener
	if opts.consoleListen != "" {
		if err := checkHostPort(opts.consoleListen); err != nil {
			return fmt.Errorf("--console-listen %q: %w", opts.consoleListen, err)
		}
		if consoleLn, err = net.Listen("tcp", opts.consoleListen); err != nil {
			return fmt.Errorf("listen on --console-listen %s: %w", opts.consoleListen, err)
		}
		defer consoleLn.Close()
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to run brokers: %w", err)
	}
	dir := opts.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tripod-dev-"); err != nil {
			return fmt.Errorf("temporary data dir: %w", err)
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}

	cfg := cluster.DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Backend, cfg.Brokers = self, dir, opts.coord, opts.brokers
	cfg.BasePort, cfg.SessionTimeout, cfg.Sets, cfg.LogLevel = opts.basePort, opts.sessionTimeout, opts.sets, opts.logLevel
	cfg.Voters, cfg.Racks = voters, racks
	cfg.ClientProxyBasePort = opts.proxyBasePort
	cfg.Metrics, cfg.Pprof = opts.pprof, opts.pprof
	if opts.proxyBasePort != 0 && opts.tls {
		return errors.New("--client-proxy-base-port: not with --tls")
	}
	if opts.brokers < 3 {
		// A dev cluster never has more brokers than it starts with:
		// __consumer_offsets and __transaction_state get one replica
		// per broker, as Kafka's single-node configs set them (the
		// latter's min ISR is capped by its replication factor). A
		// --set of its own still wins.
		cfg.Sets = append([]string{fmt.Sprintf("offsets.topic.replication.factor=%d", opts.brokers),
			fmt.Sprintf("transaction.state.log.replication.factor=%d", opts.brokers)}, cfg.Sets...)
	}
	var pki *devTLS
	if opts.tls {
		if pki, err = makeDevTLS(filepath.Join(dir, "tls")); err != nil {
			return fmt.Errorf("--tls: %w", err)
		}
		cfg.Sets = append(pki.brokerSets(), cfg.Sets...)
		cfg.ClientTLS = pki.ClientConfig
	}
	switch opts.coord {
	case "zk":
		cfg.ZKConnect = opts.zkConnect
		if cfg.ZKConnect == "" {
			zk, err := zkserver.Start(filepath.Join(dir, "zookeeper"), zkserver.DefaultConfig())
			if err != nil {
				return fmt.Errorf("start a local zookeeper (Debian package zookeeper): %w", err)
			}
			defer zk.Close()
			cfg.ZKConnect = zk.Addr() + "/tripod"
			fmt.Fprintf(out, "zookeeper: %s (log %s)\n", zk.Addr(), filepath.Join(dir, "zookeeper"))
		}
	case "etcd":
		cfg.EtcdPrefix = opts.etcdPrefix
		if opts.etcdEndpoints != "" {
			cfg.EtcdEndpoints = strings.Split(opts.etcdEndpoints, ",")
		} else {
			etcd, err := etcdserver.Start(filepath.Join(dir, "etcd"))
			if err != nil {
				return fmt.Errorf("start an embedded etcd: %w", err)
			}
			defer etcd.Close()
			cfg.EtcdEndpoints = etcd.Endpoints()
			fmt.Fprintf(out, "etcd: %s (embedded in this process)\n", strings.Join(cfg.EtcdEndpoints, ","))
		}
	}
	c, err := cluster.Start(cfg)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "stopping the brokers")
		if serr := c.Stop(30 * time.Second); serr != nil {
			fmt.Fprintf(out, "stop: %v\n", serr)
		}
		c.Close()
	}()

	fmt.Fprintf(out, "tripod dev: %d brokers on %s, data in %s\n", opts.brokers, opts.coord, dir)
	if opts.coord == "raft" {
		fmt.Fprintln(out, quorumLine(opts.brokers, voters))
	} else if opts.votersSet {
		fmt.Fprintf(out, "note: --voters is ignored with --coord %s, which keeps its own quorum\n", opts.coord)
	}
	fmt.Fprintf(out, "bootstrap servers: %s\n", strings.Join(c.Bootstrap(), ","))
	if pki != nil {
		pki.printClientSettings(out, self, c.Bootstrap()[0])
	}
	for _, b := range c.Brokers() {
		pid := b.PID()
		rack := ""
		if b.Rack != "" {
			rack = " rack " + b.Rack
		}
		fmt.Fprintf(out, "broker %d: %s%s pid %d log %s; stop: kill -TERM %d; crash: kill -KILL %d\n",
			b.ID, b.Addr, rack, pid, b.LogPath, pid, pid)
		if b.ClientAddr != "" {
			fmt.Fprintf(out, "broker %d: clients at 127.0.0.1:%d, a proxy to its CLIENT listener %s\n",
				b.ID, opts.proxyBasePort+int(b.ID)-1, b.ClientAddr)
		}
		if b.MetricsAddr != "" {
			fmt.Fprintf(out, "broker %d: metrics http://%s/metrics, profiles http://%s/debug/pprof/\n", b.ID, b.MetricsAddr, b.MetricsAddr)
		}
	}
	if err := c.WaitServing(ctx, time.Minute); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cluster does not serve (see the brokers' logs): %w", err)
	}
	if md, err := c.Metadata(ctx, c.Brokers()[0].ID); err == nil {
		fmt.Fprintf(out, "cluster ready: controller is broker %d\n", md.ControllerID)
	}
	try := fmt.Sprintf("try: %s topics create demo --partitions 6 --replication-factor %d --bootstrap %s",
		self, min(3, opts.brokers), c.Bootstrap()[0])
	if pki != nil {
		try += " --tls-ca " + pki.CA
	}
	fmt.Fprintln(out, try)
	if consoleLn != nil {
		stopConsole, url, err := devConsole(consoleLn, c, cfg)
		if err != nil {
			return fmt.Errorf("--console-listen: %w", err)
		}
		// The console stops before the brokers: it is their client.
		defer stopConsole()
		fmt.Fprintf(out, "console: %s\n", url)
	}
	fmt.Fprintln(out, "Ctrl-C stops everything.")

	// One watcher per broker reports its exit; each ends when its broker
	// exits or the cluster stops, and runDev waits for them.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, b := range c.Brokers() {
		exited := b.Exited()
		if exited == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-exited:
				fmt.Fprintf(out, "broker %d exited (restart it with: %s %s)\n", b.ID, self, strings.Join(b.Args(), " "))
			case <-watchCtx.Done():
			}
		}()
	}
	<-ctx.Done()
	stopWatch()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// devConsole serves the web console of c on ln, as `tripod console`
// would, with the clients' TLS settings of a --tls cluster and, on
// ZooKeeper and etcd, the cluster's coordination service to read the
// controller epoch from (on Raft it lives in the brokers). stop ends the
// console and closes that service's client.
func devConsole(ln net.Listener, c *cluster.Cluster, cfg cluster.Config) (stop func(), url string, err error) {
	opts := console.Options{Client: []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}}
	if cfg.ClientTLS != nil {
		opts.Client = append(opts.Client, kgo.DialTLSConfig(cfg.ClientTLS))
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var backend coord.Backend
	if cfg.Backend == "zk" || cfg.Backend == "etcd" {
		cc := coord.DefaultConfig()
		cc.Backend, cc.ZKConnect, cc.EtcdEndpoints = cfg.Backend, cfg.ZKConnect, cfg.EtcdEndpoints
		if cfg.EtcdPrefix != "" {
			cc.EtcdPrefix = cfg.EtcdPrefix
		}
		if backend, err = coord.Open(cc); err != nil {
			return nil, "", fmt.Errorf("open the cluster's %s for the console: %w", cfg.Backend, err)
		}
		opts.Coordination = backend
	}
	rc, err := startConsoleServer(ln, opts, nil, nil, opts.Logger)
	if err != nil {
		if backend != nil {
			backend.Close()
		}
		return nil, "", err
	}
	return func() {
		rc.stop()
		if backend != nil {
			backend.Close()
		}
	}, rc.url, nil
}

// devVoters returns how many brokers, from broker 1, vote in the Raft
// quorum: --voters, 1..--brokers, or up to 3 when not given (a quorum
// of 3 outlives one broker; more voters slow every metadata commit).
// On ZooKeeper and etcd it is 0: they keep their own quorums.
func devVoters(opts *devOptions) (int, error) {
	if opts.coord != "raft" {
		return 0, nil
	}
	if !opts.votersSet {
		return min(opts.brokers, 3), nil
	}
	if opts.voters < 1 || opts.voters > opts.brokers {
		return 0, fmt.Errorf("--voters %d: must be between 1 and %d (--brokers)", opts.voters, opts.brokers)
	}
	return opts.voters, nil
}

// quorumLine says which of brokers 1..brokers vote in the Raft quorum
// (1..voters) and which observe.
func quorumLine(brokers, voters int) string {
	// brokersDo is "broker 4 observes" or "brokers 4,5 observe".
	brokersDo := func(from, to int, verb string) string {
		if from == to {
			return "broker " + strconv.Itoa(from) + " " + verb + "s"
		}
		var ids []string
		for id := from; id <= to; id++ {
			ids = append(ids, strconv.Itoa(id))
		}
		return "brokers " + strings.Join(ids, ",") + " " + verb
	}
	line := "raft quorum: " + brokersDo(1, voters, "vote")
	if voters < brokers {
		line += "; " + brokersDo(voters+1, brokers, "observe") + " (tripod quorum add-voter promotes one)"
	}
	return line
}

// lockedWriter serialises writes from the broker watchers and runDev.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
