package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// OffsetDelete v0.
func init() { registerAPI(47, 0, 0, handleOffsetDelete) }

// handleOffsetDelete deletes a group's committed offsets of some
// partitions, as Kafka's: refused with NON_EMPTY_GROUP for a group with
// members that does not use the consumer protocol, and per partition with
// GROUP_SUBSCRIBED_TO_TOPIC for a topic a member is subscribed to (in a
// group of the consumer protocol, KIP-848, by name or regex).
func handleOffsetDelete(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.OffsetDeleteRequest)
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil, nil
	}
	defer sh.mu.Unlock()
	var subscribedTo func(topic string) bool
	if cg := sh.consumers[r.Group]; cg != nil {
		subscribedTo = cg.SubscribedTo
	} else {
		g := sh.groups[r.Group]
		if g == nil {
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			return resp, nil, nil
		}
		subscribed := map[string]bool{}
		if g.NumMembers() > 0 {
			if g.ProtocolType() != "consumer" {
				resp.ErrorCode = kerr.NonEmptyGroup.Code
				return resp, nil, nil
			}
			subscribed = subscribedTopics(g.Describe())
		}
		subscribedTo = func(topic string) bool { return subscribed[topic] }
	}
	var kvs []group.KV
	var keys []group.OffsetKey
	var slots []*kmsg.OffsetDeleteResponseTopicPartition
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for i, rt := range r.Topics {
		for j, rp := range rt.Partitions {
			sp := &resp.Topics[i].Partitions[j]
			if subscribedTo(rt.Topic) {
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
				continue
			}
			k := group.OffsetKey{Group: r.Group, Topic: rt.Topic, Partition: rp.Partition}
			if _, ok := sh.offsets.Get(k.Group, k.Topic, k.Partition); !ok {
				continue
			}
			keys = append(keys, k)
			slots = append(slots, sp)
			kvs = append(kvs, group.KV{Key: group.OffsetRecordKey(k)})
		}
	}
	if len(kvs) == 0 {
		return resp, nil, nil
	}
	base, done, err := b.groups.appendOffsets(sh, kvs, true)
	if err != nil {
		resp.ErrorCode = b.groups.storeErrorCode(err)
		return resp, nil, nil
	}
	for i, k := range keys {
		sh.applyOffset(k, nil, base+int64(i))
	}
	return nil, func(context.Context) kmsg.Response {
		if code := b.groups.storeErrorCode(b.groups.awaitReplicated(done)); code != 0 {
			for _, sp := range slots {
				sp.ErrorCode = code
			}
		}
		return resp
	}, nil
}

// subscribedTopics returns the topics the members of a consumer-protocol
// group subscribe to, from their join metadata.
func subscribedTopics(dg kmsg.DescribeGroupsResponseGroup) map[string]bool {
	out := map[string]bool{}
	for _, m := range dg.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			continue
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out
}
