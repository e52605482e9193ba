package broker

import (
	"context"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// requestTimeout turns a request's timeout_ms into a bound for waiting on
// the metadata cache: at least a second, at most 30 s.
func requestTimeout(ms int32) time.Duration {
	return min(max(time.Duration(ms)*time.Millisecond, time.Second), 30*time.Second)
}

// waitForCache waits until cond holds on the metadata cache or ctx ends;
// it reports whether cond held.
func (b *Broker) waitForCache(ctx context.Context, cond func() bool) bool {
	for {
		_, _, changed := b.cache.view()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return cond()
		case <-b.closing:
			return false
		}
	}
}

// topicReady reports whether the cache holds every partition of topic
// (partitions of them) with a leader.
func (b *Broker) topicReady(topic string, partitions int) bool {
	t, ok := b.cache.topic(topic)
	if !ok || len(t.partitions) < partitions {
		return false
	}
	for _, p := range t.partitions {
		if p.Leader == coord.NoBroker {
			return false
		}
	}
	return true
}
