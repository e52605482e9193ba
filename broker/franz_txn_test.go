package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// endMarkers writes a plain record "end" to each of topic's partitions,
// after every transaction on it has ended: a consumer at any isolation
// level that has read every partition's "end" has read all before it.
func endMarkers(t *testing.T, ctx context.Context, b *Broker, topic string, partitions int32) {
	t.Helper()
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range partitions {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatalf("produce the end of %s-%d: %v", topic, p, err)
		}
	}
}

// readToEnds consumes topic's partitions from their start at isolation up
// to their "end" records (endMarkers) and returns how many times each
// other value was read.
func readToEnds(t *testing.T, ctx context.Context, b *Broker, topic string, partitions int32, isolation kgo.IsolationLevel) map[string]int {
	t.Helper()
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	seen := map[string]int{}
	ends := map[int32]bool{}
	for int32(len(ends)) < partitions && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("consume %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				ends[r.Partition] = true
				return
			}
			seen[string(r.Value)]++
		})
	}
	if int32(len(ends)) < partitions {
		t.Fatalf("read the end of %d of %d partitions of %s: %v", len(ends), partitions, topic, ctx.Err())
	}
	return seen
}

// TestFranzGroupTransactSession runs franz-go's consume-transform-produce
// loop (GroupTransactSession: a transactional producer committing its
// input offsets with TxnOffsetCommit, read_committed input, require-stable
// offset fetches) over 300 records, aborting every third transaction on
// purpose; an aborted transaction's input is read again. Its output, read
// read_committed, holds every input record exactly once; read
// read_uncommitted, the aborted transactions' records too.
func TestFranzGroupTransactSession(t *testing.T) {
	t.Run("classic", func(t *testing.T) { testFranzGroupTransactSession(t) })
	// The consumer group protocol (KIP-848): TxnOffsetCommit carries the
	// member epoch as its generation.
	t.Run("consumer", func(t *testing.T) { testFranzGroupTransactSession(t, kgo.ServerSideBalancer()) })
}

func testFranzGroupTransactSession(t *testing.T, opts ...kgo.Opt) {
	cfg := txnTestConfig(t)
	b := startBroker(t, cfg)
	const in, out, records = "etl-in", "etl-out", 300
	createTopic(t, b, in, 3, nil)
	createTopic(t, b, out, 3, nil)
	produceNumbered(t, newClient(t, b), in, 0, records)

	ctx := testContext(t, 2*time.Minute)
	sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String()),
		kgo.TransactionalID("etl-1"), kgo.TransactionTimeout(30 * time.Second),
		kgo.ConsumerGroup("etl"), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(4 << 10), kgo.MaxBufferedRecords(1000)}, opts...)...)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	defer sess.Close()
	done, aborted, rounds := 0, 0, 0
	for done < records {
		if ctx.Err() != nil {
			t.Fatalf("after %d rounds, %d of %d records transformed in committed transactions: %v", rounds, done, records, ctx.Err())
		}
		fs := sess.PollRecords(ctx, 25)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Fatalf("consume %s-%d: %v", topic, p, err)
			}
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		rounds++
		abort := rounds%3 == 0
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: fmt.Appendf(nil, "out-%s", r.Value)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("transactional produce: %v", err)
				}
			})
		})
		if abort {
			// Written before the abort, so that read_committed has
			// aborted records in the log to step over.
			if err := sess.Client().Flush(ctx); err != nil {
				t.Fatalf("flush before the abort: %v", err)
			}
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		if err != nil {
			t.Fatalf("end of round %d: %v", rounds, err)
		}
		switch {
		case committed && abort:
			t.Fatalf("round %d committed, want an abort", rounds)
		case committed:
			done += n
		default:
			aborted += n
		}
	}
	if aborted == 0 {
		t.Fatalf("no transaction was aborted in %d rounds: the test proves nothing about aborts", rounds)
	}
	t.Logf("%d rounds, %d records committed, %d aborted", rounds, done, aborted)
	// The transactions' offsets are the group's: no second group of the
	// same id holds them.
	if gs := listed(t, sess.Client(), "etl"); len(gs) != 1 || gs[0].ProtocolType != "consumer" || gs[0].GroupState == "Empty" {
		t.Errorf("ListGroups lists group etl as %+v; want it once, of protocol type consumer, with its member", gs)
	}

	endMarkers(t, ctx, b, out, 3)
	seen := readToEnds(t, ctx, b, out, 3, kgo.ReadCommitted())
	for i := range records {
		if v := fmt.Sprintf("out-%d", i); seen[v] != 1 {
			t.Errorf("read_committed output holds %s %d times, want once", v, seen[v])
		}
	}
	if len(seen) != records {
		t.Errorf("read_committed output holds %d distinct values, want %d", len(seen), records)
	}
	all := readToEnds(t, ctx, b, out, 3, kgo.ReadUncommitted())
	total := 0
	for _, n := range all {
		total += n
	}
	if total != records+aborted {
		t.Errorf("read_uncommitted output holds %d records, want %d committed and %d aborted", total, records, aborted)
	}
}
