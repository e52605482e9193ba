package parallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestFirstError: every index runs once, no more than the workers at
// once, and the error returned is the lowest index's.
func TestFirstError(t *testing.T) {
	var running, most, calls atomic.Int32
	errAt := map[int]error{3: errors.New("three"), 7: errors.New("seven")}
	err := FirstError(10, 4, func(i int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		calls.Add(1)
		return errAt[i]
	})
	if err != errAt[3] {
		t.Errorf("got error %v, want the lowest index's (three)", err)
	}
	if calls.Load() != 10 || most.Load() > 4 {
		t.Errorf("%d calls, at most %d at once; want 10 and at most 4", calls.Load(), most.Load())
	}
	if err := FirstError(3, 1, func(i int) error { return errAt[i] }); err != nil {
		t.Errorf("one worker, no failing index: got %v", err)
	}
}
