package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
)

// errTermBusy: this node already holds a live term.
var errTermBusy = errors.New("a term of this node is live")

// Campaign implements coord.Elector. The controller is the Raft leader:
// Campaign waits until this node leads and has applied its controller
// claim, whose epoch is derived from the Raft term. A follower asks the
// leader for leadership; a leader without a campaign of its own hands it
// over.
func (b *Backend) Campaign(ctx context.Context, s coord.Session) (coord.Term, error) {
	sess, ok := s.(*session)
	if !ok || sess.b != b {
		return nil, fmt.Errorf("campaign: session %T was not opened by this raft backend", s)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: campaign of broker %d", coord.ErrClosed, sess.broker.ID)
	}
	b.campaigners++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.campaigners--
		b.mu.Unlock()
	}()
	ask := b.askInterval()
	var lastAsk time.Time
	for {
		if err := sess.Err(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b.mu.Lock()
		lead, busy, changed, closed := b.lead, b.term != nil || b.transferring, b.changed.Next(), b.closed
		b.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("%w: campaign of broker %d", coord.ErrClosed, sess.broker.ID)
		}
		if lead != nil && !busy {
			t, err := b.claim(ctx, lead, sess)
			if err == nil {
				return t, nil
			}
			b.log.Debug("controller claim", "broker", sess.broker.ID, "error", err)
			if errors.Is(err, coord.ErrSessionExpired) && sess.Err() != nil {
				return nil, sess.Err()
			}
		} else if lead == nil && time.Since(lastAsk) >= ask && b.mayLead() {
			// An observer never leads: it waits here, asking no one,
			// until it is made a voter.
			lastAsk = time.Now()
			b.askLeadership(ctx, ask)
		}
		select {
		case <-changed:
		case <-ctx.Done():
		case <-sess.Done():
		case <-b.closing:
		case <-time.After(ask):
		}
	}
}

// askInterval is how often a waiting campaigner on a follower asks the
// leader to hand leadership over.
func (b *Backend) askInterval() time.Duration {
	return min(max(b.cfg.RaftHeartbeatTimeout/2, 50*time.Millisecond), 500*time.Millisecond)
}

// askLeadership tells the leader that this node has a campaigner.
func (b *Backend) askLeadership(ctx context.Context, timeout time.Duration) {
	addr, _ := b.raft.LeaderWithID()
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := b.call(ctx, string(addr), fwdRequest{Op: fwdCampaign, From: b.id}); err != nil {
		b.log.Debug("ask for leadership", "leader", addr, "error", err)
	}
}

// campaignRequest handles a follower's request for leadership: a leader
// with no term and no campaign of its own hands leadership to it.
func (b *Backend) campaignRequest(from coord.BrokerID) error {
	if b.currentLead() == nil {
		return errNotLeader
	}
	srv, ok := findServer(b.configuration(), from)
	if !ok || srv.Suffrage != hraft.Voter {
		return fmt.Errorf("campaign request from broker %d: not a raft voter", from)
	}
	addr := string(srv.Address)
	b.mu.Lock()
	b.interest[from] = time.Now()
	transfer := b.term == nil && b.campaigners == 0 && !b.transferring
	if transfer {
		b.transferring = true
	}
	b.mu.Unlock()
	if transfer {
		b.transfer(from, addr)
	}
	return nil
}

// transfer hands Raft leadership to node id, or to the voter with the
// longest log when id is NoBroker. The caller has set b.transferring,
// with no live term on this node: a leader holding a term never hands
// over, because the new leader is elected at once, without waiting for
// this node's lease to run out. No claim is made here until the transfer
// has ended.
func (b *Backend) transfer(id coord.BrokerID, addr string) {
	b.raftOps.RLock()
	select {
	case <-b.closing:
		b.raftOps.RUnlock()
		b.mu.Lock()
		b.transferring = false
		b.mu.Unlock()
		return
	default:
	}
	b.log.Debug("handing raft leadership over", "to", id)
	var f hraft.Future
	if id == coord.NoBroker {
		f = b.raft.LeadershipTransfer()
	} else {
		f = b.raft.LeadershipTransferToServer(serverID(id), raftAddr(addr))
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		// Raft answers within two election timeouts; Close waits for it
		// (raftOps) before shutting Raft down.
		err := f.Error()
		b.raftOps.RUnlock()
		if err != nil {
			b.log.Debug("leadership transfer", "to", id, "error", err)
		}
		b.mu.Lock()
		b.transferring = false
		b.changed.Notify()
		b.mu.Unlock()
	}()
}

// interestedNode returns a node that asked for leadership recently.
func (b *Backend) interestedNode() (coord.BrokerID, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var best coord.BrokerID
	var bestAt time.Time
	for id, at := range b.interest {
		if time.Since(at) > 3*b.askInterval() {
			delete(b.interest, id)
			continue
		}
		if at.After(bestAt) {
			best, bestAt = id, at
		}
	}
	return best, !bestAt.IsZero()
}

// claim applies this node's controller claim for sess while lead lasts and
// returns the new term.
func (b *Backend) claim(ctx context.Context, lead *leadership, sess *session) (*term, error) {
	select {
	case <-lead.ready:
	case <-lead.ctx.Done():
		return nil, errNotLeader
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-sess.Done():
		return nil, sess.Err()
	}
	b.claimMu.Lock()
	defer b.claimMu.Unlock()
	b.mu.Lock()
	busy := b.term != nil || b.transferring
	b.mu.Unlock()
	if busy {
		return nil, errTermBusy
	}
	applyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lead.ctx, cancel)
	defer stop()
	res, err := b.applyLocal(applyCtx, &command{Type: cmdClaim, Broker: sess.broker})
	if err != nil {
		return nil, err
	}
	termCtx, termCancel := context.WithCancelCause(lead.ctx)
	t := &term{b: b, sess: sess, epoch: res.Epoch, reported: res.Bases.controller(res.Epoch), ctx: termCtx, cancel: termCancel}
	b.mu.Lock()
	if lead.ctx.Err() != nil || b.closed {
		b.mu.Unlock()
		termCancel(errNotLeader)
		return nil, errNotLeader
	}
	b.term = t
	b.wg.Add(1)
	b.changed.Notify()
	b.mu.Unlock()
	go t.watch()
	b.log.Info("controller elected", "broker", sess.broker.ID, "epoch", t.reported)
	return t, nil
}

// Controller implements coord.Elector. It is linearizable (see readable).
func (b *Backend) Controller(ctx context.Context) (coord.ControllerInfo, error) {
	if err := b.readable(ctx, "controller"); err != nil {
		return coord.ControllerInfo{ID: coord.NoBroker}, err
	}
	info, _ := b.fsm.reportedController()
	return info, nil
}

// term is a coord.Term: this node's tenure as controller, cancelled when
// Raft leadership is lost, the session ends, or on Resign.
type term struct {
	b    *Backend
	sess *session
	// epoch is the controller epoch as the state machine stores it, which
	// the term's entries carry; reported is it raised by the bases in
	// force at the claim (Epoch).
	epoch    int64
	reported int64
	// ctx is the term's own lifetime, handed out by Context.
	ctx    context.Context
	cancel context.CancelCauseFunc

	resignOnce sync.Once
}

// watch ends the term when its session ends, and forgets it when it ends.
func (t *term) watch() {
	defer t.b.wg.Done()
	select {
	case <-t.ctx.Done():
	case <-t.sess.Done():
		t.cancel(t.sess.Err())
	case <-t.b.closing:
		t.cancel(coord.ErrClosed)
	}
	t.b.mu.Lock()
	if t.b.term == t {
		t.b.term = nil
		t.b.changed.Notify()
	}
	t.b.mu.Unlock()
	t.b.log.Info("controller term ended", "broker", t.sess.broker.ID, "epoch", t.reported, "cause", context.Cause(t.ctx))
}

// Controller implements coord.Term.
func (t *term) Controller() coord.BrokerID { return t.sess.broker.ID }

// Epoch implements coord.Term.
func (t *term) Epoch() int64 { return t.reported }

// Context implements coord.Term.
func (t *term) Context() context.Context { return t.ctx }

// Done implements coord.Term.
func (t *term) Done() <-chan struct{} { return t.ctx.Done() }

// Resign implements coord.Term: it ends the term, clears the controller
// and hands Raft leadership to a node that is campaigning, if any.
func (t *term) Resign(ctx context.Context) error {
	if t.ctx.Err() != nil {
		return nil
	}
	t.resignOnce.Do(func() {
		b := t.b
		// No claim of this node may slip in before the hand-over: mark the
		// transfer before the term's end wakes any campaigner.
		b.mu.Lock()
		if b.term == t {
			b.term = nil
		}
		leading := b.lead != nil && !b.transferring
		if leading {
			b.transferring = true
		}
		b.mu.Unlock()
		t.cancel(fmt.Errorf("%w: controller %d resigned", coord.ErrClosed, t.sess.broker.ID))
		if !leading {
			return
		}
		// The term has ended whatever the release's fate: if leadership
		// is lost meanwhile, the next leader's claim replaces it.
		if _, err := b.applyLocal(ctx, &command{Type: cmdRelease, Epoch: t.epoch}); err != nil {
			b.log.Debug("release controller", "broker", t.sess.broker.ID, "epoch", t.epoch, "error", err)
		}
		id, interested := b.interestedNode()
		srv, member := findServer(b.configuration(), id)
		if interested && member && srv.Suffrage == hraft.Voter {
			b.transfer(id, string(srv.Address))
		} else {
			b.mu.Lock()
			b.transferring = false
			b.changed.Notify()
			b.mu.Unlock()
		}
	})
	return nil
}
