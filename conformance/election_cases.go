package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// wonTerm is one term won by a campaigner.
type wonTerm struct {
	backend int // index of the backend that won it
	id      coord.BrokerID
	epoch   int64
	term    coord.Term
	session coord.Session
	wonAt   time.Time
}

func (w *wonTerm) String() string {
	return fmt.Sprintf("broker %d epoch %d", w.id, w.epoch)
}

// campaigners runs a campaign loop on several backends, as brokers do:
// register, campaign, hold the term until it ends, campaign again, and
// register again when the session ends. It checks the election's safety all
// the while: at most one live term at any moment, and every new term's
// epoch greater than every earlier one's.
type campaigners struct {
	h      Harness
	cancel context.CancelFunc            // ends every loop
	start  func(i int, be coord.Backend) // starts a loop under the loops' ctx
	wg     sync.WaitGroup
	bad    violations

	mu       sync.Mutex
	terms    []*wonTerm       // every term won, in the order Campaign returned
	live     map[int]*wonTerm // the term each backend holds
	sessions map[int]coord.Session
	maxEpoch int64
	changed  notify.Broadcast // announces every new term
	// evicted are terms whose election node another broker removed
	// (ControllerEvictor): such a term learns of it only by its own
	// watch, so it may still be live, fenced by its epoch, when the next
	// term is won, as a controller cut off from the service would be.
	evicted map[*wonTerm]bool
}

// startCampaigners starts a campaign loop on backend i of c for each i in
// backends, and a checker of the at-most-one-live-term rule. stop (also
// run by t.Cleanup) ends them.
func startCampaigners(t T, h Harness, c Cluster, backends ...int) *campaigners {
	ctx, cancel := context.WithCancel(context.Background())
	cs := &campaigners{
		h:        h,
		cancel:   cancel,
		live:     map[int]*wonTerm{},
		sessions: map[int]coord.Session{},
	}
	cs.start = func(i int, be coord.Backend) {
		cs.wg.Add(1)
		go cs.loop(ctx, i, be)
	}
	for _, i := range backends {
		cs.add(i, c.Backend(i))
	}
	cs.wg.Add(1)
	go cs.check(ctx)
	t.Cleanup(func() { cs.stop(t) })
	return cs
}

// add starts a campaign loop for backend i on be (a restarted node's new
// backend, say).
func (cs *campaigners) add(i int, be coord.Backend) { cs.start(i, be) }

// stop ends every campaign loop and the checker, waits for them, and
// reports the violations they found. It is idempotent.
func (cs *campaigners) stop(t T) {
	t.Helper()
	cs.cancel()
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	timer := time.NewTimer(callBound + cs.h.SessionTimeout())
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Errorf("campaign loops still running %v after their context was cancelled: Register, Campaign or Session.Close ignores ctx", callBound+cs.h.SessionTimeout())
	}
	cs.bad.report(t)
}

// loop is backend i's campaign loop. It ends when ctx ends or the backend
// is closed.
func (cs *campaigners) loop(ctx context.Context, i int, be coord.Backend) {
	defer cs.wg.Done()
	b := brokerFor(i)
	for ctx.Err() == nil {
		s, err := be.Register(ctx, b)
		switch {
		case err == nil:
		case errors.Is(err, coord.ErrClosed):
			return
		case ctx.Err() != nil:
			return
		default:
			// ErrExists until the previous incarnation expires,
			// ErrUnavailable while the service is away.
			if !errors.Is(err, coord.ErrExists) && !errors.Is(err, coord.ErrUnavailable) {
				cs.bad.addf("campaigner of broker %d: Register: got %v, want nil, ErrExists or ErrUnavailable", b.ID, err)
			}
			if !pause(ctx) {
				return
			}
			continue
		}
		cs.mu.Lock()
		cs.sessions[i] = s
		cs.mu.Unlock()
		cs.campaignWhileLive(ctx, i, be, s)
		s.Close()
	}
}

// campaignWhileLive campaigns on s and holds each term won until it ends,
// as long as s lives.
func (cs *campaigners) campaignWhileLive(ctx context.Context, i int, be coord.Backend, s coord.Session) {
	for ctx.Err() == nil && !isClosed(s.Done()) {
		term, err := be.Campaign(ctx, s)
		if err != nil {
			switch {
			case ctx.Err() != nil, isClosed(s.Done()):
				if isClosed(s.Done()) && !errors.Is(err, coord.ErrSessionExpired) && !errors.Is(err, coord.ErrClosed) && ctx.Err() == nil {
					cs.bad.addf("campaigner of broker %d: Campaign after its session ended: got %v, want ErrSessionExpired or ErrClosed", s.Broker().ID, err)
				}
				return
			case errors.Is(err, coord.ErrClosed):
				return
			default:
				cs.bad.addf("campaigner of broker %d: Campaign: got %v, want a term (it blocks while the service is away)", s.Broker().ID, err)
				if !pause(ctx) {
					return
				}
				continue
			}
		}
		w := &wonTerm{backend: i, id: term.Controller(), epoch: term.Epoch(), term: term, session: s, wonAt: time.Now()}
		if w.id != s.Broker().ID {
			cs.bad.addf("campaigner of broker %d: Term.Controller: got %d, want %d", s.Broker().ID, w.id, s.Broker().ID)
		}
		cs.publish(w)
		select {
		case <-term.Done():
		case <-ctx.Done():
		}
		cs.mu.Lock()
		if cs.live[i] == w {
			delete(cs.live, i)
		}
		cs.mu.Unlock()
	}
}

// pause waits a little before a retry; false when ctx ends first.
func pause(ctx context.Context) bool {
	timer := time.NewTimer(5 * pollInterval)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// publish records a term just won and checks it against every other: no
// other term may still be live, and its epoch must exceed every earlier
// one.
func (cs *campaigners) publish(w *wonTerm) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for j, other := range cs.live {
		if j != w.backend && !isClosed(other.term.Done()) && !cs.evicted[other] {
			cs.bad.addf("two live terms: %v won while %v (won %v earlier) was still live", w, other, w.wonAt.Sub(other.wonAt).Round(time.Millisecond))
		}
	}
	if len(cs.terms) > 0 && w.epoch <= cs.maxEpoch {
		cs.bad.addf("term epochs: %v won after a term of epoch %d, want epoch > %d", w, cs.maxEpoch, cs.maxEpoch)
	}
	if w.epoch > cs.maxEpoch || len(cs.terms) == 0 {
		cs.maxEpoch = w.epoch
	}
	cs.terms = append(cs.terms, w)
	cs.live[w.backend] = w
	cs.changed.Notify()
}

// check asserts, every few milliseconds, that at most one term is live.
func (cs *campaigners) check(ctx context.Context) {
	defer cs.wg.Done()
	ticker := time.NewTicker(2 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		cs.mu.Lock()
		var liveTerms []*wonTerm
		for _, w := range cs.live {
			if !isClosed(w.term.Done()) && !cs.evicted[w] {
				liveTerms = append(liveTerms, w)
			}
		}
		cs.mu.Unlock()
		if len(liveTerms) > 1 {
			cs.bad.addf("two live terms at %s: %v", time.Now().Format("15:04:05.000"), liveTerms)
		}
	}
}

// current returns the newest term won, nil if none.
func (cs *campaigners) current() *wonTerm {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.terms) == 0 {
		return nil
	}
	return cs.terms[len(cs.terms)-1]
}

// waitTerm waits up to d for a live term whose epoch exceeds after (any
// live term when after is nil) and returns it; it fails t otherwise.
func (cs *campaigners) waitTerm(t T, after *wonTerm, d time.Duration, what string) *wonTerm {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		cs.mu.Lock()
		var found *wonTerm
		if n := len(cs.terms); n > 0 {
			w := cs.terms[n-1]
			if (after == nil || w.epoch > after.epoch) && !isClosed(w.term.Done()) {
				found = w
			}
		}
		changed := cs.changed.Next()
		cs.mu.Unlock()
		if found != nil {
			return found
		}
		select {
		case <-changed:
		case <-timer.C:
			if after == nil {
				t.Fatalf("%s: no controller elected within %v", what, d)
			}
			t.Fatalf("%s: no controller after %v elected within %v", what, after, d)
		case <-time.After(pollInterval):
			// The newest term may have ended: look for the next one.
		}
	}
}

// session returns the session backend i campaigns with now.
func (cs *campaigners) session(i int) coord.Session {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.sessions[i]
}

// testOneControllerAcross20Changes: five brokers campaign in a loop while
// the controller is forced to change 20 times, alternately by Resign and by
// a crash (cut off, then healed once a successor is elected). At every
// moment at most one term is live, epochs only grow, and every change
// yields a new controller within the detection bound.
func testOneControllerAcross20Changes(t T, h Harness) {
	const brokers, changes = 5, 20
	c := h.NewCluster(t, brokers)
	cs := startCampaigners(t, h, c, 0, 1, 2, 3, 4)
	bound := detectionBound(h)
	cs.waitTerm(t, nil, startupBound(h), "first election")
	for change := 1; change <= changes; change++ {
		prev := cs.waitTerm(t, nil, bound, fmt.Sprintf("change %d", change))
		start := time.Now()
		var how string
		if change%2 == 1 {
			how = "resign"
			ctx := withTimeout(t, callBound)
			if err := prev.term.Resign(ctx); err != nil {
				t.Fatalf("change %d: Resign of %v: got %v, want nil", change, prev, err)
			}
			if !isClosed(prev.term.Done()) {
				t.Fatalf("change %d: Resign of %v returned with the term's Done still open, want it closed at once", change, prev)
			}
		} else {
			how = "crash"
			c.Crash(prev.backend)
		}
		next := cs.waitTerm(t, prev, bound, fmt.Sprintf("change %d (%s of %v)", change, how, prev))
		took := time.Since(start)
		if how == "crash" {
			c.Heal(prev.backend)
		}
		t.Logf("change %2d: %s of %v -> %v in %v", change, how, prev, next, took.Round(time.Millisecond))
		cs.bad.report(t)
		if t.Failed() {
			t.Fatalf("change %d: stopping after the violations above", change)
		}
	}
	// Every crashed broker registered again once its old session was gone
	// and campaigns again.
	waitUntil(t, detectionBound(h)+callBound, "all five brokers registered again after the crashes", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		got, err := c.Backend(0).Members(ctx)
		if err != nil {
			return false, fmt.Sprintf("Members: %v", err)
		}
		return len(got) == brokers, fmt.Sprintf("Members: got %s", memberIDs(got))
	})
	cs.stop(t)
}

// testCrashedControllerReplaced: the controller is cut off; another broker
// is elected (its Campaign returns and Controller() names it) within the
// detection bound, and the crashed controller's Term and Session end by
// themselves within it too, the session with ErrSessionExpired.
func testCrashedControllerReplaced(t T, h Harness) {
	c := h.NewCluster(t, 3)
	cs := startCampaigners(t, h, c, 0, 1, 2)
	old := cs.waitTerm(t, nil, startupBound(h), "first election")
	bound := detectionBound(h)
	crashedAt := time.Now()
	c.Crash(old.backend)
	defer c.Heal(old.backend)
	termEnded, sessionEnded := closedAt(old.term.Done()), closedAt(old.session.Done())

	next := cs.waitTerm(t, old, bound, fmt.Sprintf("crash of controller %v", old))
	if next.backend == old.backend {
		t.Fatalf("after the crash of %v: got %v from the crashed backend, want another broker", old, next)
	}
	t.Logf("crash of %v: %v elected after %v", old, next, next.wonAt.Sub(crashedAt).Round(time.Millisecond))

	other := c.Backend(next.backend)
	waitUntil(t, bound-time.Since(crashedAt), fmt.Sprintf("Controller() on broker %d naming %v", next.id, next), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		info, err := other.Controller(ctx)
		if err != nil {
			return false, fmt.Sprintf("Controller: %v", err)
		}
		return info.ID == next.id && info.Epoch == next.epoch, fmt.Sprintf("got %+v, want {ID:%d Epoch:%d}", info, next.id, next.epoch)
	})

	termEnd := receiveWithin(t, termEnded, bound-time.Since(crashedAt), fmt.Sprintf("Done of the crashed controller's term (%v)", old)).Sub(crashedAt)
	sessionEnd := receiveWithin(t, sessionEnded, bound-time.Since(crashedAt), fmt.Sprintf("Done of the crashed controller's session (broker %d)", old.id)).Sub(crashedAt)
	if err := old.session.Err(); !errors.Is(err, coord.ErrSessionExpired) {
		t.Fatalf("crashed controller's session Err: got %v, want ErrSessionExpired", err)
	}
	t.Logf("crashed controller: its term ended %v and its session %v after the cut", termEnd.Round(time.Millisecond), sessionEnd.Round(time.Millisecond))
	cs.stop(t)
}

// testDeposedCommitFenced: a controller that was cut off and replaced
// comes back and commits with its old term: ErrFenced, nothing changed.
// A controller that resigned and commits: ErrFenced, nothing changed.
func testDeposedCommitFenced(t T, h Harness) {
	c := h.NewCluster(t, 3)
	cs := startCampaigners(t, h, c, 0, 1, 2)
	zombie := cs.waitTerm(t, nil, startupBound(h), "first election")
	ctx := withTimeout(t, callBound)
	if err := c.Backend(zombie.backend).Commit(ctx, zombie.term, createTopicOp("before-crash", 2, 3, zombie.epoch)); err != nil {
		t.Fatalf("Commit by controller %v: got %v, want nil", zombie, err)
	}

	c.Crash(zombie.backend)
	next := cs.waitTerm(t, zombie, detectionBound(h), fmt.Sprintf("crash of controller %v", zombie))
	c.Heal(zombie.backend)
	nextBackend := c.Backend(next.backend)
	before := loadAt(t, nextBackend)
	if _, ok := before.Topics["before-crash"]; !ok {
		t.Fatalf("Load on %v: topic before-crash missing, want it (committed by %v)", next, zombie)
	}

	// The zombie's write: a leader change of a partition it created.
	zombieState := before.Partitions[coord.TopicPartition{Topic: "before-crash", Partition: 0}]
	zombieState.Leader, zombieState.LeaderEpoch = coord.NoBroker, zombieState.LeaderEpoch+1
	zombieWrite := coord.SetPartition{State: zombieState, ExpectedEpoch: zombieState.PartitionEpoch}

	// The healed zombie may need a moment to reach the service again;
	// until then ErrUnavailable is allowed, never success.
	waitUntil(t, h.SessionTimeout()+callBound, fmt.Sprintf("Commit by deposed %v failing with ErrFenced", zombie), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		err := c.Backend(zombie.backend).Commit(ctx, zombie.term, createTopicOp("zombie", 1, 3, zombie.epoch), zombieWrite)
		switch {
		case errors.Is(err, coord.ErrFenced):
			return true, ""
		case errors.Is(err, coord.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
			return false, fmt.Sprintf("last error %v", err)
		}
		t.Fatalf("Commit by deposed %v (after %v was elected): got %v, want ErrFenced", zombie, next, err)
		return false, ""
	})
	checkUnchanged(t, nextBackend, before, "Commit by the deposed controller")

	ctx = withTimeout(t, callBound)
	if err := next.term.Resign(ctx); err != nil {
		t.Fatalf("Resign of %v: got %v, want nil", next, err)
	}
	before = loadAt(t, nextBackend)
	ctx = withTimeout(t, callBound)
	if err := nextBackend.Commit(ctx, next.term, createTopicOp("resigned", 1, 3, next.epoch)); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Commit by resigned %v: got %v, want ErrFenced", next, err)
	}
	checkUnchanged(t, nextBackend, before, "Commit by the resigned controller")
	cs.stop(t)
}

// loadAt loads the metadata through be, failing t on error.
func loadAt(t T, be coord.Backend) *coord.Metadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	md, err := be.Load(ctx)
	if err != nil {
		t.Fatalf("Load: got %v, want nil", err)
	}
	return md
}

// checkUnchanged fails t when the topics or partition states loaded
// through be differ from before.
func checkUnchanged(t T, be coord.Backend, before *coord.Metadata, after string) {
	t.Helper()
	now := loadAt(t, be)
	if !reflect.DeepEqual(now.Topics, before.Topics) {
		t.Fatalf("after %s: topics %v, want unchanged %v", after, now.TopicNames(), before.TopicNames())
	}
	if !reflect.DeepEqual(now.Partitions, before.Partitions) {
		t.Fatalf("after %s: %d partition states changed, want none", after, diffPartitions(before, now))
	}
}

// diffPartitions counts partitions whose state differs between a and b.
func diffPartitions(a, b *coord.Metadata) int {
	n := 0
	for tp, s := range a.Partitions {
		if o, ok := b.Partitions[tp]; !ok || !reflect.DeepEqual(s, o) {
			n++
		}
	}
	for tp := range b.Partitions {
		if _, ok := a.Partitions[tp]; !ok {
			n++
		}
	}
	return n
}

// testEpochsIncrease: across five Resign and re-Campaign rounds, each
// new term's epoch is greater than the last; Controller() on every backend
// and WatchController agree with the term held.
func testEpochsIncrease(t T, h Harness) {
	const brokers, rounds = 3, 5
	c := h.NewCluster(t, brokers)
	watched := watchController(t, c.Backend(0))
	cs := startCampaigners(t, h, c, 0, 1, 2)
	bound := detectionBound(h)
	var prev *wonTerm
	for round := 1; round <= rounds; round++ {
		d := bound
		if prev == nil {
			d = startupBound(h)
		}
		cur := cs.waitTerm(t, prev, d, fmt.Sprintf("round %d", round))
		if prev != nil && cur.epoch <= prev.epoch {
			t.Fatalf("round %d: %v after %v, want a greater epoch", round, cur, prev)
		}
		want := coord.ControllerInfo{ID: cur.id, Epoch: cur.epoch}
		for i := 0; i < brokers; i++ {
			be := c.Backend(i)
			waitUntil(t, bound, fmt.Sprintf("round %d: Controller() on backend %d naming %v", round, i, cur), func() (bool, string) {
				if isClosed(cur.term.Done()) {
					t.Fatalf("round %d: term %v ended by itself, want it held until Resign", round, cur)
				}
				ctx, cancel := context.WithTimeout(context.Background(), callBound)
				defer cancel()
				got, err := be.Controller(ctx)
				if err != nil {
					return false, fmt.Sprintf("Controller: %v", err)
				}
				return got == want, fmt.Sprintf("got %+v, want %+v", got, want)
			})
		}
		watched.waitFor(t, want, bound, fmt.Sprintf("round %d: WatchController on backend 0", round))
		ctx := withTimeout(t, callBound)
		if err := cur.term.Resign(ctx); err != nil {
			t.Fatalf("round %d: Resign of %v: got %v, want nil", round, cur, err)
		}
		if err := cur.term.Resign(ctx); err != nil {
			t.Fatalf("round %d: second Resign of %v: got %v, want nil (a no-op)", round, cur, err)
		}
		if cur.term.Context().Err() == nil {
			t.Fatalf("round %d: Context of resigned %v not cancelled, want cancelled", round, cur)
		}
		prev = cur
	}
	cs.stop(t)
	watched.stop(t)
}

// campaignResult is how one direct Campaign call ended.
type campaignResult struct {
	term coord.Term
	err  error
	at   time.Time
}

// testCampaignEndsWithCtxOrSession: of three brokers campaigning, one
// wins; a loser's Campaign returns ctx.Err() promptly when its ctx is
// cancelled, and another loser's returns ErrClosed (or ErrSessionExpired)
// promptly when its session is closed; neither becomes controller, and
// once the winner resigns Controller() reports none.
func testCampaignEndsWithCtxOrSession(t T, h Harness) {
	c := h.NewCluster(t, 3)
	sessions := make([]coord.Session, 3)
	for i := range sessions {
		sessions[i] = register(t, c.Backend(i), brokerFor(i), startupBound(h))
	}
	ctxs := make([]context.Context, 3)
	cancels := make([]context.CancelFunc, 3)
	results := make([]chan campaignResult, 3)
	for i := range sessions {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
		results[i] = make(chan campaignResult, 1)
		go func() {
			term, err := c.Backend(i).Campaign(ctxs[i], sessions[i])
			results[i] <- campaignResult{term: term, err: err, at: time.Now()}
		}()
	}
	// Whoever wins, the other two are the losers.
	winner := -1
	timer := time.NewTimer(startupBound(h))
	defer timer.Stop()
	var won campaignResult
	for winner < 0 {
		select {
		case won = <-results[0]:
			winner = 0
		case won = <-results[1]:
			winner = 1
		case won = <-results[2]:
			winner = 2
		case <-timer.C:
			t.Fatalf("no Campaign returned within %v", startupBound(h))
		}
	}
	if won.err != nil {
		t.Fatalf("Campaign of broker %d: got %v, want a term", winner+1, won.err)
	}
	byCtx, bySession := (winner+1)%3, (winner+2)%3

	cancelledAt := time.Now()
	cancels[byCtx]()
	r := receiveWithin(t, results[byCtx], closeBound, fmt.Sprintf("Campaign of broker %d after its ctx was cancelled", byCtx+1))
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Campaign of broker %d after its ctx was cancelled: got %v, want context.Canceled", byCtx+1, r.err)
	}
	t.Logf("a cancelled Campaign returned after %v", r.at.Sub(cancelledAt).Round(time.Millisecond))

	closedAt := time.Now()
	if err := sessions[bySession].Close(); err != nil {
		t.Fatalf("Close of broker %d's session: got %v, want nil", bySession+1, err)
	}
	r = receiveWithin(t, results[bySession], closeBound, fmt.Sprintf("Campaign of broker %d after its session was closed", bySession+1))
	if !errors.Is(r.err, coord.ErrClosed) && !errors.Is(r.err, coord.ErrSessionExpired) {
		t.Fatalf("Campaign of broker %d after its session was closed: got %v, want ErrClosed or ErrSessionExpired", bySession+1, r.err)
	}
	t.Logf("a Campaign whose session closed returned after %v", r.at.Sub(closedAt).Round(time.Millisecond))

	ctx := withTimeout(t, callBound)
	info, err := c.Backend(winner).Controller(ctx)
	if err != nil || info.ID != won.term.Controller() || info.Epoch != won.term.Epoch() {
		t.Fatalf("Controller(): got %+v, %v; want {ID:%d Epoch:%d}, nil", info, err, won.term.Controller(), won.term.Epoch())
	}
	if isClosed(won.term.Done()) {
		t.Fatalf("the winner's term ended when losers withdrew, want it kept")
	}
	if err := won.term.Resign(ctx); err != nil {
		t.Fatalf("Resign: got %v, want nil", err)
	}
	// Nobody campaigns any more: there is no controller.
	for i := range sessions {
		be := c.Backend(i)
		waitUntil(t, detectionBound(h), fmt.Sprintf("Controller() on backend %d reporting none after the only campaigner resigned", i), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			info, err := be.Controller(ctx)
			if err != nil {
				return false, fmt.Sprintf("Controller: %v", err)
			}
			return info.ID == coord.NoBroker, fmt.Sprintf("got %+v, want ID %d", info, coord.NoBroker)
		})
	}
}

// receiveWithin receives from ch within d, failing t with what otherwise.
func receiveWithin[V any](t T, ch <-chan V, d time.Duration, what string) V {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: no return within %v", what, d)
		var zero V
		return zero
	}
}

// testEvictedControllerReplaced: another broker evicts the controller
// (ControllerEvictor, as a broker does whose probe finds the controller's
// process gone). An eviction naming an older epoch changes nothing; one
// naming the controller's term ends that term, although its session
// lives on, and a new controller is elected at a higher epoch within the
// startup bound, without waiting for any session to expire. Evicting the
// term again then changes nothing.
func testEvictedControllerReplaced(t T, h Harness) {
	c := h.NewCluster(t, 3)
	cs := startCampaigners(t, h, c, 0, 1, 2)
	old := cs.waitTerm(t, nil, startupBound(h), "first election")
	evictor := c.Backend((old.backend + 1) % 3).(coord.ControllerEvictor)
	evict := func(info coord.ControllerInfo) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		if err := evictor.EvictController(ctx, info); err != nil {
			t.Fatalf("EvictController(%+v): got %v, want nil", info, err)
		}
	}
	evict(coord.ControllerInfo{ID: old.id, Epoch: old.epoch - 1})
	evict(coord.ControllerInfo{ID: old.id + 10, Epoch: old.epoch})
	if isClosed(old.term.Done()) {
		t.Fatalf("evictions naming another epoch or controller ended the term of %v, want it kept", old)
	}
	evictedAt := time.Now()
	cs.mu.Lock()
	cs.evicted = map[*wonTerm]bool{old: true}
	cs.mu.Unlock()
	evict(coord.ControllerInfo{ID: old.id, Epoch: old.epoch})
	receiveWithin(t, closedAt(old.term.Done()), startupBound(h), fmt.Sprintf("Done of the evicted term (%v)", old))
	next := cs.waitTerm(t, old, startupBound(h), fmt.Sprintf("eviction of %v", old))
	t.Logf("eviction of %v: %v elected after %v", old, next, next.wonAt.Sub(evictedAt).Round(time.Millisecond))
	if err := old.session.Err(); err != nil {
		t.Fatalf("the evicted controller's session: got %v, want it alive", err)
	}
	evict(coord.ControllerInfo{ID: old.id, Epoch: old.epoch})
	if isClosed(next.term.Done()) {
		t.Fatalf("evicting the old term again ended the new one (%v)", next)
	}
	cs.stop(t)
}
