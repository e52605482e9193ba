package cluster

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// flagValue returns the value that follows flag in args, or "".
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestVotersAndAddBroker checks, on processes that stand in for `tripod
// serve`, the flags of a Raft cluster of 3 brokers of which 2 vote: every
// broker names voters 1 and 2 and listens for Raft on its own address, so
// broker 3 joins as an observer; a broker added while the cluster runs
// gets the next id, ports and data dir of its own and the same voters,
// and runs; once the cluster is closed, none runs and none can be added.
func TestVotersAndAddBroker(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeServeEnv, "1")
	cfg := DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Brokers, cfg.Voters = bin, t.TempDir(), 3, 2
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	voters := "1@" + c.Broker(1).RaftAddr + ",2@" + c.Broker(2).RaftAddr
	for _, b := range c.Brokers() {
		waitReady(t, b, 1)
		if got := flagValue(b.Args(), "--raft-voters"); got != voters {
			t.Errorf("broker %d: got --raft-voters %q, want %q", b.ID, got, voters)
		}
		if got := flagValue(b.Args(), "--raft-listen"); got != b.RaftAddr || got == "" {
			t.Errorf("broker %d: got --raft-listen %q, want its own %q", b.ID, got, b.RaftAddr)
		}
	}

	b4, err := c.AddBroker()
	if err != nil {
		t.Fatalf("add a broker: %v", err)
	}
	waitReady(t, b4, 1)
	if b4.ID != 4 || c.Broker(4) != b4 || !b4.Running() {
		t.Fatalf("added broker %d (running %v), cluster's broker 4 %v: want broker 4 running", b4.ID, b4.Running(), c.Broker(4))
	}
	if got := flagValue(b4.Args(), "--raft-voters"); got != voters {
		t.Errorf("broker 4: got --raft-voters %q, want %q", got, voters)
	}
	if got := flagValue(b4.Args(), "--raft-listen"); got != b4.RaftAddr {
		t.Errorf("broker 4: got --raft-listen %q, want its own %q", got, b4.RaftAddr)
	}
	if got := flagValue(b4.Args(), "--broker-id"); got != "4" {
		t.Errorf("broker 4: got --broker-id %q, want 4", got)
	}
	seen := map[string]int32{}
	for _, b := range c.Brokers() {
		for _, v := range []string{b.Addr, b.RaftAddr, b.DataDir} {
			if other, dup := seen[v]; dup {
				t.Errorf("brokers %d and %d share %s", other, b.ID, v)
			}
			seen[v] = b.ID
		}
	}
	if got := c.Bootstrap(); len(got) != 4 || got[3] != b4.Addr {
		t.Fatalf("bootstrap %v, want 4 brokers, broker 4's last", got)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if running := c.Running(); len(running) != 0 {
		t.Fatalf("running after Close: %v", running)
	}
	if _, err := c.AddBroker(); err == nil {
		t.Fatalf("add a broker to a closed cluster: got no error, want one")
	}
}

// TestAddBrokerOnEtcd checks that a broker added to a cluster on etcd
// registers there as the others do, with no Raft flags.
func TestAddBrokerOnEtcd(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeServeEnv, "1")
	cfg := DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Brokers, cfg.Backend = bin, t.TempDir(), 1, "etcd"
	cfg.EtcdEndpoints = []string{"http://127.0.0.1:2379"}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b2, err := c.AddBroker()
	if err != nil {
		t.Fatalf("add a broker: %v", err)
	}
	waitReady(t, b2, 1)
	args := strings.Join(b2.Args(), " ")
	if !strings.Contains(args, "--coord etcd --") || !strings.Contains(args, "--etcd-endpoints http://127.0.0.1:2379") || strings.Contains(args, "--raft") {
		t.Fatalf("broker 2 args %q: want etcd's flags and no Raft flag", args)
	}
}

// TestValidateVoters checks Config.Voters' range: 0 (every broker) or
// 1..Brokers.
func TestValidateVoters(t *testing.T) {
	for _, c := range []struct {
		voters int
		ok     bool
	}{{0, true}, {1, true}, {3, true}, {4, false}, {-1, false}} {
		cfg := DefaultConfig()
		cfg.Binary, cfg.Dir, cfg.Voters = "tripod", "dir", c.voters
		err := cfg.Validate()
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "cluster voters") {
			t.Errorf("voters %d of 3 brokers: got %v, want ok %v", c.voters, err, c.ok)
		}
	}
}
