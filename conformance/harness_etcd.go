package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/etcd"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/faultnet"
)

// NewEtcdHarness returns the etcd backend's harness: every cluster shares
// the etcd at endpoints under a fresh prefix /tripod-conformance/<random>,
// and each of its backends dials through its own faultnet.Net. When server
// is non-nil (the embedded etcd behind endpoints), clusters also implement
// ServiceRestarter by stopping and restarting it. opts adjust every
// backend's Config.
func NewEtcdHarness(endpoints []string, server *etcdserver.Server, sessionTimeout time.Duration, opts ...HarnessOption) Harness {
	return &etcdHarness{endpoints: endpoints, server: server, sessionTimeout: sessionTimeout, opts: opts}
}

type etcdHarness struct {
	endpoints      []string
	server         *etcdserver.Server
	sessionTimeout time.Duration
	opts           []HarnessOption
}

func (h *etcdHarness) Name() string                  { return "etcd" }
func (h *etcdHarness) SessionTimeout() time.Duration { return h.sessionTimeout }

func (h *etcdHarness) NewCluster(t T, n int) Cluster {
	t.Helper()
	var raw [8]byte
	rand.Read(raw[:])
	c := &etcdCluster{prefix: "/tripod-conformance/" + hex.EncodeToString(raw[:])}
	for i := range n {
		fn := faultnet.New()
		cfg := coord.DefaultConfig()
		cfg.Backend = "etcd"
		cfg.BrokerID = coord.BrokerID(i + 1)
		cfg.SessionTimeout = h.sessionTimeout
		cfg.EtcdEndpoints = h.endpoints
		cfg.EtcdPrefix = c.prefix
		cfg.Dialer = fn.Dial
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("etcd-%d", i+1), Level: hclog.Warn})
		configure(&cfg, h.opts)
		b, err := etcd.Open(cfg)
		if err != nil {
			c.close()
			t.Fatalf("open etcd backend %d under %s: %v", i+1, c.prefix, err)
		}
		c.nets = append(c.nets, fn)
		c.cfgs = append(c.cfgs, cfg)
		c.backends = append(c.backends, b)
	}
	t.Cleanup(c.close)
	if h.server != nil {
		return &etcdRestartableCluster{etcdCluster: c, server: h.server}
	}
	return c
}

type etcdCluster struct {
	prefix    string
	nets      []*faultnet.Net
	cfgs      []coord.Config
	closeOnce sync.Once

	mu       sync.Mutex
	backends []*etcd.Backend
}

func (c *etcdCluster) Backend(i int) coord.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backends[i]
}

func (c *etcdCluster) Crash(i int) { c.nets[i].Cut() }
func (c *etcdCluster) Heal(i int)  { c.nets[i].Heal() }

// Restart implements Cluster.
func (c *etcdCluster) Restart(t T, i int) {
	t.Helper()
	c.mu.Lock()
	old := c.backends[i]
	c.mu.Unlock()
	if err := old.Close(); err != nil {
		t.Errorf("close etcd backend %d: %v", i+1, err)
	}
	b, err := etcd.Open(c.cfgs[i])
	if err != nil {
		t.Fatalf("reopen etcd backend %d under %s: %v", i+1, c.prefix, err)
	}
	c.mu.Lock()
	c.backends[i] = b
	c.mu.Unlock()
}

// close closes every backend, then removes the cluster's prefix through a
// client of its own (best effort: etcd may be stopped).
func (c *etcdCluster) close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		backends := append([]*etcd.Backend(nil), c.backends...)
		c.mu.Unlock()
		var endpoints []string
		for _, b := range backends {
			endpoints = b.Client().Endpoints()
			b.Close()
		}
		if len(endpoints) == 0 {
			return
		}
		// The cleaning client has the backends' credentials.
		cfg := c.cfgs[0]
		client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop(),
			TLS: cfg.EtcdTLS, Username: cfg.EtcdUsername, Password: cfg.EtcdPassword})
		if err != nil {
			return
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		client.Delete(ctx, c.prefix+"/", clientv3.WithPrefix())
	})
}

type etcdRestartableCluster struct {
	*etcdCluster
	server *etcdserver.Server
}

func (c *etcdRestartableCluster) StopService(t T) {
	t.Helper()
	if err := c.server.Stop(); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}
}

func (c *etcdRestartableCluster) StartService(t T) {
	t.Helper()
	if err := c.server.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
}

var (
	_ ServiceRestarter = (*etcdRestartableCluster)(nil)
	_ Cluster          = (*etcdCluster)(nil)
)
