package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// controllerZNode is the JSON of /controller, Kafka's version 2.
type controllerZNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

func encodeController(id coord.BrokerID) []byte {
	data, _ := json.Marshal(controllerZNode{Version: 2, BrokerID: int32(id),
		Timestamp: strconv.FormatInt(time.Now().UnixMilli(), 10)})
	return data
}

// term is one controller tenure: the ephemeral /controller this backend's
// ZooKeeper session created together with its bump of /controller_epoch.
// epochVersion, the version of /controller_epoch that bump produced, fences
// every Commit (Kafka's check op on /controller_epoch).
type term struct {
	b            *Backend
	s            *session
	zs           *zsession
	epoch        int64
	epochVersion int32
	czxid        int64 // of /controller, and the zxid of the election
	ctx          context.Context
	cancel       context.CancelFunc
	watched      chan struct{} // closed when the term's watcher has exited

	mu       sync.Mutex
	ended    bool
	release  bool // /controller must still be given up
	released bool
}

// Campaign implements coord.Elector, as Kafka's
// registerControllerAndIncrementControllerEpoch: one multi creates the
// ephemeral /controller and bumps /controller_epoch with a version check.
// A loser watches /controller and tries again when it is deleted.
func (b *Backend) Campaign(ctx context.Context, cs coord.Session) (coord.Term, error) {
	s, ok := cs.(*session)
	if !ok || s.b != b {
		return nil, fmt.Errorf("campaign: session %T was not opened by this zk backend", cs)
	}
	// A campaigner may become the controller: it keeps the metadata warm
	// for that controller's Load.
	if b.cfg.MetadataStandby {
		b.startStandby()
	}
	// The attempts' context also ends with the session, so a campaign
	// waiting for ZooKeeper to come back returns as soon as s ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-stop:
		}
	}()
	for attempt := 0; ; {
		if err := s.Err(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, watch, err := b.tryElect(ctx, s)
		if t != nil {
			return t, nil
		}
		if err != nil {
			if err := s.Err(); err != nil {
				return nil, err
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, coord.ErrClosed) {
				return nil, err
			}
			b.log.Debug("campaign attempt failed: retrying", "broker", s.broker.ID, "error", err)
			wait(ctx, s.done, backoff(attempt))
			attempt++
			continue
		}
		attempt = 0
		if watch != nil {
			select {
			case <-watch:
			case <-s.done:
			case <-ctx.Done():
			}
		}
	}
}

// tryElect makes one attempt. It returns the term when elected, or a
// channel that fires when /controller changes when another broker holds
// it, or nil and nil when the attempt lost a race and should be retried at
// once.
func (b *Backend) tryElect(ctx context.Context, s *session) (*term, <-chan zk.Event, error) {
	ctrlPath, epochPath := b.path("/controller"), b.path("/controller_epoch")
	var (
		watch        <-chan zk.Event
		epoch        int64
		epochVersion int32
		czxid        int64
		elected      bool
	)
	err := s.zs.call(ctx, ctrlPath, func(c *zk.Conn) error {
		exists, _, ch, err := c.ExistsW(ctrlPath)
		if err != nil {
			return err
		}
		if exists {
			watch = ch
			return nil
		}
		data, stat, err := c.Get(epochPath)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = c.Create(epochPath, []byte("0"), 0, b.aclFor(epochPath))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
			return nil // read it again
		}
		if err != nil {
			return err
		}
		current, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return fmt.Errorf("decode %s %q: %w", epochPath, data, err)
		}
		if c.SessionID() != s.zs.sessionID() {
			return errSessionEnded
		}
		res, err := c.Multi(
			&zk.CreateRequest{Path: ctrlPath, Data: encodeController(s.broker.ID), Acl: b.aclFor(ctrlPath), Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: epochPath, Data: []byte(strconv.FormatInt(current+1, 10)), Version: stat.Version},
		)
		if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) {
			return nil // lost the race: look again
		}
		if err != nil {
			return err
		}
		epoch, epochVersion, czxid, elected = current+1+b.bases().Controller, res[1].Stat.Version, res[1].Stat.Mzxid, true
		return nil
	})
	if errors.Is(err, errSessionEnded) {
		return nil, nil, fmt.Errorf("%w: campaign of broker %d", coord.ErrSessionExpired, s.broker.ID)
	}
	if err != nil {
		return nil, nil, convertError(err, "campaign for "+ctrlPath)
	}
	if !elected {
		return nil, watch, nil
	}
	tctx, cancel := context.WithCancel(context.Background())
	t := &term{b: b, s: s, zs: s.zs, epoch: epoch, epochVersion: epochVersion, czxid: czxid,
		ctx: tctx, cancel: cancel, watched: make(chan struct{})}
	b.mu.Lock()
	open := !b.closed
	if open {
		b.terms[t] = struct{}{}
	}
	b.mu.Unlock()
	if !open || !s.bindTerm(t) {
		// The session ended (or the backend closed) while the multi was in
		// flight: give the controllership up again.
		t.end(true)
		rctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		t.releaseNow(rctx)
		cancel()
		b.untrack(t)
		if !open {
			return nil, nil, fmt.Errorf("%w: campaign of broker %d", coord.ErrClosed, s.broker.ID)
		}
		return nil, nil, s.Err()
	}
	if !b.goTracked(t.watch) {
		t.end(false)
		return nil, nil, fmt.Errorf("%w: campaign of broker %d", coord.ErrClosed, s.broker.ID)
	}
	b.log.Info("elected controller", "broker", s.broker.ID, "epoch", epoch)
	return t, nil, nil
}

func (b *Backend) untrack(t *term) {
	b.mu.Lock()
	delete(b.terms, t)
	b.mu.Unlock()
}

// Controller implements coord.Elector.
func (b *Backend) Controller(ctx context.Context) (coord.ControllerInfo, error) {
	if err := b.ensureBase(ctx); err != nil {
		return coord.ControllerInfo{}, err
	}
	var info coord.ControllerInfo
	err := b.do(ctx, "controller", func(c *zk.Conn) error {
		var err error
		info, _, err = b.readController(c, false)
		return err
	})
	if err != nil {
		return coord.ControllerInfo{}, convertError(err, b.path("/controller"))
	}
	return info, nil
}

// readController reads /controller and /controller_epoch as one consistent
// pair: the election multi creates the one and sets the other in the same
// transaction, so /controller's czxid equals /controller_epoch's mzxid when
// both belong to the same term. The epoch is raised by the controller
// base. With watch set, it leaves an exists watch on /controller
// (returned).
func (b *Backend) readController(c *zk.Conn, watch bool) (coord.ControllerInfo, <-chan zk.Event, error) {
	ctrlPath, epochPath := b.path("/controller"), b.path("/controller_epoch")
	for attempt := 0; ; attempt++ {
		var (
			exists bool
			stat   *zk.Stat
			ch     <-chan zk.Event
			err    error
		)
		if watch {
			exists, stat, ch, err = c.ExistsW(ctrlPath)
		} else {
			exists, stat, err = c.Exists(ctrlPath)
		}
		if err != nil {
			return coord.ControllerInfo{}, nil, err
		}
		var ctrl controllerZNode
		ctrl.BrokerID = int32(coord.NoBroker)
		if exists {
			data, cstat, err := c.Get(ctrlPath)
			switch {
			case errors.Is(err, zk.ErrNoNode):
				exists = false
			case err != nil:
				return coord.ControllerInfo{}, nil, err
			default:
				if err := json.Unmarshal(data, &ctrl); err != nil {
					return coord.ControllerInfo{}, nil, fmt.Errorf("decode %s %q: %w", ctrlPath, data, err)
				}
				stat = cstat
			}
		}
		epoch := b.bases().Controller
		data, estat, err := c.Get(epochPath)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return coord.ControllerInfo{}, nil, err
		default:
			stored, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			if err != nil {
				return coord.ControllerInfo{}, nil, fmt.Errorf("decode %s %q: %w", epochPath, data, err)
			}
			epoch += stored
		}
		if !exists {
			return coord.ControllerInfo{ID: coord.NoBroker, Epoch: epoch}, ch, nil
		}
		if estat != nil && estat.Mzxid == stat.Czxid || attempt >= 10 {
			// After ten torn reads in a row (elections racing the reads),
			// or for a /controller written by something else than an
			// election multi, report what was read.
			return coord.ControllerInfo{ID: coord.BrokerID(ctrl.BrokerID), Epoch: epoch}, ch, nil
		}
		watch = false // the exists watch is set; read again without another
	}
}

// Controller implements coord.Term.
func (t *term) Controller() coord.BrokerID { return t.s.broker.ID }

// Epoch implements coord.Term.
func (t *term) Epoch() int64 { return t.epoch }

// Context implements coord.Term.
func (t *term) Context() context.Context { return t.ctx }

// Done implements coord.Term.
func (t *term) Done() <-chan struct{} { return t.ctx.Done() }

// Resign implements coord.Term: it ends the term and deletes /controller if
// no newer term has replaced it (a multi checking /controller_epoch's
// version). If ZooKeeper cannot be reached before ctx ends, a background
// retry gives it up later.
func (t *term) Resign(ctx context.Context) error {
	t.mu.Lock()
	already := t.ended
	t.mu.Unlock()
	if already {
		return nil
	}
	t.end(true)
	err := t.releaseNow(ctx)
	if err != nil {
		t.b.log.Warn("cannot give up /controller now: retrying in the background", "epoch", t.epoch, "error", err)
	}
	return nil
}

// end ends the term; with release, /controller is still this term's and
// must be given up by the watcher. It returns false if the term had ended.
func (t *term) end(release bool) bool {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return false
	}
	t.ended = true
	t.release = release
	t.mu.Unlock()
	t.cancel()
	if !release {
		t.b.untrack(t)
	}
	return true
}

// releaseNow deletes /controller, fenced by this term's /controller_epoch
// version so that a newer controller's znode is never touched.
func (t *term) releaseNow(ctx context.Context) error {
	ctrlPath, epochPath := t.b.path("/controller"), t.b.path("/controller_epoch")
	err := t.zs.call(ctx, ctrlPath, func(c *zk.Conn) error {
		_, err := c.Multi(
			&zk.CheckVersionRequest{Path: epochPath, Version: t.epochVersion},
			&zk.DeleteRequest{Path: ctrlPath, Version: -1},
		)
		return err
	})
	if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) ||
		errors.Is(err, errSessionEnded) || errors.Is(err, coord.ErrClosed) {
		t.mu.Lock()
		t.released = true
		t.mu.Unlock()
		t.b.untrack(t)
		return nil
	}
	return convertError(err, "resign "+ctrlPath)
}

// watch runs for the term's whole life: it ends the term when /controller
// is deleted or replaced, and afterwards gives /controller up if the term
// ended without doing so (lost contact, or a Resign that could not reach
// ZooKeeper).
func (t *term) watch() {
	defer close(t.watched)
	ctrlPath := t.b.path("/controller")
	for attempt := 0; t.ctx.Err() == nil; {
		var (
			exists bool
			stat   *zk.Stat
			ch     <-chan zk.Event
		)
		err := t.zs.call(t.ctx, ctrlPath, func(c *zk.Conn) error {
			var err error
			exists, stat, ch, err = c.ExistsW(ctrlPath)
			return err
		})
		if err != nil {
			if errors.Is(err, errSessionEnded) {
				t.end(false)
				break
			}
			if t.ctx.Err() == nil && !wait(t.ctx, t.b.closing, backoff(attempt)) {
				break
			}
			attempt++
			continue
		}
		attempt = 0
		if !exists || stat.Czxid != t.czxid {
			if t.end(false) {
				t.b.log.Info("controller term lost: /controller deleted or taken", "epoch", t.epoch)
			}
			break
		}
		select {
		case <-ch:
		case <-t.ctx.Done():
		}
	}
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		pending := t.release && !t.released
		t.mu.Unlock()
		if !pending {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.b.timeout)
		err := t.releaseNow(ctx)
		cancel()
		if err == nil {
			return
		}
		timer := time.NewTimer(backoff(attempt))
		select {
		case <-timer.C:
		case <-t.zs.done:
			timer.Stop()
			return
		case <-t.b.closing:
			timer.Stop()
			return
		}
	}
}

// EvictController implements coord.ControllerEvictor: it deletes
// /controller in one multi with a check of /controller_epoch's version,
// so that a newer term's znode is never touched. info's epoch is compared
// with the one readController reports, raised by the same base.
func (b *Backend) EvictController(ctx context.Context, info coord.ControllerInfo) error {
	if err := b.ensureBase(ctx); err != nil {
		return err
	}
	ctrlPath, epochPath := b.path("/controller"), b.path("/controller_epoch")
	err := b.do(ctx, "evict controller", func(c *zk.Conn) error {
		current, _, err := b.readController(c, false)
		if err != nil {
			return err
		}
		if current != info {
			return nil
		}
		_, estat, err := c.Get(epochPath)
		if err != nil {
			return err
		}
		_, err = c.Multi(
			&zk.CheckVersionRequest{Path: epochPath, Version: estat.Version},
			&zk.DeleteRequest{Path: ctrlPath, Version: -1},
		)
		return err
	})
	if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
		return nil
	}
	return convertError(err, ctrlPath)
}
