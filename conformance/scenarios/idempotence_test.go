package scenarios

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// The idempotent producer across brokers: a producer id must be unique in
// the cluster, whichever broker hands it out. Two producers that got the
// same id (and epoch) from two brokers look like one producer to a
// partition: the second one's sequence 0 is taken for a retry of the
// first one's and answered with the first one's offset, so an
// acknowledged record is not in the log at all.

// TestTwoProducersOneID reproduces the reported bug directly. Step 1:
// InitProducerID once to each broker of a fresh cluster: three distinct
// ids. Step 2: producer A, knowing only broker 1, and producer B, knowing
// only broker 2, both idempotent with acks=all, write one record each to
// the same partition: both records are in the log, at distinct offsets,
// the ones their acks named.
func TestTwoProducersOneID(t *testing.T) {
	const topic = "two-producers"
	eachBackend(t, func(t *testing.T, backend string) {
		began := time.Now()
		c := startCluster(t, backend, 3)

		t.Log("step 1: InitProducerID once to each of the 3 brokers")
		got := map[int32]int64{}
		var ids []int64
		for _, b := range c.Brokers() {
			id, epoch := initProducerIDAt(t, c, b.ID)
			t.Logf("%s: broker %d handed out producer id %d epoch %d", backend, b.ID, id, epoch)
			got[b.ID] = id
			ids = append(ids, id)
		}
		if dups := duplicateIDs(ids); len(dups) != 0 {
			t.Errorf("producer ids by broker: got %v (ids %v handed out more than once), want 3 distinct ids", got, dups)
		}

		t.Log("step 2: producers A (seed broker 1) and B (seed broker 2) write one record each to partition 0")
		createTopic(t, c, topic, 1, 3)
		waitFullISR(t, c, topic, 1, 3)
		a := newIdemClient(t, c.Broker(1))
		b := newIdemClient(t, c.Broker(2))
		idA, epochA := a.producerID(t)
		idB, epochB := b.producerID(t)
		t.Logf("%s: producer A got id %d epoch %d from broker 1, producer B got id %d epoch %d from broker 2", backend, idA, epochA, idB, epochB)
		if idA == idB {
			t.Errorf("producer ids of A (from broker 1) and B (from broker 2): got %d and %d, want distinct ids", idA, idB)
		}
		offA := produceValues(t, a.cl, topic, 0, "from-A")[0]
		offB := produceValues(t, b.cl, topic, 0, "from-B")[0]
		t.Logf("%s: from-A acknowledged at offset %d, from-B at offset %d", backend, offA, offB)
		if offA == offB {
			t.Errorf("acknowledged offsets of from-A and from-B: got %d and %d, want distinct offsets", offA, offB)
		}

		recs := readPartition(t, c, topic, 0)
		for _, w := range []record{{offA, "from-A"}, {offB, "from-B"}} {
			if at := offsetsOf(recs, w.value); !slices.Equal(at, []int64{w.offset}) {
				t.Errorf("%s in %s/0: got it at offsets %v, want it once at its acknowledged offset %d (log %v)", w.value, topic, at, w.offset, recs)
			}
		}
		t.Logf("%s: log of %s/0: %v (%v)", backend, topic, recs, time.Since(began).Round(time.Millisecond))
	})
}

// TestIdempotentProducersThroughDifferentBrokers: three idempotent
// producers (kgo's default idempotence, acks=all), each knowing only one
// broker, so each gets its producer id from a different broker, write
// unique values to every partition of a topic with replication factor 3
// and min.insync.replicas=2, while the leader of a partition is killed
// (SIGKILL), replaced, restarted and back in every ISR, twice. Then a
// fresh consumer reads every partition: every acknowledged value is there
// exactly once, at the offset its ack named; no value is there twice; the
// three producer ids are distinct; and the ids every broker hands out
// after the restarts are new too.
func TestIdempotentProducersThroughDifferentBrokers(t *testing.T) {
	const (
		topic      = "idem"
		partitions = 3
		rounds     = 2
		progress   = 10 // acks per producer that show it carries on
	)
	eachBackend(t, func(t *testing.T, backend string) {
		began := time.Now()
		c := startCluster(t, backend, 3)
		brokers := others(c)
		var assignment [][]int32
		for p := range partitions {
			var replicas []int32
			for i := range brokers {
				replicas = append(replicas, brokers[(p+i)%len(brokers)])
			}
			assignment = append(assignment, replicas)
		}
		createAssignedWith(t, c, topic, assignment, map[string]string{"min.insync.replicas": "2"})
		waitFullISR(t, c, topic, partitions, len(brokers))

		t.Log("step 1: three idempotent producers, each seeded with one broker, write to every partition")
		var producers []*idemProducer
		var ids []int64
		for i, id := range brokers {
			p := startIdemProducer(t, c, "p"+strconv.Itoa(i+1), c.Broker(id), topic, partitions)
			t.Logf("%s: producer %s got producer id %d epoch %d from broker %d", backend, p.name, p.id, p.epoch, id)
			producers = append(producers, p)
			ids = append(ids, p.id)
		}
		if dups := duplicateIDs(ids); len(dups) != 0 {
			t.Errorf("producer ids of p1, p2, p3 (from brokers %v): got %v (ids %v more than once), want 3 distinct ids", brokers, ids, dups)
		}
		idemWaitProgress(t, producers, progress, "before the first kill")

		var killed []int32
		for round := 1; round <= rounds; round++ {
			partition, victim := idemPickVictim(t, c, topic, partitions, killed)
			killed = append(killed, victim)
			t.Logf("round %d: SIGKILL broker %d, leader of %s/%d", round, victim, topic, partition)
			killedAt := time.Now()
			if err := c.Broker(victim).Kill(); err != nil {
				t.Fatal(err)
			}
			waitLeader(t, c, topic, partition, fmt.Sprintf("a new leader of %s/%d", topic, partition), func(p cluster.Partition) error {
				if p.Leader < 0 || p.Leader == victim {
					return fmt.Errorf("got leader %d, want a live one other than %d", p.Leader, victim)
				}
				return nil
			})
			waitEvery(t, c, sessionTimeout+settle, fmt.Sprintf("every partition of %s led by a live broker", topic), func(md *cluster.Metadata) error {
				for _, p := range md.Partitions[topic] {
					if p.Leader < 0 || p.Leader == victim {
						return fmt.Errorf("%s/%d: got leader %d, want a live one other than %d", topic, p.Partition, p.Leader, victim)
					}
				}
				return nil
			}, topic)
			t.Logf("%s round %d: every partition led without broker %d %v after the kill", backend, round, victim, time.Since(killedAt).Round(time.Millisecond))
			idemWaitProgress(t, producers, progress, fmt.Sprintf("with broker %d down", victim))

			t.Logf("round %d: restart broker %d and wait until it is back in every ISR", round, victim)
			if err := c.Broker(victim).Start(); err != nil {
				t.Fatal(err)
			}
			waitRejoined(t, c, victim, topic)
			waitFullISR(t, c, topic, partitions, len(brokers))
			t.Logf("%s round %d: broker %d back in every ISR %v after the kill", backend, round, victim, time.Since(killedAt).Round(time.Millisecond))
			idemWaitProgress(t, producers, progress, fmt.Sprintf("after broker %d rejoined", victim))
		}

		t.Logf("step 3: InitProducerID to every broker, the restarted %v too: ids not handed out before", killed)
		for _, b := range c.Brokers() {
			id, _ := initProducerIDAt(t, c, b.ID)
			if slices.Contains(ids, id) {
				t.Errorf("InitProducerID to broker %d after the restarts: got id %d, want one not handed out before (%v)", b.ID, id, ids)
			}
			ids = append(ids, id)
		}
		t.Logf("%s: producer ids handed out: %v", backend, ids)

		t.Log("step 4: stop the producers; a fresh consumer reads every partition")
		for _, p := range producers {
			p.stop()
		}
		logs := map[int32][]record{}
		for p := range int32(partitions) {
			logs[p] = readPartition(t, c, topic, p)
		}
		const maxReported = 10
		var missing, duplicated int
		for p := range int32(partitions) {
			at := map[string][]int64{}
			for _, r := range logs[p] {
				at[r.value] = append(at[r.value], r.offset)
			}
			for _, v := range slices.Sorted(maps.Keys(at)) {
				if len(at[v]) > 1 {
					if duplicated++; duplicated <= maxReported {
						t.Errorf("value %q in %s/%d: got it at offsets %v, want it at most once", v, topic, p, at[v])
					}
				}
			}
			for _, pr := range producers {
				for _, a := range pr.ackedOn(p) {
					if got := at[a.value]; !slices.Equal(got, []int64{a.offset}) {
						if missing++; missing <= maxReported {
							t.Errorf("%q acknowledged to %s at %s/%d offset %d: got it at offsets %v (offset %d holds %s), want it exactly once at %d",
								a.value, pr.name, topic, p, a.offset, got, a.offset, valueAt(logs[p], a.offset), a.offset)
						}
					}
				}
			}
		}
		if missing > maxReported || duplicated > maxReported {
			t.Errorf("in all: got %d acknowledged values not exactly once at their offsets and %d values more than once, want 0 and 0 (first %d of each shown)", missing, duplicated, maxReported)
		}
		var acked, failed int
		for _, pr := range producers {
			a, f, lastErr := pr.counts()
			acked, failed = acked+a, failed+f
			id, epoch := pr.producerIDNow()
			t.Logf("%s: producer %s (seed broker %d): %d acknowledged, %d failed (last error %v); producer id %d epoch %d at the start, %d epoch %d at the end; InitProducerID answered by %v",
				backend, pr.name, pr.seed.ID, a, f, lastErr, pr.id, pr.epoch, id, epoch, pr.hook.answers())
		}
		var total int
		for p := range int32(partitions) {
			total += len(logs[p])
		}
		t.Logf("%s: %d records in %d partitions, %d acknowledged and %d failed produces; %d acknowledged values misplaced, %d values duplicated; %v in all",
			backend, total, partitions, acked, failed, missing, duplicated, time.Since(began).Round(time.Millisecond))
	})
}

// idemPace is how often each producer writes to each partition, and
// idemMaxPerPartition how many records it writes there at most: a few
// hundred records per producer over the scenario.
const (
	idemPace            = 25 * time.Millisecond
	idemMaxPerPartition = 400
)

// idemClient is an idempotent kgo client that knows one broker only, and
// the brokers that answered its InitProducerID requests.
type idemClient struct {
	seed *cluster.Broker
	cl   *kgo.Client
	hook *initProducerIDHook
}

// newIdemClient returns an idempotent acks=all client seeded with broker
// seed only, closed with the test.
func newIdemClient(t *testing.T, seed *cluster.Broker) *idemClient {
	t.Helper()
	hook := &initProducerIDHook{}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seed.Addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(settle),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.WithHooks(hook),
	)
	if err != nil {
		t.Fatalf("idempotent client seeded with broker %d: %v", seed.ID, err)
	}
	t.Cleanup(cl.Close)
	return &idemClient{seed: seed, cl: cl, hook: hook}
}

// producerID loads the client's producer id before it has produced or
// asked for metadata, so that kgo knows no broker but its seed and sends
// InitProducerID there; it fails the test when another broker answered.
func (c *idemClient) producerID(t *testing.T) (int64, int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	id, epoch, err := c.cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("producer id of the client seeded with broker %d: %v", c.seed.ID, err)
	}
	if got := c.hook.answers(); len(got) == 0 || got[0] != c.seed.Addr {
		t.Fatalf("InitProducerID of the client seeded with broker %d: got answers from %v, want the first from %s", c.seed.ID, got, c.seed.Addr)
	}
	return id, epoch
}

// producerIDNow returns the client's current producer id and epoch, or
// -1, -1 when it has none (its last one failed).
func (c *idemClient) producerIDNow() (int64, int16) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, epoch, err := c.cl.ProducerID(ctx)
	if err != nil {
		return -1, -1
	}
	return id, epoch
}

// initProducerIDHook records the address of every broker that answered an
// InitProducerID request, in order.
type initProducerIDHook struct {
	mu    sync.Mutex
	addrs []string
}

func (h *initProducerIDHook) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.InitProducerID) || e2e.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs = append(h.addrs, net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))))
}

func (h *initProducerIDHook) answers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.addrs)
}

// idemProducer writes values name-partition-seq to every partition of a
// topic, one record at a time per partition, through an idempotent
// client, and remembers what was acknowledged where.
type idemProducer struct {
	*idemClient
	name  string
	id    int64
	epoch int16

	done     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu      sync.Mutex
	acked   []idemAck
	failed  int
	lastErr error
}

// idemAck is one acknowledged record.
type idemAck struct {
	partition int32
	offset    int64
	value     string
}

// startIdemProducer loads a producer id through seed and starts writing
// to partitions 0..partitions-1 of topic; it stops with stop or the test.
func startIdemProducer(t *testing.T, c *cluster.Cluster, name string, seed *cluster.Broker, topic string, partitions int) *idemProducer {
	t.Helper()
	p := &idemProducer{idemClient: newIdemClient(t, seed), name: name, done: make(chan struct{})}
	p.id, p.epoch = p.producerID(t)
	for partition := range int32(partitions) {
		p.wg.Add(1)
		go p.run(topic, partition)
	}
	t.Cleanup(p.stop) // Runs before the client closes.
	return p
}

func (p *idemProducer) run(topic string, partition int32) {
	defer p.wg.Done()
	tick := time.NewTicker(idemPace)
	defer tick.Stop()
	for seq := 0; seq < idemMaxPerPartition; seq++ {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		value := p.name + "-" + strconv.Itoa(int(partition)) + "-" + strconv.Itoa(seq)
		rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}
		// No cancellation: an idempotent record in flight is settled by
		// its ack or its delivery timeout.
		err := p.cl.ProduceSync(context.Background(), rec).FirstErr()
		p.mu.Lock()
		if err != nil {
			p.failed++
			p.lastErr = err
		} else {
			p.acked = append(p.acked, idemAck{partition, rec.Offset, value})
		}
		p.mu.Unlock()
	}
}

// stop ends the producer's writes and waits for the records in flight.
func (p *idemProducer) stop() {
	p.stopOnce.Do(func() {
		close(p.done)
		p.wg.Wait()
	})
}

// counts returns how many records were acknowledged and failed, and the
// last error.
func (p *idemProducer) counts() (acked, failed int, lastErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked), p.failed, p.lastErr
}

// ackedOn returns the records acknowledged on partition.
func (p *idemProducer) ackedOn(partition int32) []idemAck {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []idemAck
	for _, a := range p.acked {
		if a.partition == partition {
			out = append(out, a)
		}
	}
	return out
}

// idemWaitProgress waits until every producer has n more acknowledged
// records than now. A producer that stalls is an error, not a stop: the
// final check of the log says more about why.
func idemWaitProgress(t *testing.T, producers []*idemProducer, n int, when string) {
	t.Helper()
	want := make([]int, len(producers))
	for i, p := range producers {
		acked, _, _ := p.counts()
		want[i] = acked + n
	}
	err := cluster.WaitFor(context.Background(), sessionTimeout+settle, func() error {
		for i, p := range producers {
			acked, failed, lastErr := p.counts()
			if acked < want[i] {
				return fmt.Errorf("producer %s: got %d acknowledged (%d failed, last error %v), want %d", p.name, acked, failed, lastErr, want[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("producers carrying on %s: %v", when, err)
	}
}

// idemPickVictim returns a partition of topic and its leader, preferring
// a leader not killed before.
func idemPickVictim(t *testing.T, c *cluster.Cluster, topic string, partitions int, killed []int32) (int32, int32) {
	t.Helper()
	md := metadata(t, c, c.Live()[0].ID, topic)
	var first cluster.Partition
	for p := range int32(partitions) {
		part, ok := md.Partition(topic, p)
		if !ok || part.Leader < 0 {
			t.Fatalf("%s/%d: got leader %d (listed %v), want a leader", topic, p, part.Leader, ok)
		}
		if p == 0 {
			first = part
		}
		if !slices.Contains(killed, part.Leader) {
			return p, part.Leader
		}
	}
	return 0, first.Leader
}

// waitFullISR waits until every live broker lists the partitions of topic
// each led and with an ISR of isr members.
func waitFullISR(t *testing.T, c *cluster.Cluster, topic string, partitions, isr int) {
	t.Helper()
	waitEvery(t, c, sessionTimeout+settle, fmt.Sprintf("every partition of %s led with %d replicas in its ISR", topic, isr), func(md *cluster.Metadata) error {
		parts := md.Partitions[topic]
		if len(parts) != partitions {
			return fmt.Errorf("%s: got %d partitions, want %d", topic, len(parts), partitions)
		}
		for _, p := range parts {
			if p.Leader < 0 || len(p.ISR) != isr {
				return fmt.Errorf("%s/%d: got leader %d ISR %v, want a leader and %d in the ISR", topic, p.Partition, p.Leader, p.ISR, isr)
			}
		}
		return nil
	}, topic)
}

// initProducerIDAt sends one InitProducerID (no transactional id) to
// broker id only and returns the producer id and epoch it handed out.
func initProducerIDAt(t *testing.T, c *cluster.Cluster, id int32) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = -1, -1
	req.TransactionTimeoutMillis = 60000
	resp, err := c.Request(context.Background(), id, req)
	if err != nil {
		t.Fatalf("InitProducerID to broker %d: %v", id, err)
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		t.Fatalf("InitProducerID to broker %d: got %v, want no error", id, err)
	}
	return r.ProducerID, r.ProducerEpoch
}

// duplicateIDs returns the ids that occur more than once in ids.
func duplicateIDs(ids []int64) []int64 {
	seen := map[int64]int{}
	var out []int64
	for _, id := range ids {
		if seen[id]++; seen[id] == 2 {
			out = append(out, id)
		}
	}
	return out
}

// valueAt describes what recs hold at offset.
func valueAt(recs []record, offset int64) string {
	for _, r := range recs {
		if r.offset == offset {
			return strconv.Quote(r.value)
		}
	}
	return "nothing"
}
