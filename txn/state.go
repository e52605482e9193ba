package txn

import "github.com/twmb/franz-go/pkg/kmsg"

// State is a transactional id's state, with Kafka's numbering (the
// TransactionStatus of a __transaction_state value).
type State int8

// The states of a transactional id, as Kafka's TransactionState.
const (
	// Empty: no transaction is open (a producer id was just handed out).
	Empty State = 0
	// Ongoing: partitions were added; the transaction is open.
	Ongoing State = 1
	// PrepareCommit and PrepareAbort: EndTxn was stored; the markers are
	// being written.
	PrepareCommit State = 2
	PrepareAbort  State = 3
	// CompleteCommit and CompleteAbort: every marker was written.
	CompleteCommit State = 4
	CompleteAbort  State = 5
	// Dead: the transactional id expired and is being removed.
	Dead State = 6
	// PrepareEpochFence: the open transaction is being aborted because a
	// newer producer of the id, or its timeout, fenced the epoch. It is
	// only ever a pending state: the abort that follows is stored as
	// PrepareAbort.
	PrepareEpochFence State = 7
)

// String is the state's name as Kafka's ListTransactions and
// kafka-transactions.sh print it.
func (s State) String() string { return kmsg.TransactionState(s).String() }

// previous lists, for each state, the states it may follow (Kafka's
// TransactionState.validPreviousStates).
var previous = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// CanFollow reports whether a transactional id in state from may move to
// state to.
func CanFollow(from, to State) bool {
	for _, s := range previous[to] {
		if s == from {
			return true
		}
	}
	return false
}

// valid reports whether s is one of the eight states.
func (s State) valid() bool { return s >= Empty && s <= PrepareEpochFence }
