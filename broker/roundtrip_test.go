package broker

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// roundTripRecord returns the i-th record of the round-trip test: its
// partition, key, value, headers and timestamp all derive from i.
func roundTripRecord(topic string, i, partitions int) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: int32(i % partitions),
		Key:       []byte("key-" + strconv.Itoa(i)),
		Value:     fmt.Appendf(nil, "value-%d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%64)),
		Headers: []kgo.RecordHeader{
			{Key: "index", Value: []byte(strconv.Itoa(i))},
			{Key: "empty", Value: nil},
		},
		Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
	}
}

// TestProduceConsumeRoundTripEveryCodec proves that franz-go producers and
// consumers see the broker as Kafka: 100 000 records over 4 partitions,
// produced with acks=all (idempotent) under each compression codec, come
// back in order with identical keys, values, headers and timestamps.
func TestProduceConsumeRoundTripEveryCodec(t *testing.T) {
	const (
		total      = 100_000
		partitions = 4
	)
	b := startBroker(t, testConfig(t))
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "roundtrip-" + c.name
			createTopic(t, b, topic, partitions, nil)
			ctx := testContext(t, 2*time.Minute)

			producer := newClient(t, b,
				kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(c.codec),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerLinger(5*time.Millisecond),
			)
			var wg sync.WaitGroup
			var errMu sync.Mutex
			var firstErr error
			for i := range total {
				wg.Add(1)
				producer.Produce(ctx, roundTripRecord(topic, i, partitions), func(_ *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						errMu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						errMu.Unlock()
					}
				})
			}
			wg.Wait()
			if firstErr != nil {
				t.Fatalf("produce: %v", firstErr)
			}

			consumer := newClient(t, b,
				kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			)
			next := make([]int, partitions) // next expected index per partition
			for p := range next {
				next[p] = p
			}
			got := 0
			for got < total {
				fetches := consumer.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d records before the deadline", got, total)
				}
				fetches.EachError(func(topic string, p int32, err error) {
					t.Fatalf("fetch %s-%d: %v", topic, p, err)
				})
				fetches.EachRecord(func(r *kgo.Record) {
					p := int(r.Partition)
					want := roundTripRecord(topic, next[p], partitions)
					if r.Offset != int64(next[p]/partitions) {
						t.Fatalf("partition %d: got offset %d, want %d", p, r.Offset, next[p]/partitions)
					}
					checkSameRecord(t, r, want)
					next[p] += partitions
					got++
				})
			}
			if got != total {
				t.Fatalf("got %d records, want %d", got, total)
			}
		})
	}
}

// checkSameRecord fails the test unless got carries want's key, value,
// headers and timestamp.
func checkSameRecord(t *testing.T, got, want *kgo.Record) {
	t.Helper()
	if !bytes.Equal(got.Key, want.Key) {
		t.Fatalf("partition %d offset %d: got key %q, want %q", got.Partition, got.Offset, got.Key, want.Key)
	}
	if !bytes.Equal(got.Value, want.Value) {
		t.Fatalf("partition %d offset %d: got value %q, want %q", got.Partition, got.Offset, got.Value, want.Value)
	}
	if !got.Timestamp.Equal(want.Timestamp) {
		t.Fatalf("partition %d offset %d: got timestamp %v, want %v", got.Partition, got.Offset, got.Timestamp, want.Timestamp)
	}
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("partition %d offset %d: got %d headers, want %d", got.Partition, got.Offset, len(got.Headers), len(want.Headers))
	}
	for i := range want.Headers {
		if got.Headers[i].Key != want.Headers[i].Key || !bytes.Equal(got.Headers[i].Value, want.Headers[i].Value) {
			t.Fatalf("partition %d offset %d: got header %q=%q, want %q=%q", got.Partition, got.Offset,
				got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Key, want.Headers[i].Value)
		}
	}
}
