package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup v0..v5 (v3+: several members at once).
func init() { registerAPI(13, 0, 5, handleLeaveGroup) }

// handleLeaveGroup removes members from their group, which rebalances.
// Classic members of a consumer group leave it, and the answer waits
// for the records of their removal.
func handleLeaveGroup(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.LeaveGroupRequest)
	failed := func(code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		return failed(code), nil, nil
	}
	defer sh.mu.Unlock()
	if cg := sh.consumers[r.Group]; cg != nil {
		resp, out := cg.LeaveClassic(time.Now(), r)
		return b.groups.respondConsumer(sh, cg, nil, out, resp, failed)
	}
	g := sh.groups[r.Group]
	if g == nil {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		if r.Version < 3 {
			resp.ErrorCode = kerr.UnknownMemberID.Code
		}
		for _, m := range r.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, kerr.UnknownMemberID.Code
			resp.Members = append(resp.Members, rm)
		}
		return resp, nil, nil
	}
	resp, out := g.Leave(time.Now(), r)
	sh.apply(b.groups, g, out)
	return resp, nil, nil
}
