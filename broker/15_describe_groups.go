package broker

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v0..v5.
func init() { registerAPI(15, 0, 5, handleDescribeGroups) }

// handleDescribeGroups describes the groups this broker coordinates; a
// group it coordinates but does not have is Dead, as in Kafka.
func handleDescribeGroups(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		sh, code := b.groups.shard(id)
		if code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if sh.consumers[id] != nil {
			// Kafka: DescribeGroups describes classic groups only.
			dg.ErrorCode = kerr.GroupIDNotFound.Code
		} else if g := sh.groups[id]; g != nil {
			dg = g.Describe()
			dg.Group = id
		} else {
			dg.State = "Dead"
		}
		sh.mu.Unlock()
		dg.AuthorizedOperations = math.MinInt32
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil, nil
}
