package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// CreateTopics v0..v7 (v5+ answer with the topic's configs, v7 with its
// ID).
func init() { registerAPI(19, 0, 7, handleCreateTopics) }

// handleCreateTopics creates topics through the controller this broker
// runs (other brokers answer NOT_CONTROLLER, and clients retry at the
// controller), with the requested or default partition count and
// replication factor, Kafka's replica assignment or the one given, and
// validated topic configs; it waits (up to the request's timeout) until
// this broker's metadata cache has the new topics' leaders.
// validate_only checks without creating.
func handleCreateTopics(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctrl := b.member.Controller()
	mutations := b.mutationQuota(req, 6)
	return nil, func(ctx context.Context) kmsg.Response {
		defer b.throttleMutations(req, resp, mutations)
		seen := make(map[string]int)
		for _, rt := range r.Topics {
			seen[rt.Topic]++
		}
		tooMany := b.checkRequestPartitions(req, createTopicsPartitions(r, b.cfg.NumPartitions))
		for _, rt := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			st.NumPartitions = -1
			st.ReplicationFactor = -1
			if tooMany != nil {
				setCreateError(&st, kerr.PolicyViolation, tooMany)
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if seen[rt.Topic] > 1 {
				setCreateError(&st, kerr.InvalidRequest, fmt.Errorf("topic %s is named more than once in the request", rt.Topic))
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if ctrl == nil {
				setCreateError(&st, kerr.NotController, fmt.Errorf("broker %d is not the controller", b.cfg.BrokerID))
				resp.Topics = append(resp.Topics, st)
				continue
			}
			spec, kind, err := b.topicFromRequest(rt)
			spec.ValidateOnly = r.ValidateOnly
			var created coord.Topic
			if err == nil && !r.ValidateOnly {
				partitions := spec.Partitions
				if len(spec.Assignment) > 0 {
					partitions = len(spec.Assignment)
				}
				if mutations.Record(partitions, time.Now()) != nil {
					st.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
					st.ErrorMessage = kmsg.StringPtr(mutationRefused)
					resp.Topics = append(resp.Topics, st)
					continue
				}
			}
			if err == nil {
				created, err = ctrl.CreateTopic(ctx, spec)
				kind = kafkaerr.Controller.Error(err)
				if kind == kerr.UnknownServerError {
					b.logger.Error("create topic failed", "topic", rt.Topic, "error", err)
				}
			}
			if err == nil && !r.ValidateOnly {
				wctx, cancel := context.WithTimeout(ctx, requestTimeout(r.TimeoutMillis))
				b.member.waitPropagated(wctx)
				if !b.cache.WaitFor(wctx, b.closing, func() bool { return b.cache.TopicReady(rt.Topic, created.Partitions()) }) {
					kind, err = kerr.RequestTimedOut, fmt.Errorf("topic %s created; its leaders are not known here yet", rt.Topic)
				}
				cancel()
			}
			if err != nil {
				setCreateError(&st, kind, err)
				resp.Topics = append(resp.Topics, st)
				continue
			}
			st.TopicID = created.ID
			st.NumPartitions = int32(created.Partitions())
			st.ReplicationFactor = int16(len(created.Assignment[0]))
			st.Configs = b.createTopicConfigs(created.Config)
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}, nil
}

// createTopicsPartitions counts the partitions r asks to create, as
// Kafka's controller does: a topic's replica assignment, or its
// partition count (num.partitions for -1, nothing for other counts
// below 1, which are refused on their own).
func createTopicsPartitions(r *kmsg.CreateTopicsRequest, numPartitions int32) int64 {
	var total int64
	for _, rt := range r.Topics {
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += int64(numPartitions)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	return total
}

// checkRequestPartitions refuses a CreateTopics or CreatePartitions
// request that creates more than max.request.partitions partitions, with
// the error its topics are answered and a log line naming the client;
// nil admits it.
func (b *Broker) checkRequestPartitions(req *request, partitions int64) error {
	limit := int64(b.cfg.MaxRequestPartitions)
	if partitions <= limit {
		return nil
	}
	api := kmsg.NameForKey(req.header.key)
	b.logger.Warn(api+" refused: more partitions than max.request.partitions", "partitions", partitions, "max.request.partitions", limit,
		"remote", req.conn.remote, "principal", req.conn.principal().String())
	return fmt.Errorf("%s request creates %d partitions, more than max.request.partitions=%d: split it, or raise max.request.partitions", api, partitions, limit)
}

// setCreateError sets a CreateTopics topic error with its message.
func setCreateError(st *kmsg.CreateTopicsResponseTopic, kind *kerr.Error, err error) {
	st.ErrorCode = kind.Code
	msg := err.Error()
	st.ErrorMessage = &msg
}

// topicFromRequest validates a CreateTopics entry and turns it into the
// controller's TopicSpec, or returns the Kafka error kind and why.
func (b *Broker) topicFromRequest(rt kmsg.CreateTopicsRequestTopic) (controller.TopicSpec, *kerr.Error, error) {
	spec := controller.TopicSpec{Name: rt.Topic, Partitions: int(rt.NumPartitions), ReplicationFactor: int(rt.ReplicationFactor)}
	if err := config.ValidateTopicName(rt.Topic); err != nil {
		return spec, kerr.InvalidTopicException, err
	}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return spec, kerr.InvalidRequest, fmt.Errorf("topic %s: a replica assignment excludes num partitions and replication factor", rt.Topic)
		}
		sort.Slice(rt.ReplicaAssignment, func(i, j int) bool {
			return rt.ReplicaAssignment[i].Partition < rt.ReplicaAssignment[j].Partition
		})
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) {
				return spec, kerr.InvalidReplicaAssignment, fmt.Errorf("topic %s: replica assignment partitions must be 0..n-1", rt.Topic)
			}
			spec.Assignment = append(spec.Assignment, coord.BrokerIDs(a.Replicas))
		}
	}
	if len(spec.Assignment) == 0 {
		if spec.Partitions == -1 {
			spec.Partitions = int(b.cfg.NumPartitions)
		}
		if spec.Partitions < 1 || spec.Partitions > config.MaxPartitions {
			return spec, kerr.InvalidPartitions, fmt.Errorf("topic %s: num partitions %d: must be between 1 and %d (or -1 for num.partitions)", rt.Topic, rt.NumPartitions, config.MaxPartitions)
		}
		if spec.ReplicationFactor == -1 {
			spec.ReplicationFactor = int(b.cfg.DefaultReplicationFactor)
		}
		if spec.ReplicationFactor < 1 {
			return spec, kerr.InvalidReplicationFactor, fmt.Errorf("topic %s: replication factor %d: must be at least 1 (or -1 for default.replication.factor)", rt.Topic, rt.ReplicationFactor)
		}
	}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return spec, kerr.InvalidConfig, fmt.Errorf("topic %s: config %s has a null value", rt.Topic, c.Name)
		}
		if err := config.ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return spec, kerr.InvalidConfig, fmt.Errorf("topic %s: %w", rt.Topic, err)
		}
		if !config.TopicConfigHasEffect(c.Name, *c.Value) {
			b.logger.Warn("topic config accepted without effect: tripod does not act on it", "topic", rt.Topic, "config", c.Name, "value", *c.Value)
		}
		if spec.Config == nil {
			spec.Config = make(map[string]string)
		}
		spec.Config[c.Name] = *c.Value
	}
	return spec, nil, nil
}

// createTopicConfigs lists a topic's effective configs for a CreateTopics
// v5+ response.
func (b *Broker) createTopicConfigs(configs map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	st := b.dyn.Current().Configs
	for _, name := range config.TopicKeys() {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = name
		v, ok := configs[name]
		c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		if !ok {
			def := b.topicDefaultSynonyms(st, name)[0]
			v, c.Source = def.value, int8(def.source)
		}
		c.Value = &v
		out = append(out, c)
	}
	return out
}
