package notify

import (
	"sync"
	"testing"
)

// closed reports whether ch is closed, without blocking.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestBroadcast(t *testing.T) {
	cases := []struct {
		name string
		// steps is a script: 'w' takes a waiter (Next), 'n' notifies.
		steps string
		// woken lists, per waiter in order, whether its channel is closed
		// at the end.
		woken []bool
	}{
		{"a waiter and no change", "w", []bool{false}},
		{"a waiter and a change", "wn", []bool{true}},
		{"a change before the waiter", "nw", []bool{false}},
		{"two waiters share one change", "wwn", []bool{true, true}},
		{"a waiter after a change waits for the next", "wnw", []bool{true, false}},
		{"two changes, one waiter each", "wnwn", []bool{true, true}},
		{"changes without waiters", "nnnw", []bool{false}},
		{"two changes in a row", "wnn", []bool{true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Broadcast
			var waiters []<-chan struct{}
			for _, s := range c.steps {
				switch s {
				case 'w':
					waiters = append(waiters, b.Next())
				case 'n':
					b.Notify()
				}
			}
			if len(waiters) != len(c.woken) {
				t.Fatalf("got %d waiters, want %d", len(waiters), len(c.woken))
			}
			for i, ch := range waiters {
				if got := closed(ch); got != c.woken[i] {
					t.Errorf("waiter %d: got woken %v, want %v", i, got, c.woken[i])
				}
			}
		})
	}
}

func TestBroadcastSameChannelUntilNotify(t *testing.T) {
	var b Broadcast
	first, again := b.Next(), b.Next()
	if first != again {
		t.Fatalf("got two channels before a Notify, want one")
	}
	b.Notify()
	if next := b.Next(); next == first {
		t.Fatalf("got the closed channel after a Notify, want a new one")
	}
}

// TestBroadcastConcurrent runs Next and Notify from many goroutines (for
// the race detector): every channel a waiter took before the last Notify
// is closed.
func TestBroadcastConcurrent(t *testing.T) {
	var b Broadcast
	var wg sync.WaitGroup
	chans := make([][]<-chan struct{}, 8)
	for i := range chans {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				chans[i] = append(chans[i], b.Next())
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				b.Notify()
			}
		}()
	}
	wg.Wait()
	b.Notify()
	for i, cs := range chans {
		for j, ch := range cs {
			if !closed(ch) {
				t.Fatalf("waiter %d/%d: got not woken after the last Notify, want woken", i, j)
			}
		}
	}
}
