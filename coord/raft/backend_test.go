package raft

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// TestRestartRestoresState: every node of a cluster stops after a
// snapshot and more commits; reopened from their directories, they agree
// on the same metadata (snapshot plus log), elect a controller with a
// greater epoch, and refuse the old term's commits.
func TestRestartRestoresState(t *testing.T) {
	cfgs := testConfigs(t, 3)
	var backends []*Backend
	closeAll := func() {
		for _, b := range backends {
			b.Close()
		}
		backends = nil
	}
	t.Cleanup(closeAll)
	for _, cfg := range cfgs {
		b, err := Open(cfg)
		if err != nil {
			t.Fatalf("open node %d: %v", cfg.BrokerID, err)
		}
		backends = append(backends, b)
	}
	leader := backends[leaderOf(t, backends)]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := leader.Register(ctx, coord.Broker{ID: leader.id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	term, err := leader.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	commitTopic := func(name string) {
		t.Helper()
		create, _ := topicOf(name, 3)
		if err := leader.Commit(ctx, term, create); err != nil {
			t.Fatalf("Commit of topic %s: %v", name, err)
		}
	}
	commitTopic("before-snapshot")
	for _, b := range backends {
		// Every node has applied the commit once a read through it sees it.
		if _, err := b.Load(ctx); err != nil {
			t.Fatalf("Load on node %d: %v", b.id, err)
		}
		if err := b.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot of node %d: %v", b.id, err)
		}
	}
	commitTopic("after-snapshot")
	want, err := leader.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	oldEpoch := term.Epoch()
	closeAll()

	for _, cfg := range cfgs {
		b, err := Open(cfg)
		if err != nil {
			t.Fatalf("reopen node %d: %v", cfg.BrokerID, err)
		}
		backends = append(backends, b)
	}
	for _, b := range backends {
		got, err := b.Load(ctx)
		if err != nil {
			t.Fatalf("Load on reopened node %d: %v", b.id, err)
		}
		if !reflect.DeepEqual(got.Topics, want.Topics) || !reflect.DeepEqual(got.Partitions, want.Partitions) {
			t.Fatalf("Load on reopened node %d: got topics %v, want %v", b.id, got.TopicNames(), want.TopicNames())
		}
	}
	leader = backends[leaderOf(t, backends)]
	// The previous incarnation's registration lives until it expires.
	waitFor(t, 10*time.Second, "Register after restart", func() bool {
		s, err = leader.Register(ctx, coord.Broker{ID: leader.id, Host: "127.0.0.1", Port: 9092})
		if err != nil && !errors.Is(err, coord.ErrExists) {
			t.Fatalf("Register after restart: got %v, want nil or ErrExists", err)
		}
		return err == nil
	})
	defer s.Close()
	term2, err := leader.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign after restart: %v", err)
	}
	if term2.Epoch() <= oldEpoch {
		t.Fatalf("controller epoch after restart: got %d, want > %d", term2.Epoch(), oldEpoch)
	}
	create, _ := topicOf("zombie", 1)
	if _, err := leader.apply(ctx, "zombie commit", &command{Type: cmdCommit, Epoch: oldEpoch, Ops: []wireOp{{CreateTopic: &create}}}); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("commit with the pre-restart epoch %d: got %v, want ErrFenced", oldEpoch, err)
	}
}

// TestCloseLeavesNoGoroutines: once every backend of a cluster that
// registered, campaigned, committed and watched is closed, the goroutines
// it started are gone.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	cfgs := testConfigs(t, 3)
	var backends []*Backend
	for _, cfg := range cfgs {
		b, err := Open(cfg)
		if err != nil {
			t.Fatalf("open node %d: %v", cfg.BrokerID, err)
		}
		backends = append(backends, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	follower := backends[(leaderOf(t, backends)+1)%3]
	s, err := follower.Register(ctx, coord.Broker{ID: follower.id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if _, err := follower.WatchMetadata(ctx); err != nil {
		t.Fatalf("WatchMetadata: %v", err)
	}
	term, err := follower.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	create, _ := topicOf("t", 3)
	if err := follower.Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, b := range backends {
		if err := b.Close(); err != nil {
			t.Fatalf("Close of node %d: %v", b.id, err)
		}
	}
	select {
	case <-s.Done():
	default:
		t.Fatalf("Session.Done after Close of its backend: open, want closed")
	}
	waitFor(t, 5*time.Second, fmt.Sprintf("goroutines back to the %d before the cluster", before), func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// TestSingleNode: with no voters configured (tripod serve's default) the
// node is a cluster of one: it registers, campaigns, commits, resigns and
// campaigns again with a greater epoch.
func TestSingleNode(t *testing.T) {
	cfg := testConfigs(t, 1)[0]
	cfg.RaftVoters = nil
	b, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := b.Register(ctx, coord.Broker{ID: cfg.BrokerID, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	term, err := b.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	create, _ := topicOf("solo", 4)
	if err := b.Commit(ctx, term, create); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if md, err := b.Load(ctx); err != nil || len(md.Partitions) != 4 {
		t.Fatalf("Load: got %v, %v, want 4 partitions", md, err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := b.Commit(ctx, term, coord.DeleteTopic{Name: "solo"}); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Commit after Resign: got %v, want ErrFenced", err)
	}
	next, err := b.Campaign(ctx, s)
	if err != nil {
		t.Fatalf("second Campaign: %v", err)
	}
	if next.Epoch() <= term.Epoch() {
		t.Fatalf("second term epoch: got %d, want > %d", next.Epoch(), term.Epoch())
	}
}
