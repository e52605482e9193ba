package network

import (
	"math/bits"
	"sync"
)

// Response frames of fetches are recycled: a follower's fetch answer
// carries the records it replicates, so without reuse a broker allocates
// twice the bytes it leads (once per follower) per second only to frame
// them, and that, not the live heap, is what sets how often the garbage
// collector runs (a quarter of the bytes allocated in a replicated
// produce benchmark, and most of a fifth of the CPU going to GC).
//
// A frame comes from the pool of its power-of-two size class and is
// given back by the connection's writer once written; frames of half the
// smallest class or less, or larger than the largest, are left to the
// garbage collector. The classes start small because a fetch reads the
// records it copies into buffers of these pools too (broker.fetchReads):
// a follower's fetch at the tail of a busy partition reads a few KiB.

const (
	// minPooledFrameShift and maxPooledFrameShift bound the size
	// classes: 1 KiB .. 16 MiB.
	minPooledFrameShift = 10
	maxPooledFrameShift = 24
)

// framePools holds one pool per size class, of *[]byte whose cap is the
// class size.
var framePools [maxPooledFrameShift - minPooledFrameShift + 1]sync.Pool

// frameClass returns the size class index of a frame of n bytes, or -1
// when frames of that size are not pooled.
func frameClass(n int) int {
	if n <= 1<<minPooledFrameShift/2 || n > 1<<maxPooledFrameShift {
		return -1
	}
	shift := bits.Len(uint(n - 1))
	return max(shift, minPooledFrameShift) - minPooledFrameShift
}

// GetFrame returns an empty buffer with room for at least n bytes, from
// its size class's pool when frames of n bytes are pooled.
func GetFrame(n int) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if p, ok := framePools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<(c+minPooledFrameShift))
}

// PutFrame gives a frame whose last user is done with it back to its
// size class's pool; a frame not of a class size (one that outgrew its
// buffer, or one never pooled) is dropped.
func PutFrame(frame []byte) {
	c := frameClass(cap(frame))
	if c < 0 || cap(frame) != 1<<(c+minPooledFrameShift) {
		return
	}
	frame = frame[:0]
	framePools[c].Put(&frame)
}
