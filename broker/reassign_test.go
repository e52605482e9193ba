package broker

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPartitionReassignment moves partitions with kadm's
// AlterPartitionAssignments on four brokers: one partition's replication
// factor rises from 1 to 3, another moves off its only replica to a
// broker that had none. ListPartitionReassignments shows them until the
// new replicas are in sync; then every broker's Metadata has the target
// replicas in sync, every record produced before is read back, and the
// replicas that left are gone from their brokers. Bad input gets Kafka's
// error codes and changes nothing.
func TestPartitionReassignment(t *testing.T) {
	brokers := startRaftCluster(t, 4)
	ctx := testContext(t, 2*time.Minute)
	cl := newClient(t, brokers[0], kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("moves"))
	adm := kadm.NewClient(cl)

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "moves", -1, -1
	for p, replica := range []int32{1, 2} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), []int32{replica}
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic moves: %v %v", err, cresp)
	}
	const records = 200
	for i := range records {
		r := &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	// Bad input first: each refusal changes nothing.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign("moves", 0, []int32{1, 9})
	bad.Assign("moves", 1, []int32{2, 2})
	bad.Assign("nope", 0, []int32{1})
	res, err := adm.AlterPartitionAssignments(ctx, bad)
	if err != nil {
		t.Fatalf("alter partition assignments: %v", err)
	}
	for _, want := range []struct {
		topic     string
		partition int32
		err       error
	}{{"moves", 0, kerr.InvalidReplicaAssignment}, {"moves", 1, kerr.InvalidReplicaAssignment}, {"nope", 0, kerr.UnknownTopicOrPartition}} {
		if got := res[want.topic][want.partition].Err; !errors.Is(got, want.err) {
			t.Errorf("reassign %s-%d: got %v, want %v", want.topic, want.partition, got, want.err)
		}
	}
	var cancelNone kadm.AlterPartitionAssignmentsReq
	cancelNone.CancelAssign("moves", 0)
	if res, err := adm.AlterPartitionAssignments(ctx, cancelNone); err != nil || !errors.Is(res["moves"][0].Err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancel with none in progress: got %v %v, want NO_REASSIGNMENT_IN_PROGRESS", err, res)
	}
	controllerID, _, _ := metadataOf(t, brokers[0], "moves")
	for _, b := range brokers {
		if b.ID() == controllerID {
			continue
		}
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		if resp := askBroker[*kmsg.ListPartitionReassignmentsResponse](t, b, req); resp.ErrorCode != kerr.NotController.Code {
			t.Errorf("ListPartitionReassignments at broker %d (not the controller): got error %d, want NOT_CONTROLLER", b.ID(), resp.ErrorCode)
		}
		break
	}
	if _, _, parts := metadataOf(t, brokers[0], "moves"); !slices.Equal(parts[0].replicas, []int32{1}) || !slices.Equal(parts[1].replicas, []int32{2}) {
		t.Fatalf("after refused reassignments: replicas %v and %v, want [1] and [2]", parts[0].replicas, parts[1].replicas)
	}

	var move kadm.AlterPartitionAssignmentsReq
	move.Assign("moves", 0, []int32{1, 3, 4})
	move.Assign("moves", 1, []int32{3})
	res, err = adm.AlterPartitionAssignments(ctx, move)
	if err != nil || res.Error() != nil {
		t.Fatalf("reassign: got %v %v, want accepted", err, res.Error())
	}
	waitFor(t, ctx, "the reassignments to complete", func() bool {
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moves": {0: {}, 1: {}}})
		return err == nil && len(l) == 0
	})
	want := [][]int32{{1, 3, 4}, {3}}
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("broker %d's metadata to show the target replicas in sync", b.ID()), func() bool {
			_, _, parts := metadataOf(t, b, "moves")
			for p, w := range want {
				got := parts[p]
				if !slices.Equal(got.replicas, w) || !slices.Equal(got.isr, w) || !slices.Contains(w, got.leader) {
					return false
				}
			}
			return true
		})
	}
	waitFor(t, ctx, "broker 2 to drop its replica of moves-1", func() bool { return brokers[1].replicas.PartitionFor("moves", 1) == nil })
	for _, b := range brokers[2:] {
		if b.replicas.PartitionFor("moves", 0) == nil {
			t.Errorf("broker %d holds no replica of moves-0, want one", b.ID())
		}
	}

	consumer := newClient(t, brokers[0], kgo.ConsumeTopics("moves"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < records {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", len(got), records, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for i := range records {
		if !got[fmt.Sprintf("v%d", i)] {
			t.Fatalf("record v%d lost by the reassignment", i)
		}
	}
}
