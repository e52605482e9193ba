package fetchsession

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// fetchOf is a fetch request of session id at epoch naming partitions of
// topic t at offset 0, forgetting forgotten.
func fetchOf(id, epoch int32, partitions []int32, forgotten ...int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(12)
	r.ReplicaID, r.SessionID, r.SessionEpoch = -1, id, epoch
	if len(partitions) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "t"
		for _, p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			t.Partitions = append(t.Partitions, rp)
		}
		r.Topics = append(r.Topics, t)
	}
	if len(forgotten) > 0 {
		r.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "t", Partitions: forgotten}}
	}
	return r
}

// answerOf answers r with every partition it names, at high watermark hw,
// with records for those in withData.
func answerOf(r *kmsg.FetchRequest, hw int64, withData ...int32) *kmsg.FetchResponse {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.HighWatermark = rp.Partition, hw
			for _, d := range withData {
				if d == rp.Partition {
					sp.RecordBatches = []byte{1}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// openSession opens a session of partitions, answered whole at high
// watermark hw, and returns its id.
func openSession(s *Cache, now time.Time, partitions []int32, hw int64) int32 {
	full := fetchOf(0, 0, partitions)
	sr := s.Begin(full, now)
	resp := answerOf(full, hw)
	s.End(sr, resp, nil)
	return resp.SessionID
}

// incremental runs an incremental fetch of session id at epoch, answered
// at high watermark hw with edit applied to partition p's answer, and
// returns the answer as the session trimmed it and the fetch. The
// request names no partitions, so the order of the answer's partitions
// is the session's, not the test's.
func incremental(s *Cache, now time.Time, id, epoch int32, hw int64, p int32, edit func(*kmsg.FetchResponseTopicPartition)) (*kmsg.FetchResponse, Request) {
	inc := fetchOf(id, epoch, nil)
	sr := s.Begin(inc, now)
	resp := answerOf(inc, hw)
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].Partition == p {
				edit(&resp.Topics[i].Partitions[j])
			}
		}
	}
	s.End(sr, resp, nil)
	return resp, sr
}

func partitionsOf(resp *kmsg.FetchResponse) []int32 {
	var out []int32
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.Partition)
		}
	}
	return out
}

// TestFetchSessions walks KIP-227's rules: a full fetch at epoch 0 opens
// a session and is answered whole; an incremental fetch names only what
// changed but is served over the whole session, and its answer keeps
// only partitions with records, errors or a moved high watermark;
// forgotten partitions leave; a wrong epoch, an unknown id or another
// client's session are refused; epoch -1 closes; a full cache evicts the
// least recently used session.
func TestFetchSessions(t *testing.T) {
	s := NewCache(2, time.Hour, nil)
	now := time.Now()
	full := fetchOf(0, 0, []int32{0, 1, 2})
	sr := s.Begin(full, now)
	if sr.Session == nil || !sr.full || sr.ErrorCode != 0 {
		t.Fatalf("full fetch at epoch 0: got %+v, want a new session answered whole", sr)
	}
	resp := answerOf(full, 5)
	s.End(sr, resp, nil)
	id := resp.SessionID
	if id == 0 || len(partitionsOf(resp)) != 3 {
		t.Fatalf("full answer: session %d partitions %v, want a session and all 3", id, partitionsOf(resp))
	}

	// Epoch 1 names nothing: served over all 3, answered with nothing new.
	inc := fetchOf(id, 1, nil)
	sr = s.Begin(inc, now)
	if sr.ErrorCode != 0 || len(inc.Topics) != 1 || len(inc.Topics[0].Partitions) != 3 {
		t.Fatalf("incremental fetch: %+v, rewritten to %v; want the 3 session partitions", sr, inc.Topics)
	}
	resp = answerOf(inc, 5, 1)
	s.End(sr, resp, nil)
	if got := partitionsOf(resp); len(got) != 1 || got[0] != 1 {
		t.Fatalf("incremental answer: partitions %v, want only 1 (records)", got)
	}
	// Epoch 2: partition 2 forgotten, 3 added; the high watermark moved.
	inc = fetchOf(id, 2, []int32{3}, 2)
	sr = s.Begin(inc, now)
	resp = answerOf(inc, 6)
	s.End(sr, resp, nil)
	if got := partitionsOf(resp); len(got) != 3 {
		t.Fatalf("after forgetting 2 and adding 3, a moved high watermark: got %v, want 0 1 3", got)
	}
	for _, bad := range []struct {
		name string
		r    *kmsg.FetchRequest
		want int16
	}{
		{"an old epoch", fetchOf(id, 2, nil), kerr.InvalidFetchSessionEpoch.Code},
		{"an unknown session", fetchOf(id+1, 1, nil), kerr.FetchSessionIDNotFound.Code},
		{"another client's session", func() *kmsg.FetchRequest { r := fetchOf(id, 3, nil); r.ReplicaID = 2; return r }(), kerr.FetchSessionIDNotFound.Code},
	} {
		if sr := s.Begin(bad.r, now); sr.ErrorCode != bad.want {
			t.Errorf("%s: got error %d, want %d", bad.name, sr.ErrorCode, bad.want)
		}
	}
	// Two more sessions: the cache of 2 evicts the least recently used.
	for i := range 2 {
		r := fetchOf(0, 0, []int32{0})
		sr := s.Begin(r, now.Add(time.Duration(i+1)*time.Second))
		s.End(sr, answerOf(r, 0), nil)
	}
	if sr := s.Begin(fetchOf(id, 3, nil), now); sr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("the evicted session: got error %d, want FETCH_SESSION_ID_NOT_FOUND", sr.ErrorCode)
	}
	if n, _, ev := s.Stats(); n != 2 || ev != 1 {
		t.Errorf("cache: %d sessions, %d evictions; want 2 and 1", n, ev)
	}
	// Epoch -1 with an id closes it and fetches without a session.
	r := fetchOf(0, 0, []int32{0})
	sr = s.Begin(r, now.Add(time.Hour))
	resp = answerOf(r, 0)
	s.End(sr, resp, nil)
	if sr := s.Begin(fetchOf(resp.SessionID, -1, []int32{0}), now); sr.Session != nil || !sr.full {
		t.Errorf("epoch -1: got %+v, want a sessionless full fetch", sr)
	}
	if sr := s.Begin(fetchOf(resp.SessionID, 1, nil), now); sr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("the session closed by epoch -1: got error %d, want FETCH_SESSION_ID_NOT_FOUND", sr.ErrorCode)
	}
}

// TestFetchSessionLastStableOffset: an incremental answer keeps a
// partition whose last stable offset moved though its high watermark
// did not (a transaction's marker replicated while the producers were
// idle), as Kafka's sessions do, so that a read_committed consumer
// learns it may read on.
func TestFetchSessionLastStableOffset(t *testing.T) {
	s := NewCache(2, time.Hour, nil)
	now := time.Now()
	id := openSession(s, now, []int32{0, 1}, 5)
	lso := func(sp *kmsg.FetchResponseTopicPartition) { sp.LastStableOffset = 5 }
	resp, _ := incremental(s, now, id, 1, 5, 1, lso)
	if got := partitionsOf(resp); len(got) != 1 || got[0] != 1 {
		t.Fatalf("incremental answer after partition 1's LSO moved: partitions %v, want only 1", got)
	}
	resp, _ = incremental(s, now, id, 2, 5, 1, lso)
	if got := partitionsOf(resp); len(got) != 0 {
		t.Fatalf("incremental answer with nothing moved: partitions %v, want none", got)
	}
}

// TestFetchSessionPreferredReadReplica: an incremental answer keeps a
// partition whose leader points the consumer at a follower (KIP-392)
// though nothing else about it changed, as Kafka's sessions do, so that
// the consumer learns where to read; the next fetch serves it again.
func TestFetchSessionPreferredReadReplica(t *testing.T) {
	s := NewCache(2, time.Hour, nil)
	now := time.Now()
	id := openSession(s, now, []int32{0, 1}, 5)
	resp, sr := incremental(s, now, id, 1, 5, 1, func(sp *kmsg.FetchResponseTopicPartition) { sp.PreferredReadReplica = 2 })
	if got := partitionsOf(resp); len(got) != 1 || got[0] != 1 {
		t.Fatalf("incremental answer naming partition 1's preferred read replica: partitions %v, want only 1", got)
	}
	if _, again := sr.Session.again[coord.TopicPartition{Topic: "t", Partition: 1}]; !again {
		t.Fatalf("after a preferred read replica: partition 1 not served again, want it served by the next fetch")
	}
}
