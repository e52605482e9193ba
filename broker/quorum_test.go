package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/freeport"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// quorumKeys are the quorum's API keys: DescribeQuorum, AddRaftVoter,
// RemoveRaftVoter.
var quorumKeys = []int16{55, 80, 81}

// TestDescribeQuorumResponse checks DescribeQuorum's answer, version by
// version, for a quorum of voters 1, 2 and 3 (1 leads) and observer 4:
// the leader's own times are now, a time the leader never saw is -1,
// v2 names each voter's listeners when its broker is live and no
// directory id; an error is the partition's, with its message at v2.
func TestDescribeQuorumResponse(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	st := coord.QuorumState{
		LeaderID: 1, LeaderEpoch: 7, HighWatermark: 120,
		Voters: []coord.QuorumMember{
			{ID: 1, Address: "127.0.0.1:19192", LogEndOffset: 121},
			{ID: 2, Address: "127.0.0.1:19193", LogEndOffset: 120, LastFetch: now.Add(-40 * time.Millisecond), LastCaughtUp: now.Add(-50 * time.Millisecond)},
			{ID: 3, Address: "127.0.0.1:19194", LogEndOffset: -1},
		},
		Observers: []coord.QuorumMember{
			{ID: 4, Address: "127.0.0.1:19195", LogEndOffset: 100, LastFetch: now.Add(-time.Second)},
		},
	}
	live := []coord.Broker{
		{ID: 1, Endpoints: []coord.Endpoint{{Listener: "CLIENT", Host: "10.0.0.1", Port: 9092}, {Listener: "BROKER", Host: "10.0.0.1", Port: 9093}}},
		{ID: 2, Host: "10.0.0.2", Port: 9092},
		{ID: 4, Host: "10.0.0.4", Port: 9092},
	}
	type row struct {
		id                  int32
		end, fetch, caughtU int64
	}
	wantVoters := []row{{1, 121, now.UnixMilli(), now.UnixMilli()}, {2, 120, now.UnixMilli() - 40, now.UnixMilli() - 50}, {3, -1, -1, -1}}
	wantObservers := []row{{4, 100, now.UnixMilli() - 1000, -1}}
	rows := func(states []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []row {
		var out []row
		for _, s := range states {
			if s.ReplicaDirectoryID != [16]byte{} {
				t.Errorf("replica %d: got directory id %x, want zero", s.ReplicaID, s.ReplicaDirectoryID)
			}
			out = append(out, row{s.ReplicaID, s.LogEndOffset, s.LastFetchTimestamp, s.LastCaughtUpTimestamp})
		}
		return out
	}
	for version := int16(0); version <= 2; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			resp := describeQuorumResponse(version, st, nil, live, now)
			// Encoded and decoded at its version, as a client reads it.
			decoded := kmsg.NewPtrDescribeQuorumResponse()
			decoded.SetVersion(version)
			if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if decoded.ErrorCode != 0 || len(decoded.Topics) != 1 || decoded.Topics[0].Topic != "__cluster_metadata" || len(decoded.Topics[0].Partitions) != 1 {
				t.Fatalf("got error %d topics %+v, want __cluster_metadata alone", decoded.ErrorCode, decoded.Topics)
			}
			p := decoded.Topics[0].Partitions[0]
			if p.Partition != 0 || p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != 7 || p.HighWatermark != 120 {
				t.Fatalf("got partition %d error %d leader %d epoch %d hw %d, want 0, none, 1, 7, 120", p.Partition, p.ErrorCode, p.LeaderID, p.LeaderEpoch, p.HighWatermark)
			}
			gotVoters, gotObservers := rows(p.CurrentVoters), rows(p.Observers)
			wv, wo := slices.Clone(wantVoters), slices.Clone(wantObservers)
			if version == 0 { // no times at v0: the defaults
				for i := range wv {
					wv[i].fetch, wv[i].caughtU = -1, -1
				}
				for i := range wo {
					wo[i].fetch, wo[i].caughtU = -1, -1
				}
			}
			if !slices.Equal(gotVoters, wv) || !slices.Equal(gotObservers, wo) {
				t.Fatalf("got voters %v observers %v, want %v and %v", gotVoters, gotObservers, wv, wo)
			}
			var nodes []string
			for _, n := range decoded.Nodes {
				s := fmt.Sprint(n.NodeID)
				for _, l := range n.Listeners {
					s += fmt.Sprintf(" %s://%s:%d", l.Name, l.Host, l.Port)
				}
				nodes = append(nodes, s)
			}
			var want []string
			if version >= 2 {
				want = []string{"1 CLIENT://10.0.0.1:9092 BROKER://10.0.0.1:9093", "2 PLAINTEXT://10.0.0.2:9092", "3"}
			}
			if !slices.Equal(nodes, want) {
				t.Fatalf("got nodes %q, want %q", nodes, want)
			}
		})
	}
	t.Run("no leader", func(t *testing.T) {
		resp := describeQuorumResponse(2, coord.QuorumState{}, fmt.Errorf("describe quorum: %w", coord.ErrUnavailable), live, now)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.ErrorMessage == nil || p.LeaderID != -1 || len(resp.Nodes) != 0 {
			t.Fatalf("got error %d message %v leader %d nodes %v, want NOT_LEADER_OR_FOLLOWER with a message, leader -1, no nodes",
				p.ErrorCode, p.ErrorMessage, p.LeaderID, resp.Nodes)
		}
	})
}

// TestQuorumRequestChecks covers what the quorum's APIs check before they
// ask the quorum: the partition DescribeQuorum names, the cluster id of
// a voter change and its timeout.
func TestQuorumRequestChecks(t *testing.T) {
	describe := func(topics map[string][]int32) *kmsg.DescribeQuorumRequest {
		r := kmsg.NewPtrDescribeQuorumRequest()
		for _, name := range slices.Sorted(maps.Keys(topics)) {
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = name
			for _, p := range topics[name] {
				rt.Partitions = append(rt.Partitions, kmsg.DescribeQuorumRequestTopicPartition{Partition: p})
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	for _, c := range []struct {
		name   string
		topics map[string][]int32
		ok     bool
	}{
		{"the quorum's partition", map[string][]int32{"__cluster_metadata": {0}}, true},
		{"another partition", map[string][]int32{"__cluster_metadata": {1}}, false},
		{"two partitions", map[string][]int32{"__cluster_metadata": {0, 1}}, false},
		{"another topic", map[string][]int32{"orders": {0}}, false},
		{"two topics", map[string][]int32{"__cluster_metadata": {0}, "orders": {0}}, false},
		{"nothing", nil, false},
	} {
		r := describe(c.topics)
		if got := asksQuorumPartition(r); got != c.ok {
			t.Errorf("%s: got asks the quorum %v, want %v", c.name, got, c.ok)
		}
		if c.ok {
			continue
		}
		resp := unknownQuorumPartitions(r)
		n := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				n++
				if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Errorf("%s: %s-%d: got error %d, want UNKNOWN_TOPIC_OR_PARTITION", c.name, rt.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
		want := 0
		for _, ps := range c.topics {
			want += len(ps)
		}
		if n != want {
			t.Errorf("%s: got %d partitions answered, want %d", c.name, n, want)
		}
	}

	other := "another-cluster"
	if e, msg := checkClusterID(&other); e != kerr.InconsistentClusterID || msg == nil || *msg != `The given id "another-cluster" doesn't match the cluster id "tripod"` {
		t.Errorf("another cluster's id: got %v %v, want INCONSISTENT_CLUSTER_ID with Kafka's message", e, msg)
	}
	own := clusterID
	for _, id := range []*string{nil, &own} {
		if e, _ := checkClusterID(id); e != nil {
			t.Errorf("cluster id %v: got %v, want none", id, e)
		}
	}

	for _, c := range []struct {
		ms   int32
		want time.Duration
	}{{15000, 15 * time.Second}, {0, 15 * time.Second}, {-1, 15 * time.Second}, {250, 250 * time.Millisecond}, {1 << 30, 10 * time.Minute}} {
		if got := voterChangeWait(c.ms); got != c.want {
			t.Errorf("timeout %d ms: got wait %v, want %v", c.ms, got, c.want)
		}
	}
}

// TestQuorumAPIsNeedClusterACLs checks the quorum APIs' rules as Kafka's
// controller checks them: DESCRIBE on the cluster for DescribeQuorum,
// ALTER for AddRaftVoter and RemoveRaftVoter; a denied request gets
// CLUSTER_AUTHORIZATION_FAILED, DescribeQuorum's without a topic.
func TestQuorumAPIsNeedClusterACLs(t *testing.T) {
	b := &Broker{cfg: config.DefaultConfig()}
	clusterACL := func(op coord.ACLOperation) []coord.ACL {
		return []coord.ACL{{ResourceType: coord.ACLResourceCluster, ResourceName: security.ClusterResource, PatternType: coord.ACLPatternLiteral,
			Principal: "User:alice", Host: "*", Operation: op, Permission: coord.ACLPermissionAllow}}
	}
	requests := map[int16]func() kmsg.Request{
		55: func() kmsg.Request {
			r := kmsg.NewPtrDescribeQuorumRequest()
			r.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
			return r
		},
		80: func() kmsg.Request { r := kmsg.NewPtrAddRaftVoterRequest(); r.VoterID = 4; return r },
		81: func() kmsg.Request { r := kmsg.NewPtrRemoveRaftVoterRequest(); r.VoterID = 4; return r },
	}
	for _, c := range []struct {
		name    string
		acls    []coord.ACL
		allowed []int16
	}{
		{"no ACL", nil, nil},
		{"DESCRIBE on the cluster", clusterACL(coord.ACLOperationDescribe), []int16{55}},
		{"ALTER on the cluster", clusterACL(coord.ACLOperationAlter), []int16{55, 80, 81}},
		{"ALTER_CONFIGS on the cluster", clusterACL(coord.ACLOperationAlterConfigs), nil},
	} {
		acls := security.NewACLIndex(security.AuthorizerConfig{ClassName: "kafka.security.authorizer.AclAuthorizer"}, c.acls)
		for _, key := range quorumKeys {
			deny, amend := security.Check(acls, key, requests[key](), "User:alice", "127.0.0.1", authzMetadata{b})
			if amend != nil {
				t.Errorf("%s: %s: got an amend, want the whole request allowed or denied", c.name, kmsg.NameForKey(key))
			}
			if want := slices.Contains(c.allowed, key); (deny == nil) != want {
				t.Errorf("%s: %s: got denied %v, want allowed %v", c.name, kmsg.NameForKey(key), deny != nil, want)
				continue
			}
			if deny == nil {
				continue
			}
			var code int16
			switch r := deny.(type) {
			case *kmsg.DescribeQuorumResponse:
				code = r.ErrorCode
				if len(r.Topics) != 0 {
					t.Errorf("%s: DescribeQuorum denied with topics %+v, want none", c.name, r.Topics)
				}
			case *kmsg.AddRaftVoterResponse:
				code = r.ErrorCode
			case *kmsg.RemoveRaftVoterResponse:
				code = r.ErrorCode
			}
			if code != kerr.ClusterAuthorizationFailed.Code {
				t.Errorf("%s: %s: got error %v, want CLUSTER_AUTHORIZATION_FAILED", c.name, kmsg.NameForKey(key), kerr.ErrorForCode(code))
			}
		}
	}
}

// TestQuorumAPIsUnservedOnZooKeeperAndEtcd runs a broker on each backend
// that keeps its quorum itself: its ApiVersions does not list
// DescribeQuorum, AddRaftVoter nor RemoveRaftVoter, so franz-go refuses
// to send them at once, and a client that sends one anyway has its
// connection closed, as Kafka closes it for an API it has not enabled,
// while the broker goes on serving.
func TestQuorumAPIsUnservedOnZooKeeperAndEtcd(t *testing.T) {
	for _, backend := range []string{"zk", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Coord.Backend = backend
			switch backend {
			case "zk":
				cfg.Coord.ZKConnect = zkserver.StartForTest(t, 1).Addr() + "/quorum-apis"
			case "etcd":
				srv, err := etcdserver.Start(t.TempDir())
				if err != nil {
					t.Fatalf("start etcd: %v", err)
				}
				t.Cleanup(func() { srv.Close() })
				cfg.Coord.EtcdEndpoints, cfg.Coord.EtcdPrefix = srv.Endpoints(), "/quorum-apis"
			}
			b := startBroker(t, cfg)
			if servesQuorum(b) {
				t.Fatalf("backend %s: got a coord.Quorum, want none", backend)
			}
			checkQuorumAPIsListed(t, b, false)

			cl := newClient(t, b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, key := range quorumKeys {
				req := kmsg.RequestForKey(key)
				if _, err := cl.Request(ctx, req); err == nil || ctx.Err() != nil {
					t.Fatalf("%s through franz-go: got %v (context %v), want an error at once", kmsg.NameForKey(key), err, ctx.Err())
				}
			}

			nc := dialBroker(t, b)
			req := kmsg.NewPtrDescribeQuorumRequest()
			req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
			if _, err := nc.Write(encodeRequest(req, 1)); err != nil {
				t.Fatalf("write DescribeQuorum: %v", err)
			}
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, _, err := readResponseFrame(nc); !errors.Is(err, io.EOF) && !isReadError(err) {
				t.Fatalf("DescribeQuorum on a raw connection: got %v, want the connection closed", err)
			}
			checkQuorumAPIsListed(t, b, false) // and still serving
		})
	}
}

// isReadError reports whether err is a failed read of the socket, such
// as a connection reset by the peer (not a timeout).
func isReadError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read" && !op.Timeout()
}

// checkQuorumAPIsListed fails t unless b's ApiVersions lists the quorum's
// APIs (DescribeQuorum v0..v2, AddRaftVoter and RemoveRaftVoter v0) when
// want, or none of them when not, beside DescribeCluster.
func checkQuorumAPIsListed(t *testing.T, b *Broker, want bool) {
	t.Helper()
	resp := askBroker[*kmsg.ApiVersionsResponse](t, b, kmsg.NewPtrApiVersionsRequest())
	listed := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		listed[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if _, ok := listed[60]; !ok {
		t.Fatalf("ApiVersions lacks DescribeCluster: %v", listed)
	}
	wantRanges := map[int16][2]int16{55: {0, 2}, 80: {0, 0}, 81: {0, 0}}
	for _, key := range quorumKeys {
		got, ok := listed[key]
		switch {
		case want && (!ok || got != wantRanges[key]):
			t.Fatalf("ApiVersions: %s got %v (listed %v), want versions %v", kmsg.NameForKey(key), got, ok, wantRanges[key])
		case !want && ok:
			t.Fatalf("ApiVersions lists %s %v, want it absent", kmsg.NameForKey(key), got)
		}
	}
}

// requireQuorum fails t unless b's backend runs the quorum. Until the
// Raft backend implements coord.Quorum, the tests of the quorum's APIs
// on Raft stop here.
func requireQuorum(t testing.TB, b *Broker) {
	t.Helper()
	if !servesQuorum(b) {
		t.Fatalf("coordination backend %T does not implement coord.Quorum: no Raft quorum to describe or change", b.backend)
	}
}

// startQuorumCluster starts voters in-process brokers (ids 1..voters) on
// embedded Raft and then observers more (the next ids), each started
// with raft.voters naming the voters and raft.listen its own address, so
// that it joins the quorum as an observer; it waits until every broker
// knows them all and a controller.
func startQuorumCluster(t *testing.T, voters, observers int, configure func(*config.Config)) []*Broker {
	t.Helper()
	brokers := startRaftClusterWith(t, voters, configure)
	requireQuorum(t, brokers[0])
	n := voters + observers
	for id := voters + 1; id <= n; id++ {
		addrs, err := freeport.Addrs(1)
		if err != nil {
			t.Fatalf("reserve a raft port: %v", err)
		}
		raftAddr := addrs[0]
		cfg := testConfig(t)
		cfg.BrokerID = int32(id)
		cfg.Coord.RaftVoters = brokers[0].cfg.Coord.RaftVoters
		cfg.Coord.RaftListen = raftAddr
		cfg.Coord.RaftHeartbeatTimeout = 500 * time.Millisecond
		cfg.Coord.RaftElectionTimeout = 500 * time.Millisecond
		cfg.Coord.RaftLeaderLeaseTimeout = 250 * time.Millisecond
		cfg.Coord.SessionTimeout = 4 * time.Second
		if configure != nil {
			configure(&cfg)
		}
		b, err := New(cfg, testLogger(t).Named(fmt.Sprintf("observer-%d", id)))
		if err != nil {
			t.Fatalf("start observer %d: %v", id, err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("close broker %d: %v", b.ID(), err)
			}
		})
		brokers = append(brokers, b)
	}
	ctx := testContext(t, time.Minute)
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("broker %d to see %d live brokers and a controller", b.ID(), n), func() bool {
			id, live, _ := b.cache.View()
			return id != coord.NoBroker && len(live) == n
		})
	}
	return brokers
}

// quorumMembers are the ids of a DescribeQuorum answer's voters and
// observers, sorted.
func quorumMembers(p kmsg.DescribeQuorumResponseTopicPartition) (voters, observers []int32) {
	for _, v := range p.CurrentVoters {
		voters = append(voters, v.ReplicaID)
	}
	for _, o := range p.Observers {
		observers = append(observers, o.ReplicaID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return voters, observers
}

// describeQuorumOf asks b for the quorum at version and returns its one
// partition, failing t on an error.
func describeQuorumOf(t *testing.T, b *Broker, version int16) (*kmsg.DescribeQuorumResponse, kmsg.DescribeQuorumResponseTopicPartition) {
	t.Helper()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(version)
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	resp := askBroker[*kmsg.DescribeQuorumResponse](t, b, req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeQuorum v%d from broker %d: got error %v topics %+v, want one partition", version, b.ID(), kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		msg := ""
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		t.Fatalf("DescribeQuorum v%d from broker %d: got error %v %s", version, b.ID(), kerr.ErrorForCode(p.ErrorCode), msg)
	}
	return resp, p
}

// TestDescribeQuorumOnRaftWithObserver runs three voters and a fourth
// broker that joins as an observer, as KIP-595 describes a quorum: every
// broker lists the quorum's APIs; the observer and a voter each describe
// the same quorum, voters 1, 2 and 3 led by one of them with the
// controller's id, observer 4, a high watermark the leader's log has
// reached, the leader's times now, and at v2 every voter's listeners; a
// request for another partition gets UNKNOWN_TOPIC_OR_PARTITION.
//
// It needs the Raft backend's coord.Quorum.
func TestDescribeQuorumOnRaftWithObserver(t *testing.T) {
	brokers := startQuorumCluster(t, 3, 1, nil)
	for _, b := range brokers {
		checkQuorumAPIsListed(t, b, true)
	}
	ctx := testContext(t, time.Minute)
	observer := brokers[3]
	var p kmsg.DescribeQuorumResponseTopicPartition
	var resp *kmsg.DescribeQuorumResponse
	waitFor(t, ctx, "the leader to report observer 4", func() bool {
		resp, p = describeQuorumOf(t, observer, 2)
		_, observers := quorumMembers(p)
		return slices.Equal(observers, []int32{4})
	})
	voters, _ := quorumMembers(p)
	if !slices.Equal(voters, []int32{1, 2, 3}) {
		t.Fatalf("got voters %v, want 1, 2, 3", voters)
	}
	controllerID, _, _ := brokers[0].cache.View()
	if p.LeaderID != int32(controllerID) || p.LeaderEpoch < 1 || p.HighWatermark < 1 {
		t.Fatalf("got leader %d epoch %d hw %d, want the controller %d, an epoch and a high watermark", p.LeaderID, p.LeaderEpoch, p.HighWatermark, controllerID)
	}
	now := time.Now().UnixMilli()
	for _, v := range p.CurrentVoters {
		if v.ReplicaID != p.LeaderID {
			continue
		}
		if v.LogEndOffset < p.HighWatermark || now-v.LastFetchTimestamp > 60_000 || v.LastFetchTimestamp > now {
			t.Fatalf("leader %d: got log end %d (hw %d) last fetch %d (now %d), want its log past the hw and its times now", v.ReplicaID, v.LogEndOffset, p.HighWatermark, v.LastFetchTimestamp, now)
		}
	}
	if len(resp.Nodes) != 3 {
		t.Fatalf("got nodes %+v, want the 3 voters", resp.Nodes)
	}
	for _, n := range resp.Nodes {
		b := brokers[n.NodeID-1]
		want := b.Addr().(*net.TCPAddr)
		if len(n.Listeners) != 1 || n.Listeners[0].Name != "PLAINTEXT" || int(n.Listeners[0].Port) != want.Port {
			t.Fatalf("node %d: got listeners %+v, want PLAINTEXT on port %d", n.NodeID, n.Listeners, want.Port)
		}
	}

	_, p0 := describeQuorumOf(t, brokers[1], 0)
	if v, o := quorumMembers(p0); p0.LeaderID != p.LeaderID || !slices.Equal(v, voters) || !slices.Equal(o, []int32{4}) {
		t.Fatalf("DescribeQuorum v0 from broker 2: got leader %d voters %v observers %v, want %d, %v, [4]", p0.LeaderID, v, o, p.LeaderID, voters)
	}

	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 1}}}}
	bad := askBroker[*kmsg.DescribeQuorumResponse](t, brokers[0], req)
	if len(bad.Topics) != 1 || len(bad.Topics[0].Partitions) != 1 || bad.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeQuorum of __cluster_metadata-1: got %+v, want UNKNOWN_TOPIC_OR_PARTITION", bad.Topics)
	}
}

// TestRaftVoterChangesEndToEnd grows and shrinks a running quorum of one
// voter and two observers, as KIP-853 does, through a franz-go client:
// another cluster's id is refused, a broker that never joined is not
// found, observer 2 becomes a voter and cannot be added twice, then is
// removed back to an observer and cannot be removed twice, and the last
// voter cannot be removed.
//
// It needs the Raft backend's coord.Quorum.
func TestRaftVoterChangesEndToEnd(t *testing.T) {
	brokers := startQuorumCluster(t, 1, 2, nil)
	cl := newClient(t, brokers[2])
	ctx := testContext(t, 2*time.Minute)
	add := func(id int32, clusterID *string) (int16, string) {
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.ClusterID, req.VoterID, req.TimeoutMillis = clusterID, id, 30_000
		resp := issue[*kmsg.AddRaftVoterResponse](t, cl, req)
		return resp.ErrorCode, deref(resp.ErrorMessage)
	}
	remove := func(id int32) (int16, string) {
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.VoterID = id
		resp := issue[*kmsg.RemoveRaftVoterResponse](t, cl, req)
		return resp.ErrorCode, deref(resp.ErrorMessage)
	}
	members := func() ([]int32, []int32) {
		_, p := describeQuorumOf(t, brokers[0], 2)
		return quorumMembers(p)
	}
	waitFor(t, ctx, "the leader to report observers 2 and 3", func() bool {
		_, o := members()
		return slices.Equal(o, []int32{2, 3})
	})
	expect := func(step string, code int16, msg string, want *kerr.Error) {
		t.Helper()
		if got := kerr.ErrorForCode(code); got != errOrNil(want) {
			t.Fatalf("%s: got %v (%s), want %v", step, got, msg, want)
		}
	}

	other := "another-cluster"
	code, msg := add(2, &other)
	expect("add with another cluster's id", code, msg, kerr.InconsistentClusterID)
	code, msg = add(9, nil)
	expect("add broker 9, which never joined", code, msg, kerr.VoterNotFound)

	own := clusterID
	code, msg = add(2, &own)
	expect("add observer 2", code, msg, nil)
	if v, o := members(); !slices.Equal(v, []int32{1, 2}) || !slices.Equal(o, []int32{3}) {
		t.Fatalf("after adding 2: got voters %v observers %v, want [1 2] and [3]", v, o)
	}
	code, msg = add(2, nil)
	expect("add voter 2 again", code, msg, kerr.DuplicateVoter)

	code, msg = remove(2)
	expect("remove voter 2", code, msg, nil)
	waitFor(t, ctx, "broker 2 to observe again", func() bool {
		v, o := members()
		return slices.Equal(v, []int32{1}) && slices.Equal(o, []int32{2, 3})
	})
	code, msg = remove(2)
	expect("remove 2, no longer a voter", code, msg, kerr.VoterNotFound)

	if code, msg = remove(1); code == 0 || msg == "" {
		t.Fatalf("remove the last voter: got %v %q, want a refusal that says why", kerr.ErrorForCode(code), msg)
	}
	if v, _ := members(); !slices.Equal(v, []int32{1}) {
		t.Fatalf("after refusing to remove the last voter: got voters %v, want [1]", v)
	}
}

// TestQuorumAPIsDeniedWithoutClusterACLOnRaft runs a quorum with an
// authorizer: alice, without ACLs, is refused DescribeQuorum, AddRaftVoter
// and RemoveRaftVoter with CLUSTER_AUTHORIZATION_FAILED; admin, a super
// user, describes the quorum.
//
// It needs the Raft backend's coord.Quorum.
func TestQuorumAPIsDeniedWithoutClusterACLOnRaft(t *testing.T) {
	brokers := startQuorumCluster(t, 1, 0, securedClusterConfig(t))
	ctx := testContext(t, time.Minute)
	alice := clientOf(t, brokers[0], aliceLogin)
	describe := kmsg.NewPtrDescribeQuorumRequest()
	describe.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: quorumTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	if resp := bobRequest[*kmsg.DescribeQuorumResponse](t, ctx, alice, describe); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Topics) != 0 {
		t.Fatalf("alice describes the quorum: got error %v topics %+v, want CLUSTER_AUTHORIZATION_FAILED alone", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	addReq := kmsg.NewPtrAddRaftVoterRequest()
	addReq.VoterID = 1
	if resp := bobRequest[*kmsg.AddRaftVoterResponse](t, ctx, alice, addReq); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice adds a voter: got %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}
	removeReq := kmsg.NewPtrRemoveRaftVoterRequest()
	removeReq.VoterID = 1
	if resp := bobRequest[*kmsg.RemoveRaftVoterResponse](t, ctx, alice, removeReq); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice removes a voter: got %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}
	admin := clientOf(t, brokers[0], adminLogin)
	resp := bobRequest[*kmsg.DescribeQuorumResponse](t, ctx, admin, describe)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("admin describes the quorum: got %v %+v, want the quorum", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
}
