package conformance

import (
	"errors"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// closeBound is how soon a closed session must have left every watcher:
// well under any session timeout, since Close removes it at once.
const closeBound = time.Second

// testRegisterAppearsCloseRemovesAtOnce: a watcher on another backend sees
// a registration with its broker epoch; Members agrees; Session.Close
// removes it well within the session timeout and ends the session with
// ErrClosed.
func testRegisterAppearsCloseRemovesAtOnce(t T, h Harness) {
	c := h.NewCluster(t, 2)
	members := watchMembers(t, c.Backend(1))
	from := members.waitFor(t, 0, nil, startupBound(h), "WatchMembers before any registration")

	s := register(t, c.Backend(0), brokerFor(0), startupBound(h))
	b := s.Broker()
	from = members.waitFor(t, from, []coord.Broker{b}, detectionBound(h), "WatchMembers on backend 1 after Register on backend 0")
	for i := 0; i < 2; i++ {
		ctx := withTimeout(t, callBound)
		got, err := c.Backend(i).Members(ctx)
		if err != nil {
			t.Fatalf("Members on backend %d: got %v, want nil", i, err)
		}
		if !sameMembers(got, []coord.Broker{b}) {
			t.Fatalf("Members on backend %d: got %s, want %s", i, memberIDs(got), memberIDs([]coord.Broker{b}))
		}
		if got[0] != b {
			t.Fatalf("Members on backend %d: got %+v, want %+v", i, got[0], b)
		}
	}

	closedAt := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Session.Close: got %v, want nil", err)
	}
	if !isClosed(s.Done()) {
		t.Fatalf("Session.Done after Close: open, want closed")
	}
	if err := s.Err(); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Session.Err after Close: got %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Session.Close: got %v, want nil (a no-op)", err)
	}
	members.waitFor(t, from, nil, closeBound, "WatchMembers on backend 1 after Session.Close on backend 0")
	t.Logf("broker %d left the watcher %v after Close", b.ID, time.Since(closedAt).Round(time.Millisecond))
	members.stop(t)
}

// testExpiryWithinBounds: a registered broker is cut off; a watcher on
// another backend sees it leave no sooner than two thirds of the session
// timeout (less 250 ms for the tick) and no later than the detection
// bound after the cut, and the cut-off session ends by itself with
// ErrSessionExpired within the bound too.
func testExpiryWithinBounds(t T, h Harness) {
	c := h.NewCluster(t, 3)
	members := watchMembers(t, c.Backend(1))
	s := register(t, c.Backend(0), brokerFor(0), startupBound(h))
	from := members.waitFor(t, 0, []coord.Broker{s.Broker()}, detectionBound(h), "WatchMembers on backend 1 after Register on backend 0")

	st := h.SessionTimeout()
	earliest := st*2/3 - 250*time.Millisecond
	bound := detectionBound(h)
	crashedAt := time.Now()
	c.Crash(0)
	defer c.Heal(0)
	left := members.waitFor(t, from, nil, bound, "WatchMembers on backend 1 after the crash of backend 0")
	leftAfter := members.receivedAt(left).Sub(crashedAt)
	if leftAfter < earliest {
		t.Fatalf("crashed broker %d left after %v, want no sooner than %v (2/3 of the %v session timeout, less 250 ms)", s.Broker().ID, leftAfter, earliest, st)
	}
	waitClosed(t, s.Done(), bound-time.Since(crashedAt), "Done of the crashed broker's own session")
	endedAfter := time.Since(crashedAt)
	if err := s.Err(); !errors.Is(err, coord.ErrSessionExpired) {
		t.Fatalf("crashed session Err: got %v, want ErrSessionExpired", err)
	}
	t.Logf("session timeout %v: the service expired broker %d after %v, the broker noticed within %v", st, s.Broker().ID, leftAfter.Round(time.Millisecond), endedAfter.Round(time.Millisecond))
	members.stop(t)
}

// testReRegistrationNewEpoch: Register of a live broker ID fails with
// ErrExists; after Close, registering again gives a greater broker epoch,
// and every later registration of any broker a greater one still.
func testReRegistrationNewEpoch(t T, h Harness) {
	c := h.NewCluster(t, 2)
	b1 := brokerFor(0)
	first := register(t, c.Backend(0), b1, startupBound(h))

	for i := 0; i < 2; i++ {
		ctx := withTimeout(t, callBound)
		if s, err := c.Backend(i).Register(ctx, b1); !errors.Is(err, coord.ErrExists) {
			if err == nil {
				s.Close()
			}
			t.Fatalf("Register of live broker %d on backend %d: got %v, want ErrExists", b1.ID, i, err)
		}
	}

	epochs := []int64{first.Broker().Epoch}
	if err := first.Close(); err != nil {
		t.Fatalf("Session.Close: got %v, want nil", err)
	}
	steps := []struct {
		backend int
		broker  coord.Broker
	}{
		{0, b1},           // the same broker, same process, again
		{1, brokerFor(1)}, // another broker
		{1, b1},           // broker 1 from another process
	}
	var sessions []coord.Session
	for n, step := range steps {
		if n == 2 {
			// Broker 1 moves to backend 1: close its session first.
			if err := sessions[0].Close(); err != nil {
				t.Fatalf("Session.Close: got %v, want nil", err)
			}
		}
		ctx := withTimeout(t, callBound)
		s, err := c.Backend(step.backend).Register(ctx, step.broker)
		if err != nil {
			t.Fatalf("Register of broker %d on backend %d after its previous session was closed: got %v, want nil", step.broker.ID, step.backend, err)
		}
		t.Cleanup(func() { s.Close() })
		checkRegistered(t, s, step.broker)
		if e := s.Broker().Epoch; e <= epochs[len(epochs)-1] {
			t.Fatalf("Register of broker %d on backend %d: epoch %d, want > %d (the latest earlier registration's)", step.broker.ID, step.backend, e, epochs[len(epochs)-1])
		}
		epochs = append(epochs, s.Broker().Epoch)
		sessions = append(sessions, s)
	}
	t.Logf("broker epochs in registration order: %v", epochs)
}
