package raft

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
)

var _ coord.Quorum = (*Backend)(nil)

// caughtUpLag is how many entries behind the leader's last index a
// node's report may be and still show it caught up: the entries the
// leader appended while the report was on its way.
const caughtUpLag = 64

// memberProgress is what one node last reported to the leader.
type memberProgress struct {
	// reported is when the leader received the node's last report, index
	// the node's last log index in it.
	reported time.Time
	index    uint64
	// caughtUp is when a report last showed the node within caughtUpLag
	// entries of the leader's last index.
	caughtUp time.Time
}

// progressInterval is how often every node reports its log end to the
// leader: a heartbeat timeout, at most a sixth of the session timeout,
// within 50 ms .. 1 s.
func (b *Backend) progressInterval() time.Duration {
	return min(max(min(b.cfg.RaftHeartbeatTimeout, b.cfg.SessionTimeout/6), 50*time.Millisecond), time.Second)
}

// liveWindow is how recently the leader must have heard from a member to
// count it live in a quorum change: three reports.
func (b *Backend) liveWindow() time.Duration { return 3 * b.progressInterval() }

// reportTimeout bounds one report, the join it may make included.
func (b *Backend) reportTimeout() time.Duration {
	return max(4*b.progressInterval(), time.Second)
}

// memberLoop keeps this node in the quorum until ctx ends (Close): every
// progressInterval it reports its log end to the leader, which adds it
// to the configuration when it is not there (backing off while no node
// answers), and it gives a node started as the lone voter the configured
// timeouts once the quorum has grown.
func (b *Backend) memberLoop(ctx context.Context) {
	defer close(b.memberDone)
	fc := &forwardConn{mux: b.mux}
	defer fc.close()
	interval := b.progressInterval()
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		b.followQuorumTimeouts()
		if b.currentLead() != nil {
			// The leader knows its own log end.
			failures = 0
			timer.Reset(interval)
			continue
		}
		err := b.report(ctx, fc)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			timer.Reset(interval)
			continue
		}
		failures++
		if failures == 20 {
			b.log.Warn("cannot reach the raft leader to join the quorum or report to it; retrying", "contacts", strings.Join(b.contacts(), ","), "error", err)
		} else {
			b.log.Debug("report to the raft leader", "failures", failures, "error", err)
		}
		// Backing off while no leader is known (an election, or no voter
		// reachable); a leader known since is asked within an interval.
		retry := min(interval/4<<min(failures-1, 6), 4*interval)
		if addr, _ := b.raft.LeaderWithID(); addr != "" {
			retry = min(retry, interval)
		}
		timer.Reset(retry)
	}
}

// report sends this node's log end to the leader, which adds a node
// missing from the configuration.
func (b *Backend) report(ctx context.Context, fc *forwardConn) error {
	ctx, cancel := context.WithTimeout(ctx, b.reportTimeout())
	defer cancel()
	return b.toLeader(ctx, fc, fwdRequest{Op: fwdJoin, From: b.id, Addr: b.advertised, Index: b.raft.LastIndex()})
}

// toLeader sends req to the leader, or, when this node knows no leader
// (an observer not yet in the configuration, or cut off from it), to the
// voters it knows in turn until one leads or names the leader.
func (b *Backend) toLeader(ctx context.Context, fc *forwardConn, req fwdRequest) error {
	var targets []string
	if addr, _ := b.raft.LeaderWithID(); addr != "" {
		targets = []string{string(addr)}
	} else {
		targets = b.contacts()
	}
	tried := map[string]bool{b.advertised: true}
	var last error = fmt.Errorf("%w: no raft voter to reach the leader through", errNotLeader)
	for len(targets) > 0 && ctx.Err() == nil {
		addr := targets[0]
		targets = targets[1:]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		resp, err := fc.roundTrip(ctx, addr, req)
		if err == nil {
			return nil
		}
		last = err
		if resp.Leader != "" {
			targets = append([]string{resp.Leader}, targets...)
		}
	}
	return last
}

// contacts are the addresses a node that knows no leader asks: the
// voters of the configuration it knows and of raft.voters, but itself,
// shuffled so that joining nodes spread over them.
func (b *Backend) contacts() []string {
	seen := map[string]bool{b.advertised: true}
	var addrs []string
	add := func(addr string) {
		if addr != "" && !seen[addr] {
			seen[addr] = true
			addrs = append(addrs, addr)
		}
	}
	for _, s := range b.configuration().Servers {
		if s.Suffrage == hraft.Voter {
			add(string(s.Address))
		}
	}
	for _, addr := range b.flagVoters {
		add(addr)
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	return addrs
}

// joinRequest handles a node's report on the leader: it records the
// node's log end and, when the node is not in the configuration, adds it
// at addr as a non-voter (an observer joins). A join never changes a
// voter's address: a second process with a voter's broker.id is refused.
func (b *Backend) joinRequest(ctx context.Context, from coord.BrokerID, addr string, index uint64) error {
	lead := b.currentLead()
	if lead == nil {
		return errNotLeader
	}
	if from < 0 || addr == "" {
		return fmt.Errorf("join of broker %d at %q: want a broker id and a raft address", from, addr)
	}
	b.recordProgress(lead, from, index)
	what := fmt.Sprintf("join of broker %d at %s", from, addr)
	// A new leader's state machine knows the committed configuration
	// once the entries of earlier terms are applied.
	if err := waitReady(ctx, lead); err != nil {
		return err
	}
	member := func() (bool, error) {
		srv, ok := findServer(b.configuration(), from)
		switch {
		case ok && string(srv.Address) == addr:
			return true, nil
		case ok && srv.Suffrage == hraft.Voter:
			return false, fmt.Errorf("%s: broker %d is a voter at %s", what, from, srv.Address)
		}
		return false, nil
	}
	if ok, err := member(); ok || err != nil {
		return err
	}
	release, err := b.lockQuorum(ctx)
	if err != nil {
		return err
	}
	defer release()
	if ok, err := member(); ok || err != nil {
		return err
	}
	err = b.changeConfiguration(ctx, func(prevIndex uint64, timeout time.Duration) hraft.IndexFuture {
		return b.raft.AddNonvoter(serverID(from), hraft.ServerAddress(addr), prevIndex, timeout)
	})
	if err != nil {
		return err
	}
	b.log.Info("observer joined the raft quorum", "broker", from, "address", addr)
	return nil
}

// leave asks the leader to remove this observer from the configuration,
// for a bounded time: Close must not hang on an unreachable leader,
// which then removes the observer once it has neither reported nor held
// a registration for a session timeout (expireObservers).
func (b *Backend) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), min(b.cfg.SessionTimeout/2, time.Second))
	defer cancel()
	fc := &forwardConn{mux: b.mux}
	defer fc.close()
	if err := b.toLeader(ctx, fc, fwdRequest{Op: fwdLeave, From: b.id}); err != nil {
		b.log.Warn("leaving the raft quorum failed; the leader will remove this observer", "error", err)
	}
}

// leaveRequest removes observer from from the configuration, on the
// leader. A voter leaves only by RemoveVoter.
func (b *Backend) leaveRequest(ctx context.Context, from coord.BrokerID) error {
	if b.currentLead() == nil {
		return errNotLeader
	}
	what := fmt.Sprintf("leave of broker %d", from)
	observer := func() (bool, error) {
		srv, ok := findServer(b.configuration(), from)
		if ok && srv.Suffrage == hraft.Voter {
			return false, fmt.Errorf("%s: a voter leaves the quorum by RemoveVoter only", what)
		}
		return ok, nil
	}
	if ok, err := observer(); !ok || err != nil {
		return err
	}
	release, err := b.lockQuorum(ctx)
	if err != nil {
		return err
	}
	defer release()
	if ok, err := observer(); !ok || err != nil {
		return err
	}
	err = b.changeConfiguration(ctx, func(prevIndex uint64, timeout time.Duration) hraft.IndexFuture {
		return b.raft.RemoveServer(serverID(from), prevIndex, timeout)
	})
	if err != nil {
		return err
	}
	b.log.Info("observer left the raft quorum", "broker", from)
	return nil
}

// expireObservers removes from the configuration every observer that has
// neither reported to this leader nor held a broker registration for a
// session timeout: a crashed observer, which the leader would otherwise
// replicate to for ever. Restarted, it joins again. A change already in
// progress defers the removal to the next tick.
func (b *Backend) expireObservers(lead *leadership) {
	conf := b.configuration()
	members, _ := b.fsm.members()
	registered := make(map[coord.BrokerID]bool, len(members))
	for _, m := range members {
		registered[m.ID] = true
	}
	now := time.Now()
	var stale []coord.BrokerID
	lead.mu.Lock()
	inConf := map[coord.BrokerID]bool{}
	for _, s := range conf.Servers {
		id, ok := brokerOf(s.ID)
		if !ok {
			continue
		}
		inConf[id] = true
		if s.Suffrage == hraft.Voter || registered[id] {
			continue
		}
		last := lead.started
		if p := lead.progress[id]; p != nil && p.reported.After(last) {
			last = p.reported
		}
		if now.Sub(last) > b.cfg.SessionTimeout {
			stale = append(stale, id)
		}
	}
	for id, p := range lead.progress {
		if !inConf[id] && now.Sub(p.reported) > b.cfg.SessionTimeout {
			delete(lead.progress, id)
		}
	}
	lead.mu.Unlock()
	for _, id := range stale {
		release, err := b.tryLockQuorum()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(lead.ctx, b.cfg.SessionTimeout)
		err = b.changeConfiguration(ctx, func(prevIndex uint64, timeout time.Duration) hraft.IndexFuture {
			return b.raft.RemoveServer(serverID(id), prevIndex, timeout)
		})
		cancel()
		release()
		if err != nil {
			b.log.Debug("remove silent observer", "broker", id, "error", err)
			return
		}
		b.log.Info("observer removed from the raft quorum: it has neither reported nor been registered for the session timeout", "broker", id, "session_timeout", b.cfg.SessionTimeout)
	}
}

// recordProgress records node id's report of its last log index.
func (b *Backend) recordProgress(lead *leadership, id coord.BrokerID, index uint64) {
	now := time.Now()
	last := b.raft.LastIndex()
	lead.mu.Lock()
	defer lead.mu.Unlock()
	p := lead.progress[id]
	if p == nil {
		p = &memberProgress{}
		lead.progress[id] = p
	}
	p.reported, p.index = now, index
	if index+caughtUpLag >= last {
		p.caughtUp = now
	}
	lead.reported.Notify()
}

// heardFrom reports whether this leader heard from node id within
// liveWindow; it always hears from itself.
func (b *Backend) heardFrom(lead *leadership, id coord.BrokerID) bool {
	if id == b.id {
		return true
	}
	lead.mu.Lock()
	defer lead.mu.Unlock()
	p := lead.progress[id]
	return p != nil && time.Since(p.reported) <= b.liveWindow()
}

// DescribeQuorum implements coord.Quorum.
func (b *Backend) DescribeQuorum(ctx context.Context) (coord.QuorumState, error) {
	resp, err := b.onLeader(ctx, "describe quorum", fwdRequest{Op: fwdDescribeQuorum}, func(ctx context.Context, lead *leadership) (fwdResponse, error) {
		state, err := b.describeQuorumLocal(ctx, lead)
		return fwdResponse{Quorum: &state}, err
	})
	if err == nil && resp.Quorum == nil {
		err = fmt.Errorf("describe quorum: the leader answered without a quorum")
	}
	if err != nil {
		return coord.QuorumState{LeaderID: coord.NoBroker}, err
	}
	return *resp.Quorum, nil
}

// describeQuorumLocal is DescribeQuorum on the leader: the configuration
// with what each member last reported.
func (b *Backend) describeQuorumLocal(_ context.Context, lead *leadership) (coord.QuorumState, error) {
	conf := b.configuration()
	state := coord.QuorumState{
		LeaderID:      b.id,
		LeaderEpoch:   int64(b.raft.CurrentTerm()),
		HighWatermark: int64(b.raft.CommitIndex()) + 1,
	}
	now, last := time.Now(), b.raft.LastIndex()
	lead.mu.Lock()
	for _, s := range conf.Servers {
		id, ok := brokerOf(s.ID)
		if !ok {
			continue
		}
		m := coord.QuorumMember{ID: id, Address: string(s.Address), LogEndOffset: -1}
		if p := lead.progress[id]; id == b.id {
			m.LogEndOffset, m.LastFetch, m.LastCaughtUp = int64(last)+1, now, now
		} else if p != nil {
			m.LogEndOffset, m.LastFetch, m.LastCaughtUp = int64(p.index)+1, p.reported, p.caughtUp
		}
		if s.Suffrage == hraft.Voter {
			state.Voters = append(state.Voters, m)
		} else {
			state.Observers = append(state.Observers, m)
		}
	}
	lead.mu.Unlock()
	byID := func(a, b coord.QuorumMember) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(state.Voters, byID)
	slices.SortFunc(state.Observers, byID)
	return state, nil
}

// AddVoter implements coord.Quorum. The observer is made a voter once
// its last report, recent, shows it within caughtUpLag entries of the
// leader's log, and only if the voters then have a live majority. A
// change waits for the one in progress on the leader, if any, until ctx
// ends (ErrQuorumChangeInProgress); one that meets a change of an
// earlier leader not yet committed fails with ErrQuorumChangeInProgress.
func (b *Backend) AddVoter(ctx context.Context, id coord.BrokerID) error {
	return b.changeUntilKnown(ctx, coord.ErrDuplicateVoter, func() error {
		_, err := b.onLeader(ctx, fmt.Sprintf("add voter %d", id), fwdRequest{Op: fwdAddVoter, Voter: id}, func(ctx context.Context, lead *leadership) (fwdResponse, error) {
			return fwdResponse{}, b.addVoterLocal(ctx, lead, id)
		})
		return err
	})
}

// changeUntilKnown runs change, a quorum change through the leader, again
// while its leader lost the leadership before the change committed
// (errChangeOutcomeUnknown): the change may have committed or not. Once
// it has been tried, done (ErrDuplicateVoter for an add, ErrVoterNotFound
// for a removal) from a later try means the earlier one took effect.
func (b *Backend) changeUntilKnown(ctx context.Context, done error, change func() error) error {
	lost := false
	for {
		err := change()
		switch {
		case err == nil:
			return nil
		case lost && errors.Is(err, done):
			return nil
		case !errors.Is(err, errChangeOutcomeUnknown):
			return err
		}
		lost = true
		select {
		case <-ctx.Done():
			return err
		case <-b.closing:
			return err
		case <-time.After(max(b.cfg.RaftHeartbeatTimeout/10, 10*time.Millisecond)):
		}
	}
}

// addVoterLocal is AddVoter on the leader.
func (b *Backend) addVoterLocal(ctx context.Context, lead *leadership, id coord.BrokerID) error {
	if err := waitReady(ctx, lead); err != nil {
		return err
	}
	observer := func() (hraft.Server, error) {
		srv, ok := findServer(b.configuration(), id)
		switch {
		case !ok:
			return srv, fmt.Errorf("%w: broker %d is not an observer of the raft quorum (it has not joined)", coord.ErrVoterNotFound, id)
		case srv.Suffrage == hraft.Voter:
			return srv, fmt.Errorf("%w: broker %d is a voter", coord.ErrDuplicateVoter, id)
		}
		return srv, nil
	}
	if _, err := observer(); err != nil {
		return err
	}
	if err := b.waitCaughtUp(ctx, lead, id); err != nil {
		return err
	}
	release, err := b.lockQuorum(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := b.waitHeardFromAll(ctx, lead); err != nil {
		return err
	}
	srv, err := observer()
	if err != nil {
		return err
	}
	if err := b.checkLiveMajority(lead, append(voterIDs(b.configuration()), id)); err != nil {
		return err
	}
	err = b.changeConfiguration(ctx, func(prevIndex uint64, timeout time.Duration) hraft.IndexFuture {
		return b.raft.AddVoter(srv.ID, srv.Address, prevIndex, timeout)
	})
	if err != nil {
		return err
	}
	b.log.Info("raft voter added", "broker", id, "voters", formatVoters(b.configuration()))
	return nil
}

// waitCaughtUp waits until node id's last report to this leader is
// recent and shows it caught up. It gives up a fifth of ctx's remaining
// time (at most a second) before ctx ends, so that the change that
// follows has time to commit.
func (b *Backend) waitCaughtUp(ctx context.Context, lead *leadership, id coord.BrokerID) error {
	waitCtx := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, d.Add(-min(time.Until(d)/5, time.Second)))
		defer cancel()
	}
	for {
		lead.mu.Lock()
		p := lead.progress[id]
		var caughtUp bool
		detail := fmt.Sprintf("broker %d has not reported to the leader", id)
		if p != nil {
			caughtUp = p.caughtUp.Equal(p.reported) && time.Since(p.reported) <= b.liveWindow()
			detail = fmt.Sprintf("broker %d last reported log end %d %v ago; the leader's is %d", id, p.index+1, time.Since(p.reported).Round(time.Millisecond), b.raft.LastIndex()+1)
		}
		next := lead.reported.Next()
		lead.mu.Unlock()
		if caughtUp {
			return nil
		}
		select {
		case <-next:
		case <-waitCtx.Done():
			return fmt.Errorf("%w: %s", coord.ErrNotCaughtUp, detail)
		case <-lead.ctx.Done():
			return errNotLeader
		case <-b.closing:
			return coord.ErrClosed
		}
	}
}

// RemoveVoter implements coord.Quorum. A voter the leader heard from
// within liveWindow is demoted, so that it goes on as an observer without
// joining again; a silent one is removed (it joins again as an observer
// if it comes back). Changes go one at a time as for AddVoter.
func (b *Backend) RemoveVoter(ctx context.Context, id coord.BrokerID) error {
	return b.changeUntilKnown(ctx, coord.ErrVoterNotFound, func() error {
		_, err := b.onLeader(ctx, fmt.Sprintf("remove voter %d", id), fwdRequest{Op: fwdRemoveVoter, Voter: id}, func(ctx context.Context, lead *leadership) (fwdResponse, error) {
			return fwdResponse{}, b.removeVoterLocal(ctx, lead, id)
		})
		return err
	})
}

// removeVoterLocal is RemoveVoter on the leader.
func (b *Backend) removeVoterLocal(ctx context.Context, lead *leadership, id coord.BrokerID) error {
	if err := waitReady(ctx, lead); err != nil {
		return err
	}
	voter := func() error {
		if srv, ok := findServer(b.configuration(), id); !ok || srv.Suffrage != hraft.Voter {
			return fmt.Errorf("%w: broker %d is not a voter of the raft quorum", coord.ErrVoterNotFound, id)
		}
		return nil
	}
	if err := voter(); err != nil {
		return err
	}
	release, err := b.lockQuorum(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := b.waitHeardFromAll(ctx, lead); err != nil {
		return err
	}
	if err := voter(); err != nil {
		return err
	}
	rest := slices.DeleteFunc(voterIDs(b.configuration()), func(v coord.BrokerID) bool { return v == id })
	if len(rest) == 0 {
		return fmt.Errorf("%w: broker %d is the last voter, and a quorum needs one", coord.ErrNoLiveMajority, id)
	}
	if err := b.checkLiveMajority(lead, rest); err != nil {
		return err
	}
	live := b.heardFrom(lead, id)
	err = b.changeConfiguration(ctx, func(prevIndex uint64, timeout time.Duration) hraft.IndexFuture {
		if live {
			return b.raft.DemoteVoter(serverID(id), prevIndex, timeout)
		}
		return b.raft.RemoveServer(serverID(id), prevIndex, timeout)
	})
	if err != nil {
		return err
	}
	b.log.Info("raft voter removed", "broker", id, "stays_observer", live, "voters", formatVoters(b.configuration()))
	return nil
}

// waitHeardFromAll waits until lead's tenure is liveWindow old: a new
// leader has heard from every live member by then; before, a silent
// member may be a live one.
func (b *Backend) waitHeardFromAll(ctx context.Context, lead *leadership) error {
	wait := b.liveWindow() - time.Since(lead.started)
	if wait <= 0 {
		return nil
	}
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-lead.ctx.Done():
		return errNotLeader
	case <-b.closing:
		return coord.ErrClosed
	}
}

// checkLiveMajority refuses a change whose voters would not include a
// majority that this leader heard from within liveWindow: hashicorp/raft
// commits a configuration change under the new configuration's rules, so
// without a live majority of its voters neither the change nor anything
// after it would commit.
func (b *Backend) checkLiveMajority(lead *leadership, voters []coord.BrokerID) error {
	var dead []coord.BrokerID
	for _, v := range voters {
		if !b.heardFrom(lead, v) {
			dead = append(dead, v)
		}
	}
	live := len(voters) - len(dead)
	if 2*live > len(voters) {
		return nil
	}
	slices.Sort(voters)
	return fmt.Errorf("%w: the voters would be %v, of which %v have not been heard from by the leader within %v: a quorum change must leave a majority of the new voters live",
		coord.ErrNoLiveMajority, voters, dead, b.liveWindow().Round(time.Millisecond))
}

// waitReady waits until lead has applied the entries of earlier terms.
func waitReady(ctx context.Context, lead *leadership) error {
	select {
	case <-lead.ready:
		return nil
	case <-lead.ctx.Done():
		return errNotLeader
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onLeader runs local when this node leads, or sends req to the leader,
// retrying while there is no leader or the leader moves (nothing was done
// then), until ctx ends or Close. what names the call in errors.
func (b *Backend) onLeader(ctx context.Context, what string, req fwdRequest, local func(ctx context.Context, lead *leadership) (fwdResponse, error)) (fwdResponse, error) {
	return untilLeader(ctx, b, what, false, func() (fwdResponse, error) {
		addr, _ := b.raft.LeaderWithID()
		if lead := b.currentLead(); lead != nil {
			return local(ctx, lead)
		}
		if addr == "" {
			return fwdResponse{}, errNotLeader
		}
		resp, err := b.call(ctx, string(addr), req)
		if err != nil && ctx.Err() == nil && isDialError(err) {
			err = errNotLeader
		}
		return resp, err
	})
}

// lockQuorum takes the leader's quorum-change token, waiting for the
// change in progress, if any, until ctx ends (ErrQuorumChangeInProgress);
// release gives it back. Changes on one leader so go one after the
// other, each checked against the configuration the last one left.
func (b *Backend) lockQuorum(ctx context.Context) (release func(), err error) {
	select {
	case b.quorumSem <- struct{}{}:
		return func() { <-b.quorumSem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", coord.ErrQuorumChangeInProgress, ctx.Err())
	case <-b.closing:
		return nil, coord.ErrClosed
	}
}

// tryLockQuorum takes the quorum-change token if no change is in
// progress, and fails with ErrQuorumChangeInProgress otherwise.
func (b *Backend) tryLockQuorum() (release func(), err error) {
	select {
	case b.quorumSem <- struct{}{}:
		return func() { <-b.quorumSem }, nil
	default:
		return nil, coord.ErrQuorumChangeInProgress
	}
}

// changeConfiguration makes one configuration change on this leader,
// conditioned on the committed configuration still being the latest (a
// concurrent change, or one of an earlier leader not yet committed, makes
// it fail), and waits until the change is committed or ctx ends. The
// caller holds the quorum-change token. errNotLeader means nothing
// changed.
func (b *Backend) changeConfiguration(ctx context.Context, change func(prevIndex uint64, timeout time.Duration) hraft.IndexFuture) error {
	if b.raft.State() != hraft.Leader {
		return errNotLeader
	}
	enqueue := max(b.cfg.SessionTimeout, b.cfg.RaftElectionTimeout)
	if d, ok := ctx.Deadline(); ok {
		enqueue = min(enqueue, max(time.Until(d), time.Millisecond))
	}
	b.raftOps.RLock()
	select {
	case <-b.closing:
		b.raftOps.RUnlock()
		return coord.ErrClosed
	default:
	}
	f := change(b.configIndex(), enqueue)
	if err := b.waitFuture(ctx, f, b.raftOps.RUnlock); err != nil {
		if errors.Is(err, hraft.ErrLeadershipLost) {
			return fmt.Errorf("%w: %w", errChangeOutcomeUnknown, err)
		}
		return err
	}
	// The next change is conditioned on this one, committed now, though
	// the state machine may not have seen it yet.
	b.fsm.noteConfigIndex(f.Index())
	return nil
}

// configIndex is the log index of the committed configuration: the last
// configuration entry this node's state machine applied, or the one its
// latest snapshot holds.
func (b *Backend) configIndex() uint64 {
	index := b.fsm.configIndex.Load()
	if metas, err := b.snaps.List(); err == nil && len(metas) > 0 {
		index = max(index, metas[0].ConfigurationIndex)
	}
	return index
}

// mayLead reports whether this node may lead: it is a voter of the
// configuration it knows, and not a node started as the lone voter whose
// quorum has grown since (its lease is too short for several voters).
func (b *Backend) mayLead() bool {
	srv, ok := findServer(b.configuration(), b.id)
	return ok && srv.Suffrage == hraft.Voter && !b.loneLeft.Load()
}

// followQuorumTimeouts gives a node that started as the only voter, with
// the lone voter's short timeouts, the configured heartbeat and election
// timeouts once its configuration has other members: a leader sends
// heartbeats every tenth of its heartbeat timeout, every 2 ms to each
// observer with the lone timeouts. The lone voter's short lease does no
// harm while this node is the only voter (a lease counts voters only);
// hashicorp/raft cannot change it on a running node, so once the quorum
// has other voters this node leaves leadership to them until it
// restarts (mayLead, handOff).
func (b *Backend) followQuorumTimeouts() {
	if !b.loneLease || b.loneLeft.Load() {
		return
	}
	conf := b.configuration()
	if len(conf.Servers) > 1 && !b.loneReloaded {
		rc := b.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = b.cfg.RaftHeartbeatTimeout, b.cfg.RaftElectionTimeout
		if err := b.raft.ReloadConfig(rc); err != nil {
			b.log.Warn("cannot give raft the configured timeouts now that the quorum has other members", "error", err)
			return
		}
		b.loneReloaded = true
	}
	if voterCount(conf) <= 1 || len(b.quorumSem) > 0 {
		// conf may hold a change not committed yet: a leader that handed
		// off now would lose it mid-commit.
		return
	}
	b.loneLeft.Store(true)
	b.log.Warn("this broker started as the only raft voter and the quorum now has others: "+
		"its leader lease stays the lone voter's until it restarts, so it leaves leadership to the other voters meanwhile",
		"voters", formatVoters(conf))
	if lead := b.currentLead(); lead != nil {
		b.handOff(lead)
	}
}

// handOff hands the leadership of lead to another voter, unless this
// node holds a controller term: a leader holding a term never hands over
// (see transfer), and its short lease soon ends that tenure anyway.
func (b *Backend) handOff(lead *leadership) {
	b.mu.Lock()
	if b.lead != lead || b.term != nil || b.transferring {
		b.mu.Unlock()
		return
	}
	b.transferring = true
	b.mu.Unlock()
	b.transfer(coord.NoBroker, "")
}

// configuration is the latest Raft configuration this node knows, which
// may not be committed yet.
func (b *Backend) configuration() hraft.Configuration {
	f := b.raft.GetConfiguration()
	if f.Error() != nil {
		return hraft.Configuration{}
	}
	return f.Configuration()
}

// findServer returns broker id's server in conf.
func findServer(conf hraft.Configuration, id coord.BrokerID) (hraft.Server, bool) {
	for _, s := range conf.Servers {
		if s.ID == serverID(id) {
			return s, true
		}
	}
	return hraft.Server{}, false
}

// voterCount is the number of voters in conf.
func voterCount(conf hraft.Configuration) int {
	return len(voterIDs(conf))
}

// voterIDs are the brokers voting in conf.
func voterIDs(conf hraft.Configuration) []coord.BrokerID {
	var ids []coord.BrokerID
	for _, s := range conf.Servers {
		if id, ok := brokerOf(s.ID); ok && s.Suffrage == hraft.Voter {
			ids = append(ids, id)
		}
	}
	return ids
}

// onlyVoter reports whether id is the one voter of conf.
func onlyVoter(conf hraft.Configuration, id coord.BrokerID) bool {
	ids := voterIDs(conf)
	return len(ids) == 1 && ids[0] == id
}

// brokerOf is the broker of a Raft server ID.
func brokerOf(id hraft.ServerID) (coord.BrokerID, bool) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	return coord.BrokerID(n), err == nil
}

// votersConfiguration is the configuration of voters.
func votersConfiguration(voters map[coord.BrokerID]string) hraft.Configuration {
	var conf hraft.Configuration
	for id, addr := range voters {
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: hraft.Voter, ID: serverID(id), Address: hraft.ServerAddress(addr)})
	}
	slices.SortFunc(conf.Servers, func(a, b hraft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return conf
}

// sameVoters reports whether conf's voters are voters, addresses and all.
func sameVoters(conf hraft.Configuration, voters map[coord.BrokerID]string) bool {
	n := 0
	for _, s := range conf.Servers {
		if s.Suffrage != hraft.Voter {
			continue
		}
		id, ok := brokerOf(s.ID)
		if !ok || voters[id] != string(s.Address) {
			return false
		}
		n++
	}
	return n == len(voters)
}

// formatVoters is conf's voters as raft.voters would name them.
func formatVoters(conf hraft.Configuration) string {
	voters := map[coord.BrokerID]string{}
	for _, s := range conf.Servers {
		if id, ok := brokerOf(s.ID); ok && s.Suffrage == hraft.Voter {
			voters[id] = string(s.Address)
		}
	}
	return coord.FormatRaftVoters(voters)
}

// advertisedAddress is this node's Raft address for the others: its
// raft.voters address, or else raft.listen with the port its listener got
// when that port is 0.
func advertisedAddress(voterAddr, listen string, actual net.Addr) string {
	if voterAddr != "" {
		return voterAddr
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port != "0" {
		return listen
	}
	if _, got, err := net.SplitHostPort(actual.String()); err == nil {
		return net.JoinHostPort(host, got)
	}
	return listen
}

// storedConfiguration returns the Raft configuration recorded in the
// stores: the last configuration entry of the log, or else the latest
// snapshot's. recorded is false for empty stores (a new node).
func storedConfiguration(logs hraft.LogStore, snaps hraft.SnapshotStore) (conf hraft.Configuration, recorded bool, err error) {
	metas, err := snaps.List()
	if err != nil {
		return conf, false, fmt.Errorf("list snapshots: %w", err)
	}
	var snapIndex uint64
	if len(metas) > 0 {
		conf, recorded, snapIndex = metas[0].Configuration, true, metas[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return conf, recorded, fmt.Errorf("first log index: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return conf, recorded, fmt.Errorf("last log index: %w", err)
	}
	// Configuration entries are rare and recent ones matter: the scan
	// goes backwards from the end, down to the snapshot.
	for i := last; i > 0 && i >= first && i > snapIndex; i-- {
		var entry hraft.Log
		if err := logs.GetLog(i, &entry); err != nil {
			return conf, recorded, fmt.Errorf("read log entry %d: %w", i, err)
		}
		if entry.Type == hraft.LogConfiguration {
			return hraft.DecodeConfiguration(entry.Data), true, nil
		}
	}
	return conf, recorded, nil
}
