package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFollowersFetchIncrementally runs two brokers with a 100-partition
// topic of replication factor 2 and a producer writing to one partition:
// the followers' fetches run in sessions, and name on average only the
// partitions that move, not the 50 each follows, and the leaders serve
// about as few; every partition stays in sync, the idle ones included.
func TestFollowersFetchIncrementally(t *testing.T) {
	brokers := startRaftCluster(t, 2)
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(newClient(t, brokers[0]))
	if resp, err := adm.CreateTopic(ctx, 100, 2, nil, "wide"); err != nil || resp.Err != nil {
		t.Fatalf("create topic wide: %v %v", err, resp.Err)
	}
	inSync := func() bool {
		for _, b := range brokers {
			_, _, parts := metadataOf(t, b, "wide")
			if len(parts) != 100 {
				return false
			}
			for _, p := range parts {
				if len(p.isr) != 2 {
					return false
				}
			}
		}
		return true
	}
	waitFor(t, ctx, "every partition of wide in sync", inSync)
	type counts struct{ incremental, named, refreshes, served, recorded uint64 }
	read := func() counts {
		var c counts
		for _, b := range brokers {
			fc := b.fetchSessions.Counters()
			c.incremental += fc.Incremental
			c.named += fc.Named
			c.refreshes += fc.Refreshes
			c.served += fc.Served
			c.recorded += fc.Recorded
		}
		return c
	}
	// Two rounds of every session first: the partitions the followers
	// fetched before their leader had them are served until it does.
	settleFrom := read().incremental
	waitFor(t, ctx, "4 incremental fetches", func() bool { return read().incremental >= settleFrom+4 })
	before := read()
	cl := newClient(t, brokers[0], kgo.DefaultProduceTopic("wide"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 7, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	after := read()
	fetches, named := after.incremental-before.incremental, after.named-before.named
	if fetches < 50 {
		t.Fatalf("%d incremental fetches during 50 acks=all produces, want at least one each", fetches)
	}
	if per := float64(named) / float64(fetches); per > 2 {
		t.Fatalf("incremental fetches named %.1f partitions on average, want at most 2 (only the one written moves)", per)
	}
	// The leader's work follows the changes as well: a fetch, a periodic
	// refresh included, serves about the partition written, not the 50.
	served := after.served - before.served
	if per := float64(served) / float64(fetches); per > 2 {
		t.Fatalf("%d incremental fetches served %d partitions, want at most 2 each", fetches, served)
	}
	t.Logf("%d incremental fetches named %d partitions (%.2f each) of the 50 each follower follows, and served %.2f each",
		fetches, named, float64(named)/float64(fetches), float64(served)/float64(fetches))
	// Idle: 20 more rounds of long polls, at least twice the lag limit.
	// The refreshes record the followers' positions in the idle
	// partitions without serving them, and those stay in the ISR.
	idleFrom := read()
	waitFor(t, ctx, "20 idle incremental fetches", func() bool { return read().incremental >= idleFrom.incremental+20 })
	idle := read()
	if !inSync() {
		t.Fatal("a partition left the ISR while its follower fetched incrementally")
	}
	if idle.refreshes == idleFrom.refreshes || idle.recorded == idleFrom.recorded {
		t.Fatalf("idle: %d refreshes recorded %d positions, want some of both", idle.refreshes-idleFrom.refreshes, idle.recorded-idleFrom.recorded)
	}
	if per := float64(idle.served-idleFrom.served) / float64(idle.incremental-idleFrom.incremental); per > 1 {
		t.Fatalf("idle fetches served %.1f partitions each, want at most 1", per)
	}
}

// TestDeletingATopicKeepsFollowerSessions runs three brokers with two
// topics of replication factor 3 and deletes one: the followers stop
// fetching its partitions within the fetch sessions they have, which
// forget them, and no fetcher starts a new session (a full fetch of every
// partition it follows) for each partition taken away.
func TestDeletingATopicKeepsFollowerSessions(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(newClient(t, brokers[0]))
	for topic, n := range map[string]int32{"kept": 6, "doomed": 60} {
		if resp, err := adm.CreateTopic(ctx, n, 3, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
		}
	}
	inSync := func(topic string, n int) func() bool {
		return func() bool {
			for _, b := range brokers {
				_, _, parts := metadataOf(t, b, topic)
				if len(parts) != n {
					return false
				}
				for _, p := range parts {
					if len(p.isr) != 3 {
						return false
					}
				}
			}
			return true
		}
	}
	waitFor(t, ctx, "every partition of kept in sync", inSync("kept", 6))
	waitFor(t, ctx, "every partition of doomed in sync", inSync("doomed", 60))
	counters := func() (created, incremental uint64) {
		for _, b := range brokers {
			fc := b.fetchSessions.Counters()
			created += fc.Created
			incremental += fc.Incremental
		}
		return created, incremental
	}
	// The sessions settle first: every fetcher's in an incremental fetch.
	_, from := counters()
	waitFor(t, ctx, "12 incremental fetches", func() bool { _, inc := counters(); return inc >= from+12 })
	before, _ := counters()
	deleted, err := adm.DeleteTopics(ctx, "doomed")
	if err != nil || deleted["doomed"].Err != nil {
		t.Fatalf("delete topic doomed: %v %v", err, deleted["doomed"].Err)
	}
	waitFor(t, ctx, "no broker to hold a replica of doomed", func() bool {
		for _, b := range brokers {
			if b.heldReplicas("doomed") != 0 {
				return false
			}
		}
		return true
	})
	cl := newClient(t, brokers[0], kgo.DefaultProduceTopic("kept"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d to kept: %v", i, err)
		}
	}
	if !inSync("kept", 6)() {
		t.Fatal("a partition of kept left the ISR while doomed was deleted")
	}
	if after, _ := counters(); after != before {
		t.Fatalf("the followers started %d fetch sessions while doomed was deleted, want none", after-before)
	}
}
