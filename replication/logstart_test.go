package replication

import (
	"errors"
	"testing"
	"time"
)

// TestDeleteRecordsOffset checks where a DeleteRecords moves the log
// start: -1 is the high watermark, an offset up to the high watermark is
// taken as is, one above it or another negative one is
// OFFSET_OUT_OF_RANGE, and a follower refuses with NOT_LEADER.
func TestDeleteRecordsOffset(t *testing.T) {
	p := newLeader(t, DefaultConfig(), []ReplicaID{1, 2, 3}, 20, 12)
	for _, tc := range []struct {
		offset, want int64
		err          error
	}{
		{DeleteRecordsHighWatermark, 12, nil},
		{0, 0, nil},
		{7, 7, nil},
		{12, 12, nil},
		{13, 0, ErrOffsetOutOfRange},
		{20, 0, ErrOffsetOutOfRange},
		{-2, 0, ErrOffsetOutOfRange},
	} {
		got, err := p.DeleteRecordsOffset(tc.offset)
		if !errors.Is(err, tc.err) || (err == nil && got != tc.want) {
			t.Errorf("DeleteRecordsOffset(%d): got %d, %v, want %d, %v", tc.offset, got, err, tc.want, tc.err)
		}
	}
	f := newFollower(t, 20, 12)
	if _, err := f.DeleteRecordsOffset(5); !errors.Is(err, ErrNotLeader) {
		t.Errorf("DeleteRecordsOffset on a follower: got %v, want ErrNotLeader", err)
	}
}

// TestDeleteRecordsWaitsForTheISR follows one DeleteRecords on a leader
// of three: the wait completes only when every ISR member's fetch
// reports a log start at the new one (the low watermark), a follower
// outside the ISR does not hold it back, a second wait times out at its
// deadline, and losing the leadership fails the rest with NOT_LEADER.
func TestDeleteRecordsWaitsForTheISR(t *testing.T) {
	p := newLeader(t, DefaultConfig(), []ReplicaID{1, 2, 3}, 20, 20)
	for _, id := range []ReplicaID{2, 3} {
		if err := p.FollowerFetch(id, 20, 0, t0); err != nil {
			t.Fatal(err)
		}
	}
	p.Ready()
	if low := p.LowWatermark(); low != 0 {
		t.Fatalf("low watermark before the delete: got %d, want 0", low)
	}

	offset, err := p.DeleteRecordsOffset(15)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLogStart(offset, t0)
	if err := p.AwaitLowWatermark(1, offset, t0.Add(time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	if rd := p.Ready(); len(rd.Deletes) != 0 {
		t.Fatalf("deletes before the followers moved: got %+v, want none", rd.Deletes)
	}
	// Replica 2 moves; replica 3 has not yet: the low watermark is 3's.
	if err := p.FollowerFetch(2, 20, 15, t0); err != nil {
		t.Fatal(err)
	}
	if rd := p.Ready(); len(rd.Deletes) != 0 || p.LowWatermark() != 0 {
		t.Fatalf("with replica 3 at log start 0: got deletes %+v, low watermark %d, want none and 0", rd.Deletes, p.LowWatermark())
	}
	// A fetch without a log start (an old fetch version) keeps the known one.
	if err := p.FollowerFetch(2, 20, -1, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.FollowerLogStart(2); got != 15 {
		t.Fatalf("replica 2's log start after a fetch without one: got %d, want 15", got)
	}
	if err := p.FollowerFetch(3, 20, 15, t0); err != nil {
		t.Fatal(err)
	}
	rd := p.Ready()
	if len(rd.Deletes) != 1 || rd.Deletes[0] != (DeleteResult{ID: 1, LowWatermark: 15}) {
		t.Fatalf("deletes once the ISR moved: got %+v, want [{1 15 <nil>}]", rd.Deletes)
	}

	// The controller commits ISR [1 2]: replica 3 no longer counts.
	if err := p.AlterPartitionCommitted(5, 8, []ReplicaID{1, 2}, t0); err != nil {
		t.Fatal(err)
	}
	p.Ready()
	now := t0.Add(time.Minute)
	p.SetLogStart(18, now)
	if err := p.AwaitLowWatermark(2, 18, now.Add(time.Second), now); err != nil {
		t.Fatal(err)
	}
	if err := p.FollowerFetch(2, 20, 18, now); err != nil {
		t.Fatal(err)
	}
	rd = p.Ready()
	if len(rd.Deletes) != 1 || rd.Deletes[0] != (DeleteResult{ID: 2, LowWatermark: 18}) {
		t.Fatalf("deletes with ISR [1 2]: got %+v, want [{2 18 <nil>}]", rd.Deletes)
	}

	// A wait the followers never answer times out at its deadline.
	p.SetLogStart(25, now)
	if err := p.AwaitLowWatermark(3, 25, now.Add(time.Second), now); err != nil {
		t.Fatal(err)
	}
	if d, ok := p.NextDeadline(); !ok || !d.Equal(now.Add(time.Second)) {
		t.Fatalf("NextDeadline: got %v, %t, want %v", d, ok, now.Add(time.Second))
	}
	p.Tick(now.Add(time.Second))
	rd = p.Ready()
	if len(rd.Deletes) != 1 || rd.Deletes[0].ID != 3 || !errors.Is(rd.Deletes[0].Err, ErrRequestTimedOut) || rd.Deletes[0].LowWatermark != 18 {
		t.Fatalf("deletes at the deadline: got %+v, want id 3 timed out at low watermark 18", rd.Deletes)
	}

	// Losing the leadership fails what still waits.
	if err := p.AwaitLowWatermark(4, 25, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	st := State{Leader: 2, LeaderEpoch: 6, PartitionEpoch: 9, Replicas: []ReplicaID{1, 2, 3}, ISR: []ReplicaID{1, 2}}
	if _, err := p.BecomeFollower(st, 20, 20, nil); err != nil {
		t.Fatal(err)
	}
	rd = p.Ready()
	if len(rd.Deletes) != 1 || rd.Deletes[0].ID != 4 || !errors.Is(rd.Deletes[0].Err, ErrNotLeader) {
		t.Fatalf("deletes after losing the leadership: got %+v, want id 4 failed with ErrNotLeader", rd.Deletes)
	}
	if err := p.AwaitLowWatermark(5, 25, now.Add(time.Hour), now); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AwaitLowWatermark on a follower: got %v, want ErrNotLeader", err)
	}
}

// TestLeaderLogStart checks how far a follower follows its leader's log
// start: up to its own high watermark, never down.
func TestLeaderLogStart(t *testing.T) {
	f := newFollower(t, 20, 12)
	f.SetLogStart(5, t0)
	for _, tc := range []struct {
		leader, want int64
		advance      bool
	}{
		{10, 10, true},
		{12, 12, true},
		{18, 12, true}, // Above the follower's HW: up to the HW.
		{5, 5, false},
		{3, 5, false},
	} {
		got, advance := f.LeaderLogStart(tc.leader)
		if got != tc.want || advance != tc.advance {
			t.Errorf("LeaderLogStart(%d) at log start 5, HW 12: got %d, %t, want %d, %t", tc.leader, got, advance, tc.want, tc.advance)
		}
	}
	if _, advance := newLeader(t, DefaultConfig(), []ReplicaID{1}, 20, 20).LeaderLogStart(10); advance {
		t.Error("LeaderLogStart on a leader: advanced, want not")
	}
}

// newFollower returns replica 1 following replica 2 at leader epoch 5
// in hw truncation mode, with logEnd records and HW hw.
func newFollower(t *testing.T, logEnd, hw int64) *Partition {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Truncation = TruncateHW
	p, err := New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := State{Leader: 2, LeaderEpoch: 5, PartitionEpoch: 7, Replicas: []ReplicaID{1, 2, 3}, ISR: []ReplicaID{1, 2, 3}}
	tr, err := p.BecomeFollower(st, logEnd, hw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.FollowerFetched(tr.Offset, hw); err != nil {
		t.Fatal(err)
	}
	p.Ready()
	return p
}
