// Package createtopics builds tripod's CreateTopics requests: the broker's
// (__consumer_offsets, forwarded to the controller), the CLI's (`tripod
// topics create`, `tripod bench produce`) and the lab's (`tripod bench
// failover`, `tripod verify`) are written once here. It owns the request's
// shape and the error a topic's answer maps to; it must not decide what a
// caller does with a topic that exists already or with a timeout, which
// each caller keeps.
package createtopics

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic is one topic of a CreateTopics request.
type Topic struct {
	// Name is the topic's name.
	Name string
	// Partitions and ReplicationFactor are the topic's partition count and
	// replicas per partition; -1 asks for the broker's num.partitions and
	// default.replication.factor, and both are -1 with an Assignment.
	Partitions        int32
	ReplicationFactor int16
	// Configs are topic configs, key to value, sent in key order.
	Configs map[string]string
	// Assignment, when not nil, places the partitions by hand: partition i
	// on the brokers of Assignment[i], the preferred leader first.
	Assignment [][]int32
}

// Request returns a CreateTopics request of topics, in order, that lets the
// controller take up to timeout to create them.
func Request(timeout time.Duration, topics ...Topic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(timeout.Milliseconds())
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Name, t.Partitions, t.ReplicationFactor
		for p, replicas := range t.Assignment {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(p), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(t.Configs[k])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TopicError returns the error of one topic's answer, naming the topic and
// carrying the broker's message when it sent one, or nil when the topic was
// created.
func TopicError(t *kmsg.CreateTopicsResponseTopic) error {
	err := kerr.ErrorForCode(t.ErrorCode)
	switch {
	case err == nil:
		return nil
	case t.ErrorMessage != nil:
		// The broker's message says which bound or setting refused it
		// (say max.request.partitions); the code alone does not.
		return fmt.Errorf("create topic %s: %w: %s", t.Topic, err, *t.ErrorMessage)
	}
	return fmt.Errorf("create topic %s: %w", t.Topic, err)
}

// clientTimeout is how long the controller may take to create a topic for
// Create, as Kafka's admin client allows by default.
const clientTimeout = 15 * time.Second

// Create creates topic t through cl (CreateTopics goes to the controller)
// and returns its error: a topic that exists already is one.
func Create(ctx context.Context, cl *kgo.Client, t Topic) error {
	resp, err := Request(clientTimeout, t).RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	for i := range resp.Topics {
		if resp.Topics[i].Topic == t.Name {
			return TopicError(&resp.Topics[i])
		}
	}
	return fmt.Errorf("create topic %s: requested topic was not part of create topic response", t.Name)
}
