package broker

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/internal/kafkatest"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// produceTxn sends one batch of values (acks=all) with transactional id
// txnID: a transactional batch of producer id/epoch from sequence seq, or
// for id -1 a plain one. It returns the base offset and the partition's
// error code.
func produceTxn(t *testing.T, cl *kgo.Client, topic string, txnID *string, id int64, epoch int16, seq int32, values ...string) (int64, int16) {
	t.Helper()
	var raw [][]byte
	for _, v := range values {
		raw = append(raw, []byte(v))
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	req.TransactionID = txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = kafkatest.EncodeTransactionalBatch(time.Now().UnixMilli(), id, epoch, seq, raw...)
	if id < 0 {
		rp.Records = kafkatest.EncodeBatch(time.Now().UnixMilli(), -1, -1, -1, raw...)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := issue[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0]
	return sp.BaseOffset, sp.ErrorCode
}

// partitionTxnConfig is testConfig without transaction.partition.
// verification.enable: the tests of the partition side write the markers
// of transactions no coordinator holds.
func partitionTxnConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.TransactionPartitionVerification = false
	return cfg
}

// fetchIsolated fetches topic's partition 0 from offset at isolation
// level isolation (1: read_committed), waiting up to wait for a byte.
func fetchIsolated(t *testing.T, cl *kgo.Client, topic string, offset int64, isolation int8, wait time.Duration) kmsg.FetchResponseTopicPartition {
	t.Helper()
	return issue[*kmsg.FetchResponse](t, cl, isolatedFetch(topic, offset, isolation, wait)).Topics[0].Partitions[0]
}

// isolatedFetch is fetchIsolated's request.
func isolatedFetch(topic string, offset int64, isolation int8, wait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = isolation
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset = offset
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// listLatestAt asks for topic's partition 0's latest offset at isolation
// level isolation.
func listLatestAt(t *testing.T, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := issue[*kmsg.ListOffsetsResponse](t, cl, req).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("ListOffsets latest, isolation %d: %v", isolation, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

// writeMarkers sends WriteTxnMarkers and returns each marker's error code
// on each partition, in the request's order.
func writeMarkers(t *testing.T, cl *kgo.Client, markers ...kmsg.WriteTxnMarkersRequestMarker) [][]int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = markers
	// Straight to the broker: the client would route the request by
	// its partitions' leaders, and refuse one it does not know.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("WriteTxnMarkers: %v", err)
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	var out [][]int16
	for _, m := range resp.Markers {
		var codes []int16
		for _, rt := range m.Topics {
			for _, rp := range rt.Partitions {
				codes = append(codes, rp.ErrorCode)
			}
		}
		out = append(out, codes)
	}
	return out
}

// txnMarker is a WriteTxnMarkers marker of producer id at epoch on the
// partitions of topic.
func txnMarker(id int64, epoch int16, commit bool, topic string, partitions ...int32) kmsg.WriteTxnMarkersRequestMarker {
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = id, epoch, commit, 1
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic = topic
	mt.Partitions = partitions
	m.Topics = append(m.Topics, mt)
	return m
}

// TestTransactionsOnAPartition writes two transactions and a plain
// record to a partition, then ends them with WriteTxnMarkers as a
// coordinator would (one aborted, one committed): until the markers, a
// read_committed fetch stops at the first transaction's first record (the
// last stable offset), ListOffsets read_committed answers it and
// DescribeProducers shows the open transactions; a read_committed fetch
// waiting for a byte is woken by the markers; afterwards it reads
// everything with the aborted transaction listed, while read_uncommitted
// reads everything without the list, and franz-go's read_committed
// consumer sees the committed records only. A marker of an older producer
// epoch is INVALID_PRODUCER_EPOCH, one of an older coordinator epoch
// TRANSACTION_COORDINATOR_FENCED, one to a partition the broker does not
// hold UNKNOWN_TOPIC_OR_PARTITION, and a transactional produce without a
// transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func TestTransactionsOnAPartition(t *testing.T) {
	b := startBroker(t, partitionTxnConfig(t))
	const topic = "txns"
	createLocalTopic(t, b, topic, 1)
	ctx := testContext(t, time.Minute)
	waitFor(t, ctx, "the broker to lead the partition", func() bool {
		p, _ := b.replicas.LeaderFor(topic, 0)
		return p != nil
	})
	cl := newClient(t, b)
	idA, epochA := initProducerID(t, b, -1, -1)
	idB, epochB := initProducerID(t, b, -1, -1)
	txnA, txnB := "txn-a", "txn-b"

	if _, code := produceTxn(t, cl, topic, nil, idA, epochA, 0, "no id"); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional produce without a transactional id: got %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	for _, w := range []struct {
		txn   *string
		id    int64
		epoch int16
		seq   int32
		want  int64
		vals  []string
	}{
		{&txnA, idA, epochA, 0, 0, []string{"a1", "a2"}},
		{nil, -1, -1, -1, 2, []string{"plain"}},
		{&txnB, idB, epochB, 0, 3, []string{"b1"}},
	} {
		if base, code := produceTxn(t, cl, topic, w.txn, w.id, w.epoch, w.seq, w.vals...); code != 0 || base != w.want {
			t.Fatalf("produce %v: got base offset %d, %v, want %d", w.vals, base, kerr.ErrorForCode(code), w.want)
		}
	}

	p := fetchIsolated(t, cl, topic, 0, 1, 0)
	if p.ErrorCode != 0 || p.HighWatermark != 4 || p.LastStableOffset != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("read_committed fetch before the markers: got error %v, HW %d, LSO %d, %d bytes, want HW 4, LSO 0, nothing",
			kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, p.LastStableOffset, len(p.RecordBatches))
	}
	if got := listLatestAt(t, cl, topic, 1); got != 0 {
		t.Fatalf("ListOffsets latest read_committed before the markers: got %d, want the LSO 0", got)
	}
	if got := listLatestAt(t, cl, topic, 0); got != 4 {
		t.Fatalf("ListOffsets latest read_uncommitted: got %d, want the HW 4", got)
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dt)
	starts := map[int64]int64{}
	for _, ap := range issue[*kmsg.DescribeProducersResponse](t, cl, dp).Topics[0].Partitions[0].ActiveProducers {
		starts[ap.ProducerID] = ap.CurrentTxnStartOffset
	}
	if starts[idA] != 0 || starts[idB] != 3 {
		t.Fatalf("DescribeProducers' CurrentTxnStartOffset: got %v, want %d at 0 and %d at 3", starts, idA, idB)
	}

	// A read_committed fetch waiting for a byte, woken by the markers.
	type fetched struct {
		resp kmsg.Response
		err  error
		took time.Duration
	}
	waiting := make(chan fetched, 1)
	go func() {
		start := time.Now()
		resp, err := cl.Request(ctx, isolatedFetch(topic, 0, 1, 20*time.Second))
		waiting <- fetched{resp, err, time.Since(start)}
	}()
	waitFor(t, ctx, "the read_committed fetch to wait", func() bool {
		p, _ := b.replicas.LeaderFor(topic, 0)
		return p.WaitingFetches() > 0
	})

	codes := writeMarkers(t, cl, txnMarker(idA, epochA, false, topic, 0), txnMarker(idB, epochB, true, topic, 0), txnMarker(idB, epochB, true, "no-such-topic", 0))
	if want := [][]int16{{0}, {0}, {kerr.UnknownTopicOrPartition.Code}}; !slices.EqualFunc(codes, want, slices.Equal[[]int16]) {
		t.Fatalf("WriteTxnMarkers: got codes %v, want %v", codes, want)
	}
	var woken fetched
	select {
	case woken = <-waiting:
	case <-ctx.Done():
		t.Fatal("the read_committed fetch was not answered")
	}
	if woken.err != nil {
		t.Fatalf("waiting read_committed fetch: %v", woken.err)
	}
	if wp := woken.resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]; woken.took >= 20*time.Second || len(wp.RecordBatches) == 0 {
		t.Fatalf("waiting read_committed fetch: answered after %v with %d bytes, want records before its 20s wait", woken.took, len(wp.RecordBatches))
	}

	p = fetchIsolated(t, cl, topic, 0, 1, 0)
	want := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: idA, FirstOffset: 0}}
	if p.ErrorCode != 0 || p.HighWatermark != 6 || p.LastStableOffset != 6 || !reflect.DeepEqual(p.AbortedTransactions, want) {
		t.Fatalf("read_committed fetch after the markers: got error %v, HW %d, LSO %d, aborted %+v, want HW and LSO 6, aborted %+v",
			kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, p.LastStableOffset, p.AbortedTransactions, want)
	}
	if next, ok := nextOffset(p.RecordBatches); !ok || next != 6 {
		t.Fatalf("read_committed fetch after the markers: read up to %d, want 6", next)
	}
	if got := listLatestAt(t, cl, topic, 1); got != 6 {
		t.Fatalf("ListOffsets latest read_committed after the markers: got %d, want 6", got)
	}
	p = fetchIsolated(t, cl, topic, 0, 0, 0)
	if next, ok := nextOffset(p.RecordBatches); p.ErrorCode != 0 || !ok || next != 6 || p.AbortedTransactions != nil {
		t.Fatalf("read_uncommitted fetch: got error %v, up to %d, aborted %+v, want everything to 6 and no aborted list",
			kerr.ErrorForCode(p.ErrorCode), next, p.AbortedTransactions)
	}
	// franz-go's consumers: read_committed skips the aborted records and
	// the markers, read_uncommitted only the markers.
	for _, tc := range []struct {
		isolation kgo.IsolationLevel
		want      []string
	}{
		{kgo.ReadCommitted(), []string{"plain", "b1"}},
		{kgo.ReadUncommitted(), []string{"a1", "a2", "plain", "b1"}},
	} {
		consumer := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(tc.isolation))
		var got []string
		for len(got) < len(tc.want) {
			fetches := consumer.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consume: got %v, want %v: %v", got, tc.want, err)
			}
			fetches.EachError(func(topic string, partition int32, err error) {
				t.Fatalf("consume %s-%d: %v", topic, partition, err)
			})
			fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("franz-go consumer: got %v, want %v", got, tc.want)
		}
	}

	// Past producer A's abort marker (at 4), its transaction is behind.
	if p = fetchIsolated(t, cl, topic, 5, 1, 0); len(p.RecordBatches) == 0 || len(p.AbortedTransactions) != 0 {
		t.Fatalf("read_committed fetch from 5: got %d bytes, aborted %+v, want the commit marker and none", len(p.RecordBatches), p.AbortedTransactions)
	}

	// The coordinator bumped producer A's epoch and aborts with it: a
	// marker of the old epoch is fenced.
	if codes := writeMarkers(t, cl, txnMarker(idA, epochA+1, false, topic, 0)); codes[0][0] != 0 {
		t.Fatalf("marker of a newer epoch: got %v, want it written", kerr.ErrorForCode(codes[0][0]))
	}
	if codes := writeMarkers(t, cl, txnMarker(idA, epochA, false, topic, 0)); codes[0][0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker of an older epoch: got %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(codes[0][0]))
	}
	// A coordinator older than the one that wrote the last marker (epoch
	// 1) is fenced.
	old := txnMarker(idA, epochA+1, false, topic, 0)
	old.CoordinatorEpoch = 0
	if codes := writeMarkers(t, cl, old); codes[0][0] != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("marker of an older coordinator epoch: got %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(codes[0][0]))
	}
	for _, ap := range issue[*kmsg.DescribeProducersResponse](t, cl, dp).Topics[0].Partitions[0].ActiveProducers {
		if ap.ProducerID == idA && (ap.CoordinatorEpoch != 1 || ap.ProducerEpoch != int32(epochA+1) || ap.CurrentTxnStartOffset != -1) {
			t.Fatalf("DescribeProducers of producer A after its markers: got %+v, want coordinator epoch 1, epoch %d, no transaction", ap, epochA+1)
		}
	}
}

// nextOffset is the offset after the last batch of records.
func nextOffset(records []byte) (int64, bool) {
	var next int64
	ok := false
	for len(records) >= 61 {
		var rb kmsg.RecordBatch
		if rb.ReadFrom(records) != nil {
			break
		}
		next, ok = rb.FirstOffset+int64(rb.LastOffsetDelta)+1, true
		records = records[rb.Length+12:]
	}
	return next, ok
}

// TestTransactionsReplicated ends a transaction on a partition with two
// replicas: the follower, which replicates the leader's batches, keeps
// the same transactions (open until the marker, none after) and the
// same aborted-transaction index entry, so that it can serve
// read_committed fetches when it leads.
func TestTransactionsReplicated(t *testing.T) {
	brokers := startRaftClusterWith(t, 2, func(cfg *config.Config) { cfg.TransactionPartitionVerification = false })
	ctx := testContext(t, 2*time.Minute)
	const topic = "replicated-txns"
	adm := kadm.NewClient(newClient(t, brokers[0]))
	if created, err := adm.CreateTopic(ctx, 1, 2, nil, topic); err != nil || created.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, created.Err)
	}
	var leader, follower *Broker
	waitFor(t, ctx, "a leader and an in-sync follower", func() bool {
		for i, b := range brokers {
			if p, _ := b.replicas.LeaderFor(topic, 0); p != nil && len(p.Role().ISR) == 2 {
				leader, follower = b, brokers[1-i]
				return follower.replicas.PartitionFor(topic, 0) != nil
			}
		}
		return false
	})
	cl := newClient(t, leader)
	id, epoch := initProducerID(t, leader, -1, -1)
	txn := "txn"
	if _, code := produceTxn(t, cl, topic, &txn, id, epoch, 0, "x", "y"); code != 0 {
		t.Fatalf("transactional produce: %v", kerr.ErrorForCode(code))
	}
	fp := follower.replicas.PartitionFor(topic, 0)
	openAt := func(want int64) func() bool {
		return func() bool {
			for _, ap := range fp.ActiveProducers() {
				if ap.ProducerID == id {
					return ap.CurrentTxnStartOffset == want
				}
			}
			return false
		}
	}
	waitFor(t, ctx, "the follower to see the transaction open at 0", openAt(0))
	if codes := writeMarkers(t, newClient(t, leader), txnMarker(id, epoch, false, topic, 0)); codes[0][0] != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(codes[0][0]))
	}
	waitFor(t, ctx, "the follower to see the transaction ended", openAt(-1))
	want := []tlog.AbortedTxn{{ProducerID: id, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}}
	waitFor(t, ctx, "the follower's index entry", func() bool {
		return reflect.DeepEqual(fp.Log().CollectAbortedTxns(0, 3), want)
	})
	if lp := leader.replicas.PartitionFor(topic, 0); lp.LastStableOffset() != 3 {
		t.Fatalf("leader's LSO after the replicated abort: got %d, want 3", lp.LastStableOffset())
	}
}

// TestTransactionsSurviveRestart restarts a broker whose partition holds
// an aborted transaction and an open one: the open transaction still
// holds the last stable offset (the producer snapshot keeps it), the
// aborted one is still listed to read_committed fetches (the .txnindex
// file), and the open one's marker after the restart moves the LSO on.
func TestTransactionsSurviveRestart(t *testing.T) {
	cfg := partitionTxnConfig(t)
	ctx := testContext(t, time.Minute)
	const topic = "txn-restart"
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	createLocalTopic(t, b, topic, 1)
	waitFor(t, ctx, "the broker to lead the partition", func() bool {
		p, _ := b.replicas.LeaderFor(topic, 0)
		return p != nil
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	idA, epochA := initProducerID(t, b, -1, -1)
	idB, epochB := initProducerID(t, b, -1, -1)
	txnA, txnB := "txn-a", "txn-b"
	if _, code := produceTxn(t, cl, topic, &txnA, idA, epochA, 0, "a1", "a2"); code != 0 {
		t.Fatalf("produce of A: %v", kerr.ErrorForCode(code))
	}
	if codes := writeMarkers(t, cl, txnMarker(idA, epochA, false, topic, 0)); codes[0][0] != 0 {
		t.Fatalf("abort of A: %v", kerr.ErrorForCode(codes[0][0]))
	}
	if base, code := produceTxn(t, cl, topic, &txnB, idB, epochB, 0, "b1"); code != 0 || base != 3 {
		t.Fatalf("produce of B: got base offset %d, %v, want 3", base, kerr.ErrorForCode(code))
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close broker: %v", err)
	}

	b = startBroker(t, cfg)
	waitFor(t, ctx, "the restarted broker to lead "+topic, func() bool {
		p, _ := b.replicas.LeaderFor(topic, 0)
		return p != nil && p.HighWatermark() == 4
	})
	cl = newClient(t, b)
	want := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: idA, FirstOffset: 0}}
	p := fetchIsolated(t, cl, topic, 0, 1, 0)
	if next, _ := nextOffset(p.RecordBatches); p.ErrorCode != 0 || p.LastStableOffset != 3 || next != 3 || !reflect.DeepEqual(p.AbortedTransactions, want) {
		t.Fatalf("read_committed fetch after the restart: got error %v, LSO %d, up to %d, aborted %+v, want LSO 3, up to 3, aborted %+v",
			kerr.ErrorForCode(p.ErrorCode), p.LastStableOffset, next, p.AbortedTransactions, want)
	}
	if codes := writeMarkers(t, cl, txnMarker(idB, epochB, true, topic, 0)); codes[0][0] != 0 {
		t.Fatalf("commit of B after the restart: %v", kerr.ErrorForCode(codes[0][0]))
	}
	if got := listLatestAt(t, cl, topic, 1); got != 5 {
		t.Fatalf("ListOffsets latest read_committed after B's commit: got %d, want 5", got)
	}
}

// TestTxnReusedSequenceRefused: a transactional batch repeating the
// sequence of a batch whose transaction was aborted is refused
// OUT_OF_ORDER_SEQUENCE_NUMBER, not answered as a duplicate written at
// the aborted batch's offset (which would count a record written that
// never was); the next sequence goes on.
func TestTxnReusedSequenceRefused(t *testing.T) {
	b := startBroker(t, partitionTxnConfig(t))
	const topic = "reused"
	createLocalTopic(t, b, topic, 1)
	ctx := testContext(t, time.Minute)
	waitFor(t, ctx, "the broker to lead the partition", func() bool {
		p, _ := b.replicas.LeaderFor(topic, 0)
		return p != nil
	})
	cl := newClient(t, b)
	id, epoch := initProducerID(t, b, -1, -1)
	txnID := "txn-reused"
	if base, code := produceTxn(t, cl, topic, &txnID, id, epoch, 0, "given-up"); code != 0 || base != 0 {
		t.Fatalf("first batch: got base %d, %v, want 0", base, kerr.ErrorForCode(code))
	}
	if base, code := produceTxn(t, cl, topic, &txnID, id, epoch, 0, "given-up"); code != 0 || base != 0 {
		t.Fatalf("its retry in the open transaction: got base %d, %v, want the duplicate at 0", base, kerr.ErrorForCode(code))
	}
	if codes := writeMarkers(t, cl, txnMarker(id, epoch, false, topic, 0)); codes[0][0] != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(codes[0][0]))
	}
	if _, code := produceTxn(t, cl, topic, &txnID, id, epoch, 0, "next"); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence 0 again after the abort: got %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(code))
	}
	if base, code := produceTxn(t, cl, topic, &txnID, id, epoch, 1, "next"); code != 0 || base != 2 {
		t.Fatalf("sequence 1: got base %d, %v, want 2", base, kerr.ErrorForCode(code))
	}
}
