package broker

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/producerid"
	"github.com/tripodmq/tripod/coord"
)

// initProducerID asks b itself for a producer id; with producerID and
// producerEpoch >= 0 it asks (v3+) to bump that producer's epoch.
func initProducerID(t *testing.T, b *Broker, producerID int64, producerEpoch int16) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = producerID, producerEpoch
	resp := askBroker[*kmsg.InitProducerIDResponse](t, b, req)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("InitProducerID to broker %d: got %v, want no error", b.ID(), err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// produceAsProducer sends one batch holding value as producer id/epoch with
// base sequence seq to b (the partition's leader) with acks=all, and
// returns the batch's base offset and the partition's error (nil: none).
func produceAsProducer(t *testing.T, b *Broker, topic string, producerID int64, producerEpoch int16, seq int32, value string) (int64, error) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = buildProducerBatch(t, producerID, producerEpoch, seq, []byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := askBroker[*kmsg.ProduceResponse](t, b, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce of %q to broker %d: got %d topics in the answer, want 1 with 1 partition", value, b.ID(), len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

// TestProducerIDsUniqueAcrossBrokers runs three in-process brokers on one
// embedded Raft cluster: InitProducerID sent to each broker gives three
// distinct producer ids, from three blocks (the ids' counters, their
// upper 32 bits, broker/producerid); two idempotent producers that
// got their ids from two brokers both write their first batch (sequence 0,
// epoch 0) to the same partition with acks=all, and a consumer reads both
// records back at distinct offsets: the leader does not take the second
// producer's batch for a retry of the first's.
func TestProducerIDsUniqueAcrossBrokers(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, 2*time.Minute)

	var ids []int64
	blocks := map[int64]bool{}
	for _, b := range brokers {
		id, epoch := initProducerID(t, b, -1, -1)
		if epoch != 0 || slices.Contains(ids, id) {
			t.Fatalf("InitProducerID to broker %d: got id %d epoch %d, want epoch 0 and an id not in %v", b.ID(), id, epoch, ids)
		}
		ids = append(ids, id)
		blocks[producerid.Counter(id)/coord.ProducerIDBlockSize] = true
	}
	if len(blocks) != len(brokers) {
		t.Fatalf("producer ids %v: from %d blocks, want one block per broker", ids, len(blocks))
	}

	seeds := make([]string, len(brokers))
	for i, b := range brokers {
		seeds[i] = b.Addr().String()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "two-producers"
	waitFor(t, ctx, "topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	var leader *Broker
	waitFor(t, ctx, "a leader with a full ISR on every broker", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		if len(parts) != 1 || len(parts[0].isr) != 3 {
			return false
		}
		for _, b := range brokers {
			if b.replicas.PartitionFor(topic, 0) == nil {
				return false
			}
			if b.ID() == parts[0].leader {
				leader = b
			}
		}
		return leader != nil
	})

	offsets := map[string]int64{}
	for i, value := range []string{"from-A", "from-B"} {
		offset, err := produceAsProducer(t, leader, topic, ids[i], 0, 0, value)
		if err != nil {
			t.Fatalf("produce %q as producer %d (from broker %d): got %v, want no error", value, ids[i], brokers[i].ID(), err)
		}
		offsets[value] = offset
	}
	if offsets["from-A"] == offsets["from-B"] {
		t.Fatalf("both producers' records acknowledged at offset %d, want distinct offsets", offsets["from-A"])
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()
	got := map[string]int64{}
	for len(got) < 2 {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := consumer.PollFetches(fctx)
		cancel()
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v (read so far %v)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = r.Offset })
	}
	if fmt.Sprint(got) != fmt.Sprint(offsets) {
		t.Fatalf("read back %v, want %v", got, offsets)
	}
}

// TestProducerIDsAboveEarlierAfterRestart hands out producer ids, restarts
// the broker on the same data directory (and so the same Raft state), with
// a stale producer_ids.json of the old file-based allocator left in it,
// and checks that the new ids are above every earlier one.
func TestProducerIDsAboveEarlierAfterRestart(t *testing.T) {
	cfg := testConfig(t)
	var highest int64 = -1
	for round := range 2 {
		b, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatalf("round %d: start broker: %v", round, err)
		}
		waitServing(t, b)
		var ids []int64
		for range 3 {
			id, epoch := initProducerID(t, b, -1, -1)
			if epoch != 0 || id <= highest || slices.Contains(ids, id) {
				t.Fatalf("round %d: got producer id %d epoch %d, want epoch 0 and an id above %d not in %v", round, id, epoch, highest, ids)
			}
			ids = append(ids, id)
		}
		highest = slices.Max(ids)
		if err := b.Close(); err != nil {
			t.Fatalf("round %d: close broker: %v", round, err)
		}
		stale := filepath.Join(cfg.LogDirs[0], "producer_ids.json")
		if err := os.WriteFile(stale, []byte(`{"next_block":0}`), 0o644); err != nil {
			t.Fatalf("write %s: %v", stale, err)
		}
	}
}

// TestInitProducerIDBumpsEpochAndFencesOlder: InitProducerID v3+ with a
// producer's id and epoch bumps the epoch and keeps the id (KIP-360); at
// the last epoch it hands out a new id; and a batch of the older epoch is
// then refused with INVALID_PRODUCER_EPOCH while the new epoch writes.
func TestInitProducerIDBumpsEpochAndFencesOlder(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "fenced"
	createLocalTopic(t, b, topic, 1)

	id, epoch := initProducerID(t, b, -1, -1)
	if _, err := produceAsProducer(t, b, topic, id, epoch, 0, "epoch-0"); err != nil {
		t.Fatalf("produce at epoch 0: got %v, want no error", err)
	}
	bumpedID, bumped := initProducerID(t, b, id, epoch)
	if bumpedID != id || bumped != epoch+1 {
		t.Fatalf("InitProducerID bump of %d epoch %d: got id %d epoch %d, want id %d epoch %d", id, epoch, bumpedID, bumped, id, epoch+1)
	}
	if _, err := produceAsProducer(t, b, topic, id, bumped, 0, "epoch-1"); err != nil {
		t.Fatalf("produce at epoch 1: got %v, want no error", err)
	}
	if _, err := produceAsProducer(t, b, topic, id, epoch, 1, "zombie"); err != kerr.InvalidProducerEpoch {
		t.Fatalf("produce at the older epoch 0 after epoch 1 wrote: got %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if end := b.replicas.PartitionFor(topic, 0).Log().EndOffset(); end != 2 {
		t.Fatalf("log end offset: got %d, want 2 (the fenced batch not written)", end)
	}

	freshID, freshEpoch := initProducerID(t, b, id, math.MaxInt16-1)
	if freshID == id || freshEpoch != 0 {
		t.Fatalf("InitProducerID bump of %d at the last epoch: got id %d epoch %d, want a new id at epoch 0", id, freshID, freshEpoch)
	}
}

// TestInitProducerIDWithoutBlockIsRetriable: a broker that cannot reserve
// a block of producer ids answers InitProducerID with the retriable
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka does when no block is ready.
func TestInitProducerIDWithoutBlockIsRetriable(t *testing.T) {
	b := startBroker(t, testConfig(t))
	b.producerIDs.Close()
	resp := askBroker[*kmsg.InitProducerIDResponse](t, b, kmsg.NewPtrInitProducerIDRequest())
	if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("InitProducerID without a block: got %v, want COORDINATOR_LOAD_IN_PROGRESS", err)
	}
}
