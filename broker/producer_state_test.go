package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
)

// producerState returns how p's producer state was last recovered and how
// many producers it holds.
func producerState(p *replica.Partition) (load loadView, producers int) {
	l, n := p.ProducerState()
	return loadView{snapshot: l.SnapshotOffset, from: l.From, to: l.To}, n
}

// loadView is the part of a log.ProducerLoad the tests compare.
type loadView struct{ snapshot, from, to int64 }

// TestProducerStateSurvivesRestart produces three batches as an
// idempotent producer, closes the broker and opens another on the same
// data directory: the partition's producer state comes from the snapshot
// written at close, at the log end, without reading the log, and a retry
// of the producer's last batch is still answered as a duplicate with its
// original offset while its next batch follows on.
func TestProducerStateSurvivesRestart(t *testing.T) {
	cfg := testConfig(t)
	ctx := testContext(t, time.Minute)
	const topic = "idempotent"
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	createLocalTopic(t, b, topic, 1)
	id, epoch := initProducerID(t, b, -1, -1)
	for seq := range int32(3) {
		offset, err := produceAsProducer(t, b, topic, id, epoch, seq, "before restart")
		if err != nil || offset != int64(seq) {
			t.Fatalf("produce sequence %d: got offset %d (%v), want %d", seq, offset, err, seq)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close broker: %v", err)
	}

	b = startBroker(t, cfg)
	waitFor(t, ctx, "the restarted broker to lead "+topic, func() bool {
		p := b.replicas.PartitionFor(topic, 0)
		if p == nil {
			return false
		}
		leads, _ := p.Leads(coord.BrokerID(b.cfg.BrokerID))
		return leads
	})
	p := b.replicas.PartitionFor(topic, 0)
	if load, producers := producerState(p); load != (loadView{3, 3, 3}) || producers != 1 {
		t.Fatalf("producer state after restart: got load %+v with %d producers, want snapshot 3, read 3..3, 1 producer", load, producers)
	}
	if offset, err := produceAsProducer(t, b, topic, id, epoch, 2, "retry"); err != nil || offset != 2 {
		t.Fatalf("retry of sequence 2: got offset %d (%v), want the duplicate's offset 2", offset, err)
	}
	if offset, err := produceAsProducer(t, b, topic, id, epoch, 4, "gap"); err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("sequence 4 after 2: got offset %d (%v), want OUT_OF_ORDER_SEQUENCE_NUMBER", offset, err)
	}
	if offset, err := produceAsProducer(t, b, topic, id, epoch, 3, "after restart"); err != nil || offset != 3 {
		t.Fatalf("sequence 3: got offset %d (%v), want 3", offset, err)
	}
	if end := p.Log().EndOffset(); end != 4 {
		t.Fatalf("log end offset: got %d, want 4 (the retry not written)", end)
	}
}

// TestProducerIDExpiration sets producer.id.expiration.ms to 1 ms: the
// broker's check forgets the producer, so a retry of its last batch is
// no longer a duplicate but a new batch, accepted as that of a producer
// the partition does not know (Kafka 2.5+, KIP-360: any sequence is
// accepted from an unknown producer; brokers before 2.5 answered
// UNKNOWN_PRODUCER_ID).
func TestProducerIDExpiration(t *testing.T) {
	cfg := testConfig(t)
	cfg.ProducerIDExpiration = time.Millisecond
	cfg.ProducerIDExpirationCheckInterval = 5 * time.Millisecond
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	const topic = "expiring"
	createLocalTopic(t, b, topic, 1)
	id, epoch := initProducerID(t, b, -1, -1)
	for seq := range int32(2) {
		if _, err := produceAsProducer(t, b, topic, id, epoch, seq, "first"); err != nil {
			t.Fatalf("produce sequence %d: got %v, want no error", seq, err)
		}
	}
	p := b.replicas.PartitionFor(topic, 0)
	waitFor(t, ctx, "the producer to expire", func() bool {
		_, producers := producerState(p)
		return producers == 0
	})
	if offset, err := produceAsProducer(t, b, topic, id, epoch, 1, "retry after expiry"); err != nil || offset != 2 {
		t.Fatalf("retry of sequence 1 after expiry: got offset %d (%v), want it written at 2", offset, err)
	}
	waitFor(t, ctx, "the producer to expire again", func() bool {
		_, producers := producerState(p)
		return producers == 0
	})
	if offset, err := produceAsProducer(t, b, topic, id, epoch, 7, "gap after expiry"); err != nil || offset != 3 {
		t.Fatalf("sequence 7 after expiry: got offset %d (%v), want it accepted at 3", offset, err)
	}
}

// TestProducerSnapshotAfterRoll gives a topic tiny segments: once the log
// rolled, the broker's periodic check writes a producer snapshot at or
// above the active segment's base offset, so a restart after a crash
// replays about one segment.
func TestProducerSnapshotAfterRoll(t *testing.T) {
	cfg := testConfig(t)
	cfg.ProducerIDExpirationCheckInterval = 5 * time.Millisecond
	cfg.LogSegmentBytes = 1024
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	const topic = "rolling"
	createLocalTopic(t, b, topic, 1)
	id, epoch := initProducerID(t, b, -1, -1)
	p := b.replicas.PartitionFor(topic, 0)
	for seq := int32(0); p.Log().ActiveSegmentBaseOffset() == 0; seq++ {
		if _, err := produceAsProducer(t, b, topic, id, epoch, seq, string(make([]byte, 200))); err != nil {
			t.Fatalf("produce sequence %d: got %v, want no error", seq, err)
		}
	}
	base := p.Log().ActiveSegmentBaseOffset()
	waitFor(t, ctx, "a producer snapshot after the roll", func() bool {
		offsets, err := p.Log().ProducerSnapshots()
		return err == nil && len(offsets) > 0 && offsets[len(offsets)-1] >= base
	})
}
