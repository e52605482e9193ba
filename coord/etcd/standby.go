package etcd

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// standbyWait bounds how long Load waits for the standby view to catch up
// with etcd before it reads the metadata itself.
const standbyWait = 3 * time.Second

// standby is a broker's warm copy of the metadata, kept while it
// campaigns, so that the controller it may become loads the metadata
// from memory instead of reading every partition state from etcd (Load):
// at 100 000 partitions that read took 2 to 5 s of a controller failover
// on a loaded machine, while the copy costs tens of milliseconds. It is
// what a KRaft broker's replay of the metadata log gives a new
// controller, built on an etcd watch.
//
// The view is complete up to synced: every event up to that revision has
// been applied. Load writes a barrier key inside the watched range and
// waits for the view to reach that write's revision; a view that does not
// within standbyWait, or is reloading after its watch broke, is not used.
type standby struct {
	b *Backend

	mu     sync.Mutex
	md     *coord.Metadata // nil until first loaded
	synced int64
	// caught announces every growth of synced.
	caught notify.Broadcast
	// served counts the Loads the view answered.
	served atomic.Uint64
}

// startStandby starts the backend's standby view, once; it runs until the
// backend closes.
func (b *Backend) startStandby() {
	b.standbyOnce.Do(func() {
		s := &standby{b: b}
		ctx, cancel := b.withLife(context.Background())
		if b.goOwned(func() {
			defer cancel()
			s.run(ctx)
		}) {
			b.standby.Store(s)
		} else {
			cancel()
		}
	})
}

// run loads the metadata and follows it until ctx ends, loading it again
// whenever the watch breaks (a compaction, a lost connection).
func (s *standby) run(ctx context.Context) {
	b := s.b
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, reloadTimeout)
		md, err := b.loadMetadata(lctx)
		cancel()
		if err != nil {
			b.log.Debug("standby metadata: load failed, retrying", "error", err)
			timer := time.NewTimer(retryDelay)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
			continue
		}
		s.mu.Lock()
		s.md = md
		s.mu.Unlock()
		s.advance(md.Version)
		s.follow(ctx, md.Version)
	}
}

// follow applies the watch's events from revision rev+1 until the watch
// breaks or ctx ends; the view is then unusable until reloaded.
func (s *standby) follow(ctx context.Context, rev int64) {
	b := s.b
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := b.client.Watch(wctx, b.partitionsPrefix(), clientv3.WithRange(b.metadataRangeEnd()), clientv3.WithRev(rev+1))
	defer func() {
		s.mu.Lock()
		s.md = nil
		s.mu.Unlock()
		cancel()
		for range wch {
		}
	}()
	for resp := range wch {
		if resp.Err() != nil || resp.Canceled {
			b.log.Info("standby metadata: watch broke, reloading", "error", resp.Err())
			return
		}
		s.mu.Lock()
		for _, ev := range resp.Events {
			b.applyMetadataEvent(s.md, ev, coord.EpochBases{})
			rev = max(rev, ev.Kv.ModRevision)
		}
		s.mu.Unlock()
		// A response holds every event of the revisions it carries.
		s.advance(rev)
	}
}

// advance records that the view is complete up to rev.
func (s *standby) advance(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.md == nil || rev <= s.synced {
		return
	}
	s.synced = rev
	s.md.Version = max(s.md.Version, rev)
	s.caught.Notify()
}

// load returns a copy of the view once it holds every commit made before
// the call; false when it cannot within standbyWait, or within half of
// what is left of ctx, leaving the other half to read the metadata from
// etcd. It writes the barrier key, inside the watched range: once the
// watch delivers that write, it has delivered every earlier one.
// (etcd's progress notifications would spare the write, but one asked
// while any watch of the client's stream is still catching up waits for
// that stream's next event, which may never come.)
func (s *standby) load(ctx context.Context) (*coord.Metadata, bool) {
	wait := standbyWait
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)/2)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	md, ok := s.barrier(wctx)
	if !ok {
		return nil, false
	}
	s.served.Add(1)
	return md.Clone(), true
}

// barrier writes the barrier key and returns the view, not to be
// changed, once it has applied that write; false when it cannot before
// ctx ends, or when the view is not loaded.
func (s *standby) barrier(ctx context.Context) (*coord.Metadata, bool) {
	b := s.b
	resp, err := b.client.Put(ctx, b.barrierKey(), strconv.Itoa(int(b.cfg.BrokerID)))
	if err != nil {
		return nil, false
	}
	want := resp.Header.Revision
	for {
		s.mu.Lock()
		md, synced, caught := s.md, s.synced, s.caught.Next()
		s.mu.Unlock()
		if md != nil && synced >= want {
			return md, true
		}
		if md == nil {
			return nil, false
		}
		select {
		case <-caught:
		case <-ctx.Done():
			b.log.Info("standby metadata behind etcd", "synced", synced, "revision", want)
			return nil, false
		}
	}
}

// WarmMetadata implements coord.MetadataWarmer: it starts the standby
// view and waits until the view holds every commit made before the
// call.
func (b *Backend) WarmMetadata(ctx context.Context) error {
	if !b.cfg.MetadataStandby {
		return nil
	}
	b.startStandby()
	s := b.standby.Load()
	if s == nil {
		return coord.ErrClosed
	}
	for {
		s.mu.Lock()
		loaded, caught := s.md != nil, s.caught.Next()
		s.mu.Unlock()
		if loaded {
			if _, ok := s.barrier(ctx); ok {
				return nil
			}
		}
		// The view is loading (again, after its watch broke), or the
		// barrier's write failed: asked again.
		select {
		case <-caught:
		case <-time.After(retryDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
