package broker

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// Incremental fetch sessions (KIP-227). A client (a consumer, or a
// follower replicating from this leader) that opens a session with a full
// fetch then sends, at each next epoch, only the partitions whose fetch
// position changed and the ones it no longer wants; the broker fetches
// every partition of the session and answers only those with records, an
// error, or a high watermark or log start offset that changed since the
// session last told it. So a follower holding 10 000 idle partitions on
// this leader sends, and gets back, only the few that move.
//
// A follower's position in the partitions it leaves out is the one the
// session holds, and the leader records it at every fetch as if the
// follower had sent it, so an idle partition's follower stays caught up
// (in the ISR), as Kafka's leader does.

// fetchSessionCacheSlots is how many sessions a broker keeps (Kafka's
// max.incremental.fetch.session.cache.slots default); the least recently
// used one is evicted for a new one.
const fetchSessionCacheSlots = 1000

// fetchSession is one incremental fetch session.
type fetchSession struct {
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
}

// sessionPartition is what the session holds of one partition: the
// client's position, and what the last response told it.
type sessionPartition struct {
	fetchOffset, logStartOffset int64
	maxBytes, leaderEpoch       int32
	// sent is false until a response has carried the partition; hw and
	// logStart are what the last one that did said.
	sent         bool
	hw, logStart int64
}

// fetchSessions is a broker's session cache. It is safe for concurrent
// use.
type fetchSessions struct {
	mu       sync.Mutex
	sessions map[int32]*fetchSession
	slots    int
	// evictions counts sessions evicted for new ones; incremental counts
	// the incremental fetches served and named the partitions they named.
	evictions, incremental, named uint64
}

func newFetchSessions(slots int) *fetchSessions {
	return &fetchSessions{sessions: map[int32]*fetchSession{}, slots: slots}
}

// sessionRequest is how a fetch request relates to sessions, and what to
// answer it with when it cannot be served.
type sessionRequest struct {
	// session is the session the request runs in (nil: sessionless).
	session *fetchSession
	// full is set when the response carries every partition.
	full bool
	// errorCode is a top-level error (FETCH_SESSION_ID_NOT_FOUND,
	// INVALID_FETCH_SESSION_EPOCH) to answer at once.
	errorCode int16
}

// begin resolves r's session as KIP-227 says (session id, epoch) and,
// for an incremental fetch, rewrites r in place to name every partition
// of the session at its cached position, with the request's changes and
// forgotten partitions applied; the caller answers r as a full fetch,
// then trims the response with end. A session is claimed until end.
func (s *fetchSessions) begin(r *kmsg.FetchRequest, now time.Time) sessionRequest {
	if r.Version < 7 {
		return sessionRequest{full: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.SessionEpoch == -1:
		// A full fetch outside any session; a session id closes it.
		s.closeLocked(r.SessionID)
		return sessionRequest{full: true}
	case r.SessionEpoch == 0:
		// A new session, closing the one named.
		s.closeLocked(r.SessionID)
		sess := s.newLocked(r, now)
		return sessionRequest{session: sess, full: true}
	}
	sess, ok := s.sessions[r.SessionID]
	if !ok || sess.replica != r.ReplicaID {
		return sessionRequest{errorCode: kerr.FetchSessionIDNotFound.Code}
	}
	if sess.inUse || r.SessionEpoch != sess.epoch {
		return sessionRequest{errorCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	sess.inUse = true
	sess.lastUsed = now
	s.incremental++
	for _, rt := range r.Topics {
		s.named += uint64(len(rt.Partitions))
	}
	for _, ft := range r.ForgottenTopics {
		for _, p := range ft.Partitions {
			tp := coord.TopicPartition{Topic: ft.Topic, Partition: p}
			delete(sess.parts, tp)
		}
	}
	sess.add(r)
	// Rewrite the request to name the whole session.
	topics := make([]kmsg.FetchRequestTopic, 0, len(r.Topics))
	index := map[string]int{}
	live := sess.order[:0]
	for _, tp := range sess.order {
		sp, ok := sess.parts[tp]
		if !ok {
			continue // forgotten
		}
		live = append(live, tp)
		i, ok := index[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = tp.Topic
			topics = append(topics, t)
			i = len(topics) - 1
			index[tp.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.FetchOffset = sp.fetchOffset
		rp.LogStartOffset = sp.logStartOffset
		rp.PartitionMaxBytes = sp.maxBytes
		rp.CurrentLeaderEpoch = sp.leaderEpoch
		topics[i].Partitions = append(topics[i].Partitions, rp)
	}
	sess.order = live
	r.Topics = topics
	return sessionRequest{session: sess}
}

// add records the positions r names in sess, adding new partitions at the
// end of its order.
func (sess *fetchSession) add(r *kmsg.FetchRequest) {
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := coord.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			sp, ok := sess.parts[tp]
			if !ok {
				sp = &sessionPartition{}
				sess.parts[tp] = sp
				sess.order = append(sess.order, tp)
			}
			sp.fetchOffset, sp.logStartOffset = rp.FetchOffset, rp.LogStartOffset
			sp.maxBytes, sp.leaderEpoch = rp.PartitionMaxBytes, rp.CurrentLeaderEpoch
		}
	}
}

// newLocked creates a session for r's partitions, evicting the least
// recently used one (not in use) when the cache is full; it returns nil
// (sessionless) when every slot is in use.
func (s *fetchSessions) newLocked(r *kmsg.FetchRequest, now time.Time) *fetchSession {
	if s.slots <= 0 {
		return nil
	}
	if len(s.sessions) >= s.slots {
		var oldest *fetchSession
		for _, sess := range s.sessions {
			if !sess.inUse && (oldest == nil || sess.lastUsed.Before(oldest.lastUsed)) {
				oldest = sess
			}
		}
		if oldest == nil {
			return nil
		}
		delete(s.sessions, oldest.id)
		s.evictions++
	}
	id := rand.Int32N(1<<31-1) + 1
	for s.sessions[id] != nil {
		id = rand.Int32N(1<<31-1) + 1
	}
	sess := &fetchSession{id: id, epoch: 0, replica: r.ReplicaID, parts: map[coord.TopicPartition]*sessionPartition{}, lastUsed: now, inUse: true}
	sess.add(r)
	s.sessions[id] = sess
	return sess
}

// closeLocked forgets session id (0: none).
func (s *fetchSessions) closeLocked(id int32) {
	if id != 0 {
		delete(s.sessions, id)
	}
}

// end finishes a fetch of sr's session: an incremental response keeps
// only the partitions with records or an error, or whose high watermark
// or log start offset changed since the session last told them; the
// session records what resp tells, moves to the next epoch and is
// released. resp carries the session id.
func (s *fetchSessions) end(sr sessionRequest, resp *kmsg.FetchResponse) {
	sess := sr.session
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
			cached := sess.parts[coord.TopicPartition{Topic: t.Topic, Partition: sp.Partition}]
			keep := sr.full || cached == nil || len(sp.RecordBatches) > 0 || sp.ErrorCode != 0 ||
				!cached.sent || cached.hw != sp.HighWatermark || cached.logStart != sp.LogStartOffset
			if cached != nil {
				cached.sent, cached.hw, cached.logStart = true, sp.HighWatermark, sp.LogStartOffset
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

// stats returns the number of sessions and of partitions they cache.
func (s *fetchSessions) stats() (sessions, partitions int, evictions uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		partitions += len(sess.parts)
	}
	return len(s.sessions), partitions, s.evictions
}
