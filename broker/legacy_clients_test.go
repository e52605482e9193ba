package broker

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
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

// legacyMessage encodes one message of magic (0 or 1) with kmsg, its
// size and CRC-32 computed here.
func legacyMessage(magic int8, offset int64, attrs int8, key, value []byte) []byte {
	var raw []byte
	if magic == 0 {
		m := kmsg.MessageV0{Offset: offset, Magic: 0, Attributes: attrs, Key: key, Value: value}
		raw = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Offset: offset, Magic: 1, Attributes: attrs, Timestamp: time.Now().UnixMilli(), Key: key, Value: value}
		raw = m.AppendTo(nil)
	}
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[12:], crc32.ChecksumIEEE(raw[16:]))
	return raw
}

// gzipped returns b gzip-compressed.
func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileLegacySets are legacy message sets that must be refused, with
// the error each gets.
func hostileLegacySets(t testing.TB) []struct {
	name string
	set  []byte
	want error
} {
	good := legacyMessage(1, 0, 0, []byte("k"), []byte("v"))
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	magic2 := append([]byte(nil), good...)
	magic2[16] = 2
	binary.BigEndian.PutUint32(magic2[12:], crc32.ChecksumIEEE(magic2[16:]))
	nested := legacyMessage(1, 0, 1, nil, gzipped(t, legacyMessage(1, 0, 1, nil, gzipped(t, good))))
	// 96 MiB of zeros gzip to about 100 KiB: past the 64 MiB bound of the
	// default max.message.bytes.
	bomb := legacyMessage(1, 0, 1, nil, gzipped(t, make([]byte, 96<<20)))
	return []struct {
		name string
		set  []byte
		want error
	}{
		{"bad crc", badCRC, kerr.CorruptMessage},
		{"cut short", good[:len(good)-2], kerr.CorruptMessage},
		{"magic 2 in Produce v2", magic2, kerr.InvalidRecord},
		{"nested wrapper", nested, kerr.InvalidRecord},
		{"gzip bomb", bomb, kerr.MessageTooLarge},
	}
}

// TestHostileLegacyProduce sends malformed legacy message sets in
// Produce v2 and v0 on one connection: each gets its Kafka error and
// appends nothing, valid sets between them are appended, and the broker
// keeps serving.
func TestHostileLegacyProduce(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "hostile-legacy"
	createLocalTopic(t, b, topic, 1)
	nc := dialBroker(t, b)
	corr := int32(0)
	produce := func(version int16, set []byte) kmsg.ProduceResponseTopicPartition {
		req := produceRequest(topic, set)
		req.SetVersion(version)
		corr++
		return roundTrip(t, nc, req, corr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	var valid [][]byte
	produceValid := func(version int16) {
		value := fmt.Appendf(nil, "valid-%d", len(valid))
		magic := int8(0)
		if version == 2 {
			magic = 1
		}
		set := legacyMessage(magic, 0, 1, nil, gzipped(t, legacyMessage(magic, 0, 0, nil, value)))
		if sp := produce(version, set); sp.ErrorCode != 0 {
			t.Fatalf("valid set in Produce v%d: got %v, want no error", version, kerr.ErrorForCode(sp.ErrorCode))
		}
		valid = append(valid, value)
	}
	produceValid(2)
	for _, c := range hostileLegacySets(t) {
		for _, version := range []int16{0, 2} {
			before := endOffset(t, b, topic)
			if err := kerr.ErrorForCode(produce(version, c.set).ErrorCode); err != c.want {
				t.Errorf("%s in Produce v%d: got %v, want %v", c.name, version, err, c.want)
			}
			if after := endOffset(t, b, topic); after != before {
				t.Errorf("%s: got the end offset moved from %d to %d, want it unmoved", c.name, before, after)
			}
			produceValid(version)
		}
	}
	checkConsumable(t, b, topic, valid)
	checkServes(t, b)
}
