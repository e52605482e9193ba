package raft

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// BenchmarkCommit10000Partitions measures a controller's Commit of a
// CreateTopic of 10 000 partitions (20 log entries of 500 states) on a
// 3-node cluster, then of 10 000 SetPartitions moving every leader, one
// of each per iteration.
func BenchmarkCommit10000Partitions(b *testing.B) {
	backends := openTestCluster(b, 3)
	leader := backends[leaderOf(b, backends)]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := leader.Register(ctx, coord.Broker{ID: leader.id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		b.Fatalf("Register: %v", err)
	}
	defer s.Close()
	term, err := leader.Campaign(ctx, s)
	if err != nil {
		b.Fatalf("Campaign: %v", err)
	}
	var createTotal, updateTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		create, states := topicOf(fmt.Sprintf("wide-%d", i), 10000)
		start := time.Now()
		if err := leader.Commit(ctx, term, create); err != nil {
			b.Fatalf("Commit of CreateTopic: %v", err)
		}
		createTotal += time.Since(start)
		updates := make([]coord.Op, len(states))
		for p, st := range states {
			st.Leader, st.LeaderEpoch, st.ISR = st.ISR[1], st.LeaderEpoch+1, slices.Clone(st.ISR[1:])
			updates[p] = coord.SetPartition{State: st, ExpectedEpoch: 0}
		}
		start = time.Now()
		if err := leader.Commit(ctx, term, updates...); err != nil {
			b.Fatalf("Commit of SetPartitions: %v", err)
		}
		updateTotal += time.Since(start)
	}
	b.ReportMetric(createTotal.Seconds()*1000/float64(b.N), "create-ms/op")
	b.ReportMetric(updateTotal.Seconds()*1000/float64(b.N), "update-ms/op")
}

// BenchmarkCommitQuorum measures, on 7 nodes, a metadata commit's latency
// with 3 of them voting (4 observers) against all 7 voting. Each
// iteration the controller commits one SetPartition moving a partition's
// leader and shrinking its ISR, as it does when a broker fails, then a
// non-leader node (an observer with 3 voters, a follower with 7)
// allocates a block of producer ids, a write it forwards to the leader
// and waits to apply. It reports each one's p50 and p99 in milliseconds.
func BenchmarkCommitQuorum(b *testing.B) {
	for _, voters := range []int{3, 7} {
		b.Run(fmt.Sprintf("7-brokers-%d-voters", voters), func(b *testing.B) {
			benchmarkCommitQuorum(b, voters, 7-voters)
		})
	}
}

func benchmarkCommitQuorum(b *testing.B, voters, observers int) {
	qn := newQuorumNet(b, voters, observers, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	qn.waitMembership(30*time.Second, fmt.Sprintf("voters %v observers %v", brokerRange(1, voters), brokerRange(voters+1, voters+observers)))
	leader := qn.leader()
	_, term := controllerOn(b, ctx, leader)
	create, states := topicOf("failover", 1)
	if err := leader.Commit(ctx, term, create); err != nil {
		b.Fatalf("Commit of CreateTopic: %v", err)
	}
	// The writer is the last node that does not lead: an observer when
	// there are any, else a follower.
	writerID := coord.BrokerID(voters + observers)
	if writerID == leader.id {
		writerID--
	}
	writer := qn.node(writerID)
	brokers := []coord.BrokerID{1, 2, 3}
	state := states[0]
	commits := make([]time.Duration, 0, b.N)
	forwards := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		// The leader moves to the next broker and the one it leaves drops
		// out of the ISR, as on a failover.
		failed := state.Leader
		state.Leader = brokers[(slices.Index(brokers, failed)+1)%len(brokers)]
		state.LeaderEpoch++
		state.ISR = slices.DeleteFunc(slices.Clone(brokers), func(id coord.BrokerID) bool { return id == failed })
		start := time.Now()
		if err := leader.Commit(ctx, term, coord.SetPartition{State: state, ExpectedEpoch: int32(i)}); err != nil {
			b.Fatalf("Commit of SetPartition %d: %v", i, err)
		}
		commits = append(commits, time.Since(start))
		start = time.Now()
		if _, err := writer.AllocateProducerIDs(ctx, writerID); err != nil {
			b.Fatalf("AllocateProducerIDs on node %d: %v", writerID, err)
		}
		forwards = append(forwards, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(percentileMillis(commits, 0.50), "p50-ms")
	b.ReportMetric(percentileMillis(commits, 0.99), "p99-ms")
	b.ReportMetric(percentileMillis(forwards, 0.50), "fwd-p50-ms")
	b.ReportMetric(percentileMillis(forwards, 0.99), "fwd-p99-ms")
}

// brokerRange is "[from .. to]" as membership prints it, "[]" when empty.
func brokerRange(from, to int) string {
	ids := make([]string, 0, max(to-from+1, 0))
	for id := from; id <= to; id++ {
		ids = append(ids, fmt.Sprint(id))
	}
	return "[" + strings.Join(ids, " ") + "]"
}

// percentileMillis is the q-quantile of ds (nearest rank) in milliseconds.
func percentileMillis(ds []time.Duration, q float64) float64 {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return sorted[rank].Seconds() * 1000
}
