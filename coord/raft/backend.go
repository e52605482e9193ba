// Package raft is tripod's coordination backend on embedded Raft
// (hashicorp/raft, raft-boltdb/v2): the brokers themselves are the
// coordination service. The Raft leader is the controller; registrations,
// controller claims and metadata are entries of the replicated log applied
// to a state machine (fsm.go); a broker on a follower reaches the leader
// through a forward RPC multiplexed on the Raft port (transport.go,
// forward.go).
//
// Members, Controller and Load are linearizable: they confirm with a
// quorum that the leader still leads (a follower asks the leader for its
// commit index over the forward RPC), wait until the local state machine
// has applied that index, and read it; without a reachable leader they fail
// with ErrUnavailable. The watches are driven by the local state machine
// alone: on a follower they may lag the leader by the entries not yet
// replicated to it, and never go backwards. Register and Commit return once
// the local state machine has applied their entries, so a broker reads its
// own writes.
//
// Voters and observers (quorum.go). The voters elect the leader and
// commit; an observer (hashicorp/raft's non-voter, KRaft's observer)
// receives the log, serves its broker's reads from it, sends its writes
// to the leader and never counts toward a quorum. A broker among
// raft.voters starts the cluster with the others (Raft's bootstrap, on an
// empty raft.dir only); any other broker is an observer: it never
// bootstraps, and while it is not in the Raft configuration it knows, or
// hears from no leader, it asks to join through the leader or any
// raft.voters address, and the leader adds it as a non-voter. Every node
// reports its log end to the leader as often (the same request), which
// is what DescribeQuorum shows and what AddVoter waits for. The voters
// change only by AddVoter (an observer that has caught up) and
// RemoveVoter (a live voter is demoted to observer, a dead one removed),
// one change at a time, committed before the call returns, and never to
// a set of voters without a live majority.
//
// An observer leaves the configuration when it stops: a clean Close
// removes it through the leader, and the leader removes one that has
// neither reported nor held a broker registration for a session timeout
// (a crashed observer); a restarted observer is not in the configuration,
// or hears from no leader, and joins again. Voters never leave by
// themselves: a stopped voter is still a voter.
//
// The quorum lives in raft.dir: hashicorp/raft keeps the configuration in
// its log and snapshots, and a node that restarts with existing stores
// uses the configuration recorded there, whatever raft.voters says (it
// warns once when they disagree). raft.voters is read on a node's first
// start, and afterwards only as addresses to join through.
//
// Migration (migrate.go). The migration record (coord.Migrator) is part
// of the replicated state, beside the metadata, the security and config
// stores and the producer id counter (fsmData.Migration, "migration" in
// snapshots), with the epoch bases an import brings: every broker epoch,
// controller epoch, partition epoch and Version the backend reports is
// its own (a log index, a claim's epoch, a partition's write count) plus
// the base, and what it is given back (Broker.Replaces, a SetPartition's
// ExpectedEpoch) it lowers by the base, at apply. The state machine
// refuses at apply the writes a refusing record forbids, so the log
// orders every write against the record.
//
// The package owns its Raft node, transport, stores and goroutines; it
// must not import broker or replication.
package raft

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

func init() {
	coord.RegisterFactory("raft", func(cfg coord.Config) (coord.Backend, error) {
		return Open(cfg)
	})
}

// Backend is a coord.Backend on an embedded Raft node. Open one per broker
// process.
type Backend struct {
	cfg coord.Config
	log hclog.Logger
	id  coord.BrokerID
	// flagVoters are raft.voters (this broker alone when empty): the
	// cluster a new node bootstraps, then addresses to join through.
	// The live voters are in the Raft configuration (configuration).
	flagVoters map[coord.BrokerID]string
	// advertised is this node's Raft address in the configuration: its
	// raft.voters address, or raft.listen (with the port it listens on
	// when that is 0) for an observer.
	advertised string

	fsm   *fsm
	raft  *hraft.Raft
	trans *hraft.NetworkTransport
	mux   *mux
	store *raftboltdb.BoltStore
	snaps hraft.SnapshotStore
	// loneLease is set when this node started as the only voter, with
	// the lone voter's short timeouts (see Open); loneReloaded once it
	// has the configured heartbeat and election timeouts again, and
	// loneLeft once its quorum has had other voters since (see
	// followQuorumTimeouts). loneReloaded belongs to the member loop.
	loneLease    bool
	loneReloaded bool
	loneLeft     atomic.Bool
	// quorumSem is held (a token in it) while this node, as leader,
	// makes a configuration change: one at a time.
	quorumSem chan struct{}
	// memberCancel ends the member loop (its reports and joins), which
	// closes memberDone when it has returned.
	memberCancel context.CancelFunc
	memberDone   chan struct{}
	// stable is store as the Raft node's stable store (its term and
	// vote), closed with it.
	stable *closingStable

	// opened is closed once Open has started the Raft node: forward
	// requests wait for it. closing is closed by Close (or by a failed
	// Open); every goroutine of the backend ends then.
	opened    chan struct{}
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	// claimMu serialises controller claims of this node.
	claimMu sync.Mutex
	// raftOps is held (read) around Raft calls whose futures Raft may
	// drop unresolved when it shuts down (VerifyLeader, leadership
	// transfers, applies: an apply committed but not yet handed to the
	// FSM when Raft stops is never answered); Close takes it before
	// Shutdown, so none is pending then.
	raftOps sync.RWMutex

	mu     sync.Mutex
	closed bool
	// stopped is set when Close starts waiting for the goroutines: no
	// goroutine starts after it.
	stopped  bool
	sessions map[*session]struct{}
	// lead is non-nil while this node is the Raft leader.
	lead *leadership
	// term is the live controller term of this node, if any.
	term *term
	// campaigners counts the Campaign calls waiting on this node.
	campaigners int
	// interest holds when each other node last asked for leadership.
	interest map[coord.BrokerID]time.Time
	// transferring is set while this node hands leadership over; it
	// makes no claim meanwhile.
	transferring bool
	// stepDownContact is Raft's last-contact time when this node last
	// stepped down: Raft stamps it then, though no leader was heard.
	stepDownContact time.Time
	// changed announces every change of lead or term; it is guarded by
	// mu like them.
	changed notify.Broadcast
	// observations carries Raft's leader observations to leaderLoop.
	observations chan hraft.Observation
	// lastOtherLeader is the last leader other than this node that Raft
	// reported, and lastOtherLeaderContact when this node last heard from
	// a leader while following it (see setLeader).
	lastOtherLeader coord.BrokerID
}

// Open starts this broker's Raft node from cfg: it opens the log and
// snapshot stores in cfg.RaftDir, listens on cfg.RaftListen (through
// cfg.Listen when set), and, when the stores are empty and this broker
// is among cfg.RaftVoters, bootstraps those voters. An observer starts
// asking to join at once. It does not wait for a leader.
func Open(cfg coord.Config) (*Backend, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	voters := cfg.RaftVoters
	listen := cfg.RaftListen
	if len(voters) == 0 {
		voters = map[coord.BrokerID]string{cfg.BrokerID: listen}
	}
	if listen == "" {
		listen = voters[cfg.BrokerID]
	}
	b := &Backend{
		lastOtherLeader: coord.NoBroker,
		cfg:             cfg,
		log:             cfg.Logger.Named("coord-raft"),
		id:              cfg.BrokerID,
		flagVoters:      voters,
		fsm:             newFSM(),
		quorumSem:       make(chan struct{}, 1),
		opened:          make(chan struct{}),
		closing:         make(chan struct{}),
		memberDone:      make(chan struct{}),
		sessions:        map[*session]struct{}{},
		interest:        map[coord.BrokerID]time.Time{},
	}
	if err := os.MkdirAll(cfg.RaftDir, 0o755); err != nil {
		return nil, fmt.Errorf("raft.dir %s: %w", cfg.RaftDir, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.RaftDir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("raft.dir %s: open log store: %w", cfg.RaftDir, err)
	}
	b.store = store
	fail := func(err error) (*Backend, error) {
		close(b.closing)
		if b.raft != nil {
			b.raft.Shutdown().Error()
		}
		if b.trans != nil {
			b.trans.Close()
		}
		if b.mux != nil {
			b.mux.close()
		}
		store.Close()
		return nil, err
	}
	logs, err := hraft.NewLogCache(512, store)
	if err != nil {
		return fail(fmt.Errorf("raft log cache: %w", err))
	}
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.RaftDir, 2, b.log.Named("snapshot"))
	if err != nil {
		return fail(fmt.Errorf("raft.dir %s: open snapshot store: %w", cfg.RaftDir, err))
	}
	b.snaps = snaps
	// The quorum recorded in raft.dir wins over raft.voters; a new node
	// starts from raft.voters (an observer from nothing).
	stored, recorded, err := storedConfiguration(store, snaps)
	if err != nil {
		return fail(fmt.Errorf("raft.dir %s: read the raft configuration: %w", cfg.RaftDir, err))
	}
	_, voter := voters[cfg.BrokerID]
	quorum := stored
	if !recorded && voter {
		quorum = votersConfiguration(voters)
	}
	if recorded && !sameVoters(stored, voters) {
		b.log.Warn("raft.voters differs from the quorum recorded in raft.dir, which wins: raft.voters is read on a node's first start only; change the quorum with AddRaftVoter and RemoveRaftVoter",
			"raft.voters", coord.FormatRaftVoters(voters), "recorded_voters", formatVoters(stored), "raft.dir", cfg.RaftDir)
	}
	listenFn := cfg.Listen
	if listenFn == nil {
		listenFn = net.Listen
	}
	quorumID, err := readQuorumID(cfg.RaftDir)
	if err != nil {
		return fail(err)
	}
	ln, err := listenFn("tcp", listen)
	if err != nil {
		return fail(fmt.Errorf("raft.listen %s: %w", listen, err))
	}
	b.advertised = advertisedAddress(voters[cfg.BrokerID], listen, ln.Addr())
	b.mux = newMux(ln, quorumID, cfg.Dialer, cfg.RaftServerTLS, cfg.RaftClientTLS, b.log.Named("transport"), b.serveForward)
	b.trans = hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream:  streamLayer{m: b.mux},
		MaxPool: 3,
		Timeout: 2 * time.Second,
		Logger:  b.log.Named("transport"),
	})

	rc := hraft.DefaultConfig()
	rc.LocalID = serverID(cfg.BrokerID)
	rc.HeartbeatTimeout = cfg.RaftHeartbeatTimeout
	rc.ElectionTimeout = cfg.RaftElectionTimeout
	rc.LeaderLeaseTimeout = cfg.RaftLeaderLeaseTimeout
	if onlyVoter(quorum, cfg.BrokerID) {
		// A lone voter has no peer to split a vote with or to hear from:
		// waiting a heartbeat timeout before electing itself only delays
		// a restarted `tripod serve` (by up to twice that timeout). Once
		// others join, it takes the configured heartbeat and election
		// timeouts; Raft fixes the lease at start, and the short one,
		// harmless to a lone voter, makes this node leave leadership to
		// other voters, if the quorum grows, until it restarts
		// (followQuorumTimeouts).
		b.loneLease = true
		rc.HeartbeatTimeout = min(rc.HeartbeatTimeout, loneVoterTimeout)
		rc.ElectionTimeout = min(rc.ElectionTimeout, loneVoterTimeout)
		rc.LeaderLeaseTimeout = min(rc.LeaderLeaseTimeout, rc.HeartbeatTimeout)
	}
	// A voter removed from the quorum, or demoted, stays a follower
	// (hashicorp/raft would shut it down): as an observer it still
	// serves its broker.
	rc.ShutdownOnRemove = false
	if cfg.RaftSnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.RaftSnapshotThreshold
		rc.TrailingLogs = min(rc.TrailingLogs, cfg.RaftSnapshotThreshold)
	}
	rc.Logger = b.log.Named("raft")
	if err := hraft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("raft timeouts: %w", err))
	}
	b.stable = &closingStable{StableStore: store}
	r, err := hraft.NewRaft(rc, b.fsm, logs, b.stable, snaps, b.trans)
	if err != nil {
		return fail(fmt.Errorf("start raft node %d: %w", cfg.BrokerID, err))
	}
	b.raft = r
	if voter {
		// Only the voters start a cluster; a broker not among them never
		// bootstraps one of its own.
		var servers []hraft.Server
		for id, addr := range voters {
			servers = append(servers, hraft.Server{Suffrage: hraft.Voter, ID: serverID(id), Address: hraft.ServerAddress(addr)})
		}
		if err := r.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
			return fail(fmt.Errorf("bootstrap raft voters %s: %w", coord.FormatRaftVoters(voters), err))
		}
	}
	b.observations = make(chan hraft.Observation, 16)
	r.RegisterObserver(hraft.NewObserver(b.observations, false, func(o *hraft.Observation) bool {
		_, ok := o.Data.(hraft.LeaderObservation)
		return ok
	}))
	b.wg.Add(1)
	go b.leaderLoop()
	memberCtx, memberCancel := context.WithCancel(context.Background())
	b.memberCancel = memberCancel
	go b.memberLoop(memberCtx)
	close(b.opened)
	return b, nil
}

// loneVoterTimeout caps the Raft heartbeat and election timeouts of a
// cluster whose only voter is this broker.
const loneVoterTimeout = 20 * time.Millisecond

func serverID(id coord.BrokerID) hraft.ServerID {
	return hraft.ServerID(strconv.Itoa(int(id)))
}

// Close implements coord.Backend.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		sessions := make([]*session, 0, len(b.sessions))
		for s := range b.sessions {
			sessions = append(sessions, s)
		}
		b.mu.Unlock()
		for _, s := range sessions {
			s.Close()
		}
		// No report or join after this: an observer that stops leaves
		// the configuration, so that the leader stops replicating to it.
		b.memberCancel()
		<-b.memberDone
		conf := b.configuration()
		if self, ok := findServer(conf, b.id); ok && self.Suffrage != hraft.Voter {
			b.leave()
		}
		// A leader hands over before it stops, so the others need not
		// wait for an election timeout.
		if b.raft.State() == hraft.Leader && voterCount(conf) > 1 {
			b.raft.LeadershipTransfer().Error()
		}
		close(b.closing)
		b.raftOps.Lock()
		if err := b.raft.Shutdown().Error(); err != nil {
			b.log.Warn("raft shutdown", "error", err)
		}
		b.raftOps.Unlock()
		b.trans.Close()
		b.mux.close()
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		b.wg.Wait()
		b.stable.close(func() {
			if err := b.store.Close(); err != nil {
				b.log.Warn("close raft log store", "error", err)
			}
		})
	})
	return nil
}

// isClosed reports whether Close has begun.
func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// leaderLoop follows this node's Raft leadership until Close.
func (b *Backend) leaderLoop() {
	defer b.wg.Done()
	for {
		select {
		case isLeader := <-b.raft.LeaderCh():
			b.setLeader(isLeader)
		case o := <-b.observations:
			lo := o.Data.(hraft.LeaderObservation)
			if id, err := strconv.ParseInt(string(lo.LeaderID), 10, 32); err == nil && coord.BrokerID(id) != b.cfg.BrokerID {
				b.mu.Lock()
				b.lastOtherLeader = coord.BrokerID(id)
				b.mu.Unlock()
			}
		case <-b.closing:
			b.setLeader(false)
			return
		}
	}
}

// leadership is one tenure of this node as Raft leader.
type leadership struct {
	// ctx is cancelled when the tenure ends (a context owned by the
	// tenure, not stored for a call).
	ctx    context.Context
	cancel context.CancelFunc
	// ready is closed once every entry of earlier terms is applied.
	ready chan struct{}
	// base is the renewal time this leader assumes for the registrations
	// it finds on taking over (see setLeader).
	base time.Time

	// previous is the broker of the leader before this one (NoBroker when
	// unknown) and previousContact this node's last contact with it. That
	// broker renewed its registration locally, on a node now deposed, so
	// its last renewal is no later than that contact plus the lease: its
	// registration gets that base, without the floor the others get, so a
	// crashed controller is detected one session timeout after it stopped,
	// not one session timeout after the election that followed.
	previous        coord.BrokerID
	previousContact time.Time
	// started is when this tenure began: members that have not reported
	// to it yet count from then.
	started time.Time

	mu sync.Mutex
	// renewed holds each registration's last renewal seen by this leader.
	renewed map[registrationKey]time.Time
	// progress holds what each node last reported to this leader.
	progress map[coord.BrokerID]*memberProgress
	// reported announces every report; guarded by mu.
	reported notify.Broadcast
}

// registrationKey identifies one registration: a broker and its broker
// epoch.
type registrationKey struct {
	id    coord.BrokerID
	epoch int64
}

// keyOf returns br's registrationKey.
func keyOf(br coord.Broker) registrationKey { return registrationKey{id: br.ID, epoch: br.Epoch} }

func (b *Backend) setLeader(isLeader bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lead != nil {
		b.lead.cancel()
		b.lead = nil
		b.stepDownContact = b.raft.LastContact()
		b.changed.Notify()
	}
	if !isLeader || b.closed {
		return
	}
	// A registration's last renewal, made at the previous leader, is
	// unknown here; the previous leader accepted none after this node's
	// last contact with it plus the lease, nor after the election. So the
	// registrations found get that base, but never one more than a third
	// of the session timeout in the past: expiry then comes no sooner than
	// two thirds of the timeout after the last renewal.
	now := time.Now()
	base := now
	if lc := b.raft.LastContact().Add(b.cfg.RaftLeaderLeaseTimeout); lc.Before(base) {
		base = lc
	}
	if floor := now.Add(-b.cfg.SessionTimeout / 3); base.Before(floor) {
		base = floor
	}
	ctx, cancel := context.WithCancel(context.Background())
	lead := &leadership{ctx: ctx, cancel: cancel, ready: make(chan struct{}), base: base, renewed: map[registrationKey]time.Time{},
		previous: b.lastOtherLeader, previousContact: b.raft.LastContact().Add(b.cfg.RaftLeaderLeaseTimeout),
		started: now, progress: map[coord.BrokerID]*memberProgress{}}
	if b.raft.LastContact().IsZero() || lead.previousContact.After(now) {
		lead.previous = coord.NoBroker
	}
	b.lead = lead
	b.changed.Notify()
	b.wg.Add(1)
	go b.leaderDuties(lead)
}

// currentLead returns this node's leadership, nil when it is not leader.
func (b *Backend) currentLead() *leadership {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lead
}

// leaderDuties runs while this node leads: it catches the state machine
// up, clears a controller that has no term here, and expires
// registrations that stopped renewing.
func (b *Backend) leaderDuties(lead *leadership) {
	defer b.wg.Done()
	if b.loneLeft.Load() {
		b.handOff(lead)
	}
	for {
		err := b.raft.Barrier(b.cfg.RaftElectionTimeout).Error()
		if err == nil {
			break
		}
		select {
		case <-lead.ctx.Done():
			return
		case <-time.After(b.cfg.RaftHeartbeatTimeout / 10):
		}
	}
	members, _ := b.fsm.members()
	lead.mu.Lock()
	for _, m := range members {
		if _, ok := lead.renewed[keyOf(m)]; !ok {
			lead.renewed[keyOf(m)] = lead.base
			if m.ID == lead.previous && lead.previousContact.Before(lead.base) {
				lead.renewed[keyOf(m)] = lead.previousContact
			}
		}
	}
	lead.mu.Unlock()
	close(lead.ready)
	b.releaseOrphanController(lead)
	tick := time.NewTicker(b.expiryTick())
	defer tick.Stop()
	for {
		select {
		case <-lead.ctx.Done():
			return
		case <-tick.C:
			b.expireStale(lead)
			b.expireObservers(lead)
		}
	}
}

// expiryTick is how often the leader checks registrations.
func (b *Backend) expiryTick() time.Duration {
	return min(b.cfg.SessionTimeout/20, 100*time.Millisecond)
}

// releaseOrphanController clears the controller of the state machine when
// this new leader has no term and no campaign: the controller is the Raft
// leader, so a controller recorded by an earlier leader is gone.
func (b *Backend) releaseOrphanController(lead *leadership) {
	b.mu.Lock()
	busy := b.term != nil || b.campaigners > 0
	b.mu.Unlock()
	info, _ := b.fsm.controller()
	if busy || info.ID == coord.NoBroker {
		return
	}
	ctx, cancel := context.WithTimeout(lead.ctx, b.cfg.SessionTimeout)
	defer cancel()
	if _, err := b.applyLocal(ctx, &command{Type: cmdRelease, Epoch: info.Epoch}); err != nil {
		b.log.Debug("release orphan controller", "controller", info.ID, "epoch", info.Epoch, "error", err)
	}
}

// expireStale expires every registration this leader has not seen renewed
// for SessionTimeout. A registration it has not seen yet gets a full
// timeout from now.
func (b *Backend) expireStale(lead *leadership) {
	members, _ := b.fsm.members()
	now := time.Now()
	var stale []coord.Broker
	lead.mu.Lock()
	live := make(map[registrationKey]bool, len(members))
	for _, m := range members {
		live[keyOf(m)] = true
		last, ok := lead.renewed[keyOf(m)]
		if !ok {
			lead.renewed[keyOf(m)] = now
			continue
		}
		if now.Sub(last) > b.cfg.SessionTimeout {
			stale = append(stale, m)
		}
	}
	for m := range lead.renewed {
		if !live[m] {
			delete(lead.renewed, m)
		}
	}
	lead.mu.Unlock()
	for _, m := range stale {
		ctx, cancel := context.WithTimeout(lead.ctx, b.cfg.SessionTimeout)
		_, err := b.applyLocal(ctx, &command{Type: cmdExpire, Broker: m})
		cancel()
		if err != nil {
			b.log.Debug("expire registration", "broker", m.ID, "epoch", m.Epoch, "error", err)
			continue
		}
		b.log.Info("registration expired", "broker", m.ID, "epoch", m.Epoch)
	}
}

// applyLocal applies cmd on this node, which must be the leader, and
// waits for the result until ctx ends. errNotLeader means nothing was
// applied.
func (b *Backend) applyLocal(ctx context.Context, cmd *command) (applyResult, error) {
	if b.raft.State() != hraft.Leader {
		return applyResult{}, errNotLeader
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return applyResult{}, fmt.Errorf("encode %s command: %w", cmd.Type, err)
	}
	// The leader's loop takes commands one at a time; on a loaded
	// machine (a disk slow to sync) it may not take this one within an
	// election timeout though it still leads, so the wait to enqueue is
	// bounded by the caller's ctx, or the session timeout without one.
	enqueue := max(b.cfg.SessionTimeout, b.cfg.RaftElectionTimeout)
	if d, ok := ctx.Deadline(); ok {
		enqueue = min(enqueue, max(time.Until(d), time.Millisecond))
	}
	b.raftOps.RLock()
	select {
	case <-b.closing:
		b.raftOps.RUnlock()
		return applyResult{}, coord.ErrClosed
	default:
	}
	f := b.raft.Apply(data, enqueue)
	// errNotLeader from waitFuture means nothing was appended: the
	// caller may retry with the next leader. waitFuture releases raftOps
	// once Raft has answered.
	if err := b.waitFuture(ctx, f, b.raftOps.RUnlock); err != nil {
		return applyResult{}, err
	}
	res, _ := f.Response().(applyResult)
	res.Index = f.Index()
	return res, res.Err
}

// apply applies cmd through the leader: locally when this node leads,
// otherwise through the forward RPC. It retries while there is no leader
// or the leader moves, until ctx ends. what names the command in errors.
func (b *Backend) apply(ctx context.Context, what string, cmd *command) (applyResult, error) {
	return untilLeader(ctx, b, what, cmd.Type == cmdDeregister, func() (applyResult, error) {
		var res applyResult
		var err error
		addr, id := b.raft.LeaderWithID()
		switch {
		case b.raft.State() == hraft.Leader:
			res, err = b.applyLocal(ctx, cmd)
		case addr == "":
			err = errNotLeader
		default:
			var resp fwdResponse
			resp, err = b.call(ctx, string(addr), fwdRequest{Op: fwdApply, Cmd: cmd})
			res = applyResult{Broker: resp.Broker, Epoch: resp.Epoch, Index: resp.Index, ProducerIDs: resp.ProducerIDs, Replaced: resp.Replaced, ACLs: resp.ACLs, Configs: resp.Configs,
				ProducerIDKey: resp.ProducerIDKey, Bases: resp.Bases}
			if err != nil && ctx.Err() == nil && isDialError(err) {
				b.log.Debug("forward to leader", "leader", id, "error", err)
				err = errNotLeader
			}
		}
		if err == nil || res.Index > 0 {
			// Reads on this node see the entry once Apply returns.
			b.waitApplied(ctx, res.Index)
		}
		return res, err
	})
}

// untilLeader calls try, which acts on the leader (here, or forwarded to
// it), again every tenth of a heartbeat timeout while it fails with
// errNotLeader, until it succeeds, fails otherwise, ctx ends or the
// backend closes (unless whileClosed). Its other errors are translated
// for what.
func untilLeader[T any](ctx context.Context, b *Backend, what string, whileClosed bool, try func() (T, error)) (T, error) {
	retry := max(b.cfg.RaftHeartbeatTimeout/10, 10*time.Millisecond)
	var last error
	for {
		if b.isClosed() && !whileClosed {
			var zero T
			return zero, fmt.Errorf("%w: %s", coord.ErrClosed, what)
		}
		res, err := try()
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, errNotLeader) && !isNotLeader(err) {
			return res, translate(what, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("%w: %s: no raft leader reachable (%v): %w", coord.ErrUnavailable, what, last, ctx.Err())
		case <-b.closing:
			return res, fmt.Errorf("%w: %s", coord.ErrClosed, what)
		case <-time.After(retry):
		}
	}
}

// isNotLeader reports whether a forwarded request met a node that no
// longer leads.
func isNotLeader(err error) bool {
	var re *remoteError
	return errors.As(err, &re) && re.Code == "not_leader"
}

// isDialError reports whether err happened before a request was sent, so
// retrying it cannot apply a command twice.
func isDialError(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	return errors.Is(err, errDial)
}

func raftAddr(addr string) hraft.ServerAddress { return hraft.ServerAddress(addr) }

// waitApplied waits until the local state machine has applied index, or
// ctx ends, or Close.
func (b *Backend) waitApplied(ctx context.Context, index uint64) {
	for {
		changes := b.fsm.changes()
		if b.fsm.applied() >= index {
			return
		}
		select {
		case <-changes:
		case <-ctx.Done():
			return
		case <-b.closing:
			return
		}
	}
}

// waitFuture waits for f until ctx ends or Close, and calls answered
// once Raft has answered f (at once when it does not wait): the caller
// holds raftOps (read) until then, so Close shuts Raft down only when
// the future is answered, and the waiting goroutine ends.
func (b *Backend) waitFuture(ctx context.Context, f hraft.Future, answered func()) error {
	done := make(chan error, 1)
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		answered()
		return coord.ErrClosed
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		err := f.Error()
		answered()
		done <- err
	}()
	select {
	case err := <-done:
		if errors.Is(err, hraft.ErrNotLeader) || errors.Is(err, hraft.ErrLeadershipTransferInProgress) {
			return errNotLeader
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-b.closing:
		return coord.ErrClosed
	}
}

// verifyLeader confirms with a quorum that this node still leads. It
// waits for Raft's answer, which comes within a heartbeat round or, cut
// off, when the lease steps this node down; it does not return early when
// ctx ends, so that Close never shuts Raft down under a pending check.
func (b *Backend) verifyLeader() error {
	b.raftOps.RLock()
	defer b.raftOps.RUnlock()
	select {
	case <-b.closing:
		return coord.ErrClosed
	default:
	}
	err := b.raft.VerifyLeader().Error()
	if errors.Is(err, hraft.ErrNotLeader) || errors.Is(err, hraft.ErrLeadershipLost) {
		return errNotLeader
	}
	return err
}

// closingStable is the Raft node's stable store (its current term and
// vote) that, once the backend has closed it, drops writes instead of
// failing them. hashicorp/raft answers a heartbeat on its transport's
// goroutine, which can still be running after Shutdown and after the
// store is closed, and panics when it cannot save a new term. Close
// closes every Raft connection before the store, so the answer to such
// a heartbeat is never delivered: the term it would have saved was
// promised to no one.
type closingStable struct {
	hraft.StableStore
	// mu is held to write, and to close: no write runs while the store
	// closes.
	mu     sync.RWMutex
	closed bool
}

// Set implements hraft.StableStore.
func (s *closingStable) Set(key, val []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil
	}
	return s.StableStore.Set(key, val)
}

// SetUint64 implements hraft.StableStore.
func (s *closingStable) SetUint64(key []byte, val uint64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil
	}
	return s.StableStore.SetUint64(key, val)
}

// close marks the store closed and runs closeStore, with no write in
// between or after.
func (s *closingStable) close(closeStore func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	closeStore()
}
