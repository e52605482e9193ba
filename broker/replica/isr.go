package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
)

// AlterPartitionVersion is the AlterPartition version brokers send: v1
// names topics (v2+ uses topic IDs).
const AlterPartitionVersion = 1

// alterPartitionTimeout bounds one AlterPartition round trip.
const alterPartitionTimeout = 10 * time.Second

// isrSender sends the ISR changes the partitions this broker leads
// propose to the controller (in process when this broker is the
// controller, else one AlterPartition request for all pending ones) and
// feeds each outcome back to the partition's state machine. One
// goroutine, run, started by Manager.Start and waited for by its Close.
type isrSender struct {
	rm *Manager

	mu      sync.Mutex
	pending map[*Partition]replication.Proposal
	wake    chan struct{}
}

func newISRSender(rm *Manager) *isrSender {
	return &isrSender{rm: rm, pending: map[*Partition]replication.Proposal{}, wake: make(chan struct{}, 1)}
}

// propose queues p's proposal; a newer one for the same partition
// replaces it.
func (s *isrSender) propose(p *Partition, prop replication.Proposal) {
	s.mu.Lock()
	s.pending[p] = prop
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run sends the queued proposals until the broker closes.
func (s *isrSender) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.rm.closing
		cancel()
	}()
	for {
		select {
		case <-s.rm.closing:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		batch := s.pending
		s.pending = map[*Partition]replication.Proposal{}
		s.mu.Unlock()
		if len(batch) > 0 {
			s.send(ctx, batch)
		}
	}
}

// alterOutcome is the controller's answer for one partition.
type alterOutcome struct {
	state coord.PartitionState
	err   error
}

// send delivers one batch of proposals and applies the outcomes.
func (s *isrSender) send(ctx context.Context, batch map[*Partition]replication.Proposal) {
	rm := s.rm
	epoch := rm.member.CurrentEpoch()
	outcomes := make(map[*Partition]alterOutcome, len(batch))
	rctx, cancel := context.WithTimeout(ctx, alterPartitionTimeout)
	defer cancel()
	if ctrl := rm.member.Controller(); ctrl != nil {
		parts := make([]*Partition, 0, len(batch))
		reqs := make([]controller.AlterPartitionRequest, 0, len(batch))
		for p, prop := range batch {
			parts = append(parts, p)
			reqs = append(reqs, controller.AlterPartitionRequest{
				BrokerID: coord.BrokerID(rm.cfg.BrokerID), BrokerEpoch: epoch,
				Partition:   coord.TopicPartition{Topic: p.topic, Partition: p.index},
				LeaderEpoch: prop.LeaderEpoch, PartitionEpoch: prop.PartitionEpoch, ISR: fromReplicaIDs(prop.ISR),
			})
		}
		res, err := ctrl.AlterPartitions(rctx, reqs)
		for i, p := range parts {
			if err != nil {
				outcomes[p] = alterOutcome{err: err}
			} else {
				outcomes[p] = alterOutcome{state: res[i].State, err: res[i].Err}
			}
		}
	} else {
		outcomes = s.sendRemote(rctx, epoch, batch)
	}
	now := time.Now()
	for p, prop := range batch {
		o := outcomes[p]
		p.repMu.Lock()
		before := p.rep.ISR()
		if o.err == nil {
			if err := p.rep.AlterPartitionCommitted(o.state.LeaderEpoch, o.state.PartitionEpoch, replicaIDs(o.state.ISR), now); err != nil {
				rm.logger.Debug("AlterPartition answer ignored", "partition", p.Name(), "error", err)
			}
		} else {
			p.rep.AlterPartitionFailed(alterFailure(o.err), now)
		}
		rd := p.ready()
		p.repMu.Unlock()
		if o.err == nil {
			shrinks, expands := 0, 0
			if len(o.state.ISR) < len(before) {
				shrinks = 1
			} else if len(o.state.ISR) > len(before) {
				expands = 1
			}
			rm.metrics.ISRChanged(shrinks, expands)
			rm.logger.Info("ISR changed", "partition", p.Name(), "from", before, "to", o.state.ISR,
				"partition_epoch", o.state.PartitionEpoch)
		} else {
			rm.logger.Info("AlterPartition failed", "partition", p.Name(), "proposed_isr", prop.ISR, "error", o.err)
		}
		rm.handleReady(p, rd)
	}
}

// alterFailure says how a failed AlterPartition leaves the proposal: the
// controller's newer state (fenced leader epoch, another partition epoch,
// an unknown partition) arrives in a LeaderAndIsr, so the leader waits for
// it; anything else is tried again.
func alterFailure(err error) replication.AlterOutcome {
	switch {
	case errors.Is(err, controller.ErrFencedLeaderEpoch), errors.Is(err, controller.ErrInvalidUpdateVersion), errors.Is(err, coord.ErrNotFound),
		errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.InvalidUpdateVersion), errors.Is(err, kerr.UnknownTopicOrPartition):
		return replication.AlterAwaitLeaderAndIsr
	}
	return replication.AlterRetry
}

// sendRemote sends the batch as one AlterPartition request to the
// controller.
func (s *isrSender) sendRemote(ctx context.Context, epoch int64, batch map[*Partition]replication.Proposal) map[*Partition]alterOutcome {
	rm := s.rm
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(AlterPartitionVersion)
	req.BrokerID = rm.cfg.BrokerID
	req.BrokerEpoch = epoch
	topics := map[string]int{}
	for p, prop := range batch {
		i, ok := topics[p.topic]
		if !ok {
			i = len(req.Topics)
			topics[p.topic] = i
			t := kmsg.NewAlterPartitionRequestTopic()
			t.Topic = p.topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = p.index
		rp.LeaderEpoch = prop.LeaderEpoch
		rp.PartitionEpoch = prop.PartitionEpoch
		rp.NewISR = coord.Int32s(fromReplicaIDs(prop.ISR))
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	out := make(map[*Partition]alterOutcome, len(batch))
	fail := func(err error) map[*Partition]alterOutcome {
		for p := range batch {
			out[p] = alterOutcome{err: err}
		}
		return out
	}
	kresp, err := rm.member.AskController(ctx, req)
	if err != nil {
		return fail(err)
	}
	resp := kresp.(*kmsg.AlterPartitionResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fail(err)
	}
	byName := map[coord.TopicPartition]*Partition{}
	for p := range batch {
		byName[coord.TopicPartition{Topic: p.topic, Partition: p.index}] = p
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			p := byName[coord.TopicPartition{Topic: t.Topic, Partition: rp.Partition}]
			if p == nil {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				out[p] = alterOutcome{err: err}
				continue
			}
			out[p] = alterOutcome{state: coord.PartitionState{
				Topic: t.Topic, Partition: rp.Partition, Leader: coord.BrokerID(rp.LeaderID),
				LeaderEpoch: rp.LeaderEpoch, ISR: coord.BrokerIDs(rp.ISR), PartitionEpoch: rp.PartitionEpoch,
			}}
		}
	}
	for p := range batch {
		if _, ok := out[p]; !ok {
			out[p] = alterOutcome{err: kerr.UnknownServerError}
		}
	}
	return out
}
