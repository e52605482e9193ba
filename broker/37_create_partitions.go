package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// CreatePartitions v0..v3: add partitions to topics, on the controller.
func init() { registerAPI(37, 0, 3, handleCreatePartitions) }

// handleCreatePartitions grows each topic through the controller and
// waits (up to the request's timeout) until this broker's metadata cache
// shows the new partitions; other brokers answer NOT_CONTROLLER.
func handleCreatePartitions(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctrl := b.member.Controller()
	mutations := b.mutationQuota(req, 3)
	return nil, func(ctx context.Context) kmsg.Response {
		defer b.throttleMutations(req, resp, mutations)
		tooMany := b.checkRequestPartitions(req, b.createPartitionsCount(r))
		for _, rt := range r.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic = rt.Topic
			var err error
			if tooMany != nil {
				st.ErrorCode = kerr.PolicyViolation.Code
				msg := tooMany.Error()
				st.ErrorMessage = &msg
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if ctrl != nil && !r.ValidateOnly && mutations.Record(b.addedPartitions(rt.Topic, rt.Count), time.Now()) != nil {
				st.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
				st.ErrorMessage = kmsg.StringPtr(mutationRefused)
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if ctrl == nil {
				err = controller.ErrNotController
			} else {
				var assignment [][]coord.BrokerID
				for _, a := range rt.Assignment {
					assignment = append(assignment, coord.BrokerIDs(a.Replicas))
				}
				err = ctrl.CreatePartitions(ctx, rt.Topic, int(rt.Count), assignment, r.ValidateOnly)
			}
			if err != nil {
				st.ErrorCode = kafkaerr.Controller.Error(err).Code
				msg := err.Error()
				st.ErrorMessage = &msg
			} else if !r.ValidateOnly {
				wctx, cancel := context.WithTimeout(ctx, requestTimeout(r.TimeoutMillis))
				b.member.waitPropagated(wctx)
				if !b.cache.WaitFor(wctx, b.closing, func() bool { return b.cache.TopicReady(rt.Topic, int(rt.Count)) }) {
					st.ErrorCode = kerr.RequestTimedOut.Code
				}
				cancel()
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}, nil
}

// createPartitionsCount counts the partitions r asks to add: each topic's
// new count less the count this broker's metadata cache has (a topic it
// does not know counts in full, as if new).
func (b *Broker) createPartitionsCount(r *kmsg.CreatePartitionsRequest) int64 {
	var total int64
	for _, rt := range r.Topics {
		total += int64(b.addedPartitions(rt.Topic, rt.Count))
	}
	return total
}

// addedPartitions counts the partitions that growing topic to count
// adds, by this broker's metadata cache (a topic it does not know counts
// in full, as if new).
func (b *Broker) addedPartitions(topic string, count int32) int {
	have := 0
	if t, ok := b.cache.Topic(topic); ok {
		have = len(t.Partitions)
	}
	return max(0, int(count)-have)
}
