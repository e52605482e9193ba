package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata v0..v12 (v10+ carry topic IDs; v12 may ask by ID).
func init() { registerAPI(3, 0, 12, handleMetadata) }

// clusterID is the cluster id Metadata reports.
const clusterID = "tripod"

// handleMetadata describes this broker (the leader of every partition and
// the controller) and the requested topics, all of them when none are
// named. With auto.create.topics.enable a named topic that does not exist
// is created with num.partitions partitions.
func handleMetadata(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)

	broker := kmsg.NewMetadataResponseBroker()
	broker.NodeID = b.cfg.BrokerID
	broker.Host = b.advertisedHost
	broker.Port = b.advertisedPort
	resp.Brokers = []kmsg.MetadataResponseBroker{broker}
	id := clusterID
	resp.ClusterID = &id
	resp.ControllerID = b.cfg.BrokerID

	allTopics := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if allTopics {
		for _, t := range b.topicList() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
		}
		return resp, nil, nil
	}

	autoCreate := b.cfg.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation)
	for _, rt := range r.Topics {
		var t Topic
		var ok bool
		if rt.Topic == nil {
			t, ok = b.topicByID(rt.TopicID)
			if !ok {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
		} else {
			name := *rt.Topic
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = rt.Topic
			if err := checkTopicName(name); err != nil {
				st.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			t, ok = b.topic(name)
			if !ok && autoCreate {
				var err error
				t, err = b.autoCreate(ctx, name)
				if err != nil {
					b.logger.Error("auto-create topic failed", "topic", name, "error", err)
					st.ErrorCode = kerr.UnknownServerError.Code
					if errors.Is(err, context.Canceled) {
						st.ErrorCode = kerr.RequestTimedOut.Code
					}
					resp.Topics = append(resp.Topics, st)
					continue
				}
				ok = true
			}
			if !ok {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t))
	}
	return resp, nil, nil
}

// metadataTopic describes t with this broker leading every partition.
func (b *Broker) metadataTopic(t Topic) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	name := t.Name
	st.Topic = &name
	st.TopicID = t.ID
	for i := int32(0); i < t.Partitions; i++ {
		sp := kmsg.NewMetadataResponseTopicPartition()
		sp.Partition = i
		sp.Leader = b.cfg.BrokerID
		sp.LeaderEpoch = leaderEpoch
		sp.Replicas = []int32{b.cfg.BrokerID}
		sp.ISR = []int32{b.cfg.BrokerID}
		sp.OfflineReplicas = []int32{}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}

// topicByID finds a topic by its UUID.
func (b *Broker) topicByID(id [16]byte) (Topic, bool) {
	b.topicsMu.RLock()
	defer b.topicsMu.RUnlock()
	for _, ts := range b.topics {
		if ts.meta.ID == id {
			return ts.meta, true
		}
	}
	return Topic{}, false
}
