package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/internal/kafkatest"
)

// The producer id attacks: a client writes under producer ids it was not
// handed, to make an idempotent producer's acknowledged records vanish as
// duplicates, or to fence it (broker/producerid and producer_id_check.go).

// aliceLogin and intruderLogin are two principals of the SASL listeners
// of saslConfig: User:alice, whose records are attacked, and User:admin,
// who attacks them (no authorizer runs, so both may write every topic).
var (
	aliceLogin    = plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()
	intruderLogin = plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
)

// producerIDAttackIDs returns the producer ids the attack of
// TestHostileProducerIDsNotHandedOut writes under: the first 10 a broker
// would hand out were ids not signed (the counters 0, 1, ...), and the
// first 10 counters in the signed ids' shape with a made-up mac.
func producerIDAttackIDs() []int64 {
	var ids []int64
	for counter := range int64(10) {
		ids = append(ids, counter, (counter+1)<<32|0x5eed)
	}
	return ids
}

// producerIDRequest returns a Produce (acks=all) of one batch to topic's
// partition 0 under producerID, producerEpoch and base sequence seq,
// holding one record per value.
func producerIDRequest(topic string, producerID int64, producerEpoch int16, seq int32, values ...string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	var raw [][]byte
	for _, v := range values {
		raw = append(raw, []byte(v))
	}
	rp.Records = kafkatest.EncodeBatch(time.Now().UnixMilli(), producerID, producerEpoch, seq, raw...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// producePartitionError returns the error of the one partition of a
// Produce's answer (nil: none) and its base offset.
func producePartitionError(t *testing.T, resp *kmsg.ProduceResponse) (int64, error) {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce answer: got %d topics, want 1 with 1 partition", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

// produceOn sends producerIDRequest through br (a franz-go client's
// connection to one broker, logged in as its client is) and returns the
// base offset and the partition's error.
func produceOn(t *testing.T, ctx context.Context, br *kgo.Broker, topic string, producerID int64, producerEpoch int16, seq int32, values ...string) (int64, error) {
	t.Helper()
	resp, err := br.Request(ctx, producerIDRequest(topic, producerID, producerEpoch, seq, values...))
	if err != nil {
		t.Fatalf("produce to broker: %v", err)
	}
	return producePartitionError(t, resp.(*kmsg.ProduceResponse))
}

// initProducerIDOn asks br for a producer id; with producerID and
// producerEpoch >= 0, to bump that producer's epoch (v3+).
func initProducerIDOn(t *testing.T, ctx context.Context, br *kgo.Broker, producerID int64, producerEpoch int16) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = producerID, producerEpoch
	resp, err := br.Request(ctx, req)
	if err != nil {
		t.Fatalf("InitProducerID: %v", err)
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		t.Fatalf("InitProducerID of %d epoch %d: got %v, want no error", producerID, producerEpoch, err)
	}
	return r.ProducerID, r.ProducerEpoch
}

// readPartition consumes topic's partition 0 from its start through seeds
// until it has read every record below end, and returns their values in
// offset order.
func readPartition(t *testing.T, ctx context.Context, seeds []string, topic string, end int64) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	var values []string
	next := int64(0)
	for next < end {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		if err := fs.Err(); err != nil {
			t.Fatalf("consume %s below offset %d: %v (read so far %q)", topic, end, err, values)
		}
		fs.EachRecord(func(r *kgo.Record) {
			values = append(values, string(r.Value))
			next = r.Offset + 1
		})
	}
	return values
}

// checkAllRead fails t unless every value of want is in got.
func checkAllRead(t *testing.T, got, want []string) {
	t.Helper()
	var missing []string
	for _, v := range want {
		if !slices.Contains(got, v) {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the log holds %q: got %d of the %d acknowledged records, want all (missing %q)", got, len(want)-len(missing), len(want), missing)
	}
}

// TestHostileProducerIDsNotHandedOut: a raw client produces, under each of
// the producer ids a broker would hand out first were ids not signed, and
// ids of the signed ids' shape with a made-up mac, batches with sequences
// 0 to 4, and each is refused with
// UNKNOWN_PRODUCER_ID; a franz-go idempotent producer then produces 5
// records one by one, and all 5 acknowledged records are in the log.
// Before producer ids were signed, the producer was given id 0 and the
// broker answered its 5 records as duplicates of the forged ones: 5
// acknowledged, none in the log.
func TestHostileProducerIDsNotHandedOut(t *testing.T) {
	b := startBroker(t, testConfig(t))
	ctx := testContext(t, time.Minute)
	const topic = "unissued-ids"
	createLocalTopic(t, b, topic, 1)
	heap := watchHeap(t)

	nc := dialBroker(t, b)
	corr := int32(0)
	refused := 0
	ids := producerIDAttackIDs()
	for _, id := range ids {
		for seq := range int32(5) {
			corr++
			req := producerIDRequest(topic, id, 0, seq, fmt.Sprintf("forged-%d-%d", id, seq))
			req.SetVersion(8)
			resp := roundTrip(t, nc, req, corr).(*kmsg.ProduceResponse)
			if _, err := producePartitionError(t, resp); err == kerr.UnknownProducerID {
				refused++
			}
		}
	}
	t.Logf("produce under %d producer ids not handed out, sequences 0-4: %d of %d batches refused with UNKNOWN_PRODUCER_ID",
		len(ids), refused, 5*len(ids))

	producer := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	var acked []string
	for i := range 5 {
		value := fmt.Sprintf("legitimate-%d", i)
		if err := producer.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatalf("idempotent produce %q: got %v, want no error", value, err)
		}
		acked = append(acked, value)
	}
	id, epoch, err := producer.ProducerID(ctx)
	if err != nil {
		t.Fatalf("the producer's id: %v", err)
	}
	end := b.replicas.PartitionFor(topic, 0).Log().EndOffset()
	got := readPartition(t, ctx, []string{b.Addr().String()}, topic, end)
	t.Logf("franz-go producer (id %d epoch %d): %d acknowledged, %d of them in the log of %d records", id, epoch, len(acked), countIn(got, acked), len(got))
	checkAllRead(t, got, acked)
	if refused != 5*len(ids) {
		t.Errorf("forged batches: got %d of %d refused with UNKNOWN_PRODUCER_ID, want all", refused, 5*len(ids))
	}
	heap.checkHeapGrowth(t, "produce under producer ids not handed out", hostileHeapLimit)
	checkServes(t, b)
}

// countIn returns how many of want are in got.
func countIn(got, want []string) int {
	n := 0
	for _, v := range want {
		if slices.Contains(got, v) {
			n++
		}
	}
	return n
}

// TestHostileProducerIDOfAnotherPrincipal: on a SASL listener alice's
// franz-go idempotent producer writes a record; the intruder, another
// principal with the same right to write, then produces under alice's
// producer id and epoch with her next sequences, and at her epoch plus
// one, and asks InitProducerId to bump her id's epoch: the batches are
// refused with UNKNOWN_PRODUCER_ID and InitProducerId hands the intruder
// a fresh id of its own; alice's next 5 records are all acknowledged and
// all in the log. Before producer ids were bound to principals, the
// intruder's batches were written and alice's next records answered as
// their duplicates.
func TestHostileProducerIDOfAnotherPrincipal(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	ctx := testContext(t, time.Minute)
	const topic = "alices-topic"
	createLocalTopic(t, b, topic, 1)
	heap := watchHeap(t)

	alice := saslClient(t, b, aliceLogin, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := []string{"alice-0"}
	if err := alice.ProduceSync(ctx, kgo.StringRecord(acked[0])).FirstErr(); err != nil {
		t.Fatalf("alice's first produce: %v", err)
	}
	id, epoch, err := alice.ProducerID(ctx)
	if err != nil {
		t.Fatalf("alice's producer id: %v", err)
	}

	intruder := saslClient(t, b, intruderLogin).SeedBrokers()[0]
	accepted := attackProducer(t, ctx, intruder, topic, id, epoch)
	if bumpedID, bumped := initProducerIDOn(t, ctx, intruder, id, epoch); bumpedID == id {
		t.Errorf("the intruder's InitProducerID bump of alice's id %d epoch %d: got id %d epoch %d, want a fresh id", id, epoch, bumpedID, bumped)
	}

	for i := 1; i <= 5; i++ {
		value := fmt.Sprintf("alice-%d", i)
		if err := alice.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatalf("alice's produce %q: got %v, want no error", value, err)
		}
		acked = append(acked, value)
	}
	end := b.replicas.PartitionFor(topic, 0).Log().EndOffset()
	got := readPartition(t, ctx, []string{b.Addr().String()}, topic, end)
	t.Logf("intruder: %d of its batches under alice's id written; alice: %d acknowledged, %d of them in the log of %d records",
		accepted, len(acked), countIn(got, acked), len(got))
	checkAllRead(t, got, acked)
	if accepted > 0 {
		t.Errorf("the intruder's batches under alice's producer id: got %d written, want none", accepted)
	}
	heap.checkHeapGrowth(t, "produce under another principal's producer id", hostileHeapLimit)
	checkServes(t, b)
}

// attackProducer produces through br, under the producer id and epoch
// of another principal's producer that has written one record, batches
// with that producer's next 5 sequences, then one at its epoch plus one,
// and returns how many were written; each refused one must be refused
// with UNKNOWN_PRODUCER_ID.
func attackProducer(t *testing.T, ctx context.Context, br *kgo.Broker, topic string, id int64, epoch int16) int {
	t.Helper()
	accepted := 0
	check := func(what string, err error) {
		t.Helper()
		switch err {
		case nil:
			accepted++
		case kerr.UnknownProducerID:
		default:
			t.Errorf("the intruder's %s: got %v, want UNKNOWN_PRODUCER_ID", what, err)
		}
	}
	for seq := int32(1); seq <= 5; seq++ {
		_, err := produceOn(t, ctx, br, topic, id, epoch, seq, fmt.Sprintf("forged-%d", seq))
		check(fmt.Sprintf("batch at sequence %d", seq), err)
	}
	_, err := produceOn(t, ctx, br, topic, id, epoch+1, 0, "fencing")
	check("batch at the next epoch", err)
	return accepted
}

// saslClusterConfig gives a broker of a cluster the listeners of
// saslConfig: PLAINTEXT, the inter-broker one, and SASL_PLAINTEXT with
// PLAIN (users admin and alice).
func saslClusterConfig(t testing.TB) func(*config.Config) {
	return func(cfg *config.Config) {
		set(t, cfg, map[string]string{
			"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			"sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		})
	}
}

// TestHostileProducerIDAcrossBrokers is TestHostileProducerIDOfAnotherPrincipal
// on three brokers, with alice's producer id handed out by a broker
// that does not lead the partition: the leader verifies the id that
// another broker signed, for alice, and refuses it for the intruder, in a
// Produce and in InitProducerId sent to either broker; alice's 6 records
// are all in the log.
func TestHostileProducerIDAcrossBrokers(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, saslClusterConfig(t))
	ctx := testContext(t, 2*time.Minute)
	const topic = "alices-replicated-topic"
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr().String())
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer admin.Close()
	createReq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 3
	createReq.Topics = append(createReq.Topics, ct)
	createReq.TimeoutMillis = 30_000
	var leader, issuer *Broker
	waitFor(t, ctx, "the topic created with a leader and a full ISR", func() bool {
		if _, err := createReq.RequestWith(ctx, admin); err != nil {
			return false
		}
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
			} else {
				issuer = b
			}
		}
		return leader != nil
	})
	heap := watchHeap(t)

	saslSeeds := func() []string {
		var out []string
		for _, b := range brokers {
			out = append(out, b.ListenerAddr("SASL_PLAINTEXT").String())
		}
		return out
	}
	alice, err := kgo.NewClient(kgo.SeedBrokers(saslSeeds()...), kgo.SASL(aliceLogin))
	if err != nil {
		t.Fatalf("alice's client: %v", err)
	}
	defer alice.Close()
	intruder, err := kgo.NewClient(kgo.SeedBrokers(saslSeeds()...), kgo.SASL(intruderLogin))
	if err != nil {
		t.Fatalf("intruder's client: %v", err)
	}
	defer intruder.Close()
	if err := alice.Ping(ctx); err != nil {
		t.Fatalf("alice's client: %v", err)
	}
	if err := intruder.Ping(ctx); err != nil {
		t.Fatalf("intruder's client: %v", err)
	}
	aliceAtLeader, aliceAtIssuer := alice.Broker(int(leader.ID())), alice.Broker(int(issuer.ID()))
	intruderAtLeader, intruderAtIssuer := intruder.Broker(int(leader.ID())), intruder.Broker(int(issuer.ID()))

	id, epoch := initProducerIDOn(t, ctx, aliceAtIssuer, -1, -1)
	acked := []string{"alice-0"}
	if _, err := produceOn(t, ctx, aliceAtLeader, topic, id, epoch, 0, acked[0]); err != nil {
		t.Fatalf("alice's first batch, under the id broker %d handed out, to the leader %d: got %v, want no error", issuer.ID(), leader.ID(), err)
	}

	accepted := attackProducer(t, ctx, intruderAtLeader, topic, id, epoch)
	for _, br := range []*kgo.Broker{intruderAtLeader, intruderAtIssuer} {
		if bumpedID, bumped := initProducerIDOn(t, ctx, br, id, epoch); bumpedID == id {
			t.Errorf("the intruder's InitProducerID bump of alice's id %d epoch %d: got id %d epoch %d, want a fresh id", id, epoch, bumpedID, bumped)
		}
	}

	for seq := int32(1); seq <= 5; seq++ {
		value := fmt.Sprintf("alice-%d", seq)
		if _, err := produceOn(t, ctx, aliceAtLeader, topic, id, epoch, seq, value); err != nil {
			t.Fatalf("alice's batch at sequence %d: got %v, want no error", seq, err)
		}
		acked = append(acked, value)
	}
	end := leader.replicas.PartitionFor(topic, 0).Log().EndOffset()
	got := readPartition(t, ctx, seeds, topic, end)
	t.Logf("intruder: %d of its batches under alice's id written; alice (id from broker %d, leader %d): %d acknowledged, %d of them in the log of %d records",
		accepted, issuer.ID(), leader.ID(), len(acked), countIn(got, acked), len(got))
	checkAllRead(t, got, acked)
	if accepted > 0 {
		t.Errorf("the intruder's batches under alice's producer id: got %d written, want none", accepted)
	}
	heap.checkHeapGrowth(t, "produce under another principal's producer id, across brokers", hostileHeapLimit)
	checkServes(t, leader)
}

// hostileProducerIDSeeds returns FuzzRequest's seeds of the producer id
// attacks: Produce under producer ids not handed out (0, 1 and a signed
// one's shape, counter<<32 | a made-up mac) with sequences 0 to 4, and
// InitProducerId asking to bump the epoch of such ids.
func hostileProducerIDSeeds(tb testing.TB) []requestSeed {
	tb.Helper()
	var seeds []requestSeed
	for _, id := range []int64{0, 1, 1<<32 | 0xdeadbeef} {
		for seq := range int32(5) {
			req := producerIDRequest(fuzzTopic, id, 0, seq, fmt.Sprintf("forged-%d", seq))
			req.SetVersion(8)
			seeds = append(seeds, requestSeed{key: req.Key(), version: req.GetVersion(), body: req.AppendTo(nil)})
		}
		init := kmsg.NewPtrInitProducerIDRequest()
		init.SetVersion(4)
		init.ProducerID, init.ProducerEpoch = id, 0
		seeds = append(seeds, requestSeed{key: init.Key(), version: init.GetVersion(), body: init.AppendTo(nil)})
	}
	return seeds
}

// TestLegacyProducerIDKeepsWriting is the upgrade of a cluster to signed
// producer ids: a producer holding a legacy id (7), handed out before ids
// were signed, has written to a partition (the batch goes to the log
// past the produce path, as before the upgrade). It keeps writing there
// with its next sequences, and at its epoch plus one, as franz-go resends
// after an error (it bumps its epoch locally rather than ask for a new
// id); a legacy id that never wrote to the partition (8) is refused with
// UNKNOWN_PRODUCER_ID, and so is id 7 on another partition.
func TestLegacyProducerIDKeepsWriting(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "upgraded"
	createLocalTopic(t, b, topic, 2)
	const legacyID = 7
	p := b.replicas.PartitionFor(topic, 0)
	if _, _, err := b.replicas.AppendAsLeader(p, kafkatest.EncodeBatch(time.Now().UnixMilli(), legacyID, 0, 0, []byte("before")), false, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("append the legacy producer's batch written before the upgrade: %v", err)
	}

	for seq := int32(1); seq <= 3; seq++ {
		if _, err := produceAsProducer(t, b, topic, legacyID, 0, seq, fmt.Sprintf("after-%d", seq)); err != nil {
			t.Fatalf("legacy producer %d at sequence %d: got %v, want no error", legacyID, seq, err)
		}
	}
	if _, err := produceAsProducer(t, b, topic, legacyID, 1, 0, "bumped"); err != nil {
		t.Fatalf("legacy producer %d at epoch 1 (a local bump): got %v, want no error", legacyID, err)
	}
	if _, err := produceAsProducer(t, b, topic, legacyID+1, 0, 0, "unknown"); err != kerr.UnknownProducerID {
		t.Fatalf("legacy id %d that never wrote: got %v, want UNKNOWN_PRODUCER_ID", legacyID+1, err)
	}
	req := producerIDRequest(topic, legacyID, 1, 1, "elsewhere")
	req.Topics[0].Partitions[0].Partition = 1
	if _, err := producePartitionError(t, askBroker[*kmsg.ProduceResponse](t, b, req)); err != kerr.UnknownProducerID {
		t.Fatalf("legacy id %d on a partition it never wrote to: got %v, want UNKNOWN_PRODUCER_ID", legacyID, err)
	}
	if end := p.Log().EndOffset(); end != 5 {
		t.Fatalf("log end offset: got %d, want 5 (the legacy producer's 5 records)", end)
	}
	checkServes(t, b)
}
