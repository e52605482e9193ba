package broker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersionsAdvertiseLegacyFormats: Produce and Fetch are advertised
// from version 0 (librdkafka compresses only for a broker whose Produce
// versions include 0), ListOffsets too, and the highest versions, which
// modern clients pick, are unchanged.
func TestApiVersionsAdvertiseLegacyFormats(t *testing.T) {
	b := startBroker(t, testConfig(t))
	cl := newClient(t, b)
	ctx := testContext(t, 30*time.Second)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{0: {0, 11}, 1: {0, 12}, 2: {0, 9}}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("%s: got versions %d..%d, want %d..%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("ApiVersions lacks %v", want)
	}
}

// TestKcatCompressesOnDisk proves librdkafka (kcat -z) compresses what it
// sends to tripod: about 2 MB of text produced with each of gzip, snappy
// and lz4 takes a fraction of that in the partition's log, and kcat
// consumes every line back intact.
func TestKcatCompressesOnDisk(t *testing.T) {
	kcat := kcatPath(t)
	b := startBroker(t, testConfig(t))
	addr := b.Addr().String()
	var text strings.Builder
	for i := 0; text.Len() < 2<<20; i++ {
		fmt.Fprintf(&text, "line %06d: the replicated log keeps every record it acknowledged, in order, on each replica\n", i)
	}
	input := text.String()
	for _, codec := range []string{"gzip", "snappy", "lz4"} {
		t.Run(codec, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			topic := "kcat-" + codec
			createTopic(t, b, topic, 1, nil)
			runKcat(t, ctx, kcat, input, "-P", "-b", addr, "-t", topic, "-z", codec, "-X", "linger.ms=100")
			p := b.replicas.PartitionFor(topic, 0)
			if p == nil {
				t.Fatalf("no partition %s-0 on the broker", topic)
			}
			onDisk := p.Log().Size()
			t.Logf("kcat -z %s: %d bytes of text take %d bytes in the log (%.1f%%)", codec, len(input), onDisk, 100*float64(onDisk)/float64(len(input)))
			if onDisk > int64(len(input))/4 {
				t.Fatalf("kcat -z %s: %d bytes of text take %d bytes in the log, want under a quarter: the batches were not compressed", codec, len(input), onDisk)
			}
			out := runKcat(t, ctx, kcat, "", "-C", "-b", addr, "-t", topic, "-e", "-o", "beginning", "-q")
			if out != input {
				t.Fatalf("kcat consumed %d bytes, want the %d produced, identical", len(out), len(input))
			}
		})
	}
}

// TestSaramaLegacyVersions runs sarama configured for Kafka 0.9 and 0.10,
// which produce legacy message sets (magic 0 with Produce v1, magic 1
// with v2) and fetch them (Fetch v1, v2, v3), with every codec sarama has
// for that version: what it produced comes back in order with its keys,
// values and (magic 1) timestamps, and the stored batches are compressed
// with the producer's codec.
func TestSaramaLegacyVersions(t *testing.T) {
	b := startBroker(t, testConfig(t))
	addr := b.Addr().String()
	codecs := []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4}
	for _, tc := range []struct {
		version sarama.KafkaVersion
		codecs  []sarama.CompressionCodec
	}{
		{sarama.V0_10_2_0, codecs},
		{sarama.V0_10_0_0, codecs},
		// sarama has no lz4 before 0.10.
		{sarama.V0_9_0_0, codecs[:3]},
	} {
		for _, codec := range tc.codecs {
			t.Run(fmt.Sprintf("%s/%s", tc.version, codec), func(t *testing.T) {
				ctx := testContext(t, time.Minute)
				topic := fmt.Sprintf("sarama-%s-%s", strings.ReplaceAll(tc.version.String(), ".", "-"), codec)
				createTopic(t, b, topic, 1, nil)
				cfg := sarama.NewConfig()
				cfg.Version = tc.version
				cfg.Producer.Return.Successes = true
				cfg.Producer.RequiredAcks = sarama.WaitForAll
				cfg.Producer.Compression = codec
				prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
				if err != nil {
					t.Fatalf("sarama producer: %v", err)
				}
				defer prod.Close()
				const n = 300
				start := time.UnixMilli(1_700_000_000_000)
				msgs := make([]*sarama.ProducerMessage, n)
				for i := range msgs {
					msgs[i] = &sarama.ProducerMessage{
						Topic:     topic,
						Partition: 0,
						Key:       sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
						Value:     sarama.ByteEncoder(bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 30)),
						Timestamp: start.Add(time.Duration(i) * time.Millisecond),
					}
				}
				// Two sends: two requests, so a fetch crosses batches.
				for _, part := range [][]*sarama.ProducerMessage{msgs[:n/2], msgs[n/2:]} {
					if err := prod.SendMessages(part); err != nil {
						t.Fatalf("sarama %s %s produce: %v", tc.version, codec, err)
					}
				}
				for i, m := range msgs {
					if m.Offset != int64(i) {
						t.Fatalf("message %d acknowledged at offset %d, want %d", i, m.Offset, i)
					}
				}
				checkStoredCodec(t, b, topic, int16(codec))

				consumer, err := sarama.NewConsumer([]string{addr}, cfg)
				if err != nil {
					t.Fatalf("sarama consumer: %v", err)
				}
				defer consumer.Close()
				pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
				if err != nil {
					t.Fatalf("consume partition: %v", err)
				}
				defer pc.Close()
				for i := range n {
					select {
					case m := <-pc.Messages():
						want := msgs[i]
						wantKey, _ := want.Key.Encode()
						wantValue, _ := want.Value.Encode()
						if m.Offset != int64(i) || !bytes.Equal(m.Key, wantKey) || !bytes.Equal(m.Value, wantValue) {
							t.Fatalf("consumed offset %d key %q (%d-byte value), want offset %d key %q (%d-byte value)", m.Offset, m.Key, len(m.Value), i, wantKey, len(wantValue))
						}
						if tc.version.IsAtLeast(sarama.V0_10_0_0) && !m.Timestamp.Equal(want.Timestamp) {
							t.Fatalf("message %d: timestamp %v, want %v", i, m.Timestamp, want.Timestamp)
						}
					case err := <-pc.Errors():
						t.Fatalf("sarama %s %s consume: %v", tc.version, codec, err)
					case <-ctx.Done():
						t.Fatalf("consumed %d of %d messages before the deadline", i, n)
					}
				}
			})
		}
	}
}

// checkStoredCodec fails the test unless every batch stored in topic's
// partition 0 is compressed with codec.
func checkStoredCodec(t *testing.T, b *Broker, topic string, codec int16) {
	t.Helper()
	p := b.replicas.PartitionFor(topic, 0)
	if p == nil {
		t.Fatalf("no partition %s-0", topic)
	}
	data, err := p.Log().Read(0, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	for pos := 0; pos+61 <= len(data); {
		attrs := int16(data[pos+21])<<8 | int16(data[pos+22])
		if got := attrs & 0x07; got != codec {
			t.Fatalf("stored batch at byte %d has codec %d, want %d", pos, got, codec)
		}
		pos += 12 + int(int32(uint32(data[pos+8])<<24|uint32(data[pos+9])<<16|uint32(data[pos+10])<<8|uint32(data[pos+11])))
	}
}
