package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// StoredRecord is one record as a broker's segment files hold it.
type StoredRecord struct {
	// Offset is the record's offset in the partition.
	Offset int64
	// LeaderEpoch is the partition leader epoch its batch was stamped with.
	LeaderEpoch int32
	// ProducerID and Sequence identify an idempotent producer's record;
	// ProducerID is -1 for a plain producer.
	ProducerID int64
	Sequence   int32
	Key, Value []byte
}

// batchHeaderSize is a v2 record batch's header up to and including the
// record count: the length prefix (12 bytes: base offset and length)
// plus 49.
const batchHeaderSize = 61

// ReadLog reads the records of topic/partition from the broker's segment
// files (DataDir/topic-partition/*.log), whether the broker runs or not:
// the bytes on its disk, not what it serves. It reads the files as they
// are and stops at a torn tail (a batch cut short by the end of a file).
// Only uncompressed batches can be read; a compressed one is an error
// naming it. A partition the broker has no directory for holds no
// records.
func (b *Broker) ReadLog(topic string, partition int32) ([]StoredRecord, error) {
	dir := filepath.Join(b.DataDir, topic+"-"+strconv.Itoa(int(partition)))
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("read log of %s-%d on broker %d: %w", topic, partition, b.ID, err)
	}
	sort.Strings(files) // Segment names are zero-padded base offsets.
	var out []StoredRecord
	for _, file := range files {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue // Deleted by a truncation or retention since the glob.
		}
		if err != nil {
			return nil, fmt.Errorf("read log of %s-%d on broker %d: %w", topic, partition, b.ID, err)
		}
		records, err := parseSegment(data)
		if err != nil {
			return nil, fmt.Errorf("read log of %s-%d on broker %d: segment %s: %w", topic, partition, b.ID, filepath.Base(file), err)
		}
		out = append(out, records...)
	}
	return out, nil
}

// parseSegment decodes the v2 record batches of one segment file.
func parseSegment(data []byte) ([]StoredRecord, error) {
	var out []StoredRecord
	for pos := 0; pos+12 <= len(data); {
		length := int(int32(binary.BigEndian.Uint32(data[pos+8:])))
		if length == 0 {
			break // A preallocated, unwritten tail.
		}
		end := pos + 12 + length
		if length < batchHeaderSize-12 || end > len(data) {
			break // A torn tail.
		}
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(data[pos:end]); err != nil {
			return nil, fmt.Errorf("batch at position %d: %w", pos, err)
		}
		if batch.Magic != 2 {
			return nil, fmt.Errorf("batch at position %d: magic %d, want 2", pos, batch.Magic)
		}
		if batch.Attributes&0x07 != 0 {
			return nil, fmt.Errorf("batch at offset %d: compressed (codec %d), which ReadLog does not decode", batch.FirstOffset, batch.Attributes&0x07)
		}
		raw := batch.Records
		for i := int32(0); i < batch.NumRecords; i++ {
			size, n := binary.Varint(raw)
			if n <= 0 || int(size) > len(raw)-n {
				return nil, fmt.Errorf("batch at offset %d: record %d cut short", batch.FirstOffset, i)
			}
			var rec kmsg.Record
			if err := rec.ReadFrom(raw[:n+int(size)]); err != nil {
				return nil, fmt.Errorf("batch at offset %d: record %d: %w", batch.FirstOffset, i, err)
			}
			raw = raw[n+int(size):]
			seq := int32(-1)
			if batch.FirstSequence >= 0 {
				seq = batch.FirstSequence + rec.OffsetDelta
			}
			out = append(out, StoredRecord{
				Offset:      batch.FirstOffset + int64(rec.OffsetDelta),
				LeaderEpoch: batch.PartitionLeaderEpoch,
				ProducerID:  batch.ProducerID,
				Sequence:    seq,
				Key:         rec.Key,
				Value:       rec.Value,
			})
		}
		pos = end
	}
	return out, nil
}

// hwCheckpointFile is the per-log-dir file a broker checkpoints its high
// watermarks to, in Kafka's format.
const hwCheckpointFile = "replication-offset-checkpoint"

// CheckpointedHW reads the high watermark of topic/partition from the
// broker's replication-offset-checkpoint (Kafka's format: a version line
// "0", a count line, then "topic partition offset" lines). It reports
// false when the file or the partition's line is not there.
func (b *Broker) CheckpointedHW(topic string, partition int32) (int64, bool, error) {
	f, err := os.Open(filepath.Join(b.DataDir, hwCheckpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("hw checkpoint of broker %d: %w", b.ID, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 0; sc.Scan(); line++ {
		if line < 2 {
			continue // Version and count.
		}
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != topic || fields[1] != strconv.Itoa(int(partition)) {
			continue
		}
		hw, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("hw checkpoint of broker %d: %s-%d: offset %q: %w", b.ID, topic, partition, fields[2], err)
		}
		return hw, true, nil
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("hw checkpoint of broker %d: %w", b.ID, err)
	}
	return 0, false, nil
}
