package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
)

// OffsetCommit v0..v9 (v1: commit timestamps, v2..v4: retention, v6:
// leader epochs, v7: static members, v9: members of consumer groups of
// the consumer protocol, by member epoch).
func init() { registerAPI(8, 0, 9, handleOffsetCommit) }

// pendingCommit is one partition of a commit being written.
type pendingCommit struct {
	key group.OffsetKey
	val group.Offset
	// sp is the partition's slot in the response.
	sp *kmsg.OffsetCommitResponseTopicPartition
}

// offsetToCommit checks one partition of an offset commit, as Kafka's
// coordinator does (the topic's partition known, the metadata within
// offset.metadata.max.bytes), and returns the offset to store, committed
// now, without leader epoch or expiry, or the partition's error code.
func (b *Broker) offsetToCommit(topic string, partition int32, offset int64, metadata *string, now time.Time) (group.Offset, int16) {
	t, known := b.cache.Topic(topic)
	if !known || partition < 0 || int(partition) >= len(t.Partitions) {
		return group.Offset{}, kerr.UnknownTopicOrPartition.Code
	}
	var meta string
	if metadata != nil {
		meta = *metadata
	}
	if len(meta) > int(b.cfg.OffsetMetadataMaxBytes) {
		return group.Offset{}, kerr.OffsetMetadataTooLarge.Code
	}
	return group.Offset{Offset: offset, LeaderEpoch: -1, Metadata: meta, CommitTimestamp: now.UnixMilli(), ExpireTimestamp: -1}, 0
}

// validateCommit checks an OffsetCommit's member and generation (or, in
// a consumer group of the consumer protocol, member epoch) against its
// group. The caller holds sh.mu.
func (c *groupCoordinator) validateCommit(sh *groupShard, r *kmsg.OffsetCommitRequest, now time.Time) int16 {
	if cg := sh.consumers[r.Group]; cg != nil {
		return cg.ValidateCommit(r.MemberID, r.Generation, false, r.Version)
	}
	g := sh.groups[r.Group]
	switch {
	case g == nil && r.Generation >= 0:
		return kerr.IllegalGeneration.Code
	case g == nil:
		g = sh.getOrCreate(c, r.Group)
		defer sh.dropIfUnused(g)
	}
	code, out := g.ValidateCommit(now, r.Generation, r.MemberID, r.InstanceID)
	sh.apply(c, g, out)
	return code
}

// handleOffsetCommit checks the member and generation, appends the
// offsets to the group's __consumer_offsets partition and answers once
// every in-sync replica has them (offsets.commit.timeout.ms at most).
func handleOffsetCommit(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.OffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		setAll(code)
		return resp, nil, nil
	}
	defer sh.mu.Unlock()
	now := time.Now()
	if code := b.groups.validateCommit(sh, r, now); code != 0 {
		setAll(code)
		return resp, nil, nil
	}
	var pending []pendingCommit
	var kvs []group.KV
	for i, rt := range r.Topics {
		for j, rp := range rt.Partitions {
			sp := &resp.Topics[i].Partitions[j]
			v, code := b.offsetToCommit(rt.Topic, rp.Partition, rp.Offset, rp.Metadata, now)
			if code != 0 {
				sp.ErrorCode = code
				continue
			}
			if r.Version >= 6 {
				v.LeaderEpoch = rp.LeaderEpoch
			}
			if r.Version == 1 && rp.Timestamp >= 0 {
				v.CommitTimestamp = rp.Timestamp
			}
			if r.Version >= 2 && r.Version <= 4 && r.RetentionTimeMillis >= 0 {
				v.ExpireTimestamp = now.UnixMilli() + r.RetentionTimeMillis
			}
			k := group.OffsetKey{Group: r.Group, Topic: rt.Topic, Partition: rp.Partition}
			pending = append(pending, pendingCommit{key: k, val: v, sp: sp})
			kvs = append(kvs, group.KV{Key: group.OffsetRecordKey(k), Value: group.OffsetRecordValue(v)})
		}
	}
	if len(pending) == 0 {
		return resp, nil, nil
	}
	base, done, err := b.groups.appendOffsets(sh, kvs, true)
	if err != nil {
		code := b.groups.storeErrorCode(err)
		for _, pc := range pending {
			pc.sp.ErrorCode = code
		}
		return resp, nil, nil
	}
	return nil, func(context.Context) kmsg.Response {
		code := b.groups.storeErrorCode(b.groups.awaitReplicated(done))
		sh.mu.Lock()
		defer sh.mu.Unlock()
		for i, pc := range pending {
			pc.sp.ErrorCode = code
			if code == 0 && sh.state == shardActive {
				v := pc.val
				sh.applyOffset(pc.key, &v, base+int64(i))
			}
		}
		if code == 0 && sh.state == shardActive && sh.consumers[r.Group] == nil {
			// A group that only commits offsets (generation -1, no
			// members) exists as long as it holds them, as Kafka's Empty
			// group does: ListGroups lists it, DescribeGroups and
			// DeleteGroups find it. The handler dropped the group it
			// created while the commit was not yet applied. A consumer
			// group of the consumer protocol holds its offsets itself:
			// a classic group of its id beside it would be listed as a
			// second, empty group, and deleting that one would delete
			// the consumer group's offsets under its members.
			sh.getOrCreate(b.groups, r.Group)
		}
		return resp
	}, nil
}
