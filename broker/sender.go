package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// Versions of the controller's requests: LeaderAndIsr v5 and
// UpdateMetadata v7 carry broker epochs and topic IDs, StopReplica v3 a
// delete flag and leader epoch per partition.
const (
	leaderAndIsrVersion   = 5
	updateMetadataVersion = 7
	stopReplicaVersion    = 3
)

// deletedTopicLeader marks a deleted topic in UpdateMetadata (Kafka's
// LeaderDuringDelete).
const deletedTopicLeader = -2

// sender implements controller.Sender for one controller term: one queue and
// one goroutine per destination broker, each delivering its requests in
// order over a Kafka client connection (or in process for this broker),
// retrying with backoff until answered or dropped. Each answer the
// controller must act on goes to its controller.Results (bind): a
// STALE_CONTROLLER_EPOCH (Deposed) and the partitions answered
// KAFKA_STORAGE_ERROR (ReplicasOffline). Close stops them all.
type sender struct {
	b *Broker
	// results receives the answers once bound is closed (bind).
	results controller.Results
	bound   chan struct{}

	mu     sync.Mutex
	dests  map[coord.BrokerID]*destination
	closed bool
	// progress announces every request delivered.
	progress notify.Broadcast
	wg       sync.WaitGroup
}

// destination is one broker's queue.
type destination struct {
	to     coord.Broker
	cancel context.CancelFunc
	wake   chan struct{}

	mu    sync.Mutex
	queue []controller.Request
	// queued and delivered count the requests sent to and answered by
	// this destination.
	queued, delivered uint64
}

func newSender(b *Broker) *sender {
	return &sender{b: b, dests: map[coord.BrokerID]*destination{}, bound: make(chan struct{})}
}

// bind makes r (the controller the sender delivers for, which exists only
// after the sender) receive the answers. Answers arriving before wait.
func (s *sender) bind(r controller.Results) {
	s.results = r
	close(s.bound)
}

// report hands the controller what a broker's answer to req tells it.
// It returns once the controller took it in, or the controller or ctx
// ended.
func (s *sender) report(ctx context.Context, to coord.Broker, req controller.Request, ans controllerAnswer) {
	if ans.code != kerr.StaleControllerEpoch.Code && len(ans.offline) == 0 {
		return
	}
	select {
	case <-s.bound:
	case <-ctx.Done():
		return
	}
	if ans.code == kerr.StaleControllerEpoch.Code {
		s.b.logger.Warn("a broker refused this controller's epoch as stale: a newer controller exists", "to", to.ID, "request", fmt.Sprintf("%T", req))
		if err := s.results.Deposed(ctx, to.ID, requestControllerEpoch(req)); err != nil {
			s.b.logger.Debug("deposed controller not told", "error", err)
		}
		return
	}
	if err := s.results.ReplicasOffline(ctx, to, ans.offline); err != nil {
		s.b.logger.Debug("offline replicas not reported to the controller", "to", to.ID, "error", err)
	}
}

// requestControllerEpoch is the controller epoch a request carries.
// controller.Request is sealed: these are all its types.
func requestControllerEpoch(req controller.Request) int64 {
	switch r := req.(type) {
	case *controller.LeaderAndIsrRequest:
		return r.ControllerEpoch
	case *controller.UpdateMetadataRequest:
		return r.ControllerEpoch
	case *controller.StopReplicaRequest:
		return r.ControllerEpoch
	}
	return -1
}

// waitDelivered waits until every request queued so far has been answered
// by its destination (or the destination was dropped), or ctx ends; it
// reports whether all were.
func (s *sender) waitDelivered(ctx context.Context) bool {
	s.mu.Lock()
	want := map[*destination]uint64{}
	for _, d := range s.dests {
		d.mu.Lock()
		want[d] = d.queued
		d.mu.Unlock()
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		progress := s.progress.Next()
		done := true
		for d, n := range want {
			if s.dests[d.to.ID] != d {
				continue
			}
			d.mu.Lock()
			if d.delivered < n {
				done = false
			}
			d.mu.Unlock()
		}
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return false
		}
	}
}

// Send implements controller.Sender.
func (s *sender) Send(to coord.Broker, req controller.Request) {
	s.b.metrics.leaderAndIsrSent(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	d := s.dests[to.ID]
	if d != nil && (d.to.Epoch != to.Epoch || s.b.peerAddr(d.to) != s.b.peerAddr(to)) {
		d.cancel()
		d = nil
	}
	if d == nil {
		ctx, cancel := context.WithCancel(context.Background())
		d = &destination{to: to, cancel: cancel, wake: make(chan struct{}, 1)}
		s.dests[to.ID] = d
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.deliver(ctx, d)
		}()
	}
	d.mu.Lock()
	d.queue = append(d.queue, req)
	d.queued++
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Drop implements controller.Sender.
func (s *sender) Drop(id coord.BrokerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.dests[id]; d != nil {
		d.cancel()
		delete(s.dests, id)
	}
}

// Close discards every queue and waits for the delivery goroutines.
func (s *sender) Close() {
	s.mu.Lock()
	s.closed = true
	for id, d := range s.dests {
		d.cancel()
		delete(s.dests, id)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// deliver sends d's requests in order until ctx ends.
func (s *sender) deliver(ctx context.Context, d *destination) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	log := s.b.logger.With("to", d.to.ID)
	for {
		d.mu.Lock()
		var req controller.Request
		if len(d.queue) > 0 {
			req = d.queue[0]
		}
		d.mu.Unlock()
		if req == nil {
			select {
			case <-d.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		backoff := 50 * time.Millisecond
		for {
			ans, err := s.deliverOne(ctx, d, &cl, req)
			if err == nil {
				s.report(ctx, d.to, req, ans)
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Debug("controller request not delivered; retrying", "request", fmt.Sprintf("%T", req), "error", err, "backoff", backoff)
			if cl != nil {
				cl.Close()
				cl = nil
			}
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
		}
		d.mu.Lock()
		d.queue = d.queue[1:]
		d.delivered++
		d.mu.Unlock()
		s.mu.Lock()
		s.progress.Notify()
		s.mu.Unlock()
	}
}

// deliverOne delivers one request, in process to this broker, else over
// the client connection cl (opened if nil), and returns the answer.
func (s *sender) deliverOne(ctx context.Context, d *destination, cl **kgo.Client, req controller.Request) (controllerAnswer, error) {
	if int32(d.to.ID) == s.b.cfg.BrokerID {
		return s.b.applyControllerRequest(ctx, req), nil
	}
	kreq := encodeControllerRequest(req)
	if kreq == nil {
		return controllerAnswer{code: kerr.InvalidRequest.Code}, nil
	}
	if *cl == nil {
		// The client's read deadline of a request without a timeout of
		// its own is its timeout overhead: the controller's bound.
		c, err := s.b.peerClient(s.b.peerAddr(d.to), kgo.RequestTimeoutOverhead(s.b.cfg.ControllerSocketTimeout))
		if err != nil {
			return controllerAnswer{}, err
		}
		*cl = c
	}
	rctx, cancel := context.WithTimeout(ctx, s.b.cfg.ControllerSocketTimeout)
	defer cancel()
	kresp, err := (*cl).SeedBrokers()[0].Request(rctx, kreq)
	if err != nil {
		return controllerAnswer{}, err
	}
	return decodeControllerResponse(req, kresp), nil
}

// decodeControllerResponse turns a broker's kmsg answer to req into a
// controllerAnswer: the top-level error code and, for LeaderAndIsr, the
// partitions answered KAFKA_STORAGE_ERROR (named by topic ID in v5, by
// topic name before).
func decodeControllerResponse(req controller.Request, kresp kmsg.Response) controllerAnswer {
	switch resp := kresp.(type) {
	case *kmsg.LeaderAndISRResponse:
		ans := controllerAnswer{code: resp.ErrorCode}
		if resp.ErrorCode != 0 {
			return ans
		}
		names := map[[16]byte]string{}
		if r, ok := req.(*controller.LeaderAndIsrRequest); ok {
			for _, p := range r.Partitions {
				names[p.TopicID] = p.Topic
			}
		}
		for _, p := range resp.Partitions { // v0..v4
			if p.ErrorCode == kerr.KafkaStorageError.Code {
				ans.offline = append(ans.offline, coord.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			}
		}
		for _, t := range resp.Topics {
			name, ok := names[t.TopicID]
			if !ok {
				continue
			}
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.KafkaStorageError.Code {
					ans.offline = append(ans.offline, coord.TopicPartition{Topic: name, Partition: p.Partition})
				}
			}
		}
		return ans
	case *kmsg.UpdateMetadataResponse:
		return controllerAnswer{code: resp.ErrorCode}
	case *kmsg.StopReplicaResponse:
		return controllerAnswer{code: resp.ErrorCode}
	}
	return controllerAnswer{code: kerr.UnknownServerError.Code}
}

// encodeControllerRequest turns a controller request into its kmsg
// request. controller.Request is sealed, so the three cases are all its
// types; a nil request (or a type added to controller but not here) gives
// nil, which deliverOne answers INVALID_REQUEST, as applyControllerRequest
// does in process.
func encodeControllerRequest(req controller.Request) kmsg.Request {
	switch r := req.(type) {
	case *controller.LeaderAndIsrRequest:
		k := kmsg.NewPtrLeaderAndISRRequest()
		k.SetVersion(leaderAndIsrVersion)
		k.ControllerID, k.ControllerEpoch, k.BrokerEpoch = int32(r.ControllerID), int32(r.ControllerEpoch), r.BrokerEpoch
		byTopic := map[string]int{}
		for _, p := range r.Partitions {
			i, ok := byTopic[p.Topic]
			if !ok {
				ts := kmsg.NewLeaderAndISRRequestTopicState()
				ts.Topic, ts.TopicID = p.Topic, p.TopicID
				k.TopicStates = append(k.TopicStates, ts)
				i = len(k.TopicStates) - 1
				byTopic[p.Topic] = i
			}
			ps := kmsg.NewLeaderAndISRRequestTopicPartition()
			ps.Partition, ps.ControllerEpoch = p.Partition, int32(p.ControllerEpoch)
			ps.Leader, ps.LeaderEpoch, ps.ZKVersion = int32(p.Leader), p.LeaderEpoch, p.PartitionEpoch
			ps.ISR, ps.Replicas, ps.IsNew = ids32(p.ISR), ids32(p.Replicas), p.IsNew
			k.TopicStates[i].PartitionStates = append(k.TopicStates[i].PartitionStates, ps)
		}
		for _, l := range r.Leaders {
			ll := kmsg.NewLeaderAndISRRequestLiveLeader()
			ll.BrokerID, ll.Host, ll.Port = int32(l.ID), l.Host, l.Port
			k.LiveLeaders = append(k.LiveLeaders, ll)
		}
		return k
	case *controller.UpdateMetadataRequest:
		k := kmsg.NewPtrUpdateMetadataRequest()
		k.SetVersion(updateMetadataVersion)
		k.ControllerID, k.ControllerEpoch, k.BrokerEpoch = int32(r.ControllerID), int32(r.ControllerEpoch), r.BrokerEpoch
		live := map[coord.BrokerID]bool{}
		for _, l := range r.Live {
			live[l.ID] = true
			lb := kmsg.NewUpdateMetadataRequestLiveBroker()
			lb.ID = int32(l.ID)
			endpoints := l.Endpoints
			if len(endpoints) == 0 {
				implied, _ := l.ListenerEndpoint(protocolPlaintext)
				endpoints = []coord.Endpoint{implied}
			}
			for _, e := range endpoints {
				ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
				ep.Host, ep.Port, ep.ListenerName = e.Host, e.Port, e.Listener
				ep.SecurityProtocol = securityProtocolIDs[e.SecurityProtocol]
				lb.Endpoints = append(lb.Endpoints, ep)
			}
			if l.Rack != "" {
				rack := l.Rack
				lb.Rack = &rack
			}
			k.LiveBrokers = append(k.LiveBrokers, lb)
		}
		byTopic := map[string]int{}
		for _, p := range r.Partitions {
			i, ok := byTopic[p.Topic]
			if !ok {
				ts := kmsg.NewUpdateMetadataRequestTopicState()
				ts.Topic, ts.TopicID = p.Topic, p.TopicID
				k.TopicStates = append(k.TopicStates, ts)
				i = len(k.TopicStates) - 1
				byTopic[p.Topic] = i
			}
			ps := kmsg.NewUpdateMetadataRequestTopicPartition()
			ps.Partition, ps.ControllerEpoch = p.Partition, int32(p.ControllerEpoch)
			ps.Leader, ps.LeaderEpoch, ps.ZKVersion = int32(p.Leader), p.LeaderEpoch, p.PartitionEpoch
			ps.ISR, ps.Replicas = ids32(p.ISR), ids32(p.Replicas)
			ps.OfflineReplicas = []int32{}
			for _, id := range p.Replicas {
				if !live[id] {
					ps.OfflineReplicas = append(ps.OfflineReplicas, int32(id))
				}
			}
			k.TopicStates[i].PartitionStates = append(k.TopicStates[i].PartitionStates, ps)
		}
		for _, name := range r.Deleted {
			ts := kmsg.NewUpdateMetadataRequestTopicState()
			ts.Topic = name
			ps := kmsg.NewUpdateMetadataRequestTopicPartition()
			ps.Partition, ps.Leader = -1, deletedTopicLeader
			ts.PartitionStates = []kmsg.UpdateMetadataRequestTopicPartition{ps}
			k.TopicStates = append(k.TopicStates, ts)
		}
		return k
	case *controller.StopReplicaRequest:
		k := kmsg.NewPtrStopReplicaRequest()
		k.SetVersion(stopReplicaVersion)
		k.ControllerID, k.ControllerEpoch, k.BrokerEpoch = int32(r.ControllerID), int32(r.ControllerEpoch), r.BrokerEpoch
		byTopic := map[string]int{}
		for _, tp := range r.Partitions {
			i, ok := byTopic[tp.Topic]
			if !ok {
				t := kmsg.NewStopReplicaRequestTopic()
				t.Topic = tp.Topic
				k.Topics = append(k.Topics, t)
				i = len(k.Topics) - 1
				byTopic[tp.Topic] = i
			}
			ps := kmsg.NewStopReplicaRequestTopicPartitionState()
			ps.Partition, ps.LeaderEpoch, ps.Delete = tp.Partition, -1, r.Delete
			k.Topics[i].PartitionStates = append(k.Topics[i].PartitionStates, ps)
		}
		return k
	}
	return nil
}

// ids32 converts broker IDs to the wire's int32s.
func ids32(ids []coord.BrokerID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// brokerIDs converts the wire's int32s to broker IDs.
func brokerIDs(ids []int32) []coord.BrokerID {
	out := make([]coord.BrokerID, len(ids))
	for i, id := range ids {
		out[i] = coord.BrokerID(id)
	}
	return out
}
