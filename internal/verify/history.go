// Package verify checks a history of Kafka writes and reads for the
// anomalies Jepsen's Kafka checker names: lost writes, duplicates,
// inconsistent offsets, non-monotonic and skipped reads, writes read at
// another offset than their acknowledgement named, and for transactions
// aborted reads (G1a), transactions read in part, and a
// consume-transform-produce stage that loses or repeats its input. It owns the history
// model and the checks; it must not do I/O, so that `tripod verify` (which
// runs the workload and the faults) and its table tests feed it the same
// way and every check runs in microseconds.
package verify

import "fmt"

// Kind is how a producer writes, which decides what counts as an anomaly
// in its records.
type Kind int

const (
	// Idempotent is an idempotent producer with acks=all: it must lose
	// nothing acknowledged and write nothing twice.
	Idempotent Kind = iota
	// Plain is a non-idempotent producer with acks=all: it must lose
	// nothing acknowledged, but its retries may write a record twice.
	Plain
	// AcksOne is a producer with acks=1: a leader that dies before its
	// followers copied a record loses it, so its losses are expected.
	AcksOne
	// Transactional is a transactional producer (acks=all, idempotent):
	// the writes of a committed transaction must all be read, once; those
	// of an aborted one never by a read_committed consumer.
	Transactional
)

// Kinds lists every Kind in table order.
var Kinds = []Kind{Idempotent, Plain, AcksOne, Transactional}

// String returns the kind's name as tables and flags spell it.
func (k Kind) String() string {
	switch k {
	case Idempotent:
		return "idempotent"
	case Plain:
		return "plain"
	case AcksOne:
		return "acks1"
	case Transactional:
		return "txn"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind returns the Kind named s ("idempotent", "plain", "acks1",
// "txn").
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("producer kind %q: must be idempotent, plain, acks1 or txn", s)
}

// MarshalText implements encoding.TextMarshaler, so that kinds are names
// in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	parsed, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// History is everything a run did: every write attempted and, per
// consumer, every record read in the order polled. Values are unique per
// write attempt (a producer's name and sequence number), which is what
// lets a read name the write it comes from.
type History struct {
	// Producers names every producer and its kind.
	Producers []Producer
	// Writes holds every write attempted, acknowledged or not.
	Writes []Write
	// Consumers holds every consumer's reads.
	Consumers []Consumer
	// Txns holds the outcome of every transaction the writes name.
	Txns []Txn
	// Sources are values of another history (a consume-transform-produce
	// stage's input, read up to where the stage committed) whose
	// transformation, a write whose Source names them, the final read
	// must hold exactly once.
	Sources []string
}

// TxnOutcome is how a transaction ended, as its producer saw it.
type TxnOutcome int

const (
	// Committed: EndTxn(commit) succeeded.
	Committed TxnOutcome = iota
	// Aborted: EndTxn(abort) succeeded, or the producer was fenced before
	// it asked to commit.
	Aborted
	// Unknown: the commit was asked and its answer never came or was an
	// error: either outcome is allowed, but for every write of the
	// transaction alike.
	Unknown
)

// Txn is one transaction of a History.
type Txn struct {
	// ID names the transaction; every Write of it names it.
	ID      string
	Outcome TxnOutcome
}

// Producer is one producer of a History.
type Producer struct {
	// Name is the producer's name; every Write names it.
	Name string
	// Kind is how it writes.
	Kind Kind
}

// Write is one record a producer sent.
type Write struct {
	// Producer names the producer that sent it.
	Producer string
	// Value is the record's value, unique in the history.
	Value string
	// Partition is the partition it was sent to.
	Partition int32
	// Acked is true when the broker acknowledged it; a write that failed
	// or whose answer never came may or may not be in the log.
	Acked bool
	// Offset is the offset the acknowledgement named (Acked only).
	Offset int64
	// Txn names the transaction the write was part of ("" for none). A
	// transactional write is Acked when its transaction committed.
	Txn string
	// Source is the value a consume-transform-produce stage read and
	// wrote this record for ("" for none).
	Source string
}

// Consumer is one consumer's reads, in the order it polled them.
type Consumer struct {
	// Name names the consumer in examples.
	Name string
	// Final is true for a consumer that read every partition from its
	// start to its end offset after the faults were healed: a value
	// missing from its reads is missing from the log.
	Final bool
	// Resumed is true for a consumer that starts each partition where it
	// was told to (a group's committed offset), not at offset 0: its
	// first read of a partition is not a skip.
	Resumed bool
	// ReadCommitted is true for a consumer at isolation level
	// read_committed, which must never read an aborted transaction's
	// write.
	ReadCommitted bool
	// Reads are the records read, in poll order.
	Reads []Read
}

// Read is one record a consumer read.
type Read struct {
	Partition int32
	Offset    int64
	Value     string
}
