package txncoord

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/txn"
)

// TestMarkerRequestGroupsPartitionsByTopic checks the WriteTxnMarkers a
// leader is sent: one marker of the producer's epoch, the outcome and the
// coordinator epoch, its partitions grouped by topic in order.
func TestMarkerRequestGroupsPartitionsByTopic(t *testing.T) {
	tps := []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}
	req := MarkerRequest(7, 3, true, 5, tps)
	if req.Version != 1 || len(req.Markers) != 1 {
		t.Fatalf("got version %d with %d markers, want version 1 with 1", req.Version, len(req.Markers))
	}
	mk := req.Markers[0]
	if mk.ProducerID != 7 || mk.ProducerEpoch != 3 || !mk.Committed || mk.CoordinatorEpoch != 5 {
		t.Errorf("got producer %d epoch %d committed %v coordinator epoch %d, want 7, 3, true, 5", mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch)
	}
	got := map[string][]int32{}
	var order []string
	for _, tp := range mk.Topics {
		got[tp.Topic] = tp.Partitions
		order = append(order, tp.Topic)
	}
	if want := map[string][]int32{"a": {0, 2}, "b": {1}}; !reflect.DeepEqual(got, want) || !reflect.DeepEqual(order, []string{"a", "b"}) {
		t.Errorf("got topics %v in order %v, want %v in order [a b]", got, order, want)
	}
}

// TestMarkerActions checks how a leader's answer is read: each asked
// partition's code as txn.MarkerOutcome says, partitions not asked for or
// of another producer ignored, partitions not answered absent (retried).
func TestMarkerActions(t *testing.T) {
	a0, a1, b0 := txn.TopicPartition{Topic: "a", Partition: 0}, txn.TopicPartition{Topic: "a", Partition: 1}, txn.TopicPartition{Topic: "b", Partition: 0}
	answer := func(pid int64, topic string, codes map[int32]int16) kmsg.WriteTxnMarkersResponseMarker {
		mk := kmsg.NewWriteTxnMarkersResponseMarker()
		mk.ProducerID = pid
		tp := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		tp.Topic = topic
		for p, code := range codes {
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			tp.Partitions = append(tp.Partitions, rp)
		}
		mk.Topics = append(mk.Topics, tp)
		return mk
	}
	for _, tc := range []struct {
		name    string
		markers []kmsg.WriteTxnMarkersResponseMarker
		want    map[txn.TopicPartition]txn.MarkerAction
	}{
		{"written and retried", []kmsg.WriteTxnMarkersResponseMarker{
			answer(7, "a", map[int32]int16{0: 0, 1: kerr.NotLeaderForPartition.Code}),
			answer(7, "b", map[int32]int16{0: kerr.UnsupportedForMessageFormat.Code}),
		}, map[txn.TopicPartition]txn.MarkerAction{a0: txn.MarkerWritten, a1: txn.MarkerRetry, b0: txn.MarkerDropPartition}},
		{"fenced", []kmsg.WriteTxnMarkersResponseMarker{
			answer(7, "a", map[int32]int16{0: kerr.InvalidProducerEpoch.Code}),
		}, map[txn.TopicPartition]txn.MarkerAction{a0: txn.MarkerAbandon}},
		{"another producer and a partition not asked", []kmsg.WriteTxnMarkersResponseMarker{
			answer(8, "a", map[int32]int16{0: 0}),
			answer(7, "a", map[int32]int16{5: 0}),
		}, map[txn.TopicPartition]txn.MarkerAction{}},
		{"no answer", nil, map[txn.TopicPartition]txn.MarkerAction{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := kmsg.NewPtrWriteTxnMarkersResponse()
			resp.Markers = tc.markers
			if got := MarkerActions(resp, 7, []txn.TopicPartition{a0, a1, b0}); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStoreCode checks the answer a failed write to __transaction_state
// gives the client, as Kafka's TransactionStateManager maps it.
func TestStoreCode(t *testing.T) {
	for _, tc := range []struct{ in, want int16 }{
		{0, 0},
		{kerr.NotEnoughReplicas.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.RequestTimedOut.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.UnknownTopicOrPartition.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{kerr.KafkaStorageError.Code, kerr.NotCoordinator.Code},
		{kerr.MessageTooLarge.Code, kerr.UnknownServerError.Code},
	} {
		if got := storeCode(tc.in); got != tc.want {
			t.Errorf("storeCode(%d): got %d, want %d", tc.in, got, tc.want)
		}
	}
}
