package replica

import (
	"testing"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
)

// TestRoleChangeOf: a LeaderAndIsr state older than the one the
// replication state holds is stale, the very same one (a new controller's
// full state) changes nothing, and any newer one, or one of the same
// epochs that differs, is applied.
func TestRoleChangeOf(t *testing.T) {
	held := controller.PartitionInfo{
		PartitionState: coord.PartitionState{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 5, ISR: []coord.BrokerID{2, 3}, PartitionEpoch: 7, ControllerEpoch: 3},
		TopicID:        [16]byte{1}, Replicas: []coord.BrokerID{1, 2, 3},
	}
	with := func(f func(*controller.PartitionInfo)) controller.PartitionInfo {
		info := held
		info.ISR = append([]coord.BrokerID(nil), held.ISR...)
		info.Replicas = append([]coord.BrokerID(nil), held.Replicas...)
		f(&info)
		return info
	}
	for _, c := range []struct {
		name string
		info controller.PartitionInfo
		want roleChange
	}{
		{"the same state, sent by a newer controller", with(func(i *controller.PartitionInfo) { i.ControllerEpoch = 4 }), roleSame},
		{"an older leader epoch", with(func(i *controller.PartitionInfo) { i.LeaderEpoch = 4; i.PartitionEpoch = 9 }), roleStale},
		{"an older partition epoch", with(func(i *controller.PartitionInfo) { i.PartitionEpoch = 6 }), roleStale},
		{"a newer partition epoch", with(func(i *controller.PartitionInfo) { i.PartitionEpoch = 8; i.ISR = []coord.BrokerID{2} }), roleApplied},
		{"the same epochs, another ISR", with(func(i *controller.PartitionInfo) { i.ISR = []coord.BrokerID{2, 3, 1} }), roleApplied},
		{"the same epochs, other replicas", with(func(i *controller.PartitionInfo) { i.Replicas = []coord.BrokerID{2, 3} }), roleApplied},
		{"a newer leader epoch", with(func(i *controller.PartitionInfo) { i.LeaderEpoch = 6; i.Leader = 3 }), roleApplied},
	} {
		rep, err := replication.New(replication.DefaultConfig(), 1)
		if err != nil {
			t.Fatalf("replication state: %v", err)
		}
		st := held
		if _, err := rep.BecomeFollower(replication.State{Leader: replication.ReplicaID(st.Leader), LeaderEpoch: st.LeaderEpoch,
			PartitionEpoch: st.PartitionEpoch, Replicas: replicaIDs(st.Replicas), ISR: replicaIDs(st.ISR)}, 0, 0, nil); err != nil {
			t.Fatalf("hold the state: %v", err)
		}
		p := &Partition{topicID: held.TopicID, rep: rep}
		if got := p.roleChangeOf(c.info); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
		if got := p.Role(); got.PartitionEpoch != held.PartitionEpoch {
			t.Errorf("%s: got the held state changed to %+v, want partition epoch %d", c.name, got, held.PartitionEpoch)
		}
	}
}
