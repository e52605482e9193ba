package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/hostile"
	"github.com/tripodmq/tripod/internal/kafkatest"
)

// The batches a buggy or hostile producer sends whose CRC-32C holds but
// whose contents a consumer cannot read. Each is refused with the error
// Kafka gives it, the partition's end offset does not move, and a
// franz-go consumer then reads the partition from its start to its end
// and sees every valid record.

// Attribute bits of a v2 batch the tests set.
const (
	attrsCodecGzip     = 1
	attrsCodecZstd     = 4
	attrsTransactional = 0x10
	attrsControl       = 0x20
)

// hostileRecord returns record i of a batch, keyed "k", as franz-go
// encodes it.
func hostileRecord(i int32, value []byte) []byte {
	r := kmsg.Record{OffsetDelta: i, Key: []byte("k"), Value: value}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	return r.AppendTo(nil)
}

// hostileBatch wraps a records section in a v2 batch header with the
// given attributes, record count and lastOffsetDelta, no producer, and a
// valid CRC-32C: whatever the section holds, the batch passes its CRC.
func hostileBatch(section []byte, attrs int16, count, lastOffsetDelta int32) []byte {
	ts := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: lastOffsetDelta,
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: count, Records: section, Length: int32(49 + len(section)),
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], kafkatest.CRC32C(raw[21:]))
	return raw
}

// hostileBatches returns, by name, the batches of a buggy or hostile
// producer that the broker must refuse, with the error it refuses each
// with.
func hostileBatches() []struct {
	name  string
	batch []byte
	want  error
} {
	r0, r1 := hostileRecord(0, []byte("v0")), hostileRecord(1, []byte("v1"))
	two := append(bytes.Clone(r0), r1...)
	lying := bytes.Clone(r0)
	lying[0] = 2 * 40 // A length varint of 40 bytes in a record of 9.
	return []struct {
		name  string
		batch []byte
		want  error
	}{
		{"gzip batch of garbage", hostileBatch(bytes.Repeat([]byte{0xa5}, 200), attrsCodecGzip, 1, 0), kerr.CorruptMessage},
		{"compression codec 7", hostileBatch(two, 7, 2, 1), kerr.UnsupportedCompressionType},
		{"garbage records", hostileBatch(bytes.Repeat([]byte{0xa5}, 200), 0, 2, 1), kerr.InvalidRecord},
		{"record length that lies", hostileBatch(lying, 0, 1, 0), kerr.InvalidRecord},
		{"record count that lies", hostileBatch(two, 0, 3, 2), kerr.InvalidRecord},
		{"control bit", hostileBatch(two, attrsControl, 2, 1), kerr.InvalidRecord},
		{"transactional bit", hostileBatch(two, attrsTransactional, 2, 1), kerr.InvalidRecord},
	}
}

// produceRequest returns a Produce v9 of records to partition 0 of
// topic, acks=1.
func produceRequest(topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceBatch sends records to partition 0 of topic on nc and returns the
// partition's answer.
func produceBatch(t *testing.T, nc net.Conn, topic string, records []byte, corr int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := roundTrip(t, nc, produceRequest(topic, records), corr).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

// awaitAnswer sends req on nc and returns its response frame, waiting at
// most 30 seconds.
func awaitAnswer(nc net.Conn, req kmsg.Request, corr int32) ([]byte, error) {
	if err := nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := nc.Write(encodeRequest(req, corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(nc, frame)
	return frame, err
}

// endOffset is the log end offset of partition 0 of topic on b.
func endOffset(t *testing.T, b *Broker, topic string) int64 {
	t.Helper()
	p := b.replicas.PartitionFor(topic, 0)
	if p == nil {
		t.Fatalf("partition %s-0: not on broker %d", topic, b.cfg.BrokerID)
	}
	return p.Log().EndOffset()
}

// checkConsumable reads partition 0 of topic with a franz-go consumer
// from offset 0 to its end offset and fails t on a fetch error or unless
// it sees exactly the values want.
func checkConsumable(t *testing.T, b *Broker, topic string, want [][]byte) {
	t.Helper()
	end := endOffset(t, b, topic)
	cl := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := testContext(t, 15*time.Second)
	var got [][]byte
	for next := int64(0); next < end; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s-0: got records up to offset %d, want up to %d", topic, next, end)
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			t.Fatalf("consume %s-0: got %v at offset %d, want no error", topic, err, next)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, r.Value)
			next = r.Offset + 1
		})
	}
	if len(got) != len(want) {
		t.Fatalf("consume %s-0: got %d records, want %d", topic, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("consume %s-0: got record %d = %.40q, want %.40q", topic, i, got[i], want[i])
		}
	}
}

func TestHostileProduceInvalidBatches(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "hostile-batches"
	createLocalTopic(t, b, topic, 1)
	nc := dialBroker(t, b)
	var valid [][]byte
	corr := int32(0)
	produceValid := func() {
		value := fmt.Appendf(nil, "valid-%d", len(valid))
		if sp := produceBatch(t, nc, topic, kafkatest.EncodeBatch(time.Now().UnixMilli(), -1, -1, -1, value), corr); sp.ErrorCode != 0 {
			t.Fatalf("valid batch: got %v, want no error", kerr.ErrorForCode(sp.ErrorCode))
		}
		corr++
		valid = append(valid, value)
	}
	produceValid()
	for _, c := range hostileBatches() {
		before := endOffset(t, b, topic)
		sp := produceBatch(t, nc, topic, c.batch, corr)
		corr++
		if err := kerr.ErrorForCode(sp.ErrorCode); err != c.want {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if after := endOffset(t, b, topic); after != before {
			t.Errorf("%s: got the end offset moved from %d to %d, want it unmoved", c.name, before, after)
		}
		produceValid()
	}
	checkConsumable(t, b, topic, valid)
	checkServes(t, b)
}

// bombBatch is a zstd batch of about 32 KiB holding one keyed record
// whose value is 1 GiB of zeros.
func bombBatch() []byte {
	const valueLen = 1 << 30
	body := []byte{0, 0, 0}             // attributes, timestampDelta, offsetDelta
	body = binary.AppendVarint(body, 1) // key length
	body = append(body, 'k')            // key
	body = binary.AppendVarint(body, valueLen)
	length := int64(len(body)) + valueLen + 1 // value, header count
	prefix := append(binary.AppendVarint(nil, length), body...)
	return hostileBatch(hostile.ZstdZeros(prefix, valueLen+1), attrsCodecZstd, 1, 0)
}

// probeMetadata sends Metadata requests on its own connection until stop
// closes and returns how many were answered and the slowest answer.
func probeMetadata(b *Broker, topic string, stop <-chan struct{}) (answered int, slowest time.Duration, err error) {
	nc, err := net.DialTimeout("tcp", b.Addr().String(), 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	for corr := int32(0); ; corr++ {
		select {
		case <-stop:
			return answered, slowest, nil
		default:
		}
		start := time.Now()
		if err := nc.SetDeadline(start.Add(10 * time.Second)); err != nil {
			return answered, slowest, err
		}
		if _, err := nc.Write(encodeRequest(req, corr)); err != nil {
			return answered, slowest, err
		}
		if _, _, err := readResponseFrame(nc); err != nil {
			return answered, slowest, fmt.Errorf("metadata %d: %w", corr, err)
		}
		answered++
		slowest = max(slowest, time.Since(start))
	}
}

func TestHostileProduceDecompressionBomb(t *testing.T) {
	b := startBroker(t, testConfig(t))
	bomb := bombBatch()
	t.Logf("a zstd batch of %d KiB that inflates to 1 GiB", len(bomb)>>10)
	for _, c := range []struct {
		name    string
		configs map[string]*string
	}{
		{"compacted", map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}},
		{"normal", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := "bomb-" + c.name
			createTopic(t, b, topic, 1, c.configs)
			nc := dialBroker(t, b)
			first := []byte("before the bomb")
			if sp := produceBatch(t, nc, topic, hostileBatch(hostileRecord(0, first), 0, 1, 0), 0); sp.ErrorCode != 0 {
				t.Fatalf("valid batch: got %v, want no error", kerr.ErrorForCode(sp.ErrorCode))
			}
			before := endOffset(t, b, topic)

			stop := make(chan struct{})
			type probe struct {
				answered int
				slowest  time.Duration
				err      error
			}
			probed := make(chan probe, 1)
			go func() {
				var p probe
				p.answered, p.slowest, p.err = probeMetadata(b, topic, stop)
				probed <- p
			}()
			epoch := b.member.CurrentEpoch()
			heap := watchHeap(t)
			start := time.Now()
			frame, err := awaitAnswer(nc, produceRequest(topic, bomb), 1)
			took := time.Since(start)
			heap.checkHeapGrowth(t, "zstd batch inflating to 1 GiB to a "+c.name+" topic", hostileHeapLimit)
			close(stop)
			p := <-probed
			t.Logf("answered in %v; %d Metadata answers meanwhile, the slowest in %v", took, p.answered, p.slowest)
			if err != nil {
				t.Fatalf("produce: got %v, want an answer", err)
			}
			sp := decodeResponse(t, produceRequest(topic, bomb), frame, 1).(*kmsg.ProduceResponse).Topics[0].Partitions[0]

			if err := kerr.ErrorForCode(sp.ErrorCode); err != kerr.MessageTooLarge {
				t.Errorf("got %v, want %v", err, kerr.MessageTooLarge)
			}
			if after := endOffset(t, b, topic); after != before {
				t.Errorf("got the end offset moved from %d to %d, want it unmoved", before, after)
			}
			switch {
			case p.err != nil:
				t.Errorf("metadata while the bomb is validated: got %v, want answers", p.err)
			case p.slowest > 2*time.Second:
				t.Errorf("metadata while the bomb is validated: got an answer in %v, want each within 2s", p.slowest)
			}
			// The broker's coordination session outlived the bomb: it
			// was not fenced and did not register again.
			if got := b.member.CurrentEpoch(); got != epoch || got < 0 {
				t.Errorf("broker epoch: got %d after the bomb, want the %d it had before", got, epoch)
			}
			checkConsumable(t, b, topic, [][]byte{first})
		})
	}
	checkServes(t, b)
}

// xerialSnappy frames records as the Java producer's snappy stream does:
// the xerial header, then blocks of 32 KiB, each with its length.
func xerialSnappy(records []byte) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(records) > 0 {
		n := min(len(records), 32<<10)
		block := s2.EncodeSnappy(nil, records[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		records = records[n:]
	}
	return out
}

func TestHostileProduceValidCompressedAccepted(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "compressed"
	createLocalTopic(t, b, topic, 1)
	var want [][]byte
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	} {
		cl := newClient(t, b, kgo.ProducerBatchCompression(codec.codec), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(50*time.Millisecond))
		var records []*kgo.Record
		for i := range 50 {
			value := bytes.Repeat(fmt.Appendf(nil, "%s-%d ", codec.name, i), 20)
			records = append(records, &kgo.Record{Key: []byte("k"), Value: value})
			want = append(want, value)
		}
		if err := cl.ProduceSync(testContext(t, 15*time.Second), records...).FirstErr(); err != nil {
			t.Fatalf("produce with %s: got %v, want no error", codec.name, err)
		}
	}
	// The Java producer's snappy framing.
	value := bytes.Repeat([]byte("xerial "), 10000)
	r := hostileRecord(0, value)
	if sp := produceBatch(t, dialBroker(t, b), topic, hostileBatch(xerialSnappy(r), 2, 1, 0), 0); sp.ErrorCode != 0 {
		t.Fatalf("xerial snappy batch: got %v, want no error", kerr.ErrorForCode(sp.ErrorCode))
	}
	want = append(want, value)
	checkConsumable(t, b, topic, want)
}

// fuzzBombBatch is a zstd batch of about 21 KiB holding the start of one
// keyed record of 1 GiB, then about 100 MiB of "abab…" in frames of 4
// MiB with a window of 64 KiB: past the bound of 64 MiB, in compressed
// blocks that the zstd decoder runs in assembly, so a seed costs the race
// detector tens of milliseconds where bombBatch's run-length blocks cost
// seconds.
func fuzzBombBatch(tb testing.TB) []byte {
	tb.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(64<<10))
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	const valueLen = 1 << 30
	body := []byte{0, 0, 0}             // attributes, timestampDelta, offsetDelta
	body = binary.AppendVarint(body, 1) // key length
	body = append(body, 'k')            // key
	body = binary.AppendVarint(body, valueLen)
	record := binary.AppendVarint(nil, int64(len(body))+valueLen+1)
	record = append(record, body...)
	chunk := bytes.Repeat([]byte("ab"), 2<<20)
	payload := enc.EncodeAll(append(record, chunk...), nil)
	frame := enc.EncodeAll(chunk, nil)
	for range 24 {
		payload = append(payload, frame...)
	}
	return hostileBatch(payload, attrsCodecZstd, 1, 0)
}

// hostileProduceSeeds are FuzzRequest's seeds of a producer's batches
// that pass their CRC-32C and must be refused: each hostile batch, and a
// zstd batch that inflates past the bound, in a Produce to the fuzz
// topic. The harness's allocation check then catches a validation that
// holds a batch's records decompressed.
func hostileProduceSeeds(tb testing.TB) []requestSeed {
	tb.Helper()
	var seeds []requestSeed
	batches := [][]byte{fuzzBombBatch(tb)}
	for _, c := range hostileBatches() {
		batches = append(batches, c.batch)
	}
	for _, batch := range batches {
		req := produceRequest(fuzzTopic, batch)
		seeds = append(seeds, requestSeed{key: req.Key(), version: req.GetVersion(), body: req.AppendTo(nil)})
	}
	// Legacy message sets, valid and not, in Produce v0 and v2; not the
	// bomb, whose conversion holds what it decompresses.
	sets := [][]byte{legacyMessage(1, 0, 1, nil, gzipped(tb, legacyMessage(1, 0, 0, []byte("k"), []byte("v"))))}
	for _, c := range hostileLegacySets(tb) {
		if c.want != kerr.MessageTooLarge {
			sets = append(sets, c.set)
		}
	}
	for _, set := range sets {
		for _, version := range []int16{0, 2} {
			req := produceRequest(fuzzTopic, set)
			req.SetVersion(version)
			seeds = append(seeds, requestSeed{key: req.Key(), version: req.GetVersion(), body: req.AppendTo(nil)})
		}
	}
	return seeds
}
