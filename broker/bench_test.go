package broker

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/scale"
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
			cfg := config.DefaultConfig()
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
	seed := replicatedTopic(b, "bench-replicated", 6)
	cl := newBenchClient(b, seed, kgo.DefaultProduceTopic("bench-replicated"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceN(b, cl)
}

// BenchmarkFetchReplicated measures a fresh franz-go consumer reading,
// from the start, b.N records of 1 KiB produced as in
// BenchmarkProduceReplicated before the timer started (three in-process brokers, 6
// partitions, replication factor 3): from the first fetch to the last
// record, fetch sessions, the log reads and the response building
// included. b.SetBytes makes it print MB/s.
func BenchmarkFetchReplicated(b *testing.B) {
	const topic = "bench-fetch"
	seed := replicatedTopic(b, topic, 6)
	producer := newBenchClient(b, seed, kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceN(b, producer)
	consumer := newBenchClient(b, seed, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testContext(b, 5*time.Minute)
	b.ResetTimer()
	b.StartTimer()
	for read := 0; read < b.N; {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			b.Fatalf("after %d of %d records: %v", read, b.N, err)
		}
		read += fetches.NumRecords()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkReplicationRoundTrip measures one record of 100 B produced
// alone with acks=all to three in-process brokers (one partition,
// replication factor 3), the next sent once it is acknowledged: the
// leader's append, both followers' fetches that move the high watermark
// past it, and the answer. replication's BenchmarkAcksAllRound is the
// same round without the network and the disk.
func BenchmarkReplicationRoundTrip(b *testing.B) {
	replicationRoundTrip(b, "bench-round-trip", 1)
}

// BenchmarkReplicationRoundTripWide is BenchmarkReplicationRoundTrip's
// round on one partition of a topic of 3 000, the others idle: what a
// follower's fetch round costs for each partition it holds and nothing
// moved in (a steady fetcher looks only at the moved ones).
func BenchmarkReplicationRoundTripWide(b *testing.B) {
	replicationRoundTrip(b, "bench-round-trip-wide", 3000)
}

// replicationRoundTrip produces one record of 100 B at a time to
// partition 0 of a new topic of partitions partitions, replication
// factor 3, acks=all, each once the one before is acknowledged.
func replicationRoundTrip(b *testing.B, topic string, partitions int32) {
	seed := replicatedTopic(b, topic, partitions)
	cl := newBenchClient(b, seed, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testContext(b, 5*time.Minute)
	record := &kgo.Record{Value: make([]byte, 100)}
	// The first produce finds the leader and the producer id.
	if err := cl.ProduceSync(ctx, record).FirstErr(); err != nil {
		b.Fatalf("produce: %v", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: record.Value}).FirstErr(); err != nil {
			b.Fatalf("produce: %v", err)
		}
	}
}

// replicatedTopic starts three in-process brokers (Raft voters), creates
// topic with partitions partitions of replication factor 3, waits until
// every broker holds its replicas, and returns broker 1's address.
func replicatedTopic(b *testing.B, topic string, partitions int32) string {
	b.Helper()
	brokers := startRaftClusterWith(b, 3, nil)
	ctx := testContext(b, 5*time.Minute)
	adm := kadm.NewClient(newBenchClient(b, brokers[0].Addr().String()))
	waitFor(b, ctx, "topic created with every replica in place", func() bool {
		if _, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return false
		}
		for _, br := range brokers {
			for i := range partitions {
				if br.replicas.PartitionFor(topic, i) == nil {
					return false
				}
			}
		}
		return true
	})
	return brokers[0].Addr().String()
}

// produceN produces b.N records of 1 KiB through cl, timing from the first
// send to the last ack; b.SetBytes makes the benchmark print MB/s. A
// first record, before the timer starts, finds the leaders and the
// producer id.
func produceN(b *testing.B, cl *kgo.Client) {
	value := make([]byte, 1024)
	ctx := context.Background()
	if err := cl.ProduceSync(testContext(b, time.Minute), &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatalf("produce the first record: %v", err)
	}
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
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
		// Each broker's file pool may hold up to log.open.files.max
		// descriptors: brokers left open by earlier runs would exhaust
		// the process's limit.
		if err := b.Close(); err != nil {
			bm.Fatalf("close broker: %v", err)
		}
	}
}

// idleReplicas is how many partitions BenchmarkIdleReplicaMemory creates.
var idleReplicas = flag.Int("idle-replicas", 20000, "how many partitions BenchmarkIdleReplicaMemory creates")

// idleHeapProfile names a file BenchmarkIdleReplicaMemory writes the heap
// profile to once the replicas idle, with their broker still running.
var idleHeapProfile = flag.String("idle-heap-profile", "", "write the heap profile of the idle replicas to this file")

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
		createWideTopic(bm, b, "idle", n)
		produceToEach(bm, b.Addr().String(), "idle", n)
		waitFor(bm, testContext(bm, time.Minute), "the idle segment files closed", func() bool { return b.manager().OpenSegmentFiles() == 0 })
		after := idleFootprint(bm)
		if *idleHeapProfile != "" {
			writeHeapProfile(bm, *idleHeapProfile)
		}
		bm.ReportMetric(float64(after.heap-before.heap)/float64(n), "heap-B/replica")
		bm.ReportMetric(float64(after.stack-before.stack)/float64(n), "stack-B/replica")
		bm.ReportMetric(float64(after.rss-before.rss)/float64(n), "rss-B/replica")
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
	// rss is the process's resident set (VmRSS) after the collection
	// returned what it freed to the system.
	rss        int64
	fds        int
	goroutines int
}

// idleFootprint measures what the process holds, after a collection.
func idleFootprint(tb testing.TB) footprint {
	tb.Helper()
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatalf("count file descriptors: %v", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatalf("read the resident set: %v", err)
	}
	var rss int64
	for line := range strings.Lines(string(status)) {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", kb, err)
			}
			rss = n << 10
		}
	}
	return footprint{heap: int64(ms.HeapInuse), stack: int64(ms.StackInuse), rss: rss, fds: len(entries), goroutines: runtime.NumGoroutine()}
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatalf("write heap profile: %v", err)
	}
}

// restartReplicas is how many partitions BenchmarkRestartIdleReplicas
// restarts a broker with.
var restartReplicas = flag.Int("restart-replicas", 30000, "how many partitions BenchmarkRestartIdleReplicas restarts a lone broker with")

// BenchmarkRestartIdleReplicas restarts a lone broker (its own Raft
// voter) holding -restart-replicas partitions of one record each, closed
// cleanly, and reports the time from New until it holds and leads every
// partition and answers a Metadata request for them.
// Run: go test ./broker/ -run '^$' -bench RestartIdleReplicas -benchtime 1x
func BenchmarkRestartIdleReplicas(bm *testing.B) {
	n := *restartReplicas
	for range bm.N {
		bm.StopTimer()
		cfg := testConfig(bm)
		b, err := New(cfg, testLogger(bm))
		if err != nil {
			bm.Fatalf("start broker: %v", err)
		}
		waitServing(bm, b)
		createWideTopic(bm, b, "restart", n)
		produceToEach(bm, b.Addr().String(), "restart", n)
		if err := b.Close(); err != nil {
			bm.Fatalf("close broker: %v", err)
		}
		bm.StartTimer()
		start := time.Now()
		b, err = New(cfg, testLogger(bm))
		if err != nil {
			bm.Fatalf("restart broker: %v", err)
		}
		bm.Cleanup(func() { b.Close() })
		ctx := testContext(bm, 10*time.Minute)
		waitFor(bm, ctx, "the restarted broker to lead every partition", func() bool {
			return b.heldLeaders("restart") == n
		})
		adm := kadm.NewClient(newBenchClient(bm, b.Addr().String()))
		waitFor(bm, ctx, "a Metadata answer with every partition led", func() bool {
			td, err := adm.ListTopics(ctx, "restart")
			if err != nil || td.Error() != nil {
				return false
			}
			for _, p := range td["restart"].Partitions {
				if p.Leader != b.cfg.BrokerID {
					return false
				}
			}
			return len(td["restart"].Partitions) == n
		})
		elapsed := time.Since(start)
		bm.StopTimer()
		bm.ReportMetric(elapsed.Seconds(), "s/restart")
		bm.ReportMetric(float64(elapsed.Microseconds())/float64(n), "µs/replica")
		bm.ReportMetric(float64(b.manager().OpenSegmentFiles()), "files-open")
		bm.ReportMetric(0, "ns/op")
	}
}

// restartPartitions is how many partitions of replication factor 3
// BenchmarkRestartFollowerBackInISR creates.
var restartPartitions = flag.Int("restart-partitions", 10000, "how many partitions (replication factor 3) BenchmarkRestartFollowerBackInISR creates")

// BenchmarkRestartFollowerBackInISR runs three in-process brokers (Raft
// voters) with a topic of -restart-partitions partitions of replication
// factor 3 and one record each, closes broker 3 cleanly (its replicas
// leave the ISRs), starts it again and reports the time from New until it
// holds all its replicas, and until it is back in every ISR. The three
// brokers share the benchmark's CPU and its file limit (log.open.files.max
// 3000 each).
// Run: go test ./broker/ -run '^$' -bench RestartFollowerBackInISR -benchtime 1x
func BenchmarkRestartFollowerBackInISR(bm *testing.B) {
	n := *restartPartitions
	for range bm.N {
		bm.StopTimer()
		brokers := startRaftClusterWith(bm, 3, func(cfg *config.Config) { cfg.LogOpenFilesMax = 3000 })
		ctx := testContext(bm, 10*time.Minute)
		cl := newBenchClient(bm, brokers[0].Addr().String())
		adm := kadm.NewClient(cl)
		waitFor(bm, ctx, "the topic created", func() bool {
			_, err := adm.CreateTopic(ctx, int32(n), 3, nil, "restart")
			return err == nil || errors.Is(err, kerr.TopicAlreadyExists)
		})
		inISR := func(b *Broker, id int32, want int) bool {
			t, ok := b.cache.Topic("restart")
			if !ok || len(t.Partitions) != n {
				return false
			}
			count := 0
			for _, p := range t.Partitions {
				if slices.Contains(p.ISR, coord.BrokerID(id)) {
					count++
				}
			}
			return count == want
		}
		waitFor(bm, ctx, "every replica in the ISR", func() bool { return inISR(brokers[0], 3, n) })
		produceToEach(bm, brokers[0].Addr().String(), "restart", n)
		victim := brokers[2]
		cfg := victim.cfg
		if err := victim.Close(); err != nil {
			bm.Fatalf("close broker 3: %v", err)
		}
		waitFor(bm, ctx, "broker 3 out of every ISR", func() bool { return inISR(brokers[0], 3, 0) })
		bm.StartTimer()
		start := time.Now()
		b, err := New(cfg, testLogger(bm).Named("broker-3-restarted"))
		if err != nil {
			bm.Fatalf("restart broker 3: %v", err)
		}
		bm.Cleanup(func() { b.Close() })
		waitFor(bm, ctx, "broker 3 to hold its replicas", func() bool { return b.heldReplicas("restart") == n })
		held := time.Since(start)
		waitFor(bm, ctx, "broker 3 back in every ISR", func() bool { return inISR(brokers[0], 3, n) })
		back := time.Since(start)
		bm.StopTimer()
		bm.ReportMetric(held.Seconds(), "s-to-open")
		bm.ReportMetric(back.Seconds(), "s-to-isr")
		bm.ReportMetric(0, "ns/op")
	}
}

// deletePartitions is how many partitions of replication factor 3
// BenchmarkDeleteWideTopic deletes.
var deletePartitions = flag.Int("delete-partitions", 10000, "how many partitions (replication factor 3) BenchmarkDeleteWideTopic creates and deletes")

// BenchmarkDeleteWideTopic runs three in-process brokers (Raft voters)
// with a topic of -delete-partitions partitions of replication factor 3
// and one record each (so every log has unsynced writes), deletes it and
// reports the time until DeleteTopics answered and until no broker's log
// dir holds anything of the topic any more. The log dirs are in the
// test's temporary directory: TMPDIR=/dev/shm puts them on tmpfs.
// Run: go test ./broker/ -run '^$' -bench DeleteWideTopic -benchtime 1x
func BenchmarkDeleteWideTopic(bm *testing.B) {
	n := *deletePartitions
	const topic = "doomed"
	for range bm.N {
		bm.StopTimer()
		brokers := startRaftClusterWith(bm, 3, func(cfg *config.Config) { cfg.LogOpenFilesMax = 3000 })
		ctx := testContext(bm, 10*time.Minute)
		adm := kadm.NewClient(newBenchClient(bm, brokers[0].Addr().String()))
		waitFor(bm, ctx, "the topic created", func() bool {
			_, err := adm.CreateTopic(ctx, int32(n), 3, nil, topic)
			return err == nil || errors.Is(err, kerr.TopicAlreadyExists)
		})
		waitFor(bm, ctx, "every broker to hold its replicas", func() bool {
			for _, b := range brokers {
				if b.heldReplicas(topic) != n {
					return false
				}
			}
			return true
		})
		produceToEach(bm, brokers[0].Addr().String(), topic, n)
		left := func() int {
			count := 0
			for _, b := range brokers {
				for _, dir := range b.cfg.LogDirs {
					m, err := filepath.Glob(filepath.Join(dir, topic+"-*"))
					if err != nil {
						bm.Fatal(err)
					}
					count += len(m)
				}
			}
			return count
		}
		if got := left(); got != 3*n {
			bm.Fatalf("log dirs hold %d directories of %s, want %d", got, topic, 3*n)
		}
		bm.StartTimer()
		start := time.Now()
		resp, err := adm.DeleteTopics(ctx, topic)
		if err == nil {
			err = resp[topic].Err
		}
		if err != nil {
			bm.Fatalf("delete topic: %v", err)
		}
		answered := time.Since(start)
		waitFor(bm, ctx, "the topic's logs removed from every log dir", func() bool { return left() == 0 })
		gone := time.Since(start)
		bm.StopTimer()
		bm.ReportMetric(answered.Seconds(), "s-to-answer")
		bm.ReportMetric(gone.Seconds(), "s-to-removed")
		bm.ReportMetric(0, "ns/op")
	}
}

// createWideTopic creates a topic of n partitions, replication factor 1,
// through b's own controller and waits until b holds them all.
func createWideTopic(tb testing.TB, b *Broker, name string, n int) {
	tb.Helper()
	ctx := testContext(tb, 10*time.Minute)
	waitFor(tb, ctx, "broker to be the controller", func() bool { return b.member.Controller() != nil })
	if _, err := b.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: name, Partitions: n, ReplicationFactor: 1}); err != nil {
		tb.Fatalf("create topic %s: %v", name, err)
	}
	waitFor(tb, ctx, "the topic's partitions held", func() bool { return b.heldLeaders(name) == n })
}

// produceToEach writes one record to each of the n partitions of topic.
func produceToEach(tb testing.TB, seed, topic string, n int) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		tb.Fatalf("new client: %v", err)
	}
	// Closed here, not at the end of the benchmark: what it holds is not
	// the broker's.
	defer cl.Close()
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = &kgo.Record{Topic: topic, Partition: int32(i), Value: []byte("idle")}
	}
	if err := cl.ProduceSync(testContext(tb, 10*time.Minute), records...).FirstErr(); err != nil {
		tb.Fatalf("produce one record to each of %d partitions: %v", n, err)
	}
}

// newBenchClient is a franz-go client of seed, closed when the benchmark
// ends.
func newBenchClient(tb testing.TB, seed string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed)}, opts...)...)
	if err != nil {
		tb.Fatalf("new client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// heldReplicas counts the partitions of topic b holds.
func (b *Broker) heldReplicas(topic string) int {
	n := 0
	for _, p := range b.replicas.Partitions() {
		if p.Topic() == topic {
			n++
		}
	}
	return n
}

// heldLeaders counts the partitions of topic b holds and leads.
func (b *Broker) heldLeaders(topic string) int {
	n := 0
	for _, p := range b.replicas.Partitions() {
		if p.Topic() == topic && int32(p.Role().Leader) == b.cfg.BrokerID {
			n++
		}
	}
	return n
}

// BenchmarkApplyUpdateMetadata100k measures the full UpdateMetadata a new
// controller sends every broker at 100 000 partitions (100 topics of
// 1 000, replicated on brokers 1, 2 and 3): Encode, the controller's
// encoding of it to the wire; Decode, a broker's decoding of the wire
// bytes into the controller's request; Apply, the broker replacing its
// metadata cache, already full, with it.
func BenchmarkApplyUpdateMetadata100k(b *testing.B) {
	req := wideUpdateMetadata(100, 1000)
	var wire []byte
	b.Run("Encode", func(b *testing.B) {
		for b.Loop() {
			wire = encodeControllerRequest(req).AppendTo(wire[:0])
		}
		b.ReportMetric(float64(len(wire)), "bytes")
	})
	var decoded *controller.UpdateMetadataRequest
	b.Run("Decode", func(b *testing.B) {
		for b.Loop() {
			k := kmsg.NewPtrUpdateMetadataRequest()
			k.SetVersion(updateMetadataVersion)
			if err := k.ReadFrom(wire); err != nil {
				b.Fatalf("decode: %v", err)
			}
			decoded = updateMetadataFromWire(k, "BROKER")
		}
		if len(decoded.Partitions) != len(req.Partitions) {
			b.Fatalf("decoded %d partitions, want %d", len(decoded.Partitions), len(req.Partitions))
		}
	})
	b.Run("Apply", func(b *testing.B) {
		c := metadata.NewCache()
		c.Update(decoded, true)
		for b.Loop() {
			c.Update(decoded, true)
		}
	})
}

// BenchmarkMetadata10000 answers a producer's Metadata request (v12)
// for one topic of 10 000 partitions (replication factor 3, brokers 1,
// 2 and 3 live) and encodes the answer, as every producer of the topic
// asks after a leader change: Changed is the first request after a
// change of one of its partitions (an UpdateMetadata applied), Unchanged
// each one after it until the next.
func BenchmarkMetadata10000(b *testing.B) {
	um := wideUpdateMetadata(1, 10000)
	br := &Broker{cache: metadata.NewCache()}
	br.cache.Update(um, true)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &um.Partitions[0].Topic
	req.Topics = append(req.Topics, rt)
	answer := func(b *testing.B) {
		resp := br.metadata(context.Background(), req, false, "BROKER").(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 10000 {
			b.Fatalf("answer has %d topics, want 1 of 10000 partitions", len(resp.Topics))
		}
		resp.SetVersion(req.Version)
		network.PutFrame(encodeResponse(3, 1, resp))
	}
	// A leader change the controller announces: one partition's state.
	change := &controller.UpdateMetadataRequest{ControllerID: 1, Live: um.Live, Partitions: um.Partitions[:1]}
	b.Run("Changed", func(b *testing.B) {
		for b.Loop() {
			br.cache.Update(change, false)
			answer(b)
		}
	})
	b.Run("Unchanged", func(b *testing.B) {
		for b.Loop() {
			answer(b)
		}
	})
}

// wideUpdateMetadata is the full UpdateMetadata of topics × partitions
// partitions replicated on brokers 1, 2 and 3, all live.
func wideUpdateMetadata(topics, partitions int) *controller.UpdateMetadataRequest {
	md := scale.Metadata(topics, partitions, []coord.BrokerID{1, 2, 3})
	req := &controller.UpdateMetadataRequest{ControllerID: 1, ControllerEpoch: 2, BrokerEpoch: 10}
	for id := coord.BrokerID(1); id <= 3; id++ {
		port := 9092 + int32(id)
		req.Live = append(req.Live, coord.Broker{ID: id, Host: "127.0.0.1", Port: port, Endpoints: []coord.Endpoint{
			{Listener: "CLIENT", Host: "127.0.0.1", Port: port + 1000, SecurityProtocol: "SSL"},
			{Listener: "BROKER", Host: "127.0.0.1", Port: port, SecurityProtocol: "PLAINTEXT"},
		}})
	}
	for _, name := range md.TopicNames() {
		t := md.Topics[name]
		for p := range t.Assignment {
			st := md.Partitions[coord.TopicPartition{Topic: name, Partition: int32(p)}]
			req.Partitions = append(req.Partitions, controller.PartitionInfo{PartitionState: st, TopicID: t.ID, Replicas: t.Assignment[p]})
		}
	}
	return req
}

// BenchmarkProduceSpread writes one 100-byte record to each of 3 000
// partitions (replication factor 3, three brokers in this process) per
// iteration, acks=all, linger 0, and waits for every ack: the shape of
// tripod bench failover's load, where every batch is one record and the
// cost per partition (append, the follower's fetch and append, the high
// watermark) is the cost. Profile it with -cpuprofile: the three brokers
// and the client are in the profile.
func BenchmarkProduceSpread(b *testing.B) {
	const partitions = 3000
	const topic = "bench-spread"
	cl := newBenchClient(b, replicatedTopic(b, topic, partitions), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testContext(b, 5*time.Minute)
	value := make([]byte, 100)
	round := func() {
		var wg sync.WaitGroup
		var errOnce sync.Once
		var firstErr error
		for p := range int32(partitions) {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					errOnce.Do(func() { firstErr = err })
				}
				wg.Done()
			})
		}
		wg.Wait()
		if firstErr != nil {
			b.Fatalf("produce: %v", firstErr)
		}
	}
	round() // leaders known, producer id, followers fetching
	b.ResetTimer()
	for range b.N {
		round()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*partitions), "µs/record")
}
