package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/kafkatest"
	"github.com/tripodmq/tripod/txn"
)

// produceTxnRaw sends one transactional batch of producer id at epoch
// from sequence seq to topic's partition on cl, with transactional id
// id, and returns the partition's error code.
func produceTxnRaw(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, id, topic string, partition int32, pid int64, epoch int16, seq int32, values ...string) int16 {
	t.Helper()
	var raw [][]byte
	for _, v := range values {
		raw = append(raw, []byte(v))
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 10_000, &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = kafkatest.EncodeTransactionalBatch(time.Now().UnixMilli(), pid, epoch, seq, raw...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := txnRequest[*kmsg.ProduceResponse](t, ctx, cl, b, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Produce: got %+v, want one partition", resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// produceTxnPipelined sends n transactional produces of one record each,
// sequences 0..n-1, to topic's partition on cl without waiting for an
// answer in between, then reads the answers and returns their codes.
func produceTxnPipelined(t *testing.T, cl *rawConn, id, topic string, partition int32, pid int64, epoch int16, n int) []int16 {
	t.Helper()
	var reqs []*kmsg.ProduceRequest
	first := cl.corr + 1
	for i := range n {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 10_000, &id
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = partition
		rp.Records = kafkatest.EncodeTransactionalBatch(time.Now().UnixMilli(), pid, epoch, int32(i), []byte("pipelined"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		reqs = append(reqs, req)
		cl.corr++
		if _, err := cl.nc.Write(encodeRequest(req, cl.corr)); err != nil {
			t.Fatalf("write produce %d: %v", i, err)
		}
	}
	codes := make([]int16, n)
	for i, req := range reqs {
		resp := decodeResponse(t, req, readFrame(t, cl.nc), first+int32(i)).(*kmsg.ProduceResponse)
		codes[i] = resp.Topics[0].Partitions[0].ErrorCode
	}
	return codes
}

// wantProduceCode fails t unless got is want.
func wantProduceCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(wantCode))
	}
}

// TestTxnVerifyRefusesUnverifiedProduce shows KIP-890 part 1 on one
// broker (the coordinator verifies in process): a transactional produce
// to a partition never added to the transaction, a late produce after the
// transaction committed, and a produce at an epoch fenced by a new
// InitProducerId are refused without appending anything or holding the
// last stable offset back; batches of a verified transaction are
// appended.
func TestTxnVerifyRefusesUnverifiedProduce(t *testing.T) {
	b := startBroker(t, txnConfig(t))
	ctx := testContext(t, 2*time.Minute)
	cl := newRawConn(t, b)
	createTopic(t, b, "verified", 2, nil)
	findTxnCoordinator(t, ctx, cl, b, "tx-v")
	ip := initTxnProducer(t, ctx, cl, b, "tx-v", 60000, -1, -1)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	p0 := b.replicas.PartitionFor("verified", 0)
	p1 := b.replicas.PartitionFor("verified", 1)
	if p0 == nil || p1 == nil {
		t.Fatal("the broker leads no verified-0 or verified-1")
	}

	// Before any AddPartitionsToTxn there is no ongoing transaction.
	wantProduceCode(t, "produce before AddPartitionsToTxn", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 0, pid, epoch, 0, "early"), kerr.InvalidTxnState)
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-v", pid, epoch, "verified", 0); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	wantProduceCode(t, "first produce of the transaction", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 0, pid, epoch, 0, "a"), nil)
	wantProduceCode(t, "second produce of the transaction", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 0, pid, epoch, 1, "b"), nil)
	// verified-1 is not in the transaction.
	wantProduceCode(t, "produce to a partition never added", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 1, pid, epoch, 0, "x"), kerr.InvalidTxnState)
	if end := p1.Log().EndOffset(); end != 0 || p1.TxnOpen(pid) || p1.LastStableOffset() != 0 {
		t.Fatalf("verified-1 after the refused produce: end %d, open %v, LSO %d; want nothing appended", end, p1.TxnOpen(pid), p1.LastStableOffset())
	}

	if got := endTxn(t, ctx, cl, b, 3, "tx-v", pid, epoch, true); got != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(got))
	}
	waitTxnState(t, ctx, cl, b, "tx-v", txn.CompleteCommit)
	waitFor(t, ctx, "the commit marker on verified-0", func() bool {
		return !p0.TxnOpen(pid) && p0.LastStableOffset() == p0.Log().EndOffset()
	})
	end := p0.Log().EndOffset()

	// A late produce of the committed transaction.
	wantProduceCode(t, "late produce after the commit", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 0, pid, epoch, 2, "late"), kerr.InvalidTxnState)
	if got := p0.Log().EndOffset(); got != end || p0.TxnOpen(pid) || p0.LastStableOffset() != end {
		t.Fatalf("verified-0 after the late produce: end %d (was %d), open %v, LSO %d", got, end, p0.TxnOpen(pid), p0.LastStableOffset())
	}

	// A new InitProducerId fences the epoch.
	ip2 := initTxnProducer(t, ctx, cl, b, "tx-v", 60000, pid, epoch)
	if ip2.ErrorCode != 0 || ip2.ProducerID != pid || ip2.ProducerEpoch != epoch+1 {
		t.Fatalf("InitProducerId again: got %+v, want id %d at epoch %d", ip2, pid, epoch+1)
	}
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-v", pid, epoch+1, "verified", 0); got != 0 {
		t.Fatalf("AddPartitionsToTxn at the new epoch: %v", kerr.ErrorForCode(got))
	}
	wantProduceCode(t, "produce at the fenced epoch", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 0, pid, epoch, 2, "stale"), kerr.InvalidProducerEpoch)
	if got := p0.Log().EndOffset(); got != end || p0.TxnOpen(pid) {
		t.Fatalf("verified-0 after the stale produce: end %d (was %d), open %v", got, end, p0.TxnOpen(pid))
	}
	wantProduceCode(t, "produce at the new epoch", produceTxnRaw(t, ctx, cl, b, "tx-v", "verified", 0, pid, epoch+1, 0, "new"), nil)
	if !p0.TxnOpen(pid) {
		t.Fatal("verified-0 holds no open transaction after the verified produce")
	}
}

// TestProduceWaitsForTheConnectionsPreviousAppends: a produce read while
// the connection's previous produce still waits to append (for a
// transaction verification) appends after it, even a batch that needs no
// verification of its own. franz-go pipelines five produces per
// connection: its second batch of a transaction's partition, read while
// the first waited for its verification, waits too; its third, read once
// the first was appended, found the partition's transaction open and
// used to be appended at once, before the second, and was refused
// OUT_OF_ORDER_SEQUENCE_NUMBER (franz-go's TestTxnEtl saw it now and
// then). The test holds the previous produce's appends open itself.
func TestProduceWaitsForTheConnectionsPreviousAppends(t *testing.T) {
	b := startBroker(t, txnConfig(t))
	ctx := testContext(t, 2*time.Minute)
	cl := newRawConn(t, b)
	createTopic(t, b, "ordered", 1, nil)
	findTxnCoordinator(t, ctx, cl, b, "tx-o")
	ip := initTxnProducer(t, ctx, cl, b, "tx-o", 60000, -1, -1)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-o", pid, epoch, "ordered", 0); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	wantProduceCode(t, "first produce of the transaction", produceTxnRaw(t, ctx, cl, b, "tx-o", "ordered", 0, pid, epoch, 0, "a"), nil)
	p := b.replicas.PartitionFor("ordered", 0)
	if p == nil || !p.TxnOpen(pid) {
		t.Fatal("ordered-0 holds no open transaction after the first produce")
	}
	end := p.Log().EndOffset()

	// A connection whose previous produce has not appended yet.
	cs := &connState{authenticated: true, principalID: security.Anonymous}
	previous := make(chan struct{})
	cs.txnAppends.Store(&previous)
	id := "tx-o"
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, 1, 10_000, &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "ordered"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = kafkatest.EncodeTransactionalBatch(time.Now().UnixMilli(), pid, epoch, 1, []byte("b"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, later, err := handleProduce(ctx, b, &request{kreq: req, conn: cs, received: time.Now()})
	if err != nil || resp != nil || later == nil {
		t.Fatalf("handleProduce behind a pending produce: got response %v, deferred %v, error %v; want it deferred", resp, later != nil, err)
	}
	if got := p.Log().EndOffset(); got != end {
		t.Fatalf("ordered-0 ends at %d before the previous produce appended, was %d: the produce passed it", got, end)
	}
	answered := make(chan kmsg.Response, 1)
	go func() { answered <- later(ctx) }()
	select {
	case r := <-answered:
		t.Fatalf("the produce was answered (%+v) before the previous one appended", r)
	case <-time.After(100 * time.Millisecond):
	}
	close(previous)
	var r kmsg.Response
	select {
	case r = <-answered:
	case <-ctx.Done():
		t.Fatal("the produce was not answered after the previous one appended")
	}
	wantProduceCode(t, "the produce after the previous one", r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, nil)
	if got := p.Log().EndOffset(); got != end+1 {
		t.Fatalf("ordered-0 ends at %d after the deferred produce, want %d", got, end+1)
	}
}

// TestTxnVerifyDisabled shows that with
// transaction.partition.verification.enable=false a transactional batch
// is appended without asking the coordinator, as before KIP-890.
func TestTxnVerifyDisabled(t *testing.T) {
	cfg := txnConfig(t)
	cfg.TransactionPartitionVerification = false
	b := startBroker(t, cfg)
	ctx := testContext(t, 2*time.Minute)
	cl := newRawConn(t, b)
	createTopic(t, b, "unverified", 1, nil)
	findTxnCoordinator(t, ctx, cl, b, "tx-u")
	ip := initTxnProducer(t, ctx, cl, b, "tx-u", 60000, -1, -1)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	wantProduceCode(t, "produce to a partition never added", produceTxnRaw(t, ctx, cl, b, "tx-u", "unverified", 0, ip.ProducerID, ip.ProducerEpoch, 0, "x"), nil)
	if p := b.replicas.PartitionFor("unverified", 0); !p.TxnOpen(ip.ProducerID) {
		t.Fatal("unverified-0 holds no open transaction after the produce")
	}
}

// TestTxnVerifyRemoteCoordinator shows the verification sent to a
// coordinator on another broker (AddPartitionsToTxn v4 VerifyOnly): a
// produce to a partition in the transaction is appended, one to a
// partition not in it is refused with INVALID_TXN_STATE.
func TestTxnVerifyRemoteCoordinator(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(cfg *config.Config) { cfg.TransactionStateLogNumPartitions = 1 })
	ctx := testContext(t, 2*time.Minute)
	conns := map[int32]*rawConn{}
	byID := map[int32]*Broker{}
	for _, b := range brokers {
		conns[b.ID()] = newRawConn(t, b)
		byID[b.ID()] = b
	}
	fc := findTxnCoordinator(t, ctx, conns[brokers[0].ID()], brokers[0], "tx-r")
	if fc.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v", kerr.ErrorForCode(fc.ErrorCode))
	}
	coordinator := byID[fc.NodeID]
	createTopic(t, brokers[0], "remote", 6, nil)
	// The partitions led by brokers other than the coordinator.
	var remote []int32
	var leaders []*Broker
	waitFor(t, ctx, "two partitions of remote led away from the coordinator, known to every broker", func() bool {
		remote, leaders = nil, nil
		for _, b := range brokers {
			if !b.cache.TopicReady("remote", 6) {
				return false
			}
		}
		topic, _ := coordinator.cache.Topic("remote")
		for _, p := range topic.Partitions {
			if p.Leader == coord.NoBroker || int32(p.Leader) == coordinator.ID() {
				continue
			}
			l := byID[int32(p.Leader)]
			if l == nil || l.replicas.PartitionFor("remote", p.Partition) == nil {
				return false
			}
			remote, leaders = append(remote, p.Partition), append(leaders, l)
		}
		return len(remote) >= 2
	})
	ip := initTxnProducer(t, ctx, conns[coordinator.ID()], coordinator, "tx-r", 60000, -1, -1)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	if got := addPartitionsToTxn(t, ctx, conns[coordinator.ID()], coordinator, 3, "tx-r", pid, epoch, "remote", remote[0]); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	wantProduceCode(t, "verified produce at another broker",
		produceTxnRaw(t, ctx, conns[leaders[0].ID()], leaders[0], "tx-r", "remote", remote[0], pid, epoch, 0, "a"), nil)
	if !leaders[0].replicas.PartitionFor("remote", remote[0]).TxnOpen(pid) {
		t.Fatal("the verified partition holds no open transaction")
	}
	wantProduceCode(t, "unverified produce at another broker",
		produceTxnRaw(t, ctx, conns[leaders[1].ID()], leaders[1], "tx-r", "remote", remote[1], pid, epoch, 0, "x"), kerr.InvalidTxnState)
	p := leaders[1].replicas.PartitionFor("remote", remote[1])
	if p.Log().EndOffset() != 0 || p.TxnOpen(pid) {
		t.Fatalf("the unverified partition: end %d, open %v; want nothing appended", p.Log().EndOffset(), p.TxnOpen(pid))
	}

	// Pipelined first batches, each verified, are appended in order.
	if got := addPartitionsToTxn(t, ctx, conns[coordinator.ID()], coordinator, 3, "tx-r", pid, epoch, "remote", remote[1]); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	for i, code := range produceTxnPipelined(t, conns[leaders[1].ID()], "tx-r", "remote", remote[1], pid, epoch, 8) {
		wantProduceCode(t, fmt.Sprintf("pipelined produce %d", i), code, nil)
	}
	if end := p.Log().EndOffset(); end != 8 {
		t.Fatalf("the partition after 8 pipelined produces: end %d, want 8", end)
	}
}
