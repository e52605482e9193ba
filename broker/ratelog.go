package broker

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// rateLimitedLog writes a warning at most once per interval; the lines it
// holds back are counted in the next one it writes.
type rateLimitedLog struct {
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// log writes msg with args unless a line was written less than interval
// ago.
func (r *rateLimitedLog) log(logger hclog.Logger, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	logger.Warn(msg, append(args, "suppressed_since_last", suppressed)...)
}
