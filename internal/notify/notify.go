// Package notify owns the close-and-replace broadcast: a channel that is
// closed at every change of some state, so that any number of waiters
// wake, and replaced by a fresh one for the next change.
//
// notify holds no state of its own beyond the channel and takes no lock:
// the state a Broadcast announces, and the order of a change and its
// Notify, stay with its owner, usually under the owner's mutex. It must
// not grow timers, values or callbacks; a waiter that needs one selects
// on Next beside its own.
package notify

import "sync/atomic"

// Broadcast wakes every waiter at each change its owner announces. The
// zero value is ready to use; a Broadcast must not be copied after first
// use.
//
// A waiter reads the state and takes Next in one step (under the owner's
// lock, or Next first and the state after), then waits on the channel;
// the owner changes the state and then calls Notify. Next and Notify are
// safe to call concurrently, under a read lock, a write lock or none.
type Broadcast struct {
	// current is the channel the next Notify closes, nil while no
	// waiter has asked for one (a Notify then costs no allocation).
	current atomic.Pointer[chan struct{}]
}

// Next returns a channel that is closed at the next Notify. It never
// blocks.
func (b *Broadcast) Next() <-chan struct{} {
	for {
		if p := b.current.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if b.current.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// Notify closes the channel every waiter holds, waking them all; a later
// Next returns a new channel. It never blocks.
func (b *Broadcast) Notify() {
	if p := b.current.Swap(nil); p != nil {
		close(*p)
	}
}
