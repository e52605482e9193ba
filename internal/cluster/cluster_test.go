package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeServeEnv, when set, makes the test binary stand in for `tripod
// serve` in the process-control test: it exits 0 on SIGTERM, as a
// broker's controlled shutdown does, and otherwise runs until killed. It
// says when its handler is set: a SIGTERM before that kills it instead.
// It is a Go process with several threads, as a broker is, and it forks
// nothing: a shell that runs sleep in a loop can be stopped between vfork
// and exec, and then its parent waits for a child that never runs and is
// never seen as stopped.
const fakeServeEnv = "TRIPOD_CLUSTER_FAKE_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeServeEnv) != "" {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Printf("fake serve ready, GOMAXPROCS %d\n", runtime.GOMAXPROCS(0))
		<-term
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitReady waits until b's fake serve has printed that its trap is set,
// count times in its log (once per start).
func waitReady(t *testing.T, b *Broker, count int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(b.LogTail(1<<20), "fake serve ready") < count {
		if time.Now().After(deadline) {
			t.Fatalf("broker %d: fake serve not ready %d times within 10s; log:\n%s", b.ID, count, b.LogTail(4096))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBrokerProcessControl checks Kill, Stop, Pause, Resume and Restart on
// processes, and the flags each broker gets, without a real broker.
func TestBrokerProcessControl(t *testing.T) {
	dir := t.TempDir()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeServeEnv, "1")
	cfg := DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Brokers = bin, dir, 2
	cfg.Sets = []string{"auto.leader.rebalance.enable=true"}
	cfg.GoMaxProcs = 1
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	b1, b2 := c.Broker(1), c.Broker(2)
	waitReady(t, b1, 1)
	waitReady(t, b2, 1)
	if !strings.Contains(b2.LogTail(1<<20), "fake serve ready, GOMAXPROCS 1\n") {
		t.Errorf("broker 2 log %q: want it started with GOMAXPROCS 1", b2.LogTail(4096))
	}
	args := strings.Join(b2.Args(), " ")
	for _, want := range []string{"serve", "--broker-id 2", "--listen " + b2.Addr, "--coord raft", "--session-timeout 2s",
		"--raft-listen " + b2.RaftAddr, "--raft-voters 1@" + b1.RaftAddr + ",2@" + b2.RaftAddr, "--set auto.leader.rebalance.enable=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("broker 2 args %q: want %q in them", args, want)
		}
	}
	if got := c.Running(); len(got) != 2 {
		t.Fatalf("running brokers %v, want 2", got)
	}

	if err := b1.Pause(); err != nil {
		t.Fatal(err)
	}
	if live := c.Live(); len(live) != 1 || live[0] != b2 {
		t.Fatalf("live brokers %v with broker 1 paused, want [broker 2]", live)
	}
	if err := b1.Resume(); err != nil {
		t.Fatal(err)
	}

	pid := b1.PID()
	if err := b1.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if b1.Running() || b1.PID() != 0 {
		t.Fatalf("broker 1 runs after Kill (pid %d)", b1.PID())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d after Kill: kill 0 says %v, want ESRCH", pid, err)
	}
	if err := b1.Restart(); err != nil {
		t.Fatal(err)
	}
	if b1.PID() == pid || !b1.Running() {
		t.Fatalf("broker 1 after Restart: pid %d running %v, want a new running process", b1.PID(), b1.Running())
	}
	if n := strings.Count(b1.LogTail(1<<20), "=== tripod cluster: start"); n != 2 {
		t.Fatalf("log of broker 1 has %d start headers, want 2", n)
	}

	// A paused broker still stops on SIGTERM.
	if err := b2.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop paused broker 2: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if running := c.Running(); len(running) != 0 {
		t.Fatalf("running after Close: %v", running)
	}
	if !slices.Equal(c.Bootstrap(), []string{b1.Addr, b2.Addr}) {
		t.Fatalf("bootstrap %v", c.Bootstrap())
	}
}

// TestValidateClientProxyBasePort checks what Config.ClientProxyBasePort
// needs: a base port with room for the CLIENT listeners, and neither the
// cluster's own proxies nor TLS.
func TestValidateClientProxyBasePort(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // in the error; "" for none
	}{
		{"with a base port", func(c *Config) {}, ""},
		{"without a base port", func(c *Config) { c.BasePort = 0 }, "needs a base port"},
		{"no room for the CLIENT listeners", func(c *Config) { c.BasePort = 65300 }, "needs a base port"},
		{"past the last port", func(c *Config) { c.ClientProxyBasePort = 65535 }, "must be 0 or between 1 and 65533"},
		{"with the cluster's proxies", func(c *Config) { c.Proxies = true }, "not with the cluster's own proxies"},
		{"with TLS", func(c *Config) { c.ClientTLS = &tls.Config{} }, "not with TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Binary, cfg.Dir, cfg.BasePort, cfg.ClientProxyBasePort = "tripod", "dir", 29191, 29091
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestValidateRacks checks that Config.Racks refuses a rack that cannot
// be a broker.rack or be told apart in dev's --racks list, naming racks.
func TestValidateRacks(t *testing.T) {
	for _, tc := range []struct {
		racks []string
		ok    bool
	}{
		{nil, true},
		{[]string{"az1", "az 2"}, true},
		{[]string{"az1", ""}, false},
		{[]string{"az1,az2"}, false},
		{[]string{"az\n1"}, false},
	} {
		cfg := DefaultConfig()
		cfg.Binary, cfg.Dir, cfg.Racks = "tripod", "dir", tc.racks
		err := cfg.Validate()
		if tc.ok && err != nil || !tc.ok && (err == nil || !strings.Contains(err.Error(), "cluster racks")) {
			t.Errorf("racks %q: got %v, want ok %v (an error naming cluster racks)", tc.racks, err, tc.ok)
		}
	}
}
