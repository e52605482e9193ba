package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// txnOffsetCommit commits offset for groupID's topic partition in the
// open transaction of producer id at epoch, and returns the partition's
// error code.
func txnOffsetCommit(t *testing.T, ctx context.Context, cl *kgo.Client, groupID, topic string, partition int32, offset, id int64, epoch int16) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "txn-"+groupID, groupID, id, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffset returns groupID's committed offset of topic's partition
// and its error code, with or without require_stable.
func fetchOffset(t *testing.T, ctx context.Context, cl *kgo.Client, groupID, topic string, partition int32, requireStable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group, req.RequireStable = groupID, requireStable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// writeOffsetsMarker ends producer id's transaction on groupID's
// __consumer_offsets partition with the WriteTxnMarkers the transaction
// coordinator sends.
func writeOffsetsMarker(t *testing.T, ctx context.Context, b *Broker, cl *kgo.Client, groupID string, id int64, epoch int16, commit bool) {
	t.Helper()
	index := group.PartitionFor(groupID, b.groups.offsetsPartitions())
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = id, epoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = group.OffsetsTopic, []int32{index}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl.Broker(int(b.cfg.BrokerID)))
	if err != nil {
		t.Fatalf("WriteTxnMarkers: %v", err)
	}
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("WriteTxnMarkers on %s-%d: %v", group.OffsetsTopic, index, kerr.ErrorForCode(code))
	}
}

// TestTxnOffsetCommitPendingUntilMarker follows a transaction's offsets
// through __consumer_offsets: pending (UNSTABLE_OFFSET_COMMIT to
// require_stable, invisible otherwise) until the commit marker, dropped
// by an abort marker, and the same after a restart reads them back from
// the log, including a transaction still open at the restart.
func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	cfg := groupTestConfig(t)
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	const topic, groupID = "input", "etl"
	createTopic(t, b, topic, 2, nil)
	cl := newClient(t, b)
	ctx := testContext(t, time.Minute)
	br := cl.Broker(int(cfg.BrokerID))
	id, epoch := initProducerIDOn(t, ctx, br, -1, -1)

	var code int16
	waitFor(t, ctx, "the offsets partition to take a transactional commit", func() bool {
		code = txnOffsetCommit(t, ctx, cl, groupID, topic, 0, 5, id, epoch)
		return code == 0
	})
	if off, code := fetchOffset(t, ctx, cl, groupID, topic, 0, true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable fetch of a pending offset: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", off, code)
	}
	if off, code := fetchOffset(t, ctx, cl, groupID, topic, 0, false); code != 0 || off != -1 {
		t.Fatalf("plain fetch of a pending offset: offset %d code %d, want -1 and no error", off, code)
	}
	writeOffsetsMarker(t, ctx, b, cl, groupID, id, epoch, true)
	if off, code := fetchOffset(t, ctx, cl, groupID, topic, 0, true); code != 0 || off != 5 {
		t.Fatalf("after the commit marker: offset %d code %d, want 5", off, code)
	}

	// An aborted transaction's offset never shows.
	if code := txnOffsetCommit(t, ctx, cl, groupID, topic, 0, 9, id, epoch); code != 0 {
		t.Fatalf("second TxnOffsetCommit: code %d", code)
	}
	writeOffsetsMarker(t, ctx, b, cl, groupID, id, epoch, false)
	if off, code := fetchOffset(t, ctx, cl, groupID, topic, 0, true); code != 0 || off != 5 {
		t.Fatalf("after the abort marker: offset %d code %d, want 5", off, code)
	}

	// An older epoch of the producer is fenced (PRODUCER_FENCED at v5,
	// the version the client sends).
	if code := txnOffsetCommit(t, ctx, cl, groupID, topic, 1, 3, id, epoch+1); code != 0 {
		t.Fatalf("TxnOffsetCommit at a newer epoch: code %d", code)
	}
	if code := txnOffsetCommit(t, ctx, cl, groupID, topic, 1, 4, id, epoch); code != kerr.ProducerFenced.Code {
		t.Fatalf("TxnOffsetCommit at an older epoch: code %d, want PRODUCER_FENCED", code)
	}
	// A producer id nobody was handed.
	if code := txnOffsetCommit(t, ctx, cl, groupID, topic, 1, 4, id+1000, 0); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("TxnOffsetCommit of a guessed producer id: code %d, want INVALID_PRODUCER_ID_MAPPING", code)
	}

	// Partition 1's transaction (epoch+1) is still open at the restart.
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b = startBroker(t, cfg)
	cl = newClient(t, b)
	waitFor(t, ctx, "the offsets to be loaded after the restart", func() bool {
		off, code := fetchOffset(t, ctx, cl, groupID, topic, 0, true)
		return code == 0 && off == 5
	})
	if off, code := fetchOffset(t, ctx, cl, groupID, topic, 1, true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after the restart, the open transaction's offset: offset %d code %d, want UNSTABLE_OFFSET_COMMIT", off, code)
	}
	writeOffsetsMarker(t, ctx, b, cl, groupID, id, epoch+1, true)
	if off, code := fetchOffset(t, ctx, cl, groupID, topic, 1, true); code != 0 || off != 3 {
		t.Fatalf("after the restart and the commit marker: offset %d code %d, want 3", off, code)
	}
}
