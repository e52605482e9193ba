// Package etcd is tripod's coordination backend on etcd v3
// (go.etcd.io/etcd/client/v3). Brokers register under a lease that the
// backend keeps alive, the controller holds an election key bound to its
// broker's lease, and the metadata lives in plain keys written by fenced
// transactions. Every key is under Config.EtcdPrefix, so several clusters
// can share one etcd:
//
//	<prefix>/brokers/ids/<id>        coord.Broker JSON, bound to the broker's lease
//	<prefix>/controller              {"version":1,"brokerid":N}, bound to the lease
//	<prefix>/topics/<topic>          coord.Topic JSON
//	<prefix>/partitions/<topic>/<p>  partition state JSON (Kafka's znode layout)
//	<prefix>/latest_producer_id_block the last producer id block reserved (Kafka's JSON)
//	<prefix>/producer_id_key         the cluster's producer id key, its bytes
//	<prefix>/migration               the migration record, coord.Migration JSON (migration.go)
//
// Broker epochs and controller epochs are the create revisions of their keys
// (strictly increasing in one etcd), a partition epoch is its key's etcd
// Version − 1, and Metadata.Version is an etcd revision. A backend that a
// migration imported into (its record has coord.EpochBases) reports each of
// them raised by its base and takes them back lowered by it; the stored
// keys hold etcd's own values. The package owns
// its client, every lease keep-alive loop and every watch goroutine; Close
// waits for all of them. It must not import broker or replication.
package etcd

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

func init() {
	coord.RegisterFactory("etcd", func(cfg coord.Config) (coord.Backend, error) { return Open(cfg) })
}

// dialTimeout bounds one connection attempt to an etcd endpoint.
const dialTimeout = 2 * time.Second

// Backend is the etcd coord.Backend of one broker process.
type Backend struct {
	cfg    coord.Config
	log    hclog.Logger
	client *clientv3.Client
	prefix string // EtcdPrefix without a trailing slash
	ttl    int64  // lease TTL in seconds

	// life is cancelled by Close; every goroutine the backend starts ends
	// with it. It is the backend's lifetime, not a request context.
	life     context.Context
	stopLife context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}

	// standby is the metadata copy a campaigning broker keeps for Load
	// (standby.go); nil until the first Campaign.
	standbyOnce sync.Once
	standby     atomic.Pointer[standby]

	// rec is the migration record as last seen (migration.go), nil until
	// first read; recMu serialises that read, and recChanged announces
	// every change of the record.
	rec        atomic.Pointer[migrationRecord]
	recMu      sync.Mutex
	recChanged notify.Broadcast
}

var (
	_ coord.Backend           = (*Backend)(nil)
	_ coord.ControllerEvictor = (*Backend)(nil)
	_ coord.Migrator          = (*Backend)(nil)
)

// Open connects to cfg.EtcdEndpoints and returns a Backend keeping every
// key under cfg.EtcdPrefix, over TLS with cfg.EtcdTLS when set. The
// connection is lazy (Open does not wait for etcd) except with
// cfg.EtcdUsername: the client then authenticates first, and Open fails
// when etcd refuses the password or does not answer within the dial
// timeout. The lease TTL is cfg.SessionTimeout rounded up to whole
// seconds.
func Open(cfg coord.Config) (*Backend, error) {
	if cfg.Backend == "" {
		cfg.Backend = "etcd"
	}
	if cfg.EtcdPrefix == "" {
		cfg.EtcdPrefix = coord.DefaultConfig().EtcdPrefix
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ccfg := clientv3.Config{
		Endpoints:   cfg.EtcdEndpoints,
		DialTimeout: dialTimeout,
		// gRPC keep-alive pings find a connection that a silent network
		// partition left half open; without them a healed broker would
		// wait for TCP to give up (minutes) before reconnecting. 10 s is
		// the shortest interval gRPC clients may use, and etcd accepts
		// pings every 5 s.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: max(cfg.SessionTimeout, dialTimeout),
		Logger:               zap.NewNop(),
		// TLS verifies etcd's certificate and presents the client's
		// (etcd.ssl.*); Username and Password authenticate to etcd's
		// auth (etcd.username, etcd.password).
		TLS:      cfg.EtcdTLS,
		Username: cfg.EtcdUsername,
		Password: cfg.EtcdPassword,
		DialOptions: []grpc.DialOption{
			// Reconnect quickly once etcd is back: gRPC's default backoff
			// grows to two minutes.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: dialTimeout,
			}),
		},
	}
	if dial := cfg.Dialer; dial != nil {
		ccfg.DialOptions = append(ccfg.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", stripScheme(addr))
		}))
	}
	client, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", cfg.EtcdEndpoints, err)
	}
	ttl := int64((cfg.SessionTimeout + time.Second - 1) / time.Second)
	if ttl < 1 {
		ttl = 1
	}
	life, stop := context.WithCancel(context.Background())
	return &Backend{
		cfg:      cfg,
		log:      cfg.Logger.Named("etcd"),
		client:   client,
		prefix:   strings.TrimSuffix(cfg.EtcdPrefix, "/"),
		ttl:      ttl,
		life:     life,
		stopLife: stop,
		sessions: map[*session]struct{}{},
	}, nil
}

// Client returns the backend's etcd client, for tools and tests that look
// at the keys directly.
func (b *Backend) Client() *clientv3.Client { return b.client }

// Close implements coord.Backend.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	sessions := make([]*session, 0, len(b.sessions))
	for s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.mu.Unlock()

	for _, s := range sessions {
		s.Close()
	}
	b.stopLife()
	b.wg.Wait()
	return b.client.Close()
}

// isClosed reports whether Close has begun.
func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// goOwned runs f in a goroutine that Close waits for; it returns false,
// without running f, once Close has begun.
func (b *Backend) goOwned(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// withLife returns a context that ends when ctx ends or the backend closes.
func (b *Backend) withLife(ctx context.Context) (context.Context, context.CancelFunc) {
	merged, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.life, cancel)
	return merged, func() {
		stop()
		cancel()
	}
}

func (b *Backend) brokersPrefix() string    { return b.prefix + "/brokers/ids/" }
func (b *Backend) controllerKey() string    { return b.prefix + "/controller" }
func (b *Backend) topicsPrefix() string     { return b.prefix + "/topics/" }
func (b *Backend) partitionsPrefix() string { return b.prefix + "/partitions/" }

// barrierKey sorts between the partitions and the topics, inside the
// range the metadata watches follow (standby.go).
func (b *Backend) barrierKey() string { return b.prefix + "/standby_barrier" }
func (b *Backend) producerIDBlockKey() string {
	return b.prefix + "/latest_producer_id_block"
}

func (b *Backend) producerIDKeyKey() string { return b.prefix + "/producer_id_key" }

func (b *Backend) brokerKey(id coord.BrokerID) string {
	return b.brokersPrefix() + strconv.Itoa(int(id))
}

func (b *Backend) topicKey(name string) string { return b.topicsPrefix() + name }

func (b *Backend) topicPartitionsPrefix(topic string) string {
	return b.partitionsPrefix() + topic + "/"
}

func (b *Backend) partitionKey(tp coord.TopicPartition) string {
	return b.topicPartitionsPrefix(tp.Topic) + strconv.Itoa(int(tp.Partition))
}

// stripScheme turns an endpoint such as http://127.0.0.1:2379 into
// host:port, as a dialer wants it.
func stripScheme(addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		return rest
	}
	return addr
}
