package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// OffsetFetch v0..v9 (v2+: every topic when none is named; v8: several
// groups at once; v9: the member id and epoch of a consumer-protocol
// member, checked as Kafka does).
func init() { registerAPI(9, 0, 9, handleOffsetFetch) }

// handleOffsetFetch answers the committed offsets of groups this broker
// coordinates; a partition without one gets offset -1. With
// require_stable (v7+), a partition whose offset an open transaction has
// committed (TxnOffsetCommit, not yet decided by its marker) is answered
// UNSTABLE_OFFSET_COMMIT, which clients retry, as Kafka does (KIP-447).
func handleOffsetFetch(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.OffsetFetchRequest)
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			topics := make([]offsetFetchTopic, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
			}
			if rg.Topics == nil {
				topics = nil
			}
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			code, got := b.fetchOffsets(rg.Group, topics, r.RequireStable, rg.MemberID, rg.MemberEpoch)
			sg.ErrorCode = code
			for _, t := range got {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic = t.topic
				for _, p := range t.partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.partition, p.offset, p.leaderEpoch, p.metadata, p.code
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp, nil, nil
	}
	topics := make([]offsetFetchTopic, 0, len(r.Topics))
	for _, t := range r.Topics {
		topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
	}
	if r.Topics == nil && r.Version >= 2 {
		topics = nil
	}
	code, got := b.fetchOffsets(r.Group, topics, r.Version >= 7 && r.RequireStable, nil, -1)
	if r.Version >= 2 {
		resp.ErrorCode = code
	}
	for _, t := range got {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = t.topic
		for _, p := range t.partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.partition, p.offset, p.leaderEpoch, p.metadata, p.code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}

// offsetFetchTopic is one topic an OffsetFetch names.
type offsetFetchTopic struct {
	topic      string
	partitions []int32
}

// fetchedTopic is one topic's answer.
type fetchedTopic struct {
	topic      string
	partitions []fetchedOffset
}

// fetchedOffset is one partition's committed offset, -1 for none.
type fetchedOffset struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
	code        int16
}

// fetchOffsets returns a group's committed offsets of topics (nil: every
// topic it has committed), or the group's error code; with an error every
// named partition carries it too, as Kafka's v0 and v1 answers need. With
// requireStable a partition with a transactional offset pending gets
// UNSTABLE_OFFSET_COMMIT and offset -1. memberID (nil: none) and
// memberEpoch are an OffsetFetch v9's, checked against a consumer group
// of the consumer protocol (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
func (b *Broker) fetchOffsets(groupID string, topics []offsetFetchTopic, requireStable bool, memberID *string, memberEpoch int32) (int16, []fetchedTopic) {
	sh, code := b.groups.shard(groupID)
	if code != 0 {
		out := make([]fetchedTopic, 0, len(topics))
		for _, t := range topics {
			ft := fetchedTopic{topic: t.topic}
			for _, p := range t.partitions {
				ft.partitions = append(ft.partitions, fetchedOffset{partition: p, offset: -1, leaderEpoch: -1, code: code})
			}
			out = append(out, ft)
		}
		return code, out
	}
	defer sh.mu.Unlock()
	if cg := sh.consumers[groupID]; cg != nil {
		id := ""
		if memberID != nil {
			id = *memberID
		}
		if code := cg.ValidateFetch(id, memberEpoch); code != 0 {
			return code, nil
		}
	}
	committed := sh.offsets.Group(groupID)
	if topics == nil {
		for topic, parts := range committed {
			t := offsetFetchTopic{topic: topic}
			for p := range parts {
				t.partitions = append(t.partitions, p)
			}
			sort.Slice(t.partitions, func(i, j int) bool { return t.partitions[i] < t.partitions[j] })
			topics = append(topics, t)
		}
		sort.Slice(topics, func(i, j int) bool { return topics[i].topic < topics[j].topic })
	}
	out := make([]fetchedTopic, 0, len(topics))
	for _, t := range topics {
		ft := fetchedTopic{topic: t.topic}
		for _, p := range t.partitions {
			fo := fetchedOffset{partition: p, offset: -1, leaderEpoch: -1}
			empty := ""
			fo.metadata = &empty
			if requireStable && sh.txnOffsets.Pending(group.OffsetKey{Group: groupID, Topic: t.topic, Partition: p}) {
				fo.code = kerr.UnstableOffsetCommit.Code
			} else if o, ok := committed[t.topic][p]; ok {
				meta := o.Metadata
				fo.offset, fo.leaderEpoch, fo.metadata = o.Offset, o.LeaderEpoch, &meta
			}
			ft.partitions = append(ft.partitions, fo)
		}
		out = append(out, ft)
	}
	return 0, out
}
