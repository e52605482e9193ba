package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// sessionTimeout is every broker's --session-timeout: the failure
// detection time the scenarios' bounds are built on.
const sessionTimeout = 2 * time.Second

// settle bounds waits that have no bound of their own in the scenario:
// topic creation, a broker coming back, a client's retries.
const settle = 30 * time.Second

// env holds the tripod binary and the shared ZooKeeper and etcd.
var env *cluster.Env

func TestMain(m *testing.M) {
	cluster.RunTests(m, "tripod-scenarios", func(e *cluster.Env) { env = e })
}

// eachBackend runs scenario as a subtest per backend: zk, etcd, raft.
func eachBackend(t *testing.T, scenario func(t *testing.T, backend string)) {
	for _, backend := range cluster.Backends {
		t.Run(backend, func(t *testing.T) { scenario(t, backend) })
	}
}

// startCluster runs n brokers on backend with the scenario's session
// timeout and extra properties, and waits until they serve.
func startCluster(t *testing.T, backend string, n int, sets ...string) *cluster.Cluster {
	t.Helper()
	return startClusterWith(t, backend, n, nil, sets...)
}

// startClusterWith is startCluster with the cluster's Config changed by
// edit (when not nil) before the brokers start: a longer session
// timeout, proxies.
func startClusterWith(t *testing.T, backend string, n int, edit func(*cluster.Config), sets ...string) *cluster.Cluster {
	t.Helper()
	if backend == "zk" {
		zkserver.Require(t)
	}
	cfg, err := env.Configure(backend, n)
	if err != nil {
		t.Fatalf("configure a %s cluster: %v", backend, err)
	}
	cfg.SessionTimeout = sessionTimeout
	cfg.Sets = sets
	if edit != nil {
		edit(&cfg)
	}
	return env.StartForTest(t, cfg)
}

// client returns a kgo client on every broker of c, closed with the test.
func client(t *testing.T, c *cluster.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// admin returns a kadm client on every broker of c, closed with the test.
func admin(t *testing.T, c *cluster.Cluster) *kadm.Client {
	t.Helper()
	return kadm.NewClient(client(t, c))
}

// createTopic creates a topic with Kafka's assignment through kadm and
// waits until every live broker sees all its partitions led.
func createTopic(t *testing.T, c *cluster.Cluster, name string, partitions int32, rf int16) {
	t.Helper()
	ctx := context.Background()
	adm := admin(t, c)
	tries := 0
	err := cluster.WaitFor(ctx, settle, func() error {
		tries++
		_, err := adm.CreateTopic(ctx, partitions, rf, nil, name)
		if tries > 1 && errors.Is(err, kerr.TopicAlreadyExists) {
			return nil // An earlier try that timed out created it.
		}
		if err != nil && !kerr.IsRetriable(err) {
			return cluster.Permanent(err)
		}
		return err
	})
	if err != nil {
		t.Fatalf("create topic %s (%d partitions, rf %d): %v", name, partitions, rf, err)
	}
	waitLed(t, c, name, int(partitions))
}

// createAssigned creates a topic with a manual replica assignment (the
// preferred leader first) and waits until every live broker sees all its
// partitions led.
func createAssigned(t *testing.T, c *cluster.Cluster, name string, assignment [][]int32) {
	t.Helper()
	createAssignedWith(t, c, name, assignment, nil)
}

// createAssignedWith is createAssigned with topic configs (e.g.
// min.insync.replicas, unclean.leader.election.enable).
func createAssignedWith(t *testing.T, c *cluster.Cluster, name string, assignment [][]int32, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(settle.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, kmsg.StringPtr(configs[k])
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	// A controller that loses its term under the request answers
	// REQUEST_TIMED_OUT or NOT_CONTROLLER: try again, and then take
	// TOPIC_ALREADY_EXISTS as the earlier try having done it.
	cl := client(t, c)
	tries := 0
	err := cluster.WaitFor(ctx, settle, func() error {
		tries++
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("CreateTopics answered %d topics, want 1", len(resp.Topics))
		}
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		if tries > 1 && errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		if err != nil && !kerr.IsRetriable(err) && !errors.Is(err, kerr.NotController) {
			return cluster.Permanent(err)
		}
		return err
	})
	if err != nil {
		t.Fatalf("create topic %s with assignment: %v", name, err)
	}
	waitLed(t, c, name, len(assignment))
}

// waitLed waits until every live broker lists n partitions of topic, each
// with a leader.
func waitLed(t *testing.T, c *cluster.Cluster, topic string, n int) {
	t.Helper()
	waitEvery(t, c, settle, fmt.Sprintf("topic %s has %d partitions, all led", topic, n), func(md *cluster.Metadata) error {
		parts := md.Partitions[topic]
		if len(parts) != n {
			return fmt.Errorf("topic %s: got %d partitions, want %d (topic error %v)", topic, len(parts), n, md.TopicErrs[topic])
		}
		for _, p := range parts {
			if p.Leader < 0 {
				return fmt.Errorf("%s/%d: no leader", topic, p.Partition)
			}
		}
		return nil
	}, topic)
}

// waitEvery waits up to timeout until check passes on the Metadata of
// every live broker, and fails the test naming what was awaited.
func waitEvery(t *testing.T, c *cluster.Cluster, timeout time.Duration, what string, check func(*cluster.Metadata) error, topics ...string) {
	t.Helper()
	ctx := context.Background()
	if err := cluster.WaitFor(ctx, timeout, func() error { return c.EveryLive(ctx, check, topics...) }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// metadata asks broker id for metadata of topics, failing the test on
// error.
func metadata(t *testing.T, c *cluster.Cluster, id int32, topics ...string) *cluster.Metadata {
	t.Helper()
	md, err := c.Metadata(context.Background(), id, topics...)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return md
}

// controller returns the controller that every live broker names.
func controller(t *testing.T, c *cluster.Cluster) int32 {
	t.Helper()
	ctx := context.Background()
	var id int32
	err := cluster.WaitFor(ctx, settle, func() error {
		id = -1
		return c.EveryLive(ctx, func(md *cluster.Metadata) error {
			b := c.Broker(md.ControllerID)
			if b == nil || !b.Running() || b.Paused() {
				return fmt.Errorf("controller %d: not a live broker", md.ControllerID)
			}
			if id >= 0 && md.ControllerID != id {
				return fmt.Errorf("controller %d, another broker says %d", md.ControllerID, id)
			}
			id = md.ControllerID
			return nil
		})
	})
	if err != nil {
		t.Fatalf("waiting for every live broker to name the same live controller: %v", err)
	}
	return id
}

// waitRejoined waits until a restarted broker has been sent the cluster's
// state by the controller: its own Metadata lists topic and names a live
// controller.
func waitRejoined(t *testing.T, c *cluster.Cluster, id int32, topic string) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), settle, func() error {
		md, err := c.Metadata(context.Background(), id, topic)
		if err != nil {
			return err
		}
		if b := c.Broker(md.ControllerID); b == nil || !b.Running() || b.Paused() {
			return fmt.Errorf("broker %d names controller %d, want a live broker", id, md.ControllerID)
		}
		if len(md.Partitions[topic]) == 0 {
			return fmt.Errorf("broker %d does not know topic %s yet (%v)", id, topic, md.TopicErrs[topic])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for broker %d to rejoin: %v", id, err)
	}
}

// others returns the ids of c's brokers other than the excluded ones.
func others(c *cluster.Cluster, excluded ...int32) []int32 {
	var out []int32
	for _, b := range c.Brokers() {
		if !slices.Contains(excluded, b.ID) {
			out = append(out, b.ID)
		}
	}
	return out
}

// producer produces to one partition with acks=all, one record at a time,
// and remembers when each was sent and acknowledged. Its goroutine ends
// with stop, which the test's cleanup calls too.
type producer struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu      sync.Mutex
	acked   []ack
	lastErr error
}

// ack is one acknowledged record.
type ack struct {
	sent, acked time.Time
	offset      int64
}

// startProducer starts producing to topic/partition through every broker.
func startProducer(t *testing.T, c *cluster.Cluster, topic string, partition int32) *producer {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(time.Minute),
		kgo.ProduceRequestTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatalf("producer client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{cl: cl, cancel: cancel}
	p.wg.Add(1)
	go p.run(ctx, topic, partition)
	t.Cleanup(p.stop)
	return p
}

func (p *producer) run(ctx context.Context, topic string, partition int32) {
	defer p.wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte("record-" + strconv.Itoa(i))}
		sent := time.Now()
		err := p.cl.ProduceSync(ctx, rec).FirstErr()
		p.mu.Lock()
		if err != nil {
			p.lastErr = err
		} else {
			p.acked = append(p.acked, ack{sent: sent, acked: time.Now(), offset: rec.Offset})
		}
		p.mu.Unlock()
	}
}

// stop ends the producer and waits for its goroutine. Stopping twice is
// a no-op.
func (p *producer) stop() {
	p.stopOnce.Do(func() {
		p.cancel()
		p.wg.Wait()
		p.cl.Close()
	})
}

// sentAfter returns the first record sent after t0 and acknowledged.
func (p *producer) sentAfter(t0 time.Time) (ack, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.acked {
		if a.sent.After(t0) {
			return a, nil
		}
	}
	return ack{}, fmt.Errorf("no record sent after %s acknowledged yet (%d acked in all, last error %v)",
		t0.Format("15:04:05.000"), len(p.acked), p.lastErr)
}

// waitAcked waits until the producer has an acknowledged record sent
// after t0.
func (p *producer) waitAcked(t *testing.T, t0 time.Time, timeout time.Duration) ack {
	t.Helper()
	var got ack
	err := cluster.WaitFor(context.Background(), timeout, func() error {
		var err error
		got, err = p.sentAfter(t0)
		return err
	})
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	return got
}

// brokersFor returns the size of a replication scenario's cluster on
// backend: 3 brokers, or 5 on Raft when the scenario takes two brokers
// down at once, since the brokers are the Raft voters and a majority must
// survive.
func brokersFor(backend string, twoDown bool) int {
	if backend == "raft" && twoDown {
		return 5
	}
	return 3
}

// kafkaClient returns a kgo client on every broker of c for the
// replication scenarios, closed with the test: records go uncompressed
// (so ReadLog can find them on a replica's disk) to the partition they
// name, one request per record, with quick retries. opts come after
// these defaults and may override them.
func kafkaClient(t *testing.T, c *cluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := newKafkaClient(c, opts...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newKafkaClient is kafkaClient for a client its caller closes.
func newKafkaClient(c *cluster.Cluster, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RecordDeliveryTimeout(settle),
		kgo.ProduceRequestTimeout(5 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)
	return kgo.NewClient(all...)
}

// acksAll, acksLeader and acksNone are the producer settings of R4:
// acks=all, acks=1 and acks=0, the last two without idempotence (which
// needs acks=all).
var (
	acksAll    = []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()}
	acksLeader = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
	acksNone   = []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}
)

// produceValues produces values to topic/partition through cl, one at a
// time, each waiting for its ack, and returns their offsets. It fails the
// test on the first error.
func produceValues(t *testing.T, cl *kgo.Client, topic string, partition int32, values ...string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	offsets := make([]int64, 0, len(values))
	for _, v := range values {
		rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce %q to %s/%d: %v", v, topic, partition, err)
		}
		offsets = append(offsets, rec.Offset)
	}
	return offsets
}

// values returns prefix-0 .. prefix-(n-1).
func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i)
	}
	return out
}

// record is a record's offset and value, as a consumer read it or a
// replica stores it.
type record struct {
	offset int64
	value  string
}

func (r record) String() string { return strconv.FormatInt(r.offset, 10) + ":" + r.value }

// readPartition reads topic/partition as a consumer does, from the
// leader and below its high watermark: from the start up to the end
// offset that ListOffsets gives (the HW). It fails the test when the
// records do not arrive within settle.
func readPartition(t *testing.T, c *cluster.Cluster, topic string, partition int32) []record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	admCl, err := newKafkaClient(c)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var end int64
	err = cluster.WaitFor(ctx, settle, func() error {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		o, ok := ends.Lookup(topic, partition)
		if !ok {
			return fmt.Errorf("no end offset for %s/%d", topic, partition)
		}
		if o.Err != nil {
			return o.Err
		}
		end = o.Offset
		return nil
	})
	if err != nil {
		t.Fatalf("end offset of %s/%d: %v", topic, partition, err)
	}
	if end == 0 {
		return nil
	}
	cl, err := newKafkaClient(c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatalf("consumer of %s/%d: %v", topic, partition, err)
	}
	defer cl.Close()
	var out []record
	for len(out) == 0 || out[len(out)-1].offset < end-1 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s/%d up to its end offset %d: got %v before %v", topic, partition, end, out, ctx.Err())
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Logf("reading %s/%d: %v (retrying)", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			out = append(out, record{r.Offset, string(r.Value)})
		})
	}
	return out
}

// stored returns the records of topic/partition on broker id's disk.
func stored(t *testing.T, c *cluster.Cluster, id int32, topic string, partition int32) []record {
	t.Helper()
	recs, err := c.Broker(id).ReadLog(topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]record, len(recs))
	for i, r := range recs {
		out[i] = record{r.Offset, string(r.Value)}
	}
	return out
}

// offsetsOf returns the offsets at which value appears in recs.
func offsetsOf(recs []record, value string) []int64 {
	var out []int64
	for _, r := range recs {
		if r.value == value {
			out = append(out, r.offset)
		}
	}
	return out
}

// holds reports whether recs hold value at offset.
func holds(recs []record, offset int64, value string) bool {
	for _, r := range recs {
		if r.offset == offset {
			return r.value == value
		}
	}
	return false
}

// waitStored waits until broker id's disk holds every one of want at
// its offset.
func waitStored(t *testing.T, c *cluster.Cluster, id int32, topic string, partition int32, want []record) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), settle, func() error {
		recs, err := c.Broker(id).ReadLog(topic, partition)
		if err != nil {
			return err
		}
		got := make([]record, len(recs))
		for i, r := range recs {
			got[i] = record{r.Offset, string(r.Value)}
		}
		for _, w := range want {
			if !holds(got, w.offset, w.value) {
				return fmt.Errorf("broker %d holds %v, want %v among them", id, got, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for broker %d to store %d records of %s/%d: %v", id, len(want), topic, partition, err)
	}
}

// truncation is one "truncated follower log" line of a broker's log:
// the follower cut topic-partition to offset (its new end) from logEnd.
type truncation struct {
	mode           string
	offset, logEnd int64
	reason         string
}

var (
	truncationLine = regexp.MustCompile(`truncated follower log:.*\bpartition=(\S+)`)
	truncationMode = regexp.MustCompile(`\bmode=(\w+)`)
	truncationTo   = regexp.MustCompile(`\boffset=(-?\d+)`)
	truncationFrom = regexp.MustCompile(`\blog_end=(-?\d+)`)
	truncationWhy  = regexp.MustCompile(`\breason="([^"]*)"`)
)

// truncations returns broker b's truncations of topic-partition, oldest
// first, from its log (every incarnation's).
func truncations(b *cluster.Broker, topic string, partition int32) []truncation {
	want := topic + "-" + strconv.Itoa(int(partition))
	var out []truncation
	for _, line := range strings.Split(b.LogTail(4<<20), "\n") {
		m := truncationLine.FindStringSubmatch(line)
		if m == nil || m[1] != want {
			continue
		}
		var tr truncation
		if m := truncationMode.FindStringSubmatch(line); m != nil {
			tr.mode = m[1]
		}
		if m := truncationTo.FindStringSubmatch(line); m != nil {
			tr.offset, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if m := truncationFrom.FindStringSubmatch(line); m != nil {
			tr.logEnd, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if m := truncationWhy.FindStringSubmatch(line); m != nil {
			tr.reason = m[1]
		}
		out = append(out, tr)
	}
	return out
}

// waitTruncation waits until broker b has logged more than since
// truncations of topic-partition and returns the first new one.
func waitTruncation(t *testing.T, b *cluster.Broker, topic string, partition int32, since int) truncation {
	t.Helper()
	var got truncation
	err := cluster.WaitFor(context.Background(), settle, func() error {
		trs := truncations(b, topic, partition)
		if len(trs) <= since {
			return fmt.Errorf("%v has logged %d truncations of %s-%d, want more than %d", b, len(trs), topic, partition, since)
		}
		got = trs[since]
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for a truncation: %v", err)
	}
	return got
}

// partitionState returns topic/partition as broker id's Metadata has it.
func partitionState(t *testing.T, c *cluster.Cluster, id int32, topic string, partition int32) cluster.Partition {
	t.Helper()
	p, ok := metadata(t, c, id, topic).Partition(topic, partition)
	if !ok {
		t.Fatalf("broker %d: %s/%d missing from its Metadata", id, topic, partition)
	}
	return p
}

// waitLeader waits until every live broker names a leader of
// topic/partition for which ok returns nil, and returns the partition as
// the first live broker has it.
func waitLeader(t *testing.T, c *cluster.Cluster, topic string, partition int32, what string, ok func(cluster.Partition) error) cluster.Partition {
	t.Helper()
	waitEvery(t, c, sessionTimeout+settle, what, func(md *cluster.Metadata) error {
		p, found := md.Partition(topic, partition)
		if !found {
			return fmt.Errorf("%s/%d missing", topic, partition)
		}
		if err := ok(p); err != nil {
			return fmt.Errorf("%s/%d: leader %d epoch %d ISR %v: %w", topic, partition, p.Leader, p.LeaderEpoch, p.ISR, err)
		}
		return nil
	}, topic)
	return partitionState(t, c, c.Live()[0].ID, topic, partition)
}
