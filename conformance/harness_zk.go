package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/zk"
	"github.com/tripodmq/tripod/internal/faultnet"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// NewZKHarness returns the ZooKeeper backend's harness: every cluster
// shares the ZooKeeper at connect ("host:port[,host:port]") under a fresh
// chroot /tripod-conformance/<random>, and each of its backends dials
// through its own faultnet.Net. When server is non-nil (the ZooKeeper
// behind connect), clusters also implement ServiceRestarter by stopping
// and starting it. opts adjust every backend's Config.
func NewZKHarness(connect string, server *zkserver.Server, sessionTimeout time.Duration, opts ...HarnessOption) Harness {
	return &zkHarness{connect: strings.TrimRight(connect, "/"), server: server, sessionTimeout: sessionTimeout, opts: opts}
}

type zkHarness struct {
	connect        string
	server         *zkserver.Server
	sessionTimeout time.Duration
	opts           []HarnessOption
}

func (h *zkHarness) Name() string                  { return "zk" }
func (h *zkHarness) SessionTimeout() time.Duration { return h.sessionTimeout }

func (h *zkHarness) NewCluster(t T, n int) Cluster {
	t.Helper()
	var raw [8]byte
	rand.Read(raw[:])
	c := &zkCluster{connect: h.connect, chroot: "/tripod-conformance/" + hex.EncodeToString(raw[:])}
	for i := range n {
		fn := faultnet.New()
		cfg := coord.DefaultConfig()
		cfg.Backend = "zk"
		cfg.BrokerID = coord.BrokerID(i + 1)
		cfg.SessionTimeout = h.sessionTimeout
		cfg.ZKConnect = h.connect + c.chroot
		cfg.Dialer = fn.Dial
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("zk-%d", i+1), Level: hclog.Warn})
		configure(&cfg, h.opts)
		b, err := zk.Open(cfg)
		if err != nil {
			c.close()
			t.Fatalf("open zk backend %d under %s: %v", i+1, cfg.ZKConnect, err)
		}
		c.nets = append(c.nets, fn)
		c.cfgs = append(c.cfgs, cfg)
		c.backends = append(c.backends, b)
	}
	t.Cleanup(c.close)
	if h.server != nil {
		// The harness's own throwaway server: its data directory goes
		// with the test, so the chroot need not be deleted znode by znode
		// (20 000 deletes after the 10 000-partition case).
		c.keepChroot = true
		return &zkRestartableCluster{zkCluster: c, server: h.server}
	}
	return c
}

type zkCluster struct {
	connect string
	chroot  string
	nets    []*faultnet.Net
	cfgs    []coord.Config
	// keepChroot skips deleting the chroot on close.
	keepChroot bool
	closeOnce  sync.Once

	mu       sync.Mutex
	backends []*zk.Backend
}

func (c *zkCluster) Backend(i int) coord.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backends[i]
}

func (c *zkCluster) Crash(i int) { c.nets[i].Cut() }
func (c *zkCluster) Heal(i int)  { c.nets[i].Heal() }

// Restart implements Cluster.
func (c *zkCluster) Restart(t T, i int) {
	t.Helper()
	c.mu.Lock()
	old := c.backends[i]
	c.mu.Unlock()
	if err := old.Close(); err != nil {
		t.Errorf("close zk backend %d: %v", i+1, err)
	}
	b, err := zk.Open(c.cfgs[i])
	if err != nil {
		t.Fatalf("reopen zk backend %d under %s: %v", i+1, c.cfgs[i].ZKConnect, err)
	}
	c.mu.Lock()
	c.backends[i] = b
	c.mu.Unlock()
}

// close closes every backend, then removes the cluster's chroot through a
// connection of its own (best effort, bounded: ZooKeeper may be stopped).
func (c *zkCluster) close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		backends := append([]*zk.Backend(nil), c.backends...)
		c.mu.Unlock()
		for _, b := range backends {
			b.Close()
		}
		if c.keepChroot {
			return
		}
		// connect may carry a chroot of its own, under which ours lies.
		hosts, base, _ := strings.Cut(c.connect, "/")
		conn, _, err := gozk.Connect(strings.Split(hosts, ","), 10*time.Second,
			gozk.WithLogInfo(false), gozk.WithLogger(discardZKLog{}))
		if err != nil {
			return
		}
		defer conn.Close()
		deadline := time.Now().Add(10 * time.Second)
		if base != "" {
			base = "/" + base
		}
		deleteTree(conn, base+c.chroot, deadline)
	})
}

// deleteTree deletes path and everything below it, children before their
// parents, each level's deletes pipelined.
func deleteTree(conn *gozk.Conn, path string, deadline time.Time) {
	levels := [][]string{{path}}
	for len(levels[len(levels)-1]) > 0 && time.Now().Before(deadline) {
		parents := levels[len(levels)-1]
		children := make([][]string, len(parents))
		forEach(len(parents), func(i int) {
			names, _, err := conn.Children(parents[i])
			if err != nil {
				return
			}
			for _, n := range names {
				children[i] = append(children[i], parents[i]+"/"+n)
			}
		})
		var next []string
		for _, cs := range children {
			next = append(next, cs...)
		}
		levels = append(levels, next)
	}
	for l := len(levels) - 1; l >= 0 && time.Now().Before(deadline); l-- {
		paths := levels[l]
		forEach(len(paths), func(i int) {
			if err := conn.Delete(paths[i], -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
				return
			}
		})
	}
}

// forEach runs f(0..n-1) on up to 64 goroutines and waits for them.
func forEach(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, 64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

type discardZKLog struct{}

func (discardZKLog) Printf(string, ...any) {}

type zkRestartableCluster struct {
	*zkCluster
	server *zkserver.Server
}

func (c *zkRestartableCluster) StopService(t T) {
	t.Helper()
	if err := c.server.Stop(); err != nil {
		t.Fatalf("stop zookeeper: %v", err)
	}
}

func (c *zkRestartableCluster) StartService(t T) {
	t.Helper()
	if err := c.server.Start(); err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
}

var (
	_ ServiceRestarter = (*zkRestartableCluster)(nil)
	_ Cluster          = (*zkCluster)(nil)
)
