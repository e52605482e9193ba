package controller

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
)

// Config holds the controller's settings. DefaultConfig gives Kafka's
// defaults, in this one place; Validate checks them. What the controller
// acts through (the backend, the term, the sender) is passed to Start
// beside it.
type Config struct {
	// UncleanLeaderElection lets a live replica outside the ISR lead when
	// no ISR member is live, at the risk of losing acknowledged records
	// (unclean.leader.election.enable). A topic's config overrides it.
	// Default false.
	UncleanLeaderElection bool

	// AutoLeaderRebalance moves leadership back to preferred replicas (the
	// first assigned) once they are in the ISR again
	// (auto.leader.rebalance.enable). Default true.
	AutoLeaderRebalance bool

	// LeaderImbalanceCheckInterval is how often the preferred-leader
	// rebalance runs (leader.imbalance.check.interval.seconds). Default
	// 300 s; above 0.
	LeaderImbalanceCheckInterval time.Duration

	// LeaderImbalancePerBrokerPercentage is the share, in percent, of the
	// partitions a broker is preferred for that it may fail to lead before
	// the rebalance moves them back to it
	// (leader.imbalance.per.broker.percentage). Default 10; 0..100.
	LeaderImbalancePerBrokerPercentage int

	// MaxPartitions bounds the partitions of the whole cluster, every
	// topic's counted once whatever its replication factor, internal
	// topics included (max.partitions, KIP-578): a CreateTopics,
	// CreatePartitions or automatic creation that would pass it is
	// refused with ErrPartitionLimit, and nothing is created. Default
	// 100000, the largest cluster measured on tripod's 2-core development
	// machine (a failover benchmark of 100 000 partitions, replication
	// factor 3 over 3 brokers, on every backend); Kafka proposed no bound
	// (2147483647). 0 turns it off; 0..2147483647.
	MaxPartitions int

	// MaxBrokerPartitions bounds the replicas assigned to one broker,
	// counting every replica of every partition, leader or follower
	// (max.broker.partitions, KIP-578): a creation that would assign a
	// broker more is refused with ErrPartitionLimit. Default 100000, the
	// most one broker was measured to hold (the same benchmark: 100 000
	// replicas on each broker, 300 000 in the cluster). 0 turns it off;
	// 0..2147483647.
	MaxBrokerPartitions int

	// RetryBackoff is how long after a failed commit the controller
	// reloads the metadata (if the reload right after the failure failed
	// too) and reconciles again. tripod has no property for it. Default
	// 500 ms; 1 ms..1 min.
	RetryBackoff time.Duration

	// Crashed, when set, is asked once as the controller starts, with the
	// first set of live brokers, which of them are already known crashed
	// (their listeners refuse connections); those start out unreachable
	// (State.Crashed). It must return within a bound (a probe with a
	// timeout). Default (nil): none is.
	Crashed func(ctx context.Context, brokers []coord.Broker) []coord.Broker

	// Logger receives the controller's logs. Default (nil): discarded.
	Logger hclog.Logger
}

// DefaultConfig returns Kafka's defaults, and tripod's partition bounds
// where Kafka has none.
func DefaultConfig() Config {
	return Config{
		UncleanLeaderElection:              false,
		AutoLeaderRebalance:                true,
		LeaderImbalanceCheckInterval:       300 * time.Second,
		LeaderImbalancePerBrokerPercentage: 10,
		MaxPartitions:                      100000,
		MaxBrokerPartitions:                100000,
		RetryBackoff:                       500 * time.Millisecond,
	}
}

// Validate checks every setting's range and names the key of the first
// bad one.
func (c Config) Validate() error {
	if c.LeaderImbalanceCheckInterval <= 0 {
		return fmt.Errorf("leader.imbalance.check.interval.seconds %v: must be above 0", c.LeaderImbalanceCheckInterval)
	}
	if c.LeaderImbalancePerBrokerPercentage < 0 || c.LeaderImbalancePerBrokerPercentage > 100 {
		return fmt.Errorf("leader.imbalance.per.broker.percentage %d: must be between 0 and 100", c.LeaderImbalancePerBrokerPercentage)
	}
	if c.MaxPartitions < 0 || c.MaxPartitions > math.MaxInt32 {
		return fmt.Errorf("max.partitions %d: must be between 0 (no bound) and 2147483647", c.MaxPartitions)
	}
	if c.MaxBrokerPartitions < 0 || c.MaxBrokerPartitions > math.MaxInt32 {
		return fmt.Errorf("max.broker.partitions %d: must be between 0 (no bound) and 2147483647", c.MaxBrokerPartitions)
	}
	if c.RetryBackoff < time.Millisecond || c.RetryBackoff > time.Minute {
		return fmt.Errorf("controller RetryBackoff %v: must be between 1ms and 1m", c.RetryBackoff)
	}
	return nil
}

// policy is what of the settings the decisions follow.
func (c Config) policy() Policy {
	return Policy{
		UncleanLeaderElection:              c.UncleanLeaderElection,
		LeaderImbalancePerBrokerPercentage: c.LeaderImbalancePerBrokerPercentage,
		MaxPartitions:                      c.MaxPartitions,
		MaxBrokerPartitions:                c.MaxBrokerPartitions,
	}
}
