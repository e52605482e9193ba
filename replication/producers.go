package replication

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"

	"github.com/tripodmq/tripod/replication/log"
)

// Errors of the idempotent producer checks. Each maps to one Kafka error
// code, which the broker puts on the wire.
var (
	// ErrProducerFenced refuses a batch whose producer epoch is older than
	// the epoch the partition last saw for its producer id: a newer
	// instance of the producer has taken the id over (Kafka answers
	// INVALID_PRODUCER_EPOCH, as brokers since 2.7 do for produce).
	ErrProducerFenced = errors.New("replication: producer epoch older than the partition's current epoch for the producer id")
	// ErrOutOfOrderSequence refuses a batch whose base sequence is not the
	// one after the producer's last appended batch (a gap or a reorder),
	// or a batch of a new producer epoch that does not start at sequence 0
	// (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("replication: out of order sequence number")
	// ErrInvalidTxnState refuses a batch that is not transactional from
	// a producer whose transaction on the partition is open: it must
	// write transactionally until the transaction's marker
	// (INVALID_TXN_STATE, as Kafka's ProducerAppendInfo answers).
	ErrInvalidTxnState = errors.New("replication: a non-transactional batch from a producer whose transaction is open")
	// ErrCoordinatorFenced refuses a transaction marker written for a
	// transaction coordinator older than the one whose marker the
	// partition last wrote for the producer: a newer coordinator has
	// taken the transactional id over (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("replication: transaction marker of an older transaction coordinator")
)

// Kafka's RecordBatch constants for a batch without a producer.
const (
	// NoProducerID is the producer id of a batch from a producer that is
	// not idempotent.
	NoProducerID = -1
	// NoProducerEpoch is the producer epoch of such a batch, and the epoch
	// of a producer id the partition knows nothing of.
	NoProducerEpoch = -1
	// NoSequence is the base sequence of such a batch.
	NoSequence = -1
)

// ProducerBatchesRetained is how many of a producer's most recent batches
// a partition remembers to recognise a retry (Kafka's
// ProducerStateEntry.NUM_BATCHES_TO_RETAIN, which matches the client's
// max.in.flight.requests.per.connection limit of 5 for idempotence).
const ProducerBatchesRetained = 5

// attrTransactional and attrControl are the attributes bits of a
// transactional batch and of a control (transaction marker) batch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// BatchMeta is what the idempotence checks need of one v2 record batch:
// its producer, its sequence range and its offsets.
type BatchMeta struct {
	// ProducerID is the batch's producer id; NoProducerID (-1) for a
	// producer that is not idempotent, whose batches are never checked.
	ProducerID int64
	// ProducerEpoch is the batch's producer epoch.
	ProducerEpoch int16
	// BaseSequence is the sequence number of the batch's first record.
	BaseSequence int32
	// LastSequence is the sequence number of its last record: BaseSequence
	// plus the last offset delta, wrapping from math.MaxInt32 to 0 as
	// Kafka's DefaultRecordBatch.incrementSequence does.
	LastSequence int32
	// FirstOffset and LastOffset are the offsets of the batch's first and
	// last record as its header states them. In a produce request they
	// are whatever the client sent (usually 0 and the last offset delta);
	// Appended and Replay record the offsets the log assigned, and a
	// duplicate returned by Check carries those.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the batch's max timestamp (ms), which Expire
	// compares to decide that a producer has been idle.
	MaxTimestamp int64
	// Transactional says the batch belongs to a transaction.
	Transactional bool
	// Control says the batch is a control batch (a transaction marker);
	// control batches carry no sequence: only their producer epoch is
	// checked, and they end the producer's transaction.
	Control bool
	// Commit is what a control batch's marker says: COMMIT, not ABORT.
	Commit bool
	// CoordinatorEpoch is the epoch of the coordinator that wrote a
	// control batch's marker; 0, and meaningless, for other batches.
	CoordinatorEpoch int32
}

// idempotent reports whether the checks apply to the batch.
func (b BatchMeta) idempotent() bool { return b.ProducerID >= 0 && !b.Control }

// incrementSequence returns sequence+increment, wrapping past
// math.MaxInt32 to 0 (Kafka's DefaultRecordBatch.incrementSequence).
func incrementSequence(sequence, increment int32) int32 {
	if sequence > math.MaxInt32-increment {
		return increment - (math.MaxInt32 - sequence) - 1
	}
	return sequence + increment
}

// inSequence reports whether next is the sequence after last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// ParseBatchMeta parses the header of every v2 batch in records (a produce
// request's or a fetch response's records field: one or more concatenated
// batches) and checks each batch's framing and CRC-32C, as Kafka validates
// a batch before its producer state: a corrupt retry is CORRUPT_MESSAGE,
// never a duplicate. The records are not modified or retained.
//
// Errors wrap log.ErrCorruptMessage (empty records, a truncated or
// malformed batch, a bad CRC, fewer records than offsets, which only a
// compacted log's batches have) or log.ErrUnsupportedMagic, naming the batch
// by index and byte position, so the broker maps them as it maps the
// log's own.
func ParseBatchMeta(records []byte) ([]BatchMeta, error) {
	return parseBatches(records, true)
}

// ParseBatchHeaders is ParseBatchMeta without the CRC-32C check, for
// batches the log has verified already: a follower's fetched records
// after log.AppendAsFollower accepted them.
func ParseBatchHeaders(records []byte) ([]BatchMeta, error) {
	return parseBatches(records, false)
}

// parseBatches implements ParseBatchMeta and ParseBatchHeaders: the
// log checks the batches as its Append does.
func parseBatches(records []byte, checkCRC bool) ([]BatchMeta, error) {
	metas := make([]BatchMeta, 0, 1)
	collect := func(h log.BatchInfo) { metas = append(metas, batchMeta(h)) }
	var err error
	if checkCRC {
		// A producer's batches: compacted ones are refused.
		err = log.EachProducedBatch(records, collect)
	} else {
		err = log.EachBatch(records, false, collect)
	}
	if err != nil {
		return nil, err
	}
	return metas, nil
}

// batchMeta is the idempotence view of a batch header.
func batchMeta(h log.BatchInfo) BatchMeta {
	meta := BatchMeta{
		ProducerID:    h.ProducerID,
		ProducerEpoch: h.ProducerEpoch,
		BaseSequence:  h.BaseSequence,
		LastSequence:  NoSequence,
		FirstOffset:   h.BaseOffset,
		LastOffset:    h.LastOffset,
		MaxTimestamp:  h.MaxTimestamp,
		Transactional: h.Attributes&attrTransactional != 0,
		Control:       h.Attributes&attrControl != 0,
		Commit:        h.Commit,
	}
	if meta.Control {
		meta.CoordinatorEpoch = h.CoordinatorEpoch
	}
	if meta.BaseSequence != NoSequence {
		meta.LastSequence = incrementSequence(meta.BaseSequence, int32(h.LastOffset-h.BaseOffset))
	}
	return meta
}

// producerEntry is what a partition remembers of one producer id: its
// current epoch and up to ProducerBatchesRetained of its last batches of
// that epoch, oldest first, with their log offsets.
type producerEntry struct {
	epoch   int16
	batches []BatchMeta
	// lastTimestamp is the max timestamp (ms) of the producer's last
	// batch, data or marker, -1 if none is known: Expire's clock.
	lastTimestamp int64
	// coordinatorEpoch is the coordinator epoch of the producer's last
	// marker, -1 before the first.
	coordinatorEpoch int32
}

// lastSequence is the sequence of the producer's last appended record.
func (e *producerEntry) lastSequence() int32 {
	if len(e.batches) == 0 {
		return NoSequence
	}
	return e.batches[len(e.batches)-1].LastSequence
}

// add records an appended batch: a new epoch forgets the batches of the
// old one, and only the last ProducerBatchesRetained batches are kept
// (Kafka's ProducerStateEntry.addBatch).
func (e *producerEntry) add(b BatchMeta) {
	e.lastTimestamp = b.MaxTimestamp
	if b.ProducerEpoch != e.epoch {
		e.epoch = b.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == ProducerBatchesRetained {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:len(e.batches)-1]
	}
	// The batches grow as they come, up to ProducerBatchesRetained, so
	// that a producer seen once (a partition idle since) holds one.
	if len(e.batches) == cap(e.batches) {
		grown := make([]BatchMeta, len(e.batches), min(max(2*cap(e.batches), 1), ProducerBatchesRetained))
		copy(grown, e.batches)
		e.batches = grown
	}
	e.batches = append(e.batches, b)
}

// duplicate returns the retained batch with b's epoch and exact sequence
// range, if any (Kafka's ProducerStateEntry.findDuplicateBatch).
func (e *producerEntry) duplicate(b BatchMeta) (BatchMeta, bool) {
	if b.ProducerEpoch != e.epoch || b.BaseSequence == NoSequence {
		return BatchMeta{}, false
	}
	for _, kept := range e.batches {
		if kept.BaseSequence == b.BaseSequence && kept.LastSequence == b.LastSequence {
			return kept, true
		}
	}
	return BatchMeta{}, false
}

// Producers is one partition's idempotent producer state: for every
// producer id seen in the partition's log, its epoch and its last
// ProducerBatchesRetained batches. The leader checks each produce against
// it before appending (Check) and every replica records what it appends
// (Appended), so a follower that becomes leader already holds the state.
// The log writes it to its producer snapshots (log.SnapshotProducers)
// and rebuilds it on open from the latest one and the log after it
// (log.RecoverProducers), and after a truncation (TruncateTo, then Reset
// and log.RecoverProducers when TruncateTo says so).
//
// Producers is Kafka's ProducerStateManager. Its transactions (KIP-98)
// are a Txns it keeps from the same batches: a transactional data batch
// opens its producer's transaction, a control batch (a marker) ends it,
// and Appended and Replay return the aborted-transaction index entries
// the markers make, which the caller adds to the log
// (log.AppendAbortedTxn; log.LoadProducersFrom does it for Replay). It
// does no I/O: the log reads and writes it (it is a log.ProducerState, fed by
// Replay and persisted by Snapshot and RestoreSnapshot). It is not safe
// for concurrent use: the broker calls it under the partition's append lock,
// the lock that orders the log's appends and truncations, so the state
// always describes the log.
//
// # Wiring it into the broker
//
//   - Open: NewProducers, then log.RecoverProducers (log the ProducerLoad's
//     Skipped snapshots as warnings), then Expire as below, as Kafka
//     skips expired producers when it loads a snapshot.
//   - Produce at the leader: ParseBatchMeta(records) (an error is the
//     partition's error, mapped as the log's: CORRUPT_MESSAGE,
//     UNSUPPORTED_FOR_MESSAGE_FORMAT); for acks=all,
//     Partition.CheckAcksAll first, as Kafka checks min.insync.replicas
//     before its producer state. Then, holding the append lock: Check.
//     ErrProducerFenced is INVALID_PRODUCER_EPOCH, ErrOutOfOrderSequence
//     is OUT_OF_ORDER_SEQUENCE_NUMBER; nothing is written. A duplicate is
//     not written either: answer no error with base offset
//     dup.FirstOffset, and for acks=all Await(id, dup.LastOffset, ...)
//     as for a fresh append (the retry may reach a new leader before its
//     high watermark passes the batch, and Kafka's acks=all waits for
//     it too). Otherwise log.Append, then Appended(batches,
//     result.BaseOffset) before releasing the lock (also when Append
//     returned its result with an fsync error: the batches are written),
//     then Partition.Appended and Await as before.
//   - Follower: after log.AppendAsFollower(records), ParseBatchHeaders
//     (records) and Appended(batches, result.BaseOffset), under the
//     same lock. A follower that becomes leader then needs nothing.
//   - Truncation (log.TruncateTo(offset), which deletes the snapshots
//     above the new log end): if TruncateTo(offset) returns true, Reset
//     and log.RecoverProducers; after log.TruncateFullyAndStartAt (which
//     deletes every snapshot), Reset.
//   - An append that failed after writing some batches (a write error
//     in a later segment), or any doubt: log.LoadProducers.
//   - Every producer.id.expiration.check.interval.ms: Expire(now -
//     producer.id.expiration.ms), and log.SnapshotProducers if the log
//     rolled a segment since the latest snapshot, so that a restart after
//     a crash replays about one segment, as Kafka's snapshot at each roll
//     bounds it.
//   - Clean shutdown (before log.Close): log.SnapshotProducers, so that
//     the next open reads nothing but the snapshot.
type Producers struct {
	entries map[int64]*producerEntry
	// txns are the partition's transactions.
	txns *Txns
}

// Producers is what the log loads, recovers and snapshots.
var _ log.ProducerState = (*Producers)(nil)

// NewProducers returns an empty state.
func NewProducers() *Producers {
	return &Producers{entries: make(map[int64]*producerEntry), txns: NewTxns()}
}

// Txns is the partition's transactions, as the batches recorded left
// them: the broker asks it for the last stable offset (after
// HighWatermark) and the open transactions. Changing it other than
// through HighWatermark is the Producers' business.
func (p *Producers) Txns() *Txns { return p.txns }

// Len is the number of producer ids the partition remembers.
func (p *Producers) Len() int { return len(p.entries) }

// Knows reports whether the partition remembers producer id id.
func (p *Producers) Knows(id int64) bool {
	_, ok := p.entries[id]
	return ok
}

// ProducerState is what DescribeProducers reports of one producer id a
// partition remembers.
type ProducerState struct {
	// ProducerID is the producer id.
	ProducerID int64
	// ProducerEpoch is its current epoch.
	ProducerEpoch int16
	// LastSequence is the sequence of its last appended record, NoSequence
	// if none is remembered.
	LastSequence int32
	// LastTimestamp is the max timestamp (ms) of its last appended batch,
	// -1 if none is remembered.
	LastTimestamp int64
	// CurrentTxnStartOffset is the first offset of its open transaction,
	// -1 if it has none.
	CurrentTxnStartOffset int64
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote its last marker, -1 if none did.
	CoordinatorEpoch int32
}

// Active returns the producers the partition remembers, by producer id
// (Kafka's ProducerStateManager.activeProducers).
func (p *Producers) Active() []ProducerState {
	out := make([]ProducerState, 0, len(p.entries))
	for id, e := range p.entries {
		st := ProducerState{ProducerID: id, ProducerEpoch: e.epoch, LastSequence: e.lastSequence(), LastTimestamp: e.lastTimestamp,
			CurrentTxnStartOffset: -1, CoordinatorEpoch: e.coordinatorEpoch}
		if first, ok := p.txns.open[id]; ok {
			st.CurrentTxnStartOffset = first
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ProducerState) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// Reset forgets every producer and transaction.
func (p *Producers) Reset() {
	clear(p.entries)
	p.txns.Reset()
}

// pendingProducer is a producer's state as the earlier batches of the
// request under Check would leave it.
type pendingProducer struct {
	id           int64
	epoch        int16
	lastSequence int32
}

// Check decides, before a leader appends a produce's batches (as
// ParseBatchMeta returned them, in order), whether they may be written.
// Batches with ProducerID < 0 are not checked. A control batch (a
// transaction marker WriteTxnMarkers writes) is checked for its epochs
// only, as Kafka's appendEndTxnMarker decides: a producer epoch older
// than the producer's current one is ErrProducerFenced, a coordinator
// epoch older than that of the producer's last marker
// ErrCoordinatorFenced. For each
// other batch, in order, as Kafka's UnifiedLog and
// ProducerAppendInfo.checkSequence decide:
//
//   - A batch with the producer's current epoch and the exact sequence
//     range of one of its last ProducerBatchesRetained appended batches is
//     a retry: Check returns that batch, with the offsets it was appended
//     at, and a nil error. The broker writes nothing and answers the
//     partition with no error and the duplicate's FirstOffset as base
//     offset (Kafka answers NONE; DUPLICATE_SEQUENCE_NUMBER is what older
//     brokers sent). A request whose later batch is a duplicate is
//     answered the same way, as Kafka does; produce v3+ carries one batch
//     per partition, so real clients never send such a request.
//   - A transactional batch with the sequences of a retained batch whose
//     transaction has ended (a marker came after it) is not a retry: a
//     client retries a batch only while its transaction is open, so the
//     producer reused sequences of a batch it gave up on while its fate
//     was unknown (franz-go v1.22 does, after AbortBufferedRecords while
//     a batch awaits a retry). Kafka would answer it as a duplicate and
//     the client would count a record written that never was; tripod
//     refuses it with ErrOutOfOrderSequence, which fails the record and
//     so the transaction.
//   - An epoch older than the producer's current one: ErrProducerFenced.
//   - A newer epoch must start at sequence 0, else ErrOutOfOrderSequence.
//   - The current epoch must continue at the sequence after the last
//     appended one (wrapping from math.MaxInt32 to 0), else
//     ErrOutOfOrderSequence: a gap, a reorder, or a retry older than the
//     retained batches.
//   - A batch without a sequence (NoSequence), which only a coordinator
//     writes (the offsets of a TxnOffsetCommit), is checked for its epoch
//     only, as Kafka checks its coordinator-origin appends.
//   - A batch that is not transactional, from a producer whose
//     transaction is open, is ErrInvalidTxnState.
//   - A producer id the partition does not know is accepted at any
//     sequence and epoch, as Kafka 2.5+ does (KIP-360): its earlier
//     batches may have left the log through retention, or it may have
//     been expired, and it must be able to go on. Kafka 1.0-2.4 answered
//     UNKNOWN_PRODUCER_ID to a non-zero sequence instead.
//
// Earlier batches of the same request count as appended for the
// sequence checks, but not for duplicates (they have no offsets yet).
// Errors wrap the sentinels and name the producer, epoch and sequences.
// Check changes nothing: call Appended after the append succeeds.
func (p *Producers) Check(batches []BatchMeta) (dup *BatchMeta, err error) {
	var pendingSpace [4]pendingProducer
	pending := pendingSpace[:0]
	for i, b := range batches {
		if b.Control && b.ProducerID >= 0 {
			e := p.entries[b.ProducerID]
			switch {
			case e == nil:
			case b.ProducerEpoch < e.epoch:
				return nil, fmt.Errorf("%w: transaction marker %d of producer %d has epoch %d, current epoch %d",
					ErrProducerFenced, i, b.ProducerID, b.ProducerEpoch, e.epoch)
			case b.CoordinatorEpoch < e.coordinatorEpoch:
				return nil, fmt.Errorf("%w: transaction marker %d of producer %d has coordinator epoch %d, the last one %d",
					ErrCoordinatorFenced, i, b.ProducerID, b.CoordinatorEpoch, e.coordinatorEpoch)
			}
		}
		if !b.idempotent() {
			continue
		}
		committed := p.entries[b.ProducerID]
		if committed != nil {
			if kept, ok := committed.duplicate(b); ok {
				if first, open := p.txns.open[b.ProducerID]; b.Transactional && (!open || kept.FirstOffset < first) {
					return nil, fmt.Errorf("%w: batch %d of producer %d epoch %d repeats sequences %d..%d of the batch at offset %d, whose transaction has ended: the sequences were reused, not retried",
						ErrOutOfOrderSequence, i, b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.LastSequence, kept.FirstOffset)
				}
				// A copy declared here, so only a duplicate allocates.
				dup = new(BatchMeta)
				*dup = kept
				return dup, nil
			}
		}
		// The producer's state as of this batch: the request's earlier
		// batches if any, else what was appended.
		current := pendingProducer{id: b.ProducerID, epoch: NoProducerEpoch, lastSequence: NoSequence}
		if committed != nil {
			current.epoch, current.lastSequence = committed.epoch, committed.lastSequence()
		}
		at := -1
		for j := range pending {
			if pending[j].id == b.ProducerID {
				current, at = pending[j], j
			}
		}
		known := committed != nil && committed.epoch != NoProducerEpoch
		switch {
		case b.ProducerEpoch < current.epoch:
			return nil, fmt.Errorf("%w: batch %d of producer %d has epoch %d, current epoch %d",
				ErrProducerFenced, i, b.ProducerID, b.ProducerEpoch, current.epoch)
		case b.BaseSequence == NoSequence:
			// A coordinator's transactional records (TxnOffsetCommit's
			// offsets): only the epoch is checked. A client's batch with a
			// producer id always carries a sequence (log.ValidateProduced).
		case b.ProducerEpoch != current.epoch:
			if b.BaseSequence != 0 && current.epoch != NoProducerEpoch {
				return nil, fmt.Errorf("%w: batch %d of producer %d starts new epoch %d at sequence %d, want 0 (current epoch %d)",
					ErrOutOfOrderSequence, i, b.ProducerID, b.ProducerEpoch, b.BaseSequence, current.epoch)
			}
		case known && !inSequence(current.lastSequence, b.BaseSequence):
			return nil, fmt.Errorf("%w: batch %d of producer %d epoch %d has sequence %d, want %d",
				ErrOutOfOrderSequence, i, b.ProducerID, b.ProducerEpoch, b.BaseSequence, incrementSequence(current.lastSequence, 1))
		}
		if first, open := p.txns.open[b.ProducerID]; open && !b.Transactional {
			return nil, fmt.Errorf("%w: batch %d of producer %d, whose transaction is open since offset %d",
				ErrInvalidTxnState, i, b.ProducerID, first)
		}
		current.epoch, current.lastSequence = b.ProducerEpoch, b.LastSequence
		if at >= 0 {
			pending[at] = current
		} else {
			pending = append(pending, current)
		}
	}
	return nil, nil
}

// Appended records batches a replica appended to its log, leader or
// follower, with the offsets the log gave them: batches[0] starts at
// baseOffset (log.AppendResult.BaseOffset) and each next batch follows
// the previous one, whatever offsets their headers held. It validates
// nothing (a follower takes its leader's word, as Kafka's REPLICATION
// origin does): a new epoch replaces the producer's batches, and only the
// last ProducerBatchesRetained are kept. Batches with ProducerID < 0 are
// skipped. A transactional batch opens its producer's transaction; a
// control batch ends it (and moves the producer to the marker's epoch if
// newer), and an abort's index entry is returned, in marker order, for
// the caller to add to the log (log.AppendAbortedTxn) before it lets go
// of the append lock. The caller's slice is not modified.
func (p *Producers) Appended(batches []BatchMeta, baseOffset int64) []log.AbortedTxn {
	var aborted []log.AbortedTxn
	next := baseOffset
	for _, b := range batches {
		records := b.LastOffset - b.FirstOffset
		b.FirstOffset, b.LastOffset = next, next+records
		next = b.LastOffset + 1
		if a := p.record(b); a != nil {
			aborted = append(aborted, *a)
		}
	}
	return aborted
}

// record adds one batch with its final offsets, and returns the
// aborted-transaction index entry of an abort marker.
func (p *Producers) record(b BatchMeta) *log.AbortedTxn {
	if b.ProducerID < 0 {
		return nil
	}
	e := p.entries[b.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: NoProducerEpoch, lastTimestamp: -1, coordinatorEpoch: -1}
		p.entries[b.ProducerID] = e
	}
	if b.Control {
		// Kafka's appendEndTxnMarker: a newer epoch (the coordinator
		// fenced the producer and aborted for it) starts afresh.
		if b.ProducerEpoch > e.epoch {
			e.epoch = b.ProducerEpoch
			e.batches = e.batches[:0]
		}
		e.lastTimestamp = b.MaxTimestamp
		e.coordinatorEpoch = b.CoordinatorEpoch
		_, aborted := p.txns.Marker(b.ProducerID, b.LastOffset, b.Commit)
		return aborted
	}
	e.add(b)
	if b.Transactional {
		p.txns.Data(b.ProducerID, b.FirstOffset)
	}
	return nil
}

// ForgetBelow drops the retained batches that end below offset, and the
// producers left with none, unless their transaction is open: what
// retention removed from the log (log.ProducerState). A producer a marker
// alone left without batches stays until it expires.
func (p *Producers) ForgetBelow(offset int64) {
	for id, e := range p.entries {
		drop := 0
		for drop < len(e.batches) && e.batches[drop].LastOffset < offset {
			drop++
		}
		_, open := p.txns.open[id]
		switch {
		case drop == len(e.batches) && drop > 0 && !open:
			delete(p.entries, id)
		case drop == len(e.batches):
			e.batches = e.batches[:0]
		case drop > 0:
			e.batches = append(e.batches[:0], e.batches[drop:]...)
		}
	}
}

// Replay records a batch that the log holds, at the offsets the log gave
// it, without a check: what a load of the log does (log.ProducerState).
// It returns an abort marker's aborted-transaction index entry, which
// the log adds to its index if it lacks it.
func (p *Producers) Replay(h log.BatchInfo) *log.AbortedTxn { return p.record(batchMeta(h)) }

// TruncateTo forgets the batches at and above offset, after the broker
// cut the log there (log.TruncateTo). A producer that keeps some batches
// keeps its epoch and last sequence exactly; only its window of
// duplicates is shorter until it appends again. A producer that loses
// all its retained batches is forgotten, and since its earlier batches
// (below offset, older than the window) decide its sequence, TruncateTo
// then returns reload: the caller must Reset and Load from the truncated
// log to be exact. A follower's truncation usually cuts only the tail
// written under the previous leader, so the log is rarely read again.
// The transactions follow (Txns.TruncateTo): a cut transaction marker
// also asks for the reload.
func (p *Producers) TruncateTo(offset int64) (reload bool) {
	reload = p.txns.TruncateTo(offset)
	for id, e := range p.entries {
		keep := len(e.batches)
		for keep > 0 && e.batches[keep-1].LastOffset >= offset {
			keep--
		}
		if keep == len(e.batches) {
			continue
		}
		if keep == 0 {
			delete(p.entries, id)
			reload = true
			continue
		}
		e.batches = e.batches[:keep]
	}
	return reload
}

// Expire forgets the producers whose last batch's MaxTimestamp is below
// before (ms), as Kafka does after producer.id.expiration.ms (default one
// day) without a write, so a long-lived broker does not keep every
// producer id it ever saw. An expired producer's next batch is accepted
// at any sequence. A producer whose transaction is open is kept, as
// Kafka keeps it. Expire returns how many were forgotten.
func (p *Producers) Expire(before int64) int {
	n := 0
	for id, e := range p.entries {
		if _, open := p.txns.open[id]; open {
			continue
		}
		if e.lastTimestamp < before {
			delete(p.entries, id)
			n++
		}
	}
	return n
}

// ErrCorruptSnapshot is RestoreSnapshot's error for a producer snapshot
// that is not one: a bad CRC, version, length or field.
// log.RecoverProducers deletes such a snapshot and reads the log instead.
var ErrCorruptSnapshot = errors.New("replication: corrupt producer snapshot")

// Producer snapshot layout, version 2, every field big-endian (tripod's
// own format: Kafka's snapshots keep one batch per producer and cannot be
// read here):
//
//	version        int16   2
//	crc            uint32  CRC-32C (Castagnoli) of everything after it
//	offset         int64   the log offset the snapshot describes
//	producerCount  int32
//	producers, by ascending producer id:
//	  producerID     int64
//	  epoch          int16
//	  lastTimestamp  int64   the max timestamp of its last batch or marker, -1
//	  txnFirstOffset int64   the first offset of its open transaction, -1 if none
//	                         (Kafka's currentTxnFirstOffset)
//	  coordEpoch     int32   the coordinator epoch of its last marker, -1
//	  batchCount     int8    0..ProducerBatchesRetained, oldest first
//	  batches:
//	    baseSequence int32
//	    lastSequence int32
//	    firstOffset  int64
//	    lastOffset   int64
//	    maxTimestamp int64
//	    flags        int8    bit 0: transactional
//	lastMarker     int64   the offset of the latest transaction marker, -1
//
// Version 1, which tripod wrote before transactions, lacks lastTimestamp,
// txnFirstOffset, coordEpoch and lastMarker (its producers had no open
// transaction nor marker, and the last batch's maxTimestamp is their last
// timestamp) and has 1..5
// batches per producer; RestoreSnapshot still reads it.
const (
	snapshotVersion       = 2
	snapshotVersionV1     = 1
	snapshotHeaderSize    = 2 + 4 + 8 + 4
	snapshotProducerSize  = 8 + 2 + 8 + 8 + 4 + 1
	snapshotProducerV1    = 8 + 2 + 1
	snapshotBatchSize     = 4 + 4 + 8 + 8 + 8 + 1
	snapshotTransactional = 1
)

// snapshotCRC is the CRC-32C table of producer snapshots.
var snapshotCRC = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the state as the producer snapshot at log offset
// offset (the log end offset the state describes), in version 2. Equal
// states give equal bytes.
func (p *Producers) Snapshot(offset int64) []byte {
	ids := slices.Sorted(maps.Keys(p.entries))
	size := snapshotHeaderSize
	for _, id := range ids {
		size += snapshotProducerSize + len(p.entries[id].batches)*snapshotBatchSize
	}
	size += 8 // lastMarker
	b := make([]byte, 6, size)
	binary.BigEndian.PutUint16(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := p.entries[id]
		txnFirst, ok := p.txns.open[id]
		if !ok {
			txnFirst = -1
		}
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = binary.BigEndian.AppendUint64(b, uint64(txnFirst))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = append(b, byte(len(e.batches)))
		for _, batch := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(batch.BaseSequence))
			b = binary.BigEndian.AppendUint32(b, uint32(batch.LastSequence))
			b = binary.BigEndian.AppendUint64(b, uint64(batch.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(batch.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(batch.MaxTimestamp))
			var flags byte
			if batch.Transactional {
				flags |= snapshotTransactional
			}
			b = append(b, flags)
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(p.txns.lastMarker))
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], snapshotCRC))
	return b
}

// RestoreSnapshot replaces the state with the one data encodes (as
// Snapshot wrote it, version 2, or version 1), which must be the
// snapshot at log offset offset. Every field is checked: the CRC, the
// version, the offset, ascending producer ids, batch counts, batch
// offsets ascending below offset, open transactions' first offsets and
// the latest marker's offset below offset. The transactions are those the
// snapshot holds open, and a later truncation at or below its latest
// marker asks for a reload (TruncateTo), as the transaction that marker
// ended is open again.
//
// Errors wrap ErrCorruptSnapshot and say what is wrong; the state is then
// unchanged.
func (p *Producers) RestoreSnapshot(data []byte, offset int64) error {
	entries, open, lastMarker, err := decodeSnapshot(data, offset)
	if err != nil {
		return fmt.Errorf("%w at offset %d: %s", ErrCorruptSnapshot, offset, err)
	}
	p.entries = entries
	p.txns.Reset()
	maps.Copy(p.txns.open, open)
	p.txns.lastMarker = lastMarker
	return nil
}

// decodeSnapshot implements RestoreSnapshot; its errors say what is
// wrong, without the sentinel.
func decodeSnapshot(data []byte, offset int64) (_ map[int64]*producerEntry, _ map[int64]int64, lastMarker int64, err error) {
	entries, open, rest, err := decodeSnapshotProducers(data, offset)
	if err != nil {
		return nil, nil, 0, err
	}
	lastMarker = -1
	if binary.BigEndian.Uint16(data) == snapshotVersion {
		if len(rest) < 8 {
			return nil, nil, 0, fmt.Errorf("got %d bytes after the last producer, want the latest marker's offset", len(rest))
		}
		lastMarker, rest = int64(binary.BigEndian.Uint64(rest)), rest[8:]
		if lastMarker < -1 || lastMarker >= offset {
			return nil, nil, 0, fmt.Errorf("got latest marker at offset %d, want -1 or below %d", lastMarker, offset)
		}
	}
	if len(rest) != 0 {
		return nil, nil, 0, fmt.Errorf("got %d bytes after the last producer", len(rest))
	}
	return entries, open, lastMarker, nil
}

// decodeSnapshotProducers decodes the header and the producers of a
// snapshot, returning what follows them.
func decodeSnapshotProducers(data []byte, offset int64) (map[int64]*producerEntry, map[int64]int64, []byte, error) {
	if len(data) < snapshotHeaderSize {
		return nil, nil, nil, fmt.Errorf("got %d bytes, want at least %d", len(data), snapshotHeaderSize)
	}
	version := int16(binary.BigEndian.Uint16(data))
	producerSize := snapshotProducerSize
	switch version {
	case snapshotVersion:
	case snapshotVersionV1:
		producerSize = snapshotProducerV1
	default:
		return nil, nil, nil, fmt.Errorf("got version %d, want %d or %d", version, snapshotVersionV1, snapshotVersion)
	}
	if got, want := crc32.Checksum(data[6:], snapshotCRC), binary.BigEndian.Uint32(data[2:]); got != want {
		return nil, nil, nil, fmt.Errorf("got CRC-32C %#08x, want %#08x", got, want)
	}
	if got := int64(binary.BigEndian.Uint64(data[6:])); got != offset {
		return nil, nil, nil, fmt.Errorf("got snapshot of offset %d, want %d", got, offset)
	}
	count := int64(binary.BigEndian.Uint32(data[14:]))
	rest := data[snapshotHeaderSize:]
	if count < 0 || count > int64(len(rest)/producerSize) {
		return nil, nil, nil, fmt.Errorf("got %d producers in %d bytes", count, len(rest))
	}
	entries := make(map[int64]*producerEntry, count)
	open := make(map[int64]int64)
	prevID := int64(-1)
	for i := range count {
		if len(rest) < producerSize {
			return nil, nil, nil, fmt.Errorf("producer %d: cut short", i)
		}
		id := int64(binary.BigEndian.Uint64(rest))
		epoch := int16(binary.BigEndian.Uint16(rest[8:]))
		lastTimestamp, txnFirst, coordinatorEpoch, minBatches := int64(-1), int64(-1), int32(-1), 1
		if version == snapshotVersion {
			lastTimestamp = int64(binary.BigEndian.Uint64(rest[10:]))
			txnFirst = int64(binary.BigEndian.Uint64(rest[18:]))
			coordinatorEpoch = int32(binary.BigEndian.Uint32(rest[26:]))
			minBatches = 0
		}
		n := int(rest[producerSize-1])
		rest = rest[producerSize:]
		if id <= prevID {
			return nil, nil, nil, fmt.Errorf("producer %d: got id %d after %d, want ascending ids from 0", i, id, prevID)
		}
		if n < minBatches || n > ProducerBatchesRetained || len(rest) < n*snapshotBatchSize {
			return nil, nil, nil, fmt.Errorf("producer %d: got %d batches in %d bytes, want %d..%d", id, n, len(rest), minBatches, ProducerBatchesRetained)
		}
		if txnFirst < -1 || txnFirst >= offset {
			return nil, nil, nil, fmt.Errorf("producer %d: got open transaction at offset %d, want -1 or below %d", id, txnFirst, offset)
		}
		e := &producerEntry{epoch: epoch, batches: make([]BatchMeta, n, ProducerBatchesRetained), lastTimestamp: lastTimestamp, coordinatorEpoch: coordinatorEpoch}
		next := int64(0)
		for j := range e.batches {
			b := BatchMeta{
				ProducerID:    id,
				ProducerEpoch: epoch,
				BaseSequence:  int32(binary.BigEndian.Uint32(rest)),
				LastSequence:  int32(binary.BigEndian.Uint32(rest[4:])),
				FirstOffset:   int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:    int64(binary.BigEndian.Uint64(rest[16:])),
				MaxTimestamp:  int64(binary.BigEndian.Uint64(rest[24:])),
				Transactional: rest[32]&snapshotTransactional != 0,
			}
			rest = rest[snapshotBatchSize:]
			if b.FirstOffset < next || b.LastOffset < b.FirstOffset || b.LastOffset >= offset {
				return nil, nil, nil, fmt.Errorf("producer %d batch %d: got offsets %d..%d, want ascending from %d and below %d",
					id, j, b.FirstOffset, b.LastOffset, next, offset)
			}
			next = b.LastOffset + 1
			e.batches[j] = b
		}
		if version == snapshotVersionV1 {
			e.lastTimestamp = e.batches[n-1].MaxTimestamp
		}
		if txnFirst >= 0 {
			open[id] = txnFirst
		}
		entries[id] = e
		prevID = id
	}
	return entries, open, rest, nil
}
