package raft

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
)

// openTestCluster opens n Raft nodes (voters 1..n) on free loopback ports
// with fast timeouts; t.Cleanup closes them.
func openTestCluster(t testing.TB, n int) []*Backend {
	t.Helper()
	cfgs := testConfigs(t, n)
	var backends []*Backend
	t.Cleanup(func() {
		for _, b := range backends {
			b.Close()
		}
	})
	for _, cfg := range cfgs {
		b, err := Open(cfg)
		if err != nil {
			t.Fatalf("open node %d: %v", cfg.BrokerID, err)
		}
		backends = append(backends, b)
	}
	return backends
}

// testConfigs returns the configs of n Raft nodes on free loopback ports,
// each with its directory under t.TempDir().
func testConfigs(t testing.TB, n int) []coord.Config {
	t.Helper()
	dir := t.TempDir()
	voters := map[coord.BrokerID]string{}
	listeners := map[coord.BrokerID]net.Listener{}
	for i := 1; i <= n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		voters[coord.BrokerID(i)] = ln.Addr().String()
		listeners[coord.BrokerID(i)] = ln
	}
	var cfgs []coord.Config
	for i := 1; i <= n; i++ {
		id := coord.BrokerID(i)
		cfg := coord.DefaultConfig()
		cfg.BrokerID = id
		cfg.SessionTimeout = 2 * time.Second
		cfg.RaftListen = voters[id]
		cfg.RaftVoters = voters
		cfg.RaftDir = filepath.Join(dir, fmt.Sprint(id))
		cfg.RaftHeartbeatTimeout = 500 * time.Millisecond
		cfg.RaftElectionTimeout = 500 * time.Millisecond
		cfg.RaftLeaderLeaseTimeout = 300 * time.Millisecond
		cfg.Logger = testLogger(t, id)
		// The first Open takes the listener that reserved the port; a
		// reopen listens on the same address again.
		var once sync.Mutex
		ln := listeners[id]
		t.Cleanup(func() {
			once.Lock()
			defer once.Unlock()
			if ln != nil {
				ln.Close()
			}
		})
		cfg.Listen = func(network, address string) (net.Listener, error) {
			once.Lock()
			defer once.Unlock()
			if l := ln; l != nil {
				ln = nil
				return l, nil
			}
			return net.Listen(network, address)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs
}

// waitFor polls cond until it holds or d passes, then fails t with what.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		case <-poll.C:
		}
	}
}

// leaderOf waits for a Raft leader among backends and returns its index.
func leaderOf(t testing.TB, backends []*Backend) int {
	t.Helper()
	leader := -1
	waitFor(t, 15*time.Second, "a raft leader", func() bool {
		for i, b := range backends {
			if b.raft.State() == hraft.Leader && b.currentLead() != nil {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// TestForwardFromFollower: a broker on a follower registers, renews,
// campaigns and commits through the leader.
func TestForwardFromFollower(t *testing.T) {
	backends := openTestCluster(t, 3)
	leaderIdx := leaderOf(t, backends)
	leader := backends[leaderIdx]
	follower := backends[(leaderIdx+1)%3]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Register is a log entry the follower cannot append itself.
	s, err := follower.Register(ctx, coord.Broker{ID: follower.id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register on follower %d: %v", follower.id, err)
	}
	defer s.Close()
	registered := s.Broker()
	members, err := leader.Members(ctx)
	if err != nil || len(members) != 1 || !members[0].Equal(registered) {
		t.Fatalf("Members on the leader: got %+v, %v, want [%+v]", members, err, registered)
	}

	// Renewals reach the leader: it records one after the registration.
	since := time.Now()
	waitFor(t, 5*time.Second, "a renewal from the follower at the leader", func() bool {
		lead := leader.currentLead()
		if lead == nil {
			t.Fatalf("node %d lost leadership", leader.id)
		}
		lead.mu.Lock()
		defer lead.mu.Unlock()
		return lead.renewed[keyOf(registered)].After(since)
	})

	// Campaign on the follower: the leader has no campaign of its own and
	// hands leadership over.
	term, err := follower.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign on follower %d: %v", follower.id, err)
	}
	if term.Controller() != follower.id {
		t.Fatalf("Term.Controller: got %d, want %d", term.Controller(), follower.id)
	}
	info, err := leader.Controller(ctx)
	if err != nil || info.ID != follower.id || info.Epoch != term.Epoch() {
		t.Fatalf("Controller on the old leader: got %+v, %v, want broker %d epoch %d", info, err, follower.id, term.Epoch())
	}

	// The old leader is a follower now: a commit chunk it applies goes
	// through the new leader, fenced by the epoch it carries.
	create, _ := topicOf("forwarded", 2)
	ops := []wireOp{{CreateTopic: &create}}
	if _, err := leader.apply(ctx, "forwarded commit", &command{Type: cmdCommit, Epoch: term.Epoch(), Ops: ops}); err != nil {
		t.Fatalf("commit through the follower %d: %v", leader.id, err)
	}
	md, err := leader.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if _, ok := md.Topics["forwarded"]; !ok || len(md.Partitions) != 2 {
		t.Fatalf("Load after the forwarded commit: got topics %v with %d partitions, want forwarded with 2", md.TopicNames(), len(md.Partitions))
	}
	other, _ := topicOf("stale", 1)
	_, err = leader.apply(ctx, "stale commit", &command{Type: cmdCommit, Epoch: term.Epoch() - 1, Ops: []wireOp{{CreateTopic: &other}}})
	if !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("forwarded commit with a stale epoch: got %v, want ErrFenced", err)
	}

	// Close deregisters through the leader at once.
	if err := s.Close(); err != nil {
		t.Fatalf("Session.Close: %v", err)
	}
	members, err = leader.Members(ctx)
	if err != nil || len(members) != 0 {
		t.Fatalf("Members after Close: got %+v, %v, want none", members, err)
	}
	select {
	case <-term.Done():
	default:
		t.Fatalf("Term.Done after its session closed: open, want closed")
	}
}

// testLogger logs node id's messages through t at the level named by
// TRIPOD_RAFT_LOG, or nowhere when it is unset.
func testLogger(t testing.TB, id coord.BrokerID) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("TRIPOD_RAFT_LOG"))
	if level == hclog.NoLevel {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Level: level, Output: os.Stderr}).With("broker", id)
}
