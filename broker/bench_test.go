package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
		c := newMetadataCache()
		c.update(decoded, true)
		for b.Loop() {
			c.update(decoded, true)
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
