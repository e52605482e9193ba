package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/txn"
)

// FindCoordinator v0..v4 (v4: several keys at once).
func init() { registerAPI(10, 0, 4, handleFindCoordinator) }

// coordinatorWait bounds how long FindCoordinator waits for
// __consumer_offsets to be created and its leaders known.
const coordinatorWait = 5 * time.Second

// handleFindCoordinator names each key's coordinator: for a group the
// leader of partition abs(hashCode(group)) % partitions of
// __consumer_offsets, for a transactional id that of __transaction_state,
// creating the topic on first use, at its endpoint on the request's
// listener (COORDINATOR_NOT_AVAILABLE when it has none, as in Kafka).
func handleFindCoordinator(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	return nil, func(ctx context.Context) kmsg.Response {
		for _, key := range keys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID = key, -1
			node, code, msg := b.findCoordinator(ctx, r.CoordinatorType, key)
			ep, ok := node.ListenerEndpoint(req.conn.listener.Name)
			if code == 0 && !ok {
				code, msg = kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("the coordinator, broker %d, has no listener %s", node.ID, req.conn.listener.Name)
			}
			c.ErrorCode = code
			if code == 0 {
				c.NodeID, c.Host, c.Port = int32(node.ID), ep.Host, ep.Port
			} else if msg != "" {
				c.ErrorMessage = &msg
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		if r.Version < 4 {
			c := resp.Coordinators[0]
			resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
			resp.Coordinators = nil
		}
		return resp
	}, nil
}

// findCoordinator returns the broker coordinating key, or the error code
// and why.
func (b *Broker) findCoordinator(ctx context.Context, keyType int8, key string) (coord.Broker, int16, string) {
	var topic, what, none string
	var ensure func(context.Context) error
	switch keyType {
	case 0:
		if key == "" {
			return coord.Broker{}, kerr.InvalidGroupID.Code, "the group id is empty"
		}
		topic, what, none, ensure = group.OffsetsTopic, "group", "no group coordinator yet", b.groups.ensureOffsetsTopic
	case 1:
		if key == "" {
			return coord.Broker{}, kerr.InvalidRequest.Code, "the transactional id is empty"
		}
		topic, what, none, ensure = txn.StateTopic, "transactional_id", "no transaction coordinator yet", b.ensureTxnStateTopic
	default:
		return coord.Broker{}, kerr.InvalidRequest.Code, fmt.Sprintf("unknown coordinator type %d", keyType)
	}
	if !b.cache.HasTopic(topic) {
		wctx, cancel := context.WithTimeout(ctx, coordinatorWait)
		err := ensure(wctx)
		cancel()
		if err != nil {
			b.logger.Warn(none, what, key, "error", err)
			return coord.Broker{}, kerr.CoordinatorNotAvailable.Code, err.Error()
		}
	}
	t, ok := b.cache.Topic(topic)
	if !ok || len(t.Partitions) == 0 {
		return coord.Broker{}, kerr.CoordinatorNotAvailable.Code, topic + " is being created"
	}
	// The same hash places groups and transactional ids.
	index := group.PartitionFor(key, len(t.Partitions))
	for _, p := range t.Partitions {
		if p.Partition != index {
			continue
		}
		if node, ok := b.cache.Broker(p.Leader); ok && p.Leader != coord.NoBroker {
			return node, 0, ""
		}
	}
	return coord.Broker{}, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("%s-%d has no live leader", topic, index)
}
