package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tripodmq/tripod/broker/network"
)

// The attacks on the request path: what a client may make the broker
// read, decode, queue and hold before and while its requests are
// handled.

// metadataFlood returns a Metadata v1 request frame (with its size
// prefix) naming the empty topic name n times: two bytes a topic on the
// wire, decoded into a struct and a string pointer of some fifty bytes
// each.
func metadataFlood(n int) []byte {
	body := make([]byte, 4, 4+2*n)
	binary.BigEndian.PutUint32(body, uint32(n))
	body = append(body, make([]byte, 2*n)...)
	return requestFrame(3, 1, 1, body)
}

// closedOrAnswered reads nc until the broker closes it or answers a
// frame, within d, and says which, or returns an error.
func closedOrAnswered(nc net.Conn, d time.Duration) (string, error) {
	if err := nc.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	_, _, err := readResponseFrame(nc)
	switch {
	case err == nil:
		return "answered", nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "", fmt.Errorf("got neither an answer nor a close within %v, want one", d)
	case isConnClosed(err):
		return "closed", nil
	}
	return "", fmt.Errorf("read: got %v, want an answer or a close", err)
}

// TestHostileUnauthenticatedMetadataRequests opens 300 connections to a
// SASL listener, each sending one Metadata request of 512 KB (the most
// sasl.server.max.receive.size lets through) before authenticating. The
// broker reads each one's api key, closes it without reading or decoding
// the body, and keeps serving.
func TestHostileUnauthenticatedMetadataRequests(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	addr := b.ListenerAddr("SASL_PLAINTEXT").String()
	const conns = 300
	frame := metadataFlood((int(b.cfg.SASL.ServerMaxReceiveSize) - 18) / 2)

	watch := watchHeap(t)
	var wg sync.WaitGroup
	outcomes := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				outcomes <- err
				return
			}
			defer nc.Close()
			// The broker may close before the whole frame is
			// written: the write's error says nothing.
			nc.Write(frame)
			nc.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, _, err = readResponseFrame(nc)
			switch {
			case err == nil:
				outcomes <- errors.New("got an answer, want the connection closed")
			case isConnClosed(err):
				outcomes <- nil
			default:
				outcomes <- err
			}
		}()
	}
	wg.Wait()
	close(outcomes)
	for err := range outcomes {
		if err != nil {
			t.Errorf("unauthenticated Metadata request: %v", err)
		}
	}
	watch.checkHeapGrowth(t, "300 unauthenticated 512 KB Metadata requests", 64<<20)
	checkServes(t, b)
	if err := login(context.Background(), b, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil {
		t.Fatalf("login after the attack: got %v, want none", err)
	}
}

// TestHostileLargeMetadataRequest sends one 20 MB Metadata request naming
// the empty topic ten million times on a PLAINTEXT listener: the broker
// refuses to decode what would take 24 times the frame, closes the
// connection (or answers) within the deadline and keeps serving.
func TestHostileLargeMetadataRequest(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topics = 10_000_000
	frame := metadataFlood(topics)

	watch := watchHeap(t)
	nc := dialBroker(t, b)
	go nc.Write(frame) // ends with an error once the broker closes
	got, err := closedOrAnswered(nc, 20*time.Second)
	watch.checkHeapGrowth(t, "a 20 MB Metadata request", network.MaxDecodeExpansion*uint64(len(frame))+64<<20)
	if err != nil {
		t.Fatalf("20 MB Metadata request: %v", err)
	}
	t.Logf("20 MB Metadata request: %s", got)
	nc.Close()
	checkServes(t, b)
}

// TestHostileMetadataRepeatsATopic sends a Metadata request of 8 MB that
// names one topic (with a long name, so that decoding it is within
// bounds) a quarter of a million times: the broker answers it once, as
// Kafka reads the names into a set.
func TestHostileMetadataRepeatsATopic(t *testing.T) {
	b := startBroker(t, testConfig(t))
	topic := strings.Repeat("t", 30)
	createTopic(t, b, topic, 1, nil)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	for range 250_000 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	frame := encodeRequest(req, 1)
	req = nil

	watch := watchHeap(t)
	nc := dialBroker(t, b)
	if _, err := nc.Write(frame); err != nil {
		t.Fatalf("write: %v", err)
	}
	probe := kmsg.NewPtrMetadataRequest()
	probe.SetVersion(9)
	resp := decodeResponse(t, probe, readFrame(t, nc), 1).(*kmsg.MetadataResponse)
	watch.checkHeapGrowth(t, "an 8 MB Metadata request repeating a topic", network.MaxDecodeExpansion*uint64(len(frame))+64<<20)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("got %d topics in the answer, want 1 without error", len(resp.Topics))
	}
	checkServes(t, b)
}

// TestHostileFetchPipelineNeverRead has three connections each pipeline
// five Fetch requests of about 200 bytes that name one 10 MB partition
// ten times with 1 GiB limits, and never read the answers. Each
// connection holds about one response: the partition is served once per
// request, and a connection reads nothing more while its Fetch answer is
// unwritten.
func TestHostileFetchPipelineNeverRead(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "big"
	createTopic(t, b, topic, 1, nil)
	const recordSize, records = 100 << 10, 100 // 10 MB
	cl := newClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	value := make([]byte, recordSize)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range records {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	cl.Close()

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	fetch.ReplicaID, fetch.MinBytes, fetch.MaxBytes = -1, 1, 1<<30
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	for range 10 {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 30
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	var pipeline []byte
	for corr := range int32(5) {
		pipeline = append(pipeline, encodeRequest(fetch, corr)...)
	}
	t.Logf("each connection pipelines 5 Fetch requests of %d bytes", len(pipeline)/5)

	answered := func() float64 {
		if m := b.metrics.byKey[fetchKey].Load(); m != nil {
			return counterValue(m.requests)
		}
		return 0
	}
	before := answered()
	watch := watchHeap(t)
	const conns = 3
	for range conns {
		nc := dialBroker(t, b)
		if _, err := nc.Write(pipeline); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	// The attack has done its worst once every request is answered, or
	// once each connection has one answer and its reader waits for the
	// answer to be written.
	settled := waitUntil(30*time.Second, func() bool {
		n := answered() - before
		if n >= conns*5 {
			return true
		}
		waiting := 0
		for _, g := range goroutineStacks() {
			if strings.Contains(g, "(*connFlow).wait") {
				waiting++
			}
		}
		return n >= conns && waiting >= conns
	})
	t.Logf("Fetch requests answered: %v", answered()-before)
	// One response a connection costs the records read (10 MB) and the
	// frame encoding them, of the 16 MiB size class of the frame pool.
	watch.checkHeapGrowth(t, "3 connections pipelining 5 Fetch requests each, never read", conns*3*(recordSize*records)+64<<20)
	if !settled {
		t.Fatalf("got %v Fetch requests answered within 30 s, want at least %d", answered()-before, conns)
	}
	checkServes(t, b)
}

// TestHostileQueuedRequestBytes sets a small queued.max.request.bytes and
// has several connections send most of a large frame and stop. The
// frames being read hold no more than the pool: readers wait before
// reading a body, and a small request waits too while the pool is full.
// Once the attackers close, the broker serves it.
func TestHostileQueuedRequestBytes(t *testing.T) {
	const pool = 8 << 20
	const frameSize = 4 << 20
	const attackers = 16
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{"queued.max.request.bytes": "8388608"})
	b := startBroker(t, cfg)

	partial := make([]byte, 4, frameSize*7/8)
	binary.BigEndian.PutUint32(partial, frameSize)
	partial = append(partial, requestFrame(0, 8, 1, nil)[4:]...)
	partial = partial[:cap(partial)]

	watch := watchHeap(t)
	var writers sync.WaitGroup
	var attackConns []net.Conn
	for range attackers {
		nc := dialBroker(t, b)
		attackConns = append(attackConns, nc)
		writers.Add(1)
		go func() {
			defer writers.Done()
			nc.Write(partial) // blocks while the broker does not read; ends when nc closes
		}()
	}
	if !waitUntil(30*time.Second, func() bool { return b.conns.RequestBytesInUse() >= pool }) {
		t.Fatalf("got %d bytes of the request pool in use, want %d", b.conns.RequestBytesInUse(), pool)
	}
	// The pool is full: a small request is not read until it frees.
	probe := dialBroker(t, b)
	if _, err := probe.Write(apiVersionsFrame(fuzzProbeCorrelationID)); err != nil {
		t.Fatalf("write ApiVersions: %v", err)
	}
	probe.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, _, err := readResponseFrame(probe)
	watch.checkHeapGrowth(t, "16 connections sending 7/8 of a 4 MiB frame", pool+32<<20)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ApiVersions while the pool is full: got %v, want no answer until it frees", err)
	}

	for _, nc := range attackConns {
		nc.Close()
	}
	writers.Wait()
	probe.SetReadDeadline(time.Now().Add(10 * time.Second))
	if corr, _, err := readResponseFrame(probe); err != nil || corr != fuzzProbeCorrelationID {
		t.Fatalf("ApiVersions once the attackers closed: got correlation id %d, error %v; want %d answered", corr, err, fuzzProbeCorrelationID)
	}
	if !waitUntil(10*time.Second, func() bool { return b.conns.RequestBytesInUse() == 0 }) {
		t.Errorf("got %d bytes of the request pool in use after every request ended, want 0", b.conns.RequestBytesInUse())
	}
	checkServes(t, b)
}

// TestFetchMaxBytesCapsTheResponse fetches two partitions of 8 KiB each
// with 1 GiB limits, naming the first twice, from a broker whose
// fetch.max.bytes is 1024: the answer has each partition once, the first
// batch of the first partition (a batch over the limit is returned
// whole, so a consumer is never stuck) and nothing of the second.
func TestFetchMaxBytesCapsTheResponse(t *testing.T) {
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{"fetch.max.bytes": "1024"})
	b := startBroker(t, cfg)
	const topic = "capped"
	createTopic(t, b, topic, 2, nil)
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := range int32(2) {
		for range 2 {
			rec := &kgo.Record{Topic: topic, Partition: p, Value: make([]byte, 4<<10)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce to partition %d: %v", p, err)
			}
		}
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	fetch.ReplicaID, fetch.MaxBytes = -1, 1<<30
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	for _, p := range []int32{0, 1, 0} {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1<<30
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	resp := roundTrip(t, dialBroker(t, b), fetch, 1).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("got %d topics, %d partitions in the first; want 1 topic of 2 partitions", len(resp.Topics), len(resp.Topics[0].Partitions))
	}
	got := map[int32]int{}
	for _, p := range resp.Topics[0].Partitions {
		got[p.Partition] = len(p.RecordBatches)
	}
	if got[0] < 4<<10 || got[0] >= 8<<10 || got[1] != 0 {
		t.Fatalf("got record bytes %v by partition, want one batch (4 KiB and some) of partition 0 and none of 1", got)
	}
}
