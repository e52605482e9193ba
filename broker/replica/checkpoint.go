package replica

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
)

// hwCheckpointFile is the file in each log dir holding the high watermark
// of every partition in it (Kafka's replication-offset-checkpoint: a
// version line "0", a count line, then "topic partition offset" lines).
const hwCheckpointFile = "replication-offset-checkpoint"

// HWCheckpoints keeps the high watermarks read at start for partitions
// not opened yet, so that a checkpoint written before the controller
// assigns them does not forget them.
type HWCheckpoints struct {
	mu      sync.Mutex
	initial map[coord.TopicPartition]hwEntry
}

// hwEntry is one checkpointed high watermark and the log dir holding it.
type hwEntry struct {
	dir string
	hw  int64
}

// ReadHWCheckpoints reads the checkpoint file of every log dir; a missing
// file is empty. A file that does not parse is logged and read as empty
// too: the periodic checkpoint is written without fsync (see
// WriteHWCheckpoint), so a power failure may leave it garbled, and a
// partition without a checkpointed high watermark starts from 0 and
// learns its high watermark from its leader and ISR again, as a new
// replica does. A file that cannot be read is an error.
func ReadHWCheckpoints(dirs []string, logger hclog.Logger) (*HWCheckpoints, error) {
	c := &HWCheckpoints{initial: map[coord.TopicPartition]hwEntry{}}
	for _, d := range dirs {
		path := filepath.Join(d, hwCheckpointFile)
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read high watermark checkpoint %s: %w", path, err)
		}
		entries, err := parseHWCheckpoint(f)
		f.Close()
		var perr *hwParseError
		if errors.As(err, &perr) {
			logger.Warn("high watermark checkpoint does not parse; its partitions start from high watermark 0", "path", path, "error", err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read high watermark checkpoint %s: %w", path, err)
		}
		for tp, hw := range entries {
			c.initial[tp] = hwEntry{dir: d, hw: hw}
		}
	}
	return c, nil
}

// hwParseError is a checkpoint file whose content is not Kafka's format.
type hwParseError struct{ msg string }

func (e *hwParseError) Error() string { return e.msg }

func parseErrorf(format string, args ...any) error {
	return &hwParseError{msg: fmt.Sprintf(format, args...)}
}

// parseHWCheckpoint parses one checkpoint file.
func parseHWCheckpoint(f *os.File) (map[coord.TopicPartition]int64, error) {
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, parseErrorf("a line over %d bytes", bufio.MaxScanTokenSize)
	} else if err != nil {
		return nil, err
	}
	if len(lines) < 2 || lines[0] != "0" {
		return nil, parseErrorf("want version 0 and a count, got %d lines", len(lines))
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, parseErrorf("count %q does not match %d entries", lines[1], len(lines)-2)
	}
	out := make(map[coord.TopicPartition]int64, n)
	for i, l := range lines[2:] {
		fields := strings.Fields(l)
		if len(fields) != 3 {
			return nil, parseErrorf("entry %d %q: want \"topic partition offset\"", i, l)
		}
		part, err1 := strconv.ParseInt(fields[1], 10, 32)
		hw, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil || part < 0 || hw < 0 {
			return nil, parseErrorf("entry %d %q: bad partition or offset", i, l)
		}
		out[coord.TopicPartition{Topic: fields[0], Partition: int32(part)}] = hw
	}
	return out, nil
}

// Lookup returns the checkpointed high watermark of tp, or 0.
func (c *HWCheckpoints) Lookup(tp coord.TopicPartition) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initial[tp].hw
}

// Forget drops tp's entry (its log was deleted).
func (c *HWCheckpoints) Forget(tp coord.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.initial, tp)
}

// Range calls f, with the checkpoints locked, for every entry read at
// start and not forgotten since: the partition, the log dir holding it and
// its high watermark. f must not call c.
func (c *HWCheckpoints) Range(f func(tp coord.TopicPartition, dir string, hw int64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, e := range c.initial {
		f(tp, e.dir, e.hw)
	}
}

// WriteHWCheckpoint replaces log dir dir's checkpoint file with entries,
// the high watermarks of the partitions in it, sorted, through
// replaceFile, with its fsyncs only when durable. The periodic
// checkpoint is not durable: its two fsyncs each flush the disk's write
// cache, and every broker on a machine writing at the same interval held
// up appends on that disk for 100-500 ms every 5 s (see
// docs/bench/README.md, "Tail latency"). A checkpoint lost to a power
// failure is one older or none: a replica's high watermark starts at the
// lower of it and the log end, a follower truncates by leader epochs (in
// hw mode to it, which a checkpoint one interval old already lags), and
// the segments it describes are not fsynced at that moment either. The
// checkpoint at shutdown is durable.
func WriteHWCheckpoint(dir string, entries map[coord.TopicPartition]int64, durable bool) error {
	lines := make([]string, 0, len(entries))
	for tp, hw := range entries {
		lines = append(lines, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, hw))
	}
	sort.Strings(lines)
	content := fmt.Sprintf("0\n%d\n", len(lines))
	if len(lines) > 0 {
		content += strings.Join(lines, "\n") + "\n"
	}
	return replaceFile(filepath.Join(dir, hwCheckpointFile), []byte(content), durable)
}
