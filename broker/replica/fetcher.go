package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// MaxSessionRefresh bounds the interval between two fetches of a session
// that serve all its partitions: a follower's recorded fetch of an idle
// partition is never older than this, and an ISR expansion refused by
// the controller is proposed again within it.
const MaxSessionRefresh = time.Second

// fetcherManager runs num.replica.fetchers fetchers per leader this
// broker follows, as Kafka's replica fetcher threads: each is one
// goroutine with one connection and fetch session that fetches its share
// of the partitions this broker follows from that leader in one
// long-polling Fetch request (replica id set). A partition's fetcher is
// the one Kafka's formula picks (fetcherID).
type fetcherManager struct {
	rm *Manager

	mu          sync.Mutex
	fetchers    map[fetcherKey]*fetcher
	byPartition map[*Partition]*fetcher
	// addrs are the leaders' addresses from the latest LeaderAndIsr
	// (its live leaders), fresher than the metadata cache.
	addrs  map[coord.BrokerID]string
	closed bool
	wg     sync.WaitGroup
	// held defers pokes while a LeaderAndIsr is applied, so that a
	// request moving many partitions restarts each fetcher once; touched
	// are the fetchers to poke at release.
	held    bool
	touched map[*fetcher]bool
}

// fetcherKey names one fetcher: its leader and its number among the
// leader's num.replica.fetchers.
type fetcherKey struct {
	leader coord.BrokerID
	id     int32
}

// FetcherID is the fetcher of n that fetches tp, by Kafka's formula
// (AbstractFetcherManager.getFetcherId): the absolute value of 31 times
// the topic's Java hash code plus the partition, modulo n. A broker
// applying the same num.replica.fetchers spreads partitions as Kafka's
// does.
func FetcherID(topic string, partition, n int32) int32 {
	if n == 1 {
		return 0 // the default: no hash on a LeaderAndIsr's path
	}
	var h int32
	for _, c := range utf16.Encode([]rune(topic)) {
		h = 31*h + int32(c)
	}
	v := 31*h + partition
	if v == math.MinInt32 {
		v = 0 // Kafka's Utils.abs
	} else if v < 0 {
		v = -v
	}
	return v % n
}

func newFetcherManager(rm *Manager) *fetcherManager {
	return &fetcherManager{rm: rm, fetchers: map[fetcherKey]*fetcher{}, byPartition: map[*Partition]*fetcher{},
		addrs: map[coord.BrokerID]string{}, touched: map[*fetcher]bool{}}
}

// hold defers the fetchers' restarts until release.
func (m *fetcherManager) hold() {
	m.mu.Lock()
	m.held = true
	m.mu.Unlock()
}

// release restarts every fetcher changed since hold.
func (m *fetcherManager) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held = false
	for f := range m.touched {
		f.poke()
	}
	clear(m.touched)
}

// FetcherInfo is one partition this broker follows and the fetcher that
// copies it: the leader it fetches from and the fetcher's number among
// that leader's fetchers (num.replica.fetchers; Kafka's
// ReplicaFetcherThread-<id>-<leader>).
type FetcherInfo struct {
	Partition coord.TopicPartition
	Leader    coord.BrokerID
	ID        int32
}

// Fetchers returns the partitions this broker's fetchers copy, and which
// fetcher copies each.
func (m *Manager) Fetchers() []FetcherInfo {
	m.fetchers.mu.Lock()
	defer m.fetchers.mu.Unlock()
	out := make([]FetcherInfo, 0, len(m.fetchers.byPartition))
	for p, f := range m.fetchers.byPartition {
		out = append(out, FetcherInfo{Partition: coord.TopicPartition{Topic: p.topic, Partition: p.index}, Leader: f.leader, ID: f.id})
	}
	return out
}

// StopFetchers stops every fetcher for good: the broker no longer copies
// the partitions it follows (a test's way to make a follower lag).
func (m *Manager) StopFetchers() { m.fetchers.close() }

// pokeLocked restarts f now, or at release while held.
func (m *fetcherManager) pokeLocked(f *fetcher) {
	if m.held {
		m.touched[f] = true
		return
	}
	f.poke()
}

// fetcher fetches from one leader its share of the partitions.
type fetcher struct {
	m      *fetcherManager
	leader coord.BrokerID
	// id is the fetcher's number among the leader's fetchers.
	id     int32
	ctx    context.Context
	cancel context.CancelFunc

	// session is the fetcher's incremental fetch session with the
	// leader (KIP-227); owned by run.
	session followerSession

	mu    sync.Mutex
	parts map[*Partition]*fetchPartition
	// partsGen counts the changes to parts, addSeq the partitions
	// added (each fetchPartition's seq).
	partsGen, addSeq uint64
	// aside holds the partitions put aside after an error or waiting for
	// their truncation, until a round finds them ready to fetch again.
	// While it is empty, parts unchanged and no replica throttled, a
	// round fetches every partition without looking at each (a fast
	// round).
	aside map[*fetchPartition]struct{}
	// byTP indexes parts by partition; detached are the partitions taken
	// out of parts since the last fetch, which the session forgets.
	byTP     map[coord.TopicPartition]*fetchPartition
	detached []coord.TopicPartition
	// changed is signalled when parts changes; inflight cancels the
	// request in flight so that the change applies at once.
	changed  chan struct{}
	inflight context.CancelFunc

	// round counts the fetcher's passes over its partitions; scanned is
	// when a fetch last looked at every partition's position. Owned by
	// run.
	round   uint64
	scanned time.Time
	// all is parts as a slice, taken at partsGen allGen, when the newest
	// partition's seq was allSeq; fastRound is the latest fast round.
	// dirty are the partitions answered since the last fetch named
	// positions: in a fast round the only ones whose position may have
	// moved. lookedInc is the session incarnation (followerSession.inc,
	// never 0 once a session answered) in which a fetch last looked at
	// every fetched partition's position. Owned by run.
	all            []*fetchPartition
	allGen, allSeq uint64
	fastRound      uint64
	dirty          []*fetchPartition
	lookedInc      uint64
}

// fetchPartition is one followed partition as its fetcher sees it. It is
// created by assign and then read and written by the fetcher's goroutine
// only.
type fetchPartition struct {
	p           *Partition
	leaderEpoch int32
	// gen is p.followGen when the role was applied; appends for another
	// generation are dropped.
	gen uint64
	// truncating says an OffsetForLeaderEpoch exchange about askEpoch is
	// still to be done before fetching (replication.truncation=epoch).
	truncating bool
	askEpoch   int32
	// retryAt delays the partition after an error; failures counts the
	// errors in a row, which double the delay.
	retryAt  time.Time
	failures int
	// round is the fetcher's round that last fetched the partition (a
	// fast round fetches every partition of seq up to the fetcher's
	// allSeq without marking them). seq orders the fetcher's partitions
	// by when they were added; it does not change.
	round uint64
	seq   uint64
	// held is the position the session holds for the partition, valid
	// while heldIn is the session's incarnation (followerSession.inc);
	// moved says this fetcher changed the partition's log since it last
	// compared the log's position with held. A fetch looks only at the
	// partitions moved or not held, and at every one each
	// MaxSessionRefresh (a log start that local retention moved).
	held   fetchPosition
	heldIn uint64
	moved  bool
}

// setLeaders records the live leaders' addresses a LeaderAndIsr carries.
func (m *fetcherManager) setLeaders(leaders []coord.Broker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range leaders {
		m.addrs[l.ID] = m.rm.member.PeerAddr(l)
	}
}

// leaderAddr returns a leader's address, from the latest LeaderAndIsr or
// the metadata cache.
func (m *fetcherManager) leaderAddr(id coord.BrokerID) (string, bool) {
	m.mu.Lock()
	addr, ok := m.addrs[id]
	m.mu.Unlock()
	if ok {
		return addr, true
	}
	if cb, ok := m.rm.cache.Broker(id); ok {
		return m.rm.member.PeerAddr(cb), true
	}
	return "", false
}

// assign makes p fetched from leader at leaderEpoch, starting with the
// truncation tr decided; it leaves any other fetcher.
func (m *fetcherManager) assign(p *Partition, leader coord.BrokerID, leaderEpoch int32, gen uint64, tr replication.Truncation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.detachLocked(p)
	key := fetcherKey{leader: leader, id: FetcherID(p.topic, p.index, m.rm.cfg.NumReplicaFetchers)}
	f := m.fetchers[key]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &fetcher{m: m, leader: leader, id: key.id, ctx: ctx, cancel: cancel, parts: map[*Partition]*fetchPartition{},
			byTP: map[coord.TopicPartition]*fetchPartition{}, aside: map[*fetchPartition]struct{}{}, changed: make(chan struct{}, 1)}
		m.fetchers[key] = f
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			f.run()
		}()
	}
	fp := &fetchPartition{p: p, leaderEpoch: leaderEpoch, gen: gen, truncating: !tr.Done, askEpoch: tr.Epoch}
	f.mu.Lock()
	f.partsGen++
	f.addSeq++
	fp.seq = f.addSeq
	if fp.truncating {
		f.aside[fp] = struct{}{}
	}
	f.parts[p] = fp
	f.byTP[coord.TopicPartition{Topic: p.topic, Partition: p.index}] = fp
	f.mu.Unlock()
	m.byPartition[p] = f
	m.pokeLocked(f)
}

// remove stops fetching p.
func (m *fetcherManager) remove(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.detachLocked(p)
}

// detachLocked removes p from its fetcher, stopping a fetcher left with
// nothing to fetch. A fetcher left with partitions is not poked: its
// request in flight goes on, the answer's records for p are dropped (the
// fetcher no longer holds p) and the next request tells the session to
// forget p. A poke would cancel the request, and with it the connection
// and the fetch session, so that the next fetch named every partition
// again: a StopReplica of a deleted topic's thousands of partitions,
// removed one by one, kept the followers re-sending full fetches for as
// long as it took.
func (m *fetcherManager) detachLocked(p *Partition) {
	f := m.byPartition[p]
	if f == nil {
		return
	}
	delete(m.byPartition, p)
	tp := coord.TopicPartition{Topic: p.topic, Partition: p.index}
	f.mu.Lock()
	f.partsGen++
	delete(f.aside, f.parts[p])
	delete(f.parts, p)
	delete(f.byTP, tp)
	f.detached = append(f.detached, tp)
	empty := len(f.parts) == 0
	f.mu.Unlock()
	if empty {
		delete(m.fetchers, fetcherKey{f.leader, f.id})
		delete(m.touched, f)
		f.cancel()
	}
}

// close stops every fetcher and waits for them.
func (m *fetcherManager) close() {
	m.mu.Lock()
	m.closed = true
	for _, f := range m.fetchers {
		f.cancel()
	}
	m.fetchers = map[fetcherKey]*fetcher{}
	m.byPartition = map[*Partition]*fetcher{}
	m.mu.Unlock()
	m.wg.Wait()
}

// poke wakes the fetcher and cancels its request in flight.
func (f *fetcher) poke() {
	f.mu.Lock()
	if f.inflight != nil {
		f.inflight()
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// run fetches until the fetcher is stopped.
func (f *fetcher) run() {
	rm := f.m.rm
	log := rm.logger.With("leader", f.leader, "fetcher", f.id)
	var cl *PeerConn
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	var truncating, fetching, waiting []*fetchPartition
	for f.ctx.Err() == nil {
		now := time.Now()
		truncating, fetching, waiting = truncating[:0], fetching[:0], waiting[:0]
		next := time.Time{}
		// A fetch's answer is taken for the partitions this round
		// fetches only: one added or put aside meanwhile is not.
		f.round++
		f.mu.Lock()
		// At 10 000 partitions a look at each partition every round
		// took a fifth of a follower's CPU: a steady fetcher skips it.
		fast := len(f.aside) == 0 && f.partsGen == f.allGen && !rm.followerThrottleSeen.Load()
		if fast {
			f.fastRound = f.round
		} else {
			if f.partsGen != f.allGen {
				f.all = f.all[:0]
				for _, fp := range f.parts {
					f.all = append(f.all, fp)
				}
				f.allGen, f.allSeq = f.partsGen, f.addSeq
			}
			for _, fp := range f.parts {
				switch {
				case now.Before(fp.retryAt):
					if next.IsZero() || fp.retryAt.Before(next) {
						next = fp.retryAt
					}
					waiting = append(waiting, fp)
				case fp.truncating:
					truncating = append(truncating, fp)
				default:
					delete(f.aside, fp)
					fp.round = f.round
					fetching = append(fetching, fp)
				}
			}
		}
		f.mu.Unlock()
		parts := fetching
		if fast {
			parts = f.all // not changed by fetch in a fast round
		}
		if len(truncating) == 0 && len(parts) == 0 {
			f.wait(next)
			continue
		}
		if cl != nil && cl.Expired(now) {
			// The authenticated session is about to end: a new
			// connection authenticates again (KIP-368); the fetch
			// session, which is the leader's, carries on.
			cl.Close()
			cl = nil
		}
		if cl == nil {
			addr, ok := f.m.leaderAddr(f.leader)
			var err error
			if ok {
				cl, err = DialPeer(f.ctx, addr, rm.member.PeerDial())
			}
			if !ok || err != nil {
				log.Debug("no connection to leader yet", "known", ok, "error", err)
				f.wait(time.Now().Add(rm.cfg.ReplicaFetchBackoff))
				continue
			}
		}
		reqCtx, cancel := context.WithCancel(f.ctx)
		f.mu.Lock()
		f.inflight = cancel
		f.mu.Unlock()
		var err error
		if len(truncating) > 0 {
			err = f.truncateByEpoch(reqCtx, cl, truncating)
		} else {
			err = f.fetch(reqCtx, cl, parts, waiting, next, fast)
		}
		f.mu.Lock()
		f.inflight = nil
		f.mu.Unlock()
		canceled := reqCtx.Err() != nil
		cancel()
		switch {
		case errors.Is(err, errThrottled):
			f.wait(time.Now().Add(rm.cfg.ReplicaFetchBackoff))
		case canceled:
			// The partitions changed under a long poll. The request
			// gave up waiting but the connection still owes its answer,
			// which would hold the next fetch back for up to
			// replica.fetch.wait.max.ms: start on a fresh connection,
			// and a new session (the lost answer moved its epoch).
			cl.Close()
			cl = nil
			f.session.reset()
		case errors.Is(err, errSessionLost):
			log.Debug("fetch session lost; starting a new one", "error", err)
			f.session.reset()
		case err != nil:
			log.Debug("replica fetch failed; retrying", "error", err, "backoff", rm.cfg.ReplicaFetchBackoff)
			cl.Close()
			cl = nil
			f.session.reset()
			f.wait(time.Now().Add(rm.cfg.ReplicaFetchBackoff))
		}
	}
}

// wait blocks until the fetcher changes, stops, or until (when set).
func (f *fetcher) wait(until time.Time) {
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-f.changed:
	case <-f.ctx.Done():
	case <-timeout:
	}
}

// firstRetry is the delay after a partition's first error in a row: a
// leader that has not yet applied its LeaderAndIsr answers
// UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER for a few
// milliseconds, and acks=all produces wait for the follower meanwhile.
const firstRetry = 10 * time.Millisecond

// refusedRetry bounds the delay after each of a partition's first
// refusedRetries refusals in a row by its leader (about a second of
// them). After a leader change the new leader refuses its followers
// until it has applied the controller's LeaderAndIsr, which on a busy
// broker of 10 000 partitions lands up to a few hundred milliseconds
// after the follower's; with the delay doubling all the way the
// follower would ask again only up to that long after the leader was
// ready, and the partition's acks=all writes would wait with it.
const (
	refusedRetry   = 25 * time.Millisecond
	refusedRetries = 40
)

// delay puts a partition aside after an error: 10 ms, doubling with each
// error in a row up to replica.fetch.backoff.ms, and at most
// refusedRetry for the first refusals by the leader (refused).
func (f *fetcher) delay(fp *fetchPartition, refused bool) {
	d := min(firstRetry<<min(fp.failures, 16), f.m.rm.cfg.ReplicaFetchBackoff)
	if refused && fp.failures < refusedRetries {
		d = min(d, refusedRetry)
	}
	fp.failures++
	fp.retryAt = time.Now().Add(d)
	f.mu.Lock()
	if f.parts[fp.p] == fp {
		f.aside[fp] = struct{}{}
	}
	f.mu.Unlock()
}

// groupByTopic indexes parts by partition and groups them by topic, in
// first-seen order, as Kafka requests list partitions under their topic.
func groupByTopic(parts []*fetchPartition) (map[coord.TopicPartition]*fetchPartition, [][]*fetchPartition) {
	index := make(map[coord.TopicPartition]*fetchPartition, len(parts))
	at := map[string]int{}
	var groups [][]*fetchPartition
	for _, fp := range parts {
		index[coord.TopicPartition{Topic: fp.p.topic, Partition: fp.p.index}] = fp
		i, ok := at[fp.p.topic]
		if !ok {
			i = len(groups)
			at[fp.p.topic] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], fp)
	}
	return index, groups
}

// truncateByEpoch asks the leader where each partition's latest epoch
// ended (OffsetForLeaderEpoch, KIP-101/KIP-279) and truncates as the state
// machine decides; a partition is done when its Truncation is.
func (f *fetcher) truncateByEpoch(ctx context.Context, cl *PeerConn, parts []*fetchPartition) error {
	rm := f.m.rm
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = rm.cfg.BrokerID
	for _, fp := range parts {
		fp.moved = true // a truncation may move its log end
	}
	index, groups := groupByTopic(parts)
	for _, g := range groups {
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = g[0].p.topic
		for _, fp := range g {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition = fp.p.index
			rp.CurrentLeaderEpoch = fp.leaderEpoch
			rp.LeaderEpoch = fp.askEpoch
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("offset for leader epoch from broker %d: %w", f.leader, err)
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range resp.Topics {
		for _, sp := range t.Partitions {
			tp := coord.TopicPartition{Topic: t.Topic, Partition: sp.Partition}
			fp := index[tp]
			if fp == nil {
				continue
			}
			delete(index, tp)
			f.mu.Lock()
			held := f.byTP[tp] == fp
			f.mu.Unlock()
			if !held {
				continue // taken out of this fetcher meanwhile
			}
			if sp.ErrorCode != 0 {
				rm.logger.Debug("offset for leader epoch refused", "partition", fp.p.Name(), "leader", f.leader,
					"error", kerr.ErrorForCode(sp.ErrorCode))
				f.delay(fp, true)
				continue
			}
			p := fp.p
			p.appendMu.Lock()
			if p.followGen != fp.gen {
				p.appendMu.Unlock()
				continue
			}
			p.repMu.Lock()
			tr, err := p.rep.EpochEndOffset(sp.LeaderEpoch, sp.EndOffset)
			p.repMu.Unlock()
			if err != nil {
				rm.logger.Error("epoch truncation failed", "partition", p.Name(), "error", err)
				fp.truncating = false
			} else {
				rm.truncate(p, tr.Offset, fmt.Sprintf("leader %d: epoch %d ends at %d", f.leader, sp.LeaderEpoch, sp.EndOffset))
				fp.truncating = !tr.Done
				fp.askEpoch = tr.Epoch
			}
			p.appendMu.Unlock()
		}
	}
	for _, fp := range index {
		f.delay(fp, false)
	}
	return nil
}

// fetch sends one Fetch for parts and appends what comes back; waiting
// are the partitions put aside after an error, which the session
// forgets until they are fetched again, and retry (zero: none) is when
// the first of them is due.
//
// The leader holds the Fetch for up to replica.fetch.wait.max.ms while
// parts have nothing new, and the fetcher sends nothing meanwhile: a
// partition put aside for 10 ms after its leader answered before it had
// applied its LeaderAndIsr would wait out the whole long poll, and its
// acks=all writes with it. So the Fetch waits no longer than until the
// first retry is due.
func (f *fetcher) fetch(ctx context.Context, cl *PeerConn, parts, waiting []*fetchPartition, retry time.Time, fast bool) error {
	rm := f.m.rm
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = rm.cfg.BrokerID
	maxWait := rm.cfg.ReplicaFetchWaitMax
	if !retry.IsZero() {
		// Rounded up, so that the retry is due when the answer comes.
		maxWait = max(min(maxWait, time.Until(retry).Round(time.Millisecond)+time.Millisecond), 0)
	}
	req.MaxWaitMillis = int32(maxWait.Milliseconds())
	req.MinBytes = rm.cfg.ReplicaFetchMinBytes
	req.MaxBytes = max(rm.cfg.ReplicaFetchMaxBytes, 10<<20)
	// The follower's throttle: a throttled replica out of the ISR is left
	// out while the follower's rate is exceeded. A fast round has none to
	// look for: no replica of this broker was ever throttled.
	var throttled map[*fetchPartition]bool
	leftOut := 0
	if !fast {
		exceeded := rm.followerQuota.Exceeded()
		parts = slices.DeleteFunc(parts, func(fp *fetchPartition) bool {
			if !rm.followerThrottles(fp.p) {
				return false
			}
			if throttled == nil {
				throttled = map[*fetchPartition]bool{}
			}
			throttled[fp] = true
			if exceeded {
				leftOut++
				fp.round = 0
				waiting = append(waiting, fp)
			}
			return exceeded
		})
	}
	rm.metrics.Throttled("follower", 0, leftOut)
	if len(parts) == 0 {
		return errThrottled
	}
	f.mu.Lock()
	detached := f.detached
	f.detached = nil
	f.mu.Unlock()
	// Only a partition whose log this fetcher changed, or that the
	// session does not hold, can have a position to send: the others are
	// left untouched, so a fetch costs what changed, not the tens of
	// thousands of partitions a follower may hold on this leader. Once
	// each MaxSessionRefresh every partition's position is compared, for
	// a log start moved by this broker's retention.
	now := time.Now()
	inc := f.session.inc
	scan := f.session.epoch == 0 || now.Sub(f.scanned) >= MaxSessionRefresh
	if scan {
		f.scanned = now
	}
	var named []sessionEntry
	at := map[string]int{}
	// In fetch mode every fetch names the epoch of the partition's last
	// batch, and the leader checks it before it counts the position.
	onFetch := rm.cfg.ReplicationTruncation == string(replication.TruncateFetch)
	look, full := parts, true
	if fast && !scan && f.lookedInc == inc {
		// Every partition is fetched, and held by the session at the
		// position a full look found, unless an answer since the last
		// fetch moved it.
		look, full = f.dirty, false
	}
	f.dirty = f.dirty[:0]
	for _, fp := range look {
		if !scan && !fp.moved && fp.heldIn == inc {
			continue
		}
		fp.moved = false
		pos := fetchPosition{fetchOffset: fp.p.log.EndOffset(), logStart: fp.p.log.StartOffset(), leaderEpoch: fp.leaderEpoch, lastFetchedEpoch: -1}
		if onFetch {
			pos.lastFetchedEpoch, _ = fp.p.log.LatestEpoch()
		}
		if f.session.epoch != 0 && fp.heldIn == inc && fp.held == pos {
			continue // the session holds this position already
		}
		tp := coord.TopicPartition{Topic: fp.p.topic, Partition: fp.p.index}
		named = append(named, sessionEntry{tp, pos, fp})
		i, ok := at[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			at[tp.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.CurrentLeaderEpoch = pos.leaderEpoch
		rp.FetchOffset = pos.fetchOffset
		rp.LogStartOffset = pos.logStart
		rp.LastFetchedEpoch = pos.lastFetchedEpoch
		rp.PartitionMaxBytes = rm.cfg.ReplicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	leaving := detached
	for _, fp := range waiting {
		// The session forgets it: named again once fetched again.
		fp.heldIn = 0
		leaving = append(leaving, coord.TopicPartition{Topic: fp.p.topic, Partition: fp.p.index})
	}
	forgotten := f.session.forgotten(leaving)
	req.SessionID, req.SessionEpoch = f.session.id, f.session.epoch
	req.ForgottenTopics = forgottenTopics(forgotten)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("fetch from broker %d: %w", f.leader, err)
	}
	// The answer's records alias the connection's buffer, which the
	// appends below copy from; a large one goes back to the pools after.
	defer cl.releaseBuffer()
	resp := kresp.(*kmsg.FetchResponse)
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code:
		return fmt.Errorf("%w: fetch from broker %d: %w", errSessionLost, f.leader, kerr.ErrorForCode(resp.ErrorCode))
	default:
		return fmt.Errorf("fetch from broker %d: %w", f.leader, kerr.ErrorForCode(resp.ErrorCode))
	}
	f.session.answered(resp.SessionID, named, forgotten)
	switch {
	case f.session.inc != inc:
		// A new session holds only what this fetch named: the next
		// fetch looks at every partition.
		f.lookedInc = 0
	case full:
		f.lookedInc = inc
	}
	var answered []*fetchPartition
	f.mu.Lock()
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			fp := f.byTP[coord.TopicPartition{Topic: t.Topic, Partition: t.Partitions[i].Partition}]
			if fp != nil && (fp.round == f.round || f.fastRound == f.round && fp.seq <= f.allSeq) {
				answered = append(answered, fp)
			} else {
				answered = append(answered, nil)
			}
		}
	}
	f.mu.Unlock()
	n := 0
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			sp := &t.Partitions[i]
			fp := answered[n]
			n++
			if fp == nil {
				continue
			}
			fp.moved = true
			f.dirty = append(f.dirty, fp)
			if throttled[fp] && len(sp.RecordBatches) > 0 {
				rm.followerQuota.Record(len(sp.RecordBatches))
				rm.metrics.Throttled("follower", len(sp.RecordBatches), 0)
			}
			f.fetched(ctx, cl, fp, sp)
		}
	}
	return nil
}

// forgottenTopics groups partitions by topic for a request's forgotten
// topics.
func forgottenTopics(tps []coord.TopicPartition) []kmsg.FetchRequestForgottenTopic {
	var out []kmsg.FetchRequestForgottenTopic
	at := map[string]int{}
	for _, tp := range tps {
		i, ok := at[tp.Topic]
		if !ok {
			out = append(out, kmsg.FetchRequestForgottenTopic{Topic: tp.Topic})
			i = len(out) - 1
			at[tp.Topic] = i
		}
		out[i].Partitions = append(out[i].Partitions, tp.Partition)
	}
	return out
}

// errSessionLost: the leader no longer knows the fetcher's fetch session,
// or expected another epoch; the next fetch opens a new session.
var errSessionLost = errors.New("fetch session lost")

// fetchPosition is what a follower's fetch tells the leader of one
// partition.
type fetchPosition struct {
	fetchOffset, logStart         int64
	leaderEpoch, lastFetchedEpoch int32
}

// sessionEntry is a partition a fetch names, at its position.
type sessionEntry struct {
	tp  coord.TopicPartition
	pos fetchPosition
	fp  *fetchPartition
}

// followerSession is a fetcher's side of its incremental fetch session
// (KIP-227): the session id and next epoch the leader gave it, and which
// partitions it holds (each one's position is its fetchPartition's held).
// With no session (epoch 0) a fetch names every partition and asks for a
// new session, closing the one a reset left (its id); within one it names
// only the partitions whose position changed and forgets those no longer
// fetched. What it holds changes only with what the fetches name and
// forget.
type followerSession struct {
	id, epoch int32
	// inc is the session's incarnation: it changes whenever the positions
	// the session holds are lost (a reset, a new session, none kept), so
	// a fetchPartition's held of another incarnation counts as not held.
	inc  uint64
	sent map[coord.TopicPartition]struct{}
}

// forgotten returns those of leaving (partitions the next fetch leaves
// out) that the session holds.
func (s *followerSession) forgotten(leaving []coord.TopicPartition) []coord.TopicPartition {
	if s.epoch == 0 {
		return nil
	}
	var out []coord.TopicPartition
	for _, tp := range leaving {
		if _, ok := s.sent[tp]; ok && !slices.Contains(out, tp) {
			out = append(out, tp)
		}
	}
	return out
}

// answered takes in a successful answer: the leader's session id (0: it
// keeps none, so the next fetch is full again), and the partitions the
// fetch named and forgot.
func (s *followerSession) answered(id int32, named []sessionEntry, forgotten []coord.TopicPartition) {
	if id == 0 {
		s.id, s.epoch, s.sent = 0, 0, nil
		s.inc++
		return
	}
	if s.epoch == 0 || id != s.id {
		s.id, s.epoch, s.sent = id, 0, make(map[coord.TopicPartition]struct{}, len(named))
		s.inc++
	}
	s.epoch++
	if s.epoch < 0 {
		s.epoch = 1
	}
	for _, tp := range forgotten {
		delete(s.sent, tp)
	}
	for _, e := range named {
		s.sent[e.tp] = struct{}{}
		e.fp.held, e.fp.heldIn = e.pos, s.inc
	}
}

// reset forgets the session: the next fetch is a full one that opens a
// new session and closes this one (its id with epoch 0).
func (s *followerSession) reset() {
	s.epoch, s.sent = 0, nil
	s.inc++
	// The id stays so that the full fetch closes the old session.
}

// errThrottled: every partition of a fetch was left out by the follower's
// throttle; the fetcher waits replica.fetch.backoff.ms before the next.
var errThrottled = errors.New("every partition is throttled")

// followerThrottles reports whether the follower's throttle applies to p:
// the topic's follower.replication.throttled.replicas names this replica
// and it is not in the ISR (as the replication state has it).
func (m *Manager) followerThrottles(p *Partition) bool {
	if !p.followerThrottled.Load() {
		return false
	}
	p.repMu.Lock()
	isr := p.rep.ISR()
	p.repMu.Unlock()
	return !slices.Contains(isr, replication.ReplicaID(m.cfg.BrokerID))
}

// fetched applies one partition's fetch response.
func (f *fetcher) fetched(ctx context.Context, cl *PeerConn, fp *fetchPartition, sp *kmsg.FetchResponseTopicPartition) {
	rm := f.m.rm
	p := fp.p
	switch {
	case sp.ErrorCode == 0 && (sp.DivergingEpoch.EndOffset >= 0 || sp.DivergingEpoch.Epoch >= 0):
		f.diverged(fp, sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset)
		return
	case sp.ErrorCode == 0:
	case sp.ErrorCode == kerr.OffsetOutOfRange.Code:
		f.outOfRange(ctx, cl, fp, sp.LogStartOffset)
		return
	default:
		rm.logger.Debug("replica fetch refused", "partition", p.Name(), "leader", f.leader, "error", kerr.ErrorForCode(sp.ErrorCode))
		f.delay(fp, true)
		return
	}
	fp.failures = 0
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.followGen != fp.gen {
		return
	}
	if len(sp.RecordBatches) > 0 {
		if err := rm.appendAsFollower(p, sp.RecordBatches); err != nil {
			rm.logger.Error("follower append failed", "partition", p.Name(), "leader", f.leader, "error", err)
			rm.CheckStorage(p, err)
			f.delay(fp, false)
			return
		}
	}
	p.repMu.Lock()
	hw, err := p.rep.FollowerFetched(p.log.EndOffset(), sp.HighWatermark)
	p.repMu.Unlock()
	if err != nil {
		rm.logger.Debug("fetch response not applied", "partition", p.Name(), "error", err)
		return
	}
	hwMoved := hw != p.hw.Load()
	if hwMoved {
		p.hw.Store(hw)
	}
	rm.followLogStart(p, sp.LogStartOffset)
	// A moved high watermark wakes the consumers reading from this
	// follower (KIP-392), as Kafka's fetcher completes the delayed
	// fetches of the partitions whose high watermark it raised.
	if len(sp.RecordBatches) > 0 || hwMoved {
		p.wakeAll()
	}
}

// diverged takes the leader's answer that fp's log parts from its own
// (DivergingEpoch, fetch mode): the follower cuts where the state machine
// decides and names the partition in the next fetch, with its new last
// epoch, whether or not its position moved: the leader checks it again
// and records it only once the logs agree.
func (f *fetcher) diverged(fp *fetchPartition, epoch int32, end int64) {
	rm := f.m.rm
	p := fp.p
	fp.failures = 0
	fp.heldIn = 0
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.followGen != fp.gen {
		return
	}
	p.repMu.Lock()
	tr, err := p.rep.DivergingEpoch(epoch, end)
	p.repMu.Unlock()
	if err != nil {
		rm.logger.Error("diverging epoch not applied", "partition", p.Name(), "leader", f.leader, "error", err)
		f.delay(fp, false)
		return
	}
	rm.truncate(p, tr.Offset, fmt.Sprintf("leader %d: the log parts from the leader's after epoch %d, which ends at %d there", f.leader, epoch, end))
}

// followLogStart raises p's log start towards its leader's, leaderStart
// from a fetch response, as far as the state machine decides (a
// DeleteRecords on the leader, or its retention, moved it). The caller
// holds p.appendMu.
func (m *Manager) followLogStart(p *Partition, leaderStart int64) {
	p.repMu.Lock()
	target, advance := p.rep.LeaderLogStart(leaderStart)
	p.repMu.Unlock()
	if !advance {
		return
	}
	if _, err := p.log.AdvanceStartOffset(target); err != nil {
		m.logger.Error("follow the leader's log start failed", "partition", p.Name(), "offset", target, "error", err)
		m.CheckStorage(p, err)
	}
	m.logStartMoved(p)
}

// appendAsFollower appends the leader's batches. A first batch that
// starts below this log's end (the leader's batches are cut elsewhere
// than this log's, after a truncation to a high watermark inside a batch)
// replaces this log's tail from its base offset. The caller holds
// p.appendMu.
func (m *Manager) appendAsFollower(p *Partition, records []byte) error {
	res, err := p.log.AppendAsFollower(records)
	if errors.Is(err, tlog.ErrUnexpectedOffset) && len(records) >= 8 {
		base := int64(binary.BigEndian.Uint64(records))
		if base < p.log.EndOffset() {
			m.truncate(p, base, "the leader's batch starts below the log end")
			res, err = p.log.AppendAsFollower(records)
		}
	}
	if err != nil {
		return err
	}
	metas, err := replication.ParseBatchHeaders(records)
	if err != nil {
		return fmt.Errorf("producer state of appended batches: %w", err)
	}
	return p.recordAppended(metas, res.BaseOffset)
}

// outOfRange handles OFFSET_OUT_OF_RANGE: a follower behind the leader's
// log start restarts its log there; one ahead of the leader's log end
// truncates to it (asking the leader's end with ListOffsets).
func (f *fetcher) outOfRange(ctx context.Context, cl *PeerConn, fp *fetchPartition, leaderStart int64) {
	rm := f.m.rm
	p := fp.p
	if leaderStart >= 0 && p.log.EndOffset() < leaderStart {
		p.appendMu.Lock()
		if p.followGen == fp.gen {
			end := p.log.EndOffset()
			if err := p.log.TruncateFullyAndStartAt(leaderStart); err != nil {
				rm.logger.Error("restart follower log failed", "partition", p.Name(), "offset", leaderStart, "error", err)
				rm.CheckStorage(p, err)
			} else {
				p.producers.Reset()
				p.hw.Store(min(p.hw.Load(), leaderStart))
				p.publishTxns()
				rm.logStartMoved(p)
				rm.logger.Info("truncated follower log", "partition", p.Name(), "mode", "log-start", "offset", leaderStart,
					"log_end", end, "reason", "behind the leader's log start")
			}
		}
		p.appendMu.Unlock()
		return
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = rm.cfg.BrokerID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = p.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = p.index
	rp.CurrentLeaderEpoch = fp.leaderEpoch
	rp.Timestamp = -1 // ListOffsets' latest: the log end offset
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		f.delay(fp, false)
		return
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		f.delay(fp, false)
		return
	}
	leaderEnd := resp.Topics[0].Partitions[0].Offset
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.followGen != fp.gen {
		return
	}
	p.repMu.Lock()
	tr, err := p.rep.FetchOutOfRange(leaderEnd)
	p.repMu.Unlock()
	if err != nil {
		rm.logger.Warn("out of range fetch not handled", "partition", p.Name(), "error", err)
		f.delay(fp, false)
		return
	}
	rm.truncate(p, tr.Offset, fmt.Sprintf("ahead of leader %d's log end %d", f.leader, leaderEnd))
}
