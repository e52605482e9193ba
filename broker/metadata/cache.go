// Package metadata holds a broker's metadata cache: what it knows of the
// cluster from the controller's UpdateMetadata requests and the
// backend's member watch, which Metadata, FindCoordinator and the
// replica manager read.
package metadata

import (
	"context"
	"slices"
	"sort"
	"sync"

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
}

// cachedTopic is one topic in the metadata cache.
type cachedTopic struct {
	id         [16]byte
	partitions map[int32]controller.PartitionInfo
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
	}
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
	c.changed.Notify()
	c.mu.Unlock()
}

// Topic is a copy of one cached topic with its partitions in
// partition order.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []controller.PartitionInfo
}

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

func (c *Cache) snapshotLocked(name string, t *cachedTopic) Topic {
	s := Topic{Name: name, ID: t.id, Partitions: make([]controller.PartitionInfo, 0, len(t.partitions))}
	for _, p := range t.partitions {
		s.Partitions = append(s.Partitions, p)
	}
	sort.Slice(s.Partitions, func(i, j int) bool { return s.Partitions[i].Partition < s.Partitions[j].Partition })
	return s
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
