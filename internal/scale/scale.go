// Package scale builds the wide cluster metadata of tripod's scale
// benchmarks: many topics of many partitions, each replicated on three
// brokers, as a controller would have created them.
package scale

import (
	"fmt"

	"github.com/tripodmq/tripod/coord"
)

// Topics returns the CreateTopic ops of topics topics named wide-0000,
// wide-0001, ... of partitions partitions each, replicated on replicas
// (three brokers, say) with the preferred leader rotating over them, every
// ISR complete and every leader the preferred one, as CreateTopics leaves
// them. Each topic has an ID and one config override.
func Topics(topics, partitions int, replicas []coord.BrokerID) []coord.CreateTopic {
	out := make([]coord.CreateTopic, topics)
	for t := range topics {
		name := fmt.Sprintf("wide-%04d", t)
		topic := coord.Topic{Name: name, Assignment: make([][]coord.BrokerID, partitions),
			Config: map[string]string{"min.insync.replicas": "2"}}
		topic.ID[0], topic.ID[1], topic.ID[15] = 0x7a, byte(t>>8), byte(t)
		states := make([]coord.PartitionState, partitions)
		for p := range partitions {
			assignment := make([]coord.BrokerID, len(replicas))
			for i := range replicas {
				assignment[i] = replicas[(p+i)%len(replicas)]
			}
			topic.Assignment[p] = assignment
			states[p] = coord.PartitionState{Topic: name, Partition: int32(p), Leader: assignment[0],
				ISR: append([]coord.BrokerID(nil), assignment...)}
		}
		out[t] = coord.CreateTopic{Topic: topic, States: states}
	}
	return out
}

// Ops returns Topics as the ops of one Commit.
func Ops(topics, partitions int, replicas []coord.BrokerID) []coord.Op {
	cts := Topics(topics, partitions, replicas)
	ops := make([]coord.Op, len(cts))
	for i, ct := range cts {
		ops[i] = ct
	}
	return ops
}

// Metadata returns Topics as the metadata a backend would load, at
// version 1, every partition state at partition epoch 0.
func Metadata(topics, partitions int, replicas []coord.BrokerID) *coord.Metadata {
	md := coord.NewMetadata()
	md.Version = 1
	for _, ct := range Topics(topics, partitions, replicas) {
		md.Topics[ct.Topic.Name] = ct.Topic
		for _, st := range ct.States {
			md.Partitions[st.TopicPartition()] = st
		}
	}
	return md
}
