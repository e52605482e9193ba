package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// reloadTimeout bounds one reload of a watched range after its watch
// broke: generous, since the metadata of many thousand partitions takes
// seconds to read on a loaded etcd.
const reloadTimeout = 10 * time.Second

// follower is one watch's view of a key range: it loads the range, applies
// watch events to it and says what to send.
type follower[S any] struct {
	key, end string
	// also is a second range watched with the first, "" when none: its
	// events are applied as the first's are.
	alsoKey, alsoEnd string
	// load replaces the view with the range as stored now, its epochs and
	// versions raised by bases, and returns the revision it was read at.
	load func(ctx context.Context, bases coord.EpochBases) (int64, error)
	// apply applies one event to the view.
	apply func(ev *clientv3.Event)
	// state returns the view to send (a copy the receiver may keep) and
	// whether it differs from the last one sent.
	state func() (S, bool)
	// raised: the view holds values raised by the bases it was loaded
	// with, and is loaded again when the migration record changes them.
	raised bool
	// bases are those of the last load.
	bases coord.EpochBases
}

// loadRaised loads f with the backend's current bases.
func (f *follower[S]) loadRaised(ctx context.Context, b *Backend) (int64, error) {
	bases := b.bases()
	rev, err := f.load(ctx, bases)
	if err == nil {
		f.bases = bases
	}
	return rev, err
}

// offer puts v on ch, replacing a value the receiver has not taken yet, so
// a slow receiver sees only the latest. The caller is ch's only sender.
func offer[S any](ch chan S, v S) {
	for {
		select {
		case ch <- v:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// startWatch loads f once (so the caller learns of an unreachable etcd),
// sends its state, then follows the range in a goroutine owned by the
// backend until ctx ends or the backend closes, reloading the whole range
// when the watch breaks (compaction, cancellation).
func startWatch[S any](ctx context.Context, b *Backend, what string, f *follower[S]) (<-chan S, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: watch %s", coord.ErrClosed, what)
	}
	if _, err := b.record(ctx); err != nil {
		return nil, err
	}
	rev, err := f.loadRaised(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make(chan S, 1)
	first, _ := f.state()
	out <- first
	wctx, cancel := b.withLife(ctx)
	started := b.goOwned(func() {
		defer close(out)
		defer cancel()
		follow(wctx, b, what, f, rev, out)
	})
	if !started {
		cancel()
		close(out)
	}
	return out, nil
}

// follow applies the range's events from revision rev+1 on and sends each
// changed state, until ctx ends.
func follow[S any](ctx context.Context, b *Backend, what string, f *follower[S], rev int64, out chan S) {
	for ctx.Err() == nil {
		wctx, cancelWatch := context.WithCancel(ctx)
		wch := b.client.Watch(wctx, f.key, clientv3.WithRange(f.end), clientv3.WithRev(rev+1))
		var also clientv3.WatchChan // nil, never ready, without a second range
		if f.alsoKey != "" {
			also = b.client.Watch(wctx, f.alsoKey, clientv3.WithRange(f.alsoEnd), clientv3.WithRev(rev+1))
		}
		for {
			var rebased <-chan struct{} // nil, never ready, unless raised
			if f.raised {
				rebased = b.recChanged.Next()
				if b.bases() != f.bases {
					b.log.Debug("epoch bases changed, reloading", "watch", what)
					break
				}
			}
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-wch:
			case resp, ok = <-also:
			case <-rebased:
				continue
			}
			if !ok || resp.Err() != nil || resp.Canceled {
				b.log.Debug("watch broke, reloading", "watch", what, "error", resp.Err())
				break
			}
			for _, ev := range resp.Events {
				f.apply(ev)
				rev = max(rev, ev.Kv.ModRevision)
			}
			if v, changed := f.state(); changed {
				offer(out, v)
			}
		}
		// Cancel the broken watches and drain their channels until the
		// client closes them.
		cancelWatch()
		for range wch {
		}
		if also != nil {
			for range also {
			}
		}
		for ctx.Err() == nil {
			lctx, cancel := context.WithTimeout(ctx, reloadTimeout)
			loaded, err := f.loadRaised(lctx, b)
			cancel()
			if err == nil {
				rev = max(rev, loaded)
				if v, changed := f.state(); changed {
					offer(out, v)
				}
				break
			}
			timer := time.NewTimer(retryDelay)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
		}
	}
}

// WatchMembers implements coord.Registrar.
func (b *Backend) WatchMembers(ctx context.Context) (<-chan []coord.Broker, error) {
	members := map[coord.BrokerID]coord.Broker{}
	var sent []coord.Broker
	haveSent := false
	var base int64 // the broker epoch base
	f := &follower[[]coord.Broker]{
		key:    b.brokersPrefix(),
		end:    clientv3.GetPrefixRangeEnd(b.brokersPrefix()),
		raised: true,
		load: func(ctx context.Context, bases coord.EpochBases) (int64, error) {
			base = bases.Broker
			list, rev, err := b.loadMembers(ctx)
			if err != nil {
				return 0, err
			}
			clear(members)
			for _, br := range list {
				members[br.ID] = br
			}
			return rev, nil
		},
		apply: func(ev *clientv3.Event) {
			if ev.Type == mvccpb.DELETE {
				for id, br := range members {
					if b.brokerKey(id) == string(ev.Kv.Key) && br.Epoch <= ev.Kv.ModRevision {
						delete(members, id)
					}
				}
				return
			}
			br, err := decodeBroker(ev.Kv)
			if err != nil {
				b.log.Warn("skipping unreadable registration", "key", string(ev.Kv.Key), "error", err)
				return
			}
			members[br.ID] = br
		},
		state: func() ([]coord.Broker, bool) {
			list := slices.Collect(maps.Values(members))
			for i := range list {
				list[i].Epoch += base
			}
			sortBrokers(list)
			if haveSent && slices.EqualFunc(list, sent, coord.Broker.Equal) {
				return list, false
			}
			sent, haveSent = list, true
			return list, true
		},
	}
	return startWatch(ctx, b, "members", f)
}

// WatchController implements coord.Elector.
func (b *Backend) WatchController(ctx context.Context) (<-chan coord.ControllerInfo, error) {
	key := b.controllerKey()
	current := coord.ControllerInfo{ID: coord.NoBroker}
	var sent *coord.ControllerInfo
	var base int64 // the controller epoch base
	// A deleted key leaves no controller; the epoch stays the last one
	// seen so that it never decreases.
	set := func(info coord.ControllerInfo) {
		info.Epoch = max(info.Epoch, current.Epoch)
		current = info
	}
	f := &follower[coord.ControllerInfo]{
		key:    key,
		end:    key + "\x00",
		raised: true,
		load: func(ctx context.Context, bases coord.EpochBases) (int64, error) {
			base = bases.Controller
			info, rev, err := b.loadController(ctx)
			if err != nil {
				return 0, err
			}
			set(info)
			return rev, nil
		},
		apply: func(ev *clientv3.Event) {
			if ev.Type == mvccpb.DELETE {
				set(coord.ControllerInfo{ID: coord.NoBroker})
				return
			}
			info, err := decodeController(ev.Kv)
			if err != nil {
				b.log.Warn("skipping unreadable controller key", "key", key, "error", err)
				return
			}
			set(info)
		},
		state: func() (coord.ControllerInfo, bool) {
			v := current
			v.Epoch = raiseEpoch(v.Epoch, base)
			if sent != nil && *sent == v {
				return v, false
			}
			sent = &v
			return v, true
		},
	}
	return startWatch(ctx, b, "controller", f)
}

// WatchMetadata implements coord.MetadataStore.
func (b *Backend) WatchMetadata(ctx context.Context) (<-chan *coord.Metadata, error) {
	md := coord.NewMetadata()
	var sentVersion int64 = -1
	var bases coord.EpochBases
	var rev int64 // the revision md holds
	f := &follower[*coord.Metadata]{
		key:    b.partitionsPrefix(),
		end:    b.metadataRangeEnd(),
		raised: true,
		load: func(ctx context.Context, loadBases coord.EpochBases) (int64, error) {
			loaded, err := b.loadMetadata(ctx)
			if err != nil {
				return 0, err
			}
			loadedRev := loaded.Version
			raiseMetadata(loaded, loadBases)
			if loaded.Version < md.Version {
				return rev, nil // Never go back, even if etcd did.
			}
			md, bases, rev = loaded, loadBases, loadedRev
			return rev, nil
		},
		apply: func(ev *clientv3.Event) {
			b.applyMetadataEvent(md, ev, bases)
			rev = max(rev, ev.Kv.ModRevision)
		},
		state: func() (*coord.Metadata, bool) {
			if md.Version == sentVersion {
				return nil, false
			}
			sentVersion = md.Version
			// A shallow copy: the view replaces a changed topic or
			// state, never changes one inside, so what it sent stays
			// as sent. Sent after every watch response, a deep copy
			// of 10 000 states would cost more than the watch.
			return &coord.Metadata{Version: md.Version, Topics: maps.Clone(md.Topics), Partitions: maps.Clone(md.Partitions), PartitionBase: md.PartitionBase}, true
		},
	}
	return startWatch(ctx, b, "metadata", f)
}

// keyView is a view of stored keys that builds a whole state: the
// security store's or the config store's.
type keyView[S any] interface {
	put(kv *mvccpb.KeyValue)
	remove(key string)
	state(version int64) S
}

// contentState is a state a watch sends only when its content changes.
type contentState[S any] interface {
	SameContent(S) bool
	Clone() S
}

// watchView follows the ranges of a keyView and sends the whole state
// whenever its content changes: first the state load reads, then one
// after each change, its Version never going back. ranges are one or two
// (key, end) pairs.
func watchView[S contentState[S], V keyView[S]](ctx context.Context, b *Backend, name string, ranges [][2]string,
	load func(ctx context.Context) (V, int64, error)) (<-chan S, error) {
	var view V
	var version int64 // raw: an etcd revision
	var base int64    // the version base
	var sent S
	var hasSent bool
	f := &follower[S]{
		key:    ranges[0][0],
		end:    ranges[0][1],
		raised: true,
		load: func(ctx context.Context, bases coord.EpochBases) (int64, error) {
			base = bases.Version
			v, rev, err := load(ctx)
			if err != nil {
				return 0, err
			}
			view, version = v, max(version, rev) // never go back, even if etcd did
			return version, nil
		},
		apply: func(ev *clientv3.Event) {
			if ev.Type == mvccpb.DELETE {
				view.remove(string(ev.Kv.Key))
			} else {
				view.put(ev.Kv)
			}
			version = max(version, ev.Kv.ModRevision)
		},
		state: func() (S, bool) {
			s := view.state(version + base)
			if hasSent && s.SameContent(sent) {
				var none S
				return none, false
			}
			sent, hasSent = s, true
			return s.Clone(), true
		},
	}
	if len(ranges) > 1 {
		f.alsoKey, f.alsoEnd = ranges[1][0], ranges[1][1]
	}
	return startWatch(ctx, b, name, f)
}
