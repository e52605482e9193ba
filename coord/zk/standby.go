package zk

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// standbyWait bounds how long Load waits for the standby view to catch up
// with ZooKeeper before it reads the metadata itself.
const standbyWait = 3 * time.Second

// standbyLanes is how many ZooKeeper sessions of its own the standby view
// reads and watches over: ZooKeeper serves one connection's requests one
// after another (one session read about 2 500 znodes/s on a loaded
// machine, and fell 20 s behind the ISR changes after a 100 000-partition
// CreateTopics). As many as a Load reads over, so that a view catching up
// with any backlog is no slower than reading everything.
const standbyLanes = loadSessions

// The view reads what changed once changes pause for standbyQuiet, or
// once the oldest change it has not read is standbyMaxLag old, and at
// once when a Load waits for it: read as they come, the re-reads of a
// 10 000-partition CreateTopics or failover (every broker reading every
// changed state znode, on the cores the brokers and ZooKeeper share)
// took 1.5-2 s from the topic's readiness and the failover they came
// with.
const (
	standbyQuiet  = 5 * time.Second
	standbyMaxLag = 30 * time.Second
)

// standbyMarker is the type of the marker event Load queues behind a
// lane's watch events (see standby); ZooKeeper's event types are small
// positive numbers and -1.
const standbyMarker zk.EventType = -1000

// standby is a broker's warm copy of the metadata, kept while it
// campaigns, so that the controller it may become loads the metadata
// from memory instead of reading every partition state from ZooKeeper:
// at 100 000 partitions that read took 9 s of a controller failover on a
// loaded machine (1.7 s on an idle one). It is the metadata watcher of
// WatchMetadata (one watch per znode, re-reading what fired), over
// standbyLanes sessions of its own.
//
// Load's barrier is a sync on every lane followed by a marker queued
// behind the watch events each lane has received. ZooKeeper sends a
// session's watch events in order, each before the answer to any request
// it serves after the change, and go-zookeeper hands events to the
// backend's callback before it hands out a later answer; so once the
// view has taken every lane's marker and re-read every znode the events
// before them made stale, it holds every commit made before the syncs,
// wherever each znode's watch was left. A view that does not within
// standbyWait, or that lost a lane's session, is not used.
type standby struct {
	b *Backend
	w *metadataWatcher // the run goroutine's

	mu sync.Mutex
	// lanes are the sessions the view follows; nil while it has none.
	lanes []*standbyLane
	// asked counts the markers queued on each lane; md is the view as of
	// the last answer.
	asked uint64
	md    *coord.Metadata
	// caught announces every growth of a lane's answered and every change
	// of the lanes.
	caught notify.Broadcast
	// served counts the Loads the view answered.
	served atomic.Uint64
}

// standbyLane is one of the view's sessions and its event queue.
type standbyLane struct {
	zs  *zsession
	sub *subscriber
	// answered counts the markers of this lane taken and caught up with
	// (guarded by standby.mu).
	answered uint64
}

// startStandby starts the backend's standby view, once; it runs until the
// backend closes.
func (b *Backend) startStandby() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.standby != nil || b.closed {
		return
	}
	s := &standby{b: b, w: &metadataWatcher{b: b}}
	b.standby = s
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		s.run()
	}()
}

// currentStandby returns the backend's standby view, nil if it has none.
func (b *Backend) currentStandby() *standby {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.standby
}

// run reads the metadata and follows it over the lanes, opening new ones
// when one's session ends, until the backend closes.
func (s *standby) run() {
	b := s.b
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.closing:
		case <-ctx.Done():
		}
		cancel()
	}()
	notify := make(chan struct{}, 1)
	var (
		lanes   []*standbyLane
		pending []uint64 // markers taken per lane, not yet answered
		attempt int
		// staleSince is when the view first missed a change it has not
		// read yet (zero: none), changedAt when the last change came;
		// read is set when the view reads them without waiting.
		staleSince, changedAt time.Time
		read                  bool
	)
	timer := time.NewTimer(standbyMaxLag)
	timer.Stop()
	defer func() {
		s.follow(nil)
		closeLanes(lanes)
	}()
	for ctx.Err() == nil {
		if lanes == nil {
			var err error
			if lanes, err = s.open(ctx, notify); err != nil {
				b.log.Debug("standby metadata: sessions not opened, retrying", "error", err)
				if !wait(ctx, b.closing, backoff(attempt)) {
					return
				}
				attempt++
				continue
			}
			// Everything is stale, and read like any change: a broker
			// that has just started (and is catching up with its
			// leaders) reads it once its first changes pause.
			s.w.reset()
			pending = make([]uint64, len(lanes))
			s.follow(lanes)
			staleSince, changedAt = time.Now(), time.Now()
		}
		ended := false
		now := time.Now()
		for i, l := range lanes {
			evs, e := l.sub.take()
			ended = ended || e
			for _, ev := range evs {
				if ev.Type == standbyMarker {
					pending[i]++
					read = true
					continue
				}
				s.w.note(ev)
				changedAt = now
				if staleSince.IsZero() {
					staleSince = now
				}
			}
		}
		if ended {
			s.follow(nil)
			closeLanes(lanes)
			lanes = nil
			continue
		}
		due := read || now.Sub(changedAt) >= standbyQuiet || now.Sub(staleSince) >= standbyMaxLag
		if s.w.dirty() && due {
			conns := make([]*zk.Conn, len(lanes))
			for i, l := range lanes {
				conns[i] = l.zs.conn
			}
			err := lanes[0].zs.call(ctx, "standby metadata", func(*zk.Conn) error { return s.w.refreshOn(conns) })
			switch {
			case err == nil:
				attempt = 0
			case ctx.Err() != nil:
				return
			default:
				// A lane's session ending shows in its queue; anything else
				// is retried.
				b.log.Debug("standby metadata: refresh failed, retrying", "error", err)
				if !wait(ctx, b.closing, backoff(attempt)) {
					return
				}
				attempt++
				continue
			}
		}
		var wake <-chan time.Time
		if s.w.dirty() {
			timer.Reset(time.Until(earliest(changedAt.Add(standbyQuiet), staleSince.Add(standbyMaxLag))))
			wake = timer.C
		} else {
			staleSince, read = time.Time{}, false
			s.answer(lanes, pending)
		}
		select {
		case <-notify:
		case <-wake:
		case <-ctx.Done():
			return
		}
		timer.Stop()
	}
}

// open opens the view's lanes: sessions of their own, each synced with
// the ZooKeeper leader, whose events all signal notify.
func (s *standby) open(ctx context.Context, notify chan struct{}) ([]*standbyLane, error) {
	b := s.b
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, coord.ErrClosed
	}
	var lanes []*standbyLane
	for range standbyLanes {
		// A lane never reconnects: on a new connection go-zookeeper
		// registers the session's watches again reading the last zxid
		// that its receive loop writes (a data race in v1.0.4), and the
		// view reads everything again on new lanes anyway.
		zs, err := b.newZSessionLockedWith(true)
		if err != nil {
			b.mu.Unlock()
			closeLanes(lanes)
			return nil, err
		}
		lanes = append(lanes, &standbyLane{zs: zs})
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	err := b.syncAll(ctx, "standby metadata", laneSessions(lanes))
	for _, l := range lanes {
		if err != nil {
			break
		}
		var ok bool
		if l.sub, ok = l.zs.subscribeWith(notify); !ok {
			err = errSessionEnded
		}
	}
	if err != nil {
		closeLanes(lanes)
		return nil, err
	}
	return lanes, nil
}

// laneSessions returns the sessions of lanes.
func laneSessions(lanes []*standbyLane) []*zsession {
	zss := make([]*zsession, len(lanes))
	for i, l := range lanes {
		zss[i] = l.zs
	}
	return zss
}

// closeLanes ends and closes lanes' sessions.
func closeLanes(lanes []*standbyLane) {
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.sub != nil {
				l.zs.unsubscribe(l.sub)
			}
			l.zs.end()
			l.zs.close()
		}()
	}
	wg.Wait()
}

// follow records the lanes the view now follows (nil: none), which
// invalidates every marker queued before.
func (s *standby) follow(lanes []*standbyLane) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lanes, s.asked, s.md = lanes, 0, nil
	s.caught.Notify()
}

// answer records that the view has caught up with the markers pending
// on each lane, and clears them.
func (s *standby) answer(lanes []*standbyLane, pending []uint64) {
	some := false
	for _, n := range pending {
		some = some || n > 0
	}
	if !some {
		return
	}
	md := s.w.snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range lanes {
		l.answered += pending[i]
		pending[i] = 0
	}
	s.md = md
	s.caught.Notify()
}

// load returns a copy of the view once it holds every commit made before
// the call; false when it cannot within standbyWait, or within half of
// what is left of ctx, leaving the other half to read the metadata from
// ZooKeeper.
func (s *standby) load(ctx context.Context) (*coord.Metadata, bool) {
	wait := standbyWait
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)/2)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	md, ok := s.barrier(wctx)
	if !ok {
		if wctx.Err() != nil {
			s.b.log.Info("standby metadata behind zookeeper; reading it instead")
		}
		return nil, false
	}
	s.served.Add(1)
	return md.Clone(), true
}

// barrier returns the view, not to be changed, once it holds every
// commit made before the call; false when it cannot before ctx ends or
// the view's lanes change, or when it has none.
func (s *standby) barrier(ctx context.Context) (*coord.Metadata, bool) {
	s.mu.Lock()
	lanes := s.lanes
	s.mu.Unlock()
	if lanes == nil {
		return nil, false
	}
	if s.b.syncAll(ctx, "standby barrier", laneSessions(lanes)) != nil {
		return nil, false
	}
	s.mu.Lock()
	if !sameLanes(s.lanes, lanes) {
		s.mu.Unlock()
		return nil, false
	}
	// Queued under mu, so that every lane's markers keep the tickets'
	// order.
	s.asked++
	ticket := s.asked
	for _, l := range lanes {
		l.sub.push(zk.Event{Type: standbyMarker})
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if !sameLanes(s.lanes, lanes) {
			s.mu.Unlock()
			return nil, false
		}
		caughtUp := true
		for _, l := range lanes {
			caughtUp = caughtUp && l.answered >= ticket
		}
		if caughtUp {
			md := s.md
			s.mu.Unlock()
			return md, true
		}
		caught := s.caught.Next()
		s.mu.Unlock()
		select {
		case <-caught:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// WarmMetadata implements coord.MetadataWarmer: it starts the standby
// view and waits until the view holds every commit made before the
// call, asking it to read what it has not (as a Load does) rather than
// waiting for the changes to pause.
func (b *Backend) WarmMetadata(ctx context.Context) error {
	if !b.cfg.MetadataStandby {
		return nil
	}
	b.startStandby()
	s := b.currentStandby()
	if s == nil {
		return coord.ErrClosed
	}
	for {
		s.mu.Lock()
		open, caught := s.lanes != nil, s.caught.Next()
		s.mu.Unlock()
		if open {
			if _, ok := s.barrier(ctx); ok {
				return nil
			}
		}
		// The view has no lanes yet, or lost them (it opens new ones and
		// says so), or a sync failed: asked again.
		select {
		case <-caught:
		case <-time.After(backoff(0)):
		case <-ctx.Done():
			return ctx.Err()
		case <-b.closing:
			return coord.ErrClosed
		}
	}
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sameLanes reports whether a and b are the same lanes (not a new set).
func sameLanes(a, b []*standbyLane) bool {
	return len(a) > 0 && len(a) == len(b) && a[0] == b[0]
}
