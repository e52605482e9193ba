package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// ListPartitionReassignments v0 (KIP-455): the reassignments in progress,
// as the controller holds them.
func init() { registerAPI(46, 0, 0, handleListPartitionReassignments) }

// handleListPartitionReassignments lists the reassignments in progress of
// the named partitions, all when topics is null, with each partition's
// replicas (target first) and those being added and removed; other
// brokers than the controller answer NOT_CONTROLLER. A partition that is
// not being reassigned (or does not exist) is left out, as Kafka does.
func handleListPartitionReassignments(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	ctrl := b.member.Controller()
	if ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		msg := fmt.Sprintf("broker %d is not the controller", b.cfg.BrokerID)
		resp.ErrorMessage = &msg
		return resp, nil, nil
	}
	var tps []coord.TopicPartition
	if r.Topics != nil {
		tps = []coord.TopicPartition{}
		for _, rt := range r.Topics {
			for _, p := range rt.Partitions {
				tps = append(tps, coord.TopicPartition{Topic: rt.Topic, Partition: p})
			}
		}
	}
	return nil, func(ctx context.Context) kmsg.Response {
		ongoing, err := ctrl.Reassignments(ctx, tps)
		if err != nil {
			resp.ErrorCode = kafkaerr.Controller.Error(err).Code
			msg := err.Error()
			resp.ErrorMessage = &msg
			return resp
		}
		for _, o := range ongoing {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != o.Partition.Topic {
				st := kmsg.NewListPartitionReassignmentsResponseTopic()
				st.Topic = o.Partition.Topic
				resp.Topics = append(resp.Topics, st)
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = o.Partition.Partition
			sp.Replicas = coord.Int32s(o.Replicas)
			sp.AddingReplicas = coord.Int32s(o.Adding)
			sp.RemovingReplicas = coord.Int32s(o.Removing)
			t := &resp.Topics[len(resp.Topics)-1]
			t.Partitions = append(t.Partitions, sp)
		}
		return resp
	}, nil
}
