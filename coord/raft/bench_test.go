package raft

import (
	"context"
	"fmt"
	"slices"
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
