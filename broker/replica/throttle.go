package replica

import (
	"math"
	"sync"
	"time"
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

// byteRate measures a rate in bytes per second as Kafka's Rate over a
// SampledStat does: the bytes recorded in the samples of the last
// samples × window, divided by the time those samples span, and at least
// (samples-1) windows, so that a burst right after a quiet spell is not
// taken for a high rate. It reads time only from now. It is not safe for
// concurrent use.
type byteRate struct {
	window  time.Duration
	samples []rateSample
	current int
	now     func() time.Time
}

// rateSample is the bytes recorded in one window from start.
type rateSample struct {
	start time.Time
	bytes int64
}

func newByteRate(samples int, window time.Duration, now func() time.Time) *byteRate {
	r := &byteRate{window: window, samples: make([]rateSample, samples), now: now}
	r.samples[0].start = now()
	return r
}

// advance moves to a new sample when the current one's window has passed,
// and forgets the samples older than the whole span.
func (r *byteRate) advance(now time.Time) {
	cur := &r.samples[r.current]
	if now.Sub(cur.start) >= r.window {
		r.current = (r.current + 1) % len(r.samples)
		r.samples[r.current] = rateSample{start: now}
	}
	span := time.Duration(len(r.samples)) * r.window
	for i := range r.samples {
		if i != r.current && now.Sub(r.samples[i].start) >= span {
			r.samples[i] = rateSample{}
		}
	}
}

// Record adds n bytes at the current time.
func (r *byteRate) Record(n int64) {
	now := r.now()
	r.advance(now)
	r.samples[r.current].bytes += n
}

// Rate returns the measured bytes per second at the current time.
func (r *byteRate) Rate() float64 {
	now := r.now()
	r.advance(now)
	var total int64
	oldest := r.samples[r.current].start
	for _, s := range r.samples {
		if s.start.IsZero() {
			continue
		}
		total += s.bytes
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	if full, least := int(elapsed/r.window), len(r.samples)-1; full < least {
		elapsed += time.Duration(least-full) * r.window
	}
	return float64(total) / elapsed.Seconds()
}

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
