package broker

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// roundTripPad pads values to varied lengths.
var roundTripPad = strings.Repeat("abcdefghijklmnopqrstuvwxyz", 3)

// roundTripBase is the timestamp of record 0.
var roundTripBase = time.UnixMilli(1_700_000_000_000)

// roundTripRecord returns the i-th record of the round-trip test: its
// partition, key, value, headers and timestamp all derive from i.
func roundTripRecord(topic string, i, partitions int) *kgo.Record {
	n := strconv.Itoa(i)
	return &kgo.Record{
		Topic:     topic,
		Partition: int32(i % partitions),
		Key:       []byte("key-" + n),
		Value:     []byte("value-" + n + "-" + roundTripPad[:i%64]),
		Headers: []kgo.RecordHeader{
			{Key: "index", Value: []byte(n)},
			{Key: "empty", Value: nil},
		},
		Timestamp: roundTripBase.Add(time.Duration(i) * time.Millisecond),
	}
}

// checkRoundTripRecord fails the test unless got is the i-th record of the
// round-trip test, comparing without building the expected record.
// It is called for every record, so it avoids t.Helper and allocations.
func checkRoundTripRecord(t *testing.T, got *kgo.Record, i int) {
	n := strconv.Itoa(i)
	if len(got.Key) != 4+len(n) || string(got.Key[:4]) != "key-" || string(got.Key[4:]) != n {
		t.Fatalf("partition %d offset %d: got key %q, want %q", got.Partition, got.Offset, got.Key, "key-"+n)
	}
	if v := got.Value; len(v) != 7+len(n)+i%64 || string(v[:6]) != "value-" || string(v[6:6+len(n)]) != n ||
		v[6+len(n)] != '-' || string(v[7+len(n):]) != roundTripPad[:i%64] {
		t.Fatalf("partition %d offset %d: got value %q, want %q", got.Partition, got.Offset, got.Value, "value-"+n+"-"+roundTripPad[:i%64])
	}
	if want := roundTripBase.Add(time.Duration(i) * time.Millisecond); !got.Timestamp.Equal(want) {
		t.Fatalf("partition %d offset %d: got timestamp %v, want %v", got.Partition, got.Offset, got.Timestamp, want)
	}
	if len(got.Headers) != 2 || got.Headers[0].Key != "index" || string(got.Headers[0].Value) != n ||
		got.Headers[1].Key != "empty" || len(got.Headers[1].Value) != 0 {
		t.Fatalf("partition %d offset %d: got headers %q, want index=%s and empty", got.Partition, got.Offset, got.Headers, n)
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
			t.Parallel()
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
					if r.Offset != int64(next[p]/partitions) {
						t.Fatalf("partition %d: got offset %d, want %d", p, r.Offset, next[p]/partitions)
					}
					checkRoundTripRecord(t, r, next[p])
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
