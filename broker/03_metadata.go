package broker

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/group"
)

// Metadata v0..v12 (v10+ carry topic IDs; v12 may ask by ID).
func init() { registerAPI(3, 0, 12, handleMetadata) }

// clusterID is the cluster id Metadata reports.
const clusterID = "tripod"

// autoCreateWait bounds how long Metadata waits for an auto-created
// topic's leaders before answering LEADER_NOT_AVAILABLE.
const autoCreateWait = 5 * time.Second

// syncWait bounds how long a Metadata request to a broker that has not
// had the controller's metadata yet waits for it before it is answered
// with what the broker knows (topics it cannot vouch for get the
// retriable LEADER_NOT_AVAILABLE).
const syncWait = 3 * time.Second

// handleMetadata answers from the metadata cache: the live brokers (each
// at its endpoint on the listener the request came on, as Kafka does; a
// broker without that listener is left out), the controller, and the requested topics (all of them when none are named)
// with each partition's leader, leader epoch, replicas, ISR and offline
// replicas. With auto.create.topics.enable a named topic that does not
// exist is created through the controller (forwarded over a client
// connection when it is another broker). A broker that has not had the
// controller's metadata yet (just started or restarted) first waits for
// it, up to syncWait, so that it never answers UNKNOWN_TOPIC_OR_PARTITION
// for a topic that exists.
func handleMetadata(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.MetadataRequest)
	collapseDuplicateTopics(r)
	allTopics := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	autoCreate := b.cfg.AutoCreateTopics && (r.Version < 4 || r.AllowAutoTopicCreation)
	if !b.cache.IsSynced() {
		return nil, func(ctx context.Context) kmsg.Response {
			wctx, cancel := context.WithTimeout(ctx, syncWait)
			synced := b.cache.WaitFor(wctx, b.closing, b.cache.IsSynced)
			cancel()
			return b.metadata(ctx, r, autoCreate && !allTopics && synced, req.conn.listener.Name)
		}, nil
	}
	if !allTopics && autoCreate {
		for _, rt := range r.Topics {
			if rt.Topic != nil && config.ValidateTopicName(*rt.Topic) == nil {
				if !b.cache.HasTopic(*rt.Topic) {
					return nil, func(ctx context.Context) kmsg.Response { return b.metadata(ctx, r, true, req.conn.listener.Name) }, nil
				}
			}
		}
	}
	return b.metadata(context.Background(), r, false, req.conn.listener.Name), nil, nil
}

// collapseDuplicateTopics leaves each topic r names once (by name, or by
// id when it has no name), in the order of first mention, as Kafka's
// broker reads the names into a set: a request naming one topic a
// million times is answered, and may create it, once.
func collapseDuplicateTopics(r *kmsg.MetadataRequest) {
	if len(r.Topics) < 2 {
		return
	}
	names := make(map[string]struct{}, len(r.Topics))
	ids := make(map[[16]byte]struct{})
	out := r.Topics[:0]
	for _, t := range r.Topics {
		if t.Topic != nil {
			if _, ok := names[*t.Topic]; ok {
				continue
			}
			names[*t.Topic] = struct{}{}
		} else {
			if _, ok := ids[t.TopicID]; ok {
				continue
			}
			ids[t.TopicID] = struct{}{}
		}
		out = append(out, t)
	}
	r.Topics = out
}

// metadata builds the Metadata response for a client of the named
// listener, auto-creating missing topics when autoCreate.
func (b *Broker) metadata(ctx context.Context, r *kmsg.MetadataRequest, autoCreate bool, listener string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	generation := b.cache.Generation() // before what it stands for
	controllerID, live, _ := b.cache.View()
	if len(live) == 0 {
		// Before the first UpdateMetadata the broker knows only itself.
		live = []coord.Broker{b.self()}
	}
	liveSet := map[coord.BrokerID]bool{}
	for _, lb := range live {
		liveSet[lb.ID] = true
		ep, ok := lb.ListenerEndpoint(listener)
		if !ok {
			continue
		}
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = int32(lb.ID), ep.Host, ep.Port
		if lb.Rack != "" {
			rack := lb.Rack
			broker.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, broker)
	}
	id := clusterID
	resp.ClusterID = &id
	resp.ControllerID = int32(controllerID)

	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		for _, t := range b.cache.AllTopics() {
			resp.Topics = append(resp.Topics, b.metadataAnswers.topic(generation, t, liveSet))
		}
		return resp
	}
	for _, rt := range r.Topics {
		if rt.Topic == nil {
			t, ok := b.cache.TopicByID(rt.TopicID)
			if !ok {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			resp.Topics = append(resp.Topics, b.metadataAnswers.topic(generation, t, liveSet))
			continue
		}
		name := *rt.Topic
		st := kmsg.NewMetadataResponseTopic()
		st.Topic = rt.Topic
		if err := config.ValidateTopicName(name); err != nil {
			st.ErrorCode = kerr.InvalidTopicException.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, ok := b.cache.Topic(name)
		if !ok && autoCreate && name != group.OffsetsTopic {
			if err := b.autoCreate(ctx, name, len(live)); err != nil {
				b.logger.Warn("auto-create topic failed", "topic", name, "error", err)
				st.ErrorCode = kerr.LeaderNotAvailable.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, autoCreateWait)
			b.cache.WaitFor(wctx, b.closing, func() bool { return b.cache.TopicReady(name, int(b.cfg.NumPartitions)) })
			cancel()
			t, ok = b.cache.Topic(name)
			if !ok {
				st.ErrorCode = kerr.LeaderNotAvailable.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
		}
		if !ok {
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if !b.cache.IsSynced() {
				st.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		resp.Topics = append(resp.Topics, b.metadataAnswers.topic(generation, t, liveSet))
	}
	return resp
}

// metadataAnswers keeps each topic's Metadata answer as built at one
// generation of the metadata cache, for the requests that follow until
// the cache changes. After a leader change every producer of a topic
// asks for all of it, again after each retriable error, while the
// brokers' CPU is busiest; at 10 000 partitions one answer is some
// 20 000 allocations. The responses that carry an answer share its
// partitions: nothing writes them once built (the authorizer's amend and
// the quotas set fields of the response's own copy of the topic).
type metadataAnswers struct {
	mu         sync.Mutex
	generation uint64
	topics     map[string]kmsg.MetadataResponseTopic
}

// topic returns t's answer for the live brokers live, both read from the
// cache at generation or later: the kept one when it was built at
// generation, else a new one, kept when generation is the newest asked
// for. One request builds while the others for the topic wait for it.
func (a *metadataAnswers) topic(generation uint64, t metadata.Topic, live map[coord.BrokerID]bool) kmsg.MetadataResponseTopic {
	a.mu.Lock()
	defer a.mu.Unlock()
	if generation < a.generation {
		return metadataTopic(t, live) // the cache has moved on
	}
	if generation > a.generation || a.topics == nil {
		a.generation, a.topics = generation, map[string]kmsg.MetadataResponseTopic{}
	}
	if st, ok := a.topics[t.Name]; ok && st.TopicID == t.ID {
		return st
	}
	st := metadataTopic(t, live)
	a.topics[t.Name] = st
	return st
}

// metadataTopic describes a cached topic.
func metadataTopic(t metadata.Topic, live map[coord.BrokerID]bool) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	name := t.Name
	st.Topic = &name
	st.TopicID = t.ID
	st.IsInternal = name == group.OffsetsTopic
	// Every partition's broker lists are cut from one array.
	n := 0
	for _, p := range t.Partitions {
		n += 2*len(p.Replicas) + len(p.ISR)
	}
	ids := make([]int32, 0, n)
	ids32 := func(brokers []coord.BrokerID, keep func(coord.BrokerID) bool) []int32 {
		start := len(ids)
		for _, id := range brokers {
			if keep(id) {
				ids = append(ids, int32(id))
			}
		}
		return ids[start:len(ids):len(ids)]
	}
	all := func(coord.BrokerID) bool { return true }
	offline := func(id coord.BrokerID) bool { return !live[id] }
	st.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		sp := kmsg.NewMetadataResponseTopicPartition()
		sp.Partition = p.Partition
		sp.Leader = int32(p.Leader)
		sp.LeaderEpoch = p.LeaderEpoch
		sp.Replicas = ids32(p.Replicas, all)
		sp.ISR = ids32(p.ISR, all)
		sp.OfflineReplicas = ids32(p.Replicas, offline)
		if p.Leader == coord.NoBroker {
			sp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}

// autoCreate creates topic with num.partitions partitions and
// default.replication.factor capped at the live brokers, through the
// controller. A topic that exists already is no error.
func (b *Broker) autoCreate(ctx context.Context, name string, liveBrokers int) error {
	rf := min(int(b.cfg.DefaultReplicationFactor), max(liveBrokers, 1))
	return b.member.createTopic(ctx, controller.TopicSpec{Name: name, Partitions: int(b.cfg.NumPartitions), ReplicationFactor: rf})
}
