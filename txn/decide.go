package txn

import "github.com/twmb/franz-go/pkg/kerr"

// Code is a Kafka error code (0: none).
type Code = int16

// The codes the coordinator's decisions answer.
var (
	ProducerFenced            = kerr.ProducerFenced.Code
	ConcurrentTransactions    = kerr.ConcurrentTransactions.Code
	InvalidProducerIDMapping  = kerr.InvalidProducerIDMapping.Code
	InvalidTxnState           = kerr.InvalidTxnState.Code
	InvalidTransactionTimeout = kerr.InvalidTransactionTimeout.Code
	InvalidRequest            = kerr.InvalidRequest.Code
)

// Limits are the coordinator's bounds (Kafka's TransactionConfig).
type Limits struct {
	// MaxTimeoutMs is transaction.max.timeout.ms: the largest
	// transaction.timeout.ms a producer may ask for.
	MaxTimeoutMs int32
	// ExpirationMs is transactional.id.expiration.ms: how long an id
	// with no open transaction is kept after its last change.
	ExpirationMs int64
}

// InitDecision is what InitProducerID decided.
type InitDecision struct {
	// Code, when not 0, is the answer (and nothing is prepared).
	Code Code
	// Transit is the prepared change to store; then Complete it and
	// answer its ProducerID and ProducerEpoch.
	Transit Transit
	// NeedProducerID: the epoch is exhausted; call InitProducerID again
	// with a producer id from the broker's blocks.
	NeedProducerID bool
	// AbortFirst: the id holds an open transaction, whose producer the
	// Transit (PrepareAbort) fences; store it, write the abort markers,
	// complete the abort, and answer the client CONCURRENT_TRANSACTIONS,
	// which it retries.
	AbortFirst bool
}

// ValidTimeout checks a producer's transaction.timeout.ms against
// transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT otherwise.
func (l Limits) ValidTimeout(timeoutMs int32) Code {
	if timeoutMs <= 0 || timeoutMs > l.MaxTimeoutMs {
		return InvalidTransactionTimeout
	}
	return 0
}

// InitProducerID decides an InitProducerId of m's transactional id
// (Kafka's handleInitProducerId with a transactional id). expectedID and
// expectedEpoch are the producer id and epoch the request names (KIP-360),
// both -1 when it names none; newID is a producer id from the broker's
// blocks, or NoProducerID before one is taken (the decision then asks for
// one when it needs it).
func (m *Metadata) InitProducerID(l Limits, timeoutMs int32, expectedID int64, expectedEpoch int16, newID int64, nowMs int64) (InitDecision, error) {
	if code := l.ValidTimeout(timeoutMs); code != 0 {
		return InitDecision{Code: code}, nil
	}
	if m.hasPending {
		return InitDecision{Code: ConcurrentTransactions}, nil
	}
	hasExpected := expectedID != NoProducerID || expectedEpoch != NoProducerEpoch
	if hasExpected && !m.validExpected(expectedID, expectedEpoch) {
		return InitDecision{Code: ProducerFenced}, nil
	}
	switch m.State {
	case PrepareAbort, PrepareCommit:
		return InitDecision{Code: ConcurrentTransactions}, nil
	case CompleteAbort, CompleteCommit, Empty:
		if epochExhausted(m.ProducerEpoch) && (!hasExpected || expectedEpoch == m.ProducerEpoch) {
			if newID == NoProducerID {
				return InitDecision{NeedProducerID: true}, nil
			}
			t, err := m.PrepareRotateProducerID(newID, timeoutMs, hasExpected, nowMs)
			return InitDecision{Transit: t}, err
		}
		t, code, err := m.PrepareIncrementEpoch(timeoutMs, expectedEpoch, hasExpected, nowMs)
		return InitDecision{Code: code, Transit: t}, err
	case Ongoing:
		t, err := m.PrepareFenceAndAbort(nowMs)
		return InitDecision{Transit: t, AbortFirst: true}, err
	}
	return InitDecision{}, illegal("transactional id %q: InitProducerId in %v", m.TransactionalID, m.State)
}

// validExpected is Kafka's isValidProducerId: a producer naming its id and
// epoch is fenced unless the metadata was just created (no epoch yet),
// the id is the current one (its epoch is checked by the bump), or it is
// the previous one at its exhausted epoch (the retry of a rotation).
func (m *Metadata) validExpected(expectedID int64, expectedEpoch int16) bool {
	return m.ProducerEpoch == NoProducerEpoch ||
		expectedID == m.ProducerID ||
		(expectedID == m.LastProducerID && epochExhausted(expectedEpoch))
}

// checkProducer answers the requests of an open transaction from producer
// id at epoch: INVALID_PRODUCER_ID_MAPPING for another id,
// PRODUCER_FENCED for another epoch, CONCURRENT_TRANSACTIONS while a
// change is pending.
func (m *Metadata) checkProducer(id int64, epoch int16) Code {
	switch {
	case id != m.ProducerID:
		return InvalidProducerIDMapping
	case epoch != m.ProducerEpoch:
		return ProducerFenced
	case m.hasPending:
		return ConcurrentTransactions
	}
	return 0
}

// AddPartitions decides an AddPartitionsToTxn (and an AddOffsetsToTxn,
// with the group's __consumer_offsets partition) of producer id at epoch
// (Kafka's handleAddPartitionsToTransaction): a code to answer at once, or
// a Transit to store and complete before answering. Partitions already
// in the open transaction are answered at once.
func (m *Metadata) AddPartitions(id int64, epoch int16, tps []TopicPartition, nowMs int64) (Code, *Transit, error) {
	if code := m.checkProducer(id, epoch); code != 0 {
		return code, nil, nil
	}
	switch m.State {
	case PrepareCommit, PrepareAbort:
		return ConcurrentTransactions, nil, nil
	case Ongoing:
		added := false
		for _, tp := range tps {
			if _, ok := m.Partitions[tp]; !ok {
				added = true
				break
			}
		}
		if !added {
			return 0, nil, nil
		}
	}
	t, err := m.PrepareAddPartitions(tps, nowMs)
	if err != nil {
		return 0, nil, err
	}
	return 0, &t, nil
}

// VerifyPartition answers the broker-side check of KIP-890 part 1: a
// leader asks whether producer id at epoch has tp in an open transaction
// before it appends a transactional batch, so that a late write cannot
// join a transaction that ended. 0 when it has; INVALID_TXN_STATE when
// the transaction is not open or tp was not added.
func (m *Metadata) VerifyPartition(id int64, epoch int16, tp TopicPartition) Code {
	if code := m.checkProducer(id, epoch); code != 0 && code != ConcurrentTransactions {
		return code
	}
	if m.State != Ongoing {
		return InvalidTxnState
	}
	if _, ok := m.Partitions[tp]; !ok {
		return InvalidTxnState
	}
	return 0
}

// EndTxn decides a client's EndTxn of producer id at epoch (Kafka's
// handleEndTransaction from a client): a code to answer at once (0 for
// the retry of an end already complete), or the PrepareCommit or
// PrepareAbort Transit to store; once stored the client is answered and
// the markers are written.
func (m *Metadata) EndTxn(id int64, epoch int16, commit bool, nowMs int64) (Code, *Transit, error) {
	if code := m.checkProducer(id, epoch); code != 0 {
		return code, nil, nil
	}
	switch m.State {
	case Ongoing:
		state := PrepareAbort
		if commit {
			state = PrepareCommit
		}
		t, err := m.PrepareAbortOrCommit(state, nowMs)
		if err != nil {
			return 0, nil, err
		}
		return 0, &t, nil
	case CompleteCommit:
		if commit {
			return 0, nil, nil
		}
	case CompleteAbort:
		if !commit {
			return 0, nil, nil
		}
	case PrepareCommit:
		if commit {
			return ConcurrentTransactions, nil, nil
		}
	case PrepareAbort:
		if !commit {
			return ConcurrentTransactions, nil, nil
		}
	case Empty:
	default:
		return 0, nil, illegal("transactional id %q: EndTxn in %v", m.TransactionalID, m.State)
	}
	return InvalidTxnState, nil, nil
}

// TimedOut reports whether m's open transaction outlived its
// transaction.timeout.ms at nowMs, with no change pending: the
// coordinator then fences its producer and aborts it
// (PrepareFenceAndAbort).
func (m *Metadata) TimedOut(nowMs int64) bool {
	return m.State == Ongoing && !m.hasPending && m.StartMs+int64(m.TimeoutMs) < nowMs
}

// Expired reports whether m's transactional id, with no transaction open
// and no change pending, was last changed more than
// transactional.id.expiration.ms before nowMs: the coordinator then
// forgets it (PrepareDead, stored as a tombstone).
func (m *Metadata) Expired(l Limits, nowMs int64) bool {
	switch m.State {
	case Empty, CompleteCommit, CompleteAbort:
		return !m.hasPending && m.LastUpdateMs+l.ExpirationMs <= nowMs
	}
	return false
}
