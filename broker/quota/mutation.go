package quota

import (
	"errors"
	"time"
)

// ErrThrottlingQuotaExceeded is a strict MutationQuota's refusal: the
// client is over its controller_mutation_rate, and the topic is answered
// THROTTLING_QUOTA_EXCEEDED.
var ErrThrottlingQuotaExceeded = errors.New("the throttling quota has been exceeded")

// MutationQuota is the controller mutation quota of one CreateTopics,
// CreatePartitions or DeleteTopics request (KIP-599), as Kafka's
// StrictControllerMutationQuota and PermissiveControllerMutationQuota:
// each topic's partitions are recorded against the token bucket of the
// client's entity before the topic is created or deleted. A strict quota
// (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+, whose
// clients know the error) refuses a topic while the bucket is below
// zero; a permissive one (older versions) lets it through and only
// throttles. It is used by the request's one goroutine.
type MutationQuota struct {
	m              *Manager
	user, clientID string
	strict         bool

	// throttle is the throttle the last record found, at recorded.
	throttle time.Duration
	recorded time.Time
}

// MutationQuota returns the controller mutation quota of a request of
// user and clientID, strict or permissive.
func (m *Manager) MutationQuota(user, clientID string, strict bool) *MutationQuota {
	return &MutationQuota{m: m, user: user, clientID: clientID, strict: strict}
}

// Record counts partitions created or deleted at now. A strict quota
// whose bucket is below zero records nothing and returns
// ErrThrottlingQuotaExceeded; otherwise the partitions are taken from the
// bucket, possibly below zero, so that one topic larger than what is left
// still goes through, as in Kafka. No quota, no error.
func (q *MutationQuota) Record(partitions int, now time.Time) error {
	m := q.m
	if !m.any.Load() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bound, shared, ok := m.quotas.Resolve(Mutation.Key(), q.user, q.clientID)
	if !ok {
		return nil
	}
	s := m.sensorLocked(Mutation, shared, bound, now)
	burst := bound * float64(m.cfg.MutationSamples) * m.cfg.MutationWindow.Seconds()
	if q.strict {
		if tokens := s.bucket.Tokens(bound, burst, now); tokens < 0 {
			q.found(s, tokens, bound, now)
			return ErrThrottlingQuotaExceeded
		}
	}
	s.bucket.Record(float64(partitions), bound, burst, now)
	s.rate.Record(float64(partitions), now)
	if tokens := s.bucket.Tokens(bound, burst, now); tokens < 0 && !q.strict {
		q.found(s, tokens, bound, now)
	}
	return nil
}

// found notes the throttle of a bucket at tokens below zero: the time it
// takes to earn them back (Kafka's ControllerMutationQuotaManager
// throttleTimeMs); m.mu is held.
func (q *MutationQuota) found(s *sensor, tokens, bound float64, now time.Time) {
	first := q.recorded.IsZero()
	q.throttle = time.Duration(-tokens / bound * float64(time.Second))
	q.recorded = now
	if first {
		s.throttle += q.throttle // once per request, as Kafka's throttle-time
	}
}

// ThrottleTime returns what is left at now of the throttle the last
// refused (strict) or over-quota (permissive) record found, for the
// response's throttle_time_ms: the request may have waited since.
func (q *MutationQuota) ThrottleTime(now time.Time) time.Duration {
	return max(0, q.throttle-now.Sub(q.recorded))
}
