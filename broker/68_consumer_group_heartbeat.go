package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
)

// ConsumerGroupHeartbeat v0..v1 (KIP-848; v1: regex subscriptions,
// member ids made by the client).
func init() { registerAPI(68, 0, 1, handleConsumerGroupHeartbeat) }

// handleConsumerGroupHeartbeat joins, heartbeats or leaves a consumer
// group of the consumer protocol, and answers once the records of what
// changed are replicated to the group's __consumer_offsets partition.
// A join to a classic group with members upgrades it to a consumer
// group, its members staying as classic members, when
// group.consumer.migration.policy allows and they use the consumer
// protocol type; otherwise it is refused with GROUP_ID_NOT_FOUND, as
// Kafka does. An empty classic group becomes a consumer group. A leave
// that removes the last consumer-protocol member of a group of classic
// members may downgrade it back to a classic group.
func handleConsumerGroupHeartbeat(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	failedWith := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if code, msg := consumer.ValidateHeartbeat(r, b.groups.ccfg); code != 0 {
		return failedWith(code, msg), nil, nil
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		return failedWith(code, ""), nil, nil
	}
	defer sh.mu.Unlock()
	now := time.Now()
	var pre []group.KV
	g := sh.consumers[r.Group]
	if g == nil {
		cg := sh.groups[r.Group]
		switch {
		case r.MemberEpoch != consumer.JoinEpoch && cg != nil && cg.NumMembers() > 0:
			return failedWith(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", r.Group)), nil, nil
		case r.MemberEpoch != consumer.JoinEpoch:
			return failedWith(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", r.Group)), nil, nil
		case cg != nil && cg.NumMembers() == b.groups.ccfg.MaxSize:
			// Kafka converts the group, then refuses the member and
			// drops the conversion with it: the group stays classic.
			return failedWith(kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", b.groups.ccfg.MaxSize)), nil, nil
		case cg != nil && cg.NumMembers() > 0:
			var err error
			if g, pre, err = b.groups.upgrade(sh, cg, now); err != nil {
				return failedWith(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group: %v.", r.Group, err)), nil, nil
			}
		default:
			if cg != nil {
				// An empty classic group becomes a consumer group.
				delete(sh.groups, r.Group)
				delete(sh.deadlines, r.Group)
				pre = append(pre, group.KV{Key: group.GroupRecordKey(r.Group)})
			}
			g = consumer.New(r.Group, b.groups.ccfg)
			sh.consumers[r.Group] = g
		}
	}
	resp, out := g.Heartbeat(now, r, clientID(req), clientHost(req), b.groups.image())
	return b.groups.respondConsumer(sh, g, pre, out, resp, func(code int16) kmsg.Response { return failedWith(code, "") })
}
