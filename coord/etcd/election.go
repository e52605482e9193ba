package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// controllerValue is the election key's value, as Kafka writes /controller.
type controllerValue struct {
	Version  int            `json:"version"`
	BrokerID coord.BrokerID `json:"brokerid"`
}

// retryDelay is how long Campaign and the watches wait before trying an
// unreachable etcd again.
const retryDelay = 100 * time.Millisecond

// term is one controllership: the election key <prefix>/controller created
// by this session's lease. Its epoch is the key's create revision; it
// reports it raised by base, the controller epoch base.
type term struct {
	s      *session
	epoch  int64
	base   int64
	ctx    context.Context
	cancel context.CancelFunc
}

// Campaign implements coord.Elector.
//
// A campaigner creates the election key if it is absent (bound to its
// session's lease) and otherwise watches it until it is deleted, then tries
// again, as Kafka brokers race for /controller.
func (b *Backend) Campaign(ctx context.Context, cs coord.Session) (coord.Term, error) {
	s, err := b.ownSession(cs)
	if err != nil {
		return nil, err
	}
	// A campaigner may become the controller: it keeps the metadata warm
	// for that controller's Load.
	if b.cfg.MetadataStandby {
		b.startStandby()
	}
	select {
	case s.campaign <- struct{}{}:
		defer func() { <-s.campaign }()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.Done():
		return nil, s.Err()
	}
	key := b.controllerKey()
	value, err := json.Marshal(controllerValue{Version: 1, BrokerID: s.broker.ID})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	// cctx also ends with the session, so an unreachable etcd cannot hold
	// a campaign past its session's expiry.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	for {
		if err := s.Err(); err != nil {
			return nil, err
		}
		// The term reports its epoch raised by the record's base.
		if _, err := b.record(cctx); err != nil {
			if cctx.Err() != nil {
				if err := s.Err(); err != nil {
					return nil, err
				}
				return nil, ctx.Err()
			}
			if err := waitRetry(ctx, s); err != nil {
				return nil, err
			}
			continue
		}
		resp, err := b.client.Txn(cctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(value), clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			if cctx.Err() != nil {
				// The create may have happened: leave no key behind that
				// would make this broker a controller nobody knows of.
				s.mu.Lock()
				s.orphanUnknown = true
				s.mu.Unlock()
				if err := s.Err(); err != nil {
					return nil, err
				}
				return nil, ctx.Err()
			}
			b.log.Debug("campaign: etcd unreachable, retrying", "broker", s.broker.ID, "error", err)
			if err := waitRetry(ctx, s); err != nil {
				return nil, err
			}
			continue
		}
		if resp.Succeeded {
			return s.newTerm(resp.Header.Revision)
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		holder := kvs[0]
		if clientv3.LeaseID(holder.Lease) == s.lease {
			if s.hasEnded(holder.CreateRevision) {
				if !s.deleteElectionKey(cctx, holder.CreateRevision) {
					if err := waitRetry(ctx, s); err != nil {
						return nil, err
					}
				}
				continue
			}
			// An earlier campaign of this session created the key but did
			// not learn it: this is that term.
			return s.newTerm(holder.CreateRevision)
		}
		if err := b.waitDeleted(ctx, s, key, resp.Header.Revision); err != nil {
			return nil, err
		}
	}
}

// ownSession returns cs as a session of this backend.
func (b *Backend) ownSession(cs coord.Session) (*session, error) {
	s, ok := cs.(*session)
	if !ok || s.b != b {
		return nil, fmt.Errorf("etcd campaign: session of broker %d was not registered through this backend", cs.Broker().ID)
	}
	if b.isClosed() {
		return nil, fmt.Errorf("%w: campaign of broker %d", coord.ErrClosed, s.broker.ID)
	}
	return s, nil
}

// waitRetry waits retryDelay, or returns why the campaign must stop.
func waitRetry(ctx context.Context, s *session) error {
	timer := time.NewTimer(retryDelay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.Done():
		return s.Err()
	}
}

// waitDeleted returns nil once key has been deleted after revision rev (or
// the watch broke and the caller should look again), or the reason to stop.
func (b *Backend) waitDeleted(ctx context.Context, s *session, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	for resp := range b.client.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut()) {
		if resp.Err() != nil || resp.Canceled {
			break
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := s.Err(); err != nil {
		return err
	}
	return waitRetry(ctx, s)
}

// newTerm starts the term of the election key created at revision epoch.
func (s *session) newTerm(epoch int64) (coord.Term, error) {
	t := &term{s: s, epoch: epoch, base: s.b.bases().Controller}
	t.ctx, t.cancel = context.WithCancel(s.life)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		t.cancel()
		return nil, err
	}
	s.terms[t] = struct{}{}
	s.orphanUnknown = false
	s.wg.Add(1)
	s.mu.Unlock()
	go t.watch()
	s.b.log.Info("elected controller", "broker", s.broker.ID, "epoch", t.Epoch())
	return t, nil
}

// loseTerms ends every term of the session because its lease could not be
// confirmed in time; their election keys are deleted once etcd answers.
func (s *session) loseTerms() {
	s.mu.Lock()
	terms := s.terms
	s.terms = map[*term]struct{}{}
	for t := range terms {
		s.orphans[t.epoch] = struct{}{}
		s.ended[t.epoch] = struct{}{}
	}
	s.mu.Unlock()
	for t := range terms {
		s.b.log.Warn("controller term lost: lease not confirmed in time", "broker", s.broker.ID, "epoch", t.Epoch())
		t.cancel()
	}
}

// forget ends t without touching its key; orphan also marks the key for
// deletion by the session loop.
func (s *session) forget(t *term, orphan bool) {
	s.mu.Lock()
	delete(s.terms, t)
	s.ended[t.epoch] = struct{}{}
	if orphan {
		s.orphans[t.epoch] = struct{}{}
	}
	s.mu.Unlock()
	t.cancel()
}

// hasEnded reports whether the term of epoch was won by this session and
// has ended.
func (s *session) hasEnded(epoch int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ended[epoch]
	return ok
}

// deleteElectionKey deletes the election key if it is still the one
// created at epoch; it reports whether etcd answered.
func (s *session) deleteElectionKey(ctx context.Context, epoch int64) bool {
	key := s.b.controllerKey()
	_, err := s.b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", epoch)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false
	}
	s.mu.Lock()
	delete(s.orphans, epoch)
	s.mu.Unlock()
	return true
}

// deleteOrphans deletes the election keys of terms that ended here while
// etcd could not be told, each call bounded by timeout.
func (s *session) deleteOrphans(timeout time.Duration) {
	s.mu.Lock()
	epochs := make([]int64, 0, len(s.orphans))
	for e := range s.orphans {
		epochs = append(epochs, e)
	}
	unknown := s.orphanUnknown
	s.mu.Unlock()
	for _, e := range epochs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		s.deleteElectionKey(ctx, e)
		cancel()
	}
	if !unknown {
		return
	}
	// A campaign may be running: it resolves the doubt itself.
	select {
	case s.campaign <- struct{}{}:
		defer func() { <-s.campaign }()
	default:
		return
	}
	s.mu.Lock()
	live := len(s.terms) > 0
	s.mu.Unlock()
	if live {
		return
	}
	key := s.b.controllerKey()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := s.b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", s.lease)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err == nil {
		s.mu.Lock()
		s.orphanUnknown = false
		s.mu.Unlock()
	}
}

// Controller implements coord.Term.
func (t *term) Controller() coord.BrokerID { return t.s.broker.ID }

// Epoch implements coord.Term.
func (t *term) Epoch() int64 { return t.epoch + t.base }

// Context implements coord.Term.
func (t *term) Context() context.Context { return t.ctx }

// Done implements coord.Term.
func (t *term) Done() <-chan struct{} { return t.ctx.Done() }

// Resign implements coord.Term.
func (t *term) Resign(ctx context.Context) error {
	if t.ctx.Err() != nil {
		return nil
	}
	t.s.forget(t, true)
	if !t.s.deleteElectionKey(ctx, t.epoch) {
		// The session loop deletes it once etcd answers; the lease
		// bounds how long it can outlive us.
		return fmt.Errorf("%w: resign controller epoch %d: delete %s", coord.ErrUnavailable, t.Epoch(), t.s.b.controllerKey())
	}
	return nil
}

// watch ends the term when its election key is deleted or replaced (the
// lease expired in etcd, or someone removed the key).
func (t *term) watch() {
	defer t.s.wg.Done()
	b := t.s.b
	key := b.controllerKey()
	rev := t.epoch
	for t.ctx.Err() == nil {
		if t.watchOnce(key, &rev) {
			b.log.Warn("controller term lost: election key gone", "broker", t.s.broker.ID, "epoch", t.Epoch())
			t.s.forget(t, false)
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		// The watch broke (compaction, etcd restart): look at the key.
		ctx, cancel := context.WithTimeout(t.ctx, retryDelay*5)
		resp, err := b.client.Get(ctx, key)
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.epoch {
				t.s.forget(t, false)
				return
			}
			rev = resp.Header.Revision
			continue
		}
		timer := time.NewTimer(retryDelay)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// watchOnce watches key from *rev+1 until the term's key is deleted or
// replaced (true), or the watch breaks or the term ends (false); *rev
// advances past the events seen.
func (t *term) watchOnce(key string, rev *int64) bool {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	for resp := range t.s.b.client.Watch(ctx, key, clientv3.WithRev(*rev+1)) {
		if resp.Err() != nil || resp.Canceled {
			return false
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != t.epoch {
				return true
			}
			*rev = ev.Kv.ModRevision
		}
	}
	return false
}

// Controller implements coord.Elector.
func (b *Backend) Controller(ctx context.Context) (coord.ControllerInfo, error) {
	if b.isClosed() {
		return coord.ControllerInfo{ID: coord.NoBroker}, fmt.Errorf("%w: controller", coord.ErrClosed)
	}
	if _, err := b.record(ctx); err != nil {
		return coord.ControllerInfo{ID: coord.NoBroker}, err
	}
	info, _, err := b.loadController(ctx)
	info.Epoch = raiseEpoch(info.Epoch, b.bases().Controller)
	return info, err
}

// loadController reads the election key and the revision it was read at;
// the epoch is etcd's own, not raised.
func (b *Backend) loadController(ctx context.Context) (coord.ControllerInfo, int64, error) {
	key := b.controllerKey()
	resp, err := b.client.Get(ctx, key)
	if err != nil {
		return coord.ControllerInfo{ID: coord.NoBroker}, 0, b.convertError(err, key)
	}
	if len(resp.Kvs) == 0 {
		return coord.ControllerInfo{ID: coord.NoBroker}, resp.Header.Revision, nil
	}
	info, err := decodeController(resp.Kvs[0])
	return info, resp.Header.Revision, err
}

func decodeController(kv *mvccpb.KeyValue) (coord.ControllerInfo, error) {
	var v controllerValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return coord.ControllerInfo{ID: coord.NoBroker}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return coord.ControllerInfo{ID: v.BrokerID, Epoch: kv.CreateRevision}, nil
}

// EvictController implements coord.ControllerEvictor: it deletes the
// election key if its create revision (the epoch, lowered by the base)
// is still info's.
func (b *Backend) EvictController(ctx context.Context, info coord.ControllerInfo) error {
	if b.isClosed() {
		return fmt.Errorf("%w: evict controller", coord.ErrClosed)
	}
	key := b.controllerKey()
	if _, err := b.record(ctx); err != nil {
		return err
	}
	current, _, err := b.loadController(ctx)
	if err != nil {
		return err
	}
	if current.ID != info.ID || current.Epoch == 0 || current.Epoch+b.bases().Controller != info.Epoch {
		return nil
	}
	_, err = b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", current.Epoch)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return b.convertError(err, key)
	}
	return nil
}
