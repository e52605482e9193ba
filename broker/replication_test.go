package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
)

// TestAcksAllReplicatesToEveryISRMember runs three in-process brokers: a
// topic with replication factor 3 keeps its full ISR while an acks=all
// producer writes, every acknowledged record is already in all three
// logs when its ack arrives (R4), the leader's high watermark reaches the
// log end, and the followers learn it.
func TestAcksAllReplicatesToEveryISRMember(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.ReplicaLagTimeMax = 10 * time.Second
	})
	ctx := testContext(t, 2*time.Minute)
	seeds := make([]string, len(brokers))
	for i, b := range brokers {
		seeds[i] = b.Addr().String()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("replicated"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "replicated"
	waitFor(t, ctx, "topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	waitFor(t, ctx, "every broker to hold the partition", func() bool {
		for _, b := range brokers {
			if b.replicas.PartitionFor(topic, 0) == nil {
				return false
			}
		}
		return true
	})

	var leader *Broker
	waitFor(t, ctx, "the partition's leader in the metadata", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		if len(parts) != 1 {
			return false
		}
		i := slices.IndexFunc(brokers, func(b *Broker) bool { return b.ID() == parts[0].leader })
		if i < 0 {
			return false
		}
		leader = brokers[i]
		return true
	})

	const records = 50
	for i := range records {
		res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("record-" + strconv.Itoa(i))})
		r, err := res.First()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		// The ack says every ISR member has the record: with a full
		// ISR, all three logs end past it.
		for _, b := range brokers {
			if end := b.replicas.PartitionFor(topic, 0).Log().EndOffset(); end <= r.Offset {
				t.Fatalf("record %d acked at offset %d, but broker %d's log ends at %d", i, r.Offset, b.ID(), end)
			}
		}
		// The leader published the high watermark past it before
		// answering: a consumer reading after the ack sees the record.
		if hw := leader.replicas.PartitionFor(topic, 0).HighWatermark(); hw <= r.Offset {
			t.Fatalf("record %d acked at offset %d, but leader %d's high watermark is %d", i, r.Offset, leader.ID(), hw)
		}
	}
	_, _, parts := metadataOf(t, brokers[0], topic)
	if len(parts) != 1 || len(parts[0].isr) != 3 || parts[0].leader != leader.ID() {
		t.Fatalf("partition after %d acks=all produces: %+v, want an ISR of 3 and leader %d", records, parts, leader.ID())
	}
	if hw := leader.replicas.PartitionFor(topic, 0).HighWatermark(); hw != records {
		t.Fatalf("leader %d high watermark %d, want %d", leader.ID(), hw, records)
	}
	waitFor(t, ctx, "followers to learn the high watermark", func() bool {
		for _, b := range brokers {
			if b.replicas.PartitionFor(topic, 0).HighWatermark() != records {
				return false
			}
		}
		return true
	})

	// A consumer reads every record, once, in order.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()
	var got []string
	for len(got) < records {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := consumer.PollFetches(fctx)
		cancel()
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := fmt.Sprintf("record-%d", i); v != want {
			t.Fatalf("record %d is %q, want %q", i, v, want)
		}
	}
}

// TestAcksAllWaitsForEveryISRMember stops one follower's fetcher while it
// stays in the ISR (replica.lag.time.max.ms is long): an acks=all produce
// is written by the leader but answered REQUEST_TIMED_OUT at the
// request's timeout, because the high watermark cannot pass it; acks=1
// is answered at once; with min.insync.replicas above the ISR size,
// acks=all is refused with NOT_ENOUGH_REPLICAS and nothing is written.
func TestAcksAllWaitsForEveryISRMember(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.ReplicaLagTimeMax = time.Minute
	})
	ctx := testContext(t, 2*time.Minute)
	const topic = "waits"
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].Addr().String()))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitFor(t, ctx, "topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, topic)
		return err == nil && resp.Err == nil
	})
	var leader, lagging *Broker
	waitFor(t, ctx, "a leader with a full ISR", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		if len(parts) != 1 || len(parts[0].isr) != 3 {
			return false
		}
		for _, b := range brokers {
			if p := b.replicas.PartitionFor(topic, 0); p == nil {
				return false
			}
			switch {
			case b.ID() == parts[0].leader:
				leader = b
			case lagging == nil:
				lagging = b
			}
		}
		return leader != nil
	})
	lagging.manager().StopFetchers()

	produce := func(acks int16, timeout time.Duration, value string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = acks
		req.TimeoutMillis = int32(timeout.Milliseconds())
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(t, []byte(value))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := roundTrip(t, dialBroker(t, leader), req, 1).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	end := leader.replicas.PartitionFor(topic, 0).Log().EndOffset()
	start := time.Now()
	if code := produce(-1, 300*time.Millisecond, "waits"); code != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all with a follower not fetching: error %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
	t.Logf("acks=all answered REQUEST_TIMED_OUT after %v (request timeout 300ms)", time.Since(start).Round(time.Millisecond))
	if got := leader.replicas.PartitionFor(topic, 0).Log().EndOffset(); got != end+1 {
		t.Fatalf("leader log end %d after the timed-out produce, want %d: the leader writes before it waits", got, end+1)
	}
	if code := produce(1, 300*time.Millisecond, "leader only"); code != 0 {
		t.Fatalf("acks=1: error %v, want none", kerr.ErrorForCode(code))
	}

	// The ISR shrinks by the controller (the lagging broker's session
	// ends), below min.insync.replicas=3: acks=all writes nothing.
	if err := lagging.Close(); err != nil {
		t.Fatalf("close broker %d: %v", lagging.ID(), err)
	}
	waitFor(t, ctx, "the ISR to lose the closed broker", func() bool {
		_, _, parts := metadataOf(t, leader, topic)
		return len(parts) == 1 && len(parts[0].isr) == 2
	})
	end = leader.replicas.PartitionFor(topic, 0).Log().EndOffset()
	if code := produce(-1, time.Second, "refused"); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR 2 < min.insync.replicas 3: error %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if got := leader.replicas.PartitionFor(topic, 0).Log().EndOffset(); got != end {
		t.Fatalf("leader log end %d after a refused acks=all produce, want %d", got, end)
	}
}

// TestNumReplicaFetchersShareTheLeader runs three brokers with
// num.replica.fetchers=2: a follower fetches a leader's partitions over
// both fetchers, each partition from the one Kafka's hash names, and
// acks=all writes to every partition are acknowledged with the full ISR.
// (With as many fetchers as brokers, Kafka's hash and the round-robin
// assignment of leaders would give each leader's partitions one fetcher,
// on Kafka as here.)
func TestNumReplicaFetchersShareTheLeader(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.NumReplicaFetchers = 2
		c.ReplicaLagTimeMax = 10 * time.Second
	})
	ctx := testContext(t, 2*time.Minute)
	seeds := make([]string, len(brokers))
	for i, b := range brokers {
		seeds[i] = b.Addr().String()
	}
	const topic, partitions = "shared", 12
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitFor(t, ctx, "topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	for p := range int32(partitions) {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	for _, b := range brokers {
		ids := map[coord.BrokerID]map[int32]bool{}
		for _, f := range b.manager().Fetchers() {
			if want := replica.FetcherID(f.Partition.Topic, f.Partition.Partition, 2); f.ID != want {
				t.Errorf("broker %d fetches %s from fetcher %d, want %d", b.ID(), f.Partition, f.ID, want)
			}
			if ids[f.Leader] == nil {
				ids[f.Leader] = map[int32]bool{}
			}
			ids[f.Leader][f.ID] = true
		}
		for leader, set := range ids {
			if len(set) < 2 {
				t.Errorf("broker %d fetches from leader %d over fetchers %v, want several", b.ID(), leader, set)
			}
		}
	}
	_, _, parts := metadataOf(t, brokers[0], topic)
	for _, p := range parts {
		if len(p.isr) != 3 {
			t.Fatalf("partition %+v after acks=all writes: want an ISR of 3", p)
		}
	}
}

// TestLeaderAnswersDivergingEpoch: a follower's Fetch v12 names the epoch
// of its log's last batch (LastFetchedEpoch). A leader elected after
// records of the old epoch answers a follower that claims more of that
// epoch than it has with DivergingEpoch: the old epoch and the offset
// where it ended here, and no records; a fetch that continues the
// leader's log gets the records of the new epoch and no diverging epoch.
func TestLeaderAnswersDivergingEpoch(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.ReplicaLagTimeMax = time.Minute
	})
	ctx := testContext(t, 2*time.Minute)
	const topic = "diverging"
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].Addr().String(), brokers[1].Addr().String(), brokers[2].Addr().String()),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitFor(t, ctx, "topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	byID := map[int32]*Broker{}
	for _, b := range brokers {
		byID[b.ID()] = b
	}
	var first partitionView
	waitFor(t, ctx, "a leader with a full ISR", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		if len(parts) != 1 || len(parts[0].isr) != 3 {
			return false
		}
		first = parts[0]
		return true
	})
	const before = 10
	for i := range before {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "old-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// The leader goes; another leads in a later epoch and writes.
	if err := byID[first.leader].Close(); err != nil {
		t.Fatalf("close leader %d: %v", first.leader, err)
	}
	var live *Broker
	for _, b := range brokers {
		if b.ID() != first.leader {
			live = b
			break
		}
	}
	var second partitionView
	waitFor(t, ctx, "a new leader", func() bool {
		_, _, parts := metadataOf(t, live, topic)
		if len(parts) != 1 || parts[0].leader < 0 || parts[0].leader == first.leader || parts[0].leaderEpoch <= first.leaderEpoch {
			return false
		}
		second = parts[0]
		return true
	})
	leader := byID[second.leader]
	var follower int32 = -1
	for _, id := range second.replicas {
		if id != first.leader && id != second.leader {
			follower = id
		}
	}
	const after = 5
	for i := range after {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "new-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce to the new leader: %v", err)
		}
	}

	fetch := func(lastFetchedEpoch int32, offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID = follower
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.CurrentLeaderEpoch = second.leaderEpoch
		rp.FetchOffset = offset
		rp.LastFetchedEpoch = lastFetchedEpoch
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := askBroker[*kmsg.FetchResponse](t, leader, req)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch answer %+v: want one partition", resp.Topics)
		}
		return resp.Topics[0].Partitions[0]
	}
	// Two records of the old epoch that the new leader never had.
	got := fetch(first.leaderEpoch, before+2)
	if got.ErrorCode != 0 || got.DivergingEpoch.Epoch != first.leaderEpoch || got.DivergingEpoch.EndOffset != before || len(got.RecordBatches) != 0 {
		t.Fatalf("fetch at %d after epoch %d: error %v, diverging epoch %+v, %d record bytes; want epoch %d ending at %d, no records",
			before+2, first.leaderEpoch, kerr.ErrorForCode(got.ErrorCode), got.DivergingEpoch, len(got.RecordBatches), first.leaderEpoch, before)
	}
	// The follower cut there: the same epoch at its end continues the
	// leader's log.
	got = fetch(first.leaderEpoch, before)
	if got.ErrorCode != 0 || got.DivergingEpoch.EndOffset != -1 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch at %d after epoch %d: error %v, diverging epoch %+v, %d record bytes; want records and no diverging epoch",
			before, first.leaderEpoch, kerr.ErrorForCode(got.ErrorCode), got.DivergingEpoch, len(got.RecordBatches))
	}
	if base := int64(binary.BigEndian.Uint64(got.RecordBatches)); base != before {
		t.Fatalf("records from offset %d, want %d", base, before)
	}
}
