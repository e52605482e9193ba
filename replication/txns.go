package replication

import (
	"cmp"
	"slices"

	"github.com/tripodmq/tripod/replication/log"
)

// Txns is one partition's view of the transactions written to it (KIP-98):
// the open ones, whose first record is the first offset a read_committed
// consumer may not pass, and the ones ended by a marker the followers have
// not all replicated yet. From them follows the last stable offset (LSO),
// below which every transaction is decided, and the entries of the
// aborted-transaction index (Kafka's .txnindex) that a read_committed
// fetch answers with. It is Kafka's ProducerStateManager's ongoingTxns,
// unreplicatedTxns and lastStableOffset, apart from the idempotent
// producers' state (Producers).
//
// It does no I/O and is not safe for concurrent use: the broker calls it
// under the partition's append lock, as it calls Producers.
//
// # Wiring it into the broker
//
//   - A transactional data batch appended (leader or follower):
//     Data(producer id, the batch's first offset).
//   - A control batch appended, the marker of producer id's transaction
//     at offset: Marker(id, offset, commit). A log.AbortedTxn it returns
//     goes to the aborted-transaction index of the segment holding the
//     marker.
//   - The high watermark moved: HighWatermark(hw). LastStable(hw) is then
//     the partition's LSO: Fetch answers it as LastStableOffset and a
//     read_committed fetch reads below it.
//   - A truncation of the log to offset: TruncateTo(offset); when it
//     returns true, rebuild the state from the log (Reset, then Data and
//     Marker for every batch above the latest snapshot).
type Txns struct {
	// open maps a producer id to the first offset of its open
	// transaction.
	open map[int64]int64
	// unreplicated are the transactions ended by a marker at or above the
	// high watermark, by marker offset.
	unreplicated []CompletedTxn
	// lastMarker is the offset of the latest marker recorded, -1 before
	// the first.
	lastMarker int64
}

// CompletedTxn is a transaction ended by its marker at LastOffset.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	Aborted     bool
}

// NewTxns returns the state of a partition without transactions.
func NewTxns() *Txns { return &Txns{open: map[int64]int64{}, lastMarker: -1} }

// Reset forgets every transaction, before a rebuild from the log.
func (t *Txns) Reset() {
	clear(t.open)
	t.unreplicated = nil
	t.lastMarker = -1
}

// IsOpen reports whether producerID has an open transaction on the
// partition.
func (t *Txns) IsOpen(producerID int64) bool {
	_, ok := t.open[producerID]
	return ok
}

// Data records a transactional data batch of producerID appended at
// firstOffset: the first one opens the producer's transaction there.
func (t *Txns) Data(producerID, firstOffset int64) {
	if _, ok := t.open[producerID]; !ok {
		t.open[producerID] = firstOffset
	}
}

// Marker records the marker of producerID's transaction written at
// offset, commit or abort, and returns the transaction it ends. A marker
// of a producer with no open transaction (a transaction without data on
// this partition, or a retried marker) ends an empty transaction at
// offset. An abort also returns its aborted-transaction index entry.
func (t *Txns) Marker(producerID, offset int64, commit bool) (CompletedTxn, *log.AbortedTxn) {
	first, ok := t.open[producerID]
	if !ok {
		first = offset
	}
	delete(t.open, producerID)
	t.lastMarker = max(t.lastMarker, offset)
	done := CompletedTxn{ProducerID: producerID, FirstOffset: first, LastOffset: offset, Aborted: !commit}
	i, _ := slices.BinarySearchFunc(t.unreplicated, offset, func(c CompletedTxn, o int64) int { return cmp.Compare(c.LastOffset, o) })
	t.unreplicated = slices.Insert(t.unreplicated, i, done)
	if commit {
		return done, nil
	}
	// Kafka's lastStableOffset(completedTxn): the first offset of the
	// earliest transaction still open, else just past the marker.
	lso := offset + 1
	if first, ok := t.firstOpen(); ok {
		lso = first
	}
	return done, &log.AbortedTxn{ProducerID: producerID, FirstOffset: first, LastOffset: offset, LastStableOffset: lso}
}

// firstOpen returns the lowest first offset of the open transactions.
func (t *Txns) firstOpen() (int64, bool) {
	first, ok := int64(0), false
	for _, o := range t.open {
		if !ok || o < first {
			first, ok = o, true
		}
	}
	return first, ok
}

// HighWatermark forgets the ended transactions whose marker is below hw:
// every replica in the ISR holds their marker.
func (t *Txns) HighWatermark(hw int64) {
	n := 0
	for n < len(t.unreplicated) && t.unreplicated[n].LastOffset < hw {
		n++
	}
	t.unreplicated = t.unreplicated[n:]
	if len(t.unreplicated) == 0 {
		t.unreplicated = nil
	}
}

// FirstUnstable returns the first offset not yet decided: the lowest first
// offset of an open transaction or of one whose marker is not replicated
// yet; false when every transaction is decided.
func (t *Txns) FirstUnstable() (int64, bool) {
	first, ok := t.firstOpen()
	for _, c := range t.unreplicated {
		if !ok || c.FirstOffset < first {
			first, ok = c.FirstOffset, true
		}
	}
	return first, ok
}

// LastStable returns the partition's last stable offset at high watermark
// hw: hw, or the first undecided offset when that is lower.
func (t *Txns) LastStable(hw int64) int64 {
	if first, ok := t.FirstUnstable(); ok && first < hw {
		return first
	}
	return hw
}

// Open returns the open transactions' producer ids and first offsets, by
// first offset (DescribeProducers' CurrentTxnStartOffset, and the hanging
// transactions kafka-transactions.sh finds).
func (t *Txns) Open() []CompletedTxn {
	out := make([]CompletedTxn, 0, len(t.open))
	for id, first := range t.open {
		out = append(out, CompletedTxn{ProducerID: id, FirstOffset: first, LastOffset: -1})
	}
	slices.SortFunc(out, func(a, b CompletedTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.ProducerID, b.ProducerID))
	})
	return out
}

// TruncateTo removes what lies at or above offset, the new log end: an
// open transaction that began there is forgotten. It returns true when
// the state cannot follow the cut by itself, because a marker at or above
// offset was removed (the transaction it ended is open again below
// offset, or not): the broker then rebuilds it from the log.
func (t *Txns) TruncateTo(offset int64) (rebuild bool) {
	for id, first := range t.open {
		if first >= offset {
			delete(t.open, id)
		}
	}
	return t.lastMarker >= offset
}

// Unstable is a copy of what decides a partition's last stable offset at
// one moment (Txns.Unstable), for readers that do not hold the append
// lock: the broker publishes it after every append and truncation, and a
// fetch computes the LSO from it and the high watermark it reads. The
// nil *Unstable is a partition without undecided transactions.
type Unstable struct {
	// firstOpen is the lowest first offset of the open transactions,
	// hasOpen false when none is open.
	firstOpen int64
	hasOpen   bool
	// ended are the transactions whose marker was not below the high
	// watermark when the copy was made, by marker offset.
	ended []CompletedTxn
}

// Unstable returns a copy of the open transactions' lowest first offset
// and of the ended ones not yet replicated, nil when there are none. It
// is for the broker to publish, as Txns itself needs the append lock.
func (t *Txns) Unstable() *Unstable {
	first, open := t.firstOpen()
	if !open && len(t.unreplicated) == 0 {
		return nil
	}
	return &Unstable{firstOpen: first, hasOpen: open, ended: slices.Clone(t.unreplicated)}
}

// LastStable returns the last stable offset at high watermark hw, as
// Txns.LastStable would after HighWatermark(hw): an ended transaction
// whose marker is below hw is decided.
func (u *Unstable) LastStable(hw int64) int64 {
	if u == nil {
		return hw
	}
	lso := hw
	if u.hasOpen {
		lso = min(lso, u.firstOpen)
	}
	for _, c := range u.ended {
		if c.LastOffset >= hw {
			lso = min(lso, c.FirstOffset)
		}
	}
	return lso
}
