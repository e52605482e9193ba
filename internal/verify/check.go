package verify

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The checks, named as Jepsen's Kafka checker names them.
const (
	// Lost is an acknowledged write missing from the log: absent from the
	// final read of its partition, or never read by anyone although a
	// later offset of its partition was read.
	Lost = "lost"
	// Duplicated is one value read at two or more offsets.
	Duplicated = "duplicated"
	// InconsistentOffsets is one (partition, offset) read with two or more
	// different values, by one consumer or across consumers.
	InconsistentOffsets = "inconsistent-offsets"
	// NonMonotonic is a consumer reading an offset of a partition at or
	// below one it read before.
	NonMonotonic = "non-monotonic"
	// Skipped is a consumer jumping from offset a to b > a+1 of a
	// partition while some read (by any consumer) saw a value at an
	// offset between them. Every consumer reads from offset 0, so a first
	// read above 0 skips the values known below it. tripod's offsets are
	// contiguous for every consumer but a read_committed one, which steps
	// over aborted writes and transaction markers; no consumer reads
	// either (an aborted read is its own anomaly), so a gap over an offset
	// someone read is a skip.
	Skipped = "skipped"
	// WrongOffset is an acknowledged write read, but never at the
	// (partition, offset) its acknowledgement named.
	WrongOffset = "wrong-offset"
	// AbortedRead is a read_committed consumer reading a write of an
	// aborted transaction (Adya's G1a).
	AbortedRead = "aborted-read"
	// PartialRead is a transaction, committed or of unknown outcome, of
	// which the final read holds some writes but not all.
	PartialRead = "partial-read"
	// TransformLost is a source value (History.Sources) whose
	// transformation the final read does not hold.
	TransformLost = "transform-lost"
	// TransformDuplicated is a source value transformed more than once in
	// the final read: the stage's output and its committed input offsets
	// were not one transaction.
	TransformDuplicated = "transform-duplicated"
)

// Checks lists every check in table order.
var Checks = []string{Lost, Duplicated, InconsistentOffsets, NonMonotonic, Skipped, WrongOffset,
	AbortedRead, PartialRead, TransformLost, TransformDuplicated}

// IsAnomaly reports whether a count of check for producers of kind k is an
// anomaly, rather than a behaviour the kind allows: acks=1 may lose and
// misplace what a dead leader acknowledged alone, and a plain producer's
// retries may duplicate; nothing may read inconsistently, and the
// transaction checks allow nothing.
func IsAnomaly(check string, k Kind) bool {
	switch check {
	case Lost, WrongOffset:
		return k != AcksOne
	case Duplicated:
		return k == Idempotent || k == Transactional
	}
	return true
}

// Counts holds one number per producer kind, and Other for values no
// write of the history sent.
type Counts struct {
	Idempotent    int `json:"idempotent"`
	Plain         int `json:"plain"`
	AcksOne       int `json:"acks1"`
	Transactional int `json:"txn,omitempty"`
	Other         int `json:"other,omitempty"`
}

// Of returns the count of kind k.
func (c Counts) Of(k Kind) int {
	switch k {
	case Idempotent:
		return c.Idempotent
	case Plain:
		return c.Plain
	case AcksOne:
		return c.AcksOne
	case Transactional:
		return c.Transactional
	}
	return 0
}

// Total returns the sum of every count.
func (c Counts) Total() int { return c.Idempotent + c.Plain + c.AcksOne + c.Transactional + c.Other }

// add counts one for kind k, or for Other when known is false.
func (c *Counts) add(k Kind, known bool) {
	switch {
	case !known:
		c.Other++
	case k == Idempotent:
		c.Idempotent++
	case k == Plain:
		c.Plain++
	case k == AcksOne:
		c.AcksOne++
	case k == Transactional:
		c.Transactional++
	}
}

// CheckResult is one check's outcome.
type CheckResult struct {
	// Name is the check, one of Checks.
	Name string `json:"name"`
	// Counts counts the findings per producer kind.
	Counts Counts `json:"counts"`
	// Anomalies counts the findings that are anomalies (IsAnomaly; values
	// of no known write always are).
	Anomalies int `json:"anomalies"`
	// Examples shows up to MaxExamples findings, anomalies first.
	Examples []Example `json:"examples,omitempty"`
}

// MaxExamples bounds the examples kept per check.
const MaxExamples = 5

// Example is one finding of a check.
type Example struct {
	// Value is the value concerned ("" for a finding about an offset).
	Value string `json:"value,omitempty"`
	// Producer and Kind name the producer that wrote Value, when known.
	Producer string `json:"producer,omitempty"`
	Kind     *Kind  `json:"kind,omitempty"`
	// Anomaly is true when the finding is an anomaly for its kind.
	Anomaly bool `json:"anomaly"`
	// Partition is the partition concerned.
	Partition int32 `json:"partition"`
	// Offsets are the offsets concerned: where Value was read, or the
	// consumer's offsets around a bad step, or the one offset read with
	// several values.
	Offsets []int64 `json:"offsets,omitempty"`
	// AckedOffset is the offset Value's acknowledgement named.
	AckedOffset *int64 `json:"acked_offset,omitempty"`
	// Consumer names the consumer whose reads show it, when one does.
	Consumer string `json:"consumer,omitempty"`
	// Detail says what was seen, in a sentence fragment.
	Detail string `json:"detail"`
}

// String formats the example on one line.
func (e Example) String() string {
	var b strings.Builder
	if e.Value != "" {
		fmt.Fprintf(&b, "%s ", e.Value)
	}
	fmt.Fprintf(&b, "partition %d", e.Partition)
	if e.AckedOffset != nil {
		fmt.Fprintf(&b, " acked at %d", *e.AckedOffset)
	}
	if len(e.Offsets) > 0 {
		fmt.Fprintf(&b, " offsets %v", e.Offsets)
	}
	if e.Consumer != "" {
		fmt.Fprintf(&b, " (%s)", e.Consumer)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	return b.String()
}

// Result is the outcome of Check.
type Result struct {
	// Checks holds every check's result, in Checks order.
	Checks []CheckResult `json:"checks"`
	// Attempted counts the writes sent, Acked those acknowledged, Read the
	// distinct written values read by some consumer, per kind.
	Attempted Counts `json:"attempted"`
	Acked     Counts `json:"acked"`
	Read      Counts `json:"read"`
	// Reads counts every record read by every consumer.
	Reads int `json:"reads"`
	// Unknown counts the distinct values read that no write sent.
	Unknown int `json:"unknown_values"`
	// Anomalies is the sum of every check's Anomalies.
	Anomalies int `json:"anomalies"`
}

// Check returns the result of check name.
func (r *Result) Check(name string) *CheckResult {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// position is a (partition, offset).
type position struct {
	partition int32
	offset    int64
}

// comparePositions orders positions by partition, then offset.
func comparePositions(a, b position) int {
	return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
}

// index is what every check looks up: the writes by value, and where each
// value and each offset was read.
type index struct {
	producers map[string]Kind
	writes    map[string]*Write
	// valuesAt holds the distinct values read at each position, in first
	// read order.
	valuesAt map[position][]string
	// positionsOf holds the distinct positions each value was read at,
	// sorted.
	positionsOf map[string][]position
	// inFinal holds the values a final consumer read.
	inFinal  map[string]bool
	hasFinal bool
	// maxRead is the highest offset read of each partition.
	maxRead map[int32]int64
	// known holds, per partition, every offset read by anyone, sorted.
	known map[int32][]int64
}

// newIndex indexes h's writes and reads.
func newIndex(h History) *index {
	ix := &index{
		producers:   map[string]Kind{},
		writes:      map[string]*Write{},
		valuesAt:    map[position][]string{},
		positionsOf: map[string][]position{},
		inFinal:     map[string]bool{},
		maxRead:     map[int32]int64{},
		known:       map[int32][]int64{},
	}
	for _, p := range h.Producers {
		ix.producers[p.Name] = p.Kind
	}
	for i := range h.Writes {
		ix.writes[h.Writes[i].Value] = &h.Writes[i]
	}
	for _, c := range h.Consumers {
		ix.hasFinal = ix.hasFinal || c.Final
		for _, r := range c.Reads {
			pos := position{r.Partition, r.Offset}
			if !slices.Contains(ix.valuesAt[pos], r.Value) {
				if len(ix.valuesAt[pos]) == 0 {
					ix.known[r.Partition] = append(ix.known[r.Partition], r.Offset)
				}
				ix.valuesAt[pos] = append(ix.valuesAt[pos], r.Value)
			}
			if !slices.Contains(ix.positionsOf[r.Value], pos) {
				ix.positionsOf[r.Value] = append(ix.positionsOf[r.Value], pos)
			}
			if c.Final {
				ix.inFinal[r.Value] = true
			}
			if m, ok := ix.maxRead[r.Partition]; !ok || r.Offset > m {
				ix.maxRead[r.Partition] = r.Offset
			}
		}
	}
	for _, ps := range ix.positionsOf {
		slices.SortFunc(ps, comparePositions)
	}
	for _, offs := range ix.known {
		slices.Sort(offs)
	}
	return ix
}

// kindOf returns the kind of the producer that wrote value, and false when
// no write sent it.
func (ix *index) kindOf(value string) (Kind, string, bool) {
	w, ok := ix.writes[value]
	if !ok {
		return 0, "", false
	}
	k, ok := ix.producers[w.Producer]
	return k, w.Producer, ok
}

// offsetsOf returns the offsets value was read at in partition.
func (ix *index) offsetsOf(value string) []int64 {
	var out []int64
	for _, p := range ix.positionsOf[value] {
		out = append(out, p.offset)
	}
	return out
}

// recorder accumulates one check's findings.
type recorder struct {
	ix  *index
	res CheckResult
	// examples are all candidates, trimmed at the end.
	examples []Example
}

// find counts a finding about value (which may be of no known write) and
// keeps ex as a candidate example.
func (rc *recorder) find(value string, ex Example) {
	k, producer, known := rc.ix.kindOf(value)
	rc.res.Counts.add(k, known)
	anomaly := !known || IsAnomaly(rc.res.Name, k)
	if anomaly {
		rc.res.Anomalies++
	}
	if len(rc.examples) < 4*MaxExamples {
		ex.Value, ex.Anomaly = value, anomaly
		if known {
			ex.Producer, ex.Kind = producer, &k
		}
		rc.examples = append(rc.examples, ex)
	}
}

// result returns the check's result with anomalies first among its
// examples.
func (rc *recorder) result() CheckResult {
	slices.SortStableFunc(rc.examples, func(a, b Example) int {
		switch {
		case a.Anomaly == b.Anomaly:
			return 0
		case a.Anomaly:
			return -1
		}
		return 1
	})
	if len(rc.examples) > MaxExamples {
		rc.examples = rc.examples[:MaxExamples]
	}
	rc.res.Examples = rc.examples
	return rc.res
}

// Check runs every check on h. It is deterministic: the same history gives
// the same result, examples included.
func Check(h History) Result {
	ix := newIndex(h)
	var res Result
	for _, w := range h.Writes {
		k, ok := ix.producers[w.Producer]
		res.Attempted.add(k, ok)
		if w.Acked {
			res.Acked.add(k, ok)
		}
		if len(ix.positionsOf[w.Value]) > 0 {
			res.Read.add(k, ok)
		}
	}
	for _, c := range h.Consumers {
		res.Reads += len(c.Reads)
	}
	for v := range ix.positionsOf {
		if _, ok := ix.writes[v]; !ok {
			res.Unknown++
		}
	}
	for _, check := range []func(*index, History) CheckResult{checkLost, checkDuplicated, checkInconsistent, checkNonMonotonic, checkSkipped, checkWrongOffset,
		checkAbortedRead, checkPartialRead, checkTransformLost, checkTransformDuplicated} {
		cr := check(ix, h)
		res.Anomalies += cr.Anomalies
		res.Checks = append(res.Checks, cr)
	}
	return res
}

// newRecorder returns a recorder of check name.
func newRecorder(ix *index, name string) *recorder {
	return &recorder{ix: ix, res: CheckResult{Name: name}}
}

// checkLost finds acknowledged writes missing from the final read of their
// partition, or never read while a later offset of their partition was.
func checkLost(ix *index, h History) CheckResult {
	rc := newRecorder(ix, Lost)
	for _, w := range h.Writes {
		if !w.Acked {
			continue
		}
		read := len(ix.positionsOf[w.Value]) > 0
		acked := w.Offset
		switch {
		case ix.hasFinal && !ix.inFinal[w.Value]:
			detail := "absent from the final read"
			if read {
				detail = fmt.Sprintf("read at %v before, absent from the final read", ix.offsetsOf(w.Value))
			}
			rc.find(w.Value, Example{Partition: w.Partition, AckedOffset: &acked, Detail: detail + atDetail(ix, w.Value, w.Partition, w.Offset)})
		case !read && ix.maxRead[w.Partition] > w.Offset:
			rc.find(w.Value, Example{Partition: w.Partition, AckedOffset: &acked,
				Detail: fmt.Sprintf("never read, offset %d of the partition was", ix.maxRead[w.Partition]) + atDetail(ix, w.Value, w.Partition, w.Offset)})
		}
	}
	return rc.result()
}

// atDetail says what was read at (partition, offset), or "" when nothing
// or only value was.
func atDetail(ix *index, value string, partition int32, offset int64) string {
	vs := ix.valuesAt[position{partition, offset}]
	if len(vs) == 0 || (len(vs) == 1 && vs[0] == value) {
		return ""
	}
	return fmt.Sprintf("; offset %d holds %s", offset, strings.Join(vs, ", "))
}

// checkDuplicated finds values read at two or more positions.
func checkDuplicated(ix *index, h History) CheckResult {
	rc := newRecorder(ix, Duplicated)
	for _, v := range sortedKeys(ix.positionsOf) {
		ps := ix.positionsOf[v]
		if len(ps) < 2 {
			continue
		}
		detail := "read at " + formatPositions(ps)
		ex := Example{Partition: ps[0].partition, Offsets: ix.offsetsOf(v), Detail: detail}
		if w, ok := ix.writes[v]; ok && w.Acked {
			acked := w.Offset
			ex.AckedOffset = &acked
		}
		rc.find(v, ex)
	}
	return rc.result()
}

// checkInconsistent finds positions read with two or more values. A
// position counts once under every kind whose value was read there.
func checkInconsistent(ix *index, h History) CheckResult {
	rc := newRecorder(ix, InconsistentOffsets)
	positions := make([]position, 0, len(ix.valuesAt))
	for pos, vs := range ix.valuesAt {
		if len(vs) > 1 {
			positions = append(positions, pos)
		}
	}
	slices.SortFunc(positions, comparePositions)
	for _, pos := range positions {
		vs := ix.valuesAt[pos]
		seen := map[Kind]bool{}
		other := false
		for _, v := range vs {
			k, _, known := ix.kindOf(v)
			if (known && seen[k]) || (!known && other) {
				continue
			}
			seen[k], other = seen[k] || known, other || !known
			rc.find(v, Example{Partition: pos.partition, Offsets: []int64{pos.offset},
				Detail: fmt.Sprintf("offset %d read as %s", pos.offset, strings.Join(vs, ", "))})
		}
	}
	return rc.result()
}

// checkNonMonotonic finds a consumer reading a partition's offset at or
// below one it read before.
func checkNonMonotonic(ix *index, h History) CheckResult {
	rc := newRecorder(ix, NonMonotonic)
	for _, c := range h.Consumers {
		prev := map[int32]int64{}
		for _, r := range c.Reads {
			if p, ok := prev[r.Partition]; ok && r.Offset <= p {
				rc.find(r.Value, Example{Partition: r.Partition, Offsets: []int64{p, r.Offset}, Consumer: c.Name,
					Detail: fmt.Sprintf("read offset %d after offset %d", r.Offset, p)})
			}
			prev[r.Partition] = r.Offset
		}
	}
	return rc.result()
}

// checkSkipped finds a consumer stepping over offsets of a partition at
// which some read saw a value. A step backwards is checkNonMonotonic's.
func checkSkipped(ix *index, h History) CheckResult {
	rc := newRecorder(ix, Skipped)
	outcomes := txnOutcomes(h)
	// committedAt reports whether a read_committed consumer must read
	// what some consumer read at pos: a value outside any transaction,
	// or of a committed one (a read_uncommitted consumer may have read an
	// aborted write there, or one of a transaction of unknown outcome).
	committedAt := func(pos position) bool {
		for _, v := range ix.valuesAt[pos] {
			w, ok := ix.writes[v]
			if !ok || w.Txn == "" || outcomes[w.Txn] == Committed {
				return true
			}
		}
		return false
	}
	for _, c := range h.Consumers {
		prev := map[int32]int64{}
		for _, r := range c.Reads {
			p, ok := prev[r.Partition]
			if !ok {
				// Every consumer reads from offset 0, but a resumed one
				// from where it was told: its first read is no skip.
				p = -1
			}
			if r.Offset > p+1 && (ok || !c.Resumed) {
				known := ix.known[r.Partition]
				i, _ := slices.BinarySearch(known, p+1)
				for c.ReadCommitted && i < len(known) && known[i] < r.Offset && !committedAt(position{r.Partition, known[i]}) {
					i++
				}
				if i < len(known) && known[i] < r.Offset {
					missed := known[i]
					vs := ix.valuesAt[position{r.Partition, missed}]
					from := fmt.Sprintf("offset %d", p)
					if p < 0 {
						from = "the start"
					}
					rc.find(vs[0], Example{Partition: r.Partition, Offsets: []int64{p, r.Offset}, Consumer: c.Name,
						Detail: fmt.Sprintf("stepped from %s to %d over offset %d holding %s", from, r.Offset, missed, strings.Join(vs, ", "))})
				}
			}
			prev[r.Partition] = r.Offset
		}
	}
	return rc.result()
}

// checkWrongOffset finds acknowledged writes read, but never at the
// position their acknowledgement named.
func checkWrongOffset(ix *index, h History) CheckResult {
	rc := newRecorder(ix, WrongOffset)
	for _, w := range h.Writes {
		ps := ix.positionsOf[w.Value]
		if !w.Acked || len(ps) == 0 || slices.Contains(ps, position{w.Partition, w.Offset}) {
			continue
		}
		acked := w.Offset
		rc.find(w.Value, Example{Partition: w.Partition, AckedOffset: &acked, Offsets: ix.offsetsOf(w.Value),
			Detail: fmt.Sprintf("acknowledged at %d/%d, read at %s", w.Partition, w.Offset, formatPositions(ps)) + atDetail(ix, w.Value, w.Partition, w.Offset)})
	}
	return rc.result()
}

// formatPositions formats positions as partition/offset, comma separated.
func formatPositions(ps []position) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%d/%d", p.partition, p.offset)
	}
	return strings.Join(s, ", ")
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
