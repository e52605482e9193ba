package log

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The compression codecs of a v2 batch, its attributes' low three bits.
const (
	codecMask   = 0x07
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// Attribute bits of a v2 batch the cleaner leaves alone.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// maxDecompressedBatch bounds what one batch may decompress to, so that a
// corrupt or hostile batch cannot exhaust memory.
const maxDecompressedBatch = 1 << 30

// xerialMagic starts a snappy payload framed as the Java producer's
// xerial SnappyOutputStream frames it; xerialHeader is the magic with its
// version and minimum compatible version (both 1).
var (
	xerialMagic  = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	xerialHeader = append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
)

// xerialBlockSize is the uncompressed size of a xerial block, as the Java
// stream writes them.
const xerialBlockSize = 32 << 10

// zstd coders are expensive to build and safe for concurrent
// DecodeAll/EncodeAll: one of each, built on first use.
var (
	zstdOnce    sync.Once
	zstdDecoder *zstd.Decoder
	zstdEncoder *zstd.Encoder
	zstdErr     error
)

// zstdCoders returns the shared zstd decoder and encoder.
func zstdCoders() (*zstd.Decoder, *zstd.Encoder, error) {
	zstdOnce.Do(func() {
		zstdDecoder, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressedBatch))
		if zstdErr == nil {
			zstdEncoder, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(64<<10), zstd.WithZeroFrames(true))
		}
	})
	return zstdDecoder, zstdEncoder, zstdErr
}

// compressedPayload is a batch's records section as its codec wrote it,
// with what re-encoding it the same way needs to know.
type compressedPayload struct {
	codec int16
	// xerial is set for a snappy payload in xerial framing.
	xerial bool
}

// decompress returns the records of a batch's records section src
// compressed with codec (a batch attribute's low bits).
func decompress(codec int16, src []byte) ([]byte, compressedPayload, error) {
	p := compressedPayload{codec: codec}
	var out []byte
	var err error
	switch codec {
	case codecNone:
		return src, p, nil
	case codecGzip:
		var r *gzip.Reader
		if r, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readBounded(r)
		}
	case codecSnappy:
		if len(src) >= len(xerialHeader) && bytes.HasPrefix(src, xerialMagic) {
			p.xerial = true
			out, err = xerialDecode(src[len(xerialHeader):])
		} else {
			out, err = snappyDecode(nil, src)
		}
	case codecLZ4:
		out, err = readBounded(lz4.NewReader(bytes.NewReader(src)))
	case codecZstd:
		var dec *zstd.Decoder
		if dec, _, err = zstdCoders(); err == nil {
			out, err = dec.DecodeAll(src, nil)
		}
	default:
		err = fmt.Errorf("unknown compression codec %d", codec)
	}
	if err != nil {
		return nil, p, fmt.Errorf("decompress codec %d: %w", codec, err)
	}
	return out, p, nil
}

// compress encodes records as p's codec (and framing) did.
func (p compressedPayload) compress(records []byte) ([]byte, error) {
	var buf bytes.Buffer
	var err error
	switch p.codec {
	case codecNone:
		return records, nil
	case codecGzip:
		w := gzip.NewWriter(&buf)
		if _, err = w.Write(records); err == nil {
			err = w.Close()
		}
	case codecSnappy:
		if !p.xerial {
			return s2.EncodeSnappy(nil, records), nil
		}
		out := append([]byte(nil), xerialHeader...)
		for len(records) > 0 {
			n := min(len(records), xerialBlockSize)
			block := s2.EncodeSnappy(nil, records[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			records = records[n:]
		}
		return out, nil
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		if _, err = w.Write(records); err == nil {
			err = w.Close()
		}
	case codecZstd:
		var enc *zstd.Encoder
		if _, enc, err = zstdCoders(); err == nil {
			return enc.EncodeAll(records, nil), nil
		}
	default:
		err = fmt.Errorf("unknown compression codec %d", p.codec)
	}
	if err != nil {
		return nil, fmt.Errorf("compress codec %d: %w", p.codec, err)
	}
	return buf.Bytes(), nil
}

// errDecompressedTooLarge is a batch decompressing beyond
// maxDecompressedBatch.
var errDecompressedTooLarge = fmt.Errorf("records decompress beyond %d bytes", maxDecompressedBatch)

// readBounded reads r to its end, refusing more than maxDecompressedBatch
// bytes.
func readBounded(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressedBatch+1))
	if err == nil && len(out) > maxDecompressedBatch {
		err = errDecompressedTooLarge
	}
	return out, err
}

// snappyDecode appends to dst the snappy block src decodes to.
func snappyDecode(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if len(dst)+n > maxDecompressedBatch {
		return nil, errDecompressedTooLarge
	}
	out := make([]byte, n)
	if _, err := s2.Decode(out, src); err != nil {
		return nil, err
	}
	return append(dst, out...), nil
}

// xerialDecode decodes the blocks of a xerial stream after its header:
// each a 4-byte big-endian length and a snappy block.
func xerialDecode(src []byte) ([]byte, error) {
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("xerial block length cut short")
		}
		n := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n > len(src) {
			return nil, fmt.Errorf("xerial block of %d bytes, %d left", n, len(src))
		}
		var err error
		if out, err = snappyDecode(out, src[:n]); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}
