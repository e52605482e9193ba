package replica

import (
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// TestPreferredReadReplica decides, as Kafka's RackAwareReplicaSelector
// behind findPreferredReadReplica, which follower a consumer of a rack
// is pointed at: one of its rack that is live, in sync and holds the
// fetch offset, the most caught up first; the leader (coord.NoBroker)
// when the consumer names no rack, shares the leader's, or has no such
// follower.
func TestPreferredReadReplica(t *testing.T) {
	at := time.Unix(1000, 0)
	// inSync is a live, in-sync follower holding offsets 0..100.
	inSync := func(id coord.BrokerID, rack string) ReadReplica {
		return ReadReplica{ID: id, Rack: rack, Live: true, InSync: true, LogStart: 0, LogEnd: 100, LastCaughtUp: at}
	}
	with := func(r ReadReplica, edit func(*ReadReplica)) ReadReplica { edit(&r); return r }
	cases := []struct {
		name        string
		clientRack  string
		fetchOffset int64
		leaderRack  string
		followers   []ReadReplica
		want        coord.BrokerID
	}{
		{"follower in the client's rack", "az2", 50, "az1",
			[]ReadReplica{inSync(2, "az2"), inSync(3, "az3")}, 2},
		{"client names no rack", "", 50, "az1",
			[]ReadReplica{inSync(2, "az2")}, coord.NoBroker},
		{"leader in the client's rack", "az1", 50, "az1",
			[]ReadReplica{inSync(2, "az1")}, coord.NoBroker},
		{"no replica in the client's rack", "az4", 50, "az1",
			[]ReadReplica{inSync(2, "az2"), inSync(3, "az3")}, coord.NoBroker},
		{"follower out of the ISR", "az2", 50, "az1",
			[]ReadReplica{with(inSync(2, "az2"), func(r *ReadReplica) { r.InSync = false })}, coord.NoBroker},
		{"follower not live", "az2", 50, "az1",
			[]ReadReplica{with(inSync(2, "az2"), func(r *ReadReplica) { r.Live = false })}, coord.NoBroker},
		{"follower's log ends before the fetch offset", "az2", 101, "az1",
			[]ReadReplica{inSync(2, "az2")}, coord.NoBroker},
		{"fetch offset at the follower's log end", "az2", 100, "az1",
			[]ReadReplica{inSync(2, "az2")}, 2},
		{"follower's log starts after the fetch offset", "az2", 50, "az1",
			[]ReadReplica{with(inSync(2, "az2"), func(r *ReadReplica) { r.LogStart = 60 })}, coord.NoBroker},
		{"follower that has not reported its log start", "az2", 50, "az1",
			[]ReadReplica{with(inSync(2, "az2"), func(r *ReadReplica) { r.LogStart = -1 })}, 2},
		{"follower that has not fetched", "az2", 0, "az1",
			[]ReadReplica{with(inSync(2, "az2"), func(r *ReadReplica) { r.LogEnd = -1 })}, coord.NoBroker},
		{"the longest log of the rack", "az2", 50, "az1",
			[]ReadReplica{with(inSync(2, "az2"), func(r *ReadReplica) { r.LogEnd = 90 }), inSync(4, "az2")}, 4},
		{"then the latest catch-up", "az2", 50, "az1",
			[]ReadReplica{inSync(2, "az2"), with(inSync(4, "az2"), func(r *ReadReplica) { r.LastCaughtUp = at.Add(-time.Second) })}, 2},
		{"then the highest id", "az2", 50, "az1",
			[]ReadReplica{inSync(4, "az2"), inSync(2, "az2")}, 4},
		{"an unfit follower of the rack leaves the fit one", "az2", 50, "az1",
			[]ReadReplica{with(inSync(4, "az2"), func(r *ReadReplica) { r.Live = false; r.LogEnd = 200 }), inSync(2, "az2")}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PreferredReadReplica(c.clientRack, c.fetchOffset, c.leaderRack, c.followers)
			if got != c.want {
				t.Fatalf("got preferred read replica %d, want %d", got, c.want)
			}
		})
	}
}
