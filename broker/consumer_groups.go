package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
)

// The glue of consumer groups of the consumer protocol (KIP-848):
// group/consumer decides, the shard's lock guards the groups as it does
// the classic ones, and their records go to the same __consumer_offsets
// partition. A group id is a classic group or a consumer group; KIP-848's
// online migration (group.consumer.migration.policy) moves a group with
// members from one to the other: upgrade when a ConsumerGroupHeartbeat
// joins a classic group, downgrade when a consumer group is left with
// classic members only. Committed offsets belong to the group id and
// stay where they are.

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
// (a timer, a topic change): it settles it (settleConsumer) and writes
// its records without waiting for them. The caller holds sh.mu.
func (c *groupCoordinator) applyConsumer(sh *groupShard, g *consumer.Group, out consumer.Output) {
	kvs := c.settleConsumer(sh, g, out)
	if len(kvs) == 0 {
		return
	}
	if _, _, err := c.appendOffsets(sh, kvs, false); err != nil {
		c.b.logger.Warn("write of consumer group records failed", "group", g.ID(), "partition", sh.p.Name(), "error", err)
	}
}

// settleConsumer sets a consumer group's timer from what it decided and,
// when it says it may downgrade, converts it to a classic group. It
// returns the records to write: the decision's, then the conversion's.
// The caller holds sh.mu.
func (c *groupCoordinator) settleConsumer(sh *groupShard, g *consumer.Group, out consumer.Output) []group.KV {
	sh.setDeadline(c, g.ID(), out.Deadline)
	return append(out.Records, c.maybeDowngrade(sh, g, out)...)
}

// respondConsumer answers a request to a consumer group: it settles
// what the group decided (settleConsumer), writes pre and the records,
// and answers resp once they are replicated, or failed with the code of
// a failed write. The caller holds sh.mu.
func (c *groupCoordinator) respondConsumer(sh *groupShard, g *consumer.Group, pre []group.KV, out consumer.Output, resp kmsg.Response, failed func(int16) kmsg.Response) (kmsg.Response, laterFunc, error) {
	done, code := c.storeConsumer(sh, append(pre, c.settleConsumer(sh, g, out)...))
	if code != 0 {
		return failed(code), nil, nil
	}
	if done == nil {
		return resp, nil, nil
	}
	return nil, func(context.Context) kmsg.Response {
		if err := c.awaitReplicated(done); err != nil {
			return failed(group.StoreError(replica.AppendErrors.Code(err)))
		}
		return resp
	}, nil
}

// upgrade converts cg, a classic group with members, to a consumer group
// for a ConsumerGroupHeartbeat that joins it (KIP-848's online upgrade,
// Kafka's convertToConsumerGroup): its members stay as classic members,
// its held JoinGroup and SyncGroup are answered REBALANCE_IN_PROGRESS.
// It returns the consumer group and the records to write first (the
// classic group's tombstone, the consumer group's records), or why the
// group stays classic. The caller holds sh.mu.
func (c *groupCoordinator) upgrade(sh *groupShard, cg *group.Group, now time.Time) (*consumer.Group, []group.KV, error) {
	id := cg.ID()
	g, out, err := consumer.FromClassic(id, c.ccfg, cg.Snapshot(), c.image(), now)
	if err != nil {
		return nil, nil, err
	}
	sh.deliver(cg.HandOver().Replies)
	delete(sh.groups, id)
	delete(sh.deadlines, id)
	sh.consumers[id] = g
	sh.setDeadline(c, id, out.Deadline)
	c.b.logger.Info("classic group upgraded to a consumer group", "group", id, "members", g.NumMembers(), "epoch", g.Epoch())
	return g, append([]group.KV{{Key: group.GroupRecordKey(id)}}, out.Records...), nil
}

// maybeDowngrade converts g back to a classic group when out says it may
// (its last consumer-protocol member left, the policy downgrades) and
// its members fit group.max.size (Kafka's convertToClassicGroup): the
// classic group, at the group epoch with each member's target
// assignment, rebalances at once. It returns the records to write (the
// consumer group's tombstones, the classic group's metadata), none when
// g stays. The caller holds sh.mu.
func (c *groupCoordinator) maybeDowngrade(sh *groupShard, g *consumer.Group, out consumer.Output) []group.KV {
	if !out.Downgrade || g.NumMembers() > c.cfg.MaxSize {
		return nil
	}
	id := g.ID()
	cg, v, cout := group.FromConsumer(id, c.cfg, g.ClassicSnapshot(c.image()), time.Now())
	kvs := append(g.Tombstones(), group.KV{Key: group.GroupRecordKey(id), Value: group.GroupRecordValue(v)})
	delete(sh.consumers, id)
	delete(sh.deadlines, id)
	sh.groups[id] = cg
	sh.apply(c, cg, cout)
	c.b.logger.Info("consumer group downgraded to a classic group", "group", id, "members", cg.NumMembers(), "generation", cg.Generation())
	return kvs
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
