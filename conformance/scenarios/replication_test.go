package scenarios

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// The replication scenarios S1–S10 of issue 5 (DESIGN §1 R2–R8, §6), each
// a named test run on zk, etcd and raft with brokers as real processes.
// Their steps are the scenario's steps; what a replica holds is read from
// its segment files (cluster.Broker.ReadLog), what a consumer sees through
// a kgo consumer, and what the cluster decided from every live broker's
// Metadata.

// TestS1AcksAllEveryReplicaHasTheBatch: acks=all with replication factor
// 3. When the ack of a batch arrives, all three replicas' logs already
// hold it, at the offset the ack names: the leader answers only when the
// HW passes the batch, and the HW is the least LEO over the ISR.
func TestS1AcksAllEveryReplicaHasTheBatch(t *testing.T) {
	const batches = 10
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		createTopic(t, c, "s1", 1, 3)
		p := partitionState(t, c, 1, "s1", 0)
		t.Logf("s1/0: leader %d, replicas %v, ISR %v", p.Leader, p.Replicas, p.ISR)
		cl := kafkaClient(t, c, acksAll...)
		for i, value := range values("s1-"+backend, batches) {
			// Produce one batch with acks=all and wait for its ack.
			offset := produceValues(t, cl, "s1", 0, value)[0]
			// At once, with no wait: every replica's segment files hold it.
			for _, id := range p.Replicas {
				if recs := stored(t, c, id, "s1", 0); !holds(recs, offset, value) {
					t.Fatalf("batch %d %q acknowledged at offset %d: broker %d's log holds %v, want the batch there", i, value, offset, id, recs)
				}
			}
		}
		t.Logf("%s: %d batches acknowledged with acks=all; at each ack all of %v held it on disk", backend, batches, p.Replicas)
	})
}

// TestS2PausedFollowerLeavesAndRejoinsISR: a follower frozen (SIGSTOP)
// longer than replica.lag.time.max.ms (2 s) leaves the ISR — its leader
// shrinks it through AlterPartition while the follower's coordination
// session (10 s here) is still alive — and acks=all carries on with the
// smaller ISR. Resumed (SIGCONT), the follower catches up and rejoins:
// the ISR is full again and its log holds what was written while it was
// frozen.
func TestS2PausedFollowerLeavesAndRejoinsISR(t *testing.T) {
	const lagMax = 2 * time.Second
	const session = 10 * time.Second
	eachBackend(t, func(t *testing.T, backend string) {
		c := startClusterWith(t, backend, 3, func(cfg *cluster.Config) { cfg.SessionTimeout = session },
			fmt.Sprintf("replica.lag.time.max.ms=%d", lagMax.Milliseconds()))
		// The frozen follower is not the controller, which must stay up to
		// take the leader's AlterPartition.
		ctrl := controller(t, c)
		follower, leader := others(c, ctrl)[0], others(c, ctrl)[1]
		createAssigned(t, c, "s2", [][]int32{{leader, follower, ctrl}})
		waitPartition(t, c, "s2", 0, leader, []int32{leader, follower, ctrl})
		cl := kafkaClient(t, c, acksAll...)
		before := produceValues(t, cl, "s2", 0, "s2-before")

		t.Logf("step 1: freeze follower %d (SIGSTOP)", follower)
		if err := c.Broker(follower).Pause(); err != nil {
			t.Fatal(err)
		}
		pausedAt := time.Now()
		// A follower is out of sync only once the leader has records it
		// lacks (as in Kafka: a follower at the leader's log end is caught
		// up however long ago it fetched): this acks=all record waits for
		// the frozen follower until the leader drops it.
		during := values("s2-during", 3)
		firstDone := produceAsync(cl, "s2", 0, during[0])
		t.Logf("step 2: after replica.lag.time.max.ms (%v) the leader drops it from the ISR", lagMax)
		waitEvery(t, c, session, fmt.Sprintf("follower %d out of the ISR of s2/0 while its session lives", follower), func(md *cluster.Metadata) error {
			p, _ := md.Partition("s2", 0)
			if p.Leader != leader || slices.Contains(p.ISR, follower) || len(p.ISR) != 2 {
				return fmt.Errorf("s2/0: leader %d ISR %v, want leader %d and the ISR without %d", p.Leader, p.ISR, leader, follower)
			}
			if !slices.Contains(md.Brokers, follower) {
				return cluster.Permanent(fmt.Errorf("brokers %v: frozen broker %d's session ended before the ISR shrank; the shrink must come from the lag", md.Brokers, follower))
			}
			return nil
		}, "s2")
		shrunk := time.Since(pausedAt)
		if shrunk < lagMax {
			t.Fatalf("follower %d left the ISR %v after it froze, want no sooner than replica.lag.time.max.ms %v", follower, shrunk, lagMax)
		}
		t.Logf("%s: follower %d left the ISR %v after it froze (replica.lag.time.max.ms %v); its session lives on", backend, follower, shrunk.Round(time.Millisecond), lagMax)

		t.Log("step 3: acks=all carries on with the smaller ISR")
		first := waitAck(t, "the acks=all record produced while the follower froze", firstDone)
		if first.err != nil {
			t.Fatalf("acks=all record produced while follower %d froze: %v, want it acknowledged once the ISR shrank", follower, first.err)
		}
		t.Logf("%s: the acks=all record produced as the follower froze was acknowledged %v after the freeze", backend, first.at.Sub(pausedAt).Round(time.Millisecond))
		offsets := append([]int64{first.offset}, produceValues(t, cl, "s2", 0, during[1:]...)...)
		if frozen := time.Since(pausedAt); frozen > session {
			t.Fatalf("the follower was frozen %v, longer than its session timeout %v: the test cannot tell a lag shrink from a session expiry", frozen, session)
		}

		t.Logf("step 4: resume follower %d (SIGCONT): it catches up and rejoins the ISR", follower)
		if err := c.Broker(follower).Resume(); err != nil {
			t.Fatal(err)
		}
		resumedAt := time.Now()
		waitPartition(t, c, "s2", 0, leader, []int32{leader, follower, ctrl})
		t.Logf("%s: follower %d back in the ISR %v after SIGCONT", backend, follower, time.Since(resumedAt).Round(time.Millisecond))
		want := []record{{before[0], "s2-before"}}
		for i, v := range during {
			want = append(want, record{offsets[i], v})
		}
		waitStored(t, c, follower, "s2", 0, want)
	})
}

// TestS3KilledFollowerTruncatesAndRejoins: a follower killed (SIGKILL)
// and restarted truncates its log before it fetches again — in hw mode
// to its checkpointed HW (the seeds' rule, R7), in epoch mode to the end
// of its last leader epoch as the leader reports it (KIP-101/279), in
// fetch mode where the leader's answer to its first fetch says its log
// parts from the leader's — catches up and rejoins the ISR.
//
// replica.fetch.wait.max.ms=20000 makes the follower hold the last record
// without the HW covering it (the leader answers a waiting fetch early
// only for new records), so there is something above its HW: hw mode cuts
// that record and fetches it again, epoch and fetch mode keep it.
func TestS3KilledFollowerTruncatesAndRejoins(t *testing.T) {
	for _, mode := range []string{"hw", "epoch", "fetch"} {
		t.Run(mode, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, backend string) {
				testS3(t, backend, mode)
			})
		})
	}
}

func testS3(t *testing.T, backend, mode string) {
	const n = 5
	c := startCluster(t, backend, 3,
		"replication.truncation="+mode,
		"replica.fetch.wait.max.ms=20000",
		"replica.lag.time.max.ms=60000",
		"replica.high.watermark.checkpoint.interval.ms=100")
	ctrl := controller(t, c)
	follower, leader := others(c, ctrl)[0], others(c, ctrl)[1]
	createAssigned(t, c, "s3", [][]int32{{leader, follower, ctrl}})
	waitPartition(t, c, "s3", 0, leader, []int32{leader, follower, ctrl})
	cl := kafkaClient(t, c, acksAll...)

	t.Logf("step 1: produce %d records with acks=all; follower %d holds all, its HW covers %d", n, follower, n-1)
	vals := values("s3", n)
	offsets := produceValues(t, cl, "s3", 0, vals...)
	if !slices.Equal(offsets, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("offsets %v, want 0..4", offsets)
	}
	var hw int64
	err := cluster.WaitFor(context.Background(), settle, func() error {
		got, ok, err := c.Broker(follower).CheckpointedHW("s3", 0)
		if err != nil || !ok || got != n-1 {
			return fmt.Errorf("follower %d checkpointed HW %d (found %v, %v), want %d", follower, got, ok, err, n-1)
		}
		hw = got
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStored(t, c, follower, "s3", 0, []record{{n - 1, vals[n-1]}})

	t.Logf("step 2: kill follower %d (SIGKILL) with HW %d and log end %d", follower, hw, n)
	if err := c.Broker(follower).Kill(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := c.Broker(follower).CheckpointedHW("s3", 0); got != hw {
		t.Fatalf("follower %d's HW checkpoint after the kill: %d, want %d", follower, got, hw)
	}
	since := len(truncations(c.Broker(follower), "s3", 0))

	t.Logf("step 3: restart it: it truncates (%s mode)", mode)
	if err := c.Broker(follower).Start(); err != nil {
		t.Fatal(err)
	}
	if mode == "hw" {
		// hw: to its checkpointed HW, cutting the record above it.
		tr := waitTruncation(t, c.Broker(follower), "s3", 0, since)
		t.Logf("%s: follower %d logged: truncated follower log: partition=s3-0 mode=%s offset=%d log_end=%d", backend, follower, tr.mode, tr.offset, tr.logEnd)
		if want := (truncation{mode: "hw", offset: hw, logEnd: n, reason: tr.reason}); tr != want {
			t.Fatalf("truncation %+v, want %+v", tr, want)
		}
	}

	t.Log("step 4: it catches up and rejoins the ISR; more records reach it")
	more := values("s3-after", 2)
	moreOffsets := produceValues(t, cl, "s3", 0, more...)
	waitPartition(t, c, "s3", 0, leader, []int32{leader, follower, ctrl})
	if mode != "hw" {
		// epoch: to where the leader says the follower's last epoch ends,
		// its log end n; fetch: the leader finds the follower's fetch
		// continues its log. Nothing is cut, so no truncation is logged,
		// and the record above its HW was kept, not fetched again.
		if trs := truncations(c.Broker(follower), "s3", 0); len(trs) != since {
			t.Fatalf("%s mode: follower %d truncated %+v, want no cut: the leader's epoch ends at %d, its log end", mode, follower, trs[since:], n)
		}
		t.Logf("%s: follower %d, %s mode: the leader's epoch ends at %d = its log end, nothing cut (its HW was %d)", backend, follower, mode, n, hw)
	}
	var all []record
	for i, v := range vals {
		all = append(all, record{offsets[i], v})
	}
	for i, v := range more {
		all = append(all, record{moreOffsets[i], v})
	}
	waitStored(t, c, follower, "s3", 0, all)
	if got := stored(t, c, follower, "s3", 0); len(got) != len(all) {
		t.Fatalf("follower %d holds %v, want exactly %v", follower, got, all)
	}
}

// TestS4LeaderKilledUnderLoad: a producer writes sequentially numbered
// records with acks=all while a consumer reads the partition; the leader
// is killed (SIGKILL). The new leader comes from the ISR, every
// acknowledged record is in the log after the failover at the offset its
// ack named, and every record the consumer read is still there at the
// offset it read it from (a consumer sees only what is below the HW,
// which every ISR member holds).
func TestS4LeaderKilledUnderLoad(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		ctrl := controller(t, c)
		leader := others(c, ctrl)[0]
		replicas := []int32{leader, others(c, ctrl)[1], ctrl}
		createAssigned(t, c, "s4", [][]int32{replicas})
		before := waitLeader(t, c, "s4", 0, "s4/0 led with a full ISR", func(p cluster.Partition) error {
			if p.Leader != leader || len(p.ISR) != 3 {
				return errors.New("not yet")
			}
			return nil
		})

		t.Log("step 1: a producer (acks=all) and a consumer run")
		load := startLoad(t, c, "s4", 0)
		load.waitAcked(t, 20)

		t.Logf("step 2: kill leader %d (SIGKILL)", leader)
		killedAt := time.Now()
		if err := c.Broker(leader).Kill(); err != nil {
			t.Fatal(err)
		}
		ackedAtKill := load.ackedCount()

		t.Log("step 3: a new leader from the ISR; the producer carries on")
		after := waitLeader(t, c, "s4", 0, "a new leader of s4/0 from its ISR", func(p cluster.Partition) error {
			if p.Leader == leader || p.Leader < 0 || !slices.Contains(before.ISR, p.Leader) {
				return fmt.Errorf("want a leader from %v other than %d", before.ISR, leader)
			}
			return nil
		})
		load.waitAcked(t, ackedAtKill+20)
		acked, read := load.stop(t)
		t.Logf("%s: broker %d leads after %v (epoch %d -> %d); %d records acknowledged (%d before the kill), the consumer read %d",
			backend, after.Leader, time.Since(killedAt).Round(time.Millisecond), before.LeaderEpoch, after.LeaderEpoch, len(acked), ackedAtKill, len(read))

		t.Log("step 4: every acknowledged record and every record read is in the final log, at its offset")
		final := readPartition(t, c, "s4", 0)
		for _, a := range acked {
			if !holds(final, a.offset, a.value) {
				t.Errorf("acknowledged record %v is not in the final log", a)
			}
		}
		for _, r := range read {
			if !holds(final, r.offset, r.value) {
				t.Errorf("record %v was read by the consumer but is not in the final log", r)
			}
		}
		if t.Failed() {
			t.Fatalf("final log: %v", final)
		}
		t.Logf("%s: final log of %d records holds all %d acknowledged and all %d read", backend, len(final), len(acked), len(read))
	})
}

// TestS5MinInsyncReplicas: min.insync.replicas=2 (a topic config) with
// replication factor 3. With one follower killed the ISR has two members
// and acks=all works; with both killed it has one: acks=all is refused up
// front with NOT_ENOUGH_REPLICAS (nothing appended), while acks=1 still
// works.
func TestS5MinInsyncReplicas(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, brokersFor(backend, true))
		// The leader is the controller, so the two killed followers take
		// neither the controller nor (on Raft, with 5 voters) the majority.
		leader := controller(t, c)
		f1, f2 := others(c, leader)[0], others(c, leader)[1]
		createAssignedWith(t, c, "s5", [][]int32{{leader, f1, f2}}, map[string]string{"min.insync.replicas": "2"})
		waitPartition(t, c, "s5", 0, leader, []int32{leader, f1, f2})
		if err := produceRaw(t, c, leader, "s5", 0, -1, "s5-isr-3"); err != nil {
			t.Fatalf("acks=all with ISR of 3: %v", err)
		}

		t.Logf("step 1: kill follower %d: ISR [%d %d], acks=all still works", f1, leader, f2)
		if err := c.Broker(f1).Kill(); err != nil {
			t.Fatal(err)
		}
		waitPartition(t, c, "s5", 0, leader, []int32{leader, f2})
		if err := produceRaw(t, c, leader, "s5", 0, -1, "s5-isr-2"); err != nil {
			t.Fatalf("acks=all with ISR of 2 = min.insync.replicas: %v", err)
		}

		t.Logf("step 2: kill follower %d: ISR [%d]", f2, leader)
		if err := c.Broker(f2).Kill(); err != nil {
			t.Fatal(err)
		}
		waitPartition(t, c, "s5", 0, leader, []int32{leader})

		t.Log("step 3: acks=all gets NOT_ENOUGH_REPLICAS and writes nothing")
		if err := produceRaw(t, c, leader, "s5", 0, -1, "s5-refused"); !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("acks=all with ISR of 1 < min.insync.replicas 2: got %v, want NOT_ENOUGH_REPLICAS", err)
		}
		if at := offsetsOf(stored(t, c, leader, "s5", 0), "s5-refused"); len(at) != 0 {
			t.Fatalf("the refused record is in the leader's log at %v, want it refused before the append", at)
		}

		t.Log("step 4: acks=1 still works")
		if err := produceRaw(t, c, leader, "s5", 0, 1, "s5-acks-1"); err != nil {
			t.Fatalf("acks=1 with ISR of 1: %v", err)
		}
		offset := produceValues(t, kafkaClient(t, c, acksLeader...), "s5", 0, "s5-acks-1-kgo")[0]
		final := readPartition(t, c, "s5", 0)
		if !holds(final, offset, "s5-acks-1-kgo") || len(offsetsOf(final, "s5-acks-1")) != 1 {
			t.Fatalf("final log %v, want both acks=1 records", final)
		}
		t.Logf("%s: ISR [%d]: acks=all refused with NOT_ENOUGH_REPLICAS, acks=1 written (log %v)", backend, leader, final)
	})
}

// produceRaw sends one Produce request with one record, value, to broker
// id for topic/partition with acks, and returns the partition's error
// (nil when written). It speaks kmsg directly, so that a retriable error
// such as NOT_ENOUGH_REPLICAS is seen instead of retried.
func produceRaw(t *testing.T, c *cluster.Cluster, id int32, topic string, partition int32, acks int16, value string) error {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, encodeBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// kgo sends a raw ProduceRequest with its client's acks, whatever
	// the request says: a client per acks setting.
	requiredAcks := kgo.AllISRAcks()
	if acks == 1 {
		requiredAcks = kgo.LeaderAck()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(id).Addr), kgo.RequiredAcks(requiredAcks), kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))
	if err != nil {
		t.Fatalf("client for broker %d: %v", id, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("produce to broker %d: %v", id, err)
	}
	for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range rt.Partitions {
			return kerr.ErrorForCode(rp.ErrorCode)
		}
	}
	t.Fatalf("produce to broker %d: no partition in the response", id)
	return nil
}

// encodeBatch returns an uncompressed v2 record batch of one record with
// value, with its CRC-32C, as a producer sends it.
func encodeBatch(value string) []byte {
	rec := kmsg.Record{Value: []byte(value)}
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1) // Length 0 took one byte.
	records := rec.AppendTo(nil)
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: records,
	}
	batch.Length = int32(49 + len(records))
	raw := batch.AppendTo(nil)
	// The CRC covers everything after it: attributes to the end.
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
