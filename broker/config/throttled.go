package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kafka's default quota sampling: QuotaSamples samples
// (replication.quota.window.num) of QuotaWindow each
// (replication.quota.window.size.seconds).
const (
	QuotaSamples = 11
	QuotaWindow  = time.Second
)

// ThrottledReplicas reports whether a leader.replication.throttled.replicas
// or follower.replication.throttled.replicas value (already validated)
// names partition on broker: "*" names every replica, "P:B,P:B" the
// replicas of partition P on broker B.
func ThrottledReplicas(value string, partition, broker int32) bool {
	value = strings.TrimSpace(value)
	if value == "*" {
		return true
	}
	for item := range strings.SplitSeq(value, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			continue
		}
		pn, perr := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bn, berr := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if perr == nil && berr == nil && int32(pn) == partition && int32(bn) == broker {
			return true
		}
	}
	return false
}

// ValidateThrottledReplicas checks a throttled replicas value as Kafka's
// ThrottledReplicaListValidator: empty, "*", or "partition:broker" items
// separated by commas.
func ValidateThrottledReplicas(name, value string) error {
	value = strings.TrimSpace(value)
	if value == "" || value == "*" {
		return nil
	}
	for item := range strings.SplitSeq(value, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		_, perr := strconv.ParseUint(strings.TrimSpace(p), 10, 31)
		_, berr := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
		if !ok || perr != nil || berr != nil {
			return fmt.Errorf("topic config %s %q: must be * or a list of partition:broker (0:101,1:102)", name, value)
		}
	}
	return nil
}
