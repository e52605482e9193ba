package replication

import (
	"fmt"
	"math"
	"time"
)

// TruncationMode says how a replica that becomes a follower decides where
// to cut its log (replication.truncation).
type TruncationMode string

const (
	// TruncateEpoch asks the leader with OffsetForLeaderEpoch for the end
	// of the follower's latest epoch and cuts there, walking back epochs
	// the leader does not know (Kafka's KIP-101 and KIP-279).
	TruncateEpoch TruncationMode = "epoch"
	// TruncateHW cuts the log to the follower's own checkpointed high
	// watermark, the rule of the source documents (R7, R8); it loses
	// acknowledged records in KIP-101's scenarios.
	TruncateHW TruncationMode = "hw"
	// TruncateFetch fetches at once from the log end, naming the epoch of
	// the log's last batch (Fetch's LastFetchedEpoch); a leader whose log
	// differs there answers with the epoch and offset where the two part
	// (DivergingEpoch) and the follower cuts as TruncateEpoch would, one
	// fetch instead of an OffsetForLeaderEpoch round trip first (Kafka's
	// follower since 2.7, KIP-595's fetch applied to its replication).
	TruncateFetch TruncationMode = "fetch"
)

// Config holds a partition's replication settings, under Kafka's property
// names.
type Config struct {
	// ReplicaLagTimeMax is how long a follower may go without catching up
	// to the leader's log end offset before the leader removes it from the
	// ISR (replica.lag.time.max.ms). Default 30 s; 1 ms .. MaxInt64 ms.
	ReplicaLagTimeMax time.Duration
	// MinInsyncReplicas is the smallest ISR with which an acks=all produce
	// is accepted (min.insync.replicas). Default 1; 1 .. MaxInt32.
	MinInsyncReplicas int
	// Truncation is how a new follower cuts its log
	// (replication.truncation). Default TruncateFetch; "fetch", "epoch"
	// or "hw".
	Truncation TruncationMode
}

// DefaultConfig returns Kafka's defaults and truncation on fetch.
func DefaultConfig() Config {
	return Config{
		ReplicaLagTimeMax: 30 * time.Second,
		MinInsyncReplicas: 1,
		Truncation:        TruncateFetch,
	}
}

// Validate checks ranges and names the bad key.
func (c Config) Validate() error {
	switch {
	case c.ReplicaLagTimeMax < time.Millisecond:
		return fmt.Errorf("replica.lag.time.max.ms %d: must be between 1 and %d", c.ReplicaLagTimeMax.Milliseconds(), int64(math.MaxInt64/time.Millisecond))
	case c.MinInsyncReplicas < 1 || c.MinInsyncReplicas > math.MaxInt32:
		return fmt.Errorf("min.insync.replicas %d: must be between 1 and %d", c.MinInsyncReplicas, math.MaxInt32)
	case c.Truncation != TruncateFetch && c.Truncation != TruncateEpoch && c.Truncation != TruncateHW:
		return fmt.Errorf("replication.truncation %q: must be %q, %q or %q", c.Truncation, TruncateFetch, TruncateEpoch, TruncateHW)
	}
	return nil
}
