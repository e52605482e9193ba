package network

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/internal/notify"
)

// requestPool bounds the bytes of requests being read or waiting to be
// handled across all connections (queued.max.request.bytes, as Kafka's
// broker's memory pool): a connection's reader reserves a frame's size
// before reading its body and releases it once the request's handler has
// run: with the response, or, for a handler that answers later (an
// acks=all produce, a long-poll fetch), when it returns, as Kafka's broker
// releases a request's buffer. While the pool is full, readers
// wait before reading a body, so the broker stops reading sockets until
// memory frees instead of growing. A frame larger than the whole pool
// waits for the whole pool.
type requestPool struct {
	capacity int64
	logger   hclog.Logger

	mu   sync.Mutex
	used int64
	// freed announces every release of bytes.
	freed notify.Broadcast
	// lastFullLog rate-limits the log line saying the pool is full.
	lastFullLog time.Time
}

// poolFullLogInterval is the least time between two log lines saying
// the pool is full.
const poolFullLogInterval = 10 * time.Second

func newRequestPool(capacity int64, logger hclog.Logger) *requestPool {
	return &requestPool{capacity: capacity, logger: logger}
}

// acquire reserves n bytes (at most the pool's capacity), waiting while
// the pool has less free; it returns the bytes reserved, to pass to
// release, or ctx's error when ctx ends first.
func (p *requestPool) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 0), p.capacity)
	for {
		p.mu.Lock()
		if p.used+n <= p.capacity {
			p.used += n
			p.mu.Unlock()
			return n, nil
		}
		freed := p.freed.Next()
		if now := time.Now(); now.Sub(p.lastFullLog) >= poolFullLogInterval {
			p.lastFullLog = now
			p.logger.Warn("requests fill queued.max.request.bytes: reading requests waits until memory frees",
				"queued.max.request.bytes", p.capacity, "in_use", p.used, "waiting_request_bytes", n)
		}
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// release gives back n bytes that acquire reserved.
func (p *requestPool) release(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	p.freed.Notify()
	p.mu.Unlock()
}

// inUse returns the bytes reserved now.
func (p *requestPool) inUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}
