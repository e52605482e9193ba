package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/kafkatest"
)

// encodeRequest frames req as a client would, with correlation id corr.
func encodeRequest(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, corr)
}

// readFrame reads one response frame (without its size) from nc.
func readFrame(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("read response size: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, frame); err != nil {
		t.Fatalf("read response of %d bytes: %v", len(frame), err)
	}
	return frame
}

// roundTrip sends req on nc and decodes its response, checking the
// correlation id and the response header's tagged fields.
func roundTrip(t *testing.T, nc net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	if _, err := nc.Write(encodeRequest(req, corr)); err != nil {
		t.Fatalf("write %s request: %v", kmsg.NameForKey(req.Key()), err)
	}
	frame := readFrame(t, nc)
	return decodeResponse(t, req, frame, corr)
}

// decodeResponse decodes a response frame to req.
func decodeResponse(t *testing.T, req kmsg.Request, frame []byte, corr int32) kmsg.Response {
	t.Helper()
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("got correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		if body[0] != 0 {
			t.Fatalf("got %d response header tags, want 0", body[0])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed fails unless the broker closes nc (a read returns EOF or a
// reset) within the deadline.
func expectClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after the deadline")
		}
		return
	}
}

// TestBadInputClosesOnlyThatConnection sends frames a broker must refuse:
// larger than socket.request.max.bytes, a negative size, random garbage, a
// request cut short inside its frame, a frame cut short by the peer, an
// unknown API key and an unsupported version. Each closes that connection
// without allocating the declared size, and a client on another connection
// keeps producing and fetching.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "bystander"
	createTopic(t, b, topic, 1, nil)
	bystander := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := testContext(t, 2*time.Minute)

	frame := func(size int32, body []byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(size))
		return append(out, body...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rng.IntN(256))
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(7)
	produce.Acks = 1
	produce.TimeoutMillis = 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 200)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	full := encodeRequest(produce, 7)
	cut := full[4 : 4+40]
	unknownKey := frame(10, []byte{0x7f, 0x00, 0, 0, 0, 1, 0xff, 0xff, 0, 0})
	tooNewFetch := kmsg.NewPtrFetchRequest()
	tooNewFetch.SetVersion(17)

	cases := []struct {
		name string
		// send is written to the connection; closeWrite half-closes it
		// afterwards.
		send       []byte
		closeWrite bool
		// declared is the size the frame claims, for the memory check.
		declared int64
	}{
		{name: "oversized frame", send: frame(200<<20, garbage[:100]), declared: 200 << 20},
		{name: "negative size", send: frame(-1, garbage[:100])},
		{name: "random garbage", send: garbage},
		{name: "garbage in a well-sized frame", send: frame(int32(len(garbage)), garbage)},
		{name: "request truncated inside its frame", send: frame(int32(len(cut)), cut)},
		{name: "frame truncated by the peer", send: frame(60<<20, garbage), closeWrite: true, declared: 60 << 20},
		{name: "unknown api key", send: unknownKey},
		{name: "unsupported fetch version", send: encodeRequest(tooNewFetch, 3)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc := dialBroker(t, b)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if _, err := nc.Write(c.send); err != nil {
				t.Fatalf("write: %v", err)
			}
			if c.closeWrite {
				nc.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, nc)
			runtime.ReadMemStats(&after)
			if c.declared > 0 {
				grown := int64(after.TotalAlloc - before.TotalAlloc)
				if grown > c.declared/8 {
					t.Fatalf("allocated %d bytes for a frame declaring %d", grown, c.declared)
				}
				t.Logf("allocated %d bytes for a frame declaring %d", grown, c.declared)
			}

			value := []byte("still serving " + c.name)
			if err := bystander.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
				t.Fatalf("bystander produce: %v", err)
			}
			fetches := bystander.PollRecords(ctx, 1)
			if err := fetches.Err(); err != nil {
				t.Fatalf("bystander fetch: %v", err)
			}
			recs := fetches.Records()
			if len(recs) != 1 || string(recs[0].Value) != string(value) || recs[0].Offset != int64(i) {
				t.Fatalf("bystander fetched %d records (first %+v), want %q at offset %d", len(recs), recs, value, i)
			}
		})
	}
}

// TestApiVersionsTooNewGetsUnsupportedVersion shows that a client asking
// ApiVersions in a version newer than the broker's gets
// UNSUPPORTED_VERSION with the supported ranges as a v0 response, and the
// connection stays open so that it can downgrade.
func TestApiVersionsTooNewGetsUnsupportedVersion(t *testing.T) {
	b := startBroker(t, testConfig(t))
	nc := dialBroker(t, b)

	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(99)
	if _, err := nc.Write(encodeRequest(req, 11)); err != nil {
		t.Fatalf("write: %v", err)
	}
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.SetVersion(0)
	resp := decodeResponse(t, v0, readFrame(t, nc), 11).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("got error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	if want := len(b.apiVersionKeys()); len(resp.ApiKeys) != want {
		t.Fatalf("got %d api keys, want the %d the broker serves", len(resp.ApiKeys), want)
	}

	v3 := kmsg.NewPtrApiVersionsRequest()
	v3.SetVersion(3)
	v3.ClientSoftwareName = "raw-test"
	v3.ClientSoftwareVersion = "1"
	resp = roundTrip(t, nc, v3, 12).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("downgraded ApiVersions: got error code %d, want 0", resp.ErrorCode)
	}
	found := false
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 {
			found = k.MinVersion <= 3 && k.MaxVersion >= 7
		}
	}
	if !found {
		t.Fatalf("ApiVersions lacks Produce v3..v7: %+v", resp.ApiKeys)
	}
}

// TestPipelinedRequestsAnswerInOrderPastALongPoll pipelines, on one
// connection, a fetch that long-polls an empty partition and a Metadata
// request. Another connection is served while the fetch waits, and its
// produce to the polled partition wakes the fetch; the first connection
// then gets both answers in request order.
func TestPipelinedRequestsAnswerInOrderPastALongPoll(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "pipelined"
	createTopic(t, b, topic, 1, nil)
	nc := dialBroker(t, b)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxWaitMillis = 60_000 // far beyond the test's deadline: only the produce can answer it
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)

	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks = 1
	produce.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = buildBatch(t, []byte("wake up"))
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)

	var pipeline []byte
	pipeline = append(pipeline, encodeRequest(fetch, 1)...)
	pipeline = append(pipeline, encodeRequest(meta, 2)...)
	if _, err := nc.Write(pipeline); err != nil {
		t.Fatalf("write: %v", err)
	}

	// Another connection is answered while the fetch waits.
	other := dialBroker(t, b)
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	roundTrip(t, other, api, 1)

	// The connection reads nothing behind its fetch until the fetch is
	// answered (as Kafka mutes a connection until its response is
	// sent): the produce that answers it comes on the other one.
	pr := roundTrip(t, other, produce, 3).(*kmsg.ProduceResponse)
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce: got error %d base offset %d, want 0, 0", p.ErrorCode, p.BaseOffset)
	}
	fr := decodeResponse(t, fetch, readFrame(t, nc), 1).(*kmsg.FetchResponse)
	part := fr.Topics[0].Partitions[0]
	if part.ErrorCode != 0 || part.HighWatermark != 1 || len(part.RecordBatches) == 0 {
		t.Fatalf("fetch: got error %d, high watermark %d, %d record bytes; want 0, 1, >0",
			part.ErrorCode, part.HighWatermark, len(part.RecordBatches))
	}
	mr := decodeResponse(t, meta, readFrame(t, nc), 2).(*kmsg.MetadataResponse)
	if len(mr.Brokers) != 1 || mr.Brokers[0].NodeID != 1 {
		t.Fatalf("metadata: got brokers %+v, want broker 1", mr.Brokers)
	}
}

// buildBatch returns a v2 record batch (no compression) holding one record
// per value, with its CRC set.
func buildBatch(t *testing.T, values ...[]byte) []byte {
	t.Helper()
	return buildProducerBatch(t, -1, -1, -1, values...)
}

// buildProducerBatch is buildBatch for an idempotent producer: the batch
// carries producerID, producerEpoch and the base sequence firstSequence
// (-1, -1, -1: no producer).
func buildProducerBatch(t *testing.T, producerID int64, producerEpoch int16, firstSequence int32, values ...[]byte) []byte {
	t.Helper()
	return kafkatest.EncodeBatch(time.Now().UnixMilli(), producerID, producerEpoch, firstSequence, values...)
}

// TestCloseEndsConnectionsAndGoroutines closes a broker while a client
// waits in a long-poll fetch and another connection idles: Close returns,
// both connections are closed, every goroutine the broker started has
// ended, and the data is intact for the next broker on the directory.
func TestCloseEndsConnectionsAndGoroutines(t *testing.T) {
	cfg := testConfig(t)
	before := runtime.NumGoroutine()
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	const topic = "closing"
	ctx := testContext(t, time.Minute)
	waitServing(t, b)
	createLocalTopic(t, b, topic, 1)
	polling, idle := dialBroker(t, b), dialBroker(t, b)

	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks = -1
	produce.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = buildBatch(t, []byte("kept"), []byte("also kept"))
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	roundTrip(t, polling, produce, 1)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxWaitMillis = 600_000
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset = 2
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if _, err := polling.Write(encodeRequest(fetch, 2)); err != nil {
		t.Fatalf("write fetch: %v", err)
	}
	waitFor(t, ctx, "the fetch to wait", func() bool {
		p := b.replicas.PartitionFor(topic, 0)
		return p.WaitingFetches() > 0
	})

	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The waiting fetch may be answered (empty) before its connection
	// closes; either way the connection ends.
	expectClosed(t, polling)
	expectClosed(t, idle)
	waitFor(t, ctx, "the broker's goroutines to end", func() bool {
		if runtime.NumGoroutine() <= before {
			return true
		}
		if ctx.Err() != nil || time.Now().Add(time.Second).After(deadline(ctx)) {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		return false
	})

	b = startBroker(t, cfg)
	waitFor(t, testContext(t, 30*time.Second), "the reopened partition", func() bool { return b.replicas.PartitionFor(topic, 0) != nil })
	if end := b.replicas.PartitionFor(topic, 0).Log().EndOffset(); end != 2 {
		t.Fatalf("after reopening: got end offset %d, want 2", end)
	}
}

// deadline returns ctx's deadline, or far in the future.
func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

// TestIdleConnectionIsClosed leaves one connection silent and another
// stuck in the middle of a frame past connections.max.idle.ms: the broker
// closes both. A third connection waiting in a long-poll fetch is not
// idle: its fetch is answered by a later append.
func TestIdleConnectionIsClosed(t *testing.T) {
	cfg := testConfig(t)
	cfg.ConnectionsMaxIdle = 100 * time.Millisecond
	b := startBroker(t, cfg)
	const topic = "idle"
	ctx := testContext(t, time.Minute)
	createLocalTopic(t, b, topic, 1)
	silent, stuck, polling := dialBroker(t, b), dialBroker(t, b), dialBroker(t, b)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxWaitMillis = 600_000
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if _, err := polling.Write(encodeRequest(fetch, 1)); err != nil {
		t.Fatalf("write fetch: %v", err)
	}
	if _, err := stuck.Write([]byte{0, 0, 1, 0, 0, 18}); err != nil {
		t.Fatalf("write: %v", err)
	}
	expectClosed(t, silent)
	expectClosed(t, stuck)

	// A connection opened after the fetch was read is closed for
	// idleness only after the polling connection's own idle deadline
	// has passed; the poll must survive it.
	waitFor(t, ctx, "the fetch to wait", func() bool {
		p := b.replicas.PartitionFor(topic, 0)
		return p.WaitingFetches() > 0
	})
	expectClosed(t, dialBroker(t, b))
	if _, _, err := b.replicas.AppendAsLeader(b.replicas.PartitionFor(topic, 0), buildBatch(t, []byte("late")), false, time.Time{}); err != nil {
		t.Fatalf("append: %v", err)
	}
	fr := decodeResponse(t, fetch, readFrame(t, polling), 1).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("long poll: got error %d and %d bytes, want records", p.ErrorCode, len(p.RecordBatches))
	}
}
