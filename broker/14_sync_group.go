package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// SyncGroup v0..v5.
func init() { registerAPI(14, 0, 5, handleSyncGroup) }

// handleSyncGroup hands a member its assignment once the leader's has
// arrived and the group's metadata is replicated. A classic member of a
// consumer group is given at once the assignment the coordinator
// computed for it.
func handleSyncGroup(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.SyncGroupRequest)
	failed := func(code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		return failed(code), nil, nil
	}
	defer sh.mu.Unlock()
	if cg := sh.consumers[r.Group]; cg != nil {
		resp, out := cg.SyncClassic(time.Now(), r, b.groups.image())
		return b.groups.respondConsumer(sh, cg, nil, out, resp, failed)
	}
	g := sh.groups[r.Group]
	if g == nil {
		return failed(kerr.UnknownMemberID.Code), nil, nil
	}
	w, ch := b.groups.newWaiter(sh)
	sh.apply(b.groups, g, g.Sync(time.Now(), w, r))
	return nil, awaitReply(sh, w, ch, func(rep group.Reply) kmsg.Response {
		if rep.Sync == nil {
			return failed(kerr.NotCoordinator.Code)
		}
		return rep.Sync
	}), nil
}
