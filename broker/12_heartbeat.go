package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat v0..v4.
func init() { registerAPI(12, 0, 4, handleHeartbeat) }

// handleHeartbeat renews a member's session; REBALANCE_IN_PROGRESS tells
// it to rejoin. A classic member of a consumer group is answered by the
// consumer group.
func handleHeartbeat(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.HeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil, nil
	}
	defer sh.mu.Unlock()
	if cg := sh.consumers[r.Group]; cg != nil {
		code, out := cg.HeartbeatClassic(time.Now(), r)
		b.groups.settleConsumer(sh, cg, out) // a classic heartbeat writes nothing
		resp.ErrorCode = code
		return resp, nil, nil
	}
	g := sh.groups[r.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, nil
	}
	code, out := g.Heartbeat(time.Now(), r)
	sh.apply(b.groups, g, out)
	resp.ErrorCode = code
	return resp, nil, nil
}
