package conformance

import (
	"context"
	"errors"
	"fmt"
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
		be := c.Backend(i)
		waitUntil(t, closeBound, fmt.Sprintf("Members on backend %d listing %+v", i, b), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			got, err := be.Members(ctx)
			if err != nil {
				t.Fatalf("Members on backend %d: got %v, want nil", i, err)
			}
			return len(got) == 1 && got[0].Equal(b), fmt.Sprintf("got %+v", got)
		})
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
	sessionEnded := closedAt(s.Done())
	left := members.waitFor(t, from, nil, bound, "WatchMembers on backend 1 after the crash of backend 0")
	leftAfter := members.receivedAt(left).Sub(crashedAt)
	if leftAfter < earliest {
		t.Fatalf("crashed broker %d left after %v, want no sooner than %v (2/3 of the %v session timeout, less 250 ms)", s.Broker().ID, leftAfter, earliest, st)
	}
	endedAfter := receiveWithin(t, sessionEnded, bound-time.Since(crashedAt), "Done of the crashed broker's own session").Sub(crashedAt)
	if err := s.Err(); !errors.Is(err, coord.ErrSessionExpired) {
		t.Fatalf("crashed session Err: got %v, want ErrSessionExpired", err)
	}
	t.Logf("session timeout %v: the service expired broker %d %v after the cut, the broker's own session ended %v after it", st, s.Broker().ID, leftAfter.Round(time.Millisecond), endedAfter.Round(time.Millisecond))
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

// testReplaceDeadIncarnation: a broker restarted on the data dir of a
// crashed incarnation registers at once with Replaces set to that
// incarnation's epoch (KRaft's incarnation rule): Register replaces the
// live registration with a greater epoch, Members and watchers on every
// backend show the new epoch, and Session.Replaced names the old one. A
// Replaces that is not the live registration's epoch (the same broker.id
// on another data dir) still gives ErrExists. Register trusts the caller's
// proof of death, so the old incarnation's backend is left running: the
// case checks what the service holds.
func testReplaceDeadIncarnation(t T, h Harness) {
	c := h.NewCluster(t, 3)
	members := watchMembers(t, c.Backend(2))
	b1 := brokerFor(0)
	first := register(t, c.Backend(0), b1, startupBound(h))
	old := first.Broker()
	if got := first.Replaced(); got != 0 {
		t.Fatalf("Session.Replaced of a registration without Replaces: got %d, want 0", got)
	}
	from := members.waitFor(t, 0, []coord.Broker{old}, detectionBound(h), "WatchMembers on backend 2 after Register on backend 0")

	for _, wrong := range []int64{old.Epoch + 1000, old.Epoch - 1} {
		stale := b1
		stale.Replaces = wrong
		ctx := withTimeout(t, callBound)
		if s, err := c.Backend(1).Register(ctx, stale); !errors.Is(err, coord.ErrExists) {
			if err == nil {
				s.Close()
			}
			t.Fatalf("Register of live broker %d (epoch %d) with Replaces %d: got %v, want ErrExists", b1.ID, old.Epoch, wrong, err)
		}
	}

	next := b1
	next.Replaces = old.Epoch
	start := time.Now()
	ctx := withTimeout(t, callBound)
	s, err := c.Backend(1).Register(ctx, next)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Register of broker %d with Replaces %d (its live epoch): got %v, want nil", b1.ID, old.Epoch, err)
	}
	t.Cleanup(func() { s.Close() })
	checkRegistered(t, s, b1)
	if bound := h.SessionTimeout() / 2; took > bound {
		t.Fatalf("Register with Replaces took %v, want at once (under %v, half the session timeout)", took, bound)
	}
	b := s.Broker()
	if b.Epoch <= old.Epoch {
		t.Fatalf("epoch of the replacing registration: got %d, want > %d", b.Epoch, old.Epoch)
	}
	if b.Replaces != 0 {
		t.Fatalf("Session.Broker().Replaces: got %d, want 0 (an input of Register only)", b.Replaces)
	}
	if got := s.Replaced(); got != old.Epoch {
		t.Fatalf("Session.Replaced: got %d, want %d", got, old.Epoch)
	}
	for i := 0; i < 3; i++ {
		be := c.Backend(i)
		waitUntil(t, closeBound, fmt.Sprintf("Members on backend %d listing %s", i, memberIDs([]coord.Broker{b})), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			got, err := be.Members(ctx)
			if err != nil {
				t.Fatalf("Members on backend %d: got %v, want nil", i, err)
			}
			return sameMembers(got, []coord.Broker{b}), "got " + memberIDs(got)
		})
	}
	members.waitFor(t, from, []coord.Broker{b}, closeBound, "WatchMembers on backend 2 after the replacement")

	// The replaced epoch is no longer live: replacing it again is refused.
	ctx = withTimeout(t, callBound)
	if s2, err := c.Backend(0).Register(ctx, next); !errors.Is(err, coord.ErrExists) {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("Register of broker %d with Replaces %d after epoch %d replaced it: got %v, want ErrExists", b1.ID, old.Epoch, b.Epoch, err)
	}
	t.Logf("broker %d epoch %d replaced epoch %d in %v", b1.ID, b.Epoch, old.Epoch, took.Round(time.Millisecond))
	members.stop(t)
}

// testBackendCloseEndsAll: closing the controller's backend ends its
// session (ErrClosed) and term at once, closes its watch channels, removes
// its broker from other backends' watchers well within the session
// timeout, lets another broker take over, and makes its further calls fail
// with ErrClosed.
func testBackendCloseEndsAll(t T, h Harness) {
	c := h.NewCluster(t, 3)
	cs := startCampaigners(t, h, c, 0, 1, 2)
	ctl := cs.waitTerm(t, nil, startupBound(h), "first election")
	other := (ctl.backend + 1) % 3
	members := watchMembers(t, c.Backend(other))
	waitMembersCount(t, members, 3, detectionBound(h))

	be := c.Backend(ctl.backend)
	watchCtx, cancelWatches := context.WithCancel(context.Background())
	defer cancelWatches()
	membersCh, err1 := be.WatchMembers(watchCtx)
	controllerCh, err2 := be.WatchController(watchCtx)
	metadataCh, err3 := be.WatchMetadata(watchCtx)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatalf("watches on the controller's backend: got %v, want nil", err)
	}

	from := members.count()
	closedAt := time.Now()
	if err := be.Close(); err != nil {
		t.Fatalf("Close of the backend of %v: got %v, want nil", ctl, err)
	}
	if !isClosed(ctl.term.Done()) {
		t.Fatalf("term %v after its backend's Close: live, want ended", ctl)
	}
	if !isClosed(ctl.session.Done()) {
		t.Fatalf("session of broker %d after its backend's Close: live, want ended", ctl.id)
	}
	if err := ctl.session.Err(); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("session of broker %d after its backend's Close: Err %v, want ErrClosed", ctl.id, err)
	}
	for name, drained := range map[string]<-chan struct{}{
		"WatchMembers":    drain(membersCh),
		"WatchController": drain(controllerCh),
		"WatchMetadata":   drain(metadataCh),
	} {
		waitClosed(t, drained, closeBound, name+" channel after Close of its backend")
	}
	members.waitMatch(t, from, closeBound, fmt.Sprintf("WatchMembers on backend %d dropping broker %d after Close of its backend", other, ctl.id), func(set []coord.Broker) bool {
		for _, b := range set {
			if b.ID == ctl.id {
				return false
			}
		}
		return true
	})
	t.Logf("broker %d left the watcher %v after Close of its backend", ctl.id, time.Since(closedAt).Round(time.Millisecond))
	next := cs.waitTerm(t, ctl, detectionBound(h), fmt.Sprintf("Close of the backend of %v", ctl))
	t.Logf("%v took over %v after the Close", next, next.wonAt.Sub(closedAt).Round(time.Millisecond))

	ctx := withTimeout(t, callBound)
	if _, err := be.Load(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Load on a closed backend: got %v, want ErrClosed", err)
	}
	if s, err := be.Register(ctx, brokerWithID(99)); !errors.Is(err, coord.ErrClosed) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Register on a closed backend: got %v, want ErrClosed", err)
	}
	if _, err := be.WatchMembers(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("WatchMembers on a closed backend: got %v, want ErrClosed", err)
	}
	cs.stop(t)
	members.stop(t)
}

// drain reads ch until it is closed, in a goroutine that ends then, and
// returns a channel closed at that moment.
func drain[V any](ch <-chan V) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
		}
	}()
	return done
}

// waitMembersCount waits until the watcher's latest set has n brokers.
func waitMembersCount(t T, w membersWatch, n int, d time.Duration) {
	t.Helper()
	w.waitMatch(t, 0, d, fmt.Sprintf("WatchMembers listing %d brokers", n), func(set []coord.Broker) bool { return len(set) == n })
}
