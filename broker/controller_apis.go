package broker

import (
	"time"
)

// requestTimeout turns a request's timeout_ms into a bound for waiting on
// the metadata cache: at least a second, at most 30 s.
func requestTimeout(ms int32) time.Duration {
	return min(max(time.Duration(ms)*time.Millisecond, time.Second), 30*time.Second)
}
