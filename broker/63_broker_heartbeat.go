package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
)

// BrokerHeartbeat v1 (OfflineLogDirs), broker to controller. tripod's
// brokers keep their liveness in the coordination backend, not by
// heartbeats, so this API carries one thing only: a broker whose log dirs
// went offline (logdirs.go) tells the controller, as Kafka's ZooKeeper
// mode does with a log_dir_event_notification. Other fields are ignored.
func init() {
	registerAPI(63, replica.BrokerHeartbeatVersion, replica.BrokerHeartbeatVersion, handleBrokerHeartbeat)
}

// handleBrokerHeartbeat passes a report of offline log dirs to the
// controller this broker runs (coord's LogDirFailure), which asks the
// reporting broker for its replicas' state; a broker that is not the
// controller answers NOT_CONTROLLER, a report from another incarnation
// STALE_BROKER_EPOCH.
func handleBrokerHeartbeat(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.BrokerHeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	ctrl := b.member.Controller()
	if ctrl == nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil, nil
	}
	if len(r.OfflineLogDirs) == 0 {
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		if err := ctrl.LogDirFailure(ctx, coord.BrokerID(r.BrokerID), r.BrokerEpoch); err != nil {
			b.logger.Warn("log dir failure report not taken", "broker", r.BrokerID, "error", err)
			resp.ErrorCode = kafkaerr.Controller.Error(err).Code
			return resp
		}
		b.logger.Info("log dir failure reported", "broker", r.BrokerID, "offline_dirs", len(r.OfflineLogDirs))
		return resp
	}, nil
}
