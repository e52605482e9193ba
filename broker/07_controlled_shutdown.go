package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// ControlledShutdown v2..v3 (broker epoch): a broker about to stop asks
// the controller to move its leaderships away.
func init() { registerAPI(7, 2, 3, handleControlledShutdown) }

// handleControlledShutdown runs the controller's ControlledShutdown and
// lists the partitions the broker still leads; a broker that does not run
// the controller answers NOT_CONTROLLER.
func handleControlledShutdown(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ControlledShutdownRequest)
	resp := r.ResponseKind().(*kmsg.ControlledShutdownResponse)
	ctrl := b.member.Controller()
	if ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		remaining, err := ctrl.ControlledShutdown(ctx, coord.BrokerID(r.BrokerID), r.BrokerEpoch)
		if err != nil {
			b.logger.Warn("controlled shutdown failed", "broker", r.BrokerID, "error", err)
			resp.ErrorCode = kafkaerr.Controller.Error(err).Code
			return resp
		}
		for _, tp := range remaining {
			p := kmsg.NewControlledShutdownResponsePartitionsRemaining()
			p.Topic, p.Partition = tp.Topic, tp.Partition
			resp.PartitionsRemaining = append(resp.PartitionsRemaining, p)
		}
		return resp
	}, nil
}
