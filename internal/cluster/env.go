package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// ServeTimeout bounds how long StartForTest waits for a new cluster to
// serve: every broker up, listed by every other, and a controller elected.
const ServeTimeout = 60 * time.Second

// Env is what the clusters of one test binary share: the tripod binary,
// built once, and the coordination servers, started on first use (one
// ZooKeeper, one embedded etcd), on which every cluster gets its own chroot
// or prefix. Its methods are safe for concurrent use.
type Env struct {
	// Binary is the tripod executable the clusters run.
	Binary string

	dir      string
	mu       sync.Mutex
	zk       *zkserver.Server
	etcd     *etcdserver.Server
	clusters int
}

// NewEnv builds the tripod binary into dir (`go build` of
// github.com/tripodmq/tripod/cmd/tripod) and returns an Env keeping its
// servers under dir. Call it from TestMain; Close it when the tests end.
func NewEnv(dir string) (*Env, error) {
	bin := filepath.Join(dir, "tripod")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/tripodmq/tripod/cmd/tripod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build cmd/tripod: %w\n%s", err, out)
	}
	return &Env{Binary: bin, dir: dir}, nil
}

// ZooKeeper returns the shared ZooKeeper, starting it on first use.
func (e *Env) ZooKeeper() (*zkserver.Server, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.zk != nil {
		return e.zk, nil
	}
	if err := zkserver.Available(); err != nil {
		return nil, err
	}
	cfg := zkserver.DefaultConfig()
	cfg.TickTime = 100 * time.Millisecond
	cfg.MinSessionTimeout = time.Second
	s, err := zkserver.Start(filepath.Join(e.dir, "zookeeper"), cfg)
	if err != nil {
		return nil, err
	}
	e.zk = s
	return s, nil
}

// Etcd returns the shared embedded etcd, starting it on first use.
func (e *Env) Etcd() (*etcdserver.Server, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd != nil {
		return e.etcd, nil
	}
	s, err := etcdserver.Start(filepath.Join(e.dir, "etcd"))
	if err != nil {
		return nil, err
	}
	e.etcd = s
	return s, nil
}

// Close stops the servers. The binary and data stay in dir for its owner.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var err error
	if e.zk != nil {
		err = e.zk.Close()
	}
	if e.etcd != nil {
		if cerr := e.etcd.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Configure fills cfg's Binary and coordination fields for a new cluster
// of backend with n brokers: a fresh ZooKeeper chroot or etcd prefix. It
// starts the shared server the backend needs.
func (e *Env) Configure(backend string, n int) (Config, error) {
	cfg := DefaultConfig()
	cfg.Binary, cfg.Backend, cfg.Brokers = e.Binary, backend, n
	e.mu.Lock()
	e.clusters++
	name := "/tripod-cluster-" + strconv.Itoa(e.clusters)
	e.mu.Unlock()
	switch backend {
	case "zk":
		zk, err := e.ZooKeeper()
		if err != nil {
			return cfg, err
		}
		cfg.ZKConnect = zk.Addr() + name
	case "etcd":
		etcd, err := e.Etcd()
		if err != nil {
			return cfg, err
		}
		cfg.EtcdEndpoints = etcd.Endpoints()
		cfg.EtcdPrefix = name
	}
	return cfg, nil
}

// StartForTest starts a cluster of cfg (Dir defaults to a test temporary
// directory), waits until it serves, and kills it when the test ends. When
// the test fails, every broker's log tail is printed. With backend "zk"
// and no ZooKeeper here, the test is skipped, or fails when CI is "true".
func (e *Env) StartForTest(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if cfg.Backend == "zk" {
		zkserver.Require(t)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s cluster: %v", cfg.Backend, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
		if t.Failed() || os.Getenv("TRIPOD_CLUSTER_LOGS") != "" {
			for _, b := range c.Brokers() {
				t.Logf("--- log of %v (last 24 KiB) ---\n%s", b, b.LogTail(24<<10))
			}
		}
	})
	if err := c.WaitServing(context.Background(), ServeTimeout); err != nil {
		t.Fatalf("%s cluster of %d brokers does not serve: %v", cfg.Backend, cfg.Brokers, err)
	}
	return c
}

// RunTests runs a test binary's tests with an Env of their own: it builds
// the tripod binary into a new temporary directory whose name starts with
// name, hands the Env to use before the first test, and closes the Env and
// removes the directory once the tests end. Call it from TestMain; it
// exits the process with the tests' status and does not return.
func RunTests(m *testing.M, name string, use func(*Env)) {
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: create temp dir: %v\n", name, err)
		os.Exit(1)
	}
	env, err := NewEnv(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	use(env)
	code := m.Run()
	env.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}
