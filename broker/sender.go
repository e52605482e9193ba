package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

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
func (s *sender) report(ctx context.Context, to coord.Broker, req controller.Request, ans replica.ControllerAnswer) {
	if ans.Code != kerr.StaleControllerEpoch.Code && len(ans.Offline) == 0 {
		return
	}
	select {
	case <-s.bound:
	case <-ctx.Done():
		return
	}
	if ans.Code == kerr.StaleControllerEpoch.Code {
		s.b.logger.Warn("a broker refused this controller's epoch as stale: a newer controller exists", "to", to.ID, "request", fmt.Sprintf("%T", req))
		if err := s.results.Deposed(ctx, to.ID, requestControllerEpoch(req)); err != nil {
			s.b.logger.Debug("deposed controller not told", "error", err)
		}
		return
	}
	if err := s.results.ReplicasOffline(ctx, to, ans.Offline); err != nil {
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
	if d != nil && (d.to.Epoch != to.Epoch || s.b.member.PeerAddr(d.to) != s.b.member.PeerAddr(to)) {
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
func (s *sender) deliverOne(ctx context.Context, d *destination, cl **kgo.Client, req controller.Request) (replica.ControllerAnswer, error) {
	if int32(d.to.ID) == s.b.cfg.BrokerID {
		return s.b.replicas.ApplyControllerRequest(ctx, req), nil
	}
	kreq := encodeControllerRequest(req)
	if kreq == nil {
		return replica.ControllerAnswer{Code: kerr.InvalidRequest.Code}, nil
	}
	if *cl == nil {
		// The client's read deadline of a request without a timeout of
		// its own is its timeout overhead: the controller's bound.
		c, err := s.b.member.PeerClient(s.b.member.PeerAddr(d.to), kgo.RequestTimeoutOverhead(s.b.cfg.ControllerSocketTimeout))
		if err != nil {
			return replica.ControllerAnswer{}, err
		}
		*cl = c
	}
	rctx, cancel := context.WithTimeout(ctx, s.b.cfg.ControllerSocketTimeout)
	defer cancel()
	kresp, err := (*cl).SeedBrokers()[0].Request(rctx, kreq)
	if err != nil {
		return replica.ControllerAnswer{}, err
	}
	return decodeControllerResponse(req, kresp), nil
}

// decodeControllerResponse turns a broker's kmsg answer to req into a
// ControllerAnswer; each request's answer is decoded in its numbered file.
func decodeControllerResponse(req controller.Request, kresp kmsg.Response) replica.ControllerAnswer {
	switch resp := kresp.(type) {
	case *kmsg.LeaderAndISRResponse:
		r, _ := req.(*controller.LeaderAndIsrRequest)
		return decodeLeaderAndIsrResponse(r, resp)
	case *kmsg.UpdateMetadataResponse:
		return replica.ControllerAnswer{Code: resp.ErrorCode}
	case *kmsg.StopReplicaResponse:
		return replica.ControllerAnswer{Code: resp.ErrorCode}
	}
	return replica.ControllerAnswer{Code: kerr.UnknownServerError.Code}
}

// encodeControllerRequest turns a controller request into its kmsg
// request, encoded in the request's numbered file. controller.Request is
// sealed, so the three cases are all its types; a nil request (or a type
// added to controller but not here) gives nil, which deliverOne answers
// INVALID_REQUEST, as ApplyControllerRequest does in process.
func encodeControllerRequest(req controller.Request) kmsg.Request {
	switch r := req.(type) {
	case *controller.LeaderAndIsrRequest:
		return encodeLeaderAndIsr(r)
	case *controller.UpdateMetadataRequest:
		return encodeUpdateMetadata(r)
	case *controller.StopReplicaRequest:
		return encodeStopReplica(r)
	}
	return nil
}
