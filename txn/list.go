package txn

import (
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ListFilter is what a ListTransactions asks for (Kafka's
// listTransactionStates, KIP-664 and KIP-994): transactions in States
// (none: any), of ProducerIDs (none: any), running longer than
// DurationMs (-1: any), with a transactional id Pattern matches (nil:
// any).
type ListFilter struct {
	States      []State
	ProducerIDs []int64
	DurationMs  int64
	Pattern     *regexp.Regexp
}

// ParseStates reads ListTransactions' state filters by Kafka's names;
// the names it does not know are returned apart, for the response's
// UnknownStateFilters.
func ParseStates(names []string) (states []State, unknown []string) {
	for _, name := range names {
		found := false
		for s := Empty; s <= PrepareEpochFence; s++ {
			if s.String() == name {
				states, found = append(states, s), true
				break
			}
		}
		if !found {
			unknown = append(unknown, name)
		}
	}
	return states, unknown
}

// Matches reports whether m is listed at nowMs. A Dead id, on its way out,
// never is.
func (f ListFilter) Matches(m *Metadata, nowMs int64) bool {
	switch {
	case m.State == Dead:
		return false
	case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID):
		return false
	case len(f.States) > 0 && !slices.Contains(f.States, m.State):
		return false
	case f.DurationMs >= 0 && nowMs-m.StartMs <= f.DurationMs:
		return false
	case f.Pattern != nil && !f.Pattern.MatchString(m.TransactionalID):
		return false
	}
	return true
}

// MarkerAction is what the coordinator does with one partition's answer
// to a WriteTxnMarkers (Kafka's TransactionMarkerRequestCompletionHandler).
type MarkerAction int

const (
	// MarkerWritten: the marker is written; the partition is done.
	MarkerWritten MarkerAction = iota
	// MarkerRetry: the leader moved, is not ready or timed out; send the
	// marker again to the partition's leader as the metadata then says.
	MarkerRetry
	// MarkerDropPartition: the partition cannot hold the transaction's
	// data (its format refused it), so it holds none to end; it leaves
	// the set waiting for markers.
	MarkerDropPartition
	// MarkerAbandon: the producer's epoch or the coordinator's moved on;
	// a newer coordinator or transaction has taken over, and this one
	// stops sending.
	MarkerAbandon
	// MarkerFatal: an error no marker may get (a corrupt or oversized
	// batch, a wrong acks): a bug, which the coordinator logs and which
	// leaves the transaction pending.
	MarkerFatal
)

// MarkerOutcome maps one partition's error code in a WriteTxnMarkers
// response to what the coordinator does.
func MarkerOutcome(code int16) MarkerAction {
	switch code {
	case 0:
		return MarkerWritten
	case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
		return MarkerAbandon
	case kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code:
		return MarkerRetry
	case kerr.UnsupportedForMessageFormat.Code:
		return MarkerDropPartition
	}
	return MarkerFatal
}

// RemovePartition drops tp from the partitions of a transaction that is
// ending, when it can hold no data of it (its topic was deleted, or
// MarkerDropPartition): no marker is then waited for on it.
func (m *Metadata) RemovePartition(tp TopicPartition) error {
	if m.State != PrepareCommit && m.State != PrepareAbort {
		return illegal("transactional id %q: removing partition %s-%d in %v", m.TransactionalID, tp.Topic, tp.Partition, m.State)
	}
	delete(m.Partitions, tp)
	return nil
}
