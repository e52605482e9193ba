package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// outageCallDeadline is the ctx deadline of the calls made while the
// service is away; each must return by it plus outageSlack.
const (
	outageCallDeadline = 2 * time.Second
	outageSlack        = time.Second
)

// outageCall is one call made while the service is away.
type outageCall struct {
	name string
	call func(ctx context.Context) error
	// allowed lists the errors the call may fail with besides
	// ErrUnavailable and context.DeadlineExceeded.
	allowed []error
	// grace, when set, lets a read succeed if it returned within it: a
	// backend cut off an instant ago may still serve a read confirmed by
	// an answer that crossed the cut (a Raft leader's heartbeat answered
	// just before it), which was true when it was served.
	grace time.Duration
}

// outageResult is how an outageCall ended.
type outageResult struct {
	err  error
	took time.Duration
}

// outageCalls returns the calls made through be while it cannot reach the
// service; w is a term held through be.
func outageCalls(be coord.Backend, w *wonTerm) []outageCall {
	return []outageCall{
		{name: "Load", call: func(ctx context.Context) error { _, err := be.Load(ctx); return err }},
		{name: "Members", call: func(ctx context.Context) error { _, err := be.Members(ctx); return err }},
		{name: "Controller", call: func(ctx context.Context) error { _, err := be.Controller(ctx); return err }},
		{name: "Commit", call: func(ctx context.Context) error {
			return be.Commit(ctx, w.term, createTopicOp("during-outage", 1, 3, w.epoch))
		}, allowed: []error{coord.ErrFenced}},
		{name: "Register", call: func(ctx context.Context) error {
			s, err := be.Register(ctx, brokerWithID(99))
			if err == nil {
				s.Close()
			}
			return err
		}},
	}
}

// cutOffGrace is how soon after a cut a read through the cut-off backend
// may still succeed: well under one Raft heartbeat round of the harness.
const cutOffGrace = 50 * time.Millisecond

// cutOffCalls is outageCalls for a backend cut off from the network this
// instant: its reads have cutOffGrace.
func cutOffCalls(be coord.Backend, w *wonTerm) []outageCall {
	calls := outageCalls(be, w)
	for i := range calls {
		switch calls[i].name {
		case "Load", "Members", "Controller":
			calls[i].grace = cutOffGrace
		}
	}
	return calls
}

// checkOutageCalls makes calls at once, each with a ctx deadline of
// outageCallDeadline, and fails t unless each returns an error wrapping
// ErrUnavailable or context.DeadlineExceeded (or one it allows) within the
// deadline plus outageSlack. It calls restore (which brings the service
// back) once every call has returned or the bound has passed, before it
// judges, so that calls blocked beyond the bound can end.
func checkOutageCalls(t T, calls []outageCall, restore func(), during string) {
	t.Helper()
	results := make(chan outageResult, len(calls))
	byCall := make([]outageResult, len(calls))
	for i, oc := range calls {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), outageCallDeadline)
			defer cancel()
			start := time.Now()
			err := oc.call(ctx)
			byCall[i] = outageResult{err: err, took: time.Since(start)}
			results <- byCall[i]
		}()
	}
	pending := len(calls)
	timer := time.NewTimer(outageCallDeadline + outageSlack)
	defer timer.Stop()
	late := false
	for pending > 0 && !late {
		select {
		case <-results:
			pending--
		case <-timer.C:
			late = true
		}
	}
	restore()
	if late {
		waitStragglers := time.NewTimer(callBound)
		defer waitStragglers.Stop()
		for pending > 0 {
			select {
			case <-results:
				pending--
			case <-waitStragglers.C:
				t.Fatalf("%s: %d calls still blocked %v after the service came back", during, pending, callBound)
			}
		}
	}
	var failures []string
	for i, oc := range calls {
		r := byCall[i]
		ok := r.err != nil && (errors.Is(r.err, coord.ErrUnavailable) || errors.Is(r.err, context.DeadlineExceeded))
		ok = ok || (r.err == nil && r.took < oc.grace)
		for _, allowed := range oc.allowed {
			ok = ok || errors.Is(r.err, allowed)
		}
		switch {
		case r.took > outageCallDeadline+outageSlack:
			failures = append(failures, fmt.Sprintf("%s returned after %v (error %v), want within %v", oc.name, r.took.Round(time.Millisecond), r.err, outageCallDeadline+outageSlack))
		case !ok:
			failures = append(failures, fmt.Sprintf("%s: got error %v after %v, want one wrapping ErrUnavailable or context.DeadlineExceeded", oc.name, r.err, r.took.Round(time.Millisecond)))
		default:
			t.Logf("%s %s: %v after %v", oc.name, during, r.err, r.took.Round(time.Millisecond))
		}
	}
	if len(failures) > 0 {
		t.Fatalf("%s:\n%s", during, strings.Join(failures, "\n"))
	}
}

// waitLoads waits until Load through be works again and holds topic.
func waitLoads(t T, h Harness, be coord.Backend, topic, what string) time.Duration {
	t.Helper()
	return waitUntil(t, h.SessionTimeout()+callBound, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), outageCallDeadline)
		defer cancel()
		md, err := be.Load(ctx)
		if err != nil {
			return false, err.Error()
		}
		if _, ok := md.Topics[topic]; !ok {
			return false, fmt.Sprintf("topic %s missing from %s", topic, describeMetadata(md))
		}
		return true, ""
	})
}

// testCutOffCallsFailThenRecover: the controller's backend is cut off;
// Load, Members, Controller, Commit and Register through it with a 2 s
// deadline each return an error (wrapping ErrUnavailable, the ctx's, or
// ErrFenced for the Commit) within the deadline plus one second; a read
// may instead succeed within cutOffGrace, served on an answer that crossed
// the cut. Healed,
// the same backend serves again without being reopened, and its broker
// registers again.
func testCutOffCallsFailThenRecover(t T, h Harness) {
	c := h.NewCluster(t, 3)
	cs := startCampaigners(t, h, c, 0, 1, 2)
	ctl := cs.waitTerm(t, nil, startupBound(h), "first election")
	be := c.Backend(ctl.backend)
	commit(t, be, ctl, "CreateTopic before the cut", createTopicOp("before-cut", 1, 3, ctl.epoch))

	c.Crash(ctl.backend)
	checkOutageCalls(t, cutOffCalls(be, ctl), func() {}, fmt.Sprintf("through the cut-off backend of %v", ctl))
	c.Heal(ctl.backend)

	took := waitLoads(t, h, be, "before-cut", "Load through the healed backend")
	t.Logf("the healed backend loads again after %v", took.Round(time.Millisecond))
	s := register(t, be, brokerWithID(99), h.SessionTimeout()+callBound)
	waitUntil(t, detectionBound(h)+callBound, "Members listing brokers 1, 2, 3 and 99 once broker "+fmt.Sprint(ctl.id)+" registered again", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), outageCallDeadline)
		defer cancel()
		got, err := be.Members(ctx)
		if err != nil {
			return false, err.Error()
		}
		ids := make([]coord.BrokerID, len(got))
		for i, m := range got {
			ids[i] = m.ID
		}
		return fmt.Sprint(ids) == "[1 2 3 99]", fmt.Sprintf("got %s", memberIDs(got))
	})
	if err := s.Close(); err != nil {
		t.Fatalf("Close of broker 99's session: got %v, want nil", err)
	}
	cs.stop(t)
}

// testCallsFailWithinDeadline: with the service away (ZooKeeper or etcd
// stopped; a majority of Raft nodes stopped), Load, Members, Controller,
// Commit and Register with a 2 s deadline each return an error (wrapping
// ErrUnavailable or the ctx's) within the deadline plus one second; on
// Raft a read may instead succeed within cutOffGrace of the stop. When
// the service is back the backend serves again without being reopened.
func testCallsFailWithinDeadline(t T, h Harness) {
	c := h.NewCluster(t, 3)
	restarter, isRestarter := c.(ServiceRestarter)
	quorumLoser, isQuorumLoser := c.(QuorumLoser)
	if !isRestarter && !isQuorumLoser {
		t.Fatalf("cluster %T: want a ServiceRestarter or a QuorumLoser", c)
	}
	cs := startCampaigners(t, h, c, 0, 1, 2)
	ctl := cs.waitTerm(t, nil, startupBound(h), "first election")
	be := c.Backend(ctl.backend)
	commit(t, be, ctl, "CreateTopic before the outage", createTopicOp("before-outage", 1, 3, ctl.epoch))

	var stopped []int
	if isRestarter {
		restarter.StopService(t)
	} else {
		for i := 0; i < 3; i++ {
			if i != ctl.backend {
				quorumLoser.StopNode(t, i)
				stopped = append(stopped, i)
			}
		}
	}
	calls := outageCalls(be, ctl)
	if !isRestarter {
		// Nodes stopped this instant: a read may still be confirmed by a
		// heartbeat answer sent before the stop (hashicorp/raft counts
		// any answer that arrives while the leader check waits), as
		// through a cut.
		calls = cutOffCalls(be, ctl)
	}
	checkOutageCalls(t, calls, func() {
		// Bring the service back before judging, so late calls can end.
		if isRestarter {
			restarter.StartService(t)
		} else {
			for _, i := range stopped {
				quorumLoser.StartNode(t, i)
			}
		}
	}, "with the "+outageName(isRestarter))
	took := waitLoads(t, h, be, "before-outage", "Load on the controller's backend once the service is back")
	t.Logf("the backend loads again %v after the service came back", took.Round(time.Millisecond))
	cs.stop(t)
}

func outageName(restarter bool) string {
	if restarter {
		return "service stopped"
	}
	return "majority of Raft nodes stopped"
}

// testServiceRestartRecovers: the service is stopped and started again
// within the session timeout. The backends serve again without being
// reopened: Load works; every registration either survived with its epoch
// or expired and was made again with a greater one (ZooKeeper must keep
// them when the restart took under half the session timeout); a controller
// is elected and its Commit succeeds.
func testServiceRestartRecovers(t T, h Harness) {
	c := h.NewCluster(t, 2)
	restarter, ok := c.(ServiceRestarter)
	if !ok {
		t.Fatalf("cluster %T: want a ServiceRestarter", c)
	}
	cs := startCampaigners(t, h, c, 0, 1)
	ctl := cs.waitTerm(t, nil, startupBound(h), "first election")
	var sessions []coord.Session
	waitUntil(t, detectionBound(h), "both brokers registered", func() (bool, string) {
		sessions = sessions[:0]
		for i := 0; i < 2; i++ {
			if s := cs.session(i); s != nil {
				sessions = append(sessions, s)
			}
		}
		return len(sessions) == 2, fmt.Sprintf("%d registered", len(sessions))
	})
	commit(t, c.Backend(ctl.backend), ctl, "CreateTopic before the restart", createTopicOp("before-restart", 1, 2, ctl.epoch))

	start := time.Now()
	restarter.StopService(t)
	stopped := time.Since(start)
	restarter.StartService(t)
	outage := time.Since(start)
	t.Logf("service stopped in %v and serving again %v after the stop began (session timeout %v)", stopped.Round(time.Millisecond), outage.Round(time.Millisecond), h.SessionTimeout())

	recovery := h.SessionTimeout() + callBound
	for i := 0; i < 2; i++ {
		took := waitLoads(t, h, c.Backend(i), "before-restart", fmt.Sprintf("Load on backend %d after the restart", i))
		t.Logf("backend %d loads again %v after the restart", i, took.Round(time.Millisecond))
	}

	// Every registration made before the restart either survived (its
	// session is live and Members lists it with its epoch) or ended with
	// ErrSessionExpired and was made again with a greater epoch.
	waitUntil(t, recovery+detectionBound(h), "Members agreeing with the sessions after the restart", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), outageCallDeadline)
		defer cancel()
		got, err := c.Backend(0).Members(ctx)
		if err != nil {
			return false, err.Error()
		}
		if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
			return false, fmt.Sprintf("got %s, want brokers 1 and 2", memberIDs(got))
		}
		for i, old := range sessions {
			b := old.Broker()
			if !isClosed(old.Done()) {
				if got[i].Epoch != b.Epoch {
					return false, fmt.Sprintf("broker %d: its session of epoch %d is live but Members lists epoch %d", b.ID, b.Epoch, got[i].Epoch)
				}
				continue
			}
			if err := old.Err(); !errors.Is(err, coord.ErrSessionExpired) {
				t.Fatalf("broker %d's session across the restart: Err %v, want ErrSessionExpired (or still live)", b.ID, err)
			}
			if got[i].Epoch <= b.Epoch {
				return false, fmt.Sprintf("broker %d: its session of epoch %d expired, Members lists epoch %d, want a new registration with a greater one", b.ID, b.Epoch, got[i].Epoch)
			}
		}
		return true, ""
	})

	// A client's last contact may precede the stop by a third of the
	// session timeout (its renewal interval), and it must give its session
	// up a session timeout after that contact: so sessions can only be
	// required to survive an outage well under two thirds of the timeout.
	if h.Name() == "zk" {
		if outage >= h.SessionTimeout()/2 {
			t.Logf("ZooKeeper registrations were not required to survive: the restart took %v, not under half the %v session timeout", outage.Round(time.Millisecond), h.SessionTimeout())
		} else {
			for _, s := range sessions {
				if isClosed(s.Done()) {
					t.Fatalf("ZooKeeper session of broker %d ended (%v) across a %v restart, want kept", s.Broker().ID, s.Err(), outage.Round(time.Millisecond))
				}
			}
		}
	}

	// A controller is elected (or kept) and can commit.
	waitUntil(t, recovery+detectionBound(h), "a controller committing after the restart", func() (bool, string) {
		cur := cs.current()
		if cur == nil || isClosed(cur.term.Done()) {
			return false, "no live term"
		}
		ctx, cancel := context.WithTimeout(context.Background(), outageCallDeadline)
		defer cancel()
		err := c.Backend(cur.backend).Commit(ctx, cur.term, createTopicOp(fmt.Sprintf("after-restart-%d", cur.epoch), 1, 2, cur.epoch))
		switch {
		case err == nil:
			return true, ""
		case errors.Is(err, coord.ErrExists):
			return true, "" // an earlier attempt's chunk was applied
		case errors.Is(err, coord.ErrUnavailable), errors.Is(err, coord.ErrFenced), errors.Is(err, context.DeadlineExceeded):
			return false, fmt.Sprintf("Commit by %v: %v", cur, err)
		}
		t.Fatalf("Commit by %v after the restart: got %v, want nil", cur, err)
		return false, ""
	})
	cs.stop(t)
}

// testRaftMinorityAndMajority: of three Raft nodes, stopping one that
// does not lead leaves the controller in office; stopping a second leaves
// no controller at all (its term ends, no Campaign returns); starting one
// again elects a controller again.
func testRaftMinorityAndMajority(t T, h Harness) {
	c := h.NewCluster(t, 3)
	quorumLoser, ok := c.(QuorumLoser)
	if !ok {
		t.Fatalf("cluster %T: want a QuorumLoser", c)
	}
	cs := startCampaigners(t, h, c, 0, 1, 2)
	ctl := cs.waitTerm(t, nil, startupBound(h), "first election")
	var followers []int
	for i := 0; i < 3; i++ {
		if i != ctl.backend {
			followers = append(followers, i)
		}
	}
	bound := detectionBound(h)
	be := c.Backend(ctl.backend)

	quorumLoser.StopNode(t, followers[0])
	commit(t, be, ctl, fmt.Sprintf("CreateTopic with node %d stopped", followers[0]+1), createTopicOp("minority-down", 1, 3, ctl.epoch))
	if isClosed(ctl.term.Done()) {
		t.Fatalf("%v ended when one follower stopped, want it kept (2 of 3 nodes remain)", ctl)
	}
	ctx := withTimeout(t, callBound)
	if info, err := be.Controller(ctx); err != nil || info.ID != ctl.id || info.Epoch != ctl.epoch {
		t.Fatalf("Controller() with one follower stopped: got %+v, %v; want {ID:%d Epoch:%d}, nil", info, err, ctl.id, ctl.epoch)
	}

	stoppedAt := time.Now()
	quorumLoser.StopNode(t, followers[1])
	waitClosed(t, ctl.term.Done(), bound, fmt.Sprintf("end of %v after a majority stopped", ctl))
	t.Logf("%v ended %v after the majority stopped", ctl, time.Since(stoppedAt).Round(time.Millisecond))
	// Without a majority nobody may win: watch for a session timeout.
	cs.expectNoTerm(t, ctl, h.SessionTimeout(), "with 2 of 3 Raft nodes stopped")

	quorumLoser.StartNode(t, followers[1])
	cs.add(followers[1], c.Backend(followers[1]))
	next := cs.waitTerm(t, ctl, startupBound(h), fmt.Sprintf("restart of node %d", followers[1]+1))
	t.Logf("controller again after node %d restarted: %v", followers[1]+1, next)
	commit(t, c.Backend(next.backend), next, "CreateTopic with the majority back", createTopicOp("majority-back", 1, 3, next.epoch))
	cs.stop(t)
}

// expectNoTerm fails t if a term after prev is won, or one is live,
// within d.
func (cs *campaigners) expectNoTerm(t T, prev *wonTerm, d time.Duration, when string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		cs.mu.Lock()
		for _, w := range cs.terms {
			if w.epoch > prev.epoch {
				cs.mu.Unlock()
				t.Fatalf("%s: %v won, want no controller", when, w)
			}
		}
		for _, w := range cs.live {
			if !isClosed(w.term.Done()) {
				cs.mu.Unlock()
				t.Fatalf("%s: %v still live, want no controller", when, w)
			}
		}
		cs.mu.Unlock()
		time.Sleep(pollInterval)
	}
}
