// Package metadata holds a broker's metadata cache: what it knows of the
// cluster from the controller's UpdateMetadata requests and the
// backend's member watch, which Metadata, FindCoordinator and the
// replica manager read.
package metadata

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// Cache is what this broker knows of the cluster from the
// controller's UpdateMetadata requests: the live brokers, the controller
// and every partition's leader, leader epoch, replicas and ISR. Every
// broker answers Metadata from it. It is safe for concurrent use.
type Cache struct {
	mu           sync.RWMutex
	controllerID coord.BrokerID
	live         []coord.Broker
	// liveWatched is set once the live set comes from the backend's
	// member watch (watched): from then on the live set is the brokers
	// registered there that the controller's last UpdateMetadata also
	// names (announced, nil before the first), so a broker that leaves
	// disappears at once, and one the controller fenced before its
	// session expired (a crashed process) is not listed either.
	liveWatched bool
	watched     []coord.Broker
	announced   map[coord.BrokerID]bool
	topics      map[string]*cachedTopic
	// synced is set by the first UpdateMetadata this process applies: the
	// controller sends a broker that joins the whole metadata first, so
	// from then on a topic missing from the cache is missing from the
	// cluster.
	synced bool
	// changed announces every update, so waiters can wait for the cache
	// to reach a state.
	changed notify.Broadcast
	// generation counts the updates (see Generation).
	generation atomic.Uint64
}

// cachedTopic is one topic in the metadata cache.
type cachedTopic struct {
	id         [16]byte
	partitions map[int32]controller.PartitionInfo
	// sorted is partitions in partition order, built by the first reader
	// after a change (nil until then) and shared by every reader until the
	// next: a producer of a 10 000-partition topic asks for all of it
	// after every leader change, and each copy and sort of its
	// partitions cost about 4 ms of the CPU the failover needs.
	sorted atomic.Pointer[[]controller.PartitionInfo]
}

func NewCache() *Cache {
	return &Cache{controllerID: coord.NoBroker, topics: map[string]*cachedTopic{}}
}

// Update applies an UpdateMetadata: the live set and controller are
// replaced, deleted topics removed, and each partition state replaced
// unless it carries a lower leader epoch than the cached one (a topic
// recreated under a new ID starts afresh). A full request (the whole
// metadata) also drops every topic it does not name.
func (c *Cache) Update(req *controller.UpdateMetadataRequest, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if full {
		named := map[string]bool{}
		for _, p := range req.Partitions {
			named[p.Topic] = true
		}
		for name := range c.topics {
			if !named[name] {
				delete(c.topics, name)
			}
		}
	}
	c.synced = true
	c.controllerID = req.ControllerID
	c.announced = make(map[coord.BrokerID]bool, len(req.Live))
	for _, b := range req.Live {
		c.announced[b.ID] = true
	}
	if c.liveWatched {
		c.filterLiveLocked()
	} else {
		c.live = slices.Clone(req.Live)
		sort.Slice(c.live, func(i, j int) bool { return c.live[i].ID < c.live[j].ID })
	}
	for _, name := range req.Deleted {
		delete(c.topics, name)
	}
	for _, p := range req.Partitions {
		t := c.topics[p.Topic]
		if t == nil || t.id != p.TopicID {
			t = &cachedTopic{id: p.TopicID, partitions: map[int32]controller.PartitionInfo{}}
			c.topics[p.Topic] = t
		}
		if old, ok := t.partitions[p.Partition]; ok && p.LeaderEpoch < old.LeaderEpoch {
			continue
		}
		t.partitions[p.Partition] = p
		t.sorted.Store(nil)
	}
	c.generation.Add(1)
	c.changed.Notify()
}

// SetLive replaces the live brokers with the backend's member set.
// coord's controller sends UpdateMetadata only to a broker that joins,
// and none at all when a broker that holds no partition leaves, so the
// other brokers learn membership from the backend directly.
func (c *Cache) SetLive(live []coord.Broker) {
	c.mu.Lock()
	c.watched = slices.Clone(live)
	sort.Slice(c.watched, func(i, j int) bool { return c.watched[i].ID < c.watched[j].ID })
	c.liveWatched = true
	c.filterLiveLocked()
	c.generation.Add(1)
	c.changed.Notify()
	c.mu.Unlock()
}

// filterLiveLocked sets the live set to the watched brokers that the
// controller announced (all of them before its first UpdateMetadata).
func (c *Cache) filterLiveLocked() {
	c.live = c.live[:0:0]
	for _, b := range c.watched {
		if c.announced == nil || c.announced[b.ID] {
			c.live = append(c.live, b)
		}
	}
}

// SetController records the controller as this broker learnt it other
// than by UpdateMetadata (its own election).
func (c *Cache) SetController(id coord.BrokerID) {
	c.mu.Lock()
	c.controllerID = id
	c.generation.Add(1)
	c.changed.Notify()
	c.mu.Unlock()
}

// Topic is one cached topic with its partitions in partition order.
// Partitions (and each partition's Replicas and ISR) are shared with the
// cache and every other reader: read them, never write them.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []controller.PartitionInfo
}

// Generation counts the cache's changes: it grows with every update of
// the partitions, the live brokers or the controller. Read before what
// it stands for (View, Topic), a generation that has not moved since
// says that what was read from the cache then is what it holds now; a
// reader that keeps something built from the cache keys it by this.
func (c *Cache) Generation() uint64 { return c.generation.Load() }

// View returns the controller, the live brokers and a wait channel that
// is closed at the next change.
func (c *Cache) View() (coord.BrokerID, []coord.Broker, <-chan struct{}) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.controllerID, c.live, c.changed.Next()
}

// IsSynced reports whether the cache holds the cluster's metadata: until
// the first UpdateMetadata, a topic that is not cached may still exist.
func (c *Cache) IsSynced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced
}

// Topic returns the named Topic, if cached.
func (c *Cache) Topic(name string) (Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.topics[name]
	if !ok {
		return Topic{}, false
	}
	return c.snapshotLocked(name, t), true
}

// HasTopic reports whether the named topic is cached.
func (c *Cache) HasTopic(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.topics[name]
	return ok
}

// HasPartition reports whether the cache holds partition index of topic,
// without copying the topic (LeaderFor asks it of every partition a
// fetch names that this broker has not opened).
func (c *Cache) HasPartition(topic string, index int32) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.topics[topic]
	if !ok {
		return false
	}
	_, ok = t.partitions[index]
	return ok
}

// TopicByID returns the topic with the given ID, if cached.
func (c *Cache) TopicByID(id [16]byte) (Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for name, t := range c.topics {
		if t.id == id {
			return c.snapshotLocked(name, t), true
		}
	}
	return Topic{}, false
}

// AllTopics returns every cached topic, sorted by name.
func (c *Cache) AllTopics() []Topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Topic, 0, len(c.topics))
	for name, t := range c.topics {
		out = append(out, c.snapshotLocked(name, t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// snapshotLocked returns t with its sorted partitions, sorting them
// first when no reader has since the topic last changed. Under the read
// lock no update runs, so a slice stored here describes the topic until
// the next update resets it; two readers that sort at once store equal
// slices.
func (c *Cache) snapshotLocked(name string, t *cachedTopic) Topic {
	if sorted := t.sorted.Load(); sorted != nil {
		return Topic{Name: name, ID: t.id, Partitions: *sorted}
	}
	// A topic's partitions are numbered 0 to n-1: each goes to its place.
	// Only a cache that lacks some partition sorts.
	parts := make([]controller.PartitionInfo, len(t.partitions))
	for i, p := range t.partitions {
		if i < 0 || int(i) >= len(parts) {
			parts = parts[:0]
			for _, p := range t.partitions {
				parts = append(parts, p)
			}
			slices.SortFunc(parts, func(a, b controller.PartitionInfo) int { return cmp.Compare(a.Partition, b.Partition) })
			break
		}
		parts[i] = p
	}
	t.sorted.Store(&parts)
	return Topic{Name: name, ID: t.id, Partitions: parts}
}

// Broker returns a live Broker by ID.
func (c *Cache) Broker(id coord.BrokerID) (coord.Broker, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, b := range c.live {
		if b.ID == id {
			return b, true
		}
	}
	return coord.Broker{}, false
}

// WaitFor waits until cond holds on the cache, ctx ends or closing is
// closed; it reports whether cond held.
func (c *Cache) WaitFor(ctx context.Context, closing <-chan struct{}, cond func() bool) bool {
	for {
		_, _, changed := c.View()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return cond()
		case <-closing:
			return false
		}
	}
}

// TopicReady reports whether c holds every partition of topic
// (partitions of them) with a leader.
func (c *Cache) TopicReady(topic string, partitions int) bool {
	t, ok := c.Topic(topic)
	if !ok || len(t.Partitions) < partitions {
		return false
	}
	for _, p := range t.Partitions {
		if p.Leader == coord.NoBroker {
			return false
		}
	}
	return true
}

// LeaderEpochOf returns the leader epoch c holds for
// a partition of the topic with the given ID.
func (c *Cache) LeaderEpochOf(topicID [16]byte, topic string, partition int32) (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.topics[topic]
	if !ok || t.id != topicID {
		return 0, false
	}
	p, ok := t.partitions[partition]
	return p.LeaderEpoch, ok
}
