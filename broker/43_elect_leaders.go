package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// ElectLeaders v0..v2 (v1+ choose preferred or unclean): run leader
// elections on the controller.
func init() { registerAPI(43, 0, 2, handleElectLeaders) }

// handleElectLeaders runs the controller's preferred (election type 0) or
// unclean (1) elections for the named partitions, all when none are
// named; other brokers answer NOT_CONTROLLER.
func handleElectLeaders(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ElectLeadersRequest)
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	ctrl := b.member.Controller()
	if r.ElectionType != 0 && r.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil, nil
	}
	if ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil, nil
	}
	var partitions []coord.TopicPartition
	if r.Topics != nil {
		partitions = []coord.TopicPartition{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				partitions = append(partitions, coord.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	return nil, func(ctx context.Context) kmsg.Response {
		results, err := ctrl.ElectLeaders(ctx, r.ElectionType == 0, partitions)
		if err != nil {
			resp.ErrorCode = kafkaerr.Controller.Error(err).Code
			return resp
		}
		b.member.waitPropagated(ctx)
		byTopic := map[string]int{}
		for tp, perr := range results {
			i, ok := byTopic[tp.Topic]
			if !ok {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = tp.Topic
				resp.Topics = append(resp.Topics, rt)
				i = len(resp.Topics) - 1
				byTopic[tp.Topic] = i
			}
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = tp.Partition
			if perr != nil {
				rp.ErrorCode = kafkaerr.Controller.Error(perr).Code
				msg := perr.Error()
				rp.ErrorMessage = &msg
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
		}
		return resp
	}, nil
}
