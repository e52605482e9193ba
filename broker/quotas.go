package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/quota"
)

// quotaExempt reports whether a request is outside the client quotas, as
// in Kafka: the handshake and authentication requests, the requests
// between brokers (the controller's, a follower's fetch) and those that
// no client sends.
func quotaExempt(req *request) bool {
	switch r := req.kreq.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest,
		*kmsg.LeaderAndISRRequest, *kmsg.StopReplicaRequest, *kmsg.UpdateMetadataRequest,
		*kmsg.ControlledShutdownRequest, *kmsg.WriteTxnMarkersRequest, *kmsg.AlterPartitionRequest,
		*kmsg.BrokerHeartbeatRequest:
		return true
	case *kmsg.FetchRequest:
		return r.ReplicaID >= 0 || r.ReplicaState.ID >= 0
	}
	return false
}

// quotaClient returns the user and client id the quotas know a
// request's client by.
func quotaClient(req *request) (user, clientID string) {
	if req.header.clientID != nil {
		clientID = *req.header.clientID
	}
	return req.conn.principal().Name, clientID
}

// underQuota reports whether a quota applies to req's client: its
// connection then reads one request at a time (network.Response.Serial).
func (b *Broker) underQuota(req *request) bool {
	if req == nil || quotaExempt(req) {
		return false
	}
	return b.quotas.Applies(quotaClient(req))
}

// applyQuotas records what req cost against its client's quotas (a
// Produce's request bytes, a consumer Fetch's response bytes, the
// handler's time) and, when the client is over one, sets the response's
// throttle_time_ms and mutes the connection for that long (KIP-219). A
// request without a response (acks=0) mutes the connection all the same.
func (b *Broker) applyQuotas(req *request, resp kmsg.Response, size int, handled time.Duration) {
	if req == nil || quotaExempt(req) {
		return
	}
	user, clientID := quotaClient(req)
	now := time.Now()
	throttle := b.quotas.Record(quota.Request, user, clientID, quota.NanosToPercent(handled), now)
	switch req.kreq.(type) {
	case *kmsg.ProduceRequest:
		throttle = max(throttle, b.quotas.Record(quota.Produce, user, clientID, float64(size), now))
	case *kmsg.FetchRequest:
		if resp != nil {
			throttle = max(throttle, b.quotas.Record(quota.Fetch, user, clientID, float64(responseSizeHint(resp)+req.reads.bytes()), now))
		}
	}
	if throttle <= 0 {
		return
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok && resp != nil {
		ms := int32(min(throttle.Milliseconds(), int64(1<<31-1)))
		if old, _ := tr.Throttle(); old < ms {
			resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
		}
	}
	req.conn.mute(now.Add(throttle))
}

// mutationQuota returns the controller mutation quota of a CreateTopics,
// CreatePartitions or DeleteTopics request (KIP-599): strict from the
// version whose clients know THROTTLING_QUOTA_EXCEEDED (strictFrom on),
// permissive before.
func (b *Broker) mutationQuota(req *request, strictFrom int16) *quota.MutationQuota {
	user, clientID := quotaClient(req)
	return b.quotas.MutationQuota(user, clientID, req.header.version >= strictFrom)
}

// throttleMutations sets resp's throttle_time_ms to what is left of q's
// throttle, if longer, and mutes the connection as long, as Kafka throttles
// a request over its controller mutation quota.
func (b *Broker) throttleMutations(req *request, resp kmsg.Response, q *quota.MutationQuota) {
	now := time.Now()
	throttle := q.ThrottleTime(now)
	if throttle <= 0 {
		return
	}
	ms := int32(min(throttle.Milliseconds(), int64(1<<31-1)))
	if old, _ := resp.(kmsg.ThrottleResponse).Throttle(); old < ms {
		resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
	}
	req.conn.mute(now.Add(throttle))
}

// mutationRefused is the error message of a topic refused by a strict
// controller mutation quota, Kafka's.
const mutationRefused = "The throttling quota has been exceeded."
