// Package log is a partition's durable log: a directory of segments holding
// Kafka v2 record batches exactly as received, with a sparse offset index and
// a time index per segment. It assigns offsets, verifies CRC-32C, rolls and
// retains segments, and recovers a torn tail on open. It knows nothing of
// replication or the network; a Log is safe for concurrent use (one writer
// at a time, readers concurrent with it).
package log

import (
	"errors"
	"time"
)

// Errors returned by the log. The broker maps them to Kafka error codes.
var (
	// ErrCorruptMessage: a batch failed its CRC-32C or is malformed
	// (Kafka CORRUPT_MESSAGE). Nothing was written.
	ErrCorruptMessage = errors.New("log: corrupt record batch")
	// ErrOffsetOutOfRange: the offset is below the log start or above the
	// log end offset (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrUnsupportedMagic: a batch whose magic is not 2.
	ErrUnsupportedMagic = errors.New("log: unsupported record batch magic")
	// ErrRecordTooLarge: a batch larger than the segment size allows.
	ErrRecordTooLarge = errors.New("log: record batch too large")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("log: closed")
)

// Config holds the log's settings, under Kafka's property names.
type Config struct {
	// SegmentBytes rolls a new segment when the active one would exceed
	// it (log.segment.bytes). Default 1 GiB; 14 bytes .. 2^31-1.
	SegmentBytes int64
	// RollTime rolls a new segment when the active one's first batch is
	// older than this (log.roll.ms). Default 7 days.
	RollTime time.Duration
	// RetentionBytes deletes oldest segments while the log is larger
	// (log.retention.bytes). Default -1: no size limit.
	RetentionBytes int64
	// RetentionTime deletes segments whose newest record is older
	// (log.retention.ms). Default 7 days; -1 keeps forever.
	RetentionTime time.Duration
	// IndexIntervalBytes is the bytes between offset-index entries
	// (log.index.interval.bytes). Default 4096.
	IndexIntervalBytes int64
	// FlushMessages fsyncs after this many records (log.flush.interval.messages).
	// Default: never (rely on replication, as Kafka does).
	FlushMessages int64
	// FlushInterval fsyncs when the oldest unflushed record is older
	// (log.flush.interval.ms). Default 0: never on time.
	FlushInterval time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		RollTime:           7 * 24 * time.Hour,
		RetentionBytes:     -1,
		RetentionTime:      7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		FlushMessages:      1<<63 - 1,
	}
}

// Validate checks ranges and names the bad key.
func (c Config) Validate() error { panic("unimplemented") }

// Log is one partition's log.
type Log struct{}

// Open opens or creates the log in dir, recovering the tail of the last
// segment: a partial batch or one with a bad CRC, and everything after it,
// is cut off; everything before is kept.
func Open(dir string, cfg Config) (*Log, error) { panic("unimplemented") }

// AppendResult describes an append.
type AppendResult struct {
	// BaseOffset is the offset assigned to the first record.
	BaseOffset int64
	// LastOffset is the offset of the last record.
	LastOffset int64
	// LogAppendTime is the time the log appended the batches (ms).
	LogAppendTime int64
	// Records is the number of records appended.
	Records int64
}

// Append appends the record batches in records (a produce request's
// records field: one or more concatenated v2 batches) as a leader does:
// it verifies each batch's CRC-32C and framing, assigns consecutive offsets
// by rewriting each batch's baseOffset and sets partitionLeaderEpoch to
// leaderEpoch (both lie outside the CRC, so the batch is otherwise stored
// byte for byte). All batches are validated before any byte is written:
// on error nothing is written. Append returns once the bytes are written
// to the segment file (the write returned), not necessarily fsynced.
func (l *Log) Append(records []byte, leaderEpoch int32) (AppendResult, error) {
	panic("unimplemented")
}

// AppendAsFollower appends batches that already carry their offsets and
// leader epochs (a follower copying from its leader). The first batch's
// base offset must equal EndOffset.
func (l *Log) AppendAsFollower(records []byte) (AppendResult, error) { panic("unimplemented") }

// Read returns whole batches starting with the batch that contains offset,
// up to maxBytes in total, but always at least one whole batch if any
// exists at offset (as Kafka does, so a large batch is never stuck).
// Reading at EndOffset returns no bytes and no error; below StartOffset or
// above EndOffset returns ErrOffsetOutOfRange. The returned slice is the
// caller's.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) { panic("unimplemented") }

// ReadUpTo is Read limited to batches that end below maxOffset (the high
// watermark: consumers see only offsets below it).
func (l *Log) ReadUpTo(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	panic("unimplemented")
}

// StartOffset is the first offset still in the log (log start offset).
func (l *Log) StartOffset() int64 { panic("unimplemented") }

// EndOffset is the offset the next record will get (log end offset, LEO).
func (l *Log) EndOffset() int64 { panic("unimplemented") }

// OffsetForTime returns the first offset whose record timestamp is at or
// after ts (ms), with that record's timestamp; ok is false if none is.
func (l *Log) OffsetForTime(ts int64) (offset int64, timestamp int64, ok bool, err error) {
	panic("unimplemented")
}

// TruncateTo removes every record at or above offset (a follower
// truncating after a leader change). Truncating at or above EndOffset is a
// no-op.
func (l *Log) TruncateTo(offset int64) error { panic("unimplemented") }

// EnforceRetention deletes whole segments beyond RetentionBytes or older
// than RetentionTime (never the active segment) and moves the log start
// offset; it returns how many segments it deleted. It also rolls the
// active segment when it is older than RollTime.
func (l *Log) EnforceRetention(now time.Time) (int, error) { panic("unimplemented") }

// Flush fsyncs everything written so far.
func (l *Log) Flush() error { panic("unimplemented") }

// Close flushes and closes the log's files.
func (l *Log) Close() error { panic("unimplemented") }

// Delete closes the log and removes its directory.
func (l *Log) Delete() error { panic("unimplemented") }
