package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/console"
	"github.com/tripodmq/tripod/coord"
)

// consoleOptions are the flags of `tripod console`.
type consoleOptions struct {
	listen    string
	bootstrap string
	security  clientSecurity
	// tlsCert and tlsKey are the PEM files of the console's own HTTPS
	// listener; both empty: plain HTTP.
	tlsCert, tlsKey string
	// loginUser and loginPasswordFile, when given, require HTTP basic
	// authentication on every route.
	loginUser, loginPasswordFile string
	refresh                      time.Duration
	// coord, zkConnect, etcdEndpoints and etcdPrefix name the cluster's
	// coordination service, which the console reads the controller epoch
	// from; coord empty: none.
	coord, zkConnect, etcdEndpoints, etcdPrefix string
}

// newConsoleCmd builds `tripod console`: the web console of a cluster,
// served by this process as a client of the cluster.
func newConsoleCmd() *cobra.Command {
	opts := &consoleOptions{}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console of a cluster: brokers, replicas' LEO and HW, the ISR and failovers, live",
		Long: `Serve a web console of the cluster --bootstrap reaches, at --listen
(default http://127.0.0.1:8080/). It is a Kafka client of the cluster,
with the security flags of the other commands (--tls, --tls-ca, --sasl-*),
so it shows what the cluster's ACLs let that principal see.

Pages: the brokers, controller, coordination backend and Raft quorum; the
topics, searchable; a topic's partitions with the AR, ISR and OSR and each
replica's log drawn up to its log end offset with the high watermark
across; a timeline of elections, ISR changes, brokers gone and failovers
as they happen; a message browser (by offset or time, either way, with a
substring filter) that also produces a test record; and consumer groups
with their members, committed offsets, lag over time and reset-offsets
(a dry run, then a confirmation). The live pages follow the cluster over
server-sent events, read every --refresh.

--tls-cert and --tls-key serve the console over HTTPS. --login-user and
--login-password-file require HTTP basic authentication (the password is
the file's first line) on every page, asset and stream. Without them,
anyone who reaches --listen sees the console: keep it on loopback.

No Kafka response carries the controller epoch or tells whether the
coordination service answers. With --coord zk --zk-connect (the brokers'
zookeeper.connect, chroot included) or --coord etcd --etcd-endpoints and
--etcd-prefix, the console also asks the service, at every --refresh, who
the controller is and its epoch, and shows the epoch, the service's health
and latency, and each election in the timeline. It only reads, and writes
nothing to etcd or ZooKeeper. On ZooKeeper it first checks that the chroot
holds a tripod cluster (its /brokers/ids) and refuses one that does not:
tripod's ZooKeeper backend creates, on its first read, whichever of the
chroot's base znodes (/brokers, /brokers/ids, /brokers/topics, /config,
/config/topics, /config/brokers, /config/changes) are missing, empty, as a
broker does at start; a cluster's brokers have created them all already.
Embedded Raft lives in the brokers: there, serve the console from a
broker (tripod serve --console-listen), which reads its own backend.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return opts.run(ctx, cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.listen, "listen", "127.0.0.1:8080", "HOST:PORT the console serves (port 0: a free port)")
	f.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	f.StringVar(&opts.tlsCert, "tls-cert", "", "PEM certificate (chain) of the console's HTTPS listener; with --tls-key")
	f.StringVar(&opts.tlsKey, "tls-key", "", "PEM private key of the console's HTTPS listener; with --tls-cert")
	f.StringVar(&opts.loginUser, "login-user", "", "require HTTP basic authentication as this user; with --login-password-file")
	f.StringVar(&opts.loginPasswordFile, "login-password-file", "", "a file whose first line is the login's password (- for standard input)")
	f.DurationVar(&opts.refresh, "refresh", console.DefaultRefresh, "how often the console reads the cluster's state")
	f.StringVar(&opts.coord, "coord", "", "coordination service to read the controller epoch from: zk or etcd; empty: none (raft: use tripod serve --console-listen)")
	f.StringVar(&opts.zkConnect, "zk-connect", "", "with --coord zk: ZooKeeper connect string HOST:PORT[,HOST:PORT][/chroot], the brokers' zookeeper.connect")
	f.StringVar(&opts.etcdEndpoints, "etcd-endpoints", "", "with --coord etcd: etcd client URLs, comma separated, the brokers' etcd.endpoints")
	f.StringVar(&opts.etcdPrefix, "etcd-prefix", "/tripod", "with --coord etcd: the cluster's etcd key prefix, the brokers' etcd.prefix")
	opts.security.addFlags(cmd)
	return cmd
}

// coordConfig checks the coordination flags and returns the config of the
// backend to open, or nil without --coord.
func (o *consoleOptions) coordConfig() (*coord.Config, error) {
	cfg := coord.DefaultConfig()
	cfg.Backend = o.coord
	switch o.coord {
	case "":
		switch {
		case o.zkConnect != "":
			return nil, errors.New("--zk-connect: needs --coord zk")
		case o.etcdEndpoints != "":
			return nil, errors.New("--etcd-endpoints: needs --coord etcd")
		}
		return nil, nil
	case "raft":
		return nil, errors.New("--coord raft: the Raft quorum is embedded in the brokers, a console cannot join it; serve the console from a broker with tripod serve --console-listen HOST:PORT, which reads the broker's own backend")
	case "zk":
		if o.zkConnect == "" {
			return nil, errors.New("--zk-connect: required with --coord zk (HOST:PORT[,HOST:PORT][/chroot], the brokers' zookeeper.connect)")
		}
		if o.etcdEndpoints != "" {
			return nil, errors.New("--etcd-endpoints: goes with --coord etcd, not zk")
		}
		hosts, _, _ := strings.Cut(o.zkConnect, "/")
		for _, h := range strings.Split(hosts, ",") {
			if err := checkHostPort(strings.TrimSpace(h)); err != nil {
				return nil, fmt.Errorf("--zk-connect %q: server %q: %w; want HOST:PORT[,HOST:PORT][/chroot]", o.zkConnect, h, err)
			}
		}
		cfg.ZKConnect = o.zkConnect
	case "etcd":
		if o.zkConnect != "" {
			return nil, errors.New("--zk-connect: goes with --coord zk, not etcd")
		}
		for _, e := range strings.Split(o.etcdEndpoints, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			if u, err := url.Parse(e); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, fmt.Errorf("--etcd-endpoints %q: endpoint %q: want a URL such as http://127.0.0.1:2379", o.etcdEndpoints, e)
			}
			cfg.EtcdEndpoints = append(cfg.EtcdEndpoints, e)
		}
		if len(cfg.EtcdEndpoints) == 0 {
			return nil, errors.New("--etcd-endpoints: required with --coord etcd (http://HOST:PORT[,...], the brokers' etcd.endpoints)")
		}
		if !strings.HasPrefix(o.etcdPrefix, "/") {
			return nil, fmt.Errorf("--etcd-prefix %q: want a key prefix starting with /, the brokers' etcd.prefix (default /tripod)", o.etcdPrefix)
		}
		cfg.EtcdPrefix = o.etcdPrefix
	default:
		return nil, fmt.Errorf("--coord %q: must be zk or etcd (raft: use tripod serve --console-listen)", o.coord)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--coord %s: %w", o.coord, err)
	}
	return &cfg, nil
}

// run serves the console until ctx ends.
func (o *consoleOptions) run(ctx context.Context, cmd *cobra.Command) error {
	if err := checkHostPort(o.listen); err != nil {
		return fmt.Errorf("--listen %q: %w", o.listen, err)
	}
	if o.refresh <= 0 {
		return fmt.Errorf("--refresh %v: must be a positive duration, such as 250ms", o.refresh)
	}
	seeds, err := splitBootstrap(o.bootstrap)
	if err != nil {
		return err
	}
	tlsCfg, err := consoleTLS(o.tlsCert, o.tlsKey)
	if err != nil {
		return err
	}
	login, err := consoleLoginOf(o.loginUser, o.loginPasswordFile)
	if err != nil {
		return err
	}
	sec, err := o.security.clientOpts()
	if err != nil {
		return err
	}
	ccfg, err := o.coordConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	copts := console.Options{
		Client:  append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...),
		Refresh: o.refresh,
		Logger:  logger,
	}
	// The console's own backend: opened here, closed after the console
	// stopped reading it.
	var backend coord.Backend
	if ccfg != nil && ccfg.Backend == "zk" {
		if err := zkHoldsCluster(ctx, ccfg.ZKConnect, ccfg.SessionTimeout); err != nil {
			ln.Close()
			return err
		}
	}
	if ccfg != nil {
		if backend, err = coord.Open(*ccfg); err != nil {
			ln.Close()
			return fmt.Errorf("--coord %s: %w", o.coord, err)
		}
		copts.Coordination = backend
	}
	rc, err := startConsoleServer(ln, copts, tlsCfg, login, logger)
	if err != nil {
		ln.Close()
		if backend != nil {
			backend.Close()
		}
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "tripod console of %s serving %s\n", o.bootstrap, rc.url)
	<-ctx.Done()
	rc.stop()
	if backend != nil {
		if err := backend.Close(); err != nil {
			return fmt.Errorf("close --coord %s: %w", o.coord, err)
		}
	}
	return nil
}

// zkHoldsCluster checks, in a session of its own that only reads, that
// connect's chroot holds a tripod cluster (its /brokers/ids znode). The zk
// backend's first read creates whichever of the chroot's base znodes are
// missing, as a broker does at start: past this check they all exist, so
// the console writes nothing, and a mistyped chroot is refused instead of
// created.
func zkHoldsCluster(ctx context.Context, connect string, timeout time.Duration) error {
	hosts, chroot, _ := strings.Cut(connect, "/")
	var servers []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			servers = append(servers, h)
		}
	}
	ids := "/" + strings.Trim(chroot, "/") + "/brokers/ids"
	ids = strings.Replace(ids, "//", "/", 1)
	conn, _, err := zk.Connect(servers, timeout, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return fmt.Errorf("--zk-connect %s: %w", connect, err)
	}
	type answer struct {
		exists bool
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		exists, _, err := conn.Exists(ids)
		done <- answer{exists, err}
	}()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var a answer
	select {
	case a = <-done:
		conn.Close()
	case <-rctx.Done():
		// Closing the connection ends the read, which the goroutine
		// then reports.
		conn.Close()
		<-done
		return fmt.Errorf("--zk-connect %s: ZooKeeper did not answer within %v", connect, timeout)
	}
	switch {
	case a.err != nil:
		return fmt.Errorf("--zk-connect %s: read %s: %w", connect, ids, a.err)
	case !a.exists:
		return fmt.Errorf("--zk-connect %s: no tripod cluster there (no %s); give the brokers' zookeeper.connect, chroot included, once they have started", connect, ids)
	}
	return nil
}

// quietZK drops go-zookeeper's log: zkHoldsCluster reports what matters.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// splitBootstrap splits --bootstrap's HOST:PORT list.
func splitBootstrap(bootstrap string) ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if err := checkHostPort(s); err != nil {
			return nil, fmt.Errorf("--bootstrap %q: %s: %w", bootstrap, s, err)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("--bootstrap %q: want HOST:PORT[,HOST:PORT]", bootstrap)
	}
	return seeds, nil
}

// consoleTLS loads the console listener's certificate and key, or
// returns nil (plain HTTP) when neither is given.
func consoleTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("--tls-cert and --tls-key: give both (the console's HTTPS certificate and its key) or neither")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// consoleLogin is the user and password HTTP basic authentication must
// present, as SHA-256 digests, so the comparison takes the same time
// whatever the lengths.
type consoleLogin struct {
	user, password [sha256.Size]byte
}

// consoleLoginOf reads the login flags: nil when neither is given.
func consoleLoginOf(user, passwordFile string) (*consoleLogin, error) {
	switch {
	case user == "" && passwordFile == "":
		return nil, nil
	case user == "":
		return nil, errors.New("--login-password-file: needs --login-user, the user to log in as")
	case passwordFile == "":
		return nil, errors.New("--login-user: needs --login-password-file, a file whose first line is the password")
	}
	password, err := secret("--login-password", "", passwordFile)
	if err != nil {
		return nil, err
	}
	return &consoleLogin{user: sha256.Sum256([]byte(user)), password: sha256.Sum256([]byte(password))}, nil
}

// require wraps next so that every request must log in.
func (l *consoleLogin) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
		// Both compared, always: the time says nothing of which failed.
		good := subtle.ConstantTimeCompare(u[:], l.user[:]) & subtle.ConstantTimeCompare(p[:], l.password[:])
		if !ok || good != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="tripod console", charset="UTF-8"`)
			http.Error(w, "log in to the tripod console", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// runningConsole is a console served on a listener.
type runningConsole struct {
	url  string
	con  *console.Server
	srv  *http.Server
	done chan struct{}
}

// consoleShutdownTimeout bounds how long stopping the console waits for
// requests in progress.
const consoleShutdownTimeout = 5 * time.Second

// startConsoleServer serves a console of opts on ln, over TLS with
// tlsCfg and behind login when they are not nil, until stop.
func startConsoleServer(ln net.Listener, opts console.Options, tlsCfg *tls.Config, login *consoleLogin, logger *slog.Logger) (*runningConsole, error) {
	con, err := console.New(opts)
	if err != nil {
		return nil, err
	}
	var handler http.Handler = con
	if login != nil {
		handler = login.require(handler)
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsCfg)
	}
	rc := &runningConsole{
		url: fmt.Sprintf("%s://%s/", scheme, ln.Addr()),
		con: con,
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(rc.done)
		if err := rc.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("console server failed", "addr", ln.Addr().String(), "error", err)
		}
	}()
	return rc, nil
}

// stop ends the console: its streams and poller first (they would keep
// Shutdown waiting), then the HTTP server, and waits for both.
func (rc *runningConsole) stop() {
	rc.con.Close()
	ctx, cancel := context.WithTimeout(context.Background(), consoleShutdownTimeout)
	defer cancel()
	if err := rc.srv.Shutdown(ctx); err != nil {
		rc.srv.Close()
	}
	<-rc.done
}

// consoleListener returns the name of the listener through which `tripod
// serve --console-listen`'s console asks the broker: its first PLAINTEXT
// one. The console in a broker has no credentials of its own; with TLS or
// SASL on every listener, `tripod console` with the security flags is the
// way.
func consoleListener(cfg config.Config) (string, error) {
	specs, _, err := cfg.ListenerSpecs()
	if err != nil {
		return "", err
	}
	for _, s := range specs {
		if s.Protocol == security.ProtocolPlaintext {
			return s.Name, nil
		}
	}
	return "", errors.New("--console-listen: the broker has no PLAINTEXT listener for its console to ask through; run `tripod console` with --tls and --sasl-* flags instead")
}

// consoleInBroker serves `tripod serve --console-listen`'s console: of
// the broker's cluster, asked through brokerAddr, its PLAINTEXT listener,
// and reading the controller epoch from the broker's own coordination
// backend (on every backend, embedded Raft included), which the console
// only reads: the broker closes it.
func consoleInBroker(ln net.Listener, brokerAddr string, backend console.Coordination, logger *slog.Logger) (*runningConsole, error) {
	return startConsoleServer(ln, console.Options{Client: []kgo.Opt{kgo.SeedBrokers(brokerAddr)}, Coordination: backend, Logger: logger}, nil, nil, logger)
}
