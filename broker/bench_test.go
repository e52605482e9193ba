package broker

import (
	"context"
	"errors"
	"flag"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduce measures franz-go producing 1 KiB records to an
// in-process broker with 4 partitions, with acks=1 and acks=all
// (idempotent); b.SetBytes makes it print MB/s.
func BenchmarkProduce(b *testing.B) {
	for _, acks := range []struct {
		name string
		acks kgo.Acks
		opts []kgo.Opt
	}{
		{"acks=1", kgo.LeaderAck(), []kgo.Opt{kgo.DisableIdempotentWrite()}},
		{"acks=all", kgo.AllISRAcks(), nil},
	} {
		b.Run(acks.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Listeners = "PLAINTEXT://127.0.0.1:0"
			cfg.LogDirs = []string{b.TempDir()}
			fastRaft(&cfg)
			br, err := New(cfg, nil)
			if err != nil {
				b.Fatalf("start broker: %v", err)
			}
			defer br.Close()
			topic := "bench-" + strconv.Itoa(b.N)
			waitServing(b, br)
			createLocalTopic(b, br, topic, 4)
			opts := append([]kgo.Opt{
				kgo.SeedBrokers(br.Addr().String()),
				kgo.DefaultProduceTopic(topic),
				kgo.RequiredAcks(acks.acks),
			}, acks.opts...)
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				b.Fatalf("new client: %v", err)
			}
			defer cl.Close()
			produceN(b, cl)
		})
	}
}

// BenchmarkProduceReplicated measures franz-go producing 1 KiB records
// with acks=all (idempotent) to three in-process brokers, to a topic of 6
// partitions with replication factor 3: every ack waits for both
// followers' fetches. All three brokers share the benchmark's CPU.
func BenchmarkProduceReplicated(b *testing.B) {
	brokers := startRaftClusterWith(b, 3, nil)
	seeds := make([]string, len(brokers))
	for i, br := range brokers {
		seeds[i] = br.Addr().String()
	}
	topic := "bench-replicated-" + strconv.Itoa(b.N)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatalf("new client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	adm := kadm.NewClient(cl)
	waitFor(b, testContext(b, time.Minute), "topic created with every replica in place", func() bool {
		if _, err := adm.CreateTopic(ctx, 6, 3, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return false
		}
		for _, br := range brokers {
			for i := range int32(6) {
				if br.partitionFor(topic, i) == nil {
					return false
				}
			}
		}
		return true
	})
	produceN(b, cl)
}

// produceN produces b.N records of 1 KiB through cl, timing from the first
// send to the last ack; b.SetBytes makes the benchmark print MB/s.
func produceN(b *testing.B, cl *kgo.Client) {
	value := make([]byte, 1024)
	ctx := context.Background()
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for range b.N {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				errOnce.Do(func() { firstErr = err })
			}
			wg.Done()
		})
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatalf("produce: %v", firstErr)
	}
}

// BenchmarkCreateTopic10000 creates a 10 000-partition topic on a lone
// broker (its own Raft voter, replication factor 1) and reports the time
// from CreateTopic until the broker holds and leads every partition: the
// controller's commit, the LeaderAndIsr, and the opening of 10 000 logs.
// Run: go test ./broker/ -run '^$' -bench CreateTopic10000 -benchtime 1x
func BenchmarkCreateTopic10000(bm *testing.B) {
	const partitions = 10000
	for range bm.N {
		bm.StopTimer()
		cfg := testConfig(bm)
		fastRaft(&cfg)
		b := startBroker(bm, cfg)
		bm.StartTimer()
		start := time.Now()
		createLocalTopic(bm, b, "wide", partitions)
		bm.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/topic")
		bm.StopTimer()
	}
}

// idleReplicas is how many partitions BenchmarkIdleReplicaMemory creates.
var idleReplicas = flag.Int("idle-replicas", 20000, "how many partitions BenchmarkIdleReplicaMemory creates")

// BenchmarkIdleReplicaMemory starts a lone broker (its own Raft voter),
// creates a topic of -idle-replicas partitions with replication factor 1,
// writes one record to each and lets them idle (until the retention check,
// every second here, has closed their segment files), then reports what
// an idle replica costs beyond what the broker held before the topic: the
// Go heap in use after GC and the goroutine stacks, per replica, and the
// file descriptors and goroutines in all.
// Run: go test ./broker/ -run '^$' -bench IdleReplicaMemory -benchtime 1x
func BenchmarkIdleReplicaMemory(bm *testing.B) {
	n := *idleReplicas
	for range bm.N {
		bm.StopTimer()
		cfg := testConfig(bm)
		cfg.LogRetentionCheckInterval = time.Second
		b := startBroker(bm, cfg)
		before := idleFootprint(bm)
		createLocalTopic(bm, b, "idle", n)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0))
		if err != nil {
			bm.Fatalf("new client: %v", err)
		}
		records := make([]*kgo.Record, n)
		for i := range records {
			records[i] = &kgo.Record{Topic: "idle", Partition: int32(i), Value: []byte("idle")}
		}
		if err := cl.ProduceSync(testContext(bm, 5*time.Minute), records...).FirstErr(); err != nil {
			bm.Fatalf("produce one record to each of %d partitions: %v", n, err)
		}
		cl.Close()
		waitFor(bm, testContext(bm, time.Minute), "the idle segment files closed", func() bool { return b.files.Open() == 0 })
		after := idleFootprint(bm)
		bm.ReportMetric(float64(after.heap-before.heap)/float64(n), "heap-B/replica")
		bm.ReportMetric(float64(after.stack-before.stack)/float64(n), "stack-B/replica")
		bm.ReportMetric(float64(after.fds-before.fds), "fds")
		bm.ReportMetric(float64(after.goroutines-before.goroutines), "goroutines")
		bm.ReportMetric(0, "ns/op")
	}
}

// footprint is what the process holds.
type footprint struct {
	// heap and stack are the bytes of the Go heap in use after a full
	// collection, and of the goroutine stacks.
	heap, stack int64
	fds         int
	goroutines  int
}

// idleFootprint measures what the process holds, after a collection.
func idleFootprint(tb testing.TB) footprint {
	tb.Helper()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatalf("count file descriptors: %v", err)
	}
	return footprint{heap: int64(ms.HeapInuse), stack: int64(ms.StackInuse), fds: len(entries), goroutines: runtime.NumGoroutine()}
}
