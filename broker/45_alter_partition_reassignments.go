package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// AlterPartitionReassignments v0..v1 (KIP-455; v1 may forbid a change of
// replication factor, KIP-860): start, replace or cancel partition
// reassignments on the controller.
func init() { registerAPI(45, 0, 1, handleAlterPartitionReassignments) }

// handleAlterPartitionReassignments hands every named partition's target
// replicas (null: cancel its reassignment in progress) to the controller
// this broker runs (other brokers answer NOT_CONTROLLER) and answers, per
// partition, once the reassignments are started: they complete in the
// background, as the new replicas catch up (ListPartitionReassignments
// shows them until then).
func handleAlterPartitionReassignments(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	ctrl := b.member.Controller()
	if ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		msg := fmt.Sprintf("broker %d is not the controller", b.cfg.BrokerID)
		resp.ErrorMessage = &msg
		return resp, nil, nil
	}
	var reqs []controller.Reassignment
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			re := controller.Reassignment{Partition: coord.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				KeepReplicationFactor: !r.AllowReplicationFactorChange}
			if rp.Replicas != nil { // null cancels
				re.Target = coord.BrokerIDs(rp.Replicas)
			}
			reqs = append(reqs, re)
		}
	}
	return nil, func(ctx context.Context) kmsg.Response {
		wctx, cancel := context.WithTimeout(ctx, requestTimeout(r.TimeoutMillis))
		defer cancel()
		errs, err := ctrl.AlterReassignments(wctx, reqs)
		if err != nil {
			resp.ErrorCode = kafkaerr.Controller.Error(err).Code
			msg := err.Error()
			resp.ErrorMessage = &msg
			return resp
		}
		i := 0
		for _, rt := range r.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				if perr := errs[i]; perr != nil {
					sp.ErrorCode = kafkaerr.Controller.Error(perr).Code
					msg := perr.Error()
					sp.ErrorMessage = &msg
					if sp.ErrorCode == kerr.UnknownServerError.Code {
						b.logger.Error("partition reassignment failed", "topic", rt.Topic, "partition", rp.Partition, "error", perr)
					}
				}
				i++
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}, nil
}
