package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics v0..v6 (v6 may name topics by ID).
func init() { registerAPI(20, 0, 6, handleDeleteTopics) }

// handleDeleteTopics removes topics from the catalogue and deletes their
// logs; a fetch waiting on a deleted partition is woken and answered with
// UNKNOWN_TOPIC_OR_PARTITION.
func handleDeleteTopics(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
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
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic = tg.name
		st.TopicID = tg.id
		var name string
		switch {
		case tg.name != nil:
			name = *tg.name
		default:
			t, ok := b.topicByID(tg.id)
			if !ok {
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name = t.Name
			st.Topic = &t.Name
		}
		if t, ok := b.topic(name); ok {
			st.TopicID = t.ID
		}
		if err := b.deleteTopic(ctx, name); err != nil {
			if errors.Is(err, ErrUnknownTopic) {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				b.logger.Error("delete topic failed", "topic", name, "error", err)
				st.ErrorCode = kerr.UnknownServerError.Code
			}
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}
