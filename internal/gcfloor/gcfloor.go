// Package gcfloor keeps a process's garbage collector from running on a
// tiny heap. Go sets the next collection's heap goal at twice the live
// heap (GOGC=100), at least 4 MiB. A broker's live heap is a few MiB while
// it moves a hundred MB/s of records through short-lived buffers, so it
// collected some 80 times a second, each cycle taking a quarter of the
// CPU from requests and slowing the goroutines that allocate; a floor of
// a few tens of MiB, which a Kafka broker's 1 GiB heap dwarfs, makes
// collections rare without changing how a large heap is paced.
package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// liveHeapMetric is the heap the last collection found live.
const liveHeapMetric = "/gc/heap/live:bytes"

// minHeap is Go's smallest heap goal at GOGC=100; the runtime scales it
// with GOGC, so that below minHeap of live heap the goal is
// minHeap×GOGC/100 however little is live.
const minHeap = 4 << 20

// Floor raises GOGC after each collection so that the next heap goal is
// at least its floor.
type Floor struct {
	floor uint64
	// base is the GOGC in effect at Start, restored by Stop and never
	// gone below.
	base int

	mu      sync.Mutex
	stopped bool
	percent int
	sample  []metrics.Sample
}

// sentinel is allocated each cycle; its cleanup runs after the
// collection that finds it unreachable, which is how Floor learns that a
// collection happened. It holds a pointer so that it is not put in the
// tiny allocator, whose objects may never be cleaned up.
type sentinel struct{ _ *byte }

// Start keeps the heap goal of this process at least floor bytes from the
// next collection on, until Stop. The floor only ever raises GOGC above
// the value in effect at Start.
func Start(floor uint64) *Floor {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	f := &Floor{floor: floor, base: base, percent: base, sample: []metrics.Sample{{Name: liveHeapMetric}}}
	f.mu.Lock()
	f.adjustLocked()
	f.mu.Unlock()
	f.arm()
	return f
}

// arm asks to be called after the next collection.
func (f *Floor) arm() {
	runtime.AddCleanup(new(sentinel), (*Floor).collected, f)
}

// collected adjusts GOGC after a collection and asks for the next one.
func (f *Floor) collected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.adjustLocked()
	f.arm()
}

// adjustLocked sets GOGC for a heap goal of the floor over the live heap,
// when that is above the base GOGC.
func (f *Floor) adjustLocked() {
	metrics.Read(f.sample)
	if f.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(f.sample[0].Value.Uint64(), f.floor, f.base)
	// Small moves are not worth a change of the pacer's goal.
	if p == f.percent || (p > f.percent && p < f.percent+f.percent/8) || (p < f.percent && p > f.percent-f.percent/8) {
		return
	}
	f.percent = p
	debug.SetGCPercent(p)
}

// Percent returns the GOGC that makes the heap goal after a collection
// finding live bytes live about floor bytes: the goal is the larger of
// live×(1+GOGC/100) and minHeap×GOGC/100. It is base when that already
// reaches the floor, and never below base; a base below 0 (GOGC=off) is
// kept.
func Percent(live, floor uint64, base int) int {
	if base < 0 || live >= floor {
		return base
	}
	p := math.Floor(float64(floor) * 100 / minHeap)
	if live > 0 {
		p = min(p, math.Ceil(float64(floor-live)*100/float64(live)))
	}
	return max(base, int(p))
}

// Stop gives GOGC back its value at Start.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	debug.SetGCPercent(f.base)
}
