package zk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// subscriber queues the node events of one ZooKeeper session for one watch
// goroutine. go-zookeeper hands every event to the backend's callback,
// which must not block, so the queue is unbounded; a watch drains it
// whenever notify fires.
type subscriber struct {
	notify chan struct{} // capacity 1

	mu     sync.Mutex
	events []zk.Event
	ended  bool
}

func (s *subscriber) push(ev zk.Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
	s.signal()
}

func (s *subscriber) reset() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.signal()
}

func (s *subscriber) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether the session has ended.
func (s *subscriber) take() ([]zk.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.events
	s.events = nil
	return evs, s.ended
}

// subscribe registers a subscriber for zs's node events; it returns false
// if zs has ended.
func (zs *zsession) subscribe() (*subscriber, bool) {
	return zs.subscribeWith(make(chan struct{}, 1))
}

// subscribeWith is subscribe with the subscriber's notify channel given
// (capacity 1), so that one goroutine can wait on several sessions.
func (zs *zsession) subscribeWith(notify chan struct{}) (*subscriber, bool) {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	select {
	case <-zs.done:
		return nil, false
	default:
	}
	s := &subscriber{notify: notify}
	zs.subs[s] = struct{}{}
	return s, true
}

func (zs *zsession) unsubscribe(s *subscriber) {
	zs.mu.Lock()
	delete(zs.subs, s)
	zs.mu.Unlock()
}

// watcher is the part of a watch that knows what it watches: the members,
// the controller or the metadata. run drives it.
type watcher interface {
	// reset forgets what was read: a new ZooKeeper session has no watches.
	reset()
	// note marks what ev makes stale.
	note(ev zk.Event)
	// dirty reports whether something is stale.
	dirty() bool
	// refresh reads what is stale, setting watches.
	refresh(c *zk.Conn) error
	// publish offers the state read, if it is new, on the watch's channel.
	publish()
	// close closes the watch's channel.
	close()
}

// startWatch reads w's first state on the current ZooKeeper session
// (failing as the contract says if it cannot before ctx ends), publishes
// it, and leaves a goroutine that keeps w up to date until ctx ends or the
// backend closes.
func (b *Backend) startWatch(ctx context.Context, key string, w watcher) error {
	if err := b.ensureBase(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		zs := b.current()
		if zs == nil {
			return fmt.Errorf("%w: %s", coord.ErrClosed, key)
		}
		sub, ok := zs.subscribe()
		if !ok {
			continue
		}
		w.reset()
		err := zs.call(ctx, key, w.refresh)
		if errors.Is(err, errSessionEnded) {
			zs.unsubscribe(sub)
			continue
		}
		if err != nil {
			zs.unsubscribe(sub)
			if ctx.Err() == nil && !errors.Is(err, coord.ErrClosed) && isConnectionError(err) &&
				wait(ctx, b.closing, backoff(attempt)/10) {
				continue // the connection dropped under the first read
			}
			return convertError(err, key)
		}
		w.publish()
		if !b.goTracked(func() { b.runWatch(ctx, key, zs, sub, w) }) {
			zs.unsubscribe(sub)
			w.close()
			return fmt.Errorf("%w: %s", coord.ErrClosed, key)
		}
		return nil
	}
}

// runWatch applies events to w and refreshes it, moving to the next
// ZooKeeper session when one ends, until ctx ends or the backend closes.
func (b *Backend) runWatch(ctx context.Context, key string, zs *zsession, sub *subscriber, w watcher) {
	defer w.close()
	defer func() {
		if zs != nil {
			zs.unsubscribe(sub)
		}
	}()
	attempt := 0
	for {
		evs, ended := sub.take()
		if ended {
			zs.unsubscribe(sub)
			if zs = b.current(); zs == nil {
				return
			}
			var ok bool
			if sub, ok = zs.subscribe(); !ok {
				sub = &subscriber{notify: make(chan struct{}, 1), ended: true}
				continue
			}
			w.reset()
		}
		for _, ev := range evs {
			w.note(ev)
		}
		retry := false
		if w.dirty() {
			err := zs.call(ctx, key, w.refresh)
			switch {
			case err == nil:
				attempt = 0
			case errors.Is(err, errSessionEnded):
				sub.reset()
			case ctx.Err() != nil, errors.Is(err, coord.ErrClosed):
				// The call may have returned while the refresh still
				// runs (the backend closing): w is not read again.
				return
			default:
				b.log.Debug("watch refresh failed: retrying", "watch", key, "error", err)
				retry = true
			}
			w.publish()
		}
		if retry {
			if !wait(ctx, b.closing, backoff(attempt)) {
				return
			}
			attempt++
			continue
		}
		select {
		case <-sub.notify:
		case <-ctx.Done():
			return
		case <-b.closing:
			return
		}
	}
}

// offer sends v on ch, a channel of capacity 1 that only the caller sends
// on, replacing a value the receiver has not taken yet: a watcher that
// falls behind sees only the latest state.
func offer[T any](ch chan T, v T) {
	select {
	case ch <- v:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- v
}

// WatchMembers implements coord.Registrar.
func (b *Backend) WatchMembers(ctx context.Context) (<-chan []coord.Broker, error) {
	w := &membersWatcher{b: b, out: make(chan []coord.Broker, 1)}
	if err := b.startWatch(ctx, "watch "+b.path("/brokers/ids"), w); err != nil {
		return nil, err
	}
	return w.out, nil
}

type membersWatcher struct {
	b       *Backend
	out     chan []coord.Broker
	stale   bool
	current []coord.Broker
	last    []coord.Broker
	sent    bool
}

func (w *membersWatcher) reset() { w.stale = true }

func (w *membersWatcher) note(ev zk.Event) {
	if dir := w.b.path("/brokers/ids"); ev.Path == dir || strings.HasPrefix(ev.Path, dir+"/") {
		w.stale = true
	}
}

func (w *membersWatcher) dirty() bool { return w.stale }

func (w *membersWatcher) refresh(c *zk.Conn) error {
	members, err := w.b.readMembers(c, true)
	if errors.Is(err, zk.ErrNoNode) {
		// /brokers/ids was deleted under us: watch for it to come back.
		_, _, _, err = c.ExistsW(w.b.path("/brokers/ids"))
		members = nil
	}
	if err != nil {
		return err
	}
	w.current, w.stale = members, false
	return nil
}

func (w *membersWatcher) publish() {
	if w.stale || w.sent && reflect.DeepEqual(w.current, w.last) {
		return
	}
	w.last, w.sent = w.current, true
	offer(w.out, slices.Clone(w.current))
}

func (w *membersWatcher) close() { close(w.out) }

// WatchController implements coord.Elector.
func (b *Backend) WatchController(ctx context.Context) (<-chan coord.ControllerInfo, error) {
	w := &controllerWatcher{b: b, out: make(chan coord.ControllerInfo, 1)}
	if err := b.startWatch(ctx, "watch "+b.path("/controller"), w); err != nil {
		return nil, err
	}
	return w.out, nil
}

type controllerWatcher struct {
	b       *Backend
	out     chan coord.ControllerInfo
	stale   bool
	current coord.ControllerInfo
	last    coord.ControllerInfo
	sent    bool
}

func (w *controllerWatcher) reset() { w.stale = true }

func (w *controllerWatcher) note(ev zk.Event) {
	if ev.Path == w.b.path("/controller") || ev.Path == w.b.path("/controller_epoch") {
		w.stale = true
	}
}

func (w *controllerWatcher) dirty() bool { return w.stale }

func (w *controllerWatcher) refresh(c *zk.Conn) error {
	info, _, err := w.b.readController(c, true)
	if err != nil {
		return err
	}
	w.current, w.stale = info, false
	return nil
}

func (w *controllerWatcher) publish() {
	if w.stale || w.sent && (w.current == w.last || w.current.Epoch < w.last.Epoch) {
		return
	}
	w.last, w.sent = w.current, true
	offer(w.out, w.current)
}

func (w *controllerWatcher) close() { close(w.out) }

// WatchMetadata implements coord.MetadataStore. It keeps a copy of the
// metadata up to date with one ZooKeeper watch per znode (topic list,
// topics, configs, partition lists, partition states), re-reading only the
// znodes whose watch fired, and sends a whole state once every stale znode
// has been read again.
func (b *Backend) WatchMetadata(ctx context.Context) (<-chan *coord.Metadata, error) {
	w := &metadataWatcher{b: b, out: make(chan *coord.Metadata, 1)}
	if err := b.startWatch(ctx, "watch "+b.topicsPath(), w); err != nil {
		return nil, err
	}
	return w.out, nil
}

// mdKind is a kind of metadata znode; refresh applies them in this order.
type mdKind int

const (
	kindTopics     mdKind = iota // /brokers/topics (children)
	kindTopic                    // /brokers/topics/T
	kindConfig                   // /config/topics/T
	kindPartitions               // /brokers/topics/T/partitions (children)
	kindState                    // /brokers/topics/T/partitions/P/state
)

type mdItem struct {
	kind      mdKind
	topic     string
	partition int32
}

type metadataWatcher struct {
	b   *Backend
	out chan *coord.Metadata

	version    int64
	topicList  map[string]bool
	topics     map[string]coord.Topic
	topicCzxid map[string]int64
	configs    map[string]map[string]string
	partitions map[string]map[int32]bool
	states     map[coord.TopicPartition]coord.PartitionState
	stale      map[mdItem]struct{}
	changed    bool

	last *coord.Metadata
}

func (w *metadataWatcher) reset() {
	w.topicList = map[string]bool{}
	w.topics = map[string]coord.Topic{}
	w.topicCzxid = map[string]int64{}
	w.configs = map[string]map[string]string{}
	w.partitions = map[string]map[int32]bool{}
	w.states = map[coord.TopicPartition]coord.PartitionState{}
	w.stale = map[mdItem]struct{}{{kind: kindTopics}: {}}
	w.changed = true
}

func (w *metadataWatcher) note(ev zk.Event) {
	rel, ok := strings.CutPrefix(ev.Path, w.b.root)
	if !ok {
		return
	}
	if rel == "/brokers/topics" {
		w.stale[mdItem{kind: kindTopics}] = struct{}{}
		return
	}
	if name, ok := strings.CutPrefix(rel, "/config/topics/"); ok && !strings.Contains(name, "/") {
		w.stale[mdItem{kind: kindConfig, topic: name}] = struct{}{}
		return
	}
	rest, ok := strings.CutPrefix(rel, "/brokers/topics/")
	if !ok {
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1:
		w.stale[mdItem{kind: kindTopic, topic: parts[0]}] = struct{}{}
	case len(parts) == 2 && parts[1] == "partitions":
		w.stale[mdItem{kind: kindPartitions, topic: parts[0]}] = struct{}{}
	case len(parts) == 4 && parts[1] == "partitions" && parts[3] == "state":
		if p, err := strconv.ParseInt(parts[2], 10, 32); err == nil {
			w.stale[mdItem{kind: kindState, topic: parts[0], partition: int32(p)}] = struct{}{}
		}
	}
}

func (w *metadataWatcher) dirty() bool { return len(w.stale) > 0 }

// mdRead is the outcome of reading one item.
type mdRead struct {
	item     mdItem
	missing  bool
	data     []byte
	children []string
	stat     *zk.Stat
	err      error
}

func (w *metadataWatcher) path(it mdItem) string {
	switch it.kind {
	case kindTopics:
		return w.b.topicsPath()
	case kindTopic:
		return w.b.topicPath(it.topic)
	case kindConfig:
		return w.b.configPath(it.topic)
	case kindPartitions:
		return w.b.partitionsPath(it.topic)
	default:
		return w.b.statePath(it.topic, it.partition)
	}
}

// refresh reads the stale items, with watches, and what they reveal as
// stale in turn (the topics and partitions of a new topic), until nothing
// is stale or a read fails.
func (w *metadataWatcher) refresh(c *zk.Conn) error { return w.refreshOn([]*zk.Conn{c}) }

// refreshOn is refresh with the reads spread over conns (each read's
// watch is left on the connection that read it).
func (w *metadataWatcher) refreshOn(conns []*zk.Conn) error {
	for len(w.stale) > 0 {
		items := make([]mdItem, 0, len(w.stale))
		for it := range w.stale {
			items = append(items, it)
		}
		w.stale = map[mdItem]struct{}{}
		sort.Slice(items, func(i, j int) bool { return items[i].kind < items[j].kind })
		reads := make([]mdRead, len(items))
		parallelOn(len(items), len(conns), func(conn, i int) error {
			c := conns[conn]
			r := mdRead{item: items[i]}
			p := w.path(items[i])
			if items[i].kind == kindTopics || items[i].kind == kindPartitions {
				r.children, r.stat, _, r.err = c.ChildrenW(p)
			} else {
				r.data, r.stat, _, r.err = c.GetW(p)
			}
			if errors.Is(r.err, zk.ErrNoNode) {
				r.missing, r.err = true, nil
			}
			reads[i] = r
			return nil
		})
		var first error
		for _, r := range reads {
			if r.err != nil {
				w.stale[r.item] = struct{}{}
				if first == nil {
					first = r.err
				}
				continue
			}
			w.apply(r)
		}
		if first != nil {
			return first
		}
	}
	return nil
}

func (w *metadataWatcher) apply(r mdRead) {
	it := r.item
	if r.stat != nil {
		w.version = max(w.version, r.stat.Mzxid, r.stat.Pzxid)
	}
	if it.kind != kindTopics && !w.topicList[it.topic] {
		return // a topic deleted since: its reads are moot
	}
	w.changed = true
	switch it.kind {
	case kindTopics:
		names := map[string]bool{}
		for _, n := range r.children {
			names[n] = true
			if !w.topicList[n] {
				w.stale[mdItem{kind: kindTopic, topic: n}] = struct{}{}
				w.stale[mdItem{kind: kindConfig, topic: n}] = struct{}{}
				w.stale[mdItem{kind: kindPartitions, topic: n}] = struct{}{}
			}
		}
		for n := range w.topicList {
			if !names[n] {
				w.dropTopic(n)
			}
		}
		w.topicList = names
	case kindTopic:
		if r.missing {
			delete(w.topics, it.topic)
			delete(w.topicCzxid, it.topic)
			return
		}
		t, err := decodeTopic(it.topic, r.data)
		if err != nil {
			w.b.log.Warn("ignoring a topic znode that does not decode", "error", err)
			delete(w.topics, it.topic)
			return
		}
		if old, ok := w.topicCzxid[it.topic]; ok && old != r.stat.Czxid {
			// Deleted and created again: its config and partitions are new.
			w.stale[mdItem{kind: kindConfig, topic: it.topic}] = struct{}{}
			w.stale[mdItem{kind: kindPartitions, topic: it.topic}] = struct{}{}
		}
		w.topics[it.topic], w.topicCzxid[it.topic] = t, r.stat.Czxid
	case kindConfig:
		if r.missing {
			delete(w.configs, it.topic)
			return
		}
		config, err := decodeConfig(it.topic, r.data)
		if err != nil {
			w.b.log.Warn("ignoring a topic config that does not decode", "error", err)
			return
		}
		w.configs[it.topic] = config
	case kindPartitions:
		parts := map[int32]bool{}
		if !r.missing {
			for _, p := range r.children {
				if n, err := strconv.ParseInt(p, 10, 32); err == nil {
					parts[int32(n)] = true
				}
			}
		}
		old := w.partitions[it.topic]
		for p := range parts {
			if !old[p] {
				w.stale[mdItem{kind: kindState, topic: it.topic, partition: p}] = struct{}{}
			}
		}
		for p := range old {
			if !parts[p] {
				delete(w.states, coord.TopicPartition{Topic: it.topic, Partition: p})
			}
		}
		w.partitions[it.topic] = parts
	case kindState:
		tp := coord.TopicPartition{Topic: it.topic, Partition: it.partition}
		if r.missing || !w.partitions[it.topic][it.partition] {
			delete(w.states, tp)
			return
		}
		st, err := decodeState(tp, r.data, r.stat)
		if err != nil {
			w.b.log.Warn("ignoring a partition state that does not decode", "error", err)
			return
		}
		w.states[tp] = st
	}
}

func (w *metadataWatcher) dropTopic(name string) {
	delete(w.topics, name)
	delete(w.topicCzxid, name)
	delete(w.configs, name)
	for p := range w.partitions[name] {
		delete(w.states, coord.TopicPartition{Topic: name, Partition: p})
	}
	delete(w.partitions, name)
}

// snapshot builds the whole metadata from what was read, raised by the
// bases.
func (w *metadataWatcher) snapshot() *coord.Metadata {
	md := coord.NewMetadata()
	md.Version = w.version
	for name := range w.topicList {
		t, ok := w.topics[name]
		if !ok {
			continue
		}
		t.Config = w.configs[name]
		md.Topics[name] = t
	}
	for tp, st := range w.states {
		if _, ok := md.Topics[tp.Topic]; ok && w.partitions[tp.Topic][tp.Partition] {
			md.Partitions[tp] = st
		}
	}
	return raiseMetadata(md, w.b.bases())
}

func (w *metadataWatcher) publish() {
	if len(w.stale) > 0 || !w.changed {
		return
	}
	w.changed = false
	md := w.snapshot()
	if w.last != nil && md.PartitionBase == w.last.PartitionBase && reflect.DeepEqual(md.Topics, w.last.Topics) && reflect.DeepEqual(md.Partitions, w.last.Partitions) {
		return
	}
	w.last = md
	offer(w.out, md.Clone())
}

func (w *metadataWatcher) close() { close(w.out) }
