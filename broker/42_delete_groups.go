package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/group/consumer"
)

// DeleteGroups v0..v2.
func init() { registerAPI(42, 0, 2, handleDeleteGroups) }

// handleDeleteGroups deletes empty groups with their committed offsets:
// it writes the tombstones of the group's metadata and every offset, and
// answers once they are replicated. A group with members is
// NON_EMPTY_GROUP, one the coordinator does not have GROUP_ID_NOT_FOUND.
// Groups of both protocols are deleted alike, as in Kafka.
func handleDeleteGroups(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DeleteGroupsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	waits := make([]<-chan error, len(r.Groups))
	for i, id := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		dg.ErrorCode, waits[i] = b.deleteGroup(id)
		resp.Groups = append(resp.Groups, dg)
	}
	return nil, func(context.Context) kmsg.Response {
		for i, done := range waits {
			if done != nil {
				resp.Groups[i].ErrorCode = b.groups.storeErrorCode(b.groups.awaitReplicated(done))
			}
		}
		return resp
	}, nil
}

// deleteGroup removes one group and starts the write of its tombstones,
// returning the error code or the channel of the write's replication.
func (b *Broker) deleteGroup(id string) (int16, <-chan error) {
	sh, code := b.groups.shard(id)
	if code != 0 {
		return code, nil
	}
	defer sh.mu.Unlock()
	var kvs []group.KV
	if cg := sh.consumers[id]; cg != nil {
		// A consumer group of the consumer protocol (KIP-848), mixed
		// ones too: Kafka's ConsumerGroup.validateDeleteGroup wants it
		// Empty; its group records' tombstones go first.
		if cg.NumMembers() > 0 {
			return kerr.NonEmptyGroup.Code, nil
		}
		for _, k := range consumer.GroupKeys(id) {
			kvs = append(kvs, group.KV{Key: k})
		}
	} else {
		g := sh.groups[id]
		if g == nil {
			return kerr.GroupIDNotFound.Code, nil
		}
		if code := g.Deletable(); code != 0 {
			return code, nil
		}
		kvs = append(kvs, group.KV{Key: group.GroupRecordKey(id)})
	}
	first := int64(len(kvs)) // the first offset tombstone's place
	keys := sh.offsets.Keys(id)
	for _, k := range keys {
		kvs = append(kvs, group.KV{Key: group.OffsetRecordKey(k)})
	}
	base, done, err := b.groups.appendOffsets(sh, kvs, true)
	if err != nil {
		return b.groups.storeErrorCode(err), nil
	}
	for i, k := range keys {
		sh.applyOffset(k, nil, base+first+int64(i))
	}
	delete(sh.groups, id)
	delete(sh.consumers, id)
	delete(sh.deadlines, id)
	return 0, done
}
