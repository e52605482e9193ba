// Package cluster runs a tripod cluster as real processes: N `tripod
// serve` brokers on loopback ports, coordinated by ZooKeeper (a chroot per
// cluster on a shared internal/zkserver), etcd (a prefix per cluster on a
// shared internal/etcdserver) or embedded Raft (the brokers are the
// voters). It owns the broker processes and the goroutines that wait for
// them; Close kills them all. It gives tests and `tripod dev` process
// control per broker (kill, stop, pause, resume, restart), reads Metadata
// from one chosen broker, can put a cuttable Proxy in front of every
// broker's Kafka listener (Config.Proxies), and reads what a broker holds
// on disk (Broker.ReadLog, Broker.CheckpointedHW).
//
// It must not be imported by anything but tests, test harnesses and the
// dev command.
package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/freeport"
)

// Backends lists the coordination backends a cluster can run on.
var Backends = []string{"zk", "etcd", "raft"}

// Config describes a cluster. DefaultConfig gives working values; Validate
// checks them.
type Config struct {
	// Binary is the tripod executable to run. Required.
	Binary string
	// Dir holds one directory per broker (data and log). Required.
	Dir string
	// Backend is "zk", "etcd" or "raft". Default "raft".
	Backend string
	// Brokers is the number of brokers, with ids 1..Brokers. Default 3;
	// 1..100.
	Brokers int
	// Voters is how many of the brokers (ids 1..Voters) vote in the
	// embedded Raft quorum; the others start with raft.voters naming
	// those and raft.listen their own address, and join it as
	// observers, as does a broker added by AddBroker. Raft only; ignored
	// on ZooKeeper and etcd, which keep their own quorums. Default 0:
	// every broker votes; else 1..Brokers.
	Voters int
	// SessionTimeout is every broker's --session-timeout, the failure
	// detection time. Default 2s; 1s..5m.
	SessionTimeout time.Duration
	// ZKConnect is the ZooKeeper connect string with the cluster's own
	// chroot ("host:port/chroot"). Required with Backend "zk".
	ZKConnect string
	// EtcdEndpoints are etcd's client URLs. Required with Backend "etcd".
	EtcdEndpoints []string
	// EtcdPrefix is the cluster's own key prefix in etcd. Default
	// "/tripod".
	EtcdPrefix string
	// Sets are extra broker properties, "key=value", passed as --set.
	Sets []string
	// Racks, when not empty, are the brokers' racks (broker.rack),
	// assigned round-robin: broker i (1-based) is in Racks[(i-1) %
	// len(Racks)], a broker added by AddBroker too. Each is a non-empty
	// string without control characters or commas. Default none: no
	// broker has a rack.
	Racks []string
	// Metrics, when true, makes every broker serve its Prometheus
	// metrics (--metrics-listen) on a free loopback port,
	// Broker.MetricsAddr, that Broker.Metric reads. Default false.
	Metrics bool
	// Pprof, with Metrics, makes every broker serve Go's runtime profiles
	// (--pprof) at http://MetricsAddr/debug/pprof/. Default false.
	Pprof bool
	// LogLevel is every broker's --log-level. Default "info".
	LogLevel string
	// Proxies, when true, puts a Proxy in front of every broker's Kafka
	// listener and makes the broker advertise the proxy's address
	// (--advertise), so that a test can cut one broker off the Kafka
	// network (Broker.Proxy.Cut) while its coordination session lives on.
	// Default false.
	Proxies bool
	// CoordProxies, when true (ZooKeeper and etcd only), gives every
	// broker its own Proxy to the coordination service
	// (Broker.CoordProxy), so that a test can cut a broker off the
	// network entirely (with Proxies) and its session expires. Raft's
	// transport is not proxied. Default false.
	CoordProxies bool
	// BasePort, when not zero, gives broker i (1-based) the Kafka port
	// BasePort+i-1 and the Raft port BasePort+100+i-1; zero picks free
	// loopback ports.
	BasePort int
	// ClientProxyBasePort, when not zero, puts every broker behind a
	// proxy that runs outside the cluster (toxiproxy), as Kafka clients'
	// own test clusters do: broker i gets a second PLAINTEXT listener,
	// CLIENT, on port BasePort+200+i-1 (Broker.ClientAddr), which it
	// advertises as 127.0.0.1:ClientProxyBasePort+i-1, the proxy's
	// address. The first listener, INTERNAL on Broker.Addr, stays the one
	// the brokers reach each other on and the cluster's own clients use,
	// so that cutting a proxy cuts clients off a broker but not its
	// replication. It needs BasePort, and neither Proxies nor ClientTLS.
	// Default 0.
	ClientProxyBasePort int
	// ClientTLS, when set, makes every broker's one listener an SSL
	// listener (listeners=SSL://..., also the inter-broker listener)
	// instead of PLAINTEXT, and is the TLS configuration with which the
	// cluster's own clients (Metadata, Request, WaitServing) reach them.
	// The brokers' keystore and truststore come in Sets. Default nil.
	ClientTLS *tls.Config
	// GoMaxProcs, when not zero, is every broker process's GOMAXPROCS (in
	// its environment, over any inherited): brokers sharing one machine
	// each take their share of its CPUs, as on machines of their own,
	// rather than every broker scheduling goroutines on every CPU. Zero
	// leaves Go's default (the CPUs the process may use) or an inherited
	// GOMAXPROCS. Default 0; 0..1024.
	GoMaxProcs int
}

// DefaultConfig returns a Config for a 3-broker Raft cluster with a 2 s
// session timeout; Binary and Dir must still be set.
func DefaultConfig() Config {
	return Config{
		Backend:        "raft",
		Brokers:        3,
		SessionTimeout: 2 * time.Second,
		EtcdPrefix:     "/tripod",
		LogLevel:       "info",
	}
}

// Validate checks every field and names the first bad one.
func (c *Config) Validate() error {
	if c.Binary == "" {
		return errors.New("cluster binary: required")
	}
	if c.Dir == "" {
		return errors.New("cluster dir: required")
	}
	if c.Brokers < 1 || c.Brokers > 100 {
		return fmt.Errorf("cluster brokers %d: must be between 1 and 100", c.Brokers)
	}
	if c.Voters < 0 || c.Voters > c.Brokers {
		return fmt.Errorf("cluster voters %d: must be between 1 and %d (the brokers), or 0 for every broker", c.Voters, c.Brokers)
	}
	if c.SessionTimeout < time.Second || c.SessionTimeout > 5*time.Minute {
		return fmt.Errorf("cluster session timeout %v: must be between 1s and 5m", c.SessionTimeout)
	}
	if c.GoMaxProcs < 0 || c.GoMaxProcs > 1024 {
		return fmt.Errorf("cluster GOMAXPROCS %d: must be between 0 and 1024", c.GoMaxProcs)
	}
	if c.BasePort < 0 || c.BasePort+200 > 65535 {
		return fmt.Errorf("cluster base port %d: must be 0 or between 1 and 65335", c.BasePort)
	}
	if c.ClientProxyBasePort != 0 {
		switch {
		case c.ClientProxyBasePort < 1 || c.ClientProxyBasePort+c.Brokers-1 > 65535:
			return fmt.Errorf("cluster client proxy base port %d: must be 0 or between 1 and %d", c.ClientProxyBasePort, 65536-c.Brokers)
		case c.BasePort == 0 || c.BasePort+300 > 65535:
			return fmt.Errorf("cluster client proxy base port %d: needs a base port between 1 and 65235, not %d", c.ClientProxyBasePort, c.BasePort)
		case c.Proxies:
			return fmt.Errorf("cluster client proxy base port %d: not with the cluster's own proxies", c.ClientProxyBasePort)
		case c.ClientTLS != nil:
			return fmt.Errorf("cluster client proxy base port %d: not with TLS", c.ClientProxyBasePort)
		}
	}
	for _, r := range c.Racks {
		if r == "" || strings.ContainsFunc(r, func(r rune) bool { return r == ',' || unicode.IsControl(r) }) {
			return fmt.Errorf("cluster racks %q: each must be a non-empty string without commas or control characters", c.Racks)
		}
	}
	switch c.Backend {
	case "zk":
		if c.ZKConnect == "" {
			return errors.New("cluster zk connect: required with backend zk")
		}
	case "etcd":
		if len(c.EtcdEndpoints) == 0 {
			return errors.New("cluster etcd endpoints: required with backend etcd")
		}
		if !strings.HasPrefix(c.EtcdPrefix, "/") {
			return fmt.Errorf("cluster etcd prefix %q: must start with /", c.EtcdPrefix)
		}
	case "raft":
	default:
		return fmt.Errorf("cluster backend %q: must be one of zk, etcd, raft", c.Backend)
	}
	return nil
}

// Cluster is a set of running broker processes. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg    Config
	closed atomic.Bool

	// mu guards brokers, which AddBroker grows.
	mu      sync.Mutex
	brokers []*Broker
}

// voterCount is how many brokers, from broker 1, start as voters of the
// Raft quorum (Config.Voters).
func (c *Config) voterCount() int {
	if c.Voters == 0 {
		return c.Brokers
	}
	return c.Voters
}

// Start starts every broker of cfg and returns without waiting for them
// to serve (see WaitServing). On error the brokers started are killed.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	kafkaPorts, raftPorts, err := c.ports()
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := 0; i < cfg.voterCount(); i++ {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, raftPorts[i]))
	}
	made, err := c.makeBrokers(0, kafkaPorts, raftPorts, voters)
	c.brokers = made
	if err != nil {
		c.Close()
		return nil, err
	}
	for _, b := range c.brokers {
		if err := b.Start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// makeBrokers makes, without starting them, the brokers of indexes
// from..len(kafkaPorts)-1 (ids from+1..), broker i at Kafka address
// kafkaPorts[i] and, on Raft, raftPorts[i], joining the quorum whose
// voters are "id@addr" each. On error it returns the brokers made so
// far, whose proxies the caller closes.
func (c *Cluster) makeBrokers(from int, kafkaPorts, raftPorts, voters []string) (made []*Broker, err error) {
	cfg := c.cfg
	for i := from; i < len(kafkaPorts); i++ {
		id := int32(i + 1)
		dir := filepath.Join(cfg.Dir, "broker-"+strconv.Itoa(i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return made, fmt.Errorf("cluster dir of broker %d: %w", id, err)
		}
		b := &Broker{
			ID:      id,
			Addr:    kafkaPorts[i],
			DataDir: filepath.Join(dir, "data"),
			LogPath: filepath.Join(dir, "tripod.log"),
			binary:  cfg.Binary,
		}
		if cfg.GoMaxProcs > 0 {
			b.env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cfg.GoMaxProcs))
		}
		listen := []string{"--listen", b.Addr}
		switch {
		case cfg.ClientTLS != nil:
			b.clientOpts = []kgo.Opt{kgo.DialTLSConfig(cfg.ClientTLS.Clone())}
			listen = []string{"--set", "listeners=SSL://" + b.Addr, "--set", "inter.broker.listener.name=SSL"}
		case cfg.ClientProxyBasePort != 0:
			b.ClientAddr = "127.0.0.1:" + strconv.Itoa(cfg.BasePort+200+i)
			proxied := "127.0.0.1:" + strconv.Itoa(cfg.ClientProxyBasePort+i)
			listen = []string{
				"--set", "listeners=INTERNAL://" + b.Addr + ",CLIENT://" + b.ClientAddr,
				"--set", "advertised.listeners=INTERNAL://" + b.Addr + ",CLIENT://" + proxied,
				"--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
				"--set", "inter.broker.listener.name=INTERNAL",
			}
		}
		b.args = append([]string{"serve",
			"--broker-id", strconv.Itoa(int(id))},
			listen...)
		b.args = append(b.args,
			"--data-dir", b.DataDir,
			"--coord", cfg.Backend,
			"--session-timeout", cfg.SessionTimeout.String(),
			"--log-level", cfg.LogLevel,
		)
		zkConnect, etcdEndpoints := cfg.ZKConnect, cfg.EtcdEndpoints
		if cfg.CoordProxies && cfg.Backend != "raft" {
			var err error
			if zkConnect, etcdEndpoints, err = b.proxyCoord(cfg); err != nil {
				return append(made, b), err
			}
		}
		switch cfg.Backend {
		case "zk":
			b.args = append(b.args, "--zk-connect", zkConnect)
		case "etcd":
			b.args = append(b.args, "--etcd-endpoints", strings.Join(etcdEndpoints, ","), "--etcd-prefix", cfg.EtcdPrefix)
		case "raft":
			b.RaftAddr = raftPorts[i]
			b.args = append(b.args, "--raft-listen", b.RaftAddr, "--raft-voters", strings.Join(voters, ","))
		}
		if len(cfg.Racks) > 0 {
			b.Rack = cfg.Racks[i%len(cfg.Racks)]
			b.args = append(b.args, "--set", "broker.rack="+b.Rack)
		}
		if cfg.Metrics {
			addrs, err := freeport.Addrs(1)
			if err != nil {
				return made, fmt.Errorf("metrics port of broker %d: %w", id, err)
			}
			b.MetricsAddr = addrs[0]
			b.args = append(b.args, "--metrics-listen", b.MetricsAddr)
			if cfg.Pprof {
				b.args = append(b.args, "--pprof")
			}
		}
		for _, kv := range cfg.Sets {
			b.args = append(b.args, "--set", kv)
		}
		made = append(made, b)
		if cfg.Proxies {
			proxy, err := NewProxy(b.Addr)
			if err != nil {
				return made, fmt.Errorf("proxy of broker %d: %w", id, err)
			}
			b.Proxy = proxy
			b.args = append(b.args, "--advertise", proxy.Addr)
		}
	}
	return made, nil
}

// ports returns the Kafka and Raft addresses of every broker.
func (c *Cluster) ports() (kafka, raft []string, err error) {
	n := c.cfg.Brokers
	if c.cfg.BasePort != 0 {
		for i := 0; i < n; i++ {
			kafka = append(kafka, "127.0.0.1:"+strconv.Itoa(c.cfg.BasePort+i))
			raft = append(raft, "127.0.0.1:"+strconv.Itoa(c.cfg.BasePort+100+i))
		}
		return kafka, raft, nil
	}
	addrs, err := FreeAddrs(2 * n)
	if err != nil {
		return nil, nil, err
	}
	return addrs[:n], addrs[n:], nil
}

// FreeAddrs returns n distinct free loopback addresses, host:port (see
// freeport.Addrs).
func FreeAddrs(n int) ([]string, error) { return freeport.Addrs(n) }

// Config returns the cluster's configuration.
func (c *Cluster) Config() Config { return c.cfg }

// Brokers returns every broker, running or not, by id order.
func (c *Cluster) Brokers() []*Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Broker(nil), c.brokers...)
}

// Broker returns the broker with id, or nil.
func (c *Cluster) Broker(id int32) *Broker {
	brokers := c.Brokers()
	if id < 1 || int(id) > len(brokers) {
		return nil
	}
	return brokers[id-1]
}

// Running returns the brokers whose process runs (paused ones included).
func (c *Cluster) Running() []*Broker {
	var out []*Broker
	for _, b := range c.Brokers() {
		if b.Running() {
			out = append(out, b)
		}
	}
	return out
}

// Live returns the brokers whose process runs and is not paused.
func (c *Cluster) Live() []*Broker {
	var out []*Broker
	for _, b := range c.Brokers() {
		if b.Running() && !b.Paused() {
			out = append(out, b)
		}
	}
	return out
}

// Bootstrap returns the Kafka addresses of every broker.
func (c *Cluster) Bootstrap() []string {
	brokers := c.Brokers()
	out := make([]string, len(brokers))
	for i, b := range brokers {
		out[i] = b.Addr
	}
	return out
}

// Close kills every broker, waits for them to exit and closes their
// proxies. Closing twice is a no-op.
func (c *Cluster) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	brokers := c.Brokers()
	var wg sync.WaitGroup
	errs := make([]error, len(brokers))
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.Kill()
		}()
	}
	wg.Wait()
	for _, b := range brokers {
		if b.CoordProxy != nil {
			errs = append(errs, b.CoordProxy.Close())
		}
		if b.Proxy != nil {
			errs = append(errs, b.Proxy.Close())
		}
	}
	return errors.Join(errs...)
}

// Stop stops every running broker with SIGTERM, all at once, and waits up
// to timeout for each.
func (c *Cluster) Stop(timeout time.Duration) error {
	brokers := c.Brokers()
	var wg sync.WaitGroup
	errs := make([]error, len(brokers))
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.Stop(timeout)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// proxyCoord starts b's CoordProxy to the coordination service's one
// server and returns the connect string and endpoints that reach it
// through the proxy.
func (b *Broker) proxyCoord(cfg Config) (zkConnect string, etcdEndpoints []string, err error) {
	var target, scheme, chroot string
	switch cfg.Backend {
	case "zk":
		hosts := cfg.ZKConnect
		if i := strings.Index(hosts, "/"); i >= 0 {
			hosts, chroot = hosts[:i], hosts[i:]
		}
		if strings.Contains(hosts, ",") {
			return "", nil, fmt.Errorf("coordination proxy of broker %d: ZooKeeper %q has several servers, want one", b.ID, cfg.ZKConnect)
		}
		target = hosts
	case "etcd":
		if len(cfg.EtcdEndpoints) != 1 {
			return "", nil, fmt.Errorf("coordination proxy of broker %d: %d etcd endpoints, want one", b.ID, len(cfg.EtcdEndpoints))
		}
		var ok bool
		if scheme, target, ok = strings.Cut(cfg.EtcdEndpoints[0], "://"); !ok {
			return "", nil, fmt.Errorf("coordination proxy of broker %d: etcd endpoint %q is not a URL", b.ID, cfg.EtcdEndpoints[0])
		}
	}
	proxy, err := NewProxy(target)
	if err != nil {
		return "", nil, fmt.Errorf("coordination proxy of broker %d: %w", b.ID, err)
	}
	b.CoordProxy = proxy
	if cfg.Backend == "zk" {
		return proxy.Addr + chroot, nil, nil
	}
	return "", []string{scheme + "://" + proxy.Addr}, nil
}
