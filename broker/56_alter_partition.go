package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// AlterPartition v0..v1 (topics by name): a partition leader asks the
// controller to change its ISR.
func init() { registerAPI(56, 0, replica.AlterPartitionVersion, handleAlterPartition) }

// handleAlterPartition passes the partitions' ISR changes to the
// controller this broker runs, which commits them together; a broker that
// is not the controller answers NOT_CONTROLLER.
func handleAlterPartition(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AlterPartitionRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
	ctrl := b.member.Controller()
	if ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		var reqs []controller.AlterPartitionRequest
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				reqs = append(reqs, controller.AlterPartitionRequest{
					BrokerID: coord.BrokerID(r.BrokerID), BrokerEpoch: r.BrokerEpoch,
					Partition:   coord.TopicPartition{Topic: t.Topic, Partition: p.Partition},
					LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: coord.BrokerIDs(p.NewISR),
				})
			}
		}
		res, err := ctrl.AlterPartitions(ctx, reqs)
		if err != nil {
			resp.ErrorCode = kafkaerr.AlterPartition.Error(err).Code
			return resp
		}
		i := 0
		for _, t := range r.Topics {
			rt := kmsg.NewAlterPartitionResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionResponseTopicPartition()
				rp.Partition = p.Partition
				if res[i].Err != nil {
					rp.ErrorCode = kafkaerr.AlterPartition.Error(res[i].Err).Code
				} else {
					st := res[i].State
					rp.LeaderID, rp.LeaderEpoch = int32(st.Leader), st.LeaderEpoch
					rp.ISR, rp.PartitionEpoch = coord.Int32s(st.ISR), st.PartitionEpoch
				}
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}, nil
}
