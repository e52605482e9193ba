package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	s := newFetchSessions(2, time.Hour, nil)
	now := time.Now()
	full := fetchOf(0, 0, []int32{0, 1, 2})
	sr := s.begin(full, now)
	if sr.session == nil || !sr.full || sr.errorCode != 0 {
		t.Fatalf("full fetch at epoch 0: got %+v, want a new session answered whole", sr)
	}
	resp := answerOf(full, 5)
	s.end(sr, resp, nil)
	id := resp.SessionID
	if id == 0 || len(partitionsOf(resp)) != 3 {
		t.Fatalf("full answer: session %d partitions %v, want a session and all 3", id, partitionsOf(resp))
	}

	// Epoch 1 names nothing: served over all 3, answered with nothing new.
	inc := fetchOf(id, 1, nil)
	sr = s.begin(inc, now)
	if sr.errorCode != 0 || len(inc.Topics) != 1 || len(inc.Topics[0].Partitions) != 3 {
		t.Fatalf("incremental fetch: %+v, rewritten to %v; want the 3 session partitions", sr, inc.Topics)
	}
	resp = answerOf(inc, 5, 1)
	s.end(sr, resp, nil)
	if got := partitionsOf(resp); len(got) != 1 || got[0] != 1 {
		t.Fatalf("incremental answer: partitions %v, want only 1 (records)", got)
	}
	// Epoch 2: partition 2 forgotten, 3 added; the high watermark moved.
	inc = fetchOf(id, 2, []int32{3}, 2)
	sr = s.begin(inc, now)
	resp = answerOf(inc, 6)
	s.end(sr, resp, nil)
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
		if sr := s.begin(bad.r, now); sr.errorCode != bad.want {
			t.Errorf("%s: got error %d, want %d", bad.name, sr.errorCode, bad.want)
		}
	}
	// Two more sessions: the cache of 2 evicts the least recently used.
	for i := range 2 {
		r := fetchOf(0, 0, []int32{0})
		sr := s.begin(r, now.Add(time.Duration(i+1)*time.Second))
		s.end(sr, answerOf(r, 0), nil)
	}
	if sr := s.begin(fetchOf(id, 3, nil), now); sr.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("the evicted session: got error %d, want FETCH_SESSION_ID_NOT_FOUND", sr.errorCode)
	}
	if n, _, ev := s.stats(); n != 2 || ev != 1 {
		t.Errorf("cache: %d sessions, %d evictions; want 2 and 1", n, ev)
	}
	// Epoch -1 with an id closes it and fetches without a session.
	r := fetchOf(0, 0, []int32{0})
	sr = s.begin(r, now.Add(time.Hour))
	resp = answerOf(r, 0)
	s.end(sr, resp, nil)
	if sr := s.begin(fetchOf(resp.SessionID, -1, []int32{0}), now); sr.session != nil || !sr.full {
		t.Errorf("epoch -1: got %+v, want a sessionless full fetch", sr)
	}
	if sr := s.begin(fetchOf(resp.SessionID, 1, nil), now); sr.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("the session closed by epoch -1: got error %d, want FETCH_SESSION_ID_NOT_FOUND", sr.errorCode)
	}
}

// TestFollowersFetchIncrementally runs two brokers with a 100-partition
// topic of replication factor 2 and a producer writing to one partition:
// the followers' fetches run in sessions, and name on average only the
// partitions that move, not the 50 each follows, and the leaders serve
// about as few; every partition stays in sync, the idle ones included.
func TestFollowersFetchIncrementally(t *testing.T) {
	brokers := startRaftCluster(t, 2)
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(newClient(t, brokers[0]))
	if resp, err := adm.CreateTopic(ctx, 100, 2, nil, "wide"); err != nil || resp.Err != nil {
		t.Fatalf("create topic wide: %v %v", err, resp.Err)
	}
	inSync := func() bool {
		for _, b := range brokers {
			_, _, parts := metadataOf(t, b, "wide")
			if len(parts) != 100 {
				return false
			}
			for _, p := range parts {
				if len(p.isr) != 2 {
					return false
				}
			}
		}
		return true
	}
	waitFor(t, ctx, "every partition of wide in sync", inSync)
	type counts struct{ incremental, named, refreshes, served, recorded uint64 }
	read := func() counts {
		var c counts
		for _, b := range brokers {
			b.fetchSessions.mu.Lock()
			c.incremental += b.fetchSessions.incremental
			c.named += b.fetchSessions.named
			c.refreshes += b.fetchSessions.refreshes
			c.served += b.fetchSessions.served
			c.recorded += b.fetchSessions.recorded
			b.fetchSessions.mu.Unlock()
		}
		return c
	}
	// Two rounds of every session first: the partitions the followers
	// fetched before their leader had them are served until it does.
	settleFrom := read().incremental
	waitFor(t, ctx, "4 incremental fetches", func() bool { return read().incremental >= settleFrom+4 })
	before := read()
	cl := newClient(t, brokers[0], kgo.DefaultProduceTopic("wide"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 7, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	after := read()
	fetches, named := after.incremental-before.incremental, after.named-before.named
	if fetches < 50 {
		t.Fatalf("%d incremental fetches during 50 acks=all produces, want at least one each", fetches)
	}
	if per := float64(named) / float64(fetches); per > 2 {
		t.Fatalf("incremental fetches named %.1f partitions on average, want at most 2 (only the one written moves)", per)
	}
	// The leader's work follows the changes as well: a fetch, a periodic
	// refresh included, serves about the partition written, not the 50.
	served := after.served - before.served
	if per := float64(served) / float64(fetches); per > 2 {
		t.Fatalf("%d incremental fetches served %d partitions, want at most 2 each", fetches, served)
	}
	t.Logf("%d incremental fetches named %d partitions (%.2f each) of the 50 each follower follows, and served %.2f each",
		fetches, named, float64(named)/float64(fetches), float64(served)/float64(fetches))
	// Idle: 20 more rounds of long polls, at least twice the lag limit.
	// The refreshes record the followers' positions in the idle
	// partitions without serving them, and those stay in the ISR.
	idleFrom := read()
	waitFor(t, ctx, "20 idle incremental fetches", func() bool { return read().incremental >= idleFrom.incremental+20 })
	idle := read()
	if !inSync() {
		t.Fatal("a partition left the ISR while its follower fetched incrementally")
	}
	if idle.refreshes == idleFrom.refreshes || idle.recorded == idleFrom.recorded {
		t.Fatalf("idle: %d refreshes recorded %d positions, want some of both", idle.refreshes-idleFrom.refreshes, idle.recorded-idleFrom.recorded)
	}
	if per := float64(idle.served-idleFrom.served) / float64(idle.incremental-idleFrom.incremental); per > 1 {
		t.Fatalf("idle fetches served %.1f partitions each, want at most 1", per)
	}
}
