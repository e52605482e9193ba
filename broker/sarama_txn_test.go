package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
)

// saramaTxnConfig is a configuration of sarama's transactional producer
// with the transactional id id, as sarama requires it: idempotent, acks
// all, one request in flight per connection. It names the newest Kafka
// version sarama knows; sarama clamps each request to tripod's ranges.
func saramaTxnConfig(id string) *sarama.Config {
	cfg := saramaConfig(sarama.NewBalanceStrategyRange())
	cfg.Version = sarama.MaxVersion
	cfg.ClientID = "tripod-sarama-txn-test"
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = id
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	cfg.Producer.Transaction.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Net.MaxOpenRequests = 1
	return cfg
}

// newSaramaTxnProducer returns a transactional sync producer of b with
// the transactional id id, closed when the test ends.
func newSaramaTxnProducer(t *testing.T, b *Broker, id string) sarama.SyncProducer {
	t.Helper()
	p, err := sarama.NewSyncProducer([]string{b.Addr().String()}, saramaTxnConfig(id))
	if err != nil {
		t.Fatalf("sarama transactional producer %s: %v", id, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// saramaSendAll writes one record per value to topic in p's open
// transaction; SendMessages returns once every record is written.
func saramaSendAll(p sarama.SyncProducer, topic string, values ...string) error {
	msgs := make([]*sarama.ProducerMessage, 0, len(values))
	for _, v := range values {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)})
	}
	return p.SendMessages(msgs)
}

// valueSeries is prefix-0 .. prefix-(n-1).
func valueSeries(prefix string, n int) []string {
	v := make([]string, 0, n)
	for i := range n {
		v = append(v, fmt.Sprintf("%s-%d", prefix, i))
	}
	return v
}

// saramaReadToEnds reads each of topic's partitions from its start with a
// sarama consumer at isolation up to its "end" record (endMarkers) and
// returns every other value read, sorted.
func saramaReadToEnds(t *testing.T, ctx context.Context, b *Broker, topic string, partitions int32, isolation sarama.IsolationLevel) []string {
	t.Helper()
	cfg := saramaConfig(sarama.NewBalanceStrategyRange())
	cfg.Consumer.IsolationLevel = isolation
	c, err := sarama.NewConsumer([]string{b.Addr().String()}, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	var values []string
	for p := range partitions {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume %s-%d: %v", topic, p, err)
		}
	read:
		for {
			select {
			case m := <-pc.Messages():
				if string(m.Value) == "end" {
					break read
				}
				values = append(values, string(m.Value))
			case err := <-pc.Errors():
				t.Fatalf("consume %s-%d: %v", topic, p, err)
			case <-ctx.Done():
				t.Fatalf("consume %s-%d: no end record: %v", topic, p, ctx.Err())
			}
		}
		pc.Close()
	}
	slices.Sort(values)
	return values
}

// TestSaramaTransactions runs sarama's transactional producer against a
// broker: a committed transaction; an aborted one whose records were
// written before the abort; a producer fenced by a new instance with its
// transactional id (the coordinator aborts the open transaction, and the
// old instance's commit fails with PRODUCER_FENCED, fatally), then the new
// instance's commit. A read_committed sarama consumer reads exactly the
// committed records, a read_uncommitted one every record written.
func TestSaramaTransactions(t *testing.T) {
	cfg := txnTestConfig(t)
	b := startBroker(t, cfg)
	const topic = "sarama-txn"
	createTopic(t, b, topic, 3, nil)
	ctx := testContext(t, 2*time.Minute)

	p := newSaramaTxnProducer(t, b, "sarama-txn-1")
	if !p.IsTransactional() {
		t.Fatal("sarama producer is not transactional")
	}
	if err := p.BeginTxn(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := saramaSendAll(p, topic, valueSeries("committed", 10)...); err != nil {
		t.Fatalf("produce in the transaction: %v", err)
	}
	if err := p.CommitTxn(); err != nil {
		t.Fatalf("commit: %v", err)
	}

	if err := p.BeginTxn(); err != nil {
		t.Fatalf("begin the second transaction: %v", err)
	}
	if err := saramaSendAll(p, topic, valueSeries("aborted", 5)...); err != nil {
		t.Fatalf("produce in the second transaction: %v", err)
	}
	if err := p.AbortTxn(); err != nil {
		t.Fatalf("abort: %v", err)
	}

	// The zombie: its open transaction holds written records when a new
	// instance with the same transactional id starts.
	if err := p.BeginTxn(); err != nil {
		t.Fatalf("begin the third transaction: %v", err)
	}
	if err := saramaSendAll(p, topic, valueSeries("zombie", 3)...); err != nil {
		t.Fatalf("produce in the third transaction: %v", err)
	}
	replacement := newSaramaTxnProducer(t, b, "sarama-txn-1")
	err := p.CommitTxn()
	if !errors.Is(err, sarama.ErrProducerFenced) {
		t.Fatalf("the fenced producer's commit: %v, want %v", err, sarama.ErrProducerFenced)
	}
	if p.TxnStatus()&sarama.ProducerTxnFlagFatalError == 0 {
		t.Errorf("the fenced producer's state is %s, want a fatal error", p.TxnStatus())
	}
	if err := replacement.BeginTxn(); err != nil {
		t.Fatalf("replacement begin: %v", err)
	}
	if err := saramaSendAll(replacement, topic, valueSeries("replacement", 4)...); err != nil {
		t.Fatalf("replacement produce: %v", err)
	}
	if err := replacement.CommitTxn(); err != nil {
		t.Fatalf("replacement commit: %v", err)
	}

	endMarkers(t, ctx, b, topic, 3)
	committed := slices.Concat(valueSeries("committed", 10), valueSeries("replacement", 4))
	slices.Sort(committed)
	if got := saramaReadToEnds(t, ctx, b, topic, 3, sarama.ReadCommitted); !slices.Equal(got, committed) {
		t.Errorf("read_committed consumer read %v, want exactly the committed %v", got, committed)
	}
	all := slices.Concat(committed, valueSeries("aborted", 5), valueSeries("zombie", 3))
	slices.Sort(all)
	if got := saramaReadToEnds(t, ctx, b, topic, 3, sarama.ReadUncommitted); !slices.Equal(got, all) {
		t.Errorf("read_uncommitted consumer read %v, want every record written %v", got, all)
	}
}

// saramaETL is a sarama consumer group handler that transforms each
// record of its claims into out in a transaction of its own, committing
// the record's offset in the same transaction with the member's group
// metadata (KIP-447). Every abortEvery-th transaction is aborted after
// its output was written, and the member then leaves the session so that
// the record is read again from the group's committed offset.
type saramaETL struct {
	p          sarama.SyncProducer
	group, out string
	abortEvery int
	total      int
	cancel     context.CancelFunc

	mu        sync.Mutex // one transaction at a time across claims
	txns      int
	committed map[string]bool
	aborted   int
	err       error
}

func (h *saramaETL) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaETL) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaETL) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-sess.Context().Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if leave, err := h.transform(sess, m); err != nil || leave {
				return err
			}
		}
	}
}

// transform runs one transaction for m; leave is whether the session
// should end, after an abort on purpose.
func (h *saramaETL) transform(sess sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) (leave bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || sess.Context().Err() != nil {
		return true, nil
	}
	fail := func(step string, err error) (bool, error) {
		h.err = fmt.Errorf("%s for %s-%d@%d: %w", step, m.Topic, m.Partition, m.Offset, err)
		h.cancel()
		return true, h.err
	}
	if err := h.p.BeginTxn(); err != nil {
		return fail("begin", err)
	}
	h.txns++
	v := "out-" + string(m.Value)
	if err := saramaSendAll(h.p, h.out, v); err != nil {
		return fail("produce", err)
	}
	meta := sarama.NewConsumerGroupMetadataFromSession(sess, h.group, nil)
	if err := h.p.AddMessageToTxnWithGroupMetadata(m, meta, nil); err != nil {
		return fail("add offsets", err)
	}
	if h.txns%h.abortEvery == 0 {
		if err := h.p.AbortTxn(); err != nil {
			return fail("abort", err)
		}
		h.aborted++
		// The handler returning ends the session; the next one
		// reads m again from the group's committed offset.
		return true, nil
	}
	if err := h.p.CommitTxn(); err != nil {
		return fail("commit", err)
	}
	if h.committed[v] {
		return fail("commit", fmt.Errorf("%s committed twice", v))
	}
	h.committed[v] = true
	if len(h.committed) == h.total {
		h.cancel()
	}
	return false, nil
}

// TestSaramaConsumeTransformProduce runs a consume-transform-produce loop
// with sarama: a consumer group member reading read_committed, and a
// transactional producer writing each input record's transform and
// committing its offset with AddMessageToTxnWithGroupMetadata, so through
// AddOffsetsToTxn and TxnOffsetCommit with the member's generation.
// Some transactions are aborted after their output was written; their
// input is read again from the group's committed offsets. The output, read
// read_committed, holds each input's transform exactly once; the group's
// committed offsets are the input's ends.
func TestSaramaConsumeTransformProduce(t *testing.T) {
	cfg := txnTestConfig(t)
	b := startBroker(t, cfg)
	const in, out, group, records = "sarama-etl-in", "sarama-etl-out", "sarama-etl", 40
	createTopic(t, b, in, 2, nil)
	createTopic(t, b, out, 2, nil)
	produceNumbered(t, newClient(t, b), in, 0, records)
	ctx := testContext(t, 3*time.Minute)

	gcfg := saramaConfig(sarama.NewBalanceStrategyRange())
	gcfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cg, err := sarama.NewConsumerGroup([]string{b.Addr().String()}, group, gcfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	defer cg.Close()
	go func() {
		for err := range cg.Errors() {
			t.Logf("sarama group error: %v", err)
		}
	}()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &saramaETL{
		p:     newSaramaTxnProducer(t, b, "sarama-etl-1"),
		group: group, out: out, abortEvery: 7, total: records,
		cancel: cancel, committed: map[string]bool{},
	}
	for runCtx.Err() == nil {
		err := cg.Consume(runCtx, []string{in}, h)
		if err != nil && !errors.Is(err, sarama.ErrSessionConsumeClaimExited) && runCtx.Err() == nil {
			t.Fatalf("consume: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%d of %d records transformed in committed transactions: %v", len(h.committed), records, ctx.Err())
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	if h.aborted == 0 {
		t.Fatalf("no transaction was aborted in %d: the test proves nothing about aborts", h.txns)
	}
	t.Logf("%d transactions, %d aborted", h.txns, h.aborted)

	offsets, err := kadm.NewClient(newClient(t, b)).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch the group's offsets: %v", err)
	}
	ends, err := kadm.NewClient(newClient(t, b)).ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatalf("list the input's ends: %v", err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offsets.Lookup(in, e.Partition)
		if !ok || o.At != e.Offset {
			t.Errorf("group %s committed %v for %s-%d, want its end %d", group, o.At, in, e.Partition, e.Offset)
		}
	})

	endMarkers(t, ctx, b, out, 2)
	var want []string
	for i := range records {
		want = append(want, "out-"+strconv.Itoa(i))
	}
	slices.Sort(want)
	if got := saramaReadToEnds(t, ctx, b, out, 2, sarama.ReadCommitted); !slices.Equal(got, want) {
		t.Errorf("read_committed output %v, want each transform once %v", got, want)
	}
	if got := saramaReadToEnds(t, ctx, b, out, 2, sarama.ReadUncommitted); len(got) != records+h.aborted {
		t.Errorf("read_uncommitted output holds %d records, want %d committed and %d aborted", len(got), records, h.aborted)
	}
}
