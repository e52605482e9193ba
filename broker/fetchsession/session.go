// Package fetchsession holds a broker's incremental fetch sessions
// (KIP-227). A client (a consumer, or a
// follower replicating from this leader) that opens a session with a full
// fetch then sends, at each next epoch, only the partitions whose fetch
// position changed and the ones it no longer wants; the broker answers
// only those with records, an error, or a high watermark or log start
// offset that changed since the session last told it. So a follower
// holding 10 000 idle partitions on this leader sends, and gets back,
// only the few that move.
//
// The broker's work follows the changes too. A session watches its
// partitions (replica.Partition.WatchChanges): every append, high watermark or
// log start move, role change or removal (the partition's wakeAll) marks the
// partition changed in the session and wakes a fetch of it that waits.
// An incremental fetch serves only the partitions it names, the ones
// changed since, and the ones its last answer left unfinished (records
// sent, an error, records left unread), and adds those that change while
// it waits; an idle partition costs it nothing.
//
// A follower's position in the partitions it leaves out is the one the
// session holds. Every refreshEvery an incremental fetch also records
// those positions of the session's idle partitions as if the follower had
// sent them, so an idle partition's follower stays caught up (in the ISR)
// as with Kafka's leader, which records them at every fetch. It records
// them only (Request.Idle): an idle partition has nothing to read
// and nothing to answer, and reading and answering the 33 000 partitions
// a follower holds on a leader at 100 000 partitions, once a second, was
// most of an idle broker's CPU.
package fetchsession

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
)

// CacheSlots is how many sessions a broker keeps (Kafka's
// max.incremental.fetch.session.cache.slots default); the least recently
// used one is evicted for a new one.
const CacheSlots = 1000

// Session is one incremental fetch session.
type Session struct {
	id int32
	// epoch is the epoch the next incremental fetch must carry.
	epoch int32
	// replica is the fetching replica's broker id, -1 for a consumer: a
	// session belongs to one kind of client.
	replica  int32
	parts    map[coord.TopicPartition]*sessionPartition
	order    []coord.TopicPartition // the partitions in the order added
	lastUsed time.Time
	// inUse is set while a fetch of the session is being answered; a
	// second fetch of it meanwhile is refused (its epoch would be wrong).
	inUse bool
	// refreshed is when a fetch last served every partition.
	refreshed time.Time
	// again are the partitions the next fetch serves whether or not they
	// change: the last answer carried their records or an error, left
	// records unread, or found no replica here.
	again map[coord.TopicPartition]struct{}
	// closed is set when the session leaves the cache; it then watches
	// no partition.
	closed bool

	// wake is signalled when a watched partition changes; changed (under
	// changedMu) holds the partitions changed since the last drain.
	wake      chan struct{}
	changedMu sync.Mutex
	changed   map[coord.TopicPartition]struct{}
}

// sessionPartition is what the session holds of one partition: the
// client's position, and what the last response told it.
type sessionPartition struct {
	fetchOffset, logStartOffset int64
	maxBytes, leaderEpoch       int32
	// lastFetchedEpoch is the epoch of the batch before fetchOffset the
	// client named (Fetch v12; -1: none), which a leader checks the
	// position against whenever it records it.
	lastFetchedEpoch int32
	// sent is false until a response has carried the partition; hw,
	// lso and logStart are what the last one that did said.
	sent              bool
	hw, lso, logStart int64
	// p is the replica the session watches (nil: this broker has none).
	p *replica.Partition
}

// PartitionChanged records that tp changed and wakes a fetch of the
// session waiting for it. It is called with the partition's mu held.
func (sess *Session) PartitionChanged(tp coord.TopicPartition) {
	sess.changedMu.Lock()
	if sess.changed == nil {
		sess.changed = map[coord.TopicPartition]struct{}{}
	}
	sess.changed[tp] = struct{}{}
	sess.changedMu.Unlock()
	select {
	case sess.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled when a partition the session watches changes: a
// fetch of the session waits on it.
func (sess *Session) Wake() <-chan struct{} { return sess.wake }

// drainChanged returns and forgets the partitions changed since the last
// drain.
func (sess *Session) drainChanged() map[coord.TopicPartition]struct{} {
	sess.changedMu.Lock()
	defer sess.changedMu.Unlock()
	ch := sess.changed
	sess.changed = nil
	return ch
}

// Cache is a broker's session cache. It is safe for concurrent
// use.
type Cache struct {
	mu       sync.Mutex
	sessions map[int32]*Session
	slots    int
	// refreshEvery is how often a session's fetch serves all its
	// partitions.
	refreshEvery time.Duration
	// resolve returns the replica of a partition this broker holds (nil:
	// none); a nil resolve holds none.
	resolve func(coord.TopicPartition) *replica.Partition
	// evictions counts sessions evicted for new ones, created the
	// sessions created (full fetches of epoch 0); incremental counts
	// the incremental fetches served, named the partitions they named,
	// served the partitions they served, refreshes those that recorded
	// the follower's idle positions as well, and recorded those
	// positions.
	evictions, created, incremental, named, served, refreshes, recorded uint64
}

func NewCache(slots int, refreshEvery time.Duration, resolve func(coord.TopicPartition) *replica.Partition) *Cache {
	return &Cache{sessions: map[int32]*Session{}, slots: slots, refreshEvery: refreshEvery, resolve: resolve}
}

// Request is how a fetch request relates to sessions, and what to
// answer it with when it cannot be served.
type Request struct {
	// Session is the Session the request runs in (nil: sessionless).
	Session *Session
	// full is set when the response carries every partition.
	full bool
	// Subset is set when the request was rewritten to the partitions of
	// the session that changed (serving), with the index of its topics
	// (topicAt); more join while it waits (extend).
	Subset  bool
	serving map[coord.TopicPartition]struct{}
	topicAt map[string]int
	// ErrorCode is a top-level error (FETCH_SESSION_ID_NOT_FOUND,
	// INVALID_FETCH_SESSION_EPOCH) to answer at once.
	ErrorCode int16
	// Idle are the positions a follower's refresh records without
	// serving them (see the top of this file).
	Idle []replica.IdlePosition
}

// Begin resolves r's session as KIP-227 says (session id, epoch) and,
// for an incremental fetch, rewrites r in place to name the partitions
// of the session to serve at their cached positions, with the request's
// changes and forgotten partitions applied: every partition when the
// session is due a refresh, else those changed (a subset). The caller
// answers r, then trims the response with end. A session is claimed
// until end.
func (s *Cache) Begin(r *kmsg.FetchRequest, now time.Time) Request {
	if r.Version < 7 {
		return Request{full: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.SessionEpoch == -1:
		// A full fetch outside any session; a session id closes it.
		s.closeLocked(r.SessionID)
		return Request{full: true}
	case r.SessionEpoch == 0:
		// A new session, closing the one named.
		s.closeLocked(r.SessionID)
		sess := s.newLocked(r, now)
		return Request{Session: sess, full: true}
	}
	sess, ok := s.sessions[r.SessionID]
	if !ok || sess.replica != r.ReplicaID {
		return Request{ErrorCode: kerr.FetchSessionIDNotFound.Code}
	}
	if sess.inUse || r.SessionEpoch != sess.epoch {
		return Request{ErrorCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	sess.inUse = true
	sess.lastUsed = now
	s.incremental++
	// The wake-up is drained before the changed partitions: a change
	// after the drain signals again.
	select {
	case <-sess.wake:
	default:
	}
	changed := sess.drainChanged()
	forgot := false
	for _, ft := range r.ForgottenTopics {
		for _, p := range ft.Partitions {
			tp := coord.TopicPartition{Topic: ft.Topic, Partition: p}
			if sp, ok := sess.parts[tp]; ok {
				sess.watch(sp, nil)
				delete(sess.parts, tp)
				delete(sess.again, tp)
				forgot = true
			}
		}
	}
	if forgot {
		sess.order = slices.DeleteFunc(sess.order, func(tp coord.TopicPartition) bool { return sess.parts[tp] == nil })
	}
	named := s.add(sess, r)
	s.named += uint64(len(named))

	sr := Request{Session: sess, Subset: true, serving: map[coord.TopicPartition]struct{}{}, topicAt: map[string]int{}}
	r.Topics = nil
	serve := func(tp coord.TopicPartition) {
		sp := sess.parts[tp]
		if sp == nil {
			return // forgotten, or changed before it joined
		}
		if _, ok := sr.serving[tp]; ok {
			return
		}
		sr.serving[tp] = struct{}{}
		sess.watch(sp, s.resolveTP(tp))
		sr.name(r, tp, sp)
	}
	for _, tp := range named {
		serve(tp)
	}
	for tp := range sess.again {
		serve(tp)
	}
	for tp := range changed {
		serve(tp)
	}
	if now.Sub(sess.refreshed) >= s.refreshEvery {
		sess.refreshed = now
		s.refreshes++
		// The others changed nothing since they were answered. A
		// partition without a replica here is looked up again (it may
		// have one now), and served when it does, as is one not
		// answered yet; a follower's position in the others is recorded.
		for _, tp := range sess.order {
			if _, ok := sr.serving[tp]; ok {
				continue
			}
			sp := sess.parts[tp]
			if sp.p == nil {
				sess.watch(sp, s.resolveTP(tp))
			}
			switch {
			case sp.p == nil:
			case !sp.sent:
				serve(tp)
			case r.ReplicaID >= 0:
				sr.Idle = append(sr.Idle, replica.IdlePosition{Partition: sp.p, FetchOffset: sp.fetchOffset, LogStart: sp.logStartOffset,
					LastFetchedEpoch: sp.lastFetchedEpoch})
			}
		}
		s.recorded += uint64(len(sr.Idle))
	}
	s.served += uint64(len(sr.serving))
	return sr
}

// Extend adds to r, a subset fetch of sr's session waiting for records,
// the session's partitions that changed since it began or was last
// extended. It reports whether it added any.
func (s *Cache) Extend(sr Request, r *kmsg.FetchRequest) bool {
	sess := sr.Session
	changed := sess.drainChanged()
	if len(changed) == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	added := 0
	for tp := range changed {
		sp := sess.parts[tp]
		if _, ok := sr.serving[tp]; ok || sp == nil {
			continue
		}
		sr.serving[tp] = struct{}{}
		sess.watch(sp, s.resolveTP(tp))
		sr.name(r, tp, sp)
		added++
	}
	s.served += uint64(added)
	return added > 0
}

// name adds tp to r at the position sp holds, under its topic.
func (sr *Request) name(r *kmsg.FetchRequest, tp coord.TopicPartition, sp *sessionPartition) {
	i, ok := sr.topicAt[tp.Topic]
	if !ok {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = tp.Topic
		r.Topics = append(r.Topics, t)
		i = len(r.Topics) - 1
		sr.topicAt[tp.Topic] = i
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.FetchOffset = sp.fetchOffset
	rp.LogStartOffset = sp.logStartOffset
	rp.PartitionMaxBytes = sp.maxBytes
	rp.CurrentLeaderEpoch = sp.leaderEpoch
	rp.LastFetchedEpoch = sp.lastFetchedEpoch
	r.Topics[i].Partitions = append(r.Topics[i].Partitions, rp)
}

// resolveTP returns this broker's replica of tp, nil if none.
func (s *Cache) resolveTP(tp coord.TopicPartition) *replica.Partition {
	if s.resolve == nil {
		return nil
	}
	return s.resolve(tp)
}

// watch makes sess watch p (nil: nothing) for sp in place of what it
// watched; a closed session watches nothing. The caller holds s.mu.
func (sess *Session) watch(sp *sessionPartition, p *replica.Partition) {
	if sess.closed {
		p = nil
	}
	if sp.p == p {
		return
	}
	if sp.p != nil {
		sp.p.UnwatchChanges(sess)
	}
	sp.p = p
	if p != nil {
		p.WatchChanges(sess)
	}
}

// add records the positions r names in sess, adding new partitions at the
// end of its order and watching them, and returns the partitions named.
// The caller holds s.mu.
func (s *Cache) add(sess *Session, r *kmsg.FetchRequest) []coord.TopicPartition {
	var named []coord.TopicPartition
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := coord.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			sp, ok := sess.parts[tp]
			if !ok {
				sp = &sessionPartition{}
				sess.parts[tp] = sp
				sess.order = append(sess.order, tp)
				sess.watch(sp, s.resolveTP(tp))
			}
			sp.fetchOffset, sp.logStartOffset = rp.FetchOffset, rp.LogStartOffset
			sp.maxBytes, sp.leaderEpoch = rp.PartitionMaxBytes, rp.CurrentLeaderEpoch
			sp.lastFetchedEpoch = -1
			if r.Version >= 12 {
				sp.lastFetchedEpoch = rp.LastFetchedEpoch
			}
			named = append(named, tp)
		}
	}
	return named
}

// newLocked creates a session for r's partitions, evicting the least
// recently used one (not in use) when the cache is full; it returns nil
// (sessionless) when every slot is in use.
func (s *Cache) newLocked(r *kmsg.FetchRequest, now time.Time) *Session {
	if s.slots <= 0 {
		return nil
	}
	if len(s.sessions) >= s.slots {
		var oldest *Session
		for _, sess := range s.sessions {
			if !sess.inUse && (oldest == nil || sess.lastUsed.Before(oldest.lastUsed)) {
				oldest = sess
			}
		}
		if oldest == nil {
			return nil
		}
		s.closeLocked(oldest.id)
		s.evictions++
	}
	id := rand.Int32N(1<<31-1) + 1
	for s.sessions[id] != nil {
		id = rand.Int32N(1<<31-1) + 1
	}
	sess := &Session{id: id, epoch: 0, replica: r.ReplicaID, parts: map[coord.TopicPartition]*sessionPartition{},
		lastUsed: now, refreshed: now, inUse: true, again: map[coord.TopicPartition]struct{}{}, wake: make(chan struct{}, 1)}
	s.add(sess, r)
	s.sessions[id] = sess
	s.created++
	return sess
}

// closeLocked forgets session id (0: none), which stops watching its
// partitions.
func (s *Cache) closeLocked(id int32) {
	sess := s.sessions[id]
	if id == 0 || sess == nil {
		return
	}
	delete(s.sessions, id)
	sess.closed = true
	for _, sp := range sess.parts {
		sess.watch(sp, nil)
	}
}

// End finishes a fetch of sr's session: an incremental response keeps
// only the partitions with records, an error or a preferred read
// replica, or whose high watermark, last stable offset or log start
// offset changed since the session last told them (Kafka's
// CachedPartition.maybeUpdateResponseData); the session records what
// resp tells and which partitions the next fetch serves again (those
// with records, an error or a preferred read replica, and short: those
// left with records unread), moves to the next epoch and is released.
// resp carries the session id.
func (s *Cache) End(sr Request, resp *kmsg.FetchResponse, short map[coord.TopicPartition]struct{}) {
	sess := sr.Session
	if sess == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp.SessionID = sess.id
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		parts := t.Partitions[:0]
		for _, sp := range t.Partitions {
			tp := coord.TopicPartition{Topic: t.Topic, Partition: sp.Partition}
			cached := sess.parts[tp]
			// A preferred read replica is always told (KIP-392), as
			// records, errors and a diverging epoch are.
			told := len(sp.RecordBatches) > 0 || sp.ErrorCode != 0 || sp.PreferredReadReplica >= 0 ||
				sp.DivergingEpoch.EndOffset >= 0
			keep := sr.full || cached == nil || told ||
				!cached.sent || cached.hw != sp.HighWatermark || cached.lso != sp.LastStableOffset || cached.logStart != sp.LogStartOffset
			if cached != nil {
				cached.sent, cached.hw, cached.lso, cached.logStart = true, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset
				_, unread := short[tp]
				if told || unread || cached.p == nil {
					sess.again[tp] = struct{}{}
				} else {
					delete(sess.again, tp)
				}
			}
			if keep {
				parts = append(parts, sp)
			}
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
	sess.epoch++
	if sess.epoch < 0 {
		sess.epoch = 1 // wrapped: Kafka's nextEpoch
	}
	sess.inUse = false
	sess.lastUsed = time.Now()
}

// Counters are the sessions a Cache created since it started (Created:
// each a full fetch naming every partition of its session) and the
// incremental fetches it served: how many (Incremental), the partitions
// they named (Named) and served (Served), how many were refreshes that
// recorded a follower's idle positions too (Refreshes), and how many
// positions those recorded (Recorded).
type Counters struct {
	Created, Incremental, Named, Served, Refreshes, Recorded uint64
}

// Counters returns the cache's counters.
func (s *Cache) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Counters{Created: s.created, Incremental: s.incremental, Named: s.named, Served: s.served, Refreshes: s.refreshes, Recorded: s.recorded}
}

// Stats returns the number of sessions and of partitions they cache, and
// how many sessions were evicted for new ones.
func (s *Cache) Stats() (sessions, partitions int, evictions uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		partitions += len(sess.parts)
	}
	return len(s.sessions), partitions, s.evictions
}
