package raft

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestQuorumTagKeepsQuorumsApart: a 3-node cluster commits a topic;
// node 3 stops and a node of another quorum (its directory's QuorumFile
// names a migration, as when the brokers form a Raft quorum again after
// a rollback) starts at its address with the same voters, while nodes 1
// and 2 of the first quorum still run. Each side refuses the other's
// connections and says so: the new node takes neither the first
// quorum's log nor its leader, and the first quorum, still a majority,
// commits on.
func TestQuorumTagKeepsQuorumsApart(t *testing.T) {
	cfgs := testConfigs(t, 3)
	oldLogs, newLogs := &logBuffer{}, &logBuffer{}
	backends := openLoggedNodes(t, cfgs, oldLogs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var leader *Backend
	for leader == nil || leader.id == 3 {
		// Node 3 is the one replaced: a leader elsewhere keeps a
		// majority once it stops.
		if leader != nil {
			if err := leader.raft.LeadershipTransfer().Error(); err != nil {
				t.Fatalf("leadership transfer: %v", err)
			}
		}
		leader = backends[leaderOf(t, backends)]
	}
	ctrl := commitAsController(t, ctx, leader, "orders")

	if err := backends[2].Close(); err != nil {
		t.Fatalf("close node 3: %v", err)
	}
	fresh := cfgs[2]
	fresh.RaftDir = filepath.Join(t.TempDir(), "raft")
	if err := os.MkdirAll(fresh.RaftDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fresh.RaftDir, QuorumFile), []byte("etcd-to-raft-1-rollback"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: newLogs}).With("broker", 3)
	nb, err := Open(fresh)
	if err != nil {
		t.Fatalf("open the new quorum's node at node 3's address: %v", err)
	}
	backends[2] = nb

	const refused = "refused a Raft connection from a node of another quorum"
	waitFor(t, 15*time.Second, "each quorum to refuse the other's connections", func() bool {
		return newLogs.count(refused) > 0 && oldLogs.count(refused) > 0
	})
	if last := nb.raft.Stats()["last_log_index"]; last != "1" {
		t.Errorf("the new quorum's node holds log up to index %s, want only its bootstrap configuration (1)", last)
	}
	if id, _ := nb.raft.LeaderWithID(); id != "" {
		t.Errorf("the new quorum's node follows leader %s, want none (its peers are not up)", id)
	}
	more, _ := topicOf("more", 1)
	if err := leader.Commit(ctx, ctrl, more); err != nil {
		t.Errorf("the first quorum's commit with node 3 replaced: %v", err)
	}
}
