package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// The quorum's APIs (DescribeQuorum, AddRaftVoter, RemoveRaftVoter) are
// served by a broker whose coordination backend runs its quorum inside
// the brokers, as KRaft's controllers do: embedded Raft. On ZooKeeper or
// etcd, which keep their quorums themselves, ApiVersions does not list
// them and a request for one closes the connection, as Kafka treats an
// API it has not enabled.

// quorum returns the coordination backend b uses now as the quorum it
// runs (coord.Quorum); ok is false on a backend that runs none.
func (b *Broker) quorum() (q coord.Quorum, ok bool) {
	q, ok = coord.Current(b.backend).(coord.Quorum)
	return q, ok
}

// servesQuorum reports whether b serves the quorum's APIs.
func servesQuorum(b *Broker) bool {
	_, ok := b.quorum()
	return ok
}

// quorumTopic and quorumPartition name the quorum's log as KRaft does,
// the partition DescribeQuorum asks about.
const (
	quorumTopic     = "__cluster_metadata"
	quorumPartition = 0
)

// quorumWait bounds the wait of DescribeQuorum and RemoveRaftVoter,
// which carry no timeout: a round trip to the leader, and a commit
// through the quorum. It is shorter than the 10 s franz-go and the Java
// client give a request without a timeout of its own.
const quorumWait = 5 * time.Second

// quorumError returns the code and message that answer err, a
// coord.Quorum error (kafkaerr.Quorum); no error is code 0 and no
// message.
func quorumError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return kafkaerr.Quorum.Code(err), &msg
}

// checkClusterID returns INCONSISTENT_CLUSTER_ID and Kafka's message when
// a voter change names a cluster id that is not this cluster's; a
// request that names none is for any cluster.
func checkClusterID(id *string) (*kerr.Error, *string) {
	if id == nil || *id == clusterID {
		return nil, nil
	}
	msg := "The given id \"" + *id + "\" doesn't match the cluster id \"" + clusterID + "\""
	return kerr.InconsistentClusterID, &msg
}

// voterChangeWait is how long AddRaftVoter waits for the new voter to
// catch up and the change to commit: the request's timeout_ms, 15 s
// (Kafka's default) when not positive, at most 10 minutes.
func voterChangeWait(timeoutMillis int32) time.Duration {
	if timeoutMillis <= 0 {
		return 15 * time.Second
	}
	return min(time.Duration(timeoutMillis)*time.Millisecond, 10*time.Minute)
}

// invalidVoterID answers a voter id that cannot be a broker's.
func invalidVoterID(id int32) (int16, *string) {
	msg := "voter id " + strconv.Itoa(int(id)) + ": want a broker id, at least 0"
	return kerr.InvalidRequest.Code, &msg
}

// voterChange answers AddRaftVoter or RemoveRaftVoter: it checks the
// request's cluster id and voter id, then makes the change (change, a
// coord.Quorum method) within wait, after the connection's earlier
// requests, and logs it as done. setErr writes an error code and message
// into the response.
func voterChange(b *Broker, req *request, resp kmsg.Response, clusterID *string, voterID int32, wait time.Duration,
	change func(coord.Quorum, context.Context, coord.BrokerID) error, setErr func(int16, *string), done string,
) (kmsg.Response, laterFunc, error) {
	if e, msg := checkClusterID(clusterID); e != nil {
		setErr(e.Code, msg)
		return resp, nil, nil
	}
	if voterID < 0 {
		setErr(invalidVoterID(voterID))
		return resp, nil, nil
	}
	q, _ := b.quorum()
	principal := req.conn.principal().String()
	return nil, func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		err := change(q, ctx, coord.BrokerID(voterID))
		setErr(quorumError(err))
		if err == nil {
			b.logger.Info(done, "voter", voterID, "principal", principal)
		}
		return resp
	}, nil
}

// describeQuorumResponse is DescribeQuorum's answer at version for the
// quorum st (or the error err of describing it), at time now, with the
// voters' listeners taken from the live brokers: one topic, the quorum's
// partition, as Kafka's RaftUtil.singletonDescribeQuorumResponse builds
// it. The leader's own fetch and caught-up times are now; a time the
// leader never saw is -1. Tripod's brokers have no directory ids: each is
// zero.
func describeQuorumResponse(version int16, st coord.QuorumState, err error, live []coord.Broker, now time.Time) *kmsg.DescribeQuorumResponse {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.SetVersion(version)
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = quorumTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.Partition = quorumPartition
	if err != nil {
		rp.ErrorCode, rp.ErrorMessage = quorumError(err)
		rp.LeaderID = -1
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	rp.LeaderID = int32(st.LeaderID)
	rp.LeaderEpoch = int32(min(st.LeaderEpoch, int64(1<<31-1)))
	rp.HighWatermark = st.HighWatermark
	for _, m := range st.Voters {
		rp.CurrentVoters = append(rp.CurrentVoters, replicaState(m, st.LeaderID, now))
	}
	for _, m := range st.Observers {
		rp.Observers = append(rp.Observers, replicaState(m, st.LeaderID, now))
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	if version >= 2 {
		endpoints := map[coord.BrokerID][]coord.Endpoint{}
		for _, lb := range live {
			endpoints[lb.ID] = brokerEndpoints(lb)
		}
		for _, m := range st.Voters {
			node := kmsg.NewDescribeQuorumResponseNode()
			node.NodeID = int32(m.ID)
			for _, ep := range endpoints[m.ID] {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = ep.Listener, ep.Host, uint16(ep.Port)
				node.Listeners = append(node.Listeners, l)
			}
			resp.Nodes = append(resp.Nodes, node)
		}
	}
	return resp
}

// replicaState is one voter's or observer's row of DescribeQuorum.
func replicaState(m coord.QuorumMember, leader coord.BrokerID, now time.Time) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	rs.ReplicaID = int32(m.ID)
	rs.LogEndOffset = m.LogEndOffset
	if m.ID == leader {
		rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = now.UnixMilli(), now.UnixMilli()
		return rs
	}
	rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = unixMilli(m.LastFetch), unixMilli(m.LastCaughtUp)
	return rs
}

// unixMilli is t in Unix milliseconds, -1 for the zero time (never).
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// brokerEndpoints returns b's advertised listeners; a broker registered
// without named listeners has its one PLAINTEXT listener.
func brokerEndpoints(b coord.Broker) []coord.Endpoint {
	if len(b.Endpoints) > 0 {
		return b.Endpoints
	}
	ep, _ := b.ListenerEndpoint("PLAINTEXT")
	return []coord.Endpoint{ep}
}
