package broker

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// The hostile-client tests (hostile_*_test.go) replay, against an
// in-process broker over real loopback connections, what an attacker with
// only network access to a Kafka port, or a buggy client, sends. Each
// measures what the attack cost the broker with a heapWatch and checks
// that the broker keeps serving everyone else.

// hostileHeapLimit is the most heap an attack may grow a test broker's
// process by: the 1 GB of RSS, less what the test process itself
// holds.
const hostileHeapLimit = 768 << 20

// heapWatch samples the process's heap in use until stopped and keeps the
// peak: the memory an attack made the broker hold, which TotalAlloc (every
// byte ever allocated) overstates and a single sample after the attack
// misses.
type heapWatch struct {
	base uint64
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	peak uint64
}

// watchHeap starts sampling every 5 ms after a garbage collection that
// sets the baseline.
func watchHeap(t testing.TB) *heapWatch {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w := &heapWatch{base: ms.HeapInuse, peak: ms.HeapInuse, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			w.mu.Lock()
			w.peak = max(w.peak, ms.HeapInuse)
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

// end stops the sampler; it may be called more than once.
func (w *heapWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// growth returns how far the heap in use rose above its baseline at its
// peak so far.
func (w *heapWatch) growth() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak - w.base
}

// checkHeapGrowth fails t when the heap grew past limit during the
// attack named what.
func (w *heapWatch) checkHeapGrowth(t testing.TB, what string, limit uint64) {
	t.Helper()
	w.end()
	got := w.growth()
	t.Logf("%s: heap in use grew by %d MiB at its peak", what, got>>20)
	if got > limit {
		t.Errorf("%s: got the heap grown by %d MiB, want at most %d MiB", what, got>>20, limit>>20)
	}
}
