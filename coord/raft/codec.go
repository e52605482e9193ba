package raft

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/tripodmq/tripod/coord"
)

// Log entry encodings. Every command is JSON but one: a commit whose ops
// are all SetPartitions (a failover's new leaders and ISRs, AlterPartition's
// ISR changes, the bulk of a large topic's creation), by far the most of
// what the log carries at scale, is written in the compact binary form
// below. In JSON, decoding was 3 µs per partition state on every node, the
// larger part of the CPU a 100 000-partition controller failover spent;
// binary it is some 20 bytes and a tenth of a microsecond. A JSON entry
// starts with '{', a binary one with its format byte, so both decode, and
// entries written before the binary form existed still apply.
//
// Binary commit, format 1, all integers varints (zigzag for signed):
//
//	0x01 epoch topics [name-length name]... ops [op]...
//	op: topic-index partition leader leader-epoch isr-length [isr]...
//	    partition-epoch controller-epoch expected-epoch
const binaryCommitV1 byte = 0x01

// encodeCommand encodes cmd as one log entry.
func encodeCommand(cmd *command) ([]byte, error) {
	// A commit carries only its epoch and ops (applyLocked reads no
	// other field of it).
	if cmd.Type == cmdCommit && len(cmd.Ops) > 0 && onlySetPartitions(cmd.Ops) {
		return encodeStatesCommit(cmd.Epoch, cmd.Ops), nil
	}
	return json.Marshal(cmd)
}

// decodeCommand decodes a log entry written by encodeCommand, or by any
// earlier version (JSON).
func decodeCommand(data []byte, cmd *command) error {
	if len(data) > 0 && data[0] == binaryCommitV1 {
		return decodeStatesCommit(data[1:], cmd)
	}
	return json.Unmarshal(data, cmd)
}

// onlySetPartitions reports whether every op is a SetPartition.
func onlySetPartitions(ops []wireOp) bool {
	for _, op := range ops {
		if op.SetPartition == nil || op.CreateTopic != nil || op.SetTopic != nil || op.DeleteTopic != nil || op.Partial {
			return false
		}
	}
	return true
}

func encodeStatesCommit(epoch int64, ops []wireOp) []byte {
	index := map[string]uint64{}
	var names []string
	for _, op := range ops {
		name := op.SetPartition.State.Topic
		if _, ok := index[name]; !ok {
			index[name] = uint64(len(names))
			names = append(names, name)
		}
	}
	buf := make([]byte, 0, 16+len(ops)*24)
	buf = append(buf, binaryCommitV1)
	buf = binary.AppendVarint(buf, epoch)
	buf = binary.AppendUvarint(buf, uint64(len(names)))
	for _, name := range names {
		buf = binary.AppendUvarint(buf, uint64(len(name)))
		buf = append(buf, name...)
	}
	buf = binary.AppendUvarint(buf, uint64(len(ops)))
	for _, op := range ops {
		sp := op.SetPartition
		st := sp.State
		buf = binary.AppendUvarint(buf, index[st.Topic])
		buf = binary.AppendVarint(buf, int64(st.Partition))
		buf = binary.AppendVarint(buf, int64(st.Leader))
		buf = binary.AppendVarint(buf, int64(st.LeaderEpoch))
		buf = binary.AppendUvarint(buf, uint64(len(st.ISR)))
		for _, id := range st.ISR {
			buf = binary.AppendVarint(buf, int64(id))
		}
		buf = binary.AppendVarint(buf, int64(st.PartitionEpoch))
		buf = binary.AppendVarint(buf, st.ControllerEpoch)
		buf = binary.AppendVarint(buf, int64(sp.ExpectedEpoch))
	}
	return buf
}

// errBadEntry is what a binary entry that does not decode fails with.
var errBadEntry = errors.New("malformed binary commit entry")

// entryReader reads the varints of a binary entry, remembering the first
// failure.
type entryReader struct {
	b   []byte
	err error
}

func (r *entryReader) uvarint(what string) uint64 { return readVarint(r, what, binary.Uvarint) }

func (r *entryReader) varint(what string) int64 { return readVarint(r, what, binary.Varint) }

// readVarint reads one varint of r with decode (binary.Uvarint or
// binary.Varint).
func readVarint[T uint64 | int64](r *entryReader, what string, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: %s", errBadEntry, what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int32 reads a signed varint that must fit an int32.
func (r *entryReader) int32(what string) int32 {
	v := r.varint(what)
	if r.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		r.err = fmt.Errorf("%w: %s %d out of range", errBadEntry, what, v)
	}
	return int32(v)
}

// count reads a length that cannot exceed what is left of the entry
// (each counted item takes at least size bytes).
func (r *entryReader) count(what string, size int) int {
	v := r.uvarint(what)
	if r.err == nil && v > uint64(len(r.b)/size) {
		r.err = fmt.Errorf("%w: %s %d exceeds the entry", errBadEntry, what, v)
	}
	if r.err != nil {
		return 0
	}
	return int(v)
}

func decodeStatesCommit(data []byte, cmd *command) error {
	r := &entryReader{b: data}
	epoch := r.varint("epoch")
	names := make([]string, r.count("topic count", 1))
	for i := range names {
		n := r.count("topic name length", 1)
		if r.err != nil {
			return r.err
		}
		names[i] = string(r.b[:n])
		r.b = r.b[n:]
	}
	// One allocation for all the states, and mostly one for all the
	// ISRs (three replicas each is the common case).
	sets := make([]coord.SetPartition, r.count("op count", 8))
	isrs := make([]coord.BrokerID, 0, 3*len(sets))
	ops := make([]wireOp, len(sets))
	for i := range sets {
		ti := r.uvarint("topic index")
		if r.err == nil && ti >= uint64(len(names)) {
			r.err = fmt.Errorf("%w: topic index %d of %d topics", errBadEntry, ti, len(names))
		}
		st := &sets[i].State
		st.Partition = r.int32("partition")
		st.Leader = coord.BrokerID(r.int32("leader"))
		st.LeaderEpoch = r.int32("leader epoch")
		n := r.count("isr length", 1)
		if r.err != nil {
			return r.err
		}
		st.Topic = names[ti]
		start := len(isrs)
		for range n {
			isrs = append(isrs, coord.BrokerID(r.int32("isr member")))
		}
		if n > 0 {
			st.ISR = isrs[start:len(isrs):len(isrs)]
		}
		st.PartitionEpoch = r.int32("partition epoch")
		st.ControllerEpoch = r.varint("controller epoch")
		sets[i].ExpectedEpoch = r.int32("expected epoch")
		if r.err != nil {
			return r.err
		}
		ops[i] = wireOp{SetPartition: &sets[i]}
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) > 0 {
		return fmt.Errorf("%w: %d bytes after the last op", errBadEntry, len(r.b))
	}
	*cmd = command{Type: cmdCommit, Epoch: epoch, Ops: ops}
	return nil
}
