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
	return voterChange(b, req, resp, r.ClusterID, r.VoterID, quorumWait, coord.Quorum.RemoveVoter,
		func(code int16, msg *string) { resp.ErrorCode, resp.ErrorMessage = code, msg }, "broker removed from the raft voters")
}
