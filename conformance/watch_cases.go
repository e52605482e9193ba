package conformance

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// watcher drains one watch channel in its own goroutine, keeps every value
// received and checks each against the one before.
type watcher[V any] struct {
	what     string
	describe func(V) string // formats a value for failures
	cancel   context.CancelFunc
	closed   chan struct{} // closed when the watch channel is
	bad      violations

	mu      sync.Mutex
	values  []V
	times   []time.Time      // when each value was received
	changed notify.Broadcast // announces every value
}

// startWatch opens a watch with open and drains it until stop (run by
// t.Cleanup as well). check returns a violation of next following prev
// (prev is nil for the first value), or "".
func startWatch[V any](t T, what string, open func(ctx context.Context) (<-chan V, error), check func(prev *V, next V) string) *watcher[V] {
	t.Helper()
	return startWatchDescribed(t, what, open, check, func(v V) string { return fmt.Sprintf("%+v", v) })
}

// startWatchDescribed is startWatch with a describe function that formats
// values in failures.
func startWatchDescribed[V any](t T, what string, open func(ctx context.Context) (<-chan V, error), check func(prev *V, next V) string, describe func(V) string) *watcher[V] {
	t.Helper()
	// The watch lives as long as the ctx it is opened with.
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatalf("%s: got error %v, want a channel", what, err)
	}
	w := &watcher[V]{what: what, describe: describe, cancel: cancel, closed: make(chan struct{})}
	go func() {
		defer close(w.closed)
		var prev *V
		for v := range ch {
			if msg := check(prev, v); msg != "" {
				w.bad.addf("%s: %s", what, msg)
			}
			w.mu.Lock()
			w.values = append(w.values, v)
			w.times = append(w.times, time.Now())
			w.changed.Notify()
			w.mu.Unlock()
			prev = &v
		}
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop cancels the watch, checks that its channel closes, and reports the
// violations found. It is idempotent.
func (w *watcher[V]) stop(t T) {
	t.Helper()
	w.cancel()
	timer := time.NewTimer(callBound)
	defer timer.Stop()
	select {
	case <-w.closed:
	case <-timer.C:
		t.Errorf("%s: channel still open %v after its context was cancelled, want closed", w.what, callBound)
	}
	w.bad.report(t)
}

// count returns how many values arrived so far.
func (w *watcher[V]) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.values)
}

// receivedAt returns when value i was received.
func (w *watcher[V]) receivedAt(i int) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.times[i]
}

// since returns the values received from index from on.
func (w *watcher[V]) since(from int) []V {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]V(nil), w.values[from:]...)
}

// waitMatch waits up to d for a value at index from or later that match
// accepts and returns its index; it fails t with what and the last value
// otherwise.
func (w *watcher[V]) waitMatch(t T, from int, d time.Duration, what string, match func(V) bool) int {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		w.mu.Lock()
		for i := from; i < len(w.values); i++ {
			if match(w.values[i]) {
				w.mu.Unlock()
				return i
			}
		}
		from = max(from, len(w.values))
		changed := w.changed.Next()
		last := "nothing"
		if n := len(w.values); n > 0 {
			last = w.describe(w.values[n-1])
		}
		w.mu.Unlock()
		select {
		case <-changed:
		case <-w.closed:
			t.Fatalf("%s: channel closed early; last value %s", what, last)
		case <-timer.C:
			t.Fatalf("%s: not within %v; last value %s", what, d, last)
		}
	}
}

// controllerWatch is a WatchController whose epochs must never decrease.
type controllerWatch struct{ *watcher[coord.ControllerInfo] }

func watchController(t T, be coord.Backend) controllerWatch {
	t.Helper()
	return controllerWatch{startWatch(t, "WatchController", be.WatchController, func(prev *coord.ControllerInfo, next coord.ControllerInfo) string {
		if prev != nil && next.Epoch < prev.Epoch {
			return fmt.Sprintf("got %+v after %+v, want the epoch never to decrease", next, *prev)
		}
		return ""
	})}
}

// waitFor waits for want to be sent.
func (w controllerWatch) waitFor(t T, want coord.ControllerInfo, d time.Duration, what string) {
	t.Helper()
	w.waitMatch(t, 0, d, fmt.Sprintf("%s sending %+v", what, want), func(v coord.ControllerInfo) bool { return v == want })
}

// membersWatch is a WatchMembers whose sets must be ordered by ID.
type membersWatch struct{ *watcher[[]coord.Broker] }

func watchMembers(t T, be coord.Backend) membersWatch {
	t.Helper()
	return membersWatch{startWatchDescribed(t, "WatchMembers", be.WatchMembers, func(_ *[]coord.Broker, next []coord.Broker) string {
		if !sort.SliceIsSorted(next, func(i, j int) bool { return next[i].ID < next[j].ID }) {
			return fmt.Sprintf("got %s, want ordered by ID", memberIDs(next))
		}
		return ""
	}, memberIDs)}
}

// waitFor waits for exactly the brokers want (IDs and epochs) and returns
// the index of that set.
func (w membersWatch) waitFor(t T, from int, want []coord.Broker, d time.Duration, what string) int {
	t.Helper()
	return w.waitMatch(t, from, d, fmt.Sprintf("%s sending %s", what, memberIDs(want)), func(v []coord.Broker) bool { return sameMembers(v, want) })
}

// testMembersAndController: a watcher on a backend of its own sees every
// join and leave, in order (a set is never older than one already sent),
// and sees every controller change with epochs that never decrease.
func testMembersAndController(t T, h Harness) {
	c := h.NewCluster(t, 3)
	members := watchMembers(t, c.Backend(2))
	controllers := watchController(t, c.Backend(2))
	bound := detectionBound(h)

	// Joins and leaves, one at a time: between two expected sets the
	// watcher may only send the earlier or the later one.
	var live []coord.Broker
	from := members.waitFor(t, 0, nil, startupBound(h), "WatchMembers before any registration")
	sessions := map[coord.BrokerID]coord.Session{}
	step := func(what string) {
		t.Helper()
		prev := members.since(from)[0]
		next := members.waitFor(t, from, live, bound, what)
		for _, set := range members.since(from)[:next-from+1] {
			if !sameMembers(set, prev) && !sameMembers(set, live) {
				t.Fatalf("%s: WatchMembers sent %s between %s and %s, want only those two", what, memberIDs(set), memberIDs(prev), memberIDs(live))
			}
		}
		from = next
	}
	for i := 0; i < 3; i++ {
		s := register(t, c.Backend(i), brokerFor(i), startupBound(h))
		sessions[s.Broker().ID] = s
		live = append(live, s.Broker())
		step(fmt.Sprintf("join of broker %d", s.Broker().ID))
	}
	for _, id := range []coord.BrokerID{2, 1} {
		if err := sessions[id].Close(); err != nil {
			t.Fatalf("Close of broker %d's session: got %v, want nil", id, err)
		}
		live = removeBroker(live, id)
		step(fmt.Sprintf("leave of broker %d", id))
	}
	sessions[3].Close()
	live = nil
	step("leave of broker 3")

	// Controller changes: every term won shows up in the watch.
	cs := startCampaigners(t, h, c, 0, 1, 2)
	var prev *wonTerm
	for round := 1; round <= 3; round++ {
		d := bound
		if prev == nil {
			d = startupBound(h)
		}
		cur := cs.waitTerm(t, prev, d, fmt.Sprintf("controller change %d", round))
		controllers.waitFor(t, coord.ControllerInfo{ID: cur.id, Epoch: cur.epoch}, bound, fmt.Sprintf("controller change %d", round))
		ctx := withTimeout(t, callBound)
		if err := cur.term.Resign(ctx); err != nil {
			t.Fatalf("Resign of %v: got %v, want nil", cur, err)
		}
		prev = cur
	}
	cs.stop(t)
	members.stop(t)
	controllers.stop(t)
}

// removeBroker returns brokers without id.
func removeBroker(brokers []coord.Broker, id coord.BrokerID) []coord.Broker {
	var out []coord.Broker
	for _, b := range brokers {
		if b.ID != id {
			out = append(out, b)
		}
	}
	return out
}

// testMetadataInOrder: a watcher on another backend than the controller's
// receives states whose Version never decreases while 50 commits each
// bump one partition's leader epoch; no partition's leader epoch goes
// backwards, every state is one that was committed, and the last state
// holds every change. A watcher that reads nothing during the commits
// holds none of them up and then catches up with the latest state.
func testMetadataInOrder(t T, h Harness) {
	const partitions, commits = 4, 50
	c := h.NewCluster(t, 2)
	cs := startCampaigners(t, h, c, 0, 1)
	ctl := cs.waitTerm(t, nil, startupBound(h), "first election")
	other := c.Backend(1 - ctl.backend)
	const topic = "ordered"

	watched := startWatchDescribed(t, "WatchMetadata", other.WatchMetadata, func(prev **coord.Metadata, next *coord.Metadata) string {
		if next == nil {
			return "got a nil *Metadata"
		}
		for tp, s := range next.Partitions {
			// Every write bumped both epochs by one from 0.
			if tp.Topic == topic && s.LeaderEpoch != s.PartitionEpoch {
				return fmt.Sprintf("%v: leader epoch %d with partition epoch %d, want equal (a state that was never committed)", tp, s.LeaderEpoch, s.PartitionEpoch)
			}
		}
		if prev == nil {
			return ""
		}
		if next.Version < (*prev).Version {
			return fmt.Sprintf("version %d after %d, want never decreasing", next.Version, (*prev).Version)
		}
		for tp, p := range (*prev).Partitions {
			s, ok := next.Partitions[tp]
			if !ok {
				return fmt.Sprintf("%v vanished after leader epoch %d (version %d -> %d)", tp, p.LeaderEpoch, (*prev).Version, next.Version)
			}
			if s.LeaderEpoch < p.LeaderEpoch {
				return fmt.Sprintf("%v: leader epoch %d after %d (version %d -> %d), want never decreasing", tp, s.LeaderEpoch, p.LeaderEpoch, (*prev).Version, next.Version)
			}
		}
		return ""
	}, describeMetadata)

	be := c.Backend(ctl.backend)
	// A second watcher, on the controller's backend, reads nothing until
	// the commits are done: it must neither hold them up nor miss the end.
	slowCtx, cancelSlow := context.WithCancel(context.Background())
	defer cancelSlow()
	slow, err := be.WatchMetadata(slowCtx)
	if err != nil {
		t.Fatalf("WatchMetadata on the controller's backend: got %v, want nil", err)
	}

	ctx := withTimeout(t, callBound)
	if err := be.Commit(ctx, ctl.term, createTopicOp(topic, partitions, 2, ctl.epoch)); err != nil {
		t.Fatalf("Commit of CreateTopic %s: got %v, want nil", topic, err)
	}
	states := make([]coord.PartitionState, partitions)
	for p := range states {
		states[p] = initialState(topic, int32(p), 2, ctl.epoch)
	}
	for i := 0; i < commits; i++ {
		p := i % partitions
		next := states[p]
		next.Leader = coord.BrokerID(1 + (i/partitions)%2)
		next.LeaderEpoch++
		next.ControllerEpoch = ctl.epoch
		ctx := withTimeout(t, callBound)
		if err := be.Commit(ctx, ctl.term, coord.SetPartition{State: next, ExpectedEpoch: states[p].PartitionEpoch}); err != nil {
			t.Fatalf("commit %d (%v leader epoch %d): got %v, want nil", i+1, next.TopicPartition(), next.LeaderEpoch, err)
		}
		next.PartitionEpoch++
		states[p] = next
	}
	watched.waitMatch(t, 0, detectionBound(h)+callBound, "WatchMetadata sending the state after the last commit", func(md *coord.Metadata) bool {
		for _, want := range states {
			if got, ok := md.Partitions[want.TopicPartition()]; !ok || got.LeaderEpoch != want.LeaderEpoch {
				return false
			}
		}
		return true
	})
	last := watched.since(watched.count() - 1)[0]
	for _, want := range states {
		got := last.Partitions[want.TopicPartition()]
		if !samePartitionState(got, want) {
			t.Fatalf("last watched state of %v: got %+v, want %+v", want.TopicPartition(), got, want)
		}
	}
	t.Logf("%d commits, %d states watched", commits, watched.count())

	// The watcher that fell behind catches up with the latest state.
	slowSeen := 0
	var lastVersion int64 = -1
	deadline := time.NewTimer(detectionBound(h) + callBound)
	defer deadline.Stop()
	for caughtUp := false; !caughtUp; {
		select {
		case md, ok := <-slow:
			if !ok {
				t.Fatalf("WatchMetadata that fell behind: channel closed after %d states, want the latest state", slowSeen)
			}
			slowSeen++
			if md.Version < lastVersion {
				t.Fatalf("WatchMetadata that fell behind: version %d after %d, want never decreasing", md.Version, lastVersion)
			}
			lastVersion = md.Version
			caughtUp = true
			for _, want := range states {
				if got := md.Partitions[want.TopicPartition()]; !samePartitionState(got, want) {
					caughtUp = false
				}
			}
		case <-deadline.C:
			t.Fatalf("WatchMetadata that fell behind: no state with the last commit within %v (%d states read)", detectionBound(h)+callBound, slowSeen)
		}
	}
	t.Logf("the watcher that fell behind read %d states to catch up", slowSeen)
	watched.stop(t)
	cs.stop(t)
}
