package group

import (
	"reflect"
	"testing"
)

func TestTxnOffsetsCommitAbort(t *testing.T) {
	k0 := OffsetKey{Group: "g", Topic: "t", Partition: 0}
	k1 := OffsetKey{Group: "g", Topic: "t", Partition: 1}
	other := OffsetKey{Group: "h", Topic: "t", Partition: 0}
	off := func(o int64) Offset { return Offset{Offset: o, LeaderEpoch: -1, ExpireTimestamp: -1} }

	tx := NewTxnOffsets()
	tx.Add(7, k0, off(10), 100)
	tx.Add(7, k1, off(20), 101)
	tx.Add(7, k0, off(11), 102) // a later commit of the same key replaces it
	tx.Add(8, k0, off(30), 103)
	tx.Add(8, other, off(40), 104)

	if !tx.Pending(k0) || !tx.Pending(k1) || !tx.Pending(other) {
		t.Fatalf("Pending after Add = %v %v %v, want all true", tx.Pending(k0), tx.Pending(k1), tx.Pending(other))
	}
	if got := tx.Producers(); !reflect.DeepEqual(got, []int64{7, 8}) {
		t.Errorf("Producers = %v, want [7 8]", got)
	}

	got := tx.Complete(7, true)
	want := []TxnCommitted{
		{Key: k1, Value: TxnOffset{Offset: off(20), LogOffset: 101}},
		{Key: k0, Value: TxnOffset{Offset: off(11), LogOffset: 102}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Complete(7, commit) = %+v, want %+v", got, want)
	}
	// Producer 8 still holds k0 open; k1 had only producer 7.
	if !tx.Pending(k0) || tx.Pending(k1) {
		t.Errorf("after 7 committed: Pending(k0) = %v (want true, 8 is open), Pending(k1) = %v (want false)", tx.Pending(k0), tx.Pending(k1))
	}
	if !tx.GroupPending("h") || !tx.GroupPending("g") || tx.GroupPending("x") {
		t.Errorf("GroupPending g/h/x = %v/%v/%v, want true/true/false", tx.GroupPending("g"), tx.GroupPending("h"), tx.GroupPending("x"))
	}

	if got := tx.Complete(8, false); got != nil {
		t.Errorf("Complete(8, abort) = %+v, want nil: an abort applies nothing", got)
	}
	if tx.Pending(k0) || tx.Pending(other) || tx.GroupPending("g") || len(tx.Producers()) != 0 {
		t.Errorf("after every transaction ended something is still pending: %v", tx.Producers())
	}
	// A retried marker, or one of a producer that committed no offsets here.
	if got := tx.Complete(8, true); got != nil {
		t.Errorf("Complete of a producer with nothing pending = %+v, want nil", got)
	}
}
