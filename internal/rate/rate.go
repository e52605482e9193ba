// Package rate measures a rate as Kafka's Rate over a SampledStat does,
// the measure behind the replication throttles and the client quotas. It
// reads no clock of its own: the caller passes the time.
package rate

import "time"

// Rate is the sum of the values recorded in the samples of the last
// samples × window, divided by the time those samples span, and at least
// (samples-1) windows, so that a burst right after a quiet spell is not
// taken for a high rate. A sample starts at the first record after the
// previous one's window has passed. It is not safe for concurrent use.
type Rate struct {
	window  time.Duration
	samples []sample
	current int
}

// sample is what was recorded in one window from start.
type sample struct {
	start time.Time
	value float64
}

// New returns a rate of samples windows of window each (samples ≥ 1,
// window > 0), the first starting at now.
func New(samples int, window time.Duration, now time.Time) *Rate {
	r := &Rate{window: window, samples: make([]sample, samples)}
	r.samples[0].start = now
	return r
}

// advance moves to a new sample when the current one's window has passed,
// and forgets the samples older than the whole span.
func (r *Rate) advance(now time.Time) {
	cur := &r.samples[r.current]
	if now.Sub(cur.start) >= r.window {
		r.current = (r.current + 1) % len(r.samples)
		r.samples[r.current] = sample{start: now}
	}
	span := time.Duration(len(r.samples)) * r.window
	for i := range r.samples {
		if i != r.current && now.Sub(r.samples[i].start) >= span {
			r.samples[i] = sample{}
		}
	}
}

// Record adds v at now.
func (r *Rate) Record(v float64, now time.Time) {
	r.advance(now)
	r.samples[r.current].value += v
}

// Measure returns the rate per second at now.
func (r *Rate) Measure(now time.Time) float64 {
	total, span := r.measure(now)
	return total / span.Seconds()
}

// WindowSize returns the time the samples span at now, as Measure
// divides by (Kafka's Rate.windowSize), at least 1 ms.
func (r *Rate) WindowSize(now time.Time) time.Duration {
	_, span := r.measure(now)
	return span
}

func (r *Rate) measure(now time.Time) (float64, time.Duration) {
	r.advance(now)
	var total float64
	oldest := r.samples[r.current].start
	for _, s := range r.samples {
		if s.start.IsZero() {
			continue
		}
		total += s.value
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	if full, least := int(elapsed/r.window), len(r.samples)-1; full < least {
		elapsed += time.Duration(least-full) * r.window
	}
	return total, max(elapsed, time.Millisecond)
}

// Idle reports whether nothing was recorded in the whole span before now.
func (r *Rate) Idle(now time.Time) bool {
	total, _ := r.measure(now)
	return total == 0
}

// TokenBucket is Kafka's TokenBucket (KIP-599), the measure behind the
// controller mutation quota: credits come back at the quota's rate per
// second up to a burst of the quota × samples × window, and a record takes
// its value in credits, possibly below zero; a client is over its quota
// while the credits are below zero. The quota is passed at each call, so
// a changed quota applies at once. It is not safe for concurrent use.
type TokenBucket struct {
	tokens float64
	last   time.Time
}

// refill adds the credits earned since the last call, at quota per
// second, up to burst; a bucket never used starts full.
func (b *TokenBucket) refill(quota, burst float64, now time.Time) {
	if b.last.IsZero() {
		b.tokens = burst
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(burst, b.tokens+quota*elapsed.Seconds())
	}
	if now.After(b.last) {
		b.last = now
	}
}

// Tokens returns the credits left at now, negative when over the quota.
func (b *TokenBucket) Tokens(quota, burst float64, now time.Time) float64 {
	b.refill(quota, burst, now)
	return b.tokens
}

// Record takes v credits at now.
func (b *TokenBucket) Record(v, quota, burst float64, now time.Time) {
	b.refill(quota, burst, now)
	b.tokens = min(burst, b.tokens-v)
}
