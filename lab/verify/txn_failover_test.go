package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// txnScenario is a transaction failover scenario on a running cluster: it
// writes records, committed or not, and returns the values a
// read_committed consumer must read exactly once (committed) and must
// never read (aborted).
type txnScenario struct {
	name string
	run  func(t *testing.T, ctx context.Context, c *cluster.Cluster, topic string) (committed, aborted []string)
}

// txnProducer returns a transactional client of topic with transactional
// id txnID, closed when the test ends.
func txnProducer(t *testing.T, c *cluster.Cluster, topic, txnID string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(txnClientOpts(txnID, txnID, c.Bootstrap()),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(time.Minute))...)
	if err != nil {
		t.Fatalf("transactional client %s: %v", txnID, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceTxn writes values, value i to partition i%3, in cl's open
// transaction, each acknowledged before the next.
func produceTxn(t *testing.T, ctx context.Context, cl *kgo.Client, values ...string) {
	t.Helper()
	for i, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("transactional produce of %s: %v", v, err)
		}
	}
}

// series returns prefix-0 .. prefix-(n-1).
func series(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// coordinatorOf returns the broker coordinating txnID.
func coordinatorOf(t *testing.T, ctx context.Context, c *cluster.Cluster, txnID string) int32 {
	t.Helper()
	var id int32 = -1
	err := cluster.WaitFor(ctx, time.Minute, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{txnID}
		for _, b := range c.Live() {
			resp, err := c.Request(ctx, b.ID, req)
			if err != nil {
				continue
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			if len(r.Coordinators) == 1 && r.Coordinators[0].ErrorCode == 0 {
				id = r.Coordinators[0].NodeID
				return nil
			}
		}
		return fmt.Errorf("no live broker names the coordinator of %s", txnID)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// leaderOf returns the leader of topic's partition as a live broker sees
// it.
func leaderOf(t *testing.T, ctx context.Context, c *cluster.Cluster, topic string, partition int32) int32 {
	t.Helper()
	var leader int32 = -1
	err := cluster.WaitFor(ctx, time.Minute, func() error {
		md, err := c.Metadata(ctx, c.Live()[0].ID, topic)
		if err != nil {
			return err
		}
		for _, p := range md.Partitions[topic] {
			if p.Partition == partition && p.Leader >= 0 {
				leader = p.Leader
				return nil
			}
		}
		return fmt.Errorf("%s-%d has no leader", topic, partition)
	})
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// restart starts broker id again and waits until the cluster serves.
func restart(t *testing.T, ctx context.Context, c *cluster.Cluster, id int32) {
	t.Helper()
	if err := c.Broker(id).Start(); err != nil {
		t.Fatalf("restart broker %d: %v", id, err)
	}
	if err := c.WaitServing(ctx, time.Minute); err != nil {
		t.Fatalf("cluster after broker %d restarted: %v", id, err)
	}
}

// txnScenarios are issue 28's failover cases.
var txnScenarios = []txnScenario{
	{
		// The coordinator stored PrepareCommit and answered EndTxn; it is
		// killed before (all of) its markers are written. The broker that
		// takes __transaction_state's partition over finds the
		// transaction in PrepareCommit and writes the markers itself.
		name: "coordinator killed between EndTxn and the markers",
		run: func(t *testing.T, ctx context.Context, c *cluster.Cluster, topic string) ([]string, []string) {
			cl := txnProducer(t, c, topic, "txn-coordinator-killed")
			if err := cl.BeginTransaction(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			values := series("coordinator-killed", 6)
			produceTxn(t, ctx, cl, values...)
			coordinator := coordinatorOf(t, ctx, c, "txn-coordinator-killed")
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if err := c.Broker(coordinator).Kill(); err != nil {
				t.Fatalf("kill coordinator %d: %v", coordinator, err)
			}
			t.Logf("killed broker %d, the coordinator, as EndTxn(commit) returned", coordinator)
			restart(t, ctx, c, coordinator)
			return values, nil
		},
	},
	{
		// A partition's leader dies with the transaction open and records
		// of it written there; the producer writes on through the new
		// leader and commits.
		name: "partition leader killed mid-transaction",
		run: func(t *testing.T, ctx context.Context, c *cluster.Cluster, topic string) ([]string, []string) {
			cl := txnProducer(t, c, topic, "txn-leader-killed")
			if err := cl.BeginTransaction(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			before, after := series("leader-killed-before", 3), series("leader-killed-after", 3)
			produceTxn(t, ctx, cl, before...)
			leader := leaderOf(t, ctx, c, topic, 0)
			if err := c.Broker(leader).Kill(); err != nil {
				t.Fatalf("kill leader %d: %v", leader, err)
			}
			t.Logf("killed broker %d, leader of %s-0, with the transaction open", leader, topic)
			produceTxn(t, ctx, cl, after...)
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit: %v", err)
			}
			restart(t, ctx, c, leader)
			return slices.Concat(before, after), nil
		},
	},
	{
		// A producer dies with its transaction open; its replacement with
		// the same transactional id fences it (its open transaction is
		// aborted) and commits its own. The zombie cannot commit.
		name: "producer replaced with its transaction open",
		run: func(t *testing.T, ctx context.Context, c *cluster.Cluster, topic string) ([]string, []string) {
			zombie := txnProducer(t, c, topic, "txn-replaced")
			if err := zombie.BeginTransaction(); err != nil {
				t.Fatalf("begin: %v", err)
			}
			zombieValues := series("replaced-zombie", 3)
			produceTxn(t, ctx, zombie, zombieValues...)
			replacement := txnProducer(t, c, topic, "txn-replaced")
			if err := replacement.BeginTransaction(); err != nil {
				t.Fatalf("replacement begin: %v", err)
			}
			values := series("replaced-replacement", 3)
			produceTxn(t, ctx, replacement, values...)
			if err := replacement.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("replacement commit: %v", err)
			}
			if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
				t.Errorf("the zombie committed after its replacement started, want it fenced")
			} else {
				t.Logf("the zombie's commit: %v", err)
			}
			return values, zombieValues
		},
	},
}

// TestTransactionFailover runs the transaction failover scenarios on a
// cluster of three `tripod serve` processes on each backend: after each,
// a read_committed consumer reads every committed transaction whole and
// once, and no aborted record.
func TestTransactionFailover(t *testing.T) {
	for _, backend := range cluster.Backends {
		t.Run(backend, func(t *testing.T) {
			cfg, err := env.Configure(backend, 3)
			if err != nil {
				t.Fatal(err)
			}
			cfg.SessionTimeout = 3 * time.Second
			cfg.Sets = []string{"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3"}
			c := env.StartForTest(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			r := &verifyRun{opts: &Config{Partitions: 3}, allSeeds: c.Bootstrap()}
			for i, sc := range txnScenarios {
				topic := fmt.Sprintf("txn-failover-%d", i)
				if err := r.createTopicNamed(ctx, topic); err != nil {
					t.Fatal(err)
				}
				committed, aborted := sc.run(t, ctx, c, topic)
				if t.Failed() {
					return
				}
				ends, _, err := writeEnds(ctx, topic, 3, c.Bootstrap())
				if err != nil {
					t.Fatalf("%s: %v", sc.name, err)
				}
				final, err := readCommittedTo(ctx, "final", topic, ends, c.Bootstrap(), 2*time.Minute)
				if err != nil {
					t.Fatalf("%s: %v", sc.name, err)
				}
				seen := map[string]int{}
				for _, rd := range final.reads {
					if !isEnd(rd.Value) {
						seen[rd.Value]++
					}
				}
				for _, v := range committed {
					if seen[v] != 1 {
						t.Errorf("%s: committed %s read %d times, want once", sc.name, v, seen[v])
					}
				}
				for _, v := range aborted {
					if seen[v] != 0 {
						t.Errorf("%s: aborted %s read %d times by read_committed, want never", sc.name, v, seen[v])
					}
				}
				if len(seen) != len(committed) {
					var extra []string
					for v := range seen {
						if !slices.Contains(committed, v) {
							extra = append(extra, v)
						}
					}
					t.Errorf("%s: read_committed read values no committed transaction wrote: %s", sc.name, strings.Join(extra, ", "))
				}
			}
		})
	}
}
