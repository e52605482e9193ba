package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// Register implements coord.Registrar. The registration is a log entry;
// its index is the broker epoch.
func (b *Backend) Register(ctx context.Context, br coord.Broker) (coord.Session, error) {
	replaces := br.Replaces
	br.Epoch, br.Replaces = 0, 0
	start := time.Now()
	res, err := b.apply(ctx, fmt.Sprintf("register broker %d", br.ID), &command{Type: cmdRegister, Broker: br, Replaces: replaces})
	if err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	reported := res.Broker
	reported.Epoch = res.Bases.broker(reported.Epoch)
	s := &session{
		b:        b,
		broker:   res.Broker,
		reported: reported,
		replaced: res.Bases.replaced(res.Replaced),
		done:     make(chan struct{}),
		cancel:   cancel,
		ended:    make(chan struct{}),
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		cancel()
		b.deregister(s.broker)
		return nil, fmt.Errorf("%w: register broker %d: backend closed", coord.ErrClosed, br.ID)
	}
	b.sessions[s] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()
	go s.renewLoop(loopCtx, start)
	return s, nil
}

// Members implements coord.Registrar. It is linearizable (see readable).
func (b *Backend) Members(ctx context.Context) ([]coord.Broker, error) {
	if err := b.readable(ctx, "members"); err != nil {
		return nil, err
	}
	members, _ := b.fsm.reportedMembers()
	return members, nil
}

// readable makes a read of the local state machine linearizable: it
// confirms with a quorum that the leader still leads (on a follower
// through the forward RPC), learns the leader's commit index and waits
// until this node has applied it. Without a reachable leader it retries
// until ctx ends or SessionTimeout has passed, then fails with
// ErrUnavailable.
func (b *Backend) readable(ctx context.Context, what string) error {
	var timeout <-chan time.Time
	var last error
	for {
		if b.isClosed() {
			return fmt.Errorf("%w: %s", coord.ErrClosed, what)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %s: %v: %w", coord.ErrUnavailable, what, last, err)
		}
		var index uint64
		var err error
		if lead := b.currentLead(); lead != nil {
			index, err = b.readIndex(ctx, lead)
		} else if addr, _ := b.raft.LeaderWithID(); addr != "" {
			var resp fwdResponse
			resp, err = b.call(ctx, string(addr), fwdRequest{Op: fwdReadIndex})
			index = resp.Index
		} else {
			err = errNotLeader
		}
		if err == nil {
			b.waitApplied(ctx, index)
			if b.fsm.applied() >= index {
				return nil
			}
			continue
		}
		last = err
		b.log.Trace("read waits for a leader", "what", what, "error", err)
		if timeout == nil {
			timer := time.NewTimer(b.cfg.SessionTimeout)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-ctx.Done():
		case <-b.closing:
		case <-timeout:
			return fmt.Errorf("%w: %s: no raft leader reachable for %v: %v", coord.ErrUnavailable, what, b.cfg.SessionTimeout, last)
		case <-time.After(readPoll):
		}
	}
}

// readIndex confirms that this node still leads and returns the index a
// linearizable read must have applied.
func (b *Backend) readIndex(ctx context.Context, lead *leadership) (uint64, error) {
	select {
	case <-lead.ready:
	case <-lead.ctx.Done():
		return 0, errNotLeader
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := b.verifyLeader(); err != nil {
		return 0, err
	}
	// Every write that completed before now was applied by this leader's
	// state machine (a write completes once the leader applied it; a new
	// leader is ready once it applied its predecessors' entries). The
	// commit index would not do: no-op and barrier entries never reach
	// the state machine's index.
	return b.fsm.applied(), nil
}

// readPoll is how often a read waiting for a leader looks again.
const readPoll = 20 * time.Millisecond

// renew renews br's registration with the leader; ErrSessionExpired when
// the leader no longer holds it. local reports that this node is the
// leader and renewed it itself.
func (b *Backend) renew(ctx context.Context, br coord.Broker) (local bool, err error) {
	what := fmt.Sprintf("renew broker %d epoch %d", br.ID, br.Epoch)
	if b.currentLead() != nil {
		return true, translate(what, b.renewLocal(br))
	}
	addr, _ := b.raft.LeaderWithID()
	if addr == "" {
		return false, fmt.Errorf("%w: %s: no raft leader known", coord.ErrUnavailable, what)
	}
	_, err = b.call(ctx, string(addr), fwdRequest{Op: fwdRenew, Broker: br})
	return false, translate(what, err)
}

// renewLocal records a renewal of br on this leader.
func (b *Backend) renewLocal(br coord.Broker) error {
	lead := b.currentLead()
	if lead == nil {
		return errNotLeader
	}
	reg, ok, applied := b.fsm.registration(br.ID)
	if (!ok || reg.Epoch != br.Epoch) && applied >= uint64(br.Epoch) {
		return fmt.Errorf("%w: broker %d epoch %d", coord.ErrSessionExpired, br.ID, br.Epoch)
	}
	// A registration this leader's state machine has not applied yet is
	// renewed all the same: it is in the log.
	lead.mu.Lock()
	lead.renewed[keyOf(br)] = time.Now()
	lead.mu.Unlock()
	return nil
}

// deregister removes br's registration, trying for a bounded time: Close
// must not hang on an unreachable leader (the registration then expires).
func (b *Backend) deregister(br coord.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), min(b.cfg.SessionTimeout/2, time.Second))
	defer cancel()
	_, err := b.apply(ctx, fmt.Sprintf("deregister broker %d", br.ID), &command{Type: cmdDeregister, Broker: br})
	if err != nil && !errors.Is(err, coord.ErrSessionExpired) {
		b.log.Warn("deregister failed; the registration will expire", "broker", br.ID, "epoch", br.Epoch, "error", err)
	}
}

// session is a coord.Session: a registration renewed with the leader
// every SessionTimeout/3 by its renew loop.
type session struct {
	b *Backend
	// broker is the registration as the state machine stores it (the
	// epoch is the log index); reported is it as the session reports it,
	// its epoch raised by the bases in force at registration.
	broker   coord.Broker
	reported coord.Broker
	// replaced is the epoch of the registration Register replaced, as
	// reported, or 0.
	replaced int64
	// done is closed when the session ends; err says why.
	done chan struct{}
	// cancel stops the renew loop; ended is closed when it has returned.
	cancel context.CancelFunc
	ended  chan struct{}

	mu        sync.Mutex
	err       error
	closeOnce sync.Once
}

// Broker implements coord.Session.
func (s *session) Broker() coord.Broker { return s.reported }

// Replaced implements coord.Session.
func (s *session) Replaced() int64 { return s.replaced }

// Done implements coord.Session.
func (s *session) Done() <-chan struct{} { return s.done }

// Err implements coord.Session.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end ends the session with err unless it has ended already.
func (s *session) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	close(s.done)
	s.mu.Unlock()
	s.b.mu.Lock()
	delete(s.b.sessions, s)
	s.b.mu.Unlock()
}

// Close implements coord.Session.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.ended
		if s.Err() == nil {
			s.b.deregister(s.broker)
		}
		s.end(fmt.Errorf("%w: session of broker %d", coord.ErrClosed, s.broker.ID))
	})
	return nil
}

// renewLoop renews the registration every SessionTimeout/3 (sooner after
// a failure) and ends the session as expired when this node has had no
// successful contact with the service for SessionTimeout, or when the
// local state machine shows the registration removed. Contact is a
// successful renewal (counted from its sending) or, on a follower, a
// message from the Raft leader: a leader change makes renewals fail for
// an election's time while the node is still in touch, and the new leader
// gives every registration a fresh timeout.
func (s *session) renewLoop(ctx context.Context, lastOK time.Time) {
	b := s.b
	defer b.wg.Done()
	defer close(s.ended)
	timeout := b.cfg.SessionTimeout
	interval := timeout / 3
	retry := min(timeout/10, 200*time.Millisecond)
	expired := func(why string) {
		s.end(fmt.Errorf("%w: broker %d epoch %d: %s", coord.ErrSessionExpired, s.broker.ID, s.broker.Epoch, why))
	}
	// leaderContact is the last message from a Raft leader seen here.
	// Raft's last-contact time also moves when this node grants a vote or
	// steps down, neither of which is contact with the service: it counts
	// only while a leader is known, and not the step-down stamp.
	var leaderContact time.Time
	// deadline is when the session ends without further contact.
	deadline := func() time.Time {
		b.mu.Lock()
		following, stepDown := b.lead == nil, b.stepDownContact
		b.mu.Unlock()
		addr, _ := b.raft.LeaderWithID()
		if c := b.raft.LastContact(); following && addr != "" && c.After(leaderContact) && c.After(stepDown) {
			leaderContact = c
		}
		if !following {
			// A leader checks its lease at least every lease timeout, so
			// while it leads it heard from a quorum within two of them.
			if c := time.Now().Add(-2 * b.cfg.RaftLeaderLeaseTimeout); c.After(leaderContact) {
				leaderContact = c
			}
		}
		last := lastOK
		if leaderContact.After(last) {
			last = leaderContact
		}
		return last.Add(timeout)
	}
	expiry := time.NewTimer(time.Until(deadline()))
	defer expiry.Stop()
	// The leader's clock for a new registration started at its commit,
	// after lastOK: a Register that returned late (a restarting node still
	// catching up with the log) renews at once rather than a whole
	// interval later, when the registration may already have expired.
	next := time.NewTimer(max(interval-time.Since(lastOK), 0))
	defer next.Stop()
	// sample records leader contact often enough that it lags by little
	// once the leader is gone.
	sample := time.NewTicker(max(timeout/20, 10*time.Millisecond))
	defer sample.Stop()
	changes := b.fsm.changes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sample.C:
			deadline()
		case <-expiry.C:
			if d := time.Until(deadline()); d > 0 {
				expiry.Reset(d)
				continue
			}
			expired("no contact with the service within the session timeout")
			return
		case <-changes:
			changes = b.fsm.changes()
			reg, ok, applied := b.fsm.registration(s.broker.ID)
			if (!ok || reg.Epoch != s.broker.Epoch) && applied >= uint64(s.broker.Epoch) {
				expired("registration removed")
				return
			}
		case <-next.C:
			sent := time.Now()
			renewCtx, cancel := context.WithDeadline(ctx, deadline())
			local, err := b.renew(renewCtx, s.broker)
			cancel()
			switch {
			case err == nil && local:
				// A leader renews by itself; it is in touch with the
				// service only as far as its lease vouches: it heard
				// from a quorum within the lease before now.
				lastOK = sent.Add(-b.cfg.RaftLeaderLeaseTimeout)
				next.Reset(interval)
			case err == nil:
				lastOK = sent
				next.Reset(interval)
			case errors.Is(err, coord.ErrSessionExpired):
				expired("the leader no longer holds the registration")
				return
			case time.Until(deadline()) <= 0:
				expired("no contact with the service within the session timeout")
				return
			default:
				b.log.Debug("renew failed", "broker", s.broker.ID, "error", err)
				next.Reset(retry)
			}
		}
	}
}
