package network

import (
	"math"
	"sync"
	"time"

	"github.com/tripodmq/tripod/internal/rate"
)

// ipRateIdleExpiry is how long the rate of an address that connects no
// more is kept, as Kafka's connection rate sensors expire after an hour.
const ipRateIdleExpiry = time.Hour

// connRates keeps the rate at which connections are made within the
// connection_creation_rate client quotas of their addresses and within
// max.connection.creation.rate, as Kafka's ConnectionQuotas (KIP-612):
// each rate is measured over quota.window.num samples of
// quota.window.size.seconds, and a connection over one is throttled for
// the time that brings the rate back to its quota, at most one sample.
// Over the broker's rate, the accept loop waits that long before it
// serves the connection (and accepts no other meanwhile); over its
// address's quota, the connection is closed once that time has passed,
// unread, so that a client reconnecting in a loop is slowed down and
// other addresses are not. It is safe for concurrent use.
type connRates struct {
	samples int
	window  time.Duration
	// ipQuota returns the connection_creation_rate of an address; ok
	// is false when it has none.
	ipQuota func(ip string) (quota float64, ok bool)
	// brokerQuota is max.connection.creation.rate, 0 for none (Kafka's
	// default, 2147483647, is none).
	brokerQuota float64

	mu        sync.Mutex
	broker    *rate.Rate
	byIP      map[string]*ipRate
	lastSweep time.Time
}

// ipRate is the connection rate of one address.
type ipRate struct {
	rate *rate.Rate
	last time.Time
}

func newConnRates(cfg Config) *connRates {
	r := &connRates{
		samples: max(cfg.QuotaWindowNum, 1),
		window:  max(cfg.QuotaWindowSize, time.Second),
		ipQuota: cfg.ConnectionCreationRate,
		byIP:    map[string]*ipRate{},
	}
	if n := cfg.MaxConnectionCreationRate; n > 0 && n < math.MaxInt32 {
		r.brokerQuota = float64(n)
	}
	if r.brokerQuota > 0 {
		r.broker = rate.New(r.samples, r.window, time.Now())
	}
	return r
}

// throttle records one connection in r at now and returns how long it is
// throttled for: Kafka's QuotaUtils.boundedThrottleTime, the time the
// rate over its window takes to come back to quota, at most one sample.
func (c *connRates) throttle(r *rate.Rate, quota float64, now time.Time) time.Duration {
	r.Record(1, now)
	measured := r.Measure(now)
	if measured <= quota {
		return 0
	}
	d := time.Duration((measured - quota) / quota * float64(r.WindowSize(now)))
	return min(d, c.window)
}

// acceptDelay records a connection just accepted on a listener subject to
// max.connection.creation.rate and returns how long the accept loop waits
// before serving it: 0 within the rate or without one.
func (c *connRates) acceptDelay(now time.Time) time.Duration {
	if c.broker == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttle(c.broker, c.brokerQuota, now)
}

// ipDelay records a connection accepted from ip and returns how long it
// is throttled for, over its address's connection_creation_rate: the
// connection is then not served, and closed after that long. 0 admits
// it.
func (c *connRates) ipDelay(ip string, now time.Time) time.Duration {
	if c.ipQuota == nil {
		return 0
	}
	quota, ok := c.ipQuota(ip)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(now)
	if !ok {
		return 0
	}
	r := c.byIP[ip]
	if r == nil {
		r = &ipRate{rate: rate.New(c.samples, c.window, now)}
		c.byIP[ip] = r
	}
	r.last = now
	return c.throttle(r.rate, quota, now)
}

// sweepLocked forgets the rates of addresses idle for ipRateIdleExpiry,
// at most once a minute; c.mu is held.
func (c *connRates) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < time.Minute {
		return
	}
	c.lastSweep = now
	for ip, r := range c.byIP {
		if now.Sub(r.last) >= ipRateIdleExpiry {
			delete(c.byIP, ip)
		}
	}
}
