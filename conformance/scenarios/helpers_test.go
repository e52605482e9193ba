package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
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
	dir, err := os.MkdirTemp("", "tripod-scenarios-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenarios:", err)
		os.Exit(1)
	}
	env, err = cluster.NewEnv(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenarios:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.RemoveAll(dir)
	os.Exit(code)
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
	if backend == "zk" {
		zkserver.Require(t)
	}
	cfg, err := env.Configure(backend, n)
	if err != nil {
		t.Fatalf("configure a %s cluster: %v", backend, err)
	}
	cfg.SessionTimeout = sessionTimeout
	cfg.Sets = sets
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
		for _, rt := range resp.Topics {
			err := kerr.ErrorForCode(rt.ErrorCode)
			if tries > 1 && errors.Is(err, kerr.TopicAlreadyExists) {
				return nil
			}
			if err != nil && !kerr.IsRetriable(err) && !errors.Is(err, kerr.NotController) {
				return cluster.Permanent(err)
			}
			return err
		}
		return nil
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
