package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
)

// ConsumerGroupHeartbeat v0..v1 (KIP-848; v1: regex subscriptions,
// member ids made by the client).
func init() { registerAPI(68, 0, 1, handleConsumerGroupHeartbeat) }

// handleConsumerGroupHeartbeat joins, heartbeats or leaves a consumer
// group of the consumer protocol, and answers once the records of what
// changed are replicated to the group's __consumer_offsets partition.
// A classic group with members refuses it with GROUP_ID_NOT_FOUND, as
// Kafka does without its online migration; an empty one becomes a
// consumer group.
func handleConsumerGroupHeartbeat(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	failed := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if code, msg := consumer.ValidateHeartbeat(r, b.groups.ccfg); code != 0 {
		return failed(code, msg), nil, nil
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		return failed(code, ""), nil, nil
	}
	defer sh.mu.Unlock()
	var pre []group.KV
	g := sh.consumers[r.Group]
	if g == nil {
		if cg := sh.groups[r.Group]; cg != nil && cg.NumMembers() > 0 {
			return failed(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", r.Group)), nil, nil
		}
		if r.MemberEpoch != consumer.JoinEpoch {
			return failed(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", r.Group)), nil, nil
		}
		if cg := sh.groups[r.Group]; cg != nil {
			// An empty classic group becomes a consumer group.
			delete(sh.groups, r.Group)
			delete(sh.deadlines, r.Group)
			pre = append(pre, group.KV{Key: group.GroupRecordKey(r.Group)})
		}
		g = consumer.New(r.Group, b.groups.ccfg)
		sh.consumers[r.Group] = g
	}
	resp, out := g.Heartbeat(time.Now(), r, clientID(req), clientHost(req), b.groups.image())
	sh.setDeadline(b.groups, g.ID(), out.Deadline)
	if resp.ErrorCode != 0 && len(pre) == 0 && len(out.Records) == 0 {
		return resp, nil, nil
	}
	done, code := b.groups.storeConsumer(sh, append(pre, out.Records...))
	if code != 0 {
		return failed(code, ""), nil, nil
	}
	if done == nil {
		return resp, nil, nil
	}
	return nil, func(context.Context) kmsg.Response {
		if err := b.groups.awaitReplicated(done); err != nil {
			return failed(group.StoreError(replica.AppendErrors.Code(err)), "")
		}
		return resp
	}, nil
}
