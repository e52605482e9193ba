package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// The decisions' tests build a State by hand, ask it one decision, and
// compare the plan, rendered one line per op and message, with the lines
// they expect, in the style of etcd raft's interaction tests. Renders:
//
//	drop 3
//	create topic t [[1 2] [2 3]]
//	  t-0 leader 1 epoch 0 isr [1 2]
//	set topic t [[1 2] [2 3] [3 1]]
//	delete topic t
//	set t-0 leader 2 epoch 1 isr [2 3] if 4      (if new: a new state)
//	to 2: LeaderAndIsr t-0 leader 2 epoch 1 isr [2 3]
//	to 2: UpdateMetadata live [1 2 3] t-0 deleted u
//	to 2: StopReplica delete t-0 t-1
//	--                                          (between steps)

// testControllerEpoch is the controller epoch of every test state.
const testControllerEpoch = 7

// ids is a list of broker IDs.
func ids(xs ...coord.BrokerID) []coord.BrokerID { return xs }

// brokerEpoch is the broker epoch test brokers are live at.
func brokerEpoch(id coord.BrokerID) int64 { return 100 + int64(id) }

// testBroker is broker id, live at brokerEpoch(id).
func testBroker(id coord.BrokerID) coord.Broker {
	return coord.Broker{ID: id, Host: "127.0.0.1", Port: 9000 + int32(id), Epoch: brokerEpoch(id)}
}

// part is one partition of a test state.
type part struct {
	topic    string
	p        int32
	replicas []coord.BrokerID
	leader   coord.BrokerID
	isr      []coord.BrokerID
	// leaderEpoch and partitionEpoch default to 0.
	leaderEpoch, partitionEpoch int32
}

// newTestState returns the state of controller broker 1 with brokers
// live (their full state sent, the live set announced) and parts stored.
func newTestState(policy Policy, live []coord.BrokerID, parts ...part) *State {
	md := coord.NewMetadata()
	for _, p := range parts {
		t := md.Topics[p.topic]
		t.Name = p.topic
		t.ID = [16]byte{p.topic[0]}
		for int(p.p) >= len(t.Assignment) {
			t.Assignment = append(t.Assignment, nil)
		}
		t.Assignment[p.p] = p.replicas
		md.Topics[p.topic] = t
		md.Partitions[coord.TopicPartition{Topic: p.topic, Partition: p.p}] = coord.PartitionState{
			Topic: p.topic, Partition: p.p, Leader: p.leader, ISR: p.isr,
			LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, ControllerEpoch: testControllerEpoch - 1,
		}
	}
	s := NewState(1, testControllerEpoch, md, policy, nil)
	for _, id := range live {
		s.live[id] = testBroker(id)
	}
	s.membersSeen = true
	return s
}

// withTopicConfig sets a config key of topic in s.
func withTopicConfig(s *State, topic, key, value string) *State {
	t := s.md.Topics[topic]
	t.Config = map[string]string{key: value}
	s.md.Topics[topic] = t
	return s
}

// render returns plan's lines and checks what every test relies on: each
// message carries this controller's ID and epoch and the broker epoch of
// the live incarnation it is addressed to, and each SetPartition carries
// the controller epoch.
func render(t *testing.T, s *State, plan Plan) []string {
	t.Helper()
	var lines []string
	for i, step := range plan.Steps {
		if i > 0 {
			lines = append(lines, "--")
		}
		for _, id := range step.Drops {
			lines = append(lines, fmt.Sprintf("drop %d", id))
		}
		for _, op := range step.Ops {
			lines = append(lines, renderOp(t, op)...)
		}
		for _, m := range step.Messages {
			checkHeader(t, s, m)
			lines = append(lines, renderMessage(m))
		}
	}
	return lines
}

func renderOp(t *testing.T, op coord.Op) []string {
	t.Helper()
	switch op := op.(type) {
	case coord.CreateTopic:
		lines := []string{fmt.Sprintf("create topic %s %v", op.Topic.Name, op.Topic.Assignment)}
		for _, st := range op.States {
			if st.ControllerEpoch != testControllerEpoch {
				t.Errorf("create topic %s: state %s has controller epoch %d, want %d", op.Topic.Name, st.TopicPartition(), st.ControllerEpoch, testControllerEpoch)
			}
			lines = append(lines, "  "+renderState(st))
		}
		return lines
	case coord.SetTopic:
		line := fmt.Sprintf("set topic %s %v", op.Topic.Name, op.Topic.Assignment)
		if len(op.Topic.Adding) > 0 || len(op.Topic.Removing) > 0 {
			line += fmt.Sprintf(" adding %v removing %v", op.Topic.Adding, op.Topic.Removing)
		}
		return []string{line}
	case coord.DeleteTopic:
		return []string{"delete topic " + op.Name}
	case coord.SetPartition:
		if op.State.ControllerEpoch != testControllerEpoch {
			t.Errorf("set %s: controller epoch %d, want %d", op.State.TopicPartition(), op.State.ControllerEpoch, testControllerEpoch)
		}
		expected := fmt.Sprint(op.ExpectedEpoch)
		if op.ExpectedEpoch == coord.NewPartition {
			expected = "new"
		}
		return []string{fmt.Sprintf("set %s if %s", renderState(op.State), expected)}
	}
	t.Fatalf("unknown op %T", op)
	return nil
}

func renderState(st coord.PartitionState) string {
	return fmt.Sprintf("%s leader %d epoch %d isr %v", st.TopicPartition(), st.Leader, st.LeaderEpoch, st.ISR)
}

func renderMessage(m Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "to %d: ", m.To.ID)
	switch r := m.Request.(type) {
	case *LeaderAndIsrRequest:
		parts := make([]string, len(r.Partitions))
		for i, p := range r.Partitions {
			parts[i] = renderState(p.PartitionState)
		}
		fmt.Fprintf(&b, "LeaderAndIsr %s", strings.Join(parts, ", "))
	case *UpdateMetadataRequest:
		live := make([]coord.BrokerID, len(r.Live))
		for i, l := range r.Live {
			live[i] = l.ID
		}
		fmt.Fprintf(&b, "UpdateMetadata live %v", live)
		for _, p := range r.Partitions {
			fmt.Fprintf(&b, " %s", p.TopicPartition())
		}
		if len(r.Deleted) > 0 {
			fmt.Fprintf(&b, " deleted %s", strings.Join(r.Deleted, " "))
		}
	case *StopReplicaRequest:
		b.WriteString("StopReplica")
		if r.Delete {
			b.WriteString(" delete")
		}
		for _, tp := range r.Partitions {
			fmt.Fprintf(&b, " %s", tp)
		}
	}
	return b.String()
}

// checkHeader checks a message's epochs and recipient.
func checkHeader(t *testing.T, s *State, m Message) {
	t.Helper()
	var controllerID coord.BrokerID
	var controllerEpoch, epoch int64
	switch r := m.Request.(type) {
	case *LeaderAndIsrRequest:
		controllerID, controllerEpoch, epoch = r.ControllerID, r.ControllerEpoch, r.BrokerEpoch
	case *UpdateMetadataRequest:
		controllerID, controllerEpoch, epoch = r.ControllerID, r.ControllerEpoch, r.BrokerEpoch
	case *StopReplicaRequest:
		controllerID, controllerEpoch, epoch = r.ControllerID, r.ControllerEpoch, r.BrokerEpoch
	default:
		t.Fatalf("message to %d: request %T", m.To.ID, m.Request)
	}
	if controllerID != 1 || controllerEpoch != testControllerEpoch {
		t.Errorf("message to %d: controller %d epoch %d, want 1 epoch %d", m.To.ID, controllerID, controllerEpoch, testControllerEpoch)
	}
	if epoch != m.To.Epoch || s.live[m.To.ID].Epoch != m.To.Epoch {
		t.Errorf("message to %d: broker epoch %d addressed to epoch %d, live at %d: want all equal", m.To.ID, epoch, m.To.Epoch, s.live[m.To.ID].Epoch)
	}
}

// checkLines compares a plan's lines with want.
func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("plan:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
}

// opLines returns the op (and drop) lines of a plan's lines, the steps
// that have some still separated by "--".
func opLines(lines []string) []string {
	var ops []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "to "):
		case l == "--" && (len(ops) == 0 || ops[len(ops)-1] == "--"):
		default:
			ops = append(ops, l)
		}
	}
	if len(ops) > 0 && ops[len(ops)-1] == "--" {
		ops = ops[:len(ops)-1]
	}
	return ops
}

// commitAll takes in every step of plan as if the backend had committed
// it.
func commitAll(s *State, plan Plan) {
	for _, step := range plan.Steps {
		s.Committed(step)
	}
}

// state returns the stored state of topic-p.
func state(s *State, topic string, p int32) coord.PartitionState {
	return s.md.Partitions[coord.TopicPartition{Topic: topic, Partition: p}]
}

// contains reports whether lines holds line.
func contains(lines []string, line string) bool { return slices.Contains(lines, line) }

// isErr is errors.Is.
func isErr(err, target error) bool { return errors.Is(err, target) }
