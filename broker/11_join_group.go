package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// JoinGroup v0..v9 (v4+: the member id is handed out first,
// MEMBER_ID_REQUIRED; v5+: static members).
func init() { registerAPI(11, 0, 9, handleJoinGroup) }

// handleJoinGroup adds the member to its group (created on first join)
// and holds the answer until the group's rebalance completes. A consumer
// group of the consumer protocol with members takes it as a classic
// member (KIP-848's online migration) and answers once its records are
// replicated; an empty one is dropped for a classic group.
func handleJoinGroup(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.JoinGroupRequest)
	failed := func(code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = code, -1
		return resp
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		return failed(code), nil, nil
	}
	defer sh.mu.Unlock()
	if cg := sh.consumers[r.Group]; cg != nil {
		if cg.NumMembers() > 0 {
			resp, out := cg.JoinClassic(time.Now(), r, clientID(req), clientHost(req), b.groups.image())
			return b.groups.respondConsumer(sh, cg, nil, out, resp, failed)
		}
		b.groups.dropEmptyConsumerGroup(sh, r.Group)
	}
	g := sh.getOrCreate(b.groups, r.Group)
	w, ch := b.groups.newWaiter(sh)
	sh.apply(b.groups, g, g.Join(time.Now(), w, r, clientID(req), clientHost(req)))
	sh.dropIfUnused(g)
	return nil, awaitReply(sh, w, ch, func(rep group.Reply) kmsg.Response {
		if rep.Join == nil {
			return failed(kerr.NotCoordinator.Code)
		}
		return rep.Join
	}), nil
}

// awaitReply waits for the group's answer to a held request; answer gets
// an empty Reply if the shard unloads or the client goes away first.
func awaitReply(sh *groupShard, w group.Waiter, ch <-chan group.Reply, answer func(group.Reply) kmsg.Response) laterFunc {
	return func(ctx context.Context) kmsg.Response {
		select {
		case rep := <-ch:
			return answer(rep)
		case <-ctx.Done():
			sh.forget(w)
			return answer(group.Reply{})
		}
	}
}

// clientID is the request header's client id.
func clientID(req *request) string {
	if req.header.clientID == nil {
		return ""
	}
	return *req.header.clientID
}

// clientHost is the client's address as Kafka shows it: "/" and the IP.
func clientHost(req *request) string {
	return "/" + req.conn.clientHost
}
