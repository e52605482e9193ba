package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/tripodmq/tripod/broker"
	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/internal/gcfloor"
)

// serveOptions are the flags of `tripod serve`.
type serveOptions struct {
	brokerID   int32
	listen     string
	dataDir    string
	configFile string
	sets       []string
	logLevel   string

	coord          string
	zkConnect      string
	etcdEndpoints  string
	etcdPrefix     string
	raftListen     string
	raftVoters     string
	sessionTimeout time.Duration
	advertise      string

	// metricsListen is the HOST:PORT serving Prometheus metrics at
	// /metrics; empty serves none.
	metricsListen string
	// pprof also serves Go's runtime profiles (net/http/pprof) at
	// /debug/pprof/ on the metrics listener.
	pprof bool
	// consoleListen is the HOST:PORT serving the web console of the
	// broker's cluster (package console); empty serves none.
	consoleListen string
	// heapFloor is the smallest heap goal of the garbage collector, in
	// bytes (internal/gcfloor); 0 leaves Go's pacing alone.
	heapFloor int64
	// helpConfig lists the broker's properties instead of serving.
	helpConfig bool

	// warnings are the Kafka properties given that have no effect in
	// tripod, logged once the logger exists.
	warnings []string
}

// newServeCmd builds `tripod serve`: one broker serving the Kafka protocol.
// Settings come, by precedence, from flags given on the command line, then
// --set key=value, then the --config properties file, then the defaults.
// Coordination flags (--coord, --zk-connect, --etcd-endpoints,
// --raft-listen, --raft-voters, --session-timeout) choose the backend; with
// none the broker is a one-broker cluster on embedded Raft in its data
// directory. --metrics-listen serves the broker's Prometheus metrics.
func newServeCmd() *cobra.Command { return newServeCmdWith(&serveOptions{}) }

// newServeCmdWith builds `tripod serve` parsing its flags into opts.
func newServeCmdWith(opts *serveOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker serving the Kafka protocol",
		Long: `Run a broker serving the Kafka protocol.

Settings take Kafka's property names (broker.id, listeners, log.dirs,
num.partitions, log.segment.bytes, log.retention.ms, ...; named listeners
with listener.security.protocol.map, inter.broker.listener.name and the
ssl.* properties for TLS). They come, by
precedence, from the flags --broker-id, --listen and --data-dir when given,
then --set key=value, then the --config properties file, then the defaults.
The broker joins the cluster of its coordination backend (--coord raft,
zk or etcd; default: a one-broker cluster on embedded Raft in
<data-dir>/raft, listening on the Kafka port + 100). SIGTERM or SIGINT
closes the broker cleanly: a controlled shutdown moves its partition
leaderships to other brokers first (controlled.shutdown.enable).

With --metrics-listen HOST:PORT the broker serves its metrics in
Prometheus text format at http://HOST:PORT/metrics (port 0: a free port,
logged as "metrics listening"). With --pprof as well it serves Go's
runtime profiles there at /debug/pprof/ (CPU, heap, goroutines, execution
trace), for ` + "`go tool pprof`" + ` and ` + "`go tool trace`" + `.

With --console-listen HOST:PORT the broker also serves the web console of
its cluster at http://HOST:PORT/ (logged as "console listening"), asking
through the broker's first PLAINTEXT listener (a broker without one is
refused), and reading the controller epoch and the coordination service's
health from the broker's own backend (ZooKeeper, etcd or embedded Raft),
which no Kafka response carries; it stops with the broker. Off by
default: it has no login, so keep it on loopback, or run ` + "`tripod console`" + `
(with TLS and a login) instead.

--heap-floor (default 64 MiB) keeps the garbage collector from running
before the heap reaches that size: a broker's live heap is small and what
it allocates is mostly short-lived record buffers, so Go's default goal
(twice the live heap) would collect dozens of times a second. It is off
with --heap-floor 0 or when the GOGC environment variable is set.

--help-config lists every property with its default, whether it changes
on a running broker (dynamic), the values it may take and what it does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.helpConfig {
				return writePropertyHelp(cmd.OutOrStdout())
			}
			cfg, err := opts.config(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, cfg, opts, opts.warnings)
		},
	}
	f := cmd.Flags()
	f.Int32Var(&opts.brokerID, "broker-id", 1, "broker id (broker.id)")
	f.StringVar(&opts.listen, "listen", "127.0.0.1:9092", "HOST:PORT of the one PLAINTEXT listener (listeners=PLAINTEXT://HOST:PORT); named listeners: --set listeners=...")
	f.StringVar(&opts.dataDir, "data-dir", "./data", "directory holding the logs and the topic catalogue (log.dirs)")
	f.StringVar(&opts.configFile, "config", "", "Java properties file with Kafka property names (server.properties)")
	f.StringArrayVar(&opts.sets, "set", nil, "set a property, key=value (repeatable); overrides --config")
	f.StringVar(&opts.logLevel, "log-level", "info", "log level: trace, debug, info, warn or error")
	f.StringVar(&opts.coord, "coord", "raft", "coordination backend: raft, zk or etcd (coordination.backend)")
	f.StringVar(&opts.zkConnect, "zk-connect", "", "ZooKeeper connect string host:port[,host:port][/chroot] (zookeeper.connect)")
	f.StringVar(&opts.etcdEndpoints, "etcd-endpoints", "", "etcd client URLs, comma separated (etcd.endpoints)")
	f.StringVar(&opts.etcdPrefix, "etcd-prefix", "/tripod", "etcd key prefix of the cluster (etcd.prefix)")
	f.StringVar(&opts.raftListen, "raft-listen", "", "HOST:PORT of this broker's Raft transport (raft.listen); default: the Kafka host, port + 100")
	f.StringVar(&opts.raftVoters, "raft-voters", "", "Raft voters id@host:port,... (raft.voters); default: this broker alone")
	f.DurationVar(&opts.sessionTimeout, "session-timeout", 6*time.Second, "session timeout: the failure detection time (zookeeper.session.timeout.ms / etcd.lease.ttl.ms)")
	f.StringVar(&opts.advertise, "advertise", "", "HOST:PORT other brokers and clients are told, with one listener (advertised.listeners)")
	f.StringVar(&opts.metricsListen, "metrics-listen", "", "HOST:PORT serving Prometheus metrics at /metrics; empty: no metrics")
	f.BoolVar(&opts.pprof, "pprof", false, "also serve Go's runtime profiles at /debug/pprof/ on --metrics-listen")
	f.StringVar(&opts.consoleListen, "console-listen", "", "HOST:PORT serving the web console of the broker's cluster; empty: no console")
	f.Int64Var(&opts.heapFloor, "heap-floor", defaultHeapFloor, "smallest heap in bytes at which the garbage collector runs; 0, or GOGC set in the environment: Go's default pacing")
	f.BoolVar(&opts.helpConfig, "help-config", false, "list every property (--set key=value, --config) with its default and meaning, and exit")
	return cmd
}

// writePropertyHelp lists every broker property, for --help-config: its
// name and default, then what it does and the values it may take, from
// the broker's property table.
func writePropertyHelp(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, p := range config.PropertyDocs() {
		dynamic := ""
		if p.Dynamic {
			dynamic = " (dynamic)"
		}
		fmt.Fprintf(bw, "%s=%s%s\n    %s\n", p.Name, p.Default, dynamic, p.Documentation())
	}
	return bw.Flush()
}

// config assembles the broker configuration: defaults, then the file, then
// --set, then explicitly given flags; then validates it.
func (o *serveOptions) config(cmd *cobra.Command) (config.Config, error) {
	cfg := config.DefaultConfig()
	if o.configFile != "" {
		file, err := os.Open(o.configFile)
		if err != nil {
			return cfg, fmt.Errorf("open --config file: %w", err)
		}
		props, err := config.ParseProperties(file)
		file.Close()
		if err != nil {
			return cfg, fmt.Errorf("--config %s: %w", o.configFile, err)
		}
		for _, p := range props {
			if err := cfg.Set(p.Key, p.Value); errors.Is(err, config.ErrNoEffect) {
				o.warnings = append(o.warnings, fmt.Sprintf("--config %s line %d: %v", o.configFile, p.Line, err))
			} else if err != nil {
				return cfg, fmt.Errorf("--config %s line %d: %w", o.configFile, p.Line, err)
			}
		}
	}
	for _, kv := range o.sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return cfg, fmt.Errorf("--set %q: must be key=value", kv)
		}
		if err := cfg.Set(strings.TrimSpace(k), v); errors.Is(err, config.ErrNoEffect) {
			o.warnings = append(o.warnings, fmt.Sprintf("--set: %v", err))
		} else if err != nil {
			return cfg, fmt.Errorf("--set: %w", err)
		}
	}
	flags := cmd.Flags()
	if flags.Changed("broker-id") {
		if err := cfg.Set("broker.id", strconv.Itoa(int(o.brokerID))); err != nil {
			return cfg, err
		}
	}
	if flags.Changed("listen") {
		cfg.Listeners = "PLAINTEXT://" + o.listen
	}
	if flags.Changed("data-dir") {
		cfg.LogDirs = []string{o.dataDir}
	}
	props := []struct{ flag, key, value string }{
		{"coord", "coordination.backend", o.coord},
		{"zk-connect", "zookeeper.connect", o.zkConnect},
		{"etcd-endpoints", "etcd.endpoints", o.etcdEndpoints},
		{"etcd-prefix", "etcd.prefix", o.etcdPrefix},
		{"raft-listen", "raft.listen", o.raftListen},
		{"raft-voters", "raft.voters", o.raftVoters},
		{"session-timeout", "zookeeper.session.timeout.ms", strconv.FormatInt(o.sessionTimeout.Milliseconds(), 10)},
		{"advertise", "advertised.listeners", o.advertise},
	}
	for _, p := range props {
		if !flags.Changed(p.flag) {
			continue
		}
		if err := cfg.Set(p.key, p.value); err != nil {
			return cfg, fmt.Errorf("--%s: %w", p.flag, err)
		}
	}
	if o.heapFloor < 0 {
		return cfg, fmt.Errorf("--heap-floor %d: must be 0 (off) or a size in bytes", o.heapFloor)
	}
	if o.pprof && o.metricsListen == "" {
		return cfg, errors.New("--pprof: needs --metrics-listen, whose listener serves the profiles")
	}
	if o.metricsListen != "" {
		if err := checkHostPort(o.metricsListen); err != nil {
			return cfg, fmt.Errorf("--metrics-listen %q: %w", o.metricsListen, err)
		}
	}
	if o.consoleListen != "" {
		if err := checkHostPort(o.consoleListen); err != nil {
			return cfg, fmt.Errorf("--console-listen %q: %w", o.consoleListen, err)
		}
	}
	if hclog.LevelFromString(o.logLevel) == hclog.NoLevel {
		return cfg, fmt.Errorf("--log-level %q: must be trace, debug, info, warn or error", o.logLevel)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration: %w", err)
	}
	if o.consoleListen != "" {
		if _, err := consoleListener(cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// checkHostPort checks that addr is HOST:PORT with a port in 0..65535.
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be HOST:PORT: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q must be a number in 0..65535", port)
	}
	return nil
}

// defaultHeapFloor is --heap-floor's default: 64 MiB.
const defaultHeapFloor = 64 << 20

// runServe runs a broker until ctx is done, then closes it. With
// opts.metricsListen set it serves the broker's metrics at /metrics there
// (and, with opts.pprof, the runtime profiles at /debug/pprof/) until the
// broker has closed; with opts.heapFloor the garbage collector's heap goal
// is kept at least that large meanwhile, unless GOGC is set.
func runServe(ctx context.Context, cfg config.Config, opts *serveOptions, warnings []string) error {
	metricsListen, pprof := opts.metricsListen, opts.pprof
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "tripod",
		Level:  hclog.LevelFromString(opts.logLevel),
		Output: os.Stderr,
	})
	for _, w := range warnings {
		logger.Warn("property ignored", "reason", w)
	}
	if gogc, set := os.LookupEnv("GOGC"); set && opts.heapFloor > 0 {
		logger.Info("heap floor off: GOGC is set", "GOGC", gogc)
	} else if opts.heapFloor > 0 {
		floor := gcfloor.Start(uint64(opts.heapFloor))
		defer floor.Stop()
	}
	// The metrics listener is bound first, so a port in use fails before
	// the broker joins its cluster.
	var metricsLn net.Listener
	if metricsListen != "" {
		ln, err := net.Listen("tcp", metricsListen)
		if err != nil {
			return fmt.Errorf("listen on --metrics-listen %s: %w", metricsListen, err)
		}
		metricsLn = ln
	}
	// So is the console's.
	var consoleLn net.Listener
	if opts.consoleListen != "" {
		ln, err := net.Listen("tcp", opts.consoleListen)
		if err != nil {
			if metricsLn != nil {
				metricsLn.Close()
			}
			return fmt.Errorf("listen on --console-listen %s: %w", opts.consoleListen, err)
		}
		consoleLn = ln
	}
	b, err := broker.New(cfg, logger)
	if err != nil {
		for _, ln := range []net.Listener{metricsLn, consoleLn} {
			if ln != nil {
				ln.Close()
			}
		}
		return err
	}
	var stopMetrics func()
	if metricsLn != nil {
		stopMetrics = serveMetrics(metricsLn, b.MetricsHandler(), pprof, logger)
	}
	var con *runningConsole
	if consoleLn != nil {
		clog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		name, _ := consoleListener(cfg) // checked by serveOptions.config
		if con, err = consoleInBroker(consoleLn, b.ListenerAddr(name).String(), b.Coordination(), clog); err != nil {
			consoleLn.Close()
			if stopMetrics != nil {
				stopMetrics()
			}
			return errors.Join(fmt.Errorf("--console-listen: %w", err), b.Close())
		}
		logger.Info("console listening", "addr", consoleLn.Addr().String(), "url", con.url)
	}
	<-ctx.Done()
	logger.Info("shutting down")
	// The console first: it is a client of the broker.
	if con != nil {
		con.stop()
	}
	err = b.Close()
	if stopMetrics != nil {
		stopMetrics()
	}
	return err
}

// metricsShutdownTimeout bounds how long stopping the metrics server waits
// for scrapes in progress.
const metricsShutdownTimeout = 5 * time.Second

// serveMetrics serves handler at /metrics on ln, and with pprof the
// runtime profiles at /debug/pprof/, until the returned stop function is
// called; stop waits for the server to end.
func serveMetrics(ln net.Listener, handler http.Handler, pprof bool, logger hclog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	if pprof {
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
		logger.Info("runtime profiles served", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger.Named("metrics").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	logger.Info("metrics listening", "addr", ln.Addr().String(), "path", "/metrics")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server failed", "addr", ln.Addr().String(), "error", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		<-done
	}
}
