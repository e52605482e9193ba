package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/controller"
)

// DeleteTopics v0..v6 (v6 may name topics by ID).
func init() { registerAPI(20, 0, 6, handleDeleteTopics) }

// handleDeleteTopics deletes topics through the controller this broker
// runs (other brokers answer NOT_CONTROLLER) and waits (up to the
// request's timeout) until this broker's metadata cache no longer has
// them; the replicas' logs are deleted by StopReplica, which wakes fetches
// waiting on them.
func handleDeleteTopics(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if r.Version >= 6 {
		for _, rt := range r.Topics {
			targets = append(targets, target{name: rt.Topic, id: rt.TopicID})
		}
	} else {
		for _, name := range r.TopicNames {
			targets = append(targets, target{name: &name})
		}
	}
	ctrl := b.member.Controller()
	mutations := b.mutationQuota(req, 5)
	return nil, func(ctx context.Context) kmsg.Response {
		defer b.throttleMutations(req, resp, mutations)
		for _, tg := range targets {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic = tg.name
			st.TopicID = tg.id
			var name string
			switch {
			case tg.name != nil:
				name = *tg.name
			default:
				t, ok := b.cache.TopicByID(tg.id)
				if !ok {
					st.ErrorCode = kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, st)
					continue
				}
				name = t.Name
				st.Topic = &t.Name
			}
			// A topic this broker knows counts its partitions against
			// the client's controller_mutation_rate; one it does not is
			// left to the controller to answer.
			if t, ok := b.cache.Topic(name); ok {
				st.TopicID = t.ID
				if ctrl != nil && mutations.Record(len(t.Partitions), time.Now()) != nil {
					st.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
					st.ErrorMessage = kmsg.StringPtr(mutationRefused)
					resp.Topics = append(resp.Topics, st)
					continue
				}
			}
			err := controller.ErrNotController
			if ctrl != nil {
				err = ctrl.DeleteTopic(ctx, name)
			}
			if err == nil {
				wctx, cancel := context.WithTimeout(ctx, requestTimeout(r.TimeoutMillis))
				b.member.waitPropagated(wctx)
				b.cache.WaitFor(wctx, b.closing, func() bool { return !b.cache.HasTopic(name) })
				cancel()
			} else {
				kind := kafkaerr.Controller.Error(err)
				if kind == kerr.UnknownServerError {
					b.logger.Error("delete topic failed", "topic", name, "error", err)
				}
				st.ErrorCode = kind.Code
				msg := err.Error()
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}, nil
}
