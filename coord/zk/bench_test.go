package zk_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// BenchmarkTenThousandPartitions measures, on the shared ZooKeeper, a
// CreateTopic of 10 000 partitions in one Commit, 10 000 SetPartitions in
// one Commit, and a Load of the result: what a controller does at start
// and after a broker holding every leadership fails.
func BenchmarkTenThousandPartitions(b *testing.B) {
	if srv == nil {
		zkserver.Require(b)
		b.Fatalf("zookeeper unavailable: %v", unavailable)
	}
	const partitions = 10000
	var create, update, load time.Duration
	for i := 0; i < b.N; i++ {
		be := openBench(b, srv.Addr()+chroot())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		sess, err := be.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
		if err != nil {
			b.Fatalf("register: %v", err)
		}
		term, err := be.Campaign(ctx, sess)
		if err != nil {
			b.Fatalf("campaign: %v", err)
		}
		name := fmt.Sprintf("wide-%d", i)
		op := coord.CreateTopic{Topic: coord.Topic{Name: name, Assignment: make([][]coord.BrokerID, partitions)},
			States: make([]coord.PartitionState, partitions)}
		updates := make([]coord.Op, partitions)
		for p := range partitions {
			op.Topic.Assignment[p] = []coord.BrokerID{1, 2, 3}
			op.States[p] = coord.PartitionState{Topic: name, Partition: int32(p), Leader: 1, ISR: []coord.BrokerID{1, 2, 3}}
			moved := op.States[p]
			moved.Leader, moved.LeaderEpoch, moved.ISR = 2, 1, []coord.BrokerID{2, 3}
			updates[p] = coord.SetPartition{State: moved, ExpectedEpoch: 0}
		}
		start := time.Now()
		if err := be.Commit(ctx, term, op); err != nil {
			b.Fatalf("create: %v", err)
		}
		create += time.Since(start)
		start = time.Now()
		if err := be.Commit(ctx, term, updates...); err != nil {
			b.Fatalf("update: %v", err)
		}
		update += time.Since(start)
		start = time.Now()
		md, err := be.Load(ctx)
		if err != nil || len(md.Partitions) != partitions {
			b.Fatalf("load: got %d partitions, %v; want %d", len(md.Partitions), err, partitions)
		}
		load += time.Since(start)
		cancel()
		be.Close()
	}
	n := float64(b.N)
	b.ReportMetric(create.Seconds()/n, "create-s")
	b.ReportMetric(update.Seconds()/n, "update-s")
	b.ReportMetric(load.Seconds()/n, "load-s")
}

// BenchmarkMetadata100k is conformance.BenchMetadata with 100 topics of
// 1 000 partitions.
func BenchmarkMetadata100k(b *testing.B) {
	conformance.BenchMetadata(b, benchHarness(b), 100, 1000)
}

// BenchmarkControllerFailover100k is conformance.BenchControllerFailover
// with 100 topics of 1 000 partitions.
func BenchmarkControllerFailover100k(b *testing.B) {
	conformance.BenchControllerFailover(b, benchHarness(b), 100, 1000)
}

// benchHarness returns a harness on a ZooKeeper of the benchmark's own,
// run as in production (full JIT, 1 GiB of heap from the start) and
// stopped when it ends, with a 6 s session timeout.
func benchHarness(b *testing.B) conformance.Harness {
	server(b)
	cfg := zkserver.DefaultConfig()
	cfg.FullJIT, cfg.HeapMB, cfg.FixedHeap = true, 1024, true
	s, err := zkserver.Start(b.TempDir(), cfg)
	if err != nil {
		b.Fatalf("start zookeeper: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return conformance.NewZKHarness(s.Addr(), s, 6*time.Second)
}
