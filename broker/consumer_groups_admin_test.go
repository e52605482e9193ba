package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinLikeLibrdkafka joins groupID as librdkafka's KIP-848 consumer
// (npm's @confluentinc/kafka-javascript with group.protocol=consumer)
// does: a member id of its own, the topic names beside an empty
// SubscribedTopicRegex, no server assignor, max.poll.interval.ms as the
// rebalance timeout. It heartbeats once more owning what it was given
// and returns its member epoch.
func joinLikeLibrdkafka(t *testing.T, cl *kgo.Client, groupID, memberID string, topics ...string) int32 {
	t.Helper()
	empty := ""
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = groupID, memberID, 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.SubscribedTopicRegex = 300000, topics, &empty
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	// The coordinator may still be loading its __consumer_offsets
	// partition, just created: librdkafka retries then, and so does this.
	var joined *kmsg.ConsumerGroupHeartbeatResponse
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, ctx, "the group coordinator to load", func() bool {
		joined = issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb)
		return joined.ErrorCode != kerr.CoordinatorLoadInProgress.Code
	})
	if joined.ErrorCode != 0 || joined.MemberEpoch <= 0 || joined.Assignment == nil {
		t.Fatalf("join of %s: %v (%v), epoch %d, assignment %v; want an epoch and an assignment",
			groupID, kerr.ErrorForCode(joined.ErrorCode), joined.ErrorMessage, joined.MemberEpoch, joined.Assignment)
	}
	hb = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = groupID, memberID, joined.MemberEpoch
	for _, at := range joined.Assignment.Topics {
		hb.Topics = append(hb.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: at.TopicID, Partitions: at.Partitions})
	}
	owned := issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb)
	if owned.ErrorCode != 0 || owned.MemberEpoch != joined.MemberEpoch {
		t.Fatalf("heartbeat of %s owning its assignment: %v, epoch %d; want epoch %d",
			groupID, kerr.ErrorForCode(owned.ErrorCode), owned.MemberEpoch, joined.MemberEpoch)
	}
	return joined.MemberEpoch
}

// commitAt commits offset for partitions 0..n-1 of topic as member of
// groupID at epoch (OffsetCommit v9 carries them), failing the test on
// any error.
func commitAt(t *testing.T, cl *kgo.Client, groupID, memberID string, epoch int32, topic string, n int, offset int64) {
	t.Helper()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.MemberID, oc.Generation = groupID, memberID, epoch
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = topic
	for p := range n {
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset = int32(p), offset
		ot.Partitions = append(ot.Partitions, op)
	}
	oc.Topics = append(oc.Topics, ot)
	resp := issue[*kmsg.OffsetCommitResponse](t, cl, oc)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("commit of %s-%d by %s at epoch %d: %v", rt.Topic, rp.Partition, memberID, epoch, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
}

// listed returns the ListGroups entries of groupID, of the types given
// (all without).
func listed(t *testing.T, cl *kgo.Client, groupID string, types ...string) []kmsg.ListGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = types
	resp := issue[*kmsg.ListGroupsResponse](t, cl, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("ListGroups: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range resp.Groups {
		if g.Group == groupID {
			out = append(out, g)
		}
	}
	return out
}

// TestConsumerProtocolGroupCommitsKeepOneGroup: offsets committed by a
// member of a consumer-protocol group belong to that group. A successful
// OffsetCommit used to create, beside it, a classic group of the same id
// (as it does for a group that only commits offsets), so ListGroups
// listed the group twice, once as an Empty group without protocol type,
// which librdkafka's ListConsumerGroups took for a simple group of
// unknown type (found by @confluentinc/kafka-javascript's admin client).
func TestConsumerProtocolGroupCommitsKeepOneGroup(t *testing.T) {
	cfg := testConfig(t)
	fastConsumerGroups(&cfg)
	b := startBroker(t, cfg)
	const topic, groupID, memberID = "kjs-topic", "kjs-group", "kjs-member-1"
	createLocalTopic(t, b, topic, 6)
	cl := newClient(t, b)

	epoch := joinLikeLibrdkafka(t, cl, groupID, memberID, topic)
	commitAt(t, cl, groupID, memberID, epoch, topic, 6, 10)
	deadline := time.Now().Add(10 * time.Second)
	var gs []kmsg.ListGroupsResponseGroup
	for {
		gs = listed(t, cl, groupID)
		if len(gs) == 1 && gs[0].GroupState == "Stable" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(gs) != 1 || gs[0].ProtocolType != "consumer" || gs[0].GroupState != "Stable" || gs[0].GroupType != "consumer" {
		t.Fatalf("ListGroups lists %s as %+v; want it once, protocol type consumer, Stable, of type consumer", groupID, gs)
	}
}

// TestListGroupsFiltersByType: ListGroups v5 (KIP-848) says each group's
// type, classic or consumer, and lists only the types asked for,
// whatever their case, as Kafka 4 does. librdkafka's ListConsumerGroups
// reads the type from it; tripod offered v4, without types, and every
// group was of unknown type to it.
func TestListGroupsFiltersByType(t *testing.T) {
	cfg := testConfig(t)
	fastConsumerGroups(&cfg)
	b := startBroker(t, cfg)
	const topic = "types-topic"
	createLocalTopic(t, b, topic, 2)
	cl := newClient(t, b)
	joinLikeLibrdkafka(t, cl, "modern", "modern-member", topic)
	// A group that only commits offsets is a classic group.
	commitAt(t, cl, "classic", "", -1, topic, 2, 1)

	for _, c := range []struct {
		group string
		types []string
		want  string // the type listed, "" for none
	}{
		{"modern", nil, "consumer"},
		{"classic", nil, "classic"},
		{"modern", []string{"Consumer"}, "consumer"},
		{"classic", []string{"Consumer"}, ""},
		{"modern", []string{"CLASSIC"}, ""},
		{"classic", []string{"classic", "consumer"}, "classic"},
		{"modern", []string{"share"}, ""},
	} {
		gs := listed(t, cl, c.group, c.types...)
		switch {
		case c.want == "" && len(gs) != 0:
			t.Errorf("ListGroups of types %q lists %s as %+v; want it not listed", c.types, c.group, gs)
		case c.want != "" && (len(gs) != 1 || gs[0].GroupType != c.want):
			t.Errorf("ListGroups of types %q lists %s as %+v; want it once, of type %s", c.types, c.group, gs, c.want)
		}
	}
}

// TestConsumerProtocolGroupDeleteAndOffsetDelete: DeleteGroups and
// OffsetDelete take consumer-protocol groups, as Kafka does. DeleteGroups
// refuses one with members (NON_EMPTY_GROUP) and deletes an Empty one
// with its offsets, so that the id starts afresh; OffsetDelete deletes
// the offsets of a topic no member subscribes to and refuses, per
// partition, those of a subscribed topic (GROUP_SUBSCRIBED_TO_TOPIC).
// Both answered GROUP_ID_NOT_FOUND for such a group, unless a commit had
// made a classic group of its id beside it, which they then took for it.
func TestConsumerProtocolGroupDeleteAndOffsetDelete(t *testing.T) {
	cfg := testConfig(t)
	fastConsumerGroups(&cfg)
	b := startBroker(t, cfg)
	const topic, other, groupID, memberID = "del-topic", "other-topic", "del-group", "del-member"
	createLocalTopic(t, b, topic, 3)
	createLocalTopic(t, b, other, 1)
	ctx := testContext(t, time.Minute)
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)

	epoch := joinLikeLibrdkafka(t, cl, groupID, memberID, topic)
	commitAt(t, cl, groupID, memberID, epoch, topic, 3, 10)
	commitAt(t, cl, groupID, memberID, epoch, other, 1, 5)

	deleteGroup := func() int16 {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{groupID}
		resp := issue[*kmsg.DeleteGroupsResponse](t, cl, req)
		if len(resp.Groups) != 1 {
			t.Fatalf("DeleteGroups answered %+v", resp.Groups)
		}
		return resp.Groups[0].ErrorCode
	}
	if code := deleteGroup(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("DeleteGroups of the group with its member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(code))
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = groupID
	od.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: other, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}
	odResp := issue[*kmsg.OffsetDeleteResponse](t, cl, od)
	if odResp.ErrorCode != 0 || len(odResp.Topics) != 2 ||
		odResp.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || odResp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete of %s-0 (subscribed) and %s-0: %v, %+v; want GROUP_SUBSCRIBED_TO_TOPIC and deleted",
			topic, other, kerr.ErrorForCode(odResp.ErrorCode), odResp.Topics)
	}
	fetched, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	if o, ok := fetched.Lookup(topic, 0); !ok || o.At != 10 {
		t.Errorf("committed offset of %s-0 after the refused delete: %+v, want 10", topic, o)
	}
	if o, ok := fetched.Lookup(other, 0); ok && o.At >= 0 {
		t.Errorf("committed offset of %s-0 after its delete: %+v, want none", other, o)
	}

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = groupID, memberID, -1
	if resp := issue[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb); resp.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if code := deleteGroup(); code != 0 {
		t.Fatalf("DeleteGroups of the Empty group: %v, want it deleted", kerr.ErrorForCode(code))
	}
	if gs := listed(t, cl, groupID); len(gs) != 0 {
		t.Errorf("ListGroups after the delete lists %+v; want nothing", gs)
	}
	described := issue[*kmsg.ConsumerGroupDescribeResponse](t, cl, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{groupID}})
	if len(described.Groups) != 1 || described.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ConsumerGroupDescribe after the delete: %+v; want GROUP_ID_NOT_FOUND", described.Groups)
	}
	fetched, err = adm.FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatalf("fetch offsets after the delete: %v", err)
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			t.Errorf("committed offset of %s-%d after the delete: %d, want none", o.Topic, o.Partition, o.At)
		}
	})
	if code := deleteGroup(); code != kerr.GroupIDNotFound.Code {
		t.Errorf("DeleteGroups of the deleted group: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	// The deletion is in the log: a coordinator that loads the partition
	// again has neither the group nor its offsets.
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b = startBroker(t, cfg)
	cl = newClient(t, b)
	adm = kadm.NewClient(cl)
	if gs := listed(t, cl, groupID); len(gs) != 0 {
		t.Errorf("ListGroups after the delete and a restart lists %+v; want nothing", gs)
	}
	if fetched, err = adm.FetchOffsets(ctx, groupID); err != nil {
		t.Fatalf("fetch offsets after the restart: %v", err)
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			t.Errorf("committed offset of %s-%d after the delete and a restart: %d, want none", o.Topic, o.Partition, o.At)
		}
	})
	// The id starts afresh.
	if epoch := joinLikeLibrdkafka(t, cl, groupID, "del-member-2", topic); epoch != 1 {
		t.Errorf("first member of the group after its delete: epoch %d, want 1", epoch)
	}
}
