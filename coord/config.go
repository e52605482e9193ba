package coord

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Config opens a Backend. DefaultConfig gives working values; Validate
// checks them. Fields a backend does not use are ignored by it.
type Config struct {
	// Backend names the coordination service: "raft", "zk" or "etcd".
	// Property coordination.backend, flag --coord. Default "raft".
	Backend string

	// BrokerID is the broker this process runs (broker.id). Raft uses it as
	// its server ID. Default 1.
	BrokerID BrokerID

	// SessionTimeout is how long a broker may go without renewing its
	// session before the service expires it, and so the failure detection
	// time of every backend: the ZooKeeper session timeout, the etcd lease
	// TTL (rounded up to whole seconds, as etcd grants them), the Raft
	// registration expiry. Flag --session-timeout. Default 6s; 1s..5m.
	SessionTimeout time.Duration

	// ZKConnect is the ZooKeeper connect string, "host:port,host:port/chroot"
	// (zookeeper.connect, flag --zk-connect). The chroot is created if
	// missing.
	ZKConnect string
	// ZKDigestUsername and ZKDigestPassword are the broker's ZooKeeper
	// digest credentials (zookeeper.digest.username,
	// zookeeper.digest.password), sent with "addauth digest" on every
	// connection before any other request. Both or neither. Default
	// empty: the connection is unauthenticated.
	ZKDigestUsername string
	ZKDigestPassword string
	// ZKSetACL gives every znode the backend creates Kafka's secure ACLs
	// (zookeeper.set.acl): ALL for the digest identity of
	// ZKDigestUsername, READ for everyone, except the SCRAM credentials
	// under /config/users, which only that identity may read. It needs
	// the digest credentials. Default false: world ALL, anyone who
	// reaches ZooKeeper may change the cluster's metadata.
	ZKSetACL bool

	// EtcdEndpoints are etcd client URLs (etcd.endpoints, flag
	// --etcd-endpoints), e.g. http://127.0.0.1:2379.
	EtcdEndpoints []string
	// EtcdTLS, when set, is the TLS configuration of the connections to
	// etcd (etcd.ssl.truststore.location, etcd.ssl.keystore.location): the
	// CAs that verify etcd's certificate and the client certificate
	// offered. The endpoints then use https://. Default nil: plaintext.
	EtcdTLS *tls.Config
	// EtcdUsername and EtcdPassword are the etcd user the backend
	// authenticates as when etcd's auth is enabled (etcd.username,
	// etcd.password). Both or neither. Default empty.
	EtcdUsername string
	EtcdPassword string
	// EtcdPrefix is prepended to every key, so several clusters can share
	// one etcd (etcd.prefix). Default "/tripod".
	EtcdPrefix string

	// RaftListen is the TCP address of this node's Raft transport
	// (raft.listen, flag --raft-listen). Default: this node's address in
	// RaftVoters. A broker not among RaftVoters (an observer) needs it,
	// with a host the voters can reach: it is the address the observer
	// gives the leader when it joins; port 0 picks a free port.
	RaftListen string
	// RaftVoters maps the voters of a new cluster to their Raft addresses
	// (raft.voters, flag --raft-voters "1@127.0.0.1:19192,2@..."). Empty
	// means a one-node cluster of BrokerID at RaftListen. A broker among
	// them starts the cluster with them (Raft's bootstrap); a broker not
	// among them joins it as an observer, through them, and becomes a
	// voter only by a quorum change (coord.Quorum). It is read on the
	// first start only, when RaftDir is empty: afterwards the quorum
	// recorded in RaftDir wins, and a node whose flags disagree with it
	// says so once, at WARN, and follows it.
	RaftVoters map[BrokerID]string
	// RaftServerTLS and RaftClientTLS, when set, make the Raft transport
	// (Raft RPCs and forward RPCs) mutual TLS (raft.ssl.keystore.location,
	// raft.ssl.truststore.location): RaftServerTLS serves accepted
	// connections and should require and verify a client certificate (the
	// transport refuses a peer without a verified chain either way);
	// RaftClientTLS dials peers, verifying their certificates and
	// presenting this node's. Both or neither. Default nil: plain TCP,
	// anyone who reaches the port may join, vote and replicate.
	RaftServerTLS *tls.Config
	RaftClientTLS *tls.Config
	// RaftDir holds the Raft log (raft-boltdb) and snapshots. Default
	// "<data-dir>/raft", set by the broker.
	RaftDir string
	// RaftHeartbeatTimeout, RaftElectionTimeout and RaftLeaderLeaseTimeout
	// are hashicorp/raft's timeouts (raft.heartbeat.timeout.ms,
	// raft.election.timeout.ms, raft.leader.lease.timeout.ms). Defaults
	// 500ms, 500ms, 400ms: half of hashicorp/raft's LAN defaults, so that a
	// crashed controller (the Raft leader) is replaced within the session
	// timeout plus about a second, as on ZooKeeper and etcd. The lease
	// stays close to the heartbeat timeout: a shorter one deposes healthy
	// leaders of a loaded machine in the middle of large commits.
	RaftHeartbeatTimeout   time.Duration
	RaftElectionTimeout    time.Duration
	RaftLeaderLeaseTimeout time.Duration
	// RaftSnapshotThreshold is how many log entries trigger a snapshot.
	// Default 8192.
	RaftSnapshotThreshold uint64

	// MetadataStandby makes a backend that campaigns keep a copy of the
	// metadata, so that the Load of the controller it may become reads
	// memory instead of the service, at the cost of applying every change
	// as it happens (etcd: a watch of the metadata keys; ZooKeeper: a
	// watch per metadata znode, each change read again; Raft ignores it,
	// its state machine being local already). Brokers set it; a tool or a
	// test that only campaigns need not.
	MetadataStandby bool

	// Logger receives the backend's logs. Default: a discarding logger.
	Logger hclog.Logger

	// Dialer, when set, makes every outbound connection to the
	// coordination service (ZooKeeper, etcd, Raft peers). Tests pass a
	// faultnet.Dialer to cut a backend off as a crash would.
	Dialer func(ctx context.Context, network, address string) (net.Conn, error)
	// Listen, when set, opens the Raft transport's listener.
	Listen func(network, address string) (net.Listener, error)
}

// DefaultConfig returns a Config with working defaults for a one-broker
// cluster on embedded Raft.
func DefaultConfig() Config {
	return Config{
		Backend:                "raft",
		BrokerID:               1,
		SessionTimeout:         6 * time.Second,
		EtcdPrefix:             "/tripod",
		RaftListen:             "127.0.0.1:9192",
		RaftHeartbeatTimeout:   500 * time.Millisecond,
		RaftElectionTimeout:    500 * time.Millisecond,
		RaftLeaderLeaseTimeout: 400 * time.Millisecond,
		RaftSnapshotThreshold:  8192,
	}
}

// Validate checks every field the chosen backend uses and names the key
// and the allowed values of the first bad one.
func (c *Config) Validate() error {
	if c.SessionTimeout < time.Second || c.SessionTimeout > 5*time.Minute {
		return fmt.Errorf("session timeout %v: must be between 1s and 5m", c.SessionTimeout)
	}
	if c.BrokerID < 0 {
		return fmt.Errorf("broker.id %d: must be >= 0", c.BrokerID)
	}
	switch c.Backend {
	case "zk":
		if c.ZKConnect == "" {
			return fmt.Errorf("zookeeper.connect: required with coordination.backend=zk (host:port[,host:port][/chroot])")
		}
		if (c.ZKDigestUsername == "") != (c.ZKDigestPassword == "") {
			return fmt.Errorf("zookeeper.digest.username / zookeeper.digest.password: set both or neither")
		}
		if strings.Contains(c.ZKDigestUsername, ":") {
			return fmt.Errorf("zookeeper.digest.username %q: must not contain ':'", c.ZKDigestUsername)
		}
		if c.ZKSetACL && c.ZKDigestUsername == "" {
			return fmt.Errorf("zookeeper.set.acl: true needs zookeeper.digest.username and zookeeper.digest.password")
		}
	case "etcd":
		if len(c.EtcdEndpoints) == 0 {
			return fmt.Errorf("etcd.endpoints: required with coordination.backend=etcd (http://host:port[,...])")
		}
		if !strings.HasPrefix(c.EtcdPrefix, "/") {
			return fmt.Errorf("etcd.prefix %q: must start with /", c.EtcdPrefix)
		}
		if (c.EtcdUsername == "") != (c.EtcdPassword == "") {
			return fmt.Errorf("etcd.username / etcd.password: set both or neither")
		}
		for _, e := range c.EtcdEndpoints {
			switch {
			case c.EtcdTLS == nil && strings.HasPrefix(e, "https://"):
				return fmt.Errorf("etcd.endpoints %q: https:// needs a TLS configuration (etcd.ssl.*)", e)
			case c.EtcdTLS != nil && strings.HasPrefix(e, "http://"):
				return fmt.Errorf("etcd.endpoints %q: with etcd.ssl.* set, endpoints must be https://", e)
			}
		}
	case "raft":
		if err := c.validateRaftMembers(); err != nil {
			return err
		}
		if (c.RaftServerTLS == nil) != (c.RaftClientTLS == nil) {
			return fmt.Errorf("raft.ssl.keystore.location / raft.ssl.truststore.location: set both or neither")
		}
		if c.RaftDir == "" {
			return fmt.Errorf("raft.dir: required with coordination.backend=raft")
		}
		if c.RaftHeartbeatTimeout < 5*time.Millisecond || c.RaftElectionTimeout < 5*time.Millisecond {
			return fmt.Errorf("raft.heartbeat.timeout.ms / raft.election.timeout.ms: must be >= 5")
		}
		if c.RaftLeaderLeaseTimeout > c.RaftHeartbeatTimeout {
			return fmt.Errorf("raft.leader.lease.timeout.ms %d: must be <= raft.heartbeat.timeout.ms %d",
				c.RaftLeaderLeaseTimeout.Milliseconds(), c.RaftHeartbeatTimeout.Milliseconds())
		}
	default:
		return fmt.Errorf("coordination.backend %q: must be one of raft, zk, etcd", c.Backend)
	}
	return nil
}

// validateRaftMembers checks raft.listen and raft.voters: a broker among
// the voters (or alone, with no voters) listens at its address; any
// other broker is an observer and needs a raft.listen the voters can
// reach, which is not a voter's.
func (c *Config) validateRaftMembers() error {
	if id, other, addr, ok := sharedRaftAddress(c.RaftVoters); ok {
		return fmt.Errorf("raft.voters %s: brokers %d and %d have the same address %s; each voter needs its own", FormatRaftVoters(c.RaftVoters), id, other, addr)
	}
	if _, voter := c.RaftVoters[c.BrokerID]; voter || len(c.RaftVoters) == 0 {
		if c.RaftListen == "" && !voter {
			return fmt.Errorf("raft.listen: required with coordination.backend=raft")
		}
		return nil
	}
	if c.RaftListen == "" {
		return fmt.Errorf("raft.listen: required for broker.id %d, which is not among raft.voters %s: it joins the quorum as an observer and gives the leader this address",
			c.BrokerID, FormatRaftVoters(c.RaftVoters))
	}
	host, _, err := net.SplitHostPort(c.RaftListen)
	if err != nil {
		return fmt.Errorf("raft.listen %q: want host:port: %v", c.RaftListen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("raft.listen %q: broker.id %d is not among raft.voters, so it gives the leader this address when it joins as an observer: it needs a host the voters can reach, not %q",
			c.RaftListen, c.BrokerID, host)
	}
	for id, addr := range c.RaftVoters {
		if addr == c.RaftListen {
			return fmt.Errorf("raft.listen %s: the address of voter %d in raft.voters, but broker.id is %d", c.RaftListen, id, c.BrokerID)
		}
	}
	return nil
}

// sharedRaftAddress finds two voters with the same address.
func sharedRaftAddress(voters map[BrokerID]string) (BrokerID, BrokerID, string, bool) {
	ids := make([]int, 0, len(voters))
	for id := range voters {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	seen := map[string]BrokerID{}
	for _, id := range ids {
		addr := voters[BrokerID(id)]
		if first, ok := seen[addr]; ok {
			return first, BrokerID(id), addr, true
		}
		seen[addr] = BrokerID(id)
	}
	return 0, 0, "", false
}

// LoneRaftVoter reports whether c is an embedded-Raft broker that its
// flags make the only voter of its cluster: raft.voters is empty, or
// names this broker alone (a lone `tripod serve`). A broker that is not
// among raft.voters is an observer, never lone.
func (c Config) LoneRaftVoter() bool {
	if c.Backend != "raft" {
		return false
	}
	switch len(c.RaftVoters) {
	case 0:
		return true
	case 1:
		_, self := c.RaftVoters[c.BrokerID]
		return self
	}
	return false
}

// ParseRaftVoters parses "1@127.0.0.1:19192,2@127.0.0.1:19193".
func ParseRaftVoters(s string) (map[BrokerID]string, error) {
	voters := map[BrokerID]string{}
	if strings.TrimSpace(s) == "" {
		return voters, nil
	}
	for _, part := range strings.Split(s, ",") {
		idStr, addr, ok := strings.Cut(strings.TrimSpace(part), "@")
		id, err := strconv.ParseInt(idStr, 10, 32)
		if !ok || err != nil || id < 0 || addr == "" {
			return nil, fmt.Errorf("raft.voters %q: want id@host:port[,id@host:port...]", s)
		}
		if _, dup := voters[BrokerID(id)]; dup {
			return nil, fmt.Errorf("raft.voters %q: broker %d listed twice", s, id)
		}
		voters[BrokerID(id)] = addr
	}
	return voters, nil
}

// FormatRaftVoters is the inverse of ParseRaftVoters.
func FormatRaftVoters(voters map[BrokerID]string) string {
	ids := make([]int, 0, len(voters))
	for id := range voters {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d@%s", id, voters[BrokerID(id)])
	}
	return strings.Join(parts, ",")
}

// Factory opens a Backend from a validated Config.
type Factory func(cfg Config) (Backend, error)

var (
	factoriesMu sync.Mutex
	factories   = map[string]Factory{}
)

// RegisterFactory makes a backend available to Open under name. Backends
// call it from init; importing coord/zk, coord/etcd or coord/raft registers
// them.
func RegisterFactory(name string, f Factory) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if _, dup := factories[name]; dup {
		panic("coord: backend registered twice: " + name)
	}
	factories[name] = f
}

// Open validates cfg and opens the backend it names.
func Open(cfg Config) (Backend, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	factoriesMu.Lock()
	f := factories[cfg.Backend]
	factoriesMu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("coordination.backend %q: not linked into this binary", cfg.Backend)
	}
	return f(cfg)
}
