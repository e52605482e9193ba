package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/broker/txncoord"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
	tlog "github.com/tripodmq/tripod/replication/log"
	"github.com/tripodmq/tripod/txn"
)

// The broker's side of the transaction coordinator (broker/txncoord):
// what it needs of the broker (the __transaction_state partitions' logs,
// the metadata cache, the clients of the other brokers), the creation of
// __transaction_state, and the role changes the replica manager reports.

// markerTimeout bounds one WriteTxnMarkers request to a partition leader.
const markerTimeout = 30 * time.Second

// newTxnCoordinator returns b's transaction coordinator.
func newTxnCoordinator(b *Broker) *txncoord.Coordinator {
	cfg := b.cfg
	return txncoord.New(txncoord.Config{
		Limits: txn.Limits{
			MaxTimeoutMs: int32(cfg.TransactionMaxTimeout.Milliseconds()),
			ExpirationMs: cfg.TransactionalIDExpiration.Milliseconds(),
		},
		NumPartitions:         int(cfg.TransactionStateLogNumPartitions),
		AbortTimedOutInterval: cfg.TransactionAbortTimedOutCleanupInterval,
		RemoveExpiredInterval: cfg.TransactionRemoveExpiredCleanupInterval,
		StoreTimeout:          cfg.OffsetsCommitTimeout,
		MarkerTimeout:         markerTimeout,
	}, txncoord.Deps{
		Logger:  b.logger.Named("txn-coordinator"),
		Cluster: txnCluster{b},
		Markers: b.markers,
	})
}

// roleChanged tells the coordinators of a partition's new role.
func (b *Broker) roleChanged(p *replica.Partition) {
	switch p.Topic() {
	case group.OffsetsTopic:
		b.groups.roleChanged(p)
	case txn.StateTopic:
		if leads, epoch := p.Leads(coord.BrokerID(b.cfg.BrokerID)); leads {
			b.txns.Lead(p.Index(), epoch, txnLog{b: b, p: p})
		} else {
			b.txns.Resign(p.Index())
		}
	}
}

// resign tells the coordinators that a partition left this broker.
func (b *Broker) resign(tp coord.TopicPartition) {
	switch tp.Topic {
	case group.OffsetsTopic:
		b.groups.resign(tp.Partition)
	case txn.StateTopic:
		b.txns.Resign(tp.Partition)
	}
}

// txnLog is a __transaction_state partition this broker leads
// (txncoord.StateLog).
type txnLog struct {
	b *Broker
	p *replica.Partition
}

func (l txnLog) Name() string { return l.p.Name() }

// Replay reads the partition from its start to its end as of now (only
// the coordinator writes it, and it waits for the load).
func (l txnLog) Replay(fn func(key, value []byte)) error {
	lg := l.p.Log()
	end := lg.EndOffset()
	for off := lg.StartOffset(); off < end; {
		data, err := lg.Read(off, int(l.b.cfg.OffsetsLoadBufferSize))
		if errors.Is(err, tlog.ErrOffsetOutOfRange) && off < lg.StartOffset() {
			off = lg.StartOffset()
			continue
		}
		if err != nil {
			return fmt.Errorf("read at offset %d: %w", off, err)
		}
		next := off
		if err := tlog.EachBatch(data, false, func(bi tlog.BatchInfo) { next = bi.LastOffset + 1 }); err != nil || next <= off {
			return fmt.Errorf("a batch at offset %d cannot be read: %v", off, err)
		}
		err = group.EachRecord(data, func(o int64, key, value []byte) error {
			if o < end {
				fn(key, value)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("records at offset %d: %w", off, err)
		}
		off = next
	}
	return nil
}

// Append appends one record with acks=all.
func (l txnLog) Append(key, value []byte, deadline time.Time) func(stop <-chan struct{}) int16 {
	batch := group.EncodeBatch([]group.KV{{Key: key, Value: value}}, time.Now())
	_, done, err := l.b.replicas.AppendAsLeader(l.p, batch, true, deadline)
	if err != nil {
		l.b.replicas.CheckStorage(l.p, err)
		code := replica.AppendErrors.Code(err)
		return func(<-chan struct{}) int16 { return code }
	}
	return func(stop <-chan struct{}) int16 {
		select {
		case err := <-done:
			return replica.AppendErrors.Code(err)
		case <-stop:
			return kerr.NotCoordinator.Code
		}
	}
}

// txnCluster is the metadata cache as the coordinator reads it
// (txncoord.Cluster).
type txnCluster struct{ b *Broker }

func (c txnCluster) StatePartitions() int {
	if t, ok := c.b.cache.Topic(txn.StateTopic); ok {
		return len(t.Partitions)
	}
	return 0
}

func (c txnCluster) LeaderOf(topic string, partition int32) txncoord.Leader {
	t, ok := c.b.cache.Topic(topic)
	if !ok {
		return txncoord.Leader{}
	}
	for _, p := range t.Partitions {
		if p.Partition != partition {
			continue
		}
		if _, live := c.b.cache.Broker(p.Leader); !live || p.Leader == coord.NoBroker {
			return txncoord.Leader{Known: true, Broker: -1}
		}
		return txncoord.Leader{Known: true, Broker: int32(p.Leader)}
	}
	return txncoord.Leader{}
}

// markerSender sends the coordinator's WriteTxnMarkers to partition
// leaders (txncoord.Markers), with one client per broker, kept until the
// broker's address changes or the broker closes.
type markerSender struct {
	b       *Broker
	mu      sync.Mutex
	clients map[int32]markerClient
	closed  bool
}

type markerClient struct {
	addr string
	cl   *kgo.Client
}

func (s *markerSender) WriteTxnMarkers(ctx context.Context, broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	kresp, err := s.request(ctx, broker, req)
	if err != nil {
		return nil, err
	}
	return kresp.(*kmsg.WriteTxnMarkersResponse), nil
}

// request sends req to broker, on the client kept for it and without
// retries: the markers, and a partition leader's verifications
// (AddPartitionsToTxn VerifyOnly) sent to a transaction coordinator.
func (s *markerSender) request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	node, ok := s.b.cache.Broker(coord.BrokerID(broker))
	if !ok {
		return nil, fmt.Errorf("broker %d is not live", broker)
	}
	addr := s.b.member.PeerAddr(node)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("broker closing")
	}
	mc, ok := s.clients[broker]
	if ok && mc.addr != addr {
		mc.cl.Close()
		ok = false
	}
	if !ok {
		cl, err := s.b.member.PeerClient(addr)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		mc = markerClient{addr: addr, cl: cl}
		if s.clients == nil {
			s.clients = map[int32]markerClient{}
		}
		s.clients[broker] = mc
	}
	s.mu.Unlock()
	// The seed, that broker alone: the client's own request routing
	// would send a marker to the leader its metadata names and retry
	// it there on its own, after the coordinator's round may have moved
	// on, and a verification to the coordinator FindCoordinator names.
	// The coordinator decides where each goes and when to retry.
	seeds := mc.cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("client of broker %d has %d seeds, want 1", broker, len(seeds))
	}
	return seeds[0].Request(ctx, req)
}

// close closes the clients; WriteTxnMarkers fails from then on.
func (s *markerSender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, mc := range s.clients {
		mc.cl.Close()
	}
	s.clients = nil
}

// txnStateReplicationFactor is the replication factor __transaction_state
// is created with: transaction.state.log.replication.factor, or 1 on a
// broker that its flags make its cluster's only Raft voter, as for
// __consumer_offsets.
func (b *Broker) txnStateReplicationFactor() int {
	if b.cfg.CoordConfig().LoneRaftVoter() {
		return 1
	}
	return int(b.cfg.TransactionStateLogReplicationFactor)
}

// ensureTxnStateTopic creates __transaction_state if the cluster has
// enough live brokers for its replication factor, through the
// controller, and waits (bounded by ctx) until this broker knows its
// leaders; otherwise it says why the topic cannot exist yet. Its
// min.insync.replicas is transaction.state.log.min.isr capped by the
// replication factor.
func (b *Broker) ensureTxnStateTopic(ctx context.Context) error {
	if b.cache.HasTopic(txn.StateTopic) {
		return nil
	}
	_, live, _ := b.cache.View()
	rf := b.txnStateReplicationFactor()
	if len(live) < rf {
		return fmt.Errorf("%s needs transaction.state.log.replication.factor=%d live brokers and %d are live", txn.StateTopic, rf, len(live))
	}
	spec := controller.TopicSpec{Name: txn.StateTopic, Partitions: int(b.cfg.TransactionStateLogNumPartitions), ReplicationFactor: rf,
		Config: map[string]string{
			"cleanup.policy":                 "compact",
			"compression.type":               "uncompressed",
			"min.insync.replicas":            fmt.Sprint(min(int(b.cfg.TransactionStateLogMinISR), rf)),
			"segment.bytes":                  fmt.Sprint(b.cfg.TransactionStateLogSegmentBytes),
			"unclean.leader.election.enable": "false",
		}}
	if err := b.member.createTopic(ctx, spec); err != nil {
		return err
	}
	b.cache.WaitFor(ctx, b.closing, func() bool { return b.cache.TopicReady(txn.StateTopic, spec.Partitions) })
	return nil
}
