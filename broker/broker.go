// Package broker is tripod's Kafka-protocol server over broker/network's
// connections: one handler per API (00_produce.go, 01_fetch.go, ...) and
// the broker's membership of a cluster: it registers with the
// coordination backend, campaigns, runs the controller.Controller when it
// wins, and hands the controller's LeaderAndIsr, UpdateMetadata and
// StopReplica requests to its replica manager (broker/replica), which
// owns the partitions' logs. It speaks the protocol through franz-go's
// kmsg; leadership decisions belong to the controller and replication
// decisions to replication/.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/dynconfig"
	"github.com/tripodmq/tripod/broker/fetchsession"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/broker/producerid"
	"github.com/tripodmq/tripod/broker/quota"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/broker/txncoord"
	"github.com/tripodmq/tripod/coord"
	_ "github.com/tripodmq/tripod/coord/etcd" // coordination.backend=etcd
	"github.com/tripodmq/tripod/coord/migration"
	_ "github.com/tripodmq/tripod/coord/raft" // coordination.backend=raft
	_ "github.com/tripodmq/tripod/coord/zk"   // coordination.backend=zk
)

// Broker is a running Kafka-protocol server and cluster member. New starts
// it; Close stops it.
type Broker struct {
	cfg    config.Config
	logger hclog.Logger
	// listeners are the bound listeners, in listeners' order;
	// interBroker is the one brokers reach each other on
	// (inter.broker.listener.name).
	listeners   []*listener
	interBroker *listener
	backend     coord.Backend
	// coordMigration is backend, which moves to the target of a
	// migration (migration.go).
	coordMigration *migration.Backend
	// migration is what this broker, as the controller, last did for a
	// migration (migration.go).
	migration migrationStatus
	cache     *metadata.Cache
	// metadataAnswers keeps the topics' Metadata answers built from cache
	// (03_metadata.go).
	metadataAnswers metadataAnswers
	// sasl answers SaslHandshake and SaslAuthenticate (security.Server).
	sasl *security.Server
	// authz checks every request against the ACLs (security.Authorizer); nil
	// without authorizer.class.name.
	authz *security.Authorizer

	// replicas is the replica manager: the partitions this broker holds,
	// their logs, roles, fetchers and ISR reports, and the acceptance and
	// application of the controller's requests.
	replicas replicaManager

	// member is this broker's membership of the cluster: its sessions
	// and broker epochs, the controller the backend names, the controller
	// it runs when elected, and its clients of the other brokers.
	member *membership

	// producerIDs hands out producer ids from blocks the backend
	// reserves for this broker.
	producerIDs *producerid.Manager
	// refusedBatches logs produced batches that fail validation, at most
	// one line a second, so that a client sending garbage cannot fill the
	// broker's log.
	refusedBatches rateLimitedLog
	// refusedProducerIDs logs the producer ids refused for a
	// connection's principal, at most one line a second.
	refusedProducerIDs rateLimitedLog
	// groups coordinates the consumer groups of the __consumer_offsets
	// partitions this broker leads.
	groups *groupCoordinator
	// txns coordinates the transactional ids of the __transaction_state
	// partitions this broker leads; markers sends its WriteTxnMarkers.
	txns    *txncoord.Coordinator
	markers *markerSender
	metrics *metrics

	closeOnce sync.Once
	closing   chan struct{}
	// fetchSessions are the incremental fetch sessions of the clients
	// and followers fetching from this broker (KIP-227).
	fetchSessions *fetchsession.Cache
	// conns is the connection layer serving the listeners: framing,
	// admission, muting, connection limits and the request pool
	// (queued.max.request.bytes).
	conns *network.Server
	// stopRun ends the membership loop; runWG waits for it.
	stopRun context.CancelFunc
	runWG   sync.WaitGroup
	// wg counts the listeners' accept loops (network.Server.Serve, which
	// returns after its connections end).
	wg sync.WaitGroup

	// dyn is the dynamic configs this broker follows and applies.
	dyn *dynconfig.Configs
	// leaderQuota and followerQuota are the replication throttles.
	leaderQuota, followerQuota *replica.Quota
	// quotas enforces the client quotas (quotas.go).
	quotas *quota.Manager
}

// New opens the coordination backend (cfg.Coord), binds the listeners
// (loading the SSL listeners' keys and certificates) and starts serving
// on each; registration, the campaign and the controller run in the
// background (membership.run), so New does not wait for the cluster to form.
// Partition logs under cfg.LogDirs are opened when the controller assigns
// them. logger may be nil (no logging).
func New(cfg config.Config, logger hclog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid broker config: %w", err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Broker{
		refusedBatches:     rateLimitedLog{interval: time.Second},
		refusedProducerIDs: rateLimitedLog{interval: producerIDRefusalLogInterval},
		cfg:                cfg,
		logger:             logger,
		cache:              metadata.NewCache(),
		closing:            make(chan struct{}),
	}
	samples, window := int(cfg.ReplicationQuotaWindowNum), cfg.ReplicationQuotaWindowSize
	b.leaderQuota, b.followerQuota = replica.NewQuota(samples, window, time.Now), replica.NewQuota(samples, window, time.Now)
	b.fetchSessions = fetchsession.NewCache(fetchsession.CacheSlots, min(cfg.ReplicaLagTimeMax/4, replica.MaxSessionRefresh),
		func(tp coord.TopicPartition) *replica.Partition {
			return b.replicas.PartitionFor(tp.Topic, tp.Partition)
		})
	b.quotas = quota.NewManager(quota.Config{Samples: int(cfg.QuotaWindowNum), Window: cfg.QuotaWindowSize,
		MutationSamples: int(cfg.ControllerQuotaWindowNum), MutationWindow: cfg.ControllerQuotaWindowSize})
	b.metrics = newMetrics(b)
	b.conns = network.NewServer(network.Config{
		ConnectionsMaxIdle:           cfg.ConnectionsMaxIdle,
		SocketRequestMaxBytes:        cfg.SocketRequestMaxBytes,
		SASLServerMaxReceiveSize:     cfg.SASL.ServerMaxReceiveSize,
		QueuedMaxRequestBytes:        cfg.QueuedMaxRequestBytes,
		MaxConnections:               cfg.MaxConnections,
		MaxConnectionsPerIP:          cfg.MaxConnectionsPerIP,
		MaxConnectionsPerIPOverrides: cfg.MaxConnectionsPerIPOverrides,
		Closing:                      b.closing,
		AcceptErrors:                 b.metrics.acceptErrors,
		ConnectionsRefused:           b.metrics.connectionsRefused,
		ConnectionsThrottled:         b.metrics.connectionsThrottled,
		MaxConnectionCreationRate:    cfg.MaxConnectionCreationRate,
		ConnectionCreationRate:       b.quotas.ConnectionCreationRate,
		QuotaWindowNum:               int(cfg.QuotaWindowNum),
		QuotaWindowSize:              cfg.QuotaWindowSize,
	}, logger)
	b.groups = newGroupCoordinator(b)
	b.markers = &markerSender{b: b}
	b.txns = newTxnCoordinator(b)
	logDirs, err := replica.OpenLogDirs(cfg.LogDirs)
	if err != nil {
		return nil, err
	}
	lastEpoch := readRegistrationEpoch(cfg.LogDirs[0])
	ckpt, err := replica.ReadHWCheckpoints(cfg.LogDirs, logger)
	if err != nil {
		logDirs.Unlock()
		return nil, err
	}
	b.listeners, b.interBroker, err = bindListeners(cfg, logger)
	if err != nil {
		logDirs.Unlock()
		return nil, err
	}
	closeListeners := func() {
		for _, l := range b.listeners {
			l.ln.Close()
		}
	}

	cc := cfg.CoordConfig()
	cc.Logger = logger.Named("coord")
	if err := cfg.OpenCoordTLS(&cc, logger.Named("coord-tls")); err != nil {
		closeListeners()
		logDirs.Unlock()
		return nil, err
	}
	backend, err := openCoord(&b.cfg, cc, logger)
	if err != nil {
		closeListeners()
		logDirs.Unlock()
		return nil, fmt.Errorf("open coordination.backend %s: %w", cc.Backend, err)
	}
	b.backend, b.coordMigration = backend, backend
	b.dyn = dynconfig.New(&b.cfg, logger, backend, b.leaderQuota, b.followerQuota,
		func() []*replica.Partition { return b.replicas.Partitions() }, b.quotas)
	b.member = &membership{
		cfg:                     &b.cfg,
		logger:                  logger,
		backend:                 backend,
		cache:                   b.cache,
		interBroker:             b.interBroker,
		closing:                 b.closing,
		self:                    b.self,
		acceptedControllerEpoch: func() int64 { _, epoch := b.replicas.AcceptedController(); return epoch },
		newSender:               func() *sender { return newSender(b) },
		lastEpoch:               lastEpoch,
		brokerEpoch:             -1,
		backendCtrl:             coord.ControllerInfo{ID: coord.NoBroker},
		duringTerm:              func(ctx context.Context) { b.driveMigrations(ctx) },
	}
	b.replicas = replica.NewManager(&b.cfg, logDirs, ckpt, replica.Deps{
		Configs:       b.dyn,
		Logger:        logger,
		Metrics:       b.metrics,
		Backend:       backend,
		Metadata:      b.cache,
		Membership:    b.member,
		RoleChanged:   b.roleChanged,
		Resign:        b.resign,
		TopicsDeleted: func(topics []string) { b.groups.topicsDeleted(topics) },
		FollowerQuota: b.followerQuota,
		Closing:       b.closing,
	})
	saslListeners := make([]*security.SASLListener, len(b.listeners))
	for i, l := range b.listeners {
		saslListeners[i] = l.SASL
	}
	b.sasl = security.NewServer(saslListeners, cfg.SASL, cfg.Authorizer.Enabled(), backend, logger.Named("sasl"))
	b.authz = security.NewAuthorizer(cfg.Authorizer, b.sasl, logger)
	b.producerIDs = producerid.NewManager(backend, coord.BrokerID(cfg.BrokerID), logger.Named("producer-ids"))
	for _, l := range b.listeners {
		advertised := "(not advertised)"
		if l.Advertised != nil {
			advertised = l.endpoint().Addr()
		}
		b.logger.Info("broker listening", "addr", l.ln.Addr().String(), "listener", l.Name, "security_protocol", l.Protocol,
			"advertised", advertised, "inter_broker", l == b.interBroker, "broker.id", cfg.BrokerID)
	}
	b.logger.Info("broker starting", "broker.id", cfg.BrokerID, "coordination.backend", cc.Backend, "open_files_limit", openFilesLimit())
	warnUnauthenticatedListeners(b.logger, b.listeners)
	cfg.WarnUnsecuredCoord(b.logger)

	runCtx, stopRun := context.WithCancel(context.Background())
	b.stopRun = stopRun
	b.runWG.Add(5)
	go func() {
		defer b.runWG.Done()
		b.member.run(runCtx)
	}()
	go func() {
		defer b.runWG.Done()
		b.dyn.Watch(runCtx)
	}()
	go func() {
		defer b.runWG.Done()
		watchSecurity(runCtx, b.sasl, b.backend, b.logger.Named("sasl"))
	}()
	go func() {
		defer b.runWG.Done()
		b.member.watchMembers(runCtx)
	}()
	b.runWG.Add(1)
	go func() {
		defer b.runWG.Done()
		b.sasl.Run(runCtx)
	}()
	if cfg.BrokerProbeInterval > 0 {
		b.runWG.Add(1)
		go func() {
			defer b.runWG.Done()
			b.member.probeController(runCtx, cfg.BrokerProbeInterval)
		}()
	}
	go func() {
		defer b.runWG.Done()
		b.member.watchController(runCtx)
	}()
	b.wg.Add(len(b.listeners))
	for _, l := range b.listeners {
		go func() {
			defer b.wg.Done()
			b.conns.Serve(network.Listener{Name: l.Name, Listener: l.ln, Protected: l.protected, Handler: connHandler{b: b, l: l}})
		}()
	}
	b.replicas.Start()
	b.groups.start()
	b.txns.Start()
	return b, nil
}

// Addr is the address the broker's first listener listens on.
func (b *Broker) Addr() net.Addr { return b.listeners[0].ln.Addr() }

// ListenerAddr is the address the named listener listens on, or nil
// when the broker has no listener of that name.
func (b *Broker) ListenerAddr(name string) net.Addr {
	if l := b.listenerNamed(name); l != nil {
		return l.ln.Addr()
	}
	return nil
}

// Coordination is the broker's coordination backend, for readers in the
// same process (the console of tripod serve --console-listen reads the
// controller and its epoch from it). It stays the broker's: Close closes
// it, and no reader may.
func (b *Broker) Coordination() coord.Backend { return b.backend }

// ID is the broker's id (broker.id).
func (b *Broker) ID() int32 { return b.cfg.BrokerID }

// Close leaves the cluster and stops: with controlled.shutdown.enable it
// first asks the controller to move this broker's leaderships away (for at
// most twice the session timeout), then ends its session (and its
// controller term, if it holds one), closes the backend, stops accepting,
// closes every connection, waits for every goroutine the broker started,
// and flushes and closes the partition logs.
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		if b.cfg.ControlledShutdown {
			ctx, cancel := context.WithTimeout(context.Background(), 2*b.cfg.Coord.SessionTimeout)
			b.member.controlledShutdown(ctx)
			cancel()
		}
		b.stopRun()
		b.runWG.Wait()
		b.producerIDs.Close()
		if cerr := b.backend.Close(); cerr != nil && !errors.Is(cerr, coord.ErrClosed) {
			b.logger.Warn("close coordination backend failed", "error", cerr)
		}
		close(b.closing)
		for _, l := range b.listeners {
			if cerr := l.ln.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		// The transaction coordinator's stores end on its close, which
		// the handlers waiting for them need to return.
		b.txns.Close()
		b.markers.close()
		b.wg.Wait()
		b.groups.close()
		if cerr := b.replicas.Close(); cerr != nil {
			err = cerr
		}
		b.logger.Info("broker closed")
	})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// openFilesLimit returns the process's RLIMIT_NOFILE soft limit, which
// the Go runtime raises to the hard limit at start; 0 if unknown.
func openFilesLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}
