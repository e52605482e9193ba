package replica

import (
	"math"
	"sync"
	"time"

	"github.com/tripodmq/tripod/internal/rate"
)

// Replication throttles, as Kafka's ReplicationQuotaManager: a leader
// (leader.replication.throttled.rate) and a follower
// (follower.replication.throttled.rate) bound, in bytes per second, the
// rate at which they send and fetch the partitions that the topic configs
// leader.replication.throttled.replicas and
// follower.replication.throttled.replicas name for them, while the
// follower is out of the ISR: a replica that is catching up (a new one, or
// one restarted behind) does not starve the producers, and an in-sync
// replica is never held back.

// Unthrottled is Kafka's default rate, Long.MAX_VALUE: no bound.
const Unthrottled = math.MaxInt64

// byteRate is the rate of the throttled bytes, read from now.
type byteRate struct {
	rate *rate.Rate
	now  func() time.Time
}

func newByteRate(samples int, window time.Duration, now func() time.Time) *byteRate {
	return &byteRate{rate: rate.New(samples, window, now()), now: now}
}

// Record adds n bytes at the current time.
func (r *byteRate) Record(n int64) { r.rate.Record(float64(n), r.now()) }

// Rate returns the measured bytes per second at the current time.
func (r *byteRate) Rate() float64 { return r.rate.Measure(r.now()) }

// Quota is one side's replication throttle (the leader's or the
// follower's): its bound and the rate of the throttled bytes. It is safe
// for concurrent use.
type Quota struct {
	mu    sync.Mutex
	bound int64
	rate  *byteRate
}

// NewQuota returns an unthrottled quota that measures its rate over
// samples windows of window each, reading time from now.
func NewQuota(samples int, window time.Duration, now func() time.Time) *Quota {
	return &Quota{bound: Unthrottled, rate: newByteRate(samples, window, now)}
}

// SetBound sets the bound in bytes per second (Unthrottled: none).
func (q *Quota) SetBound(bytesPerSecond int64) {
	q.mu.Lock()
	q.bound = bytesPerSecond
	q.mu.Unlock()
}

// Exceeded reports whether the throttled bytes' rate is above the bound.
func (q *Quota) Exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bound != Unthrottled && q.rate.Rate() > float64(q.bound)
}

// Record counts n throttled bytes sent or fetched.
func (q *Quota) Record(n int) {
	q.mu.Lock()
	q.rate.Record(int64(n))
	q.mu.Unlock()
}
