package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAcksAllReplicatesToEveryISRMember runs three in-process brokers: a
// topic with replication factor 3 keeps its full ISR while an acks=all
// producer writes, every acknowledged record is already in all three
// logs when its ack arrives (R4), the leader's high watermark reaches the
// log end, and the followers learn it.
func TestAcksAllReplicatesToEveryISRMember(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *Config) {
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
			if b.partitionFor(topic, 0) == nil {
				return false
			}
		}
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
			if end := b.partitionFor(topic, 0).log.EndOffset(); end <= r.Offset {
				t.Fatalf("record %d acked at offset %d, but broker %d's log ends at %d", i, r.Offset, b.ID(), end)
			}
		}
	}
	_, _, parts := metadataOf(t, brokers[0], topic)
	if len(parts) != 1 || len(parts[0].isr) != 3 {
		t.Fatalf("partition after %d acks=all produces: %+v, want an ISR of 3", records, parts)
	}
	leader := brokers[slices.IndexFunc(brokers, func(b *Broker) bool { return b.ID() == parts[0].leader })]
	if hw := leader.partitionFor(topic, 0).highWatermark(); hw != records {
		t.Fatalf("leader %d high watermark %d, want %d", leader.ID(), hw, records)
	}
	waitFor(t, ctx, "followers to learn the high watermark", func() bool {
		for _, b := range brokers {
			if b.partitionFor(topic, 0).highWatermark() != records {
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
