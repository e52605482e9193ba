package coord

import (
	"context"
	"errors"
	"time"
)

// Quorum is implemented by the backends whose coordination service runs
// inside the brokers (embedded Raft): the brokers are its voters and
// observers, and the set of voters changes while the cluster runs, as
// KRaft's dynamic quorums (KIP-595, KIP-853). ZooKeeper and etcd keep
// their quorums themselves; their backends do not implement it.
//
// A voter takes part in elections and commits; the controller is always a
// voter (on Raft, the controller is the Raft leader). An observer (KRaft's
// name; hashicorp/raft's non-voter) receives the metadata log, serves its
// broker's reads from it and sends its writes to the leader, and never
// counts toward a quorum.
type Quorum interface {
	// DescribeQuorum returns the quorum as the leader sees it: the leader,
	// its epoch (the Raft term), the high watermark (the commit index),
	// and each voter's and observer's log end. It asks the leader (a
	// round trip when this node does not lead). Errors: ErrUnavailable
	// when no leader is reachable before ctx ends; ctx.Err(); ErrClosed.
	DescribeQuorum(ctx context.Context) (QuorumState, error)

	// AddVoter makes broker id, an observer of the quorum, a voter, once
	// it has caught up with the leader's log. One change at a time: the
	// change is committed through the quorum itself before AddVoter
	// returns. Errors: ErrDuplicateVoter when id already votes;
	// ErrVoterNotFound when id is not an observer of the quorum (it never
	// joined); ErrNotCaughtUp when it does not catch up before ctx ends
	// (nothing changed); ErrQuorumChangeInProgress while another change
	// is being committed; ErrUnavailable; ctx.Err(); ErrClosed.
	AddVoter(ctx context.Context, id BrokerID) error

	// RemoveVoter removes broker id from the voters, live or dead: a live
	// broker stays an observer. It refuses to remove the last voter, and
	// any voter whose removal would leave the new voters without a live
	// majority (the quorum could not commit, not even the change).
	// Committed through the quorum as AddVoter. Errors: ErrVoterNotFound
	// when id is not a voter; ErrNoLiveMajority, naming the rule, for the
	// last voter or a change leaving no live majority (nothing changed);
	// ErrQuorumChangeInProgress; ErrUnavailable; ctx.Err(); ErrClosed.
	RemoveVoter(ctx context.Context, id BrokerID) error
}

// QuorumState is the quorum as its leader sees it (Kafka's
// DescribeQuorumResponse).
type QuorumState struct {
	// LeaderID is the leader, NoBroker when there is none.
	LeaderID BrokerID
	// LeaderEpoch is the leader's epoch (the Raft term).
	LeaderEpoch int64
	// HighWatermark is the index after the last log entry committed by a
	// majority of the voters (exclusive, as Kafka's high watermark and
	// LogEndOffset are: a member whose LogEndOffset equals the leader's
	// has its whole log).
	HighWatermark int64
	// Voters and Observers, ordered by ID.
	Voters    []QuorumMember
	Observers []QuorumMember
}

// QuorumMember is one voter's or observer's replication state as the
// leader last heard it.
type QuorumMember struct {
	ID BrokerID
	// Address is the member's Raft address.
	Address string
	// LogEndOffset is the index after the last log entry the member
	// holds (-1 when unknown).
	LogEndOffset int64
	// LastFetch is when the leader last heard from it, LastCaughtUp when
	// it last had the leader's whole log; zero when never.
	LastFetch    time.Time
	LastCaughtUp time.Time
}

// Errors of Quorum, Kafka's DUPLICATE_VOTER, VOTER_NOT_FOUND and the
// others of AddRaftVoter and RemoveRaftVoter. ErrNoLiveMajority is a
// request the quorum refuses as unsafe (Kafka's INVALID_REQUEST with the
// rule as its message).
var (
	ErrDuplicateVoter         = errors.New("coord: already a voter")
	ErrVoterNotFound          = errors.New("coord: not a member of the quorum")
	ErrNotCaughtUp            = errors.New("coord: not caught up with the leader's log")
	ErrQuorumChangeInProgress = errors.New("coord: another quorum change is in progress")
	ErrNoLiveMajority         = errors.New("coord: the new voters would have no live majority")
)
