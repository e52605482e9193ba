package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// describePages sends DescribeTopicPartitions for topics (all when nil)
// with limit, following NextCursor until the last page, and returns every
// page's answer.
func describePages(t *testing.T, cl *kgo.Client, topics []string, limit int32) []*kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	var pages []*kmsg.DescribeTopicPartitionsResponse
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for len(pages) < 100 {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, name := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
		}
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		resp := issue[*kmsg.DescribeTopicPartitionsResponse](t, cl, req)
		pages = append(pages, resp)
		if resp.NextCursor == nil {
			return pages
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	t.Fatalf("DescribeTopicPartitions: still paging after 100 pages")
	return nil
}

// partitionsOf lists the "topic/partition" of every partition of pages,
// in order, and the topics answered with each error code.
func partitionsOf(t *testing.T, pages []*kmsg.DescribeTopicPartitionsResponse, limit int) (parts []string, errs map[string]int16) {
	t.Helper()
	errs = map[string]int16{}
	for i, page := range pages {
		n := 0
		for _, rt := range page.Topics {
			if rt.ErrorCode != 0 {
				errs[*rt.Topic] = rt.ErrorCode
				continue
			}
			for _, p := range rt.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
				n++
			}
		}
		if n > limit {
			t.Fatalf("page %d: got %d partitions, want at most %d", i, n, limit)
		}
	}
	return parts, errs
}

// TestDescribeTopicPartitionsPages pages through three topics of 3, 1
// and 4 partitions two partitions at a time, as kafka-topics --describe
// does from Kafka 3.8: every partition comes exactly once, topics by
// name and partitions in order, whether all topics are asked or some
// are named; a named topic that does not exist is answered
// UNKNOWN_TOPIC_OR_PARTITION; partitions carry their leader, replicas
// and ISR, with empty eligible leader replica lists (tripod has no ELR),
// and topics report every operation as authorized (no authorizer).
func TestDescribeTopicPartitionsPages(t *testing.T) {
	b := startBroker(t, testConfig(t))
	cl := newClient(t, b)
	ctx := testContext(t, time.Minute)
	sizes := map[string]int{"dtp-c": 4, "dtp-a": 3, "dtp-b": 1}
	for name, n := range sizes {
		createTopic(t, b, name, int32(n), nil)
	}
	waitFor(t, ctx, "every partition's leader", func() bool {
		for name, n := range sizes {
			if !b.cache.TopicReady(name, n) {
				return false
			}
		}
		return true
	})
	var want []string
	for _, topic := range b.cache.AllTopics() {
		for p := range topic.Partitions {
			want = append(want, fmt.Sprintf("%s/%d", topic.Name, p))
		}
	}

	got, errs := partitionsOf(t, describePages(t, cl, nil, 2), 2)
	if !slices.Equal(got, want) || len(errs) != 0 {
		t.Fatalf("all topics, 2 a page: got %v errors %v, want %v", got, errs, want)
	}
	got, errs = partitionsOf(t, describePages(t, cl, []string{"dtp-c", "dtp-missing", "dtp-a"}, 3), 3)
	wantNamed := []string{"dtp-a/0", "dtp-a/1", "dtp-a/2", "dtp-c/0", "dtp-c/1", "dtp-c/2", "dtp-c/3"}
	if !slices.Equal(got, wantNamed) || len(errs) != 1 || errs["dtp-missing"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("named topics, 3 a page: got %v errors %v, want %v and dtp-missing UNKNOWN_TOPIC_OR_PARTITION", got, errs, wantNamed)
	}

	resp := describePages(t, cl, []string{"dtp-b"}, 0)[0]
	rt := resp.Topics[0]
	p := rt.Partitions[0]
	if rt.TopicID == [16]byte{} || rt.IsInternal || rt.AuthorizedOperations != security.AllOperations(coord.ACLResourceTopic) ||
		p.LeaderID != b.ID() || !slices.Equal(p.Replicas, []int32{b.ID()}) || !slices.Equal(p.ISR, []int32{b.ID()}) ||
		p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 || len(p.LastKnownELR) != 0 || len(p.OfflineReplicas) != 0 {
		t.Fatalf("dtp-b: got %+v, want its id, leader, replica and ISR %d, no ELR, all operations", rt, b.ID())
	}

	bad := kmsg.NewPtrDescribeTopicPartitionsRequest()
	bad.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "dtp-a"}}
	bad.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-b"}
	if r := issue[*kmsg.DescribeTopicPartitionsResponse](t, cl, bad); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a cursor naming a topic the request does not: got %+v, want INVALID_REQUEST", r.Topics)
	}
}

// TestDescribeTopicPartitionsAuthorization runs an authorizer: alice,
// granted DESCRIBE on one topic, gets it with her authorized operations
// (DESCRIBE only) and the other TOPIC_AUTHORIZATION_FAILED without its
// id; asking for all topics she pages through hers only.
func TestDescribeTopicPartitionsAuthorization(t *testing.T) {
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"authorizer.class.name": "tripod", "super.users": "User:ANONYMOUS"})
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	createTopic(t, b, "seen", 3, nil)
	createTopic(t, b, "hidden", 2, nil)
	adm := kadm.NewClient(newClient(t, b))
	acl := kadm.NewACLs().Allow("User:alice").Topics("seen").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("grant alice DESCRIBE on seen: %v %v", err, res)
	}
	alice := saslClient(t, b, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	var named []*kmsg.DescribeTopicPartitionsResponse
	waitFor(t, ctx, "alice's DESCRIBE on seen", func() bool {
		named = describePages(t, alice, []string{"hidden", "seen"}, 10)
		_, errs := partitionsOf(t, named, 10)
		return len(errs) == 1
	})
	for _, rt := range named[0].Topics {
		switch *rt.Topic {
		case "seen":
			if rt.ErrorCode != 0 || len(rt.Partitions) != 3 || rt.AuthorizedOperations != 1<<coord.ACLOperationDescribe {
				t.Errorf("seen: got error %d, %d partitions, operations %b, want none, 3, DESCRIBE only", rt.ErrorCode, len(rt.Partitions), rt.AuthorizedOperations)
			}
		case "hidden":
			if rt.ErrorCode != kerr.TopicAuthorizationFailed.Code || rt.TopicID != [16]byte{} || len(rt.Partitions) != 0 {
				t.Errorf("hidden: got error %d, id %x, %d partitions, want TOPIC_AUTHORIZATION_FAILED, no id, none", rt.ErrorCode, rt.TopicID, len(rt.Partitions))
			}
		}
	}
	got, errs := partitionsOf(t, describePages(t, alice, nil, 1), 1)
	if want := []string{"seen/0", "seen/1", "seen/2"}; !slices.Equal(got, want) || len(errs) != 0 {
		t.Fatalf("alice's all topics, 1 a page: got %v errors %v, want %v", got, errs, want)
	}
}
