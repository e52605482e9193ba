package log

import "fmt"

// ProducerState is a partition's idempotent producer state
// (replication.Producers) as the log rebuilds and persists it: the log
// reads batch headers and producer snapshot files, the state decides
// what they mean. The log never decodes a snapshot itself.
type ProducerState interface {
	// Reset forgets every producer.
	Reset()
	// ForgetBelow drops the batches the state holds that end below
	// offset, and the producers left with none.
	ForgetBelow(offset int64)
	// Replay records a batch that the log holds, at the offsets the log
	// gave it, and returns the aborted-transaction index entry of an
	// abort marker (nil for any other batch), which the log adds to its
	// index if it lacks it.
	Replay(h BatchInfo) *AbortedTxn
	// Snapshot encodes the state as of offset.
	Snapshot(offset int64) []byte
	// RestoreSnapshot replaces the state with the snapshot data taken at
	// offset; an error leaves the state as it was.
	RestoreSnapshot(data []byte, offset int64) error
}

// loadChunkBytes is how much of the log LoadProducers reads at a time.
const loadChunkBytes = 1 << 20

// LoadProducers makes p forget every producer and rebuilds it from the
// whole log, StartOffset to EndOffset: p.Reset, then
// LoadProducersFrom(p, StartOffset). It reads every byte of the log;
// RecoverProducers reads only what follows the latest producer snapshot.
func (l *Log) LoadProducers(p ProducerState) error {
	p.Reset()
	return l.LoadProducersFrom(p, l.StartOffset())
}

// LoadProducersFrom replays the batches of the log from offset from to
// EndOffset into p, on top of its current state, which must describe the
// log below from (empty for from = StartOffset, or restored from the
// snapshot at from). It first makes p forget the batches below
// StartOffset, which retention removed, and the producers left with
// none, so that the result equals a LoadProducers of the whole log. It
// reads the log in chunks of 1 MiB and parses batch headers only (the
// log verified their CRC when it appended them); a batch that ends below
// from (a read starts at the batch holding from) is skipped. The caller
// holds the partition's append lock, so the log does not grow meanwhile.
//
// Errors: the log's read errors (ErrClosed, ErrOffsetOutOfRange for
// from outside the log, or if retention moved the start meanwhile) and
// ErrCorruptMessage for a malformed header; p is then partial and a
// LoadProducers should follow.
func (l *Log) LoadProducersFrom(p ProducerState, from int64) error {
	start, end := l.StartOffset(), l.EndOffset()
	if from < start || from > end {
		return fmt.Errorf("load producer state from offset %d: %w: log holds %d..%d", from, ErrOffsetOutOfRange, start, end)
	}
	p.ForgetBelow(start)
	offset := from
	for offset < end {
		data, err := l.Read(offset, loadChunkBytes)
		if err != nil {
			return fmt.Errorf("load producer state at offset %d: %w", offset, err)
		}
		if len(data) == 0 {
			return fmt.Errorf("load producer state at offset %d: %w: empty read below the log end offset %d", offset, ErrCorruptMessage, end)
		}
		var aborted []AbortedTxn
		err = EachBatch(data, false, func(h BatchInfo) {
			if h.LastOffset >= from {
				if a := p.Replay(h); a != nil {
					aborted = append(aborted, *a)
				}
			}
			offset = h.LastOffset + 1
		})
		// The entries of the markers read so far, which a crash may have
		// kept from the index (AppendAbortedTxn skips those it holds).
		for _, a := range aborted {
			if aerr := l.AppendAbortedTxn(a); aerr != nil && err == nil {
				err = aerr
			}
		}
		if err != nil {
			return fmt.Errorf("load producer state at offset %d: %w", offset, err)
		}
	}
	return nil
}

// ProducerLoad says how RecoverProducers rebuilt a partition's producer
// state.
type ProducerLoad struct {
	// SnapshotOffset is the offset of the producer snapshot the state was
	// restored from, -1 if none was usable.
	SnapshotOffset int64
	// From and To are the offsets the log was read from and to (the log
	// end offset); From is SnapshotOffset, or the log start offset.
	From, To int64
	// Skipped are the snapshots RecoverProducers could not use and
	// deleted (an unreadable or corrupt file), each error naming its
	// offset; the broker logs them as warnings.
	Skipped []error
}

// RecoverProducers rebuilds p from the latest usable producer snapshot
// of the log and the log after it, as Kafka's ProducerStateManager loads
// its latest snapshot and replays the segments above it. Snapshots are
// tried newest first; one below the log start offset is not used
// (retention removed what follows it), and one that cannot be read or
// that p cannot restore is deleted and reported in ProducerLoad.Skipped.
// Without a usable snapshot RecoverProducers reads the whole log
// (LoadProducers). The log deletes the snapshots above its end (on open
// and on truncation), so every snapshot describes a prefix of the log.
// The result equals LoadProducers', except that a producer p expired
// before the snapshot was written stays forgotten. The caller holds the
// partition's append lock.
//
// Errors: those of LoadProducersFrom, and ErrClosed from the snapshot
// files; p is then partial.
func (l *Log) RecoverProducers(p ProducerState) (ProducerLoad, error) {
	start, end := l.StartOffset(), l.EndOffset()
	load := ProducerLoad{SnapshotOffset: -1, From: start, To: end}
	offsets, err := l.ProducerSnapshots()
	if err != nil {
		return load, err
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		offset := offsets[i]
		if offset < start || offset > end {
			continue
		}
		data, err := l.ReadProducerSnapshot(offset)
		if err == nil {
			err = p.RestoreSnapshot(data, offset)
		}
		if err != nil {
			load.Skipped = append(load.Skipped, err)
			if derr := l.DeleteProducerSnapshot(offset); derr != nil {
				return load, derr
			}
			continue
		}
		load.SnapshotOffset, load.From = offset, offset
		if err := l.LoadProducersFrom(p, offset); err != nil {
			return load, err
		}
		return load, nil
	}
	return load, l.LoadProducers(p)
}

// SnapshotProducers writes p as the producer snapshot at the log end
// offset (WriteProducerSnapshot, which keeps the newest
// ProducerSnapshotsRetained) and returns that offset. The caller holds
// the partition's append lock, so p describes exactly the log below that
// offset.
//
// Errors: ErrClosed and the file system's.
func (l *Log) SnapshotProducers(p ProducerState) (int64, error) {
	offset := l.EndOffset()
	if err := l.syncTxnIndexes(); err != nil {
		return offset, err
	}
	if err := l.WriteProducerSnapshot(offset, p.Snapshot(offset)); err != nil {
		return offset, err
	}
	return offset, nil
}
