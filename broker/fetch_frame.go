package broker

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/coord"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// minSpliceBytes is the least a partition's records must make for a
// fetch response to send them from the segment file (sendfile) rather
// than copy them: below it the copy costs less than the splice's own
// system calls and the flush of the bytes before it.
const minSpliceBytes = 32 << 10

// spliced is what a partition's RecordBatches hold while its records are
// a segment file's slice (request.slices) that the response's frame
// sends from the file: not empty, so that a fetch session keeps the
// partition in an incremental answer as one with records.
var spliced = []byte{0}

// fetchSlices holds the file slices of a fetch response's partitions
// (RecordBatches is spliced), until its frame is encoded.
type fetchSlices map[coord.TopicPartition]*tlog.Slice

// fetchReads holds what a fetch's records are read into until its
// answer is encoded: the segment file slices of the partitions sent from
// their files (plaintext connections only), and the buffers, from the
// frame pools, of those read into memory. Encoding copies the buffers'
// records into the frame, so they go back to the pools then, and a
// follower's fetch at the log's tail allocates nothing to read.
type fetchReads struct {
	// slices is nil when records are not sent from files (TLS, or a
	// Fetch before v4).
	slices fetchSlices
	bufs   [][]byte
}

// newFetchReads returns the reads of a fetch whose records may be sent
// from their files when splice is set.
func newFetchReads(splice bool) *fetchReads {
	fr := &fetchReads{}
	if splice {
		fr.slices = fetchSlices{}
	}
	return fr
}

// alloc is a log.Alloc: a buffer of n bytes from the frame pools, kept
// until release.
func (fr *fetchReads) alloc(n int) []byte {
	b := network.GetFrame(n)[:n]
	fr.bufs = append(fr.bufs, b)
	return b
}

// bytes is how many record bytes the slices hold.
func (fr *fetchReads) bytes() int {
	n := 0
	for _, s := range fr.slices {
		n += s.Len
	}
	return n
}

// release releases every slice and gives every buffer back to its pool:
// nothing may read the records of a response built on them after.
func (fr *fetchReads) release() {
	for tp, s := range fr.slices {
		s.Release()
		delete(fr.slices, tp)
	}
	for i, b := range fr.bufs {
		network.PutFrame(b)
		fr.bufs[i] = nil
	}
	fr.bufs = fr.bufs[:0]
}

// encodeFetchFrame frames resp, a Fetch response to a request of
// correlationID, with the records of the partitions in slices as
// splices, sent from their files. It takes the slices it uses out of
// slices. ok is false, and nothing taken, for a response it does not
// encode (a version outside 4-12, unknown tags): the caller reads the
// slices into the response and encodes it as any other.
//
// The layout is kmsg's FetchResponse.AppendTo, field for field, which
// TestFetchFrameMatchesKmsg checks for every version.
func encodeFetchFrame(correlationID int32, resp *kmsg.FetchResponse, slices fetchSlices) (network.Frame, bool) {
	v := resp.Version
	if v < 4 || v > 12 || !fetchFrameEncodable(resp) {
		return network.Frame{}, false
	}
	flex := v >= 12
	dst := network.GetFrame(responseSizeHint(resp) + 8)[:8]
	binary.BigEndian.PutUint32(dst[4:], uint32(correlationID))
	if flex {
		dst = append(dst, 0) // the header's tagged fields
	}
	var splices []network.Splice
	dst = kbin.AppendInt32(dst, resp.ThrottleMillis)
	if v >= 7 {
		dst = kbin.AppendInt16(dst, resp.ErrorCode)
		dst = kbin.AppendInt32(dst, resp.SessionID)
	}
	dst = appendFetchArrayLen(dst, len(resp.Topics), flex)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if flex {
			dst = kbin.AppendCompactString(dst, t.Topic)
		} else {
			dst = kbin.AppendString(dst, t.Topic)
		}
		dst = appendFetchArrayLen(dst, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendInt64(dst, p.HighWatermark)
			dst = kbin.AppendInt64(dst, p.LastStableOffset)
			if v >= 5 {
				dst = kbin.AppendInt64(dst, p.LogStartOffset)
			}
			if flex {
				dst = kbin.AppendCompactNullableArrayLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil)
			} else {
				dst = kbin.AppendNullableArrayLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil)
			}
			for _, a := range p.AbortedTransactions {
				dst = kbin.AppendInt64(dst, a.ProducerID)
				dst = kbin.AppendInt64(dst, a.FirstOffset)
				if flex {
					dst = append(dst, 0)
				}
			}
			if v >= 11 {
				dst = kbin.AppendInt32(dst, p.PreferredReadReplica)
			}
			records := p.RecordBatches
			var slice *tlog.Slice
			if len(records) > 0 && &records[0] == &spliced[0] {
				if slice = slices[coord.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; slice == nil {
					records = []byte{} // never sent: the marker is no record
				}
			}
			n := len(records)
			if slice != nil {
				n = slice.Len
			}
			switch {
			case records == nil && flex:
				dst = append(dst, 0)
			case records == nil:
				dst = kbin.AppendInt32(dst, -1)
			case flex:
				dst = kbin.AppendUvarint(dst, uint32(n)+1)
			default:
				dst = kbin.AppendInt32(dst, int32(n))
			}
			if slice != nil {
				splices = append(splices, network.Splice{At: len(dst), File: slice.File(), Pos: slice.Pos, Len: slice.Len, Release: slice.Release})
				delete(slices, coord.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			} else {
				dst = append(dst, records...)
			}
			if flex {
				dst = appendFetchPartitionTags(dst, p)
			}
		}
		if flex {
			dst = append(dst, 0)
		}
	}
	if flex {
		dst = append(dst, 0)
	}
	f := network.Frame{Bytes: dst, Splices: splices}
	binary.BigEndian.PutUint32(dst, uint32(f.Len()-4))
	return f, true
}

// fetchFrameEncodable reports whether resp carries nothing
// encodeFetchFrame leaves out: unknown tags, or the brokers of a v16
// response.
func fetchFrameEncodable(resp *kmsg.FetchResponse) bool {
	if resp.UnknownTags.Len() > 0 || len(resp.Brokers) > 0 {
		return false
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 || p.DivergingEpoch.UnknownTags.Len() > 0 || p.CurrentLeader.UnknownTags.Len() > 0 || p.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
			for _, a := range p.AbortedTransactions {
				if a.UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// appendFetchArrayLen appends an array's length, compact when flex.
func appendFetchArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}

// appendFetchPartitionTags appends a v12 partition's tagged fields: the
// diverging epoch (tag 0), the current leader (1) and the snapshot id
// (2), each when not its default, as kmsg does.
func appendFetchPartitionTags(dst []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	diverging := p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1
	leader := p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1
	snapshot := p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1
	n := 0
	for _, set := range []bool{diverging, leader, snapshot} {
		if set {
			n++
		}
	}
	dst = kbin.AppendUvarint(dst, uint32(n))
	if diverging {
		dst = append(dst, 0, 4+8+1)
		dst = kbin.AppendInt32(dst, p.DivergingEpoch.Epoch)
		dst = kbin.AppendInt64(dst, p.DivergingEpoch.EndOffset)
		dst = append(dst, 0)
	}
	if leader {
		dst = append(dst, 1, 4+4+1)
		dst = kbin.AppendInt32(dst, p.CurrentLeader.LeaderID)
		dst = kbin.AppendInt32(dst, p.CurrentLeader.LeaderEpoch)
		dst = append(dst, 0)
	}
	if snapshot {
		dst = append(dst, 2, 8+4+1)
		dst = kbin.AppendInt64(dst, p.SnapshotID.EndOffset)
		dst = kbin.AppendInt32(dst, p.SnapshotID.Epoch)
		dst = append(dst, 0)
	}
	return dst
}

// readSlices reads the records of resp's partitions held as slices in
// reads into the response, for a frame that cannot splice them; a
// partition whose slice cannot be read answers KAFKA_STORAGE_ERROR, as a
// failed read does.
func (b *Broker) readSlices(resp *kmsg.FetchResponse, reads *fetchReads) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			tp := coord.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			s := reads.slices[tp]
			if len(p.RecordBatches) == 0 || &p.RecordBatches[0] != &spliced[0] || s == nil {
				continue
			}
			data, err := s.Bytes(reads.alloc)
			if err != nil {
				b.logger.Error("read failed", "topic", t.Topic, "partition", p.Partition, "error", err)
				p.ErrorCode, data = kerr.KafkaStorageError.Code, []byte{}
			}
			p.RecordBatches = data
		}
	}
}
