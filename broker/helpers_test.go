package broker

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// testConfig returns a configuration for an in-process broker on a free
// loopback port with its data in a fresh temporary directory.
func testConfig(t testing.TB) config.Config {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Listeners = "PLAINTEXT://127.0.0.1:0"
	cfg.LogDirs = []string{t.TempDir()}
	fastRaft(&cfg)
	return cfg
}

// fastRaft shortens the embedded Raft's timeouts and the session timeout
// so test brokers elect themselves in a fraction of a second.
func fastRaft(cfg *config.Config) {
	cfg.Coord.RaftHeartbeatTimeout = 100 * time.Millisecond
	cfg.Coord.RaftElectionTimeout = 100 * time.Millisecond
	cfg.Coord.RaftLeaderLeaseTimeout = 50 * time.Millisecond
	cfg.Coord.SessionTimeout = 2 * time.Second
}

// waitServing waits until b knows the cluster: a controller and itself
// among the live brokers.
func waitServing(t testing.TB, b *Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok := b.cache.WaitFor(ctx, b.closing, func() bool {
		id, live, _ := b.cache.View()
		if id == coord.NoBroker {
			return false
		}
		for _, lb := range live {
			if int32(lb.ID) == b.cfg.BrokerID {
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("broker %d: no controller and live set within 30s", b.cfg.BrokerID)
	}
}

// createLocalTopic creates a topic through b's own controller (b must be
// the controller) and waits until b holds its partitions.
func createLocalTopic(t testing.TB, b *Broker, name string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !b.cache.WaitFor(ctx, b.closing, func() bool { return b.member.Controller() != nil }) {
		t.Fatalf("broker %d is not the controller", b.cfg.BrokerID)
	}
	ctrl := b.member.Controller()
	if _, err := ctrl.CreateTopic(ctx, controller.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	if !b.cache.WaitFor(ctx, b.closing, func() bool {
		return b.cache.TopicReady(name, partitions) && b.replicas.PartitionFor(name, int32(partitions-1)) != nil
	}) {
		t.Fatalf("topic %s: not ready on broker %d", name, b.cfg.BrokerID)
	}
}

// testLogger logs warnings (everything with TRIPOD_TEST_LOG set) to
// stderr, named after the test.
func testLogger(t testing.TB) hclog.Logger {
	level := hclog.Warn
	if os.Getenv("TRIPOD_TEST_LOG") != "" {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: level, Output: os.Stderr})
}

// startBroker starts a broker with cfg and closes it when the test ends.
func startBroker(t testing.TB, cfg config.Config) *Broker {
	t.Helper()
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	waitServing(t, b)
	return b
}

// newClient returns a franz-go client of b, closed when the test ends.
func newClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic with the given partitions through kadm.
func createTopic(t *testing.T, b *Broker, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("create topic %s: %v", topic, resp.Err)
	}
}

// testContext returns a context that ends with the test or after d.
func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dialBroker opens a raw TCP connection to b.
func dialBroker(t *testing.T, b *Broker) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatalf("dial broker: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// manager returns b's replica manager, for the tests that reach
// past the handlers' interface (its hooks and counters).
func (b *Broker) manager() *replica.Manager { return b.replicas.(*replica.Manager) }
