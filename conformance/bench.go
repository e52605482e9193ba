package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/scale"
)

// BenchMetadata measures what a controller failover asks of h's backend
// at scale: on a 3-broker cluster holding topics × partitions partitions
// (replicated on brokers 1, 2 and 3), committed once by the controller,
// its sub-benchmarks time
//
//   - Load: the controller's Load of the whole metadata (what a newly
//     elected controller does first);
//   - WatchFirst: a WatchMetadata on another broker's backend until its
//     first state;
//   - WatchISRChange: a Commit of one partition's ISR change until that
//     watch sends a state holding it (what every ISR change costs a
//     watcher).
//
// Each backend's tests run it as BenchmarkMetadata100k.
func BenchMetadata(b *testing.B, h Harness, topics, partitions int) {
	c := h.NewCluster(b, 3)
	ctx := withTimeout(b, 30*time.Minute)
	sessions := make([]coord.Session, 3)
	for i := range sessions {
		sessions[i] = register(b, c.Backend(i), brokerFor(i), startupBound(h))
	}
	ctrl, term := campaignAny(b, c, sessions, startupBound(h))
	be := c.Backend(ctrl)
	start := time.Now()
	if err := be.Commit(ctx, term, scale.Ops(topics, partitions, []coord.BrokerID{1, 2, 3})...); err != nil {
		b.Fatalf("commit of %d topics of %d partitions: %v", topics, partitions, err)
	}
	b.Logf("%s: %d partitions committed in %v", h.Name(), topics*partitions, time.Since(start).Round(time.Millisecond))
	want := topics * partitions

	b.Run("Load", func(b *testing.B) {
		for b.Loop() {
			md, err := be.Load(ctx)
			if err != nil || len(md.Partitions) != want {
				b.Fatalf("load: got %d partitions, %v; want %d", partitionCount(md), err, want)
			}
		}
	})

	watcher := c.Backend((ctrl + 1) % 3)
	b.Run("WatchFirst", func(b *testing.B) {
		for b.Loop() {
			wctx, cancel := context.WithCancel(ctx)
			ch, err := watcher.WatchMetadata(wctx)
			if err != nil {
				b.Fatalf("watch metadata: %v", err)
			}
			md := <-ch
			cancel()
			if md == nil || len(md.Partitions) != want {
				b.Fatalf("first watched state: got %d partitions, want %d", partitionCount(md), want)
			}
			for range ch {
			}
		}
	})

	b.Run("WatchISRChange", func(b *testing.B) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch, err := watcher.WatchMetadata(wctx)
		if err != nil {
			b.Fatalf("watch metadata: %v", err)
		}
		if md := <-ch; md == nil || len(md.Partitions) != want {
			b.Fatalf("first watched state: got %d partitions, want %d", partitionCount(md), want)
		}
		tp := coord.TopicPartition{Topic: scale.Topics(1, 1, []coord.BrokerID{1})[0].Topic.Name, Partition: 0}
		md, err := be.Load(ctx)
		if err != nil {
			b.Fatalf("load: %v", err)
		}
		st := md.Partitions[tp]
		full := slices.Clone(st.ISR)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			next := st
			next.ControllerEpoch = term.Epoch()
			if i%2 == 0 {
				next.ISR = full[:len(full)-1]
			} else {
				next.ISR = full
			}
			if err := be.Commit(ctx, term, coord.SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch}); err != nil {
				b.Fatalf("commit of %s's ISR %v: %v", tp, next.ISR, err)
			}
			next.PartitionEpoch = st.PartitionEpoch + 1
			st = next
			for {
				md, ok := <-ch
				if !ok {
					b.Fatalf("watch closed before %s's ISR %v", tp, next.ISR)
				}
				if got := md.Partitions[tp]; got.PartitionEpoch == next.PartitionEpoch {
					break
				}
			}
		}
	})
}

// campaignAny campaigns with every session (that of backend i of c at
// index i) at once and returns the index of the one that wins and its
// term; the others withdraw.
func campaignAny(t T, c Cluster, sessions []coord.Session, d time.Duration) (int, coord.Term) {
	t.Helper()
	type won struct {
		i    int
		term coord.Term
		err  error
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	results := make(chan won, len(sessions))
	for i, s := range sessions {
		go func() {
			term, err := c.Backend(i).Campaign(ctx, s)
			results <- won{i: i, term: term, err: err}
		}()
	}
	var first *won
	var errs []error
	for range sessions {
		r := <-results
		switch {
		case r.err == nil && first == nil:
			first = &r
			cancel()
		case r.err == nil:
			r.term.Resign(context.Background())
		default:
			errs = append(errs, r.err)
		}
	}
	if first == nil {
		t.Fatalf("campaign with %d sessions: no winner within %v: %v", len(sessions), d, errs)
	}
	return first.i, first.term
}

func partitionCount(md *coord.Metadata) int {
	if md == nil {
		return -1
	}
	return len(md.Partitions)
}

// BenchControllerFailover measures a controller failover on h's backend
// with the one controller (package controller) on three brokers' backends,
// holding topics × partitions partitions replicated on brokers 1, 2 and 3:
// each iteration stops the broker running the controller (it resigns its
// term and closes its session, so its session has ended at the start) and
// times, from then, the new controller's start (its term won, the
// metadata loaded and the first member set taken in: elected-s), the full
// UpdateMetadata of every other live broker handed to its sender
// (full-s), and the UpdateMetadata telling them the leaders elected in
// place of the stopped broker's and the ISRs without it (settled-s, when
// it led or was in an ISR); then it starts the stopped
// broker again and waits for it to be sent its full state. The requests
// are recorded, not sent: BenchmarkApplyUpdateMetadata100k in package
// broker measures their encoding and a broker applying them.
//
// Each backend's tests run it as BenchmarkControllerFailover100k.
func BenchControllerFailover(b *testing.B, h Harness, topics, partitions int) {
	cc := newControllerCluster(b, h, 3)
	start := time.Now()
	for _, ct := range scale.Topics(topics, partitions, []coord.BrokerID{1, 2, 3}) {
		cc.createTopic(b, controller.TopicSpec{Name: ct.Topic.Name, Partitions: partitions, ReplicationFactor: 3})
	}
	want := topics * partitions
	b.Logf("%s: %d partitions created in %v", h.Name(), want, time.Since(start).Round(time.Millisecond))
	var elected, full, settled []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		old := cc.controller(b, time.Minute)
		epoch := old.currentController().Epoch()
		others := make([]*controllerNode, 0, 2)
		for _, n := range cc.nodes {
			if n != old {
				others = append(others, n)
			}
		}
		md, _, err := old.currentController().Snapshot(withTimeout(b, callBound))
		if err != nil {
			b.Fatalf("controller snapshot: %v", err)
		}
		// A broker that was restarted by an earlier iteration is in no
		// ISR (no replica of the benchmark catches up): its failure moves
		// nothing.
		moves := false
		for _, st := range md.Partitions {
			if st.Leader == old.id || slices.Contains(st.ISR, old.id) {
				moves = true
				break
			}
		}
		b.StartTimer()
		stopped := time.Now()
		old.stop()
		var next *controllerNode
		waitFor(b, time.Minute, "a new controller", func() bool {
			for _, n := range others {
				if ctrl := n.currentController(); ctrl != nil && ctrl.Epoch() > epoch {
					next = n
					return true
				}
			}
			return false
		})
		elected = append(elected, time.Since(stopped))
		newEpoch := next.currentController().Epoch()
		waitFor(b, time.Minute, "the full state sent to every live broker", func() bool {
			for _, n := range others {
				if next.sender.updateMetadata(n.id, newEpoch, want) == 0 {
					return false
				}
			}
			return true
		})
		full = append(full, time.Since(stopped))
		if moves {
			waitFor(b, time.Minute, "the new leaders and ISRs sent to every live broker", func() bool {
				for _, n := range others {
					if next.sender.updateMetadata(n.id, newEpoch, 1) < 2 {
						return false
					}
				}
				return true
			})
			settled = append(settled, time.Since(stopped))
		} else {
			settled = append(settled, 0)
		}
		b.StopTimer()
		restarted := startControllerNode(b, cc.c, old.index)
		cc.nodes[old.index] = restarted
		waitFor(b, time.Minute, fmt.Sprintf("broker %d sent its full state again", restarted.id), func() bool {
			ctrl := next.currentController()
			return ctrl != nil && next.sender.updateMetadata(restarted.id, ctrl.Epoch(), want) > 0
		})
		b.StartTimer()
	}
	b.StopTimer()
	var moved []time.Duration
	for i := range elected {
		what := "nothing to move"
		if settled[i] > 0 {
			what = fmt.Sprintf("new leaders and ISRs sent %v", settled[i].Round(time.Millisecond))
			moved = append(moved, settled[i])
		}
		b.Logf("%s failover %d: elected %v, full state sent %v, %s", h.Name(), i+1,
			elected[i].Round(time.Millisecond), full[i].Round(time.Millisecond), what)
	}
	b.ReportMetric(median(elected).Seconds(), "elected-s")
	b.ReportMetric(median(full).Seconds(), "full-s")
	b.ReportMetric(slices.Max(full).Seconds(), "full-max-s")
	if len(moved) > 0 {
		b.ReportMetric(median(moved).Seconds(), "settled-s")
	}
}

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
