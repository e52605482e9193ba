package broker

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/kafkatest"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// TestFetchFrameMatchesKmsg: for random Fetch responses of every version
// encodeFetchFrame encodes (4 to 12), the frame with its splices read in
// place is byte for byte kmsg's encoding of the response with those
// records inline, and every slice is taken.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	l, err := tlog.Open(t.TempDir(), tlog.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		value := make([]byte, rng.IntN(2000))
		if _, err := l.Append(kafkatest.EncodeBatch(1000, -1, -1, -1, value), 0); err != nil {
			t.Fatal(err)
		}
	}
	end := l.EndOffset()
	for i := range 500 {
		version := int16(4 + i%9)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		resp.ThrottleMillis = rng.Int32()
		resp.ErrorCode = int16(rng.IntN(3))
		resp.SessionID = rng.Int32()
		slices := fetchSlices{}
		var want []network.Splice // the slices' bytes, in order
		wantBytes := map[coord.TopicPartition][]byte{}
		for ti := range rng.IntN(4) {
			topic := kmsg.NewFetchResponseTopic()
			topic.Topic = string(rune('a' + ti))
			for pi := range rng.IntN(5) {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(pi)
				p.ErrorCode = int16(rng.IntN(2))
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
				p.PreferredReadReplica = rng.Int32N(4) - 1
				if rng.IntN(2) == 0 {
					p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					for range rng.IntN(3) {
						p.AbortedTransactions = append(p.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: rng.Int64(), FirstOffset: rng.Int64()})
					}
				}
				if rng.IntN(3) == 0 {
					p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32(), rng.Int64()
				}
				if rng.IntN(3) == 0 {
					p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32(), rng.Int32()
				}
				if rng.IntN(4) == 0 {
					p.SnapshotID.EndOffset, p.SnapshotID.Epoch = rng.Int64(), rng.Int32()
				}
				tp := coord.TopicPartition{Topic: topic.Topic, Partition: p.Partition}
				switch rng.IntN(4) {
				case 0:
					p.RecordBatches = nil
				case 1:
					p.RecordBatches = []byte{}
				case 2:
					p.RecordBatches = make([]byte, rng.IntN(300))
					for k := range p.RecordBatches {
						p.RecordBatches[k] = byte(rng.IntN(256))
					}
				default:
					_, s, err := l.ReadSliceUpTo(rng.Int64N(end), rng.IntN(64<<10), end, 0, nil)
					if err != nil || s == nil {
						t.Fatalf("ReadSliceUpTo: %v, %v", s, err)
					}
					data, err := s.Bytes(nil)
					if err != nil {
						t.Fatal(err)
					}
					slices[tp], wantBytes[tp] = s, data
					want = append(want, network.Splice{Len: s.Len})
					p.RecordBatches = spliced
				}
				topic.Partitions = append(topic.Partitions, p)
			}
			resp.Topics = append(resp.Topics, topic)
		}
		corr := rng.Int32()
		f, ok := encodeFetchFrame(corr, resp, slices)
		if !ok {
			t.Fatalf("v%d: encodeFetchFrame refused a response it encodes", version)
		}
		if len(slices) != 0 || len(f.Splices) != len(want) {
			t.Fatalf("v%d: %d splices in the frame, %d slices left; want %d and 0", version, len(f.Splices), len(slices), len(want))
		}
		// The frame with its splices read in place.
		var got []byte
		at := 0
		for _, s := range f.Splices {
			got = append(got, f.Bytes[at:s.At]...)
			b := make([]byte, s.Len)
			if _, err := s.File.ReadAt(b, s.Pos); err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
			at = s.At
			s.Release()
		}
		got = append(got, f.Bytes[at:]...)
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				p := &resp.Topics[ti].Partitions[pi]
				if b, ok := wantBytes[coord.TopicPartition{Topic: resp.Topics[ti].Topic, Partition: p.Partition}]; ok {
					p.RecordBatches = b
				}
			}
		}
		if exp := encodeResponse(fetchKey, corr, resp); !bytes.Equal(got, exp) {
			t.Fatalf("v%d: the frame (%d bytes, %d splices) differs from kmsg's encoding (%d bytes)", version, len(got), len(f.Splices), len(exp))
		}
	}
}
