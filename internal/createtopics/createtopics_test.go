package createtopics

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequest checks that a request carries its timeout and every topic as
// given, configs in key order and a manual assignment by partition.
func TestRequest(t *testing.T) {
	req := Request(90*time.Second,
		Topic{Name: "a", Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"unclean.leader.election.enable": "false", "min.insync.replicas": "2"}},
		Topic{Name: "b", Partitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2}, {2, 3}}})
	if req.TimeoutMillis != 90000 || req.ValidateOnly {
		t.Errorf("timeout %d ms, validate-only %v; want 90000 and false", req.TimeoutMillis, req.ValidateOnly)
	}
	if len(req.Topics) != 2 {
		t.Fatalf("got %d topics, want 2", len(req.Topics))
	}
	a, b := req.Topics[0], req.Topics[1]
	if a.Topic != "a" || a.NumPartitions != 3 || a.ReplicationFactor != 2 || len(a.ReplicaAssignment) != 0 {
		t.Errorf("topic a: got %+v, want 3 partitions of 2 replicas, no assignment", a)
	}
	var configs []string
	for _, c := range a.Configs {
		configs = append(configs, c.Name+"="+*c.Value)
	}
	if want := []string{"min.insync.replicas=2", "unclean.leader.election.enable=false"}; !slices.Equal(configs, want) {
		t.Errorf("topic a: got configs %v, want %v", configs, want)
	}
	if b.Topic != "b" || b.NumPartitions != -1 || b.ReplicationFactor != -1 || len(b.Configs) != 0 || len(b.ReplicaAssignment) != 2 {
		t.Fatalf("topic b: got %+v, want -1, -1, no configs, 2 partitions assigned", b)
	}
	for p, want := range [][]int32{{1, 2}, {2, 3}} {
		if ra := b.ReplicaAssignment[p]; ra.Partition != int32(p) || !slices.Equal(ra.Replicas, want) {
			t.Errorf("topic b partition %d: got %+v, want replicas %v", p, ra, want)
		}
	}
}

// TestTopicError checks that a topic's answer maps to nil, to its code, or
// to its code and the broker's message, naming the topic.
func TestTopicError(t *testing.T) {
	ok := kmsg.NewCreateTopicsResponseTopic()
	ok.Topic = "t"
	if err := TopicError(&ok); err != nil {
		t.Errorf("no error code: got %v, want nil", err)
	}
	exists := ok
	exists.ErrorCode = kerr.TopicAlreadyExists.Code
	err := TopicError(&exists)
	if !errors.Is(err, kerr.TopicAlreadyExists) || err.Error() != "create topic t: "+kerr.TopicAlreadyExists.Error() {
		t.Errorf("TOPIC_ALREADY_EXISTS: got %v, want it, naming topic t", err)
	}
	refused := ok
	refused.ErrorCode, refused.ErrorMessage = kerr.PolicyViolation.Code, kmsg.StringPtr("max.request.partitions")
	err = TopicError(&refused)
	if !errors.Is(err, kerr.PolicyViolation) || !strings.HasSuffix(err.Error(), ": max.request.partitions") {
		t.Errorf("refused: got %v, want POLICY_VIOLATION and the broker's message", err)
	}
}
