package raft

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
)

// statesCommit is a commit of SetPartitions over two topics, with the
// shapes a failover writes: a new leader, an ISR without a broker, an
// empty ISR, and a creating SetPartition (NewPartition).
func statesCommit() command {
	return command{Type: cmdCommit, Epoch: 7, Ops: []wireOp{
		{SetPartition: &coord.SetPartition{State: coord.PartitionState{Topic: "orders", Partition: 0, Leader: 2, LeaderEpoch: 5, ISR: []coord.BrokerID{2, 3}, PartitionEpoch: 9, ControllerEpoch: 7}, ExpectedEpoch: 8}},
		{SetPartition: &coord.SetPartition{State: coord.PartitionState{Topic: "clicks", Partition: 99999, Leader: coord.NoBroker, LeaderEpoch: 1 << 30, PartitionEpoch: 0, ControllerEpoch: 1 << 40}, ExpectedEpoch: coord.NewPartition}},
		{SetPartition: &coord.SetPartition{State: coord.PartitionState{Topic: "orders", Partition: 1, Leader: 3, ISR: []coord.BrokerID{3, 1, 2}, ControllerEpoch: 7}, ExpectedEpoch: 0}},
	}}
}

// TestEncodeCommandStatesCommitIsBinary: a commit of SetPartitions only is
// written in the binary form and decodes to what JSON would have given;
// any other command stays JSON.
func TestEncodeCommandStatesCommitIsBinary(t *testing.T) {
	cmd := statesCommit()
	data, err := encodeCommand(&cmd)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != binaryCommitV1 {
		t.Fatalf("states commit: first byte %#x, want the binary format %#x", data[0], binaryCommitV1)
	}
	var got command
	if err := decodeCommand(data, &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	js, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var want command
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("binary round trip:\n got %+v\nwant %+v", got, want)
	}
	if len(data) >= len(js)/3 {
		t.Errorf("binary entry %d bytes, JSON %d: want it under a third", len(data), len(js))
	}

	create, _ := topicOf("t", 2)
	for _, other := range []command{
		{Type: cmdCommit, Epoch: 7, Ops: []wireOp{{CreateTopic: &create}}},
		{Type: cmdCommit, Epoch: 7, Ops: append(statesCommit().Ops, wireOp{DeleteTopic: &coord.DeleteTopic{Name: "t"}})},
		{Type: cmdCommit, Epoch: 7},
		{Type: cmdRegister, Broker: coord.Broker{ID: 1, Host: "h", Port: 9092}},
	} {
		data, err := encodeCommand(&other)
		if err != nil {
			t.Fatal(err)
		}
		if data[0] != '{' {
			t.Errorf("%s with %d ops: first byte %q, want JSON", other.Type, len(other.Ops), data[0])
		}
	}
}

// TestDecodeCommandRejectsMalformedBinary: every truncation of a binary
// entry, and one with bytes after its last op, fails with errBadEntry
// rather than decoding to something else.
func TestDecodeCommandRejectsMalformedBinary(t *testing.T) {
	cmd := statesCommit()
	data, err := encodeCommand(&cmd)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(data); n++ {
		var got command
		if err := decodeCommand(data[:n], &got); !errors.Is(err, errBadEntry) {
			t.Fatalf("entry cut to %d of %d bytes: got %v, want errBadEntry", n, len(data), err)
		}
	}
	var got command
	if err := decodeCommand(append(data, 0), &got); !errors.Is(err, errBadEntry) {
		t.Fatalf("entry with a trailing byte: got %v, want errBadEntry", err)
	}
	// A count larger than the entry could hold is refused before any
	// allocation of that size.
	huge := []byte{binaryCommitV1, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if err := decodeCommand(huge, &got); !errors.Is(err, errBadEntry) {
		t.Fatalf("topic count beyond the entry: got %v, want errBadEntry", err)
	}
}

// TestFSMAppliesJSONAndBinaryCommitsAlike: the same commit applied from
// its binary entry and from a JSON entry (as written before the binary
// form existed) leaves equal metadata.
func TestFSMAppliesJSONAndBinaryCommitsAlike(t *testing.T) {
	create, states := topicOf("orders", 3)
	var ops []wireOp
	for _, st := range states {
		st.Leader, st.LeaderEpoch, st.ISR = 2, 1, []coord.BrokerID{2, 3}
		ops = append(ops, wireOp{SetPartition: &coord.SetPartition{State: st, ExpectedEpoch: 0}})
	}
	metadataAfter := func(encode func(*command) ([]byte, error)) *coord.Metadata {
		f := newFSM()
		b1 := fsmLog(t, f, 1, 1, command{Type: cmdRegister, Broker: coord.Broker{ID: 1}}).Broker
		epoch := fsmLog(t, f, 2, 1, command{Type: cmdClaim, Broker: b1}).Epoch
		if res := fsmLog(t, f, 3, 1, command{Type: cmdCommit, Epoch: epoch, Ops: []wireOp{{CreateTopic: &create}}}); res.Err != nil {
			t.Fatal(res.Err)
		}
		data, err := encode(&command{Type: cmdCommit, Epoch: epoch, Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := f.Apply(&hraft.Log{Index: 4, Term: 1, Type: hraft.LogCommand, Data: data}).(applyResult)
		if res.Err != nil {
			t.Fatalf("apply: %v", res.Err)
		}
		return f.metadata()
	}
	binary := metadataAfter(encodeCommand)
	jsonMD := metadataAfter(func(c *command) ([]byte, error) { return json.Marshal(c) })
	if !reflect.DeepEqual(binary, jsonMD) {
		t.Fatalf("binary commit gave %+v, JSON %+v", binary.Partitions, jsonMD.Partitions)
	}
	if st := binary.Partitions[coord.TopicPartition{Topic: "orders", Partition: 2}]; st.Leader != 2 || st.PartitionEpoch != 1 || !reflect.DeepEqual(st.ISR, []coord.BrokerID{2, 3}) {
		t.Fatalf("orders-2 after the commit: %+v", st)
	}
}

// BenchmarkDecodeStatesCommit compares decoding one full commit entry of
// SetPartitions in the binary form and in JSON.
func BenchmarkDecodeStatesCommit(b *testing.B) {
	var ops []wireOp
	for p := range statesPerEntry {
		ops = append(ops, wireOp{SetPartition: &coord.SetPartition{State: coord.PartitionState{
			Topic: "topic-042", Partition: int32(p), Leader: 2, LeaderEpoch: 3, ISR: []coord.BrokerID{2, 3}, PartitionEpoch: 4, ControllerEpoch: 5}, ExpectedEpoch: 3}})
	}
	cmd := command{Type: cmdCommit, Epoch: 5, Ops: ops}
	bin, err := encodeCommand(&cmd)
	if err != nil {
		b.Fatal(err)
	}
	js, err := json.Marshal(&cmd)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"binary", bin}, {"json", js}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				var got command
				if err := decodeCommand(c.data, &got); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/statesPerEntry, "ns/state")
		})
	}
}
