package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics v0..v7 (v5+ answer with the topic's configs, v7 with its
// ID).
func init() { registerAPI(19, 0, 7, handleCreateTopics) }

// handleCreateTopics creates topics with replication factor 1 (the only
// one a single broker can hold), the requested or default partition count
// and validated topic configs. validate_only checks without creating.
func handleCreateTopics(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int)
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions = -1
		st.ReplicationFactor = -1
		if seen[rt.Topic] > 1 {
			setCreateError(&st, kerr.InvalidRequest, fmt.Errorf("topic %s is named more than once in the request", rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, kind, err := b.topicFromRequest(rt)
		if err == nil && !r.ValidateOnly {
			err = b.createTopic(ctx, t)
			if errors.Is(err, ErrTopicExists) {
				kind = kerr.TopicAlreadyExists
			} else if err != nil {
				kind = kerr.UnknownServerError
				b.logger.Error("create topic failed", "topic", t.Name, "error", err)
			}
		}
		if err != nil {
			setCreateError(&st, kind, err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = t.ID
		st.NumPartitions = t.Partitions
		st.ReplicationFactor = t.ReplicationFactor
		st.Configs = b.createTopicConfigs(t)
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, nil
}

// setCreateError sets a CreateTopics topic error with its message.
func setCreateError(st *kmsg.CreateTopicsResponseTopic, kind *kerr.Error, err error) {
	st.ErrorCode = kind.Code
	msg := err.Error()
	st.ErrorMessage = &msg
}

// topicFromRequest validates a CreateTopics entry and turns it into a
// catalogue entry, or returns the Kafka error kind and why.
func (b *Broker) topicFromRequest(rt kmsg.CreateTopicsRequestTopic) (Topic, *kerr.Error, error) {
	if err := checkTopicName(rt.Topic); err != nil {
		return Topic{}, kerr.InvalidTopicException, err
	}
	if _, ok := b.topic(rt.Topic); ok {
		return Topic{}, kerr.TopicAlreadyExists, fmt.Errorf("topic %s already exists", rt.Topic)
	}
	t := Topic{Name: rt.Topic, ID: newTopicID(), Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return Topic{}, kerr.InvalidRequest, fmt.Errorf("topic %s: a replica assignment excludes num partitions and replication factor", rt.Topic)
		}
		sort.Slice(rt.ReplicaAssignment, func(i, j int) bool {
			return rt.ReplicaAssignment[i].Partition < rt.ReplicaAssignment[j].Partition
		})
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) {
				return Topic{}, kerr.InvalidReplicaAssignment, fmt.Errorf("topic %s: replica assignment partitions must be 0..n-1", rt.Topic)
			}
			if len(a.Replicas) != 1 || a.Replicas[0] != b.cfg.BrokerID {
				return Topic{}, kerr.InvalidReplicaAssignment, fmt.Errorf("topic %s partition %d: replicas %v: only broker %d exists", rt.Topic, a.Partition, a.Replicas, b.cfg.BrokerID)
			}
		}
		t.Partitions = int32(len(rt.ReplicaAssignment))
		t.ReplicationFactor = 1
	}
	if t.Partitions == -1 {
		t.Partitions = b.cfg.NumPartitions
	}
	if t.Partitions < 1 || t.Partitions > maxPartitions {
		return Topic{}, kerr.InvalidPartitions, fmt.Errorf("topic %s: num partitions %d: must be between 1 and %d (or -1 for num.partitions)", rt.Topic, rt.NumPartitions, maxPartitions)
	}
	if t.ReplicationFactor == -1 {
		t.ReplicationFactor = 1
	}
	if t.ReplicationFactor != 1 {
		return Topic{}, kerr.InvalidReplicationFactor, fmt.Errorf("topic %s: replication factor %d: only 1 is possible on a single broker", rt.Topic, rt.ReplicationFactor)
	}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return Topic{}, kerr.InvalidConfig, fmt.Errorf("topic %s: config %s has a null value", rt.Topic, c.Name)
		}
		if err := validateTopicConfig(c.Name, *c.Value); err != nil {
			return Topic{}, kerr.InvalidConfig, fmt.Errorf("topic %s: %w", rt.Topic, err)
		}
		if t.Configs == nil {
			t.Configs = make(map[string]string)
		}
		t.Configs[c.Name] = *c.Value
	}
	return t, nil, nil
}

// createTopicConfigs lists a topic's effective configs for a CreateTopics
// v5+ response.
func (b *Broker) createTopicConfigs(t Topic) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, name := range topicKeyNames() {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = name
		v, ok := t.Configs[name]
		c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		if !ok {
			v = b.cfg.topicDefault(name)
			c.Source = int8(kmsg.ConfigSourceDefaultConfig)
		}
		c.Value = &v
		out = append(out, c)
	}
	return out
}
