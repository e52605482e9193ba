// Package verify checks a history of Kafka writes and reads for the
// anomalies Jepsen's Kafka checker names: lost writes, duplicates,
// inconsistent offsets, non-monotonic and skipped reads, and writes read at
// another offset than their acknowledgement named. It owns the history
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
)

// Kinds lists every Kind in table order.
var Kinds = []Kind{Idempotent, Plain, AcksOne}

// String returns the kind's name as tables and flags spell it.
func (k Kind) String() string {
	switch k {
	case Idempotent:
		return "idempotent"
	case Plain:
		return "plain"
	case AcksOne:
		return "acks1"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind returns the Kind named s ("idempotent", "plain", "acks1").
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("producer kind %q: must be idempotent, plain or acks1", s)
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
}

// Consumer is one consumer's reads, in the order it polled them.
type Consumer struct {
	// Name names the consumer in examples.
	Name string
	// Final is true for a consumer that read every partition from its
	// start to its end offset after the faults were healed: a value
	// missing from its reads is missing from the log.
	Final bool
	// Reads are the records read, in poll order.
	Reads []Read
}

// Read is one record a consumer read.
type Read struct {
	Partition int32
	Offset    int64
	Value     string
}
