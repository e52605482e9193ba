package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// RemoveRaftVoter v0 (KIP-853), on a broker that runs the quorum
// (quorum.go).
func init() { registerOptionalAPI(81, 0, 0, servesQuorum, handleRemoveRaftVoter) }

// handleRemoveRaftVoter removes broker VoterID from the voters, live or
// dead (coord.Quorum.RemoveVoter): a live one stays an observer. The
// change commits through the quorum within quorumWait. A cluster id that
// is not this cluster's gets INCONSISTENT_CLUSTER_ID; the directory id
// is ignored, as in AddRaftVoter. Errors answer as kafkaerr.Quorum maps
// them: VOTER_NOT_FOUND (not a voter), REQUEST_TIMED_OUT (another change
// in progress, out of time), NOT_LEADER_OR_FOLLOWER (no leader),
// INVALID_REQUEST with its reason for the last voter, or for one without
// which the rest would have no live majority. With an
// authorizer the request needs ALTER on the cluster (security/rules.go).
func handleRemoveRaftVoter(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.RemoveRaftVoterRequest)
	resp := r.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	if e, msg := checkClusterID(r.ClusterID); e != nil {
		resp.ErrorCode, resp.ErrorMessage = e.Code, msg
		return resp, nil, nil
	}
	if r.VoterID < 0 {
		resp.ErrorCode, resp.ErrorMessage = invalidVoterID(r.VoterID)
		return resp, nil, nil
	}
	q, _ := b.quorum()
	principal := req.conn.principal().String()
	return nil, func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, quorumWait)
		defer cancel()
		err := q.RemoveVoter(ctx, coord.BrokerID(r.VoterID))
		resp.ErrorCode, resp.ErrorMessage = quorumError(err)
		if err == nil {
			b.logger.Info("broker removed from the raft voters", "voter", r.VoterID, "principal", principal)
		}
		return resp
	}, nil
}
