package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/internal/kafkatest"
)

// FuzzRequest feeds arbitrary request bodies through a live broker's real
// connection reader, decoder and handler. The input names an API key and a
// version; a key the broker does not register, or a version outside the
// registered range, is mapped onto the registry (supportedKeys), so every
// registered API, including one added later, is reached. The harness
// frames the body behind a valid request header, writes it on a fresh
// connection to a broker shared by the whole fuzz process, pipelines an
// ApiVersions probe behind it, and checks what fuzzOneRequest documents.
func FuzzRequest(f *testing.F) {
	b := startFuzzBroker(f)
	for _, s := range requestSeeds(f, b) {
		f.Add(s.key, s.version, s.body)
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		key, version = registeredKeyVersion(key, version)
		fuzzOneRequest(t, b, key, version, body)
	})
}

// Limits of the request fuzz harness.
const (
	// fuzzAnswerDeadline bounds the wait for an answer (or a close) to a
	// request that has no reason to wait.
	fuzzAnswerDeadline = 2 * time.Second
	// fuzzWaitingGrace is how long the harness listens for an answer to
	// a request that may legitimately wait longer than
	// fuzzAnswerDeadline (legitimateWait) before it closes the
	// connection and checks that closing released the wait.
	fuzzWaitingGrace = 100 * time.Millisecond
	// fuzzSettleDeadline bounds the wait for a closed connection's
	// goroutines to end.
	fuzzSettleDeadline = 10 * time.Second
	// fuzzGoroutineSlack is how many goroutines an input may leave
	// beyond the count before it, for state a request legitimately
	// creates (a fetcher started by a LeaderAndIsr, a controller
	// sender's destination); the connection's own goroutines must all
	// have ended.
	fuzzGoroutineSlack = 16
	// fuzzAllocPerRequestByte, fuzzAllocPerResponseByte and
	// fuzzAllocFixed bound the bytes allocated while one frame is
	// handled: per byte of request frame, what reading it (twice its
	// size at most, as the read buffer grows) and decoding it
	// (network.MaxDecodeExpansion, the bound the reader enforces) may take, with
	// as much again for the handler; per byte of response, the Go
	// structs a handler builds (a Metadata answer's topic is some 100
	// bytes of Go for 9 on the wire) and their encoding; plus
	// network.DecodeCostSlack and as much again. A request that decodes or is
	// handled into far more than its frame, as a 20 MB Metadata request
	// once did (190 times), exceeds it at any size.
	fuzzAllocPerRequestByte  = 2 * (2 + network.MaxDecodeExpansion)
	fuzzAllocPerResponseByte = 16
	fuzzAllocFixed           = 2 * network.DecodeCostSlack
	// fuzzMaxPartitions caps the partitions one fuzzed CreateTopics or
	// CreatePartitions may ask for, and fuzzMaxBrokerPartitions the
	// partitions the shared broker may hold before requests that create
	// topics are skipped, so the broker's state stays small over a long
	// run. The second is low because opening a new partition costs
	// allocation in proportion to the whole cluster's metadata (the
	// LeaderAndIsr that opens it loads every topic from the backend for
	// the new topic's configs: about 500 bytes per partition held), which
	// fuzzAllocFixed must cover.
	fuzzMaxPartitions       = 100
	fuzzMaxBrokerPartitions = 200
	// fuzzMaxResponse is the largest response frame the harness reads.
	fuzzMaxResponse = 256 << 20
)

// fuzzCorrelationID and fuzzProbeCorrelationID are the correlation ids of
// the fuzzed request and of the ApiVersions probe behind it.
const (
	fuzzCorrelationID      = 1
	fuzzProbeCorrelationID = 2
)

// fuzzOneRequest sends one framed request and checks, for every input:
//   - the broker answers it (its response, then the probe's), or closes
//     the connection, within fuzzAnswerDeadline; the only requests
//     that may stay unanswered are an acks=0 produce (the probe is
//     answered instead) and a request whose own timeout lets it wait
//     longer (legitimateWait): the harness closes such a connection
//     after fuzzWaitingGrace;
//   - every goroutine of the connection ends once it is closed, and no
//     more than fuzzGoroutineSlack others remain;
//   - no more than fuzzAllocPerRequestByte × request bytes +
//     fuzzAllocPerResponseByte × response bytes + fuzzAllocFixed bytes
//     are allocated while the frame is handled;
//   - the broker still serves: a fresh connection's ApiVersions is
//     answered.
//
// A panic in a handler is not recovered by the broker, so it fails the
// fuzz process itself.
func fuzzOneRequest(t *testing.T, b *Broker, key, version int16, body []byte) {
	kreq := kmsg.RequestForKey(key)
	kreq.SetVersion(version)
	decoded := kreq.ReadFrom(body) == nil
	if decoded {
		if why := tooBigForSharedBroker(b, kreq); why != "" {
			t.Skip(why)
		}
	}
	frame := requestFrame(key, version, fuzzCorrelationID, body)
	probe := apiVersionsFrame(fuzzProbeCorrelationID)

	before := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocBefore := ms.TotalAlloc

	nc, err := net.DialTimeout("tcp", b.Addr().String(), fuzzAnswerDeadline)
	if err != nil {
		t.Fatalf("dial broker: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Write(append(frame, probe...)); err != nil && !isConnClosed(err) {
		t.Fatalf("write request: %v", err)
	}
	wait := legitimateWait(kreq, decoded)
	deadline := fuzzAnswerDeadline
	if wait > fuzzAnswerDeadline {
		deadline = fuzzWaitingGrace
	}
	if err := nc.SetReadDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatalf("set read deadline: %v", err)
	}
	outcome, respBytes := readFuzzAnswers(nc)
	nc.Close()
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc - allocBefore

	name := fmt.Sprintf("%s v%d (%d body bytes)", kmsg.NameForKey(key), version, len(body))
	switch outcome.kind {
	case answerBoth, answerClosed:
	case answerProbeOnly:
		if !decoded || !isAcksZeroProduce(kreq) {
			t.Errorf("%s: got the probe's answer without the request's, want the request answered first (only acks=0 produce goes unanswered)", name)
		}
	case answerTimeout:
		if wait <= fuzzAnswerDeadline {
			t.Errorf("%s: got no answer and no close within %v, want one (the request may wait %v)", name, deadline, wait)
		}
	case answerBad:
		t.Errorf("%s: %v", name, outcome.err)
	}
	if limit := uint64(fuzzAllocPerRequestByte*len(frame) + fuzzAllocPerResponseByte*respBytes + fuzzAllocFixed); allocated > limit {
		t.Errorf("%s: got %d bytes allocated handling a %d-byte frame answered with %d bytes, want at most %d",
			name, allocated, len(frame), respBytes, limit)
	}
	checkSettled(t, name, before)
	checkServes(t, b)
	checkSettled(t, name+" (after the ApiVersions check)", before)
}

// answerKind is how a connection ended for the harness.
type answerKind int

const (
	// answerBoth: the request's response, then the probe's.
	answerBoth answerKind = iota
	// answerClosed: the broker closed the connection (possibly after
	// answering the request).
	answerClosed
	// answerProbeOnly: the probe was answered and the request was not.
	answerProbeOnly
	// answerTimeout: nothing more arrived before the read deadline.
	answerTimeout
	// answerBad: a malformed or unexpected response.
	answerBad
)

// fuzzOutcome is what readFuzzAnswers saw.
type fuzzOutcome struct {
	kind answerKind
	err  error
}

// readFuzzAnswers reads the responses to the fuzzed request and the probe
// until both arrive, the broker closes the connection or the read
// deadline passes; it returns the outcome and the response bytes read.
func readFuzzAnswers(nc net.Conn) (fuzzOutcome, int) {
	read := 0
	gotRequest := false
	for {
		corr, n, err := readResponseFrame(nc)
		read += n
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fuzzOutcome{kind: answerTimeout}, read
		case err != nil && isConnClosed(err):
			return fuzzOutcome{kind: answerClosed}, read
		case err != nil:
			return fuzzOutcome{kind: answerBad, err: err}, read
		}
		switch {
		case corr == fuzzCorrelationID && !gotRequest:
			gotRequest = true
		case corr == fuzzProbeCorrelationID && gotRequest:
			return fuzzOutcome{kind: answerBoth}, read
		case corr == fuzzProbeCorrelationID:
			return fuzzOutcome{kind: answerProbeOnly}, read
		default:
			return fuzzOutcome{kind: answerBad, err: fmt.Errorf("got a response with correlation id %d, want %d then %d",
				corr, fuzzCorrelationID, fuzzProbeCorrelationID)}, read
		}
	}
}

// readResponseFrame reads one response frame and returns its correlation
// id and the bytes read.
func readResponseFrame(r io.Reader) (int32, int, error) {
	var sizeBuf [4]byte
	if n, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return 0, n, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 || size > fuzzMaxResponse {
		return 0, 4, fmt.Errorf("got a response frame of %d bytes, want 4..%d", size, fuzzMaxResponse)
	}
	buf := make([]byte, size)
	n, err := io.ReadFull(r, buf)
	if err != nil {
		return 0, 4 + n, err
	}
	return int32(binary.BigEndian.Uint32(buf)), 4 + n, nil
}

// isConnClosed reports whether err says the peer closed the connection.
func isConnClosed(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "connection reset by peer") || strings.Contains(s, "broken pipe")
}

// legitimateWait is how long a request may leave its answer pending by its
// own terms: a fetch its max wait, an acks=all produce its timeout, the
// admin requests their timeout (at least a second, at most 30 s, per
// topic, see requestTimeout) and the controller calls their bound. Every
// other request, and a body that does not decode, must be answered (or the
// connection closed) at once.
func legitimateWait(kreq kmsg.Request, decoded bool) time.Duration {
	if !decoded {
		return 0
	}
	switch r := kreq.(type) {
	case *kmsg.FetchRequest:
		return min(max(time.Duration(r.MaxWaitMillis)*time.Millisecond, 0), maxFetchWait)
	case *kmsg.ProduceRequest:
		if r.Acks == -1 {
			return max(time.Duration(r.TimeoutMillis)*time.Millisecond, 0)
		}
	case *kmsg.CreateTopicsRequest:
		return time.Duration(len(r.Topics)) * requestTimeout(r.TimeoutMillis)
	case *kmsg.CreatePartitionsRequest:
		return time.Duration(len(r.Topics)) * requestTimeout(r.TimeoutMillis)
	case *kmsg.DeleteTopicsRequest:
		return time.Duration(len(r.Topics)+len(r.TopicNames)) * requestTimeout(r.TimeoutMillis)
	case *kmsg.ElectLeadersRequest:
		return propagationWait + requestTimeout(r.TimeoutMillis)
	case *kmsg.MetadataRequest:
		// Auto-creation waits for the new topics' leaders.
		if r.AllowAutoTopicCreation && len(r.Topics) > 0 {
			return autoCreateWait
		}
	}
	return 0
}

// isAcksZeroProduce reports whether kreq is a produce that asks for no
// answer.
func isAcksZeroProduce(kreq kmsg.Request) bool {
	r, ok := kreq.(*kmsg.ProduceRequest)
	return ok && r.Acks == 0
}

// tooBigForSharedBroker says why a decoded request is skipped, or "": a
// CreateTopics or CreatePartitions asking for more than
// fuzzMaxPartitions partitions, or any request that may create topics
// once the shared broker holds fuzzMaxBrokerPartitions. Such requests are
// legitimate but would make the one broker of the fuzz process slow for
// every later input.
func tooBigForSharedBroker(b *Broker, kreq kmsg.Request) string {
	creates := 0
	switch r := kreq.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			switch {
			case len(t.ReplicaAssignment) > 0:
				creates += len(t.ReplicaAssignment)
			case t.NumPartitions == -1:
				creates += int(b.cfg.NumPartitions)
			default:
				creates += max(int(t.NumPartitions), 0)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			creates += max(int(t.Count), 0) + len(t.Assignment)
		}
	case *kmsg.MetadataRequest:
		if r.AllowAutoTopicCreation {
			creates = len(r.Topics) * int(b.cfg.NumPartitions)
		}
	default:
		return ""
	}
	if creates > fuzzMaxPartitions {
		return fmt.Sprintf("request asks for %d partitions, more than the harness's %d", creates, fuzzMaxPartitions)
	}
	if creates > 0 && len(b.replicas.Partitions()) >= fuzzMaxBrokerPartitions {
		return fmt.Sprintf("shared broker already holds %d partitions", fuzzMaxBrokerPartitions)
	}
	return ""
}

// registeredKeyVersion maps a fuzzed key and version onto a registered
// API and one of its versions: a registered key and a supported version
// are kept.
func registeredKeyVersion(key, version int16) (int16, int16) {
	api, ok := apis[key]
	if !ok {
		keys := supportedKeys()
		key = keys[int(uint16(key))%len(keys)]
		api = apis[key]
	}
	if version < api.minVersion || version > api.maxVersion {
		span := int(api.maxVersion-api.minVersion) + 1
		version = api.minVersion + int16(int(uint16(version))%span)
	}
	return key, version
}

// requestFrame frames body as a request of key at version: size, header
// v1 (v2, with empty tagged fields, for flexible versions), body.
func requestFrame(key, version int16, correlationID int32, body []byte) []byte {
	kreq := kmsg.RequestForKey(key)
	kreq.SetVersion(version)
	clientID := "fuzz"
	buf := make([]byte, 4, 4+14+len(clientID)+len(body))
	buf = binary.BigEndian.AppendUint16(buf, uint16(key))
	buf = binary.BigEndian.AppendUint16(buf, uint16(version))
	buf = binary.BigEndian.AppendUint32(buf, uint32(correlationID))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(clientID)))
	buf = append(buf, clientID...)
	if kreq.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = append(buf, body...)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// apiVersionsFrame is an ApiVersions v3 request frame.
func apiVersionsFrame(correlationID int32) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "fuzz", "1"
	return requestFrame(apiVersionsKey, 3, correlationID, req.AppendTo(nil))
}

// checkServes fails t unless a fresh connection's ApiVersions is answered
// within fuzzAnswerDeadline.
func checkServes(t *testing.T, b *Broker) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.Addr().String(), fuzzAnswerDeadline)
	if err != nil {
		t.Fatalf("broker no longer serves: dial: %v", err)
	}
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(fuzzAnswerDeadline)); err != nil {
		t.Fatalf("set deadline: %v", err)
	}
	if _, err := nc.Write(apiVersionsFrame(fuzzProbeCorrelationID)); err != nil {
		t.Fatalf("broker no longer serves: write ApiVersions: %v", err)
	}
	corr, _, err := readResponseFrame(nc)
	if err != nil {
		t.Fatalf("broker no longer serves: got %v reading the ApiVersions answer, want an answer", err)
	}
	if corr != fuzzProbeCorrelationID {
		t.Fatalf("ApiVersions answer: got correlation id %d, want %d", corr, fuzzProbeCorrelationID)
	}
}

// checkSettled fails t unless, within fuzzSettleDeadline, no connection
// goroutine is left and at most fuzzGoroutineSlack goroutines more than
// before are running.
func checkSettled(t *testing.T, name string, before int) {
	t.Helper()
	var conns, total int
	settled := waitUntil(fuzzSettleDeadline, func() bool {
		conns, total = connGoroutines(), runtime.NumGoroutine()
		return conns == 0 && total <= before+fuzzGoroutineSlack
	})
	if !settled {
		t.Errorf("%s: got %d connection goroutines and %d goroutines (%d before) %v after the connection closed, want 0 and at most %d:\n%s",
			name, conns, total, before, fuzzSettleDeadline, before+fuzzGoroutineSlack, connGoroutineStacks())
	}
}

// connGoroutineMarks are the frames that make a goroutine one of a
// connection's: serveConn, the goroutines it starts (watcher, writer) and
// the delayed handlers readRequests starts.
var connGoroutineMarks = []string{
	"tripod/broker/network.(*Server).serveConn",
	"tripod/broker/network.(*Server).readRequests",
}

// connGoroutines counts the goroutines serving client connections.
func connGoroutines() int {
	n := 0
	for _, g := range goroutineStacks() {
		if isConnGoroutine(g) {
			n++
		}
	}
	return n
}

// connGoroutineStacks returns the stacks of the connection goroutines.
func connGoroutineStacks() string {
	var out []string
	for _, g := range goroutineStacks() {
		if isConnGoroutine(g) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// isConnGoroutine reports whether a goroutine's stack has one of
// connGoroutineMarks.
func isConnGoroutine(stack string) bool {
	for _, m := range connGoroutineMarks {
		if strings.Contains(stack, m) {
			return true
		}
	}
	return false
}

// goroutineStacks returns every goroutine's stack, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Split(string(bytes.TrimSpace(buf)), "\n\n")
}

// waitUntil polls cond every millisecond until it holds or d passes; it
// reports whether cond held.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// startFuzzBroker starts the broker one fuzz target shares across all its
// inputs (one per fuzz process: each worker runs the target's body), with
// a topic for the seeds' produces and fetches; it is closed when the
// target ends.
func startFuzzBroker(f *testing.F) *Broker {
	f.Helper()
	cfg := testConfig(f)
	b, err := New(cfg, testLogger(f))
	if err != nil {
		f.Fatalf("start broker: %v", err)
	}
	f.Cleanup(func() {
		if err := b.Close(); err != nil {
			f.Errorf("close broker: %v", err)
		}
	})
	waitServing(f, b)
	createLocalTopic(f, b, fuzzTopic, 2)
	return b
}

// fuzzTopic is the topic the seeds produce to and fetch from.
const fuzzTopic = "fuzz"

// requestSeed is one FuzzRequest input.
type requestSeed struct {
	key, version int16
	body         []byte
}

// requestSeeds returns FuzzRequest's seeds: for every registered API and
// every version it supports, the request with kmsg's defaults (so an API
// registered later is seeded without a change here); requests that reach
// deep into the handlers (a produce with a real record batch, a fetch, a
// topic creation, controller requests carrying b's real broker and
// controller epochs); and for each of those a truncated and a corrupted
// copy.
func requestSeeds(tb testing.TB, b *Broker) []requestSeed {
	var seeds []requestSeed
	for _, key := range supportedKeys() {
		api := apis[key]
		for v := api.minVersion; v <= api.maxVersion; v++ {
			kreq := kmsg.RequestForKey(key)
			kreq.SetVersion(v)
			seeds = append(seeds, requestSeed{key: key, version: v, body: kreq.AppendTo(nil)})
		}
	}
	var deep []requestSeed
	for _, kreq := range deepRequests(tb, b) {
		api := apis[kreq.Key()]
		v := min(max(kreq.GetVersion(), api.minVersion), api.maxVersion)
		kreq.SetVersion(v)
		deep = append(deep, requestSeed{key: kreq.Key(), version: v, body: kreq.AppendTo(nil)})
	}
	for _, s := range deep {
		truncated := s.body[:len(s.body)/2]
		corrupted := bytes.Clone(s.body)
		if len(corrupted) > 0 {
			corrupted[len(corrupted)/3] ^= 0xff
		}
		seeds = append(seeds, s,
			requestSeed{key: s.key, version: s.version, body: truncated},
			requestSeed{key: s.key, version: s.version, body: corrupted})
	}
	seeds = append(seeds, hostileLimitSeeds(tb)...)
	seeds = append(seeds, hostileProducerIDSeeds(tb)...)
	seeds = append(seeds, hostileProduceSeeds(tb)...)
	return seeds
}

// deepRequests returns valid requests that get past the handlers' first
// checks on b, each with its version set (clamped to the registered
// range by the caller).
func deepRequests(tb testing.TB, b *Broker) []kmsg.Request {
	return append(clientRequests(), controllerRequests(tb, b)...)
}

// clientRequests returns valid client requests for the fuzz broker's
// topics, each with its version set.
func clientRequests() []kmsg.Request {
	batch := kafkatest.FuzzBatch([]byte("seed-one"), []byte("seed-two"))
	var out []kmsg.Request

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(fuzzTopic)
	meta.Topics = append(meta.Topics, mt)
	allMeta := kmsg.NewPtrMetadataRequest()
	allMeta.SetVersion(4)
	out = append(out, meta, allMeta)

	for _, acks := range []int16{1, -1, 0} {
		prod := kmsg.NewPtrProduceRequest()
		prod.SetVersion(8)
		prod.Acks, prod.TimeoutMillis = acks, 1000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = fuzzTopic
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = 0, batch
		pt.Partitions = append(pt.Partitions, pp)
		prod.Topics = append(prod.Topics, pt)
		out = append(out, prod)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxWaitMillis, fetch.MinBytes = 100, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = fuzzTopic
	for p := int32(0); p < 2; p++ {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	// longPoll waits a minute for bytes that never come (partition 1
	// is empty), so the harness's rule for requests that legitimately wait is
	// exercised by every seed run.
	longPoll := kmsg.NewPtrFetchRequest()
	longPoll.SetVersion(11)
	longPoll.MaxWaitMillis, longPoll.MinBytes = 60000, 1
	lpt := kmsg.NewFetchRequestTopic()
	lpt.Topic = fuzzTopic
	lpp := kmsg.NewFetchRequestTopicPartition()
	lpp.Partition, lpp.PartitionMaxBytes = 1, 1<<20
	lpt.Partitions = append(lpt.Partitions, lpp)
	longPoll.Topics = append(longPoll.Topics, lpt)
	out = append(out, fetch, longPoll)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(4)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = fuzzTopic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	out = append(out, lo)

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.SetVersion(3)
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = fuzzTopic
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch, op.LeaderEpoch = -1, 0
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	out = append(out, oe)

	for _, validateOnly := range []bool{true, false} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.SetVersion(7)
		ct.TimeoutMillis, ct.ValidateOnly = 1000, validateOnly
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "fuzz-created", 1, 1
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("60000")
		t.Configs = append(t.Configs, c)
		ct.Topics = append(ct.Topics, t)
		out = append(out, ct)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 1000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "fuzz-created", 2
	cp.Topics = append(cp.Topics, cpt)
	out = append(out, cp)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dt.TimeoutMillis = 1000
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("fuzz-created")
	dt.Topics = append(dt.Topics, dtt)
	dt5 := kmsg.NewPtrDeleteTopicsRequest()
	dt5.SetVersion(5)
	dt5.TimeoutMillis, dt5.TopicNames = 1000, []string{"fuzz-missing"}
	out = append(out, dt, dt5)

	// DeleteRecords to offset 0 moves nothing and one far above the high
	// watermark is refused, so the seeds leave the fuzz topic's records
	// readable for the others.
	for _, offset := range []int64{0, 1 << 40} {
		dr := kmsg.NewPtrDeleteRecordsRequest()
		dr.SetVersion(2)
		dr.TimeoutMillis = 1000
		drt := kmsg.NewDeleteRecordsRequestTopic()
		drt.Topic = fuzzTopic
		drp := kmsg.NewDeleteRecordsRequestTopicPartition()
		drp.Offset = offset
		drt.Partitions = append(drt.Partitions, drp)
		dr.Topics = append(dr.Topics, drt)
		out = append(out, dr)
	}
	allDirs := kmsg.NewPtrDescribeLogDirsRequest()
	allDirs.SetVersion(4)
	someDirs := kmsg.NewPtrDescribeLogDirsRequest()
	someDirs.SetVersion(1)
	sdt := kmsg.NewDescribeLogDirsRequestTopic()
	sdt.Topic, sdt.Partitions = fuzzTopic, []int32{0, 1, 7}
	someDirs.Topics = append(someDirs.Topics, sdt)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = fuzzTopic, []int32{0, 1, 7}
	dp.Topics = append(dp.Topics, dpt)
	out = append(out, allDirs, someDirs, dp)

	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	el.TimeoutMillis = 1000
	elt := kmsg.NewElectLeadersRequestTopic()
	elt.Topic, elt.Partitions = fuzzTopic, []int32{0, 1}
	el.Topics = append(el.Topics, elt)
	out = append(out, el)

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(4)
	ip.TransactionTimeoutMillis = 60000
	out = append(out, ip)

	out = append(out, hostileRequests()...)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName = kmsg.ConfigResourceTypeTopic, fuzzTopic
	dc.Resources = append(dc.Resources, dcr)
	out = append(out, dc)
	return out
}

// controllerRequests returns controller-to-broker requests that carry
// b's real controller and broker epochs, so that they are applied: a
// LeaderAndIsr making b lead a partition the controller never created, an
// UpdateMetadata naming it, a StopReplica deleting it, a
// ControlledShutdown and an AlterPartition for an unknown broker.
func controllerRequests(tb testing.TB, b *Broker) []kmsg.Request {
	ctrl := b.member.Controller()
	if ctrl == nil {
		tb.Fatalf("fuzz broker %d is not the controller", b.cfg.BrokerID)
	}
	controllerEpoch, brokerEpoch := int32(ctrl.Epoch()), b.member.CurrentEpoch()
	self := b.cfg.BrokerID
	const topic = "fuzz-replica"
	topicID := [16]byte{0xf0, 0x22}

	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.SetVersion(leaderAndIsrVersion)
	lai.ControllerID, lai.ControllerEpoch, lai.BrokerEpoch = self, controllerEpoch, brokerEpoch
	ts := kmsg.NewLeaderAndISRRequestTopicState()
	ts.Topic, ts.TopicID = topic, topicID
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Leader, ps.LeaderEpoch, ps.ControllerEpoch = self, 1, controllerEpoch
	ps.ISR, ps.Replicas, ps.IsNew = []int32{self}, []int32{self}, true
	ts.PartitionStates = append(ts.PartitionStates, ps)
	lai.TopicStates = append(lai.TopicStates, ts)
	ll := kmsg.NewLeaderAndISRRequestLiveLeader()
	ll.BrokerID, ll.Host, ll.Port = self, b.self().Host, b.self().Port
	lai.LiveLeaders = append(lai.LiveLeaders, ll)

	um := kmsg.NewPtrUpdateMetadataRequest()
	um.SetVersion(updateMetadataVersion)
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = self, controllerEpoch, brokerEpoch
	lb := kmsg.NewUpdateMetadataRequestLiveBroker()
	lb.ID = self
	ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
	ep.Host, ep.Port, ep.ListenerName = b.self().Host, b.self().Port, "PLAINTEXT"
	lb.Endpoints = append(lb.Endpoints, ep)
	um.LiveBrokers = append(um.LiveBrokers, lb)
	uts := kmsg.NewUpdateMetadataRequestTopicState()
	uts.Topic, uts.TopicID = topic, topicID
	ups := kmsg.NewUpdateMetadataRequestTopicPartition()
	ups.Leader, ups.LeaderEpoch, ups.ControllerEpoch = self, 1, controllerEpoch
	ups.ISR, ups.Replicas = []int32{self}, []int32{self}
	uts.PartitionStates = append(uts.PartitionStates, ups)
	um.TopicStates = append(um.TopicStates, uts)

	sr := kmsg.NewPtrStopReplicaRequest()
	sr.SetVersion(stopReplicaVersion)
	sr.ControllerID, sr.ControllerEpoch, sr.BrokerEpoch = self, controllerEpoch, brokerEpoch
	st := kmsg.NewStopReplicaRequestTopic()
	st.Topic = topic
	sps := kmsg.NewStopReplicaRequestTopicPartitionState()
	sps.LeaderEpoch, sps.Delete = -1, true
	st.PartitionStates = append(st.PartitionStates, sps)
	sr.Topics = append(sr.Topics, st)

	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.SetVersion(3)
	cs.BrokerID, cs.BrokerEpoch = self+100, 1

	ap := kmsg.NewPtrAlterPartitionRequest()
	ap.SetVersion(replica.AlterPartitionVersion)
	ap.BrokerID, ap.BrokerEpoch = self+100, 1
	apt := kmsg.NewAlterPartitionRequestTopic()
	apt.Topic = fuzzTopic
	app := kmsg.NewAlterPartitionRequestTopicPartition()
	app.LeaderEpoch, app.NewISR = 0, []int32{self}
	apt.Partitions = append(apt.Partitions, app)
	ap.Topics = append(ap.Topics, apt)

	return []kmsg.Request{lai, um, sr, cs, ap}
}

// TestWriteFuzzCorpus writes the seed corpora under testdata/fuzz (the
// client requests of FuzzRequest, the responses of FuzzPeerResponse;
// replica's TestWriteFuzzCorpus writes FuzzFollowerResponse's) when
// TRIPOD_WRITE_FUZZ_CORPUS is set; `go test` then runs every fuzz target
// over them. Regenerate after changing the seeds:
//
//	TRIPOD_WRITE_FUZZ_CORPUS=1 go test -run TestWriteFuzzCorpus ./broker/
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("TRIPOD_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set TRIPOD_WRITE_FUZZ_CORPUS to write testdata/fuzz")
	}
	for _, kreq := range clientRequests() {
		key, version := registeredKeyVersion(kreq.Key(), kreq.GetVersion())
		kreq.SetVersion(version)
		kafkatest.WriteCorpusEntry(t, "FuzzRequest", key, version, kreq.AppendTo(nil))
	}
	for _, s := range peerResponseSeeds() {
		kafkatest.WriteCorpusEntry(t, "FuzzPeerResponse", s.Key, s.Version, s.Body)
	}
}

// hostileRequests returns, small enough for a seed corpus, the requests
// of the request-path attacks (hostile_conn_test.go): a Metadata request
// of empty topic names (decoded into fifty bytes a name), one repeating a
// topic, one carrying many unknown tagged fields, and a Fetch naming a
// partition ten times with 1 GiB limits.
func hostileRequests() []kmsg.Request {
	var out []kmsg.Request
	flood := kmsg.NewPtrMetadataRequest()
	flood.SetVersion(1)
	for range 4096 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("")
		flood.Topics = append(flood.Topics, mt)
	}
	repeat := kmsg.NewPtrMetadataRequest()
	repeat.SetVersion(9)
	for range 1024 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(fuzzTopic)
		repeat.Topics = append(repeat.Topics, mt)
	}
	tags := kmsg.NewPtrMetadataRequest()
	tags.SetVersion(9)
	for i := range uint32(2048) {
		tags.UnknownTags.Set(100+i, nil)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	fetch.MaxBytes = 1 << 30
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = fuzzTopic
	for range 10 {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 30
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	return append(out, flood, repeat, tags, fetch)
}
