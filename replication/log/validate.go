package log

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ProduceValidation says what ValidateProduced accepts beyond the v2
// format itself: the topic's settings that bear on a producer's records.
type ProduceValidation struct {
	// Compacted refuses records without a key, as a topic whose
	// cleanup.policy holds compact does (Kafka 2.5+, KIP-467).
	Compacted bool
	// MaxDecompressedBytes bounds what the records of one compressed
	// batch may decompress to. Decompression stops once it is passed,
	// and the batch is refused with ErrRecordTooLarge. It must be
	// positive.
	MaxDecompressedBytes int64
}

// NullKeyError is a record without a key produced to a compacted topic.
// It wraps ErrInvalidRecord.
type NullKeyError struct {
	// Index counts the records of every batch given to
	// ValidateProduced, in order: Kafka's batch index of the record in a
	// produce response's record errors.
	Index int
}

// Error implements error.
func (e *NullKeyError) Error() string {
	return fmt.Sprintf("%v: record %d has no key, which a compacted topic requires", ErrInvalidRecord, e.Index)
}

// Unwrap returns ErrInvalidRecord, for errors.Is.
func (e *NullKeyError) Unwrap() error { return ErrInvalidRecord }

// ValidateProduced checks a producer's records (one or more
// concatenated v2 batches) to the last record before they are
// acknowledged, as Kafka's LogValidator checks a client's append:
//
//   - each batch's framing (magic 2, a length within the records) and
//     CRC-32C: ErrUnsupportedMagic, ErrCorruptMessage;
//   - its compression codec, one of none, gzip, snappy, lz4 and zstd:
//     ErrUnsupportedCompression;
//   - its header as a client may write it: a record count of at least
//     one and equal to lastOffsetDelta+1, no control bit (only
//     WriteTxnMarkers writes control batches), a base sequence for a
//     producer id, a producer id and epoch for a transactional batch:
//     ErrInvalidRecord;
//   - its records, decompressed as a stream that stops past
//     v.MaxDecompressedBytes (ErrRecordTooLarge) or at a payload the
//     codec cannot read (ErrCorruptMessage): each record's length varint
//     against what follows, its attributes, timestamp delta and offset
//     delta varints (the offset deltas 0, 1, 2, …), its key, value and
//     headers within its length, the declared count of records and
//     nothing after them: ErrInvalidRecord;
//   - with v.Compacted, a key on every record: a *NullKeyError.
//
// A transactional batch is checked as any idempotent producer's here;
// its producer epoch and sequence are the producer state's to check
// (replication.Producers.Check), as Kafka's are.
//
// ValidateProduced holds no lock and reads records only: a compressed
// batch costs a bounded buffer (a codec's window, a snappy block), never
// its decompressed size. Errors name the batch by index and byte
// position.
func ValidateProduced(records []byte, v ProduceValidation) error {
	if len(records) == 0 {
		return corrupt("no record batch")
	}
	if v.MaxDecompressedBytes <= 0 {
		return fmt.Errorf("log: MaxDecompressedBytes %d: must be positive", v.MaxDecompressedBytes)
	}
	index := 0
	for n, pos := 0, 0; pos < len(records); n++ {
		rest := records[pos:]
		h, err := frameBatch(rest)
		if err == nil {
			err = checkCRC(h, rest)
		}
		if err == nil {
			err = checkClientHeader(h)
		}
		if err == nil {
			var nullKey int
			nullKey, err = v.checkRecords(rest[batchHeaderSize:h.size], h)
			if nullKey >= 0 {
				return &NullKeyError{Index: index + nullKey}
			}
		}
		if err != nil {
			err.where = fmt.Sprintf("batch %d at byte %d", n, pos)
			return err
		}
		index += int(h.recordCount)
		pos += int(h.size)
	}
	return nil
}

// frameBatch parses the header of the batch b starts with and checks its
// framing: magic 2, and a batchLength that frames a header and stays
// within b.
func frameBatch(b []byte) (batchHeader, *batchError) {
	switch {
	case len(b) > fieldMagic && int8(b[fieldMagic]) != magicV2:
		return batchHeader{}, &batchError{kind: ErrUnsupportedMagic, detail: fmt.Sprintf("magic %d, want %d", int8(b[fieldMagic]), magicV2)}
	case len(b) < batchHeaderSize:
		return batchHeader{}, corrupt("%d bytes, shorter than a batch header (%d)", len(b), batchHeaderSize)
	}
	h := parseBatchHeader(b)
	switch {
	case h.size < batchHeaderSize:
		return h, corrupt("batchLength %d below the minimum %d", h.size-batchLengthOverhead, minBatchLength)
	case h.size > int64(len(b)):
		return h, corrupt("batchLength %d runs past the %d bytes given", h.size-batchLengthOverhead, len(b))
	}
	return h, nil
}

// invalid returns a batchError of kind ErrInvalidRecord.
func invalid(format string, args ...any) *batchError {
	return &batchError{kind: ErrInvalidRecord, detail: fmt.Sprintf(format, args...)}
}

// checkClientHeader checks what Kafka's LogValidator checks of a batch
// header from a client (AppendOrigin.CLIENT), and the codec.
func checkClientHeader(h batchHeader) *batchError {
	switch codec := h.attributes & codecMask; {
	case codec > codecZstd:
		return &batchError{kind: ErrUnsupportedCompression, detail: fmt.Sprintf("compression codec %d", codec)}
	case h.lastOffsetDelta < 0:
		return invalid("lastOffsetDelta %d is negative", h.lastOffsetDelta)
	case h.recordCount <= 0:
		return invalid("recordCount %d, want at least 1", h.recordCount)
	case int64(h.recordCount) != int64(h.lastOffsetDelta)+1:
		return invalid("recordCount %d, want lastOffsetDelta+1 = %d", h.recordCount, int64(h.lastOffsetDelta)+1)
	case h.attributes&attrControl != 0:
		return invalid("a client may not write a control batch")
	case h.attributes&attrTransactional != 0 && (h.producerID < 0 || h.producerEpoch < 0):
		return invalid("a transactional batch of producer id %d epoch %d, want a producer id and epoch", h.producerID, h.producerEpoch)
	case h.producerID >= 0 && h.baseSequence < 0:
		return invalid("base sequence %d for producer id %d", h.baseSequence, h.producerID)
	}
	return nil
}

// checkRecords parses the records section of a batch (header h),
// decompressing it as a stream if need be. It returns the index within
// the batch of the first record without a key when v.Compacted, else -1.
func (v ProduceValidation) checkRecords(section []byte, h batchHeader) (nullKey int, _ *batchError) {
	s := recordScanner{buf: section, limit: v.MaxDecompressedBytes}
	if codec := h.attributes & codecMask; codec != codecNone {
		d, err := openDecompressor(codec, section, v.MaxDecompressedBytes)
		if err != nil {
			return -1, corrupt("compression codec %d: %v", codec, err)
		}
		defer d.release()
		bp := scanBuffers.Get().(*[]byte)
		defer scanBuffers.Put(bp)
		s.buf, s.scratch, s.src = (*bp)[:0], *bp, d.reader
	}
	for i := range h.recordCount {
		hasKey, err := s.record(i)
		if err != nil {
			return -1, s.failure(codecName(h), err)
		}
		if v.Compacted && !hasKey {
			return int(i), nil
		}
	}
	if s.more() {
		return -1, invalid("bytes after its %d records", h.recordCount)
	}
	if s.srcErr != nil && s.srcErr != io.EOF {
		return -1, s.failure(codecName(h), nil)
	}
	return -1, nil
}

// codecName names h's codec in errors.
func codecName(h batchHeader) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[h.attributes&codecMask]
}

// scanBuffers are the buffers through which a compressed batch's records
// stream: the most of them a validation holds at once.
var scanBuffers = sync.Pool{New: func() any { b := make([]byte, scanBufferSize); return &b }}

// scanBufferSize is the size of a scanBuffers buffer.
const scanBufferSize = 64 << 10

// recordScanner reads the records of a batch, from its records section
// (src nil) or as a decompressor streams them through scratch.
type recordScanner struct {
	// buf is what is read and not parsed yet.
	buf []byte
	// src, when set, streams the rest of the records into scratch.
	src     io.Reader
	scratch []byte
	// pos counts the bytes parsed.
	pos int64
	// taken counts the bytes read from src; limit is the most it may
	// give.
	taken, limit int64
	// srcErr is src's error once it gave one: io.EOF at its end.
	srcErr error
}

// errPastLimit is a compressed batch decompressing beyond
// MaxDecompressedBytes.
var errPastLimit = errors.New("records decompress beyond the limit")

// fill reads from src until at least n bytes are buffered, src ends or
// fails, or it passes the limit; it reports whether n bytes are there.
func (s *recordScanner) fill(n int) bool {
	if len(s.buf) >= n {
		return true
	}
	if s.src == nil || s.srcErr != nil {
		return false
	}
	m := copy(s.scratch, s.buf)
	s.buf = s.scratch[:m]
	for len(s.buf) < n && s.srcErr == nil {
		room := min(int64(len(s.scratch)-len(s.buf)), s.limit-s.taken+1)
		k, err := s.src.Read(s.scratch[len(s.buf) : len(s.buf)+int(room)])
		s.taken += int64(k)
		s.buf = s.scratch[:len(s.buf)+k]
		switch {
		case s.taken > s.limit:
			s.srcErr = errPastLimit
		case err != nil:
			s.srcErr = err
		}
	}
	return len(s.buf) >= n
}

// more reports whether anything follows what was parsed.
func (s *recordScanner) more() bool { return s.fill(1) }

// failure is the error of a batch whose record did not parse (err, nil
// if it did): the stream's, when it failed, else an invalid record.
func (s *recordScanner) failure(codec string, err error) *batchError {
	switch {
	case errors.Is(s.srcErr, errPastLimit):
		return &batchError{kind: ErrRecordTooLarge, detail: fmt.Sprintf("records decompress beyond %d bytes", s.limit)}
	case s.srcErr != nil && s.srcErr != io.EOF:
		return corrupt("%s payload after %d bytes: %v", codec, s.taken, s.srcErr)
	}
	return invalid("%v", err)
}

// varint reads a zig-zag varint of at most 10 bytes.
func (s *recordScanner) varint() (int64, bool) {
	if len(s.buf) < binary.MaxVarintLen64 {
		s.fill(binary.MaxVarintLen64)
	}
	v, n := binary.Varint(s.buf)
	if n <= 0 {
		return 0, false
	}
	s.buf = s.buf[n:]
	s.pos += int64(n)
	return v, true
}

// varint32 reads a varint that must fit an int32, as Kafka's readVarint
// requires.
func (s *recordScanner) varint32() (int32, bool) {
	v, ok := s.varint()
	if !ok || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// skip consumes n bytes.
func (s *recordScanner) skip(n int64) bool {
	for int64(len(s.buf)) < n {
		n -= int64(len(s.buf))
		s.pos += int64(len(s.buf))
		s.buf = s.buf[:0]
		if !s.fill(1) {
			return false
		}
	}
	s.buf = s.buf[n:]
	s.pos += n
	return true
}

// record parses the record with offset delta i and reports whether it
// has a key. The record is Kafka's DefaultRecord: length varint, then
// within that length attributes int8, timestampDelta varlong,
// offsetDelta varint, key and value (varint length, negative for null),
// a varint count of headers, each a key (varint length, not null) and a
// value (varint length, negative for null).
func (s *recordScanner) record(i int32) (hasKey bool, err error) {
	length, ok := s.varint32()
	switch {
	case !ok:
		return false, fmt.Errorf("record %d: length varint cut short or too long", i)
	case length <= 0:
		return false, fmt.Errorf("record %d: length %d", i, length)
	case s.src == nil && int64(length) > int64(len(s.buf)):
		return false, fmt.Errorf("record %d: length %d, %d bytes left in the batch", i, length, len(s.buf))
	}
	// A record within the buffer, or that fits it once filled, parses
	// from a slice; only one larger than the buffer streams.
	if s.src == nil || (int64(length) <= int64(len(s.scratch)) && s.fill(int(length))) {
		hasKey, err := parseRecordBody(s.buf[:length], i)
		s.buf = s.buf[length:]
		s.pos += int64(length)
		return hasKey, err
	}
	if int64(length) <= int64(len(s.scratch)) {
		return false, fmt.Errorf("record %d: length %d runs past the records", i, length)
	}
	end := s.pos + int64(length)
	// field reads a length-prefixed field and skips its bytes; a
	// negative length is null unless notNull.
	field := func(name string, notNull bool) (present bool, err error) {
		n, ok := s.varint32()
		switch {
		case !ok:
			return false, fmt.Errorf("record %d: %s length varint cut short", i, name)
		case n < 0 && notNull:
			return false, fmt.Errorf("record %d: %s length %d", i, name, n)
		case n < 0:
			return false, nil
		case int64(n) > end-s.pos:
			return false, fmt.Errorf("record %d: %s of %d bytes runs past the record's length %d", i, name, n, length)
		case !s.skip(int64(n)):
			return false, fmt.Errorf("record %d: %s cut short", i, name)
		}
		return true, nil
	}
	if !s.skip(1) { // attributes
		return false, fmt.Errorf("record %d: cut short", i)
	}
	if _, ok := s.varint(); !ok {
		return false, fmt.Errorf("record %d: timestamp delta varint cut short", i)
	}
	switch delta, ok := s.varint32(); {
	case !ok:
		return false, fmt.Errorf("record %d: offset delta varint cut short", i)
	case delta != i:
		return false, fmt.Errorf("record %d: offset delta %d, want %d", i, delta, i)
	}
	if hasKey, err = field("key", false); err != nil {
		return false, err
	}
	if _, err := field("value", false); err != nil {
		return false, err
	}
	headers, ok := s.varint32()
	switch {
	case !ok:
		return false, fmt.Errorf("record %d: header count varint cut short", i)
	case headers < 0 || int64(headers) > (end-s.pos)/2:
		// A header takes at least two bytes (two lengths).
		return false, fmt.Errorf("record %d: %d headers in %d bytes", i, headers, max(end-s.pos, 0))
	}
	for range headers {
		if _, err := field("header key", true); err != nil {
			return false, err
		}
		if _, err := field("header value", false); err != nil {
			return false, err
		}
	}
	if s.pos != end {
		return false, fmt.Errorf("record %d: its fields take %d bytes, its length says %d", i, s.pos-(end-int64(length)), length)
	}
	return hasKey, nil
}

// parseRecordBody parses the record with offset delta i whose body (what
// its length counts) is b, as recordScanner.record does, and reports
// whether it has a key.
func parseRecordBody(b []byte, i int32) (hasKey bool, err error) {
	if len(b) < 1 { // attributes
		return false, fmt.Errorf("record %d: cut short", i)
	}
	pos := 1
	if _, n := binary.Varint(b[pos:]); n > 0 {
		pos += n
	} else {
		return false, fmt.Errorf("record %d: timestamp delta varint cut short", i)
	}
	delta, pos, ok := varint32At(b, pos)
	switch {
	case !ok:
		return false, fmt.Errorf("record %d: offset delta varint cut short", i)
	case delta != i:
		return false, fmt.Errorf("record %d: offset delta %d, want %d", i, delta, i)
	}
	if hasKey, pos, err = fieldAt(b, pos, i, "key", false); err != nil {
		return false, err
	}
	if _, pos, err = fieldAt(b, pos, i, "value", false); err != nil {
		return false, err
	}
	headers, pos, ok := varint32At(b, pos)
	switch {
	case !ok:
		return false, fmt.Errorf("record %d: header count varint cut short", i)
	case headers < 0 || int(headers) > (len(b)-pos)/2:
		// A header takes at least two bytes (two lengths).
		return false, fmt.Errorf("record %d: %d headers in %d bytes", i, headers, len(b)-pos)
	}
	for range headers {
		if _, pos, err = fieldAt(b, pos, i, "header key", true); err != nil {
			return false, err
		}
		if _, pos, err = fieldAt(b, pos, i, "header value", false); err != nil {
			return false, err
		}
	}
	if pos != len(b) {
		return false, fmt.Errorf("record %d: its fields take %d bytes, its length says %d", i, pos, len(b))
	}
	return hasKey, nil
}

// varint32At reads the varint at b[pos:], which must fit an int32, and
// returns it with the position after it.
func varint32At(b []byte, pos int) (int32, int, bool) {
	v, n := binary.Varint(b[pos:])
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, pos, false
	}
	return int32(v), pos + n, true
}

// fieldAt skips the length-prefixed field name of record i at b[pos:]
// and returns whether it is there (a negative length is null, an error
// if notNull) and the position after it.
func fieldAt(b []byte, pos int, i int32, name string, notNull bool) (present bool, next int, err error) {
	n, pos, ok := varint32At(b, pos)
	switch {
	case !ok:
		return false, pos, fmt.Errorf("record %d: %s length varint cut short", i, name)
	case n < 0 && notNull:
		return false, pos, fmt.Errorf("record %d: %s length %d", i, name, n)
	case n < 0:
		return false, pos, nil
	case int(n) > len(b)-pos:
		return false, pos, fmt.Errorf("record %d: %s of %d bytes runs past the record's length %d", i, name, n, len(b))
	}
	return true, pos + int(n), nil
}

// maxSnappyRatio bounds what a snappy block may decode to per byte: the
// format's densest element, a 3-byte copy of 64 bytes, gives 21⅓. A
// block that claims more is not snappy (an s2 extension at best, which
// Kafka's other clients cannot read), and is refused before its output
// is allocated.
const maxSnappyRatio = 22

// maxPooledSnappyBlock is the largest decoded snappy block a pooled
// reader keeps for the next batch: a batch of a producer's default 1 MB.
const maxPooledSnappyBlock = 2 << 20

// zstdMaxWindow is the largest zstd window a produced batch may use: a
// stream decoder holds that much history. 8 MiB is the window of zstd's
// levels up to 19, as the Java producer (compression.zstd.level),
// librdkafka and franz-go write them; levels 20 to 22 need more.
const zstdMaxWindow = 8 << 20

// decompressor is a pooled stream decoder reading one batch's payload.
type decompressor struct {
	reader  io.Reader
	release func()
}

// Pools of stream decoders: a validation borrows one per compressed
// batch.
var (
	gzipReaders = sync.Pool{New: func() any { return new(pooledGzip) }}
	lz4Readers  = sync.Pool{New: func() any { return &pooledLZ4{r: lz4.NewReader(nil)} }}
	zstdReaders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return err
		}
		return &pooledZstd{d: d}
	}}
	snappyReaders = sync.Pool{New: func() any { return new(snappyReader) }}
)

// pooledGzip is a gzip reader with the source it reads.
type pooledGzip struct {
	src bytes.Reader
	r   gzip.Reader
}

// pooledLZ4 is an lz4 frame reader with the source it reads.
type pooledLZ4 struct {
	src bytes.Reader
	r   *lz4.Reader
}

// pooledZstd is a synchronous zstd stream decoder with the source it
// reads.
type pooledZstd struct {
	src bytes.Reader
	d   *zstd.Decoder
}

// openDecompressor returns a stream decoder of payload, compressed with
// codec, from its pool; limit bounds what a snappy block may allocate.
func openDecompressor(codec int16, payload []byte, limit int64) (decompressor, error) {
	switch codec {
	case codecGzip:
		g := gzipReaders.Get().(*pooledGzip)
		g.src.Reset(payload)
		if err := g.r.Reset(&g.src); err != nil {
			gzipReaders.Put(g)
			return decompressor{}, err
		}
		return decompressor{reader: &g.r, release: func() { g.src.Reset(nil); gzipReaders.Put(g) }}, nil
	case codecSnappy:
		r := snappyReaders.Get().(*snappyReader)
		r.reset(payload, limit)
		return decompressor{reader: r, release: func() { r.reset(nil, 0); snappyReaders.Put(r) }}, nil
	case codecLZ4:
		l := lz4Readers.Get().(*pooledLZ4)
		l.src.Reset(payload)
		l.r.Reset(&l.src)
		return decompressor{reader: l.r, release: func() { l.r.Reset(nil); l.src.Reset(nil); lz4Readers.Put(l) }}, nil
	case codecZstd:
		z, ok := zstdReaders.Get().(*pooledZstd)
		if !ok {
			return decompressor{}, errors.New("no zstd decoder")
		}
		z.src.Reset(payload)
		if err := z.d.Reset(&z.src); err != nil {
			zstdReaders.Put(z)
			return decompressor{}, err
		}
		return decompressor{reader: z.d, release: func() { _ = z.d.Reset(nil); z.src.Reset(nil); zstdReaders.Put(z) }}, nil
	}
	return decompressor{}, fmt.Errorf("unknown compression codec %d", codec)
}

// snappyReader streams a snappy payload, a single block or the xerial
// framing of the Java producer, one decoded block at a time.
type snappyReader struct {
	// src is the payload not decoded yet; xerial says how it is framed.
	src    []byte
	xerial bool
	// block is the decoded block being read; out is its unread part.
	block, out []byte
	// left is what the blocks may still decode to.
	left int64
}

// reset starts reading payload, of which at most limit bytes may be
// decoded.
func (r *snappyReader) reset(payload []byte, limit int64) {
	r.src, r.out, r.left = payload, nil, limit
	r.xerial = len(payload) >= len(xerialHeader) && bytes.HasPrefix(payload, xerialMagic)
	if r.xerial {
		r.src = payload[len(xerialHeader):]
	}
	if cap(r.block) > maxPooledSnappyBlock {
		r.block = nil // Keep no outsized block in the pool.
	}
}

// Read implements io.Reader.
func (r *snappyReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if len(r.src) == 0 {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// next decodes the next block.
func (r *snappyReader) next() error {
	block := r.src
	if r.xerial {
		if len(r.src) < 4 {
			return errors.New("xerial block length cut short")
		}
		n := int64(binary.BigEndian.Uint32(r.src))
		if n > int64(len(r.src)-4) {
			return fmt.Errorf("xerial block of %d bytes, %d left", n, len(r.src)-4)
		}
		block, r.src = r.src[4:4+n], r.src[4+n:]
	} else {
		r.src = nil
	}
	n, err := s2.DecodedLen(block)
	switch {
	case err != nil:
		return err
	case int64(n) > maxSnappyRatio*int64(len(block)):
		return fmt.Errorf("a snappy block of %d bytes claims %d decoded bytes", len(block), n)
	case int64(n) > r.left:
		return errPastLimit
	}
	if cap(r.block) < n {
		r.block = make([]byte, n)
	}
	out, err := s2.Decode(r.block[:n], block)
	if err != nil {
		return err
	}
	r.left -= int64(len(out))
	r.out = out
	return nil
}
