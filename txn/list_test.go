package txn

import (
	"errors"
	"reflect"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestParseStates reads Kafka's state names and returns the unknown ones.
func TestParseStates(t *testing.T) {
	states, unknown := ParseStates([]string{"Ongoing", "PrepareCommit", "Running", "CompleteAbort"})
	if !reflect.DeepEqual(states, []State{Ongoing, PrepareCommit, CompleteAbort}) || !reflect.DeepEqual(unknown, []string{"Running"}) {
		t.Errorf("got %v and unknown %v", states, unknown)
	}
}

// TestListFilterMatches lists transactions as Kafka's
// listTransactionStates does: by state, producer id, duration and id
// pattern, and never a Dead one.
func TestListFilterMatches(t *testing.T) {
	open := ongoing(t) // producer 1000, started at 10
	empty := initialized(t)
	dead := initialized(t)
	tr, _ := dead.PrepareDead()
	store(t, dead, tr)
	all := ListFilter{DurationMs: -1}
	for _, c := range []struct {
		name string
		f    ListFilter
		m    *Metadata
		want bool
	}{
		{"no filter", all, open, true},
		{"no filter, a Dead id", all, dead, false},
		{"its state", ListFilter{States: []State{Ongoing}, DurationMs: -1}, open, true},
		{"another state", ListFilter{States: []State{Ongoing}, DurationMs: -1}, empty, false},
		{"its producer id", ListFilter{ProducerIDs: []int64{1000}, DurationMs: -1}, open, true},
		{"another producer id", ListFilter{ProducerIDs: []int64{7}, DurationMs: -1}, open, false},
		{"running longer", ListFilter{DurationMs: 80}, open, true},
		{"running exactly as long", ListFilter{DurationMs: 90}, open, false},
		{"its id matches", ListFilter{DurationMs: -1, Pattern: regexp.MustCompile("^ap")}, open, true},
		{"its id does not match", ListFilter{DurationMs: -1, Pattern: regexp.MustCompile("^x")}, open, false},
	} {
		if got := c.f.Matches(c.m, 100); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMarkerOutcome maps WriteTxnMarkers' per-partition errors as Kafka's
// coordinator does.
func TestMarkerOutcome(t *testing.T) {
	for code, want := range map[int16]MarkerAction{
		0:                                      MarkerWritten,
		kerr.NotLeaderForPartition.Code:        MarkerRetry,
		kerr.UnknownTopicOrPartition.Code:      MarkerRetry,
		kerr.NotEnoughReplicasAfterAppend.Code: MarkerRetry,
		kerr.RequestTimedOut.Code:              MarkerRetry,
		kerr.KafkaStorageError.Code:            MarkerRetry,
		kerr.InvalidProducerEpoch.Code:         MarkerAbandon,
		kerr.TransactionCoordinatorFenced.Code: MarkerAbandon,
		kerr.UnsupportedForMessageFormat.Code:  MarkerDropPartition,
		kerr.CorruptMessage.Code:               MarkerFatal,
		kerr.MessageTooLarge.Code:              MarkerFatal,
		kerr.InvalidRequiredAcks.Code:          MarkerFatal,
	} {
		if got := MarkerOutcome(code); got != want {
			t.Errorf("code %d: got %d, want %d", code, got, want)
		}
	}
}

// TestRemovePartition drops a partition from an ending transaction only.
func TestRemovePartition(t *testing.T) {
	m := ongoing(t)
	var ise *IllegalStateError
	if err := m.RemovePartition(TopicPartition{"a", 0}); !errors.As(err, &ise) {
		t.Fatalf("removing from an open transaction: got %v, want an IllegalStateError", err)
	}
	_, tr, _ := m.EndTxn(1000, 0, true, 20)
	store(t, m, *tr)
	if err := m.RemovePartition(TopicPartition{"a", 0}); err != nil {
		t.Fatal(err)
	}
	if got := m.SortedPartitions(); !reflect.DeepEqual(got, []TopicPartition{{"b", 1}}) {
		t.Errorf("partitions waiting for markers: got %v, want b-1", got)
	}
	done, err := m.PrepareComplete(30)
	if err != nil {
		t.Fatal(err)
	}
	store(t, m, done)
}
