package txncoord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/txn"
)

// The tests below run the coordinator over in-memory stand-ins of its
// Deps: a log that stores every record at once, a cluster of fixed
// leaders and leaders whose WriteTxnMarkers answers each test scripts,
// so that the rounds of markers (retries, drops, abandons) and the
// completion are seen without a broker. The broker's tests run it on
// real brokers.

// memLog is a StateLog in memory: appends are replicated at once.
type memLog struct {
	mu      sync.Mutex
	records [][2][]byte
}

func (l *memLog) Name() string { return "__transaction_state-0" }

func (l *memLog) Replay(fn func(key, value []byte)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		fn(r[0], r[1])
	}
	return nil
}

func (l *memLog) Append(key, value []byte, _ time.Time) func(<-chan struct{}) int16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, [2][]byte{key, value})
	return func(<-chan struct{}) int16 { return 0 }
}

// last is the state of the latest record stored.
func (l *memLog) last(t *testing.T) *txn.Metadata {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records[len(l.records)-1]
	id, err := txn.DecodeKey(r[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := txn.Restore(id, r[1])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// leaders is a Cluster of one __transaction_state partition and fixed
// leaders (absent: a deleted topic) and Markers answering through answer.
type leaders struct {
	leader map[txn.TopicPartition]int32
	mu     sync.Mutex
	// answer gives each request's response, or an error.
	answer func(broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
	sent   []sentMarkers
}

type sentMarkers struct {
	broker int32
	tps    []txn.TopicPartition
	commit bool
}

func (c *leaders) StatePartitions() int { return 1 }

func (c *leaders) LeaderOf(topic string, partition int32) Leader {
	b, ok := c.leader[txn.TopicPartition{Topic: topic, Partition: partition}]
	return Leader{Known: ok, Broker: b}
}

func (c *leaders) WriteTxnMarkers(_ context.Context, broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	c.mu.Lock()
	var tps []txn.TopicPartition
	for _, t := range req.Markers[0].Topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	c.sent = append(c.sent, sentMarkers{broker, tps, req.Markers[0].Committed})
	c.mu.Unlock()
	return c.answer(broker, req)
}

func (c *leaders) requests() []sentMarkers {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sentMarkers(nil), c.sent...)
}

// answerAll answers every partition of req with code.
func answerAll(req *kmsg.WriteTxnMarkersRequest, code int16) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	for _, mk := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		for _, t := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

var (
	a0 = txn.TopicPartition{Topic: "a", Partition: 0}
	b0 = txn.TopicPartition{Topic: "b", Partition: 0}
)

// startCoordinator runs a coordinator leading partition 0 of log, closed
// when the test ends, once it has loaded.
func startCoordinator(t *testing.T, log *memLog, cl *leaders) *Coordinator {
	t.Helper()
	c := New(Config{
		Limits:        txn.Limits{MaxTimeoutMs: 60000, ExpirationMs: 3600000},
		NumPartitions: 1, AbortTimedOutInterval: time.Hour, RemoveExpiredInterval: time.Hour,
		StoreTimeout: time.Second, MarkerTimeout: time.Second,
	}, Deps{Cluster: cl, Markers: cl})
	c.Start()
	t.Cleanup(c.Close)
	c.Lead(0, 7, log)
	waitUntil(t, "the load", func() bool { return c.Describe("x").Code != kerr.CoordinatorLoadInProgress.Code })
	return c
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openTxn initializes id and opens a transaction on tps.
func openTxn(t *testing.T, c *Coordinator, id string, tps ...txn.TopicPartition) InitResult {
	t.Helper()
	res := c.InitProducerID(context.Background(), InitRequest{TransactionalID: id, TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1,
		NewProducerID: func(context.Context) (int64, error) { return 1000, nil }})
	if res.Code != 0 {
		t.Fatalf("InitProducerID: %v", kerr.ErrorForCode(res.Code))
	}
	if code := c.AddPartitions(id, res.ProducerID, res.ProducerEpoch, tps); code != 0 {
		t.Fatalf("AddPartitions: %v", kerr.ErrorForCode(code))
	}
	return res
}

// TestMarkersRetriedUntilWritten: a commit on two leaders, one of which
// first answers NOT_LEADER_OR_FOLLOWER and then cannot be reached, is
// retried on that leader only until its marker is written, and then
// stored CompleteCommit with the coordinator epoch of the partition's
// leader epoch on every request.
func TestMarkersRetriedUntilWritten(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	cl := &leaders{leader: map[txn.TopicPartition]int32{a0: 1, b0: 2}}
	cl.answer = func(broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		if req.Markers[0].CoordinatorEpoch != 7 || !req.Markers[0].Committed {
			t.Errorf("marker: got coordinator epoch %d committed %v, want 7 and true", req.Markers[0].CoordinatorEpoch, req.Markers[0].Committed)
		}
		if broker == 2 {
			return answerAll(req, 0), nil
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 1:
			return answerAll(req, kerr.NotLeaderForPartition.Code), nil
		case 2:
			return nil, errors.New("connection refused")
		}
		return answerAll(req, 0), nil
	}
	log := &memLog{}
	c := startCoordinator(t, log, cl)
	res := openTxn(t, c, "x", a0, b0)
	if code, _, _ := c.EndTxn("x", res.ProducerID, res.ProducerEpoch, true, time.Now()); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, "CompleteCommit", func() bool { return c.Describe("x").State == txn.CompleteCommit })
	if m := log.last(t); m.State != txn.CompleteCommit || len(m.Partitions) != 0 {
		t.Errorf("last record: got %v with %v, want CompleteCommit with no partitions", m.State, m.Partitions)
	}
	toB := 0
	for _, s := range cl.requests() {
		if s.broker == 2 {
			toB++
		} else if len(s.tps) != 1 || s.tps[0] != a0 {
			t.Errorf("request to broker 1: got %v, want a-0 only", s.tps)
		}
	}
	if toB != 1 || calls != 3 {
		t.Errorf("got %d requests to broker 2 and %d to broker 1, want 1 and 3", toB, calls)
	}
}

// TestMarkersAbandonedOrDropped: a leader answering INVALID_PRODUCER_EPOCH
// means a newer producer or coordinator took over: the coordinator stops
// sending and the transaction stays PrepareAbort; a partition whose
// topic is gone, or whose leader answers UNSUPPORTED_FOR_MESSAGE_FORMAT,
// owes no marker.
func TestMarkersAbandonedOrDropped(t *testing.T) {
	cl := &leaders{leader: map[txn.TopicPartition]int32{a0: 1, b0: 2}}
	cl.answer = func(broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		if broker == 1 {
			return answerAll(req, kerr.InvalidProducerEpoch.Code), nil
		}
		return answerAll(req, kerr.UnsupportedForMessageFormat.Code), nil
	}
	c := startCoordinator(t, &memLog{}, cl)
	res := openTxn(t, c, "x", a0, b0)
	if code, _, _ := c.EndTxn("x", res.ProducerID, res.ProducerEpoch, false, time.Now()); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, "the markers to be sent", func() bool { return len(cl.requests()) == 2 })
	time.Sleep(3 * markerBackoffMin)
	if n := len(cl.requests()); n != 2 {
		t.Errorf("after INVALID_PRODUCER_EPOCH: got %d requests, want 2 (no retry)", n)
	}
	if d := c.Describe("x"); d.State != txn.PrepareAbort || len(d.Partitions) != 1 || d.Partitions[0] != a0 {
		t.Errorf("after the abandon: got %v with %v, want PrepareAbort with a-0 left", d.State, d.Partitions)
	}

	// A topic that is gone owes nothing: the abort completes.
	cl2 := &leaders{leader: map[txn.TopicPartition]int32{}}
	cl2.answer = func(int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		t.Error("a marker was sent for a deleted topic")
		return nil, errors.New("unexpected")
	}
	c2 := startCoordinator(t, &memLog{}, cl2)
	res = openTxn(t, c2, "y", a0)
	if code, _, _ := c2.EndTxn("y", res.ProducerID, res.ProducerEpoch, false, time.Now()); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, "CompleteAbort", func() bool { return c2.Describe("y").State == txn.CompleteAbort })
}

// TestLoadResumesEndingTransaction: a coordinator that loads a partition
// holding a PrepareCommit sends its markers and completes it; Close
// returns while a leader never answers, ending the writer.
func TestLoadResumesEndingTransaction(t *testing.T) {
	log := &memLog{}
	m := txn.New("x", 1000, 60000, 1)
	tr, _, err := m.PrepareIncrementEpoch(60000, -1, false, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Complete(tr); err != nil {
		t.Fatal(err)
	}
	tr, _ = m.PrepareAddPartitions([]txn.TopicPartition{a0}, 3)
	_ = m.Complete(tr)
	tr, _ = m.PrepareAbortOrCommit(txn.PrepareCommit, 4)
	log.Append(txn.RecordKey("x"), txn.RecordValue(tr), time.Time{})

	cl := &leaders{leader: map[txn.TopicPartition]int32{a0: 1}}
	cl.answer = func(_ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		return answerAll(req, 0), nil
	}
	c := startCoordinator(t, log, cl)
	waitUntil(t, "CompleteCommit", func() bool { return c.Describe("x").State == txn.CompleteCommit })

	stuck := &leaders{leader: map[txn.TopicPartition]int32{a0: 1}}
	stuck.answer = func(int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		return nil, errors.New("unreachable")
	}
	c2 := startCoordinator(t, &memLog{}, stuck)
	res := openTxn(t, c2, "z", a0)
	if code, _, _ := c2.EndTxn("z", res.ProducerID, res.ProducerEpoch, true, time.Now()); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, "a marker to be sent", func() bool { return len(stuck.requests()) > 0 })
	done := make(chan struct{})
	go func() {
		c2.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a leader never answered")
	}
	if d := c2.Describe("z"); d.Code != kerr.NotCoordinator.Code {
		t.Errorf("after Close: got %v, want NOT_COORDINATOR", kerr.ErrorForCode(d.Code))
	}
}

// TestNextTransactionHeldUntilTheLastCompletes: a producer that begins
// its next transaction while the last one's markers are being written is
// not answered CONCURRENT_TRANSACTIONS: its AddPartitionsToTxn is held
// until the last transaction completes, then succeeds.
func TestNextTransactionHeldUntilTheLastCompletes(t *testing.T) {
	release := make(chan struct{})
	cl := &leaders{leader: map[txn.TopicPartition]int32{a0: 1}}
	cl.answer = func(_ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		<-release
		return answerAll(req, 0), nil
	}
	c := startCoordinator(t, &memLog{}, cl)
	res := openTxn(t, c, "x", a0)
	if code, _, _ := c.EndTxn("x", res.ProducerID, res.ProducerEpoch, true, time.Now()); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	if st := c.Describe("x").State; st != txn.PrepareCommit {
		t.Fatalf("state with the markers unanswered: %v, want PrepareCommit", st)
	}
	got := make(chan int16, 1)
	go func() { got <- c.AddPartitions("x", res.ProducerID, res.ProducerEpoch, []txn.TopicPartition{b0}) }()
	waitUntil(t, "the next AddPartitionsToTxn to be held", func() bool { return c.held.Load() == 1 })
	close(release)
	if code := <-got; code != 0 {
		t.Fatalf("the held AddPartitionsToTxn: %v, want no error once the last transaction completed", kerr.ErrorForCode(code))
	}
	if d := c.Describe("x"); d.State != txn.Ongoing || len(d.Partitions) != 1 {
		t.Errorf("after the held add: %v with %v, want Ongoing with b-0", d.State, d.Partitions)
	}
}

// TestLateEndTxnIsNotApplied: an EndTxn(abort) read off its connection
// before the producer's next transaction began, and handled only once
// that transaction is open (its client gave up on it and retried, and
// the retry ended the first transaction), is refused with
// INVALID_TXN_STATE and writes no marker: the open transaction commits
// whole.
func TestLateEndTxnIsNotApplied(t *testing.T) {
	cl := &leaders{leader: map[txn.TopicPartition]int32{a0: 1, b0: 1}}
	cl.answer = func(_ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
		return answerAll(req, 0), nil
	}
	c := startCoordinator(t, &memLog{}, cl)
	res := openTxn(t, c, "x", a0)
	late := time.Now()
	if code, _, _ := c.EndTxn("x", res.ProducerID, res.ProducerEpoch, false, time.Now()); code != 0 {
		t.Fatalf("EndTxn(abort), the retry: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, "CompleteAbort", func() bool { return c.Describe("x").State == txn.CompleteAbort })
	if code := c.AddPartitions("x", res.ProducerID, res.ProducerEpoch, []txn.TopicPartition{b0}); code != 0 {
		t.Fatalf("AddPartitions of the next transaction: %v", kerr.ErrorForCode(code))
	}
	sent := len(cl.requests())

	if code, _, _ := c.EndTxn("x", res.ProducerID, res.ProducerEpoch, false, late); code != kerr.InvalidTxnState.Code {
		t.Fatalf("the late EndTxn(abort): got %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if d := c.Describe("x"); d.State != txn.Ongoing || len(d.Partitions) != 1 || d.Partitions[0] != b0 {
		t.Fatalf("after the late EndTxn: %v with %v, want Ongoing with b-0", d.State, d.Partitions)
	}
	if code, _, _ := c.EndTxn("x", res.ProducerID, res.ProducerEpoch, true, time.Now()); code != 0 {
		t.Fatalf("EndTxn(commit) of the open transaction: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, "CompleteCommit", func() bool { return c.Describe("x").State == txn.CompleteCommit })
	for _, r := range cl.requests()[sent:] {
		if len(r.tps) != 1 || r.tps[0] != b0 || !r.commit {
			t.Errorf("marker after the late EndTxn: %+v, want a COMMIT on b-0 only", r)
		}
	}
}
