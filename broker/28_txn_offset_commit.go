package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/producerid"
	"github.com/tripodmq/tripod/group"
)

// TxnOffsetCommit v0..v5 (v2: leader epochs, v3: member id, generation
// and instance id of KIP-447, v4 and v5: as v3, with KIP-890's errors).
func init() { registerAPI(28, 0, 5, handleTxnOffsetCommit) }

// handleTxnOffsetCommit writes the offsets a transactional producer
// commits for a group (a consume-transform-produce loop's input position)
// to the group's __consumer_offsets partition, as records of the
// producer's id and epoch, and answers once every in-sync replica has
// them. They stay pending, invisible to OffsetFetch (which answers
// UNSTABLE_OFFSET_COMMIT to require_stable), until the transaction's
// marker is written to that partition: a commit makes them the group's
// committed offsets, an abort drops them (groupCoordinator.txnCompleted).
// The member and generation are checked as Kafka's
// handleTxnCommitOffsets checks them (group.ValidateTxnCommit; in a
// consumer group of the consumer protocol, consumer.ValidateCommit); a
// producer epoch older than the partition has seen for the producer id is
// fenced, and a producer id not handed to the connection's principal is
// INVALID_PRODUCER_ID_MAPPING.
func handleTxnOffsetCommit(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
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
	if r.ProducerID < 0 || r.ProducerEpoch < 0 {
		setAll(kerr.InvalidProducerIDMapping.Code)
		return resp, nil, nil
	}
	switch verdict := b.producerIDs.Verify(req.conn.principal(), &req.conn.producerIDs, r.ProducerID); verdict {
	case producerid.KeyUnknown:
		setAll(kerr.CoordinatorLoadInProgress.Code)
		return resp, nil, nil
	case producerid.Foreign, producerid.Legacy:
		// Only the producer the id was handed to may commit in its name.
		b.refusedProducerIDs.log(b.logger, "TxnOffsetCommit refused: the producer id was not handed to this principal",
			"principal", req.conn.principal().String(), "remote", req.conn.remote, "producer_id", r.ProducerID, "group", r.Group)
		setAll(kerr.InvalidProducerIDMapping.Code)
		return resp, nil, nil
	}
	sh, code := b.groups.shard(r.Group)
	if code != 0 {
		setAll(code)
		return resp, nil, nil
	}
	defer sh.mu.Unlock()
	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if r.Version >= 3 {
		generation, memberID, instanceID = r.Generation, r.MemberID, r.InstanceID
	}
	if code := b.groups.validateTxnCommit(sh, r.Group, generation, memberID, instanceID, r.Version); code != 0 {
		setAll(code)
		return resp, nil, nil
	}
	now := time.Now()
	type txnCommit struct {
		key group.OffsetKey
		val group.Offset
		sp  *kmsg.TxnOffsetCommitResponseTopicPartition
	}
	var pending []txnCommit
	var kvs []group.KV
	for i, rt := range r.Topics {
		for j, rp := range rt.Partitions {
			sp := &resp.Topics[i].Partitions[j]
			v, code := b.offsetToCommit(rt.Topic, rp.Partition, rp.Offset, rp.Metadata, now)
			if code != 0 {
				sp.ErrorCode = code
				continue
			}
			if r.Version >= 2 {
				v.LeaderEpoch = rp.LeaderEpoch
			}
			k := group.OffsetKey{Group: r.Group, Topic: rt.Topic, Partition: rp.Partition}
			pending = append(pending, txnCommit{key: k, val: v, sp: sp})
			kvs = append(kvs, group.KV{Key: group.OffsetRecordKey(k), Value: group.OffsetRecordValue(v)})
		}
	}
	if len(pending) == 0 {
		return resp, nil, nil
	}
	base, done, err := b.groups.appendTxnOffsets(sh, kvs, r.ProducerID, r.ProducerEpoch)
	if err != nil {
		code := b.groups.txnStoreErrorCode(err, r.Version)
		for _, pc := range pending {
			pc.sp.ErrorCode = code
		}
		return resp, nil, nil
	}
	// Pending from the moment they are in the log: the transaction's
	// marker, whenever it comes, decides them, as it will on a reload.
	for i, pc := range pending {
		sh.txnOffsets.Add(r.ProducerID, pc.key, pc.val, base+int64(i))
	}
	return nil, func(context.Context) kmsg.Response {
		code := b.groups.txnStoreErrorCode(b.groups.awaitReplicated(done), r.Version)
		for _, pc := range pending {
			pc.sp.ErrorCode = code
		}
		return resp
	}, nil
}

// validateTxnCommit checks a TxnOffsetCommit's member and generation
// against its group: in a consumer group of the consumer protocol
// (KIP-848) the generation is the member epoch, as Kafka's
// ConsumerGroup.validateOffsetCommit checks a transactional commit. A
// transactional producer may commit for a group nobody has joined, as a
// plain OffsetCommit may for an Empty one. The caller holds sh.mu.
func (c *groupCoordinator) validateTxnCommit(sh *groupShard, id string, generation int32, memberID string, instanceID *string, version int16) int16 {
	if cg := sh.consumers[id]; cg != nil {
		return cg.ValidateCommit(memberID, generation, true, version)
	}
	g := sh.groups[id]
	if g == nil {
		g = sh.getOrCreate(c, id)
		defer sh.dropIfUnused(g)
	}
	return g.ValidateTxnCommit(generation, memberID, instanceID)
}
