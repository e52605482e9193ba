package broker

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe v0..v1 (KIP-848; v1: member type).
func init() { registerAPI(69, 0, 1, handleConsumerGroupDescribe) }

// handleConsumerGroupDescribe describes consumer groups of the consumer
// protocol: epochs, assignor, and each member's epoch, subscription,
// assignment and target assignment. A classic group, or none, is
// GROUP_ID_NOT_FOUND, as in Kafka.
func handleConsumerGroupDescribe(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		sh, code := b.groups.shard(id)
		switch {
		case code != 0:
			dg.ErrorCode = code
		case sh.consumers[id] != nil:
			dg = sh.consumers[id].Describe(b.groups.image())
		default:
			msg := fmt.Sprintf("Group %s not found.", id)
			if sh.groups[id] != nil {
				msg = fmt.Sprintf("Group %s is not a consumer group.", id)
			}
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
		}
		if code == 0 {
			sh.mu.Unlock()
		}
		dg.AuthorizedOperations = math.MinInt32
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil, nil
}
