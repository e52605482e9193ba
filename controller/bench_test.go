package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/scale"
)

// BenchmarkControllerElect100k measures a new controller's own work at
// 100 000 partitions (100 topics of 1 000, replicated on brokers 1, 2
// and 3), from Start to the moment it has planned and handed its sender
// every request of its first Reconcile: the Load (here a copy, as the
// Raft backend's), building the State, and the UpdateMetadata and
// LeaderAndIsr requests of every live broker's full state. AllLive: the
// old controller hosted no replica, so nothing is elected. BrokerGone:
// the old controller was broker 1, whose leaderships (a third) move in
// one Commit to a store that applies it at once, then reach brokers 2
// and 3.
func BenchmarkControllerElect100k(b *testing.B) {
	md := scale.Metadata(100, 1000, []coord.BrokerID{1, 2, 3})
	for _, bc := range []struct {
		name string
		live []coord.BrokerID
	}{{"AllLive", []coord.BrokerID{1, 2, 3}}, {"BrokerGone", []coord.BrokerID{2, 3}}} {
		b.Run(bc.name, func(b *testing.B) {
			var sent int
			for b.Loop() {
				b.StopTimer()
				store := newFakeStore()
				store.chunkSize = 1 << 30 // one copy of the metadata, as one chunk
				store.md = copyMetadata(md)
				brokers := make([]coord.Broker, len(bc.live))
				for i, id := range bc.live {
					brokers[i] = testBroker(id)
				}
				store.members <- brokers
				term := newFakeTerm()
				sender := &recordingSender{}
				b.StartTimer()
				c, err := Start(context.Background(), DefaultConfig(), store, term, sender)
				if err != nil {
					b.Fatalf("start: %v", err)
				}
				// The first member set is handled before any work.
				if err := c.do(context.Background(), func(context.Context) {}); err != nil {
					b.Fatalf("controller: %v", err)
				}
				b.StopTimer()
				sent = len(sender.sent)
				term.cancel()
				c.Wait()
				b.StartTimer()
			}
			b.ReportMetric(float64(sent), "requests")
		})
	}
}

// BenchmarkDecisions10000 measures the controller's decisions at 10 000
// partitions (10 topics of 1 000, replicated on brokers 1, 2 and 3, every
// leader the preferred one), each taken on a fresh State, without I/O.
// BrokerGone: broker 1 leaves the live set (Members), so the plan elects
// new leaders for its 3 334 partitions and takes it out of every ISR.
// Reassign: a reassignment of every partition from broker 1 to broker 4
// (AlterReassignments), as when a broker is replaced.
func BenchmarkDecisions10000(b *testing.B) {
	const topics, partitions = 10, 1000
	b.Run("BrokerGone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			s := wideState(topics, partitions, 1, 2, 3)
			b.StartTimer()
			plan := s.Members([]coord.Broker{testBroker(2), testBroker(3)})
			b.StopTimer()
			if ops := planOps(plan); ops != topics*partitions {
				b.Fatalf("the plan commits %d ops, want %d partition states", ops, topics*partitions)
			}
			b.StartTimer()
		}
	})
	b.Run("Reassign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			s := wideState(topics, partitions, 1, 2, 3, 4)
			var reqs []Reassignment
			for _, name := range s.md.TopicNames() {
				for p, replicas := range s.md.Topics[name].Assignment {
					target := slices.Clone(replicas)
					target[slices.Index(target, 1)] = 4
					reqs = append(reqs, Reassignment{Partition: coord.TopicPartition{Topic: name, Partition: int32(p)}, Target: target})
				}
			}
			b.StartTimer()
			_, errs := s.AlterReassignments(reqs)
			b.StopTimer()
			if err := errors.Join(errs...); err != nil {
				b.Fatalf("reassign: %v", err)
			}
			b.StartTimer()
		}
	})
}

// wideState is the state of controller broker 1 over scale.Metadata's
// topics × partitions on brokers 1, 2 and 3, with live brokers live, their
// full state sent and the live set announced.
func wideState(topics, partitions int, live ...coord.BrokerID) *State {
	s := NewState(1, testControllerEpoch, scale.Metadata(topics, partitions, []coord.BrokerID{1, 2, 3}), Policy{}, nil)
	for _, id := range live {
		s.live[id] = testBroker(id)
	}
	s.membersSeen = true
	return s
}

// planOps counts the ops plan commits.
func planOps(plan Plan) int {
	n := 0
	for _, step := range plan.Steps {
		n += len(step.Ops)
	}
	return n
}
