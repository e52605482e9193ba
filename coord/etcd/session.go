package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// session is a broker registration: the key <prefix>/brokers/ids/N bound to
// a lease that the session's loop renews every SessionTimeout/5.
//
// The loop also keeps the client-side timers of the contract: the session
// ends (ErrSessionExpired) once no renewal has succeeded for SessionTimeout,
// and every Term bound to it ends once none has succeeded for 2/3 of it, so
// a process cut off from etcd gives up the controllership before etcd
// expires its lease and lets another broker win.
type session struct {
	b      *Backend
	broker coord.Broker
	// replaced is the epoch of the registration Register replaced, or 0.
	replaced int64
	lease    clientv3.LeaseID
	key      string

	// life is cancelled when the session ends; terms derive from it.
	life    context.Context
	endLife context.CancelFunc

	// campaign admits one Campaign at a time on this session.
	campaign chan struct{}

	stop      chan struct{} // closed by Close: the loop exits
	closeOnce sync.Once
	wg        sync.WaitGroup // the loop and the terms' watchers

	mu        sync.Mutex
	err       error
	lastRenew time.Time // send time of the last successful renewal
	terms     map[*term]struct{}
	// orphans are create revisions of election keys of this lease whose
	// terms ended here while the key may still exist; the loop deletes them.
	orphans map[int64]struct{}
	// ended holds the epochs of every term of this session that has
	// ended, so that a campaign never adopts an election key of a term
	// that is over (its deletion may still be on its way).
	ended map[int64]struct{}
	// orphanUnknown: a campaign ended with its create in doubt; the loop
	// deletes an election key of this lease unless a live term holds it.
	orphanUnknown bool
}

// Register implements coord.Registrar.
func (b *Backend) Register(ctx context.Context, br coord.Broker) (coord.Session, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: register broker %d", coord.ErrClosed, br.ID)
	}
	key := b.brokerKey(br.ID)
	if _, err := b.record(ctx); err != nil {
		return nil, err
	}
	base := b.bases().Broker
	start := time.Now()
	grant, err := b.client.Grant(ctx, b.ttl)
	if err != nil {
		return nil, b.convertError(err, fmt.Sprintf("grant lease for broker %d", br.ID))
	}
	if grant.TTL > b.ttl {
		b.log.Warn("etcd granted a longer lease than the session timeout: etcd expires a crashed broker later than configured (lower etcd's --election-timeout to grant shorter leases)",
			"broker", br.ID, "requested_ttl_s", b.ttl, "granted_ttl_s", grant.TTL)
	}
	// Replaces is a reported epoch: etcd's own is the create revision
	// below the base. One at or below the base was reported by the
	// backend a migration came from, and replaces nothing here.
	replaces := max(br.Replaces-base, 0)
	br.Epoch, br.Replaces = 0, 0
	value, err := json.Marshal(br)
	if err != nil {
		b.revokeLater(grant.ID)
		return nil, fmt.Errorf("encode broker %d: %w", br.ID, err)
	}
	create := func() (*clientv3.TxnResponse, error) {
		return b.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(value), clientv3.WithLease(grant.ID))).
			Commit()
	}
	resp, err := create()
	var replaced int64
	if err == nil && !resp.Succeeded && replaces != 0 {
		replaced, err = b.replaceDead(ctx, key, replaces)
		if err == nil && replaced != 0 {
			replaced += base
			resp, err = create()
		}
	}
	if err != nil {
		b.revokeLater(grant.ID)
		return nil, b.convertError(err, key)
	}
	if !resp.Succeeded {
		b.revokeLater(grant.ID)
		return nil, fmt.Errorf("%w: broker %d is registered at %s", coord.ErrExists, br.ID, key)
	}
	br.Epoch = resp.Header.Revision + base
	s := &session{
		b:         b,
		broker:    br,
		replaced:  replaced,
		lease:     grant.ID,
		key:       key,
		campaign:  make(chan struct{}, 1),
		stop:      make(chan struct{}),
		lastRenew: start,
		terms:     map[*term]struct{}{},
		orphans:   map[int64]struct{}{},
		ended:     map[int64]struct{}{},
	}
	s.life, s.endLife = context.WithCancel(context.Background())

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.end(coord.ErrClosed)
		b.revokeLater(grant.ID)
		return nil, fmt.Errorf("%w: register broker %d", coord.ErrClosed, br.ID)
	}
	b.sessions[s] = struct{}{}
	s.wg.Add(1)
	b.mu.Unlock()
	go s.loop()
	b.log.Debug("registered", "broker", br.ID, "epoch", br.Epoch, "lease", int64(grant.ID), "replaced", replaced)
	return s, nil
}

// replaceDead deletes the registration at key if its create revision is
// epoch, the registration of a dead incarnation, and revokes its lease so
// that its election key goes too. It returns epoch if it deleted the key,
// 0 if the key holds another registration (or none).
func (b *Backend) replaceDead(ctx context.Context, key string, epoch int64) (int64, error) {
	resp, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", epoch)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Commit()
	if err != nil || !resp.Succeeded {
		return 0, err
	}
	if del := resp.Responses[0].GetResponseDeleteRange(); del != nil && len(del.PrevKvs) == 1 && del.PrevKvs[0].Lease != 0 {
		lease := clientv3.LeaseID(del.PrevKvs[0].Lease)
		if _, err := b.client.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The lease expires by itself; the registration is gone.
			b.log.Warn("cannot revoke the lease of a replaced registration", "key", key, "lease", int64(lease), "error", b.convertError(err, key))
		}
	}
	return epoch, nil
}

// revokeLater revokes a lease that no session owns, in a goroutine owned by
// the backend; a lease that cannot be revoked expires by itself.
func (b *Backend) revokeLater(id clientv3.LeaseID) {
	b.goOwned(func() {
		ctx, cancel := b.withLife(context.Background())
		defer cancel()
		ctx, cancelT := context.WithTimeout(ctx, b.cfg.SessionTimeout)
		defer cancelT()
		b.client.Revoke(ctx, id)
	})
}

// Members implements coord.Registrar.
func (b *Backend) Members(ctx context.Context) ([]coord.Broker, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: members", coord.ErrClosed)
	}
	if _, err := b.record(ctx); err != nil {
		return nil, err
	}
	base := b.bases().Broker
	members, _, err := b.loadMembers(ctx)
	for i := range members {
		members[i].Epoch += base
	}
	return members, err
}

// loadMembers reads the live brokers and the revision they were read at;
// their epochs are etcd's own, not raised.
func (b *Backend) loadMembers(ctx context.Context) ([]coord.Broker, int64, error) {
	resp, err := b.client.Get(ctx, b.brokersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, b.convertError(err, b.brokersPrefix())
	}
	members := make([]coord.Broker, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		br, err := decodeBroker(kv)
		if err != nil {
			b.log.Warn("skipping unreadable registration", "key", string(kv.Key), "error", err)
			continue
		}
		members = append(members, br)
	}
	sortBrokers(members)
	return members, resp.Header.Revision, nil
}

func decodeBroker(kv *mvccpb.KeyValue) (coord.Broker, error) {
	var br coord.Broker
	if err := json.Unmarshal(kv.Value, &br); err != nil {
		return br, fmt.Errorf("decode registration %s: %w", kv.Key, err)
	}
	br.Epoch = kv.CreateRevision
	return br, nil
}

func sortBrokers(brokers []coord.Broker) {
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].ID < brokers[j].ID })
}

// Broker implements coord.Session.
func (s *session) Broker() coord.Broker { return s.broker }

// Replaced implements coord.Session.
func (s *session) Replaced() int64 { return s.replaced }

// Done implements coord.Session.
func (s *session) Done() <-chan struct{} { return s.life.Done() }

// Err implements coord.Session.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close implements coord.Session.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		expired := s.Err() != nil
		s.end(coord.ErrClosed)
		close(s.stop)
		s.wg.Wait()
		// The lease goes with its keys: the registration and any election
		// key vanish at once. If etcd is unreachable they expire instead,
		// as they are expected to for a session that expired already.
		ctx, cancel := context.WithTimeout(context.Background(), s.revokeTimeout())
		if _, err := s.b.client.Revoke(ctx, s.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			log := s.b.log.Warn
			if expired {
				log = s.b.log.Debug
			}
			log("revoke lease on close", "broker", s.broker.ID, "error", s.b.convertError(err, s.key))
		}
		cancel()
		s.b.mu.Lock()
		delete(s.b.sessions, s)
		s.b.mu.Unlock()
	})
	return nil
}

func (s *session) revokeTimeout() time.Duration {
	return min(s.b.cfg.SessionTimeout/2, time.Second)
}

// end ends the session with err (the first error sticks) and every term
// bound to it.
func (s *session) end(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	terms := s.terms
	s.terms = map[*term]struct{}{}
	for t := range terms {
		s.ended[t.epoch] = struct{}{}
	}
	s.mu.Unlock()
	for t := range terms {
		t.cancel()
	}
	s.endLife()
}

// renewInterval is how often the loop renews the lease.
func (s *session) renewInterval() time.Duration {
	return max(s.b.cfg.SessionTimeout/5, 20*time.Millisecond)
}

// loop renews the lease, enforces the client-side deadlines and deletes
// orphaned election keys until Close; once the session has expired it
// keeps trying to revoke the lease, so a registration that etcd still
// holds (etcd was unreachable, or restarted and extended its leases) goes
// as soon as etcd answers.
func (s *session) loop() {
	defer s.wg.Done()
	timeout := s.b.cfg.SessionTimeout
	termTimeout := timeout * 2 / 3
	interval := s.renewInterval()
	nextRenew := time.Now().Add(interval)
	for {
		s.mu.Lock()
		last, liveTerms, ended := s.lastRenew, len(s.terms) > 0, s.err != nil
		s.mu.Unlock()
		if ended {
			break
		}
		now := time.Now()
		sessionDeadline := last.Add(timeout)
		termDeadline := last.Add(termTimeout)
		if !now.Before(sessionDeadline) {
			s.b.log.Warn("session expired: no lease renewal within the session timeout",
				"broker", s.broker.ID, "timeout", timeout)
			s.end(fmt.Errorf("%w: broker %d: no renewal of lease %x for %v", coord.ErrSessionExpired, s.broker.ID, int64(s.lease), timeout))
			break
		}
		if liveTerms && !now.Before(termDeadline) {
			s.loseTerms()
			liveTerms = false
		}
		if !now.Before(nextRenew) {
			nextRenew = now.Add(interval)
			// A slow renewal still counts if it lands before a deadline:
			// its send time is what extends them.
			callTimeout := min(2*interval, sessionDeadline.Sub(now))
			if liveTerms {
				callTimeout = min(callTimeout, termDeadline.Sub(now))
			}
			if s.renew(callTimeout) {
				s.deleteOrphans(interval)
			}
			continue
		}
		wake := min(nextRenew.Sub(now), sessionDeadline.Sub(now))
		if liveTerms {
			wake = min(wake, termDeadline.Sub(now))
		}
		timer := time.NewTimer(wake)
		select {
		case <-s.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
	s.revokeUntilGone(interval)
}

// renew sends one keep-alive; it reports whether it succeeded and ends the
// session when etcd no longer knows the lease.
func (s *session) renew(timeout time.Duration) bool {
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := s.b.client.KeepAliveOnce(ctx, s.lease)
	switch {
	case err == nil:
		s.mu.Lock()
		if sent.After(s.lastRenew) {
			s.lastRenew = sent
		}
		s.mu.Unlock()
		return true
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.b.log.Warn("session expired: etcd revoked the lease", "broker", s.broker.ID)
		s.end(fmt.Errorf("%w: broker %d: lease %x expired in etcd", coord.ErrSessionExpired, s.broker.ID, int64(s.lease)))
		return false
	default:
		s.b.log.Debug("lease renewal failed", "broker", s.broker.ID, "error", err)
		return false
	}
}

// revokeUntilGone revokes the lease of an expired session until etcd
// confirms it is gone or the session is closed.
func (s *session) revokeUntilGone(interval time.Duration) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		_, err := s.b.client.Revoke(ctx, s.lease)
		cancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return
		}
		timer := time.NewTimer(interval)
		select {
		case <-s.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
