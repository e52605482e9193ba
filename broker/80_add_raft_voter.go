package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// AddRaftVoter v0 (KIP-853), on a broker that runs the quorum
// (quorum.go).
func init() { registerOptionalAPI(80, 0, 0, servesQuorum, handleAddRaftVoter) }

// handleAddRaftVoter makes broker VoterID, an observer of the quorum, a
// voter (coord.Quorum.AddVoter): once it has caught up with the leader's
// log, the change commits through the quorum and the answer follows,
// all within the request's timeout_ms (voterChangeWait). A cluster id
// that is not this cluster's gets INCONSISTENT_CLUSTER_ID. Tripod knows
// a member by its broker id alone: the directory id and listeners Kafka
// asks for are not needed (the observer already reaches the quorum at
// its raft.listen) and are ignored. Errors answer as kafkaerr.Quorum
// maps them: DUPLICATE_VOTER, VOTER_NOT_FOUND (not an observer),
// REQUEST_TIMED_OUT (not caught up, another change in progress, out of
// time), NOT_LEADER_OR_FOLLOWER (no leader). With an authorizer the
// request needs ALTER on the cluster (security/rules.go).
func handleAddRaftVoter(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AddRaftVoterRequest)
	resp := r.ResponseKind().(*kmsg.AddRaftVoterResponse)
	return voterChange(b, req, resp, r.ClusterID, r.VoterID, voterChangeWait(r.TimeoutMillis), coord.Quorum.AddVoter,
		func(code int16, msg *string) { resp.ErrorCode, resp.ErrorMessage = code, msg }, "broker added to the raft voters")
}
