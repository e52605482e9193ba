package txn

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// NoProducerID and NoProducerEpoch are Kafka's "none" (RecordBatch's
// NO_PRODUCER_ID and NO_PRODUCER_EPOCH).
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
)

// TopicPartition is one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Metadata is what the coordinator holds of one transactional id (Kafka's
// TransactionMetadata). Its fields change only through Complete; they are
// exported to be read.
type Metadata struct {
	TransactionalID string
	// ProducerID and ProducerEpoch are the producer id and epoch the id
	// holds now; LastProducerID is the producer id it held before the
	// latest rotation (or ProducerID), and LastProducerEpoch the epoch
	// before the latest bump (NoProducerEpoch when none is kept): with
	// them a client's retry of an InitProducerId it never got the answer
	// of is recognised (KIP-360).
	ProducerID        int64
	LastProducerID    int64
	ProducerEpoch     int16
	LastProducerEpoch int16
	// TimeoutMs is the producer's transaction.timeout.ms.
	TimeoutMs int32
	State     State
	// Partitions are the partitions of the open transaction.
	Partitions map[TopicPartition]struct{}
	// StartMs is when the open transaction began (its first
	// AddPartitions), -1 when none is open; LastUpdateMs when the
	// metadata last changed.
	StartMs      int64
	LastUpdateMs int64

	// pending is the state of the Transit prepared and not yet completed
	// (stored) or abandoned; hasPending says whether there is one.
	pending    State
	hasPending bool
	// fencing is set while the abort of a fence is pending; fenceFailed
	// when its store failed: the epoch stays bumped, and the next fence
	// does not bump it again.
	fencing, fenceFailed bool
}

// New returns the Metadata of a transactional id seen for the first time,
// with producerID from the broker's blocks: Empty, at NoProducerEpoch
// until its first InitProducerId completes.
func New(transactionalID string, producerID int64, timeoutMs int32, nowMs int64) *Metadata {
	return &Metadata{
		TransactionalID:   transactionalID,
		ProducerID:        producerID,
		LastProducerID:    NoProducerID,
		ProducerEpoch:     NoProducerEpoch,
		LastProducerEpoch: NoProducerEpoch,
		TimeoutMs:         timeoutMs,
		State:             Empty,
		Partitions:        map[TopicPartition]struct{}{},
		StartMs:           -1,
		LastUpdateMs:      nowMs,
	}
}

// Transit is a prepared change of a Metadata: the values it takes once the
// change is stored (Kafka's TxnTransitMetadata), and the record stored.
type Transit struct {
	ProducerID        int64
	LastProducerID    int64
	ProducerEpoch     int16
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	// Partitions are sorted by topic, then partition.
	Partitions   []TopicPartition
	StartMs      int64
	LastUpdateMs int64
}

// Pending reports the state of the transition prepared and not yet
// completed or abandoned, if any.
func (m *Metadata) Pending() (State, bool) { return m.pending, m.hasPending }

// SortedPartitions returns the partitions of the open transaction, sorted
// by topic, then partition.
func (m *Metadata) SortedPartitions() []TopicPartition {
	return sortPartitions(slices.Collect(maps.Keys(m.Partitions)))
}

func sortPartitions(tps []TopicPartition) []TopicPartition {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return slices.Compact(tps)
}

// IllegalStateError is a transition the metadata refuses: one of Kafka's
// IllegalStateExceptions, which the broker answers as an unexpected
// server error and logs.
type IllegalStateError struct{ msg string }

func (e *IllegalStateError) Error() string { return e.msg }

func illegal(format string, args ...any) error {
	return &IllegalStateError{msg: fmt.Sprintf(format, args...)}
}

// epochExhausted reports whether epoch is the last one a producer id may
// use: the id is then rotated (Kafka's isEpochExhausted, Short.MaxValue-1,
// keeping one epoch for a fence).
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// prepare checks and records a transition to the values of t (Kafka's
// prepareTransitionTo); t.LastProducerID is the current producer id.
func (m *Metadata) prepare(t Transit) (Transit, error) {
	if m.hasPending {
		return Transit{}, illegal("transactional id %q: preparing a transition to %v while %v is pending", m.TransactionalID, t.State, m.pending)
	}
	if t.ProducerID < 0 {
		return Transit{}, illegal("transactional id %q: preparing a transition to %v with producer id %d", m.TransactionalID, t.State, t.ProducerID)
	}
	if t.State != Dead && t.ProducerEpoch < 0 {
		return Transit{}, illegal("transactional id %q: preparing a transition to %v with producer epoch %d", m.TransactionalID, t.State, t.ProducerEpoch)
	}
	if t.TimeoutMs <= 0 {
		return Transit{}, illegal("transactional id %q: preparing a transition to %v with transaction timeout %d ms", m.TransactionalID, t.State, t.TimeoutMs)
	}
	if !CanFollow(m.State, t.State) {
		return Transit{}, illegal("transactional id %q: %v cannot follow %v", m.TransactionalID, t.State, m.State)
	}
	t.LastProducerID = m.ProducerID
	t.Partitions = sortPartitions(t.Partitions)
	m.pending, m.hasPending = t.State, true
	return t, nil
}

// transit is the Transit that keeps every value of m but those set by
// the caller.
func (m *Metadata) transit(state State, nowMs int64) Transit {
	return Transit{
		ProducerID:        m.ProducerID,
		ProducerEpoch:     m.ProducerEpoch,
		LastProducerEpoch: m.LastProducerEpoch,
		TimeoutMs:         m.TimeoutMs,
		State:             state,
		Partitions:        m.SortedPartitions(),
		StartMs:           m.StartMs,
		LastUpdateMs:      nowMs,
	}
}

// PrepareFenceAndAbort fences the open transaction's producer (a newer
// producer of the id called InitProducerId, or the transaction timed out)
// and prepares the abort of its transaction (Kafka's
// prepareFenceProducerEpoch, then EndTxn's abort from the coordinator):
// the epoch is bumped, so that the old producer's writes and EndTxn are
// refused, and the abort's markers carry the bumped epoch. Kafka's
// PrepareEpochFence is the transient state of the fence; it is never
// stored.
func (m *Metadata) PrepareFenceAndAbort(nowMs int64) (Transit, error) {
	if m.hasPending {
		return Transit{}, illegal("transactional id %q: fencing while %v is pending", m.TransactionalID, m.pending)
	}
	if m.State != Ongoing {
		return Transit{}, illegal("transactional id %q: fencing with no open transaction (%v)", m.TransactionalID, m.State)
	}
	if m.ProducerEpoch == math.MaxInt16 {
		return Transit{}, illegal("transactional id %q: cannot fence producer %d at epoch %d, the last", m.TransactionalID, m.ProducerID, m.ProducerEpoch)
	}
	if !m.fenceFailed {
		m.ProducerEpoch++
	}
	m.LastProducerEpoch = NoProducerEpoch
	t, err := m.prepare(m.transit(PrepareAbort, nowMs))
	if err == nil {
		m.fencing = true
	}
	return t, err
}

// PrepareIncrementEpoch prepares the epoch bump of an InitProducerId
// (Kafka's prepareIncrementProducerEpoch): with no expected epoch (a new
// producer, or a client before KIP-360) the epoch is bumped; an expected
// epoch equal to the current one is bumped too (the producer recovers); an
// expected epoch equal to the one before the latest bump is the retry of
// that bump, answered with the current epoch; any other is
// PRODUCER_FENCED.
func (m *Metadata) PrepareIncrementEpoch(timeoutMs int32, expectedEpoch int16, hasExpected bool, nowMs int64) (Transit, Code, error) {
	if epochExhausted(m.ProducerEpoch) {
		return Transit{}, 0, illegal("transactional id %q: cannot bump producer %d's exhausted epoch %d", m.TransactionalID, m.ProducerID, m.ProducerEpoch)
	}
	t := m.transit(Empty, nowMs)
	t.TimeoutMs = timeoutMs
	t.Partitions = nil
	t.StartMs = -1
	switch {
	case !hasExpected:
		t.ProducerEpoch, t.LastProducerEpoch = m.ProducerEpoch+1, NoProducerEpoch
	case m.ProducerEpoch == NoProducerEpoch || expectedEpoch == m.ProducerEpoch:
		t.ProducerEpoch, t.LastProducerEpoch = m.ProducerEpoch+1, m.ProducerEpoch
	case expectedEpoch == m.LastProducerEpoch:
		t.ProducerEpoch, t.LastProducerEpoch = m.ProducerEpoch, m.LastProducerEpoch
	default:
		return Transit{}, ProducerFenced, nil
	}
	t, err := m.prepare(t)
	return t, 0, err
}

// PrepareRotateProducerID prepares a new producer id for the transactional
// id, at epoch 0, when its epoch is exhausted (Kafka's
// prepareProducerIdRotation); with keepLastEpoch (the client named its
// current producer id and epoch) the old epoch is kept so that a retry is
// recognised.
func (m *Metadata) PrepareRotateProducerID(producerID int64, timeoutMs int32, keepLastEpoch bool, nowMs int64) (Transit, error) {
	if m.hasOpenTransaction() {
		return Transit{}, illegal("transactional id %q: cannot rotate the producer id with a transaction in %v", m.TransactionalID, m.State)
	}
	t := m.transit(Empty, nowMs)
	t.ProducerID, t.ProducerEpoch = producerID, 0
	t.LastProducerEpoch = NoProducerEpoch
	if keepLastEpoch {
		t.LastProducerEpoch = m.ProducerEpoch
	}
	t.TimeoutMs = timeoutMs
	t.Partitions = nil
	t.StartMs = -1
	return m.prepare(t)
}

// PrepareAddPartitions prepares the addition of partitions to the open
// transaction, which it opens if none is (Kafka's prepareAddPartitions).
func (m *Metadata) PrepareAddPartitions(tps []TopicPartition, nowMs int64) (Transit, error) {
	t := m.transit(Ongoing, nowMs)
	switch m.State {
	case Empty, CompleteAbort, CompleteCommit:
		t.StartMs = nowMs
	}
	t.Partitions = append(t.Partitions, tps...)
	return m.prepare(t)
}

// PrepareAbortOrCommit prepares the end of the open transaction: state is
// PrepareCommit or PrepareAbort.
func (m *Metadata) PrepareAbortOrCommit(state State, nowMs int64) (Transit, error) {
	if state != PrepareCommit && state != PrepareAbort {
		return Transit{}, illegal("transactional id %q: %v does not end a transaction", m.TransactionalID, state)
	}
	return m.prepare(m.transit(state, nowMs))
}

// PrepareComplete prepares CompleteCommit or CompleteAbort once every
// marker of the transaction ended by PrepareCommit or PrepareAbort is
// written.
func (m *Metadata) PrepareComplete(nowMs int64) (Transit, error) {
	state := CompleteAbort
	if m.State == PrepareCommit {
		state = CompleteCommit
	}
	t := m.transit(state, nowMs)
	t.Partitions = nil
	return m.prepare(t)
}

// PrepareDead prepares the removal of an expired transactional id (its
// record becomes a tombstone).
func (m *Metadata) PrepareDead() (Transit, error) {
	t := m.transit(Dead, m.LastUpdateMs)
	t.Partitions = nil
	return m.prepare(t)
}

// hasOpenTransaction reports whether a transaction is open or ending.
func (m *Metadata) hasOpenTransaction() bool {
	switch m.State {
	case Ongoing, PrepareAbort, PrepareCommit:
		return true
	}
	return false
}

// Abandon forgets the pending transition, whose store failed. A fence's
// abort that failed leaves the epoch bumped (the old producer stays
// fenced), and the next fence keeps it.
func (m *Metadata) Abandon() {
	if m.hasPending && m.fencing {
		m.fenceFailed = true
	}
	m.hasPending, m.fencing = false, false
}

// Complete applies t, the pending transition, now stored (Kafka's
// completeTransitionTo). It refuses a Transit that is not the pending one
// or does not follow from the metadata as its state requires, and then
// changes nothing.
func (m *Metadata) Complete(t Transit) error {
	if !m.hasPending {
		return illegal("transactional id %q: completing a transition to %v with none pending", m.TransactionalID, t.State)
	}
	if m.pending != t.State {
		return illegal("transactional id %q: completing a transition to %v while %v is pending", m.TransactionalID, t.State, m.pending)
	}
	sameProducer := t.ProducerID == m.ProducerID && t.ProducerEpoch == m.ProducerEpoch
	switch t.State {
	case Empty:
		bump := t.ProducerEpoch == m.ProducerEpoch+1 || (t.ProducerEpoch == 0 && t.ProducerID != m.ProducerID)
		if (t.ProducerEpoch != m.ProducerEpoch && !bump) || len(t.Partitions) > 0 || t.StartMs != -1 {
			return m.completeFailed(t)
		}
	case Ongoing:
		if !sameProducer || t.TimeoutMs != m.TimeoutMs || !subset(m.Partitions, t.Partitions) {
			return m.completeFailed(t)
		}
	case PrepareAbort, PrepareCommit:
		if !sameProducer || t.TimeoutMs != m.TimeoutMs || t.StartMs != m.StartMs || !equalSet(m.Partitions, t.Partitions) {
			return m.completeFailed(t)
		}
	case CompleteAbort, CompleteCommit:
		if !sameProducer || t.TimeoutMs != m.TimeoutMs || t.StartMs == -1 {
			return m.completeFailed(t)
		}
		m.fenceFailed = false
	case PrepareEpochFence:
		// A fence is never stored: the abort that follows it is.
		return m.completeFailed(t)
	case Dead:
		if !sameProducer || t.TimeoutMs != m.TimeoutMs {
			return m.completeFailed(t)
		}
	default:
		return m.completeFailed(t)
	}
	m.ProducerID, m.LastProducerID = t.ProducerID, t.LastProducerID
	m.ProducerEpoch, m.LastProducerEpoch = t.ProducerEpoch, t.LastProducerEpoch
	m.TimeoutMs = t.TimeoutMs
	m.StartMs = t.StartMs
	m.Partitions = map[TopicPartition]struct{}{}
	for _, tp := range t.Partitions {
		m.Partitions[tp] = struct{}{}
	}
	m.LastUpdateMs = t.LastUpdateMs
	m.State = t.State
	m.hasPending, m.fencing = false, false
	return nil
}

func (m *Metadata) completeFailed(t Transit) error {
	return illegal("transactional id %q: the stored %v (producer %d epoch %d) does not follow %v (producer %d epoch %d)",
		m.TransactionalID, t.State, t.ProducerID, t.ProducerEpoch, m.State, m.ProducerID, m.ProducerEpoch)
}

func subset(set map[TopicPartition]struct{}, of []TopicPartition) bool {
	for tp := range set {
		if !slices.Contains(of, tp) {
			return false
		}
	}
	return true
}

func equalSet(set map[TopicPartition]struct{}, list []TopicPartition) bool {
	return len(set) == len(list) && subset(set, list)
}
