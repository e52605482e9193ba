package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// coordError maps a controller or backend error to its Kafka error.
func coordError(err error) *kerr.Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, coord.ErrExists):
		return kerr.TopicAlreadyExists
	case errors.Is(err, controller.ErrInvalidReplicationFactor):
		return kerr.InvalidReplicationFactor
	case errors.Is(err, coord.ErrNotFound):
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, controller.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded
	case errors.Is(err, controller.ErrInvalidPartitions), errors.Is(err, coord.ErrTooLarge):
		// A topic too large for the backend (ZooKeeper's znode limit)
		// has too many partitions for it.
		return kerr.InvalidPartitions
	case errors.Is(err, controller.ErrPartitionLimit):
		// max.partitions and max.broker.partitions are policies of the
		// cluster; Kafka refuses its own per-request bound so too.
		return kerr.PolicyViolation
	case errors.Is(err, controller.ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment
	case errors.Is(err, controller.ErrNoReassignmentInProgress):
		return kerr.NoReassignmentInProgress
	case errors.Is(err, controller.ErrNotController), errors.Is(err, coord.ErrFenced):
		return kerr.NotController
	case errors.Is(err, controller.ErrStaleBrokerEpoch):
		return kerr.StaleBrokerEpoch
	case errors.Is(err, controller.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable
	case errors.Is(err, controller.ErrEligibleLeadersNotAvailable):
		return kerr.EligibleLeadersNotAvailable
	case errors.Is(err, coord.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	}
	return kerr.UnknownServerError
}

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
