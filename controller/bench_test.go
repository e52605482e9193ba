package controller

import (
	"context"
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
