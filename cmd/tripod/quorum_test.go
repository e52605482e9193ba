package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/etcdserver"
)

// replica is a DescribeQuorum row: id, log end, last fetch and last
// caught-up times (Unix ms, -1 for never).
func replica(id int32, end, fetch, caughtUp int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	return kmsg.DescribeQuorumResponseTopicPartitionReplicaState{ReplicaID: id, LogEndOffset: end, LastFetchTimestamp: fetch, LastCaughtUpTimestamp: caughtUp}
}

// sampleQuorum is a quorum of voters 1, 2, 3 led by 2 at epoch 5, with
// observers 4 and 5; voter 3 lags 20 entries and was last caught up
// 1500 ms before the leader; voters 1 and 2 have listeners.
func sampleQuorum(now int64) quorumInfo {
	return quorumInfo{
		leaderID: 2, leaderEpoch: 5, highWatermark: 1200,
		voters: []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{
			replica(1, 1210, now-30, now-30), replica(2, 1210, now, now), replica(3, 1190, now-400, now-1500),
		},
		observers: []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{
			replica(4, 1210, now-12, now-12), replica(5, -1, -1, -1),
		},
		endpoints: map[int32][]string{
			1: {"PLAINTEXT://127.0.0.1:19092"},
			2: {"CLIENT://10.0.0.2:9092", "BROKER://10.0.0.2:9093"},
		},
	}
}

// TestQuorumStatus checks `tripod quorum describe --status` against
// kafka-metadata-quorum's lines, for a quorum with a lagging voter and
// for a lone voter (no lag).
func TestQuorumStatus(t *testing.T) {
	const now = 1_700_000_000_000
	lone := quorumInfo{leaderID: 1, leaderEpoch: 2, highWatermark: 42,
		voters:    []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{replica(1, 43, now, now)},
		endpoints: map[int32][]string{}}
	for _, c := range []struct {
		name string
		q    quorumInfo
		want string
	}{
		{"a lagging voter", sampleQuorum(now), `ClusterId:              tripod
LeaderId:               2
LeaderEpoch:            5
HighWatermark:          1200
MaxFollowerLag:         20
MaxFollowerLagTimeMs:   1500
CurrentVoters:          [{"id": 1, "endpoints": ["PLAINTEXT://127.0.0.1:19092"]}, {"id": 2, "endpoints": ["CLIENT://10.0.0.2:9092", "BROKER://10.0.0.2:9093"]}, {"id": 3}]
CurrentObservers:       [{"id": 4}, {"id": 5}]
`},
		{"a lone voter", lone, `ClusterId:              tripod
LeaderId:               1
LeaderEpoch:            2
HighWatermark:          42
MaxFollowerLag:         0
MaxFollowerLagTimeMs:   0
CurrentVoters:          [{"id": 1}]
CurrentObservers:       []
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeQuorumStatus(&out, "tripod", c.q); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out.String(), c.want)
			}
		})
	}

	// A follower whose caught-up time is unknown makes the time lag -1.
	q := sampleQuorum(now)
	q.voters[2].LastCaughtUpTimestamp = -1
	var out bytes.Buffer
	if err := writeQuorumStatus(&out, "tripod", q); err != nil || !strings.Contains(out.String(), "MaxFollowerLagTimeMs:   -1\n") {
		t.Fatalf("got %v:\n%s\nwant MaxFollowerLagTimeMs -1", err, out.String())
	}

	// Without a leader there is no lag to measure.
	q.leaderID = -1
	if err := writeQuorumStatus(&out, "tripod", q); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("no leader: got %v, want an error saying so", err)
	}
}

// TestQuorumReplication checks `tripod quorum describe --replication`:
// kafka-metadata-quorum's table, leader first, then followers, then
// observers, each column padded and ended by a tab, times in ms or, with
// --human-readable, "N ms ago"; never is -1 either way.
func TestQuorumReplication(t *testing.T) {
	const now = 1_700_000_000_000
	want := map[bool]string{
		false: "" +
			"NodeId\tDirectoryId           \tLogEndOffset\tLag \tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n" +
			"2     \tAAAAAAAAAAAAAAAAAAAAAA\t1210        \t0   \t1700000000000     \t1700000000000        \tLeader  \t\n" +
			"1     \tAAAAAAAAAAAAAAAAAAAAAA\t1210        \t0   \t1699999999970     \t1699999999970        \tFollower\t\n" +
			"3     \tAAAAAAAAAAAAAAAAAAAAAA\t1190        \t20  \t1699999999600     \t1699999998500        \tFollower\t\n" +
			"4     \tAAAAAAAAAAAAAAAAAAAAAA\t1210        \t0   \t1699999999988     \t1699999999988        \tObserver\t\n" +
			"5     \tAAAAAAAAAAAAAAAAAAAAAA\t-1          \t1211\t-1                \t-1                   \tObserver\t\n",
		true: "" +
			"NodeId\tDirectoryId           \tLogEndOffset\tLag \tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n" +
			"2     \tAAAAAAAAAAAAAAAAAAAAAA\t1210        \t0   \t5 ms ago          \t5 ms ago             \tLeader  \t\n" +
			"1     \tAAAAAAAAAAAAAAAAAAAAAA\t1210        \t0   \t35 ms ago         \t35 ms ago            \tFollower\t\n" +
			"3     \tAAAAAAAAAAAAAAAAAAAAAA\t1190        \t20  \t405 ms ago        \t1505 ms ago          \tFollower\t\n" +
			"4     \tAAAAAAAAAAAAAAAAAAAAAA\t1210        \t0   \t17 ms ago         \t17 ms ago            \tObserver\t\n" +
			"5     \tAAAAAAAAAAAAAAAAAAAAAA\t-1          \t1211\t-1                \t-1                   \tObserver\t\n",
	}
	for _, human := range []bool{false, true} {
		var out bytes.Buffer
		if err := writeQuorumReplication(&out, sampleQuorum(now), human, time.UnixMilli(now+5)); err != nil {
			t.Fatal(err)
		}
		if out.String() != want[human] {
			t.Errorf("human-readable %v: got:\n%q\nwant:\n%q", human, out.String(), want[human])
		}
	}
}

// TestQuorumAnswerRead checks how a DescribeQuorum answer is read: its
// listeners as Kafka prints them (an IPv6 host in brackets), a non-zero
// directory id in Kafka's form, and its errors with the broker's message.
func TestQuorumAnswerRead(t *testing.T) {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	resp.SetVersion(2)
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = 1, 3, 10
	v := replica(1, 11, 0, 0)
	v.ReplicaDirectoryID = [16]byte{0xfb, 0xff}
	p.CurrentVoters = append(p.CurrentVoters, v)
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumResponseTopicPartition{p}}}
	resp.Nodes = []kmsg.DescribeQuorumResponseNode{{NodeID: 1, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "PLAINTEXT", Host: "::1", Port: 9092}}}}
	q, err := quorumInfoOf(resp)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.members(q.voters), `[{"id": 1, "directoryId": "-_8AAAAAAAAAAAAAAAAAAA", "endpoints": ["PLAINTEXT://[::1]:9092"]}]`; got != want {
		t.Fatalf("got voters %s, want %s", got, want)
	}

	msg := "no raft leader reachable"
	resp.Topics[0].Partitions[0].ErrorCode = kerr.NotLeaderForPartition.Code
	resp.Topics[0].Partitions[0].ErrorMessage = &msg
	if _, err := quorumInfoOf(resp); err == nil || !strings.Contains(err.Error(), "NOT_LEADER_FOR_PARTITION") || !strings.Contains(err.Error(), msg) {
		t.Fatalf("partition error: got %v, want NOT_LEADER_FOR_PARTITION with the broker's message", err)
	}
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	if _, err := quorumInfoOf(resp); err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("request error: got %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	resp.ErrorCode, resp.Topics = 0, nil
	if _, err := quorumInfoOf(resp); err == nil {
		t.Fatalf("no partition: got no error, want one")
	}
}

// TestVoterChangeErrors checks what add-voter and remove-voter say of
// each error an operator meets.
func TestVoterChangeErrors(t *testing.T) {
	msg := "coord: not a member of the quorum"
	for _, c := range []struct {
		verb string
		code int16
		msg  *string
		want string // "" for no error
	}{
		{"add", 0, nil, ""},
		{"add", kerr.DuplicateVoter.Code, nil, "add voter 4: broker 4 already votes: DUPLICATE_VOTER"},
		{"add", kerr.VoterNotFound.Code, &msg, "add voter 4: broker 4 does not observe the quorum: start it with --raft-listen and --raft-voters naming a voter"},
		{"remove", kerr.VoterNotFound.Code, &msg, "remove voter 4: broker 4 is not a voter: VOTER_NOT_FOUND"},
		{"add", kerr.RequestTimedOut.Code, nil, "add voter 4: the quorum did not make the change in time"},
		{"remove", kerr.NotLeaderForPartition.Code, nil, "remove voter 4: no leader of the quorum could be reached"},
		{"remove", kerr.ClusterAuthorizationFailed.Code, nil, "remove voter 4: CLUSTER_AUTHORIZATION_FAILED"},
	} {
		err := voterChangeError(c.verb, 4, c.code, c.msg)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)) {
			t.Errorf("%s, code %d: got %v, want %q", c.verb, c.code, err, c.want)
		}
	}
}

// TestQuorumFlagsRefused checks that bad flags and arguments are refused
// before any broker is asked, naming what is wrong.
func TestQuorumFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"describe"}, "--status or --replication: give one of them"},
		{[]string{"describe", "--status", "--replication"}, "--status and --replication: give one of them, not both"},
		{[]string{"describe", "--status", "--human-readable"}, "--human-readable: only with --replication"},
		{[]string{"add-voter"}, "accepts 1 arg(s), received 0"},
		{[]string{"add-voter", "four"}, `broker "four": want a broker id, at least 0`},
		{[]string{"remove-voter", "-1"}, "unknown shorthand flag"},
		{[]string{"remove-voter", "--", "-1"}, `broker "-1": want a broker id, at least 0`},
		{[]string{"remove-voter", "1", "2"}, "accepts 1 arg(s), received 2"},
		{[]string{"add-voter", "4", "--bootstrap", " , "}, `--bootstrap " , ": want HOST:PORT[,HOST:PORT]`},
	} {
		cmd := newQuorumCmd()
		cmd.SetArgs(c.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tripod quorum %s: got error %v, want one containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestQuorumCommandsOnEtcd runs `tripod serve` on etcd, whose quorum is
// etcd's own: every quorum command says the cluster has no embedded Raft
// quorum, at once.
func TestQuorumCommandsOnEtcd(t *testing.T) {
	etcd, err := etcdserver.Start(filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { etcd.Close() })
	srv := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--coord", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--etcd-prefix", "/quorum-cli")
	for _, args := range [][]string{
		{"describe", "--status"},
		{"describe", "--replication"},
		{"add-voter", "2"},
		{"remove-voter", "1"},
	} {
		start := time.Now()
		cmd := exec.Command(tripodBin, append(append([]string{"quorum"}, args...), "--bootstrap", srv.addr, "--timeout", "20s")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("tripod quorum %s on etcd: got success, want an error", strings.Join(args, " "))
		}
		if !strings.Contains(stderr.String(), "the cluster has no embedded Raft quorum") || time.Since(start) > 15*time.Second {
			t.Fatalf("tripod quorum %s on etcd: got %q after %v, want at once that there is no embedded Raft quorum",
				strings.Join(args, " "), stderr.String(), time.Since(start))
		}
	}
}

// TestQuorumCommandsOnRaft runs a one-broker `tripod serve` on embedded
// Raft, its own lone voter: describe --status and --replication show it
// leading with no lag and no observer, add-voter of it is refused as a
// duplicate, and remove-voter of the last voter is refused.
//
// It needs the Raft backend's coord.Quorum.
func TestQuorumCommandsOnRaft(t *testing.T) {
	srv := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	quorum := func(args ...string) (string, string, error) {
		cmd := exec.Command(tripodBin, append(append([]string{"quorum"}, args...), "--bootstrap", srv.addr)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	status, stderr, err := quorum("describe", "--status")
	if strings.Contains(stderr, "no embedded Raft quorum") {
		t.Fatalf("describe --status: the Raft backend does not implement coord.Quorum: %s", stderr)
	}
	if err != nil {
		t.Fatalf("describe --status: %v; stderr:\n%s", err, stderr)
	}
	for _, want := range []string{"ClusterId:              tripod\n", "LeaderId:               1\n", "MaxFollowerLag:         0\n",
		"MaxFollowerLagTimeMs:   0\n", `CurrentVoters:          [{"id": 1, "endpoints": ["PLAINTEXT://` + srv.addr + `"]}]` + "\n", "CurrentObservers:       []\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("describe --status:\n%s\nwant a line %q", status, want)
		}
	}
	table, stderr, err := quorum("describe", "--replication", "--human-readable")
	if err != nil {
		t.Fatalf("describe --replication: %v; stderr:\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NodeId\tDirectoryId") || !strings.HasPrefix(lines[1], "1 ") || !strings.Contains(lines[1], " ms ago") || !strings.Contains(lines[1], "\tLeader") {
		t.Fatalf("describe --replication --human-readable:\n%s\nwant a header and broker 1 leading", table)
	}
	if _, stderr, err := quorum("add-voter", "1"); err == nil || !strings.Contains(stderr, "broker 1 already votes: DUPLICATE_VOTER") {
		t.Fatalf("add-voter 1: got %v %q, want DUPLICATE_VOTER", err, stderr)
	}
	if _, stderr, err := quorum("remove-voter", "1"); err == nil || !strings.Contains(stderr, "remove voter 1") {
		t.Fatalf("remove-voter 1, the last voter: got %v %q, want a refusal", err, stderr)
	}
}
