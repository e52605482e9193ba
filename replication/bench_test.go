package replication

import (
	"testing"
	"time"
)

// BenchmarkAcksAllRound measures one acks=all produce on a leader with
// two followers: the append, the wait, both followers' fetches that move
// the HW past it, and the Ready that completes it.
func BenchmarkAcksAllRound(b *testing.B) {
	p, err := New(DefaultConfig(), 1)
	if err != nil {
		b.Fatal(err)
	}
	st := State{Leader: 1, LeaderEpoch: 1, Replicas: []ReplicaID{1, 2, 3}, ISR: []ReplicaID{1, 2, 3}}
	if err := p.BecomeLeader(st, 0, 0, t0); err != nil {
		b.Fatal(err)
	}
	p.Ready()
	now := t0
	b.ReportAllocs()
	for i := range b.N {
		now = now.Add(time.Millisecond)
		end := int64(i + 1)
		if err := p.Appended(end, now); err != nil {
			b.Fatal(err)
		}
		if err := p.Await(AckID(i), end-1, now.Add(time.Second), now); err != nil {
			b.Fatal(err)
		}
		if err := p.FollowerFetch(2, end, -1, now); err != nil {
			b.Fatal(err)
		}
		if err := p.FollowerFetch(3, end, -1, now); err != nil {
			b.Fatal(err)
		}
		if rd := p.Ready(); len(rd.Acks) != 1 || rd.Acks[0].Err != nil {
			b.Fatalf("round %d: acks %+v, want one success", i, rd.Acks)
		}
	}
}
