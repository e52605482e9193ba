package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// AbortedTxn is an entry of a segment's aborted-transaction index
// (Kafka's AbortedTxn): producer ProducerID's transaction from
// FirstOffset to its abort marker at LastOffset, and the last stable
// offset once the marker was written, which tells a read_committed fetch
// when it has looked at every entry it needs.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnEntrySize is the size of one entry in Kafka's format: version
// (int16, 0), producer id, first offset, last offset and last stable
// offset (int64 each), big-endian.
const (
	txnEntryVersion = 0
	txnEntrySize    = 2 + 8 + 8 + 8 + 8
)

// ErrCorruptTxnIndex is a transaction index that cannot be read: a size
// that is not a whole number of entries, an unknown entry version, or
// entries out of order.
var ErrCorruptTxnIndex = errors.New("log: corrupt transaction index")

// TxnIndex is one segment's aborted-transaction index (Kafka's
// TransactionIndex, the file <base offset>.txnindex beside the segment):
// the aborted transactions whose abort marker the
// segment holds, in marker order, appended as the markers are written and
// read by read_committed fetches. The file is created by the first
// Append. It is not safe for concurrent use: the log calls it under its
// lock.
type TxnIndex struct {
	path    string
	f       *os.File
	entries []AbortedTxn
}

// OpenTxnIndex reads the index at path, which may not exist yet.
func OpenTxnIndex(path string) (*TxnIndex, error) {
	x := &TxnIndex{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read transaction index %s: %w", path, err)
	}
	if len(data)%txnEntrySize != 0 {
		return nil, fmt.Errorf("%w: %s: %d bytes, not a whole number of %d-byte entries", ErrCorruptTxnIndex, path, len(data), txnEntrySize)
	}
	for off := 0; off < len(data); off += txnEntrySize {
		e := data[off : off+txnEntrySize]
		if v := int16(binary.BigEndian.Uint16(e)); v != txnEntryVersion {
			return nil, fmt.Errorf("%w: %s: entry %d has version %d, want %d", ErrCorruptTxnIndex, path, off/txnEntrySize, v, txnEntryVersion)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		if err := x.check(a); err != nil {
			return nil, fmt.Errorf("%w: %s: entry %d: %v", ErrCorruptTxnIndex, path, off/txnEntrySize, err)
		}
		x.entries = append(x.entries, a)
	}
	return x, nil
}

// loadTxnIndex is OpenTxnIndex for a log being opened: an index whose
// last entry is cut short (an append torn by a crash) is cut back to its
// whole entries first, as the producer state's recovery writes the lost
// entries again.
func loadTxnIndex(path string) (*TxnIndex, error) {
	fi, err := os.Stat(path)
	if err == nil && fi.Size()%txnEntrySize != 0 {
		if err := os.Truncate(path, fi.Size()-fi.Size()%txnEntrySize); err != nil {
			return nil, fmt.Errorf("cut torn transaction index %s: %w", path, err)
		}
	}
	return OpenTxnIndex(path)
}

// check refuses an entry that does not follow the index: its marker must
// come after the last one, as Kafka's TransactionIndex.append requires.
func (x *TxnIndex) check(a AbortedTxn) error {
	if a.FirstOffset > a.LastOffset {
		return fmt.Errorf("first offset %d after its marker at %d", a.FirstOffset, a.LastOffset)
	}
	if n := len(x.entries); n > 0 && a.LastOffset <= x.entries[n-1].LastOffset {
		return fmt.Errorf("marker at %d not after the last one, at %d", a.LastOffset, x.entries[n-1].LastOffset)
	}
	return nil
}

// Append adds a, whose marker follows every entry's, and writes it to the
// file (not synced: Flush does).
func (x *TxnIndex) Append(a AbortedTxn) error {
	if err := x.check(a); err != nil {
		return fmt.Errorf("transaction index %s: %w", x.path, err)
	}
	if x.f == nil {
		f, err := os.OpenFile(x.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open transaction index %s: %w", x.path, err)
		}
		x.f = f
	}
	if _, err := x.f.Write(appendTxnEntry(nil, a)); err != nil {
		return fmt.Errorf("write transaction index %s: %w", x.path, err)
	}
	x.entries = append(x.entries, a)
	return nil
}

// appendTxnEntry appends a in the index file's format to b.
func appendTxnEntry(b []byte, a AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, txnEntryVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(a.LastStableOffset))
}

// writeTxnIndexFile writes entries, in marker order, as a whole index
// file at path, fsynced: the cleaner's copy of a segment's index.
func writeTxnIndexFile(path string, entries []AbortedTxn) error {
	data := make([]byte, 0, len(entries)*txnEntrySize)
	for _, a := range entries {
		data = appendTxnEntry(data, a)
	}
	return writeIndexFile(path, data, 0, true)
}

// Collect returns the entries a read_committed fetch from fetchOffset up
// to upperBound (the LSO, or the segment's end) must skip: the aborted
// transactions whose marker is at or after fetchOffset and that began
// before upperBound. complete says that no later segment can hold another
// (an entry's last stable offset reached upperBound), as Kafka's
// collectAbortedTxns says.
func (x *TxnIndex) Collect(fetchOffset, upperBound int64) (txns []AbortedTxn, complete bool) {
	for _, a := range x.entries {
		if a.LastOffset >= fetchOffset && a.FirstOffset < upperBound {
			txns = append(txns, a)
		}
		if a.LastStableOffset >= upperBound {
			return txns, true
		}
	}
	return txns, false
}

// Entries returns every entry, in marker order. The caller must not
// change them.
func (x *TxnIndex) Entries() []AbortedTxn { return x.entries }

// TruncateTo removes the entries whose marker is at or after offset, the
// log's new end.
func (x *TxnIndex) TruncateTo(offset int64) error {
	n := len(x.entries)
	for n > 0 && x.entries[n-1].LastOffset >= offset {
		n--
	}
	if n == len(x.entries) {
		return nil
	}
	x.entries = x.entries[:n]
	size := int64(n * txnEntrySize)
	if x.f != nil {
		if err := x.f.Truncate(size); err != nil {
			return fmt.Errorf("truncate transaction index %s: %w", x.path, err)
		}
		return nil
	}
	if err := os.Truncate(x.path, size); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("truncate transaction index %s: %w", x.path, err)
	}
	return nil
}

// Flush syncs the entries written to disk.
func (x *TxnIndex) Flush() error {
	if x.f == nil {
		return nil
	}
	if err := x.f.Sync(); err != nil {
		return fmt.Errorf("sync transaction index %s: %w", x.path, err)
	}
	return nil
}

// Close closes the file, keeping it.
func (x *TxnIndex) Close() error {
	if x.f == nil {
		return nil
	}
	err := x.f.Close()
	x.f = nil
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close transaction index %s: %w", x.path, err)
	}
	return nil
}

// Delete closes and removes the file, when the segment goes.
func (x *TxnIndex) Delete() error {
	if err := x.Close(); err != nil {
		return err
	}
	if err := os.Remove(x.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove transaction index %s: %w", x.path, err)
	}
	x.entries = nil
	return nil
}
