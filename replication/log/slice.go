package log

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// Slice is a byte range of a segment file holding whole batches, which
// the file keeps open until Release: a fetch response sends it to the
// socket from the page cache (sendfile) instead of copying it through
// memory, as Kafka's FileRecords are sent. The range stays readable
// after the segment is deleted (the file is held open), but a
// truncation of the log below its end (a leader that became a follower)
// shortens it: a send of fewer bytes than Len must close the connection.
type Slice struct {
	sf *segmentFile
	f  *os.File
	// Pos is where the range starts in the file, Len its length.
	Pos int64
	Len int
}

// File is the open segment file; valid until Release.
func (s *Slice) File() *os.File { return s.f }

// Release ends the slice's hold on the file. It is called once.
func (s *Slice) Release() { s.sf.unpin() }

// Bytes reads the range into memory, into a buffer from alloc (nil: a
// new one), for a connection that cannot send from the file (TLS).
func (s *Slice) Bytes(alloc Alloc) ([]byte, error) {
	b := alloc.get(s.Len)
	if _, err := s.f.ReadAt(b, s.Pos); err != nil {
		return nil, fmt.Errorf("read segment %d at byte %d: %w", s.sf.base, s.Pos, err)
	}
	return b, nil
}

// ReadSliceUpTo is ReadUpTo for a sender that can send from a file: when
// the read's batches lie in one segment file and make minSlice bytes or
// more, it returns them as a Slice (nil bytes) without reading them,
// else the bytes as ReadUpTo does. A slice holds the batches of one
// segment only (a read that would go on into the next segment stops at
// the segment's end, as Kafka's does: the client fetches again). The
// bytes are read into buffers from alloc (nil: new ones).
func (l *Log) ReadSliceUpTo(offset int64, maxBytes int, maxOffset int64, minSlice int, alloc Alloc) ([]byte, *Slice, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, nil, ErrClosed
	}
	end := l.active().tail.nextOffset
	if offset < l.startOffset || offset > end {
		return nil, nil, fmt.Errorf("%w: offset %d, log holds %d..%d", ErrOffsetOutOfRange, offset, l.startOffset, end)
	}
	limit := min(end, maxOffset)
	if offset >= limit {
		return nil, nil, nil
	}
	for i := l.segmentFor(offset); i < len(l.segments); i++ {
		s := l.segments[i]
		t := s.tail
		if t.hasLast && offset >= t.lastBase && offset < t.nextOffset && t.lastBytes != nil {
			// The last batch, kept in memory: small, and at hand.
			break
		}
		first, ok, err := s.find(offset)
		if err != nil {
			return nil, nil, fmt.Errorf("read offset %d: %w", offset, err)
		}
		if !ok {
			continue
		}
		if first.lastOffset >= limit {
			return nil, nil, nil
		}
		pos := first.pos
		n, err := s.sliceEnd(first, maxBytes, limit)
		if err != nil {
			return nil, nil, fmt.Errorf("read offset %d: %w", offset, err)
		}
		if n < int64(minSlice) {
			break
		}
		f, err := s.log.pin(false)
		if err != nil {
			return nil, nil, fmt.Errorf("read offset %d: %w", offset, err)
		}
		return nil, &Slice{sf: s.log, f: f, Pos: pos, Len: int(n)}, nil
	}
	data, err := l.readLocked(offset, maxBytes, maxOffset, alloc)
	return data, nil, err
}

// sliceEnd returns how many bytes from the batch first hold the whole
// batches a read of maxBytes below limit takes in s: every batch that
// ends below limit, within maxBytes but for the first, which always goes
// in. It reads only batch headers: find locates the batch holding limit,
// and the last index entry within maxBytes says where to scan for the
// last whole batch. Callers hold mu.
func (s *segment) sliceEnd(first batchSpan, maxBytes int, limit int64) (int64, error) {
	pos := first.pos
	end := s.tail.size
	if s.tail.nextOffset > limit {
		// Every batch from the one holding limit on is left out.
		at, ok, err := s.find(limit)
		if err != nil {
			return 0, err
		}
		if ok {
			end = at.pos
		}
	}
	budget := pos + int64(max(maxBytes, 0))
	if end <= budget {
		return end - pos, nil
	}
	if pos+first.size >= budget {
		return first.size, nil
	}
	// Scan from the last index entry at or before the budget (and not
	// before pos) for the last batch that ends within it.
	scan := pos
	i := sort.Search(len(s.offsets), func(i int) bool { return int64(s.offsets[i].position) > budget })
	if i > 0 {
		scan = max(scan, int64(s.offsets[i-1].position))
	}
	sc := pooledHeaderScanner(s.log, scan, end)
	defer sc.release()
	last := scan
	for {
		p, h, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		if p+h.size > budget {
			break
		}
		last = p + h.size
	}
	return last - pos, nil
}
