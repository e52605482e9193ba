package replica

import (
	"math"
	"testing"
	"time"

	"github.com/tripodmq/tripod/broker/config"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) set(d time.Duration) { c.t = time.Unix(1000, 0).Add(d) }
func newFakeClock() *fakeClock           { c := &fakeClock{}; c.set(0); return c }
func near(got, want float64) bool        { return math.Abs(got-want) < 1e-9 }
func ms(n int) time.Duration             { return time.Duration(n) * time.Millisecond }

// TestByteRate follows Kafka's Rate over 11 samples of 1 s step by step:
// the span counts at least 10 windows, samples older than 11 s are
// forgotten, and a new sample starts when the current one's window has
// passed.
func TestByteRate(t *testing.T) {
	type step struct {
		at     time.Duration
		record int64   // bytes recorded at at, if not 0
		want   float64 // the rate measured at at, after the record
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing recorded", []step{{at: 0, want: 0}, {at: 30 * time.Second, want: 0}}},
		{"a burst counts over the least span of 10 windows", []step{
			{at: 0, record: 1000, want: 100},
			{at: 5 * time.Second, want: 100},
			{at: ms(10500), want: 1000 / 10.5},
			// The first sample is 11 s old: forgotten.
			{at: 11 * time.Second, want: 0},
		}},
		{"records within one window add up, over the window's time plus 10", []step{
			{at: 0, record: 100, want: 10},
			{at: ms(300), record: 200, want: 300 / 10.3},
			{at: ms(999), record: 700, want: 1000 / 10.999},
		}},
		{"a steady rate over more than the span", []step{
			{at: 0, record: 100, want: 10},
			{at: 1 * time.Second, record: 100, want: 20},
			{at: 2 * time.Second, record: 100, want: 30},
			{at: 3 * time.Second, record: 100, want: 40},
			{at: 4 * time.Second, record: 100, want: 50},
			{at: 5 * time.Second, record: 100, want: 60},
			{at: 6 * time.Second, record: 100, want: 70},
			{at: 7 * time.Second, record: 100, want: 80},
			{at: 8 * time.Second, record: 100, want: 90},
			{at: 9 * time.Second, record: 100, want: 100},
			// 10 full windows: the span is the time itself.
			{at: 10 * time.Second, record: 100, want: 110},
			// The sample of t=0 is 11 s old: its slot takes the new
			// sample, and 11 samples span 10 s.
			{at: 11 * time.Second, record: 100, want: 110},
			{at: 12 * time.Second, record: 100, want: 110},
			{at: ms(12500), want: 1100 / 10.5},
		}},
		{"a pause longer than the span forgets everything", []step{
			{at: 0, record: 5000, want: 500},
			{at: 2 * time.Second, record: 5000, want: 1000},
			{at: 20 * time.Second, want: 0},
			{at: ms(20500), record: 1000, want: 1000 / 10.5},
		}},
		{"a gap of a few windows keeps the older samples", []step{
			{at: 0, record: 1000, want: 100},
			{at: ms(3500), record: 1000, want: 2000 / 10.5},
			{at: ms(10700), want: 2000 / 10.7},
			// The first sample is forgotten; the one of 3.5 s spans 7.5 s,
			// counted as 10.5.
			{at: ms(11000), want: 1000 / 10.5},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			r := newByteRate(config.QuotaSamples, config.QuotaWindow, clock.now)
			for _, s := range tt.steps {
				clock.set(s.at)
				if s.record != 0 {
					r.Record(s.record)
				}
				if got := r.Rate(); !near(got, s.want) {
					t.Fatalf("at %v: rate %v, want %v", s.at, got, s.want)
				}
			}
		})
	}
}

// TestReplicationQuota: unthrottled is never exceeded; a bound is
// exceeded only by a rate above it; a bound lifted or lowered applies to
// the next check.
func TestReplicationQuota(t *testing.T) {
	clock := newFakeClock()
	q := NewQuota(config.QuotaSamples, config.QuotaWindow, clock.now)
	q.Record(1 << 30)
	if q.Exceeded() {
		t.Fatalf("unthrottled: exceeded, want not")
	}
	q.SetBound(200)
	if !q.Exceeded() {
		t.Fatalf("bound 200 with %v B/s: not exceeded, want exceeded", q.rate.Rate())
	}
	q = NewQuota(config.QuotaSamples, config.QuotaWindow, clock.now)
	q.SetBound(100)
	q.Record(1000) // 100 B/s over the least span
	if q.Exceeded() {
		t.Fatalf("bound 100 at exactly 100 B/s: exceeded, want not (Kafka's bound is inclusive)")
	}
	q.Record(1)
	if !q.Exceeded() {
		t.Fatalf("bound 100 at 100.1 B/s: not exceeded, want exceeded")
	}
	q.SetBound(Unthrottled)
	if q.Exceeded() {
		t.Fatalf("bound lifted: exceeded, want not")
	}
	q.SetBound(100)
	clock.set(12 * time.Second)
	if q.Exceeded() {
		t.Fatalf("after the span without bytes: exceeded, want not")
	}
}
