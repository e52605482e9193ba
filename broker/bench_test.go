package broker

import (
	"context"
	"strconv"
	"sync"
	"testing"

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
		})
	}
}
