package broker

import (
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
)

// The glue of consumer groups of the consumer protocol (KIP-848):
// group/consumer decides, the shard's lock guards the groups as it does
// the classic ones, and their records go to the same __consumer_offsets
// partition.

// topicImage is the broker's metadata as a consumer group sees it.
type topicImage struct{ cache *metadata.Cache }

// image returns the topics as of now.
func (c *groupCoordinator) image() topicImage { return topicImage{c.b.cache} }

// Topic implements consumer.Metadata.
func (m topicImage) Topic(name string) (consumer.TopicID, int32, bool) {
	t, ok := m.cache.Topic(name)
	if !ok || len(t.Partitions) == 0 {
		return consumer.TopicID{}, 0, false
	}
	return t.ID, int32(len(t.Partitions)), true
}

// TopicNames implements consumer.Metadata.
func (m topicImage) TopicNames() []string {
	all := m.cache.AllTopics()
	names := make([]string, 0, len(all))
	for _, t := range all {
		names = append(names, t.Name)
	}
	return names
}

// TopicName implements consumer.Metadata.
func (m topicImage) TopicName(id consumer.TopicID) string {
	if t, ok := m.cache.TopicByID(id); ok {
		return t.Name
	}
	return ""
}

// applyConsumer acts on what a consumer group decided outside a request
// (a timer, a topic change): it sets the group's timer and writes its
// records without waiting for them. The caller holds sh.mu.
func (c *groupCoordinator) applyConsumer(sh *groupShard, g *consumer.Group, out consumer.Output) {
	sh.setDeadline(c, g.ID(), out.Deadline)
	if len(out.Records) == 0 {
		return
	}
	if _, _, err := c.appendOffsets(sh, out.Records, false); err != nil {
		c.b.logger.Warn("write of consumer group records failed", "group", g.ID(), "partition", sh.p.Name(), "error", err)
	}
}

// storeConsumer writes a consumer group's records and returns the
// channel of their replication's outcome (nil if there is nothing to
// write), or the Kafka error code of a failed append. The caller holds
// sh.mu.
func (c *groupCoordinator) storeConsumer(sh *groupShard, kvs []group.KV) (<-chan error, int16) {
	if len(kvs) == 0 {
		return nil, 0
	}
	_, done, err := c.appendOffsets(sh, kvs, true)
	if err != nil {
		return nil, group.StoreError(replica.AppendErrors.Code(err))
	}
	return done, 0
}

// dropEmptyConsumerGroup forgets a consumer group without members so
// that a classic member may take its id, writing the tombstones of its
// records (Kafka converts an empty consumer group the same way). The
// caller holds sh.mu.
func (c *groupCoordinator) dropEmptyConsumerGroup(sh *groupShard, id string) {
	delete(sh.consumers, id)
	delete(sh.deadlines, id)
	var kvs []group.KV
	for _, k := range consumer.GroupKeys(id) {
		kvs = append(kvs, group.KV{Key: k})
	}
	if _, _, err := c.appendOffsets(sh, kvs, false); err != nil {
		c.b.logger.Warn("write of consumer group tombstones failed", "group", id, "partition", sh.p.Name(), "error", err)
	}
}
