package bench

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// failoverValueSize is the size of a benchmark record's value: its
// sequence number (8 bytes) and its partition (4 bytes).
const failoverValueSize = 12

// encodeFailoverValue returns the value of record seq of the partition
// the benchmark numbers partition (failoverTopics).
func encodeFailoverValue(partition int32, seq uint64) []byte {
	v := make([]byte, failoverValueSize)
	binary.BigEndian.PutUint64(v, seq)
	binary.BigEndian.PutUint32(v[8:], uint32(partition))
	return v
}

// decodeFailoverValue returns the partition number and sequence number a
// value carries, and false when it is not a benchmark record.
func decodeFailoverValue(v []byte) (partition int32, seq uint64, ok bool) {
	if len(v) != failoverValueSize {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(v[8:])), binary.BigEndian.Uint64(v), true
}

// Record states, one byte per record sent.
const (
	recordAcked  uint8 = 1 << iota // acknowledged
	recordFailed                   // failed for good
	recordSeen                     // read back
	recordDup                      // read back more than once
)

// ackTracker follows every record of a series: its acknowledgement or
// failure and whether it was read back, and per partition the time and
// broker of the acknowledgements around a kill. Partitions are the
// benchmark's numbers (failoverTopics). It is the producer's hook
// (OnProduceBatchWritten) and record callback; its methods are safe for
// concurrent use.
type ackTracker struct {
	topics   failoverTopics
	mu       sync.Mutex
	parts    []ackPartition
	failed   int64
	firstErr error
	foreign  int64

	// armed, victims and killAt describe the run being measured.
	armed   bool
	victims []int32
	killAt  time.Time
	waiting int // affected partitions without an acknowledgement from a new leader

	// sampling makes done keep every acknowledgement's latency in
	// samples (bench migrate).
	sampling bool
	samples  []ackSample
}

// ackSample is one acknowledged record: when it was acknowledged, and how
// long after the producer was given it.
type ackSample struct {
	at      time.Time
	latency time.Duration
}

// startSampling makes the tracker keep the latency of every record
// acknowledged from now on.
func (t *ackTracker) startSampling() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sampling = true
}

// takeSamples returns the latencies kept, in acknowledgement order.
func (t *ackTracker) takeSamples() []ackSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.samples)
}

// ackPartition is one partition's records and acknowledgement times.
type ackPartition struct {
	states   []uint8 // by sequence number
	resolved int     // records acknowledged or failed
	firstAck time.Time
	lastAck  time.Time

	affected       bool
	lastBefore     time.Time // last acknowledgement from a killed leader
	firstAfter     time.Time // first acknowledgement from a live broker after the kill
	firstAfterNode int32
}

// newAckTracker returns a tracker of the first partitions partitions of
// topics.
func newAckTracker(topics failoverTopics, partitions int) *ackTracker {
	return &ackTracker{topics: topics, parts: make([]ackPartition, partitions)}
}

// next returns partition's next sequence number and counts it as sent.
func (t *ackTracker) next(partition int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := &t.parts[partition]
	p.states = append(p.states, 0)
	return uint64(len(p.states) - 1)
}

// done is the record callback: it marks the record acknowledged or failed.
func (t *ackTracker) done(r *kgo.Record, err error) {
	partition, seq, ok := decodeFailoverValue(r.Value)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok || int(partition) >= len(t.parts) || seq >= uint64(len(t.parts[partition].states)) {
		return
	}
	t.parts[partition].resolved++
	if err != nil {
		t.parts[partition].states[seq] |= recordFailed
		t.failed++
		if t.firstErr == nil {
			t.firstErr = fmt.Errorf("partition %d sequence %d: %w", partition, seq, err)
		}
		return
	}
	t.parts[partition].states[seq] |= recordAcked
	if t.sampling {
		// franz-go sets a record's timestamp when it is produced.
		now := time.Now()
		t.samples = append(t.samples, ackSample{at: now, latency: now.Sub(r.Timestamp)})
	}
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten: it notes
// when and from which broker a partition's batch was acknowledged.
func (t *ackTracker) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, partition int32, _ kgo.ProduceBatchMetrics) {
	now := time.Now()
	n := t.topics.number(topic, partition)
	t.mu.Lock()
	defer t.mu.Unlock()
	if n < 0 || n >= len(t.parts) {
		return
	}
	p := &t.parts[n]
	if p.firstAck.IsZero() {
		p.firstAck = now
	}
	p.lastAck = now
	if !t.armed || !p.affected || !p.firstAfter.IsZero() {
		return
	}
	if slices.Contains(t.victims, meta.NodeID) {
		// An answer a killed leader sent before it died.
		p.lastBefore = now
		return
	}
	p.firstAfter, p.firstAfterNode = now, meta.NodeID
	t.waiting--
}

// staleSince returns a partition with no acknowledgement since since, or
// -1 when every partition has one.
func (t *ackTracker) staleSince(since time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.parts {
		if !t.parts[i].lastAck.After(since) {
			return i
		}
	}
	return -1
}

// lastFirstAck returns the latest of the partitions' first
// acknowledgements, or zero while a partition has had none.
func (t *ackTracker) lastFirstAck() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for i := range t.parts {
		if t.parts[i].firstAck.IsZero() {
			return time.Time{}
		}
		if t.parts[i].firstAck.After(last) {
			last = t.parts[i].firstAck
		}
	}
	return last
}

// backlogged returns a partition with more than limit records sent and
// neither acknowledged nor failed, or -1 when there is none.
func (t *ackTracker) backlogged(limit int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.parts {
		if len(t.parts[i].states)-t.parts[i].resolved > limit {
			return i
		}
	}
	return -1
}

// arm starts measuring a kill of victims, which lead affected, and
// returns the kill time: every acknowledgement noted after arm returns
// comes later.
func (t *ackTracker) arm(victims, affected []int32) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed, t.victims, t.killAt, t.waiting = true, victims, time.Now(), len(affected)
	for _, p := range affected {
		ap := &t.parts[p]
		ap.affected, ap.lastBefore, ap.firstAfter, ap.firstAfterNode = true, ap.lastAck, time.Time{}, -1
	}
	return t.killAt
}

// pending returns how many affected partitions have had no
// acknowledgement from a new leader yet.
func (t *ackTracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waiting
}

// partitionAcks is one affected partition's acknowledgements around a
// kill.
type partitionAcks struct {
	lastBefore, firstAfter time.Time
	firstAfterNode         int32
}

// disarm ends the measurement and returns each affected partition's
// acknowledgements.
func (t *ackTracker) disarm() map[int32]partitionAcks {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int32]partitionAcks{}
	for i := range t.parts {
		ap := &t.parts[i]
		if ap.affected {
			out[int32(i)] = partitionAcks{lastBefore: ap.lastBefore, firstAfter: ap.firstAfter, firstAfterNode: ap.firstAfterNode}
			ap.affected = false
		}
	}
	t.armed = false
	return out
}

// seen marks the record a value consumed from topic's partition names as
// read back.
func (t *ackTracker) seen(topic string, partition int32, value []byte) {
	p, seq, ok := decodeFailoverValue(value)
	n := t.topics.number(topic, partition)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok || n < 0 || int(p) != n || n >= len(t.parts) || seq >= uint64(len(t.parts[p].states)) {
		t.foreign++
		return
	}
	st := &t.parts[p].states[seq]
	if *st&recordSeen != 0 {
		*st |= recordDup
	}
	*st |= recordSeen
}

// failedCount returns how many records failed for good.
func (t *ackTracker) failedCount() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// firstError returns the first record failure, or nil.
func (t *ackTracker) firstError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.firstErr
}

// fill counts the series' records: produced, acknowledged, failed, read
// back, read twice, and acknowledged but not read back (lost).
func (t *ackTracker) fill(s *failoverSeries) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Produced, s.Acked, s.Consumed, s.Duplicates, s.Lost, s.LostSample = 0, 0, 0, 0, 0, nil
	s.Failed = t.failed
	for p := range t.parts {
		for seq, st := range t.parts[p].states {
			s.Produced++
			if st&recordAcked != 0 {
				s.Acked++
			}
			if st&recordSeen != 0 {
				s.Consumed++
			}
			if st&recordDup != 0 {
				s.Duplicates++
			}
			if st&recordAcked != 0 && st&recordSeen == 0 {
				s.Lost++
				if len(s.LostSample) < 20 {
					s.LostSample = append(s.LostSample, fmt.Sprintf("%s/%d", t.topics.name(p), seq))
				}
			}
		}
	}
}
