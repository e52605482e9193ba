package scenarios

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tripodmq/tripod/internal/cluster"
)

// rackAwareSelector is the broker property that lets consumers read from
// a follower in their rack (KIP-392).
const rackAwareSelector = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"

// consumerBytesMetric is the record bytes a broker served to consumers
// (Kafka's BytesOutPerSec).
const consumerBytesMetric = "tripod_fetch_consumer_bytes_total"

// startZonedCluster starts three brokers on backend, one per rack (az1,
// az2, az3 for brokers 1, 2, 3), with the rack-aware replica selector
// and metrics.
func startZonedCluster(t *testing.T, backend string) *cluster.Cluster {
	t.Helper()
	return startClusterWith(t, backend, 3, func(cfg *cluster.Config) {
		cfg.Racks = []string{"az1", "az2", "az3"}
		cfg.Metrics = true
	}, rackAwareSelector)
}

// createFollowedTopic creates topic with one partition per leader of
// leaders, each replicated on all three brokers with broker 2 (az2) as a
// follower, and waits until each is led by its leader with all three
// replicas in sync.
func createFollowedTopic(t *testing.T, c *cluster.Cluster, topic string, leaders ...int32) {
	t.Helper()
	var assignment [][]int32
	for _, leader := range leaders {
		if leader == 2 {
			t.Fatalf("leader 2: want broker 2 (az2) a follower")
		}
		assignment = append(assignment, []int32{leader, 2, 6 - leader - 2})
	}
	createAssigned(t, c, topic, assignment)
	for p, leader := range leaders {
		waitLeader(t, c, topic, int32(p), fmt.Sprintf("leader %d with three in-sync replicas", leader), func(p cluster.Partition) error {
			if p.Leader != leader || len(p.ISR) != 3 {
				return fmt.Errorf("want leader %d and an ISR of 3", leader)
			}
			return nil
		})
	}
}

// produceInBatches produces values to topic/partition in order, acks=all,
// batch records per produce request, so a consumer reading a batch per
// fetch takes many fetches.
func produceInBatches(t *testing.T, cl *kgo.Client, topic string, partition int32, values []string, batch int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	for len(values) > 0 {
		n := min(batch, len(values))
		recs := make([]*kgo.Record, n)
		for i, v := range values[:n] {
			recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, partition, err)
		}
		values = values[n:]
	}
}

// consumerBytes returns every running broker's consumerBytesMetric by id.
func consumerBytes(t *testing.T, c *cluster.Cluster) map[int32]float64 {
	t.Helper()
	out := map[int32]float64{}
	for _, b := range c.Running() {
		v, err := b.Metric(context.Background(), consumerBytesMetric)
		if err != nil {
			t.Fatal(err)
		}
		out[b.ID] = v
	}
	return out
}

// readAll polls cl until it has read want[p] records of every partition
// p, each at its offset, and fails the test after settle. after, when not
// nil, is called after every poll with the records read so far.
func readAll(t *testing.T, cl *kgo.Client, want map[int32][]string, after func(read int)) map[int32][]record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	got := map[int32][]record{}
	total, wantTotal := 0, 0
	for _, vs := range want {
		wantTotal += len(vs)
	}
	for total < wantTotal {
		fetches := cl.PollRecords(ctx, 10)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records before %v: %v", total, wantTotal, ctx.Err(), got)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Logf("reading %s/%d: %v (retrying)", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], record{r.Offset, string(r.Value)})
			total++
		})
		if after != nil {
			after(total)
		}
	}
	return got
}

// checkRead fails the test unless got holds, for every partition, want's
// values at offsets 0, 1, ...: nothing skipped, nothing twice, in order.
func checkRead(t *testing.T, got map[int32][]record, want map[int32][]string) {
	t.Helper()
	for p, vs := range want {
		var wantRecs []record
		for i, v := range vs {
			wantRecs = append(wantRecs, record{int64(i), v})
		}
		if !slices.Equal(got[p], wantRecs) {
			t.Errorf("partition %d: read %v, want %v", p, got[p], wantRecs)
		}
	}
}

// TestFollowerFetchingReadsFromConsumersRack runs, on each backend, three
// brokers in racks az1, az2, az3 with the rack-aware replica selector
// (KIP-392) and a topic whose two partitions are led by brokers 1 and 3
// and followed by broker 2. A franz-go consumer in az2 (kgo.Rack) reads
// every record in order, and the bytes each broker served to consumers
// show that broker 2, in its rack, served them all: the leaders only
// pointed it there.
func TestFollowerFetchingReadsFromConsumersRack(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startZonedCluster(t, backend)
		const topic = "zoned"
		createFollowedTopic(t, c, topic, 1, 3)
		producer := kafkaClient(t, c)
		want := map[int32][]string{0: values("p0", 150), 1: values("p1", 150)}
		for p, vs := range want {
			produceInBatches(t, producer, topic, p, vs, 25)
		}

		consumer := kafkaClient(t, c, kgo.Rack("az2"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
		}))
		checkRead(t, readAll(t, consumer, want, nil), want)

		served := consumerBytes(t, c)
		if served[2] == 0 || served[1] != 0 || served[3] != 0 {
			t.Fatalf("record bytes served to consumers by broker: got %v, want all from broker 2 (az2) and none from the leaders 1 and 3", served)
		}
	})
}

// TestFollowerFetchingFallsBackWhenFollowerDies reads a partition led by
// broker 1 from its follower broker 2 (az2), as a consumer in az2 does,
// and kills broker 2 a third of the way through. The consumer goes back
// to the leader and reads the rest, and what was produced after the
// kill, with nothing skipped or read twice: franz-go stays with a
// preferred replica until RecheckPreferredReplicaInterval (30 minutes
// by default, 1 s here) and then asks the leader again, which no longer
// names a follower that left the cluster and the ISR, and serves az2
// itself.
func TestFollowerFetchingFallsBackWhenFollowerDies(t *testing.T) {
	c := startZonedCluster(t, "etcd")
	const topic = "zoned-failover"
	createFollowedTopic(t, c, topic, 1)
	producer := kafkaClient(t, c)
	before := values("before", 300)
	produceInBatches(t, producer, topic, 0, before, 10)

	consumer := kafkaClient(t, c, kgo.Rack("az2"),
		kgo.RecheckPreferredReplicaInterval(time.Second),
		kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	killed := false
	var servedAtKill map[int32]float64
	got := readAll(t, consumer, map[int32][]string{0: before}, func(read int) {
		if killed || read < len(before)/3 {
			return
		}
		servedAtKill = consumerBytes(t, c)
		if err := c.Broker(2).Kill(); err != nil {
			t.Fatalf("kill broker 2: %v", err)
		}
		killed = true
	})
	if !killed {
		t.Fatalf("read all %d records before a third of them was counted", len(before))
	}
	if servedAtKill[2] == 0 || servedAtKill[1] != 0 {
		t.Fatalf("record bytes served to consumers before the kill: got %v, want some from broker 2 (az2), none from the leader 1", servedAtKill)
	}
	after := values("after", 50)
	produceInBatches(t, producer, topic, 0, after, 10)
	rest := readAll(t, consumer, map[int32][]string{0: after}, nil)
	got[0] = append(got[0], rest[0]...)
	checkRead(t, got, map[int32][]string{0: append(before, after...)})
	if served := consumerBytes(t, c); served[1] == 0 {
		t.Fatalf("record bytes served to consumers after the kill: got %v, want some from the leader 1", served)
	}
	if sp := fetchFrom(t, c, 1, 0, "az2", topic, 0, 0); sp.PreferredReadReplica != -1 || len(sp.RecordBatches) == 0 {
		t.Fatalf("the leader, asked by az2 after the kill: got preferred read replica %d and %d record bytes, want -1 and records",
			sp.PreferredReadReplica, len(sp.RecordBatches))
	}
}

// fetchFrom sends broker id a consumer's read_uncommitted Fetch of
// topic/partition from offset, as a client in rack names it, at version
// (0: the highest both speak), and returns the partition's answer.
func fetchFrom(t *testing.T, c *cluster.Cluster, id int32, version int16, rack, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Rack = rack
	return fetchWith(t, c, id, version, req, topic, partition, offset)
}

// fetchWith is fetchFrom with req's rack and isolation level.
func fetchWith(t *testing.T, c *cluster.Cluster, id int32, version int16, req *kmsg.FetchRequest, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	opts := []kgo.Opt{kgo.SeedBrokers(c.Broker(id).Addr), kgo.RequestRetries(0)}
	if version > 0 {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(req.Key(), version)
		opts = append(opts, kgo.MaxVersions(versions))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch from broker %d: %v", id, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch from broker %d: got %d topics, want one with one partition", id, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// TestFollowerFetchingOnTheWire runs three brokers in racks az1, az2,
// az3 with the rack-aware selector and a partition led by broker 1 (az1)
// and followed by 2 (az2), and asks them as a consumer does: the leader
// points a consumer of az2 at broker 2 without records and serves one of
// its own rack; broker 2 serves up to its high watermark and answers an
// offset past its log OFFSET_OUT_OF_RANGE and a Fetch older than v11
// NOT_LEADER_OR_FOLLOWER, and serves read_committed up to its last
// stable offset; broker 3, holding no replica of another topic, answers
// NOT_LEADER_OR_FOLLOWER. Then kcat (librdkafka) with client.rack=az2
// reads the partition from broker 2.
func TestFollowerFetchingOnTheWire(t *testing.T) {
	c := startZonedCluster(t, "raft")
	const topic = "zoned-wire"
	createFollowedTopic(t, c, topic, 1)
	want := values("wire", 40)
	produceInBatches(t, kafkaClient(t, c), topic, 0, want, 10)
	n := int64(len(want))

	t.Run("leader points az2 at broker 2", func(t *testing.T) {
		sp := fetchFrom(t, c, 1, 0, "az2", topic, 0, 0)
		if sp.ErrorCode != 0 || sp.PreferredReadReplica != 2 || len(sp.RecordBatches) != 0 {
			t.Fatalf("got error %v, preferred read replica %d and %d record bytes, want broker 2 and no records",
				kerr.ErrorForCode(sp.ErrorCode), sp.PreferredReadReplica, len(sp.RecordBatches))
		}
	})
	t.Run("leader serves its own rack", func(t *testing.T) {
		sp := fetchFrom(t, c, 1, 0, "az1", topic, 0, 0)
		if sp.ErrorCode != 0 || sp.PreferredReadReplica != -1 || len(sp.RecordBatches) == 0 {
			t.Fatalf("got error %v, preferred read replica %d and %d record bytes, want records and -1",
				kerr.ErrorForCode(sp.ErrorCode), sp.PreferredReadReplica, len(sp.RecordBatches))
		}
	})
	t.Run("follower serves up to its high watermark", func(t *testing.T) {
		err := cluster.WaitFor(context.Background(), settle, func() error {
			sp := fetchFrom(t, c, 2, 0, "az2", topic, 0, 0)
			if sp.ErrorCode != 0 || sp.HighWatermark != n || len(sp.RecordBatches) == 0 {
				return fmt.Errorf("got error %v, high watermark %d and %d record bytes, want records and %d",
					kerr.ErrorForCode(sp.ErrorCode), sp.HighWatermark, len(sp.RecordBatches), n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if sp := fetchFrom(t, c, 2, 0, "az2", topic, 0, n); sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 {
			t.Fatalf("at the high watermark: got error %v and %d record bytes, want none", kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches))
		}
	})
	t.Run("follower serves read_committed up to its last stable offset", func(t *testing.T) {
		req := kmsg.NewPtrFetchRequest()
		req.Rack, req.IsolationLevel = "az2", 1
		sp := fetchWith(t, c, 2, 0, req, topic, 0, 0)
		if sp.ErrorCode != 0 || sp.LastStableOffset != n || len(sp.RecordBatches) == 0 || sp.AbortedTransactions == nil {
			t.Fatalf("got error %v, last stable offset %d, %d record bytes and aborted transactions %v, want records, %d and an empty list",
				kerr.ErrorForCode(sp.ErrorCode), sp.LastStableOffset, len(sp.RecordBatches), sp.AbortedTransactions, n)
		}
	})
	t.Run("broker without a replica refuses", func(t *testing.T) {
		createAssigned(t, c, "zoned-elsewhere", [][]int32{{1, 2}})
		if sp := fetchFrom(t, c, 3, 0, "az3", "zoned-elsewhere", 0, 0); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("got error %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(sp.ErrorCode))
		}
	})
	t.Run("follower refuses an offset past its log", func(t *testing.T) {
		if sp := fetchFrom(t, c, 2, 0, "az2", topic, 0, n+5); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("got error %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(sp.ErrorCode))
		}
	})
	t.Run("follower refuses Fetch v10", func(t *testing.T) {
		if sp := fetchFrom(t, c, 2, 10, "", topic, 0, 0); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("got error %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(sp.ErrorCode))
		}
	})
	t.Run("kcat with client.rack reads from broker 2", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("kcat is not installed (CI=true): %v", err)
			}
			t.Skipf("kcat is not installed: %v", err)
		}
		before := consumerBytes(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), settle)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(c.Bootstrap(), ","), "-t", topic, "-p", "0",
			"-o", "beginning", "-c", strconv.Itoa(len(want)), "-q", "-f", "%o %s\n", "-X", "client.rack=az2")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v\nstderr:\n%s", err, stderr.String())
		}
		var wantOut strings.Builder
		for i, v := range want {
			fmt.Fprintf(&wantOut, "%d %s\n", i, v)
		}
		if string(out) != wantOut.String() {
			t.Fatalf("kcat read:\n%s\nwant:\n%s", out, wantOut.String())
		}
		after := consumerBytes(t, c)
		if after[2] == before[2] || after[1] != before[1] {
			t.Fatalf("record bytes served to consumers: got %v before kcat and %v after, want kcat's from broker 2 (az2), none from the leader 1", before, after)
		}
	})
}
