package coord

import (
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// BrokerID identifies a broker in the cluster (Kafka's broker.id).
type BrokerID int32

// Int32s converts broker IDs to the Kafka protocol's int32s.
func Int32s(ids []BrokerID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// BrokerIDs converts the Kafka protocol's int32s to broker IDs.
func BrokerIDs(ids []int32) []BrokerID {
	out := make([]BrokerID, len(ids))
	for i, id := range ids {
		out[i] = BrokerID(id)
	}
	return out
}

// NoBroker is the leader of a partition that has none, and the controller ID
// while no controller is elected (Kafka's -1).
const NoBroker BrokerID = -1

// Broker is a live broker as registered.
type Broker struct {
	ID BrokerID `json:"id"`
	// Host and Port are the advertised address of the broker's
	// inter-broker listener (inter.broker.listener.name): where the
	// controller and the other brokers reach it.
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Endpoints are the advertised addresses of all the broker's
	// listeners (advertised.listeners), in its listeners' order; the
	// inter-broker listener's is among them. Every backend stores them
	// (ZooKeeper as Kafka's "endpoints" and
	// "listener_security_protocol_map"). Empty means one PLAINTEXT
	// listener at Host:Port (see ListenerEndpoint): a broker that
	// predates named listeners; ZooKeeper reads that one endpoint back as
	// none.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Rack is the broker's rack (broker.rack); empty when unset.
	Rack string `json:"rack,omitempty"`
	// Epoch is the broker epoch assigned by Register; it is zero in the
	// Broker passed to Register. ZooKeeper: the czxid of /brokers/ids/N;
	// etcd: the create revision of the registration key; Raft: the log
	// index of the registration.
	Epoch int64 `json:"epoch"`
	// Replaces is the broker epoch of this broker's previous registration,
	// which the caller knows to be dead because it holds that
	// registration's data directory (the data dir lock of a crashed
	// process is released by the kernel, that of a paused one is not); 0
	// replaces nothing. It is an input of Register only: it is never
	// stored, and it is zero in every Broker a backend returns.
	Replaces int64 `json:"-"`
}

// Equal reports whether b and o are equal in every field, their
// endpoints included (Broker holds a slice, so == does not compile).
func (b Broker) Equal(o Broker) bool {
	return b.ID == o.ID && b.Host == o.Host && b.Port == o.Port && b.Rack == o.Rack &&
		b.Epoch == o.Epoch && b.Replaces == o.Replaces && slices.Equal(b.Endpoints, o.Endpoints)
}

// Addr returns the inter-broker listener's host:port, with an IPv6 host
// in brackets ([::1]:9092).
func (b Broker) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// ListenerEndpoint returns the broker's endpoint on the named listener
// (names compare as Kafka's, case-insensitively), or false when the broker
// has no such listener. A broker registered without Endpoints has one
// PLAINTEXT listener at Host:Port.
func (b Broker) ListenerEndpoint(listener string) (Endpoint, bool) {
	if len(b.Endpoints) == 0 {
		ep := Endpoint{Listener: "PLAINTEXT", Host: b.Host, Port: b.Port, SecurityProtocol: "PLAINTEXT"}
		return ep, strings.EqualFold(listener, ep.Listener)
	}
	for _, ep := range b.Endpoints {
		if strings.EqualFold(ep.Listener, listener) {
			return ep, true
		}
	}
	return Endpoint{}, false
}

// Endpoint is one advertised listener of a broker, as Kafka's
// EndPoint: "CLIENT://host:9093" with CLIENT's security protocol.
type Endpoint struct {
	// Listener is the listener's name (CLIENT, PLAINTEXT, ...), upper case.
	Listener string `json:"listener"`
	// Host and Port are the advertised address.
	Host string `json:"host"`
	Port int32  `json:"port"`
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// (listener.security.protocol.map).
	SecurityProtocol string `json:"security_protocol"`
}

// Addr returns host:port, with an IPv6 host in brackets.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) }

// String is Kafka's form of the endpoint, LISTENER://host:port.
func (e Endpoint) String() string { return e.Listener + "://" + e.Addr() }

// ControllerInfo names the current controller.
type ControllerInfo struct {
	ID    BrokerID
	Epoch int64
}

// Topic is a topic's durable definition.
type Topic struct {
	Name string `json:"name"`
	// ID is the topic's UUID (Kafka's topic id).
	ID [16]byte `json:"id"`
	// Assignment holds, per partition index, the replica brokers in
	// preference order: the first is the preferred leader.
	Assignment [][]BrokerID `json:"assignment"`
	// Config holds per-topic overrides of broker properties
	// (min.insync.replicas, unclean.leader.election.enable, ...).
	Config map[string]string `json:"config,omitempty"`
	// Adding and Removing hold, by partition index, the reassignments in
	// progress (Kafka's KIP-455, and its adding_replicas and
	// removing_replicas in ZooKeeper): while partition p moves from its
	// original replicas to its target ones, Assignment[p] holds both (the
	// target first, then the original replicas that are leaving),
	// Adding[p] the target replicas that are not original and Removing[p]
	// the original replicas that are not in the target. A partition with
	// no entry in either is not being reassigned. Stored with the topic,
	// so a new controller resumes what the old one started.
	Adding   map[int32][]BrokerID `json:"adding,omitempty"`
	Removing map[int32][]BrokerID `json:"removing,omitempty"`
}

// Partitions returns the number of partitions.
func (t Topic) Partitions() int { return len(t.Assignment) }

// Clone returns a deep copy of t, which shares nothing with it.
func (t Topic) Clone() Topic {
	t.Assignment = slices.Clone(t.Assignment)
	for i := range t.Assignment {
		t.Assignment[i] = slices.Clone(t.Assignment[i])
	}
	t.Config = maps.Clone(t.Config)
	t.Adding = cloneReplicaMap(t.Adding)
	t.Removing = cloneReplicaMap(t.Removing)
	return t
}

func cloneReplicaMap(m map[int32][]BrokerID) map[int32][]BrokerID {
	if m == nil {
		return nil
	}
	out := make(map[int32][]BrokerID, len(m))
	for p, ids := range m {
		out[p] = slices.Clone(ids)
	}
	return out
}

// Reassigning reports whether partition p is being reassigned.
func (t Topic) Reassigning(p int32) bool { return len(t.Adding[p]) > 0 || len(t.Removing[p]) > 0 }

// TargetReplicas returns the replicas partition p is being reassigned
// to: its assignment without the replicas being removed (its assignment
// when it is not being reassigned).
func (t Topic) TargetReplicas(p int32) []BrokerID {
	return without(t.Assignment[p], t.Removing[p])
}

// OriginalReplicas returns the replicas partition p had before its
// reassignment began: its assignment without the replicas being added.
func (t Topic) OriginalReplicas(p int32) []BrokerID {
	return without(t.Assignment[p], t.Adding[p])
}

// without returns the ids of all that are not in drop, in order.
func without(all, drop []BrokerID) []BrokerID {
	out := make([]BrokerID, 0, len(all))
	for _, id := range all {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// PartitionState is the controller-owned state of one partition, as Kafka
// keeps in /brokers/topics/T/partitions/P/state.
type PartitionState struct {
	Topic     string
	Partition int32
	// Leader is the leader broker, or NoBroker.
	Leader BrokerID
	// LeaderEpoch grows by one at every leader change.
	LeaderEpoch int32
	// ISR is the in-sync replica set, in assignment order.
	ISR []BrokerID
	// PartitionEpoch is set by the backend: it grows by one at every write
	// of this state (ZooKeeper: the znode version) and is what SetPartition
	// compares against.
	PartitionEpoch int32
	// ControllerEpoch is the epoch of the controller that last wrote it.
	ControllerEpoch int64
}

// Clone returns a deep copy of p, which shares nothing with it.
func (p PartitionState) Clone() PartitionState {
	p.ISR = slices.Clone(p.ISR)
	return p
}

// TopicPartition returns the partition's name.
func (p PartitionState) TopicPartition() TopicPartition {
	return TopicPartition{Topic: p.Topic, Partition: p.Partition}
}

// Metadata is the whole cluster metadata at one version.
type Metadata struct {
	// Version orders states of one cluster: a later state has a greater or
	// equal Version. Its unit is the backend's (ZooKeeper zxid, etcd
	// revision, Raft log index).
	Version int64
	// Topics by name.
	Topics map[string]Topic
	// Partitions by topic and partition.
	Partitions map[TopicPartition]PartitionState
	// PartitionBase is the PartitionEpoch of a state created now
	// (CreateTopic, SetPartition with NewPartition): 0, but on the target
	// of a migration the base of its partition epochs
	// (EpochBases.Partition), which every epoch it reports is raised by.
	PartitionBase int32
}

// NewMetadata returns an empty Metadata.
func NewMetadata() *Metadata {
	return &Metadata{Topics: map[string]Topic{}, Partitions: map[TopicPartition]PartitionState{}}
}

// Clone returns a deep copy of m, which the receiver may keep or change.
func (m *Metadata) Clone() *Metadata {
	out := &Metadata{
		Version:       m.Version,
		Topics:        make(map[string]Topic, len(m.Topics)),
		Partitions:    make(map[TopicPartition]PartitionState, len(m.Partitions)),
		PartitionBase: m.PartitionBase,
	}
	for name, t := range m.Topics {
		out.Topics[name] = t.Clone()
	}
	for tp, st := range m.Partitions {
		out.Partitions[tp] = st.Clone()
	}
	return out
}

// TopicNames returns the topic names, sorted.
func (m *Metadata) TopicNames() []string {
	names := make([]string, 0, len(m.Topics))
	for n := range m.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Op is one change to the metadata, applied by Commit.
type Op interface{ isOp() }

// CreateTopic creates a topic and the initial state of each of its
// partitions (States must hold one state per partition; their
// PartitionEpoch is ignored: each gets the metadata's PartitionBase, 0
// but on the target of a migration). ErrExists if the topic exists.
type CreateTopic struct {
	Topic  Topic
	States []PartitionState
}

// SetTopic replaces an existing topic's assignment and config (adding
// partitions, changing replicas). New partitions need a SetPartition with
// ExpectedEpoch NewPartition in the same Commit. ErrNotFound if missing.
type SetTopic struct {
	Topic Topic
}

// DeleteTopic removes a topic and all its partition states. ErrNotFound if
// the topic does not exist.
type DeleteTopic struct {
	Name string
}

// NewPartition is the ExpectedEpoch of a SetPartition that creates a
// partition state which does not exist yet.
const NewPartition int32 = -1

// SetPartition writes a partition state if the stored PartitionEpoch equals
// ExpectedEpoch (or, with NewPartition, if no state exists); the stored
// state gets PartitionEpoch ExpectedEpoch+1 (the metadata's PartitionBase
// when new). ErrVersionMismatch
// otherwise; ErrNotFound if the topic does not exist.
type SetPartition struct {
	State         PartitionState
	ExpectedEpoch int32
}

func (CreateTopic) isOp()  {}
func (SetTopic) isOp()     {}
func (DeleteTopic) isOp()  {}
func (SetPartition) isOp() {}

// ProducerIDBlockSize is how many producer ids one AllocateProducerIDs
// reserves (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

// ProducerIDBlock is a range of Kafka producer ids reserved for one broker
// (Kafka's ProducerIdsBlock): First, First+1, ..., Last().
type ProducerIDBlock struct {
	// Broker is the broker the block was reserved for.
	Broker BrokerID `json:"broker"`
	// First is the block's first producer id.
	First int64 `json:"first"`
	// Size is how many ids the block holds: ProducerIDBlockSize.
	Size int64 `json:"size"`
}

// Last returns the block's last producer id (Kafka's lastProducerId).
func (b ProducerIDBlock) Last() int64 { return b.First + b.Size - 1 }

// Overlaps reports whether b and o share a producer id.
func (b ProducerIDBlock) Overlaps(o ProducerIDBlock) bool {
	return b.First <= o.Last() && o.First <= b.Last()
}

func (b ProducerIDBlock) String() string {
	return fmt.Sprintf("producer ids %d..%d of broker %d", b.First, b.Last(), b.Broker)
}

// NewProducerIDBlock returns the block of ProducerIDBlockSize ids from first
// on for broker, which backends reserve when first is the lowest id not yet
// reserved. It fails, as Kafka does, when fewer than a block of ids remain
// below math.MaxInt64, or when first is negative (a corrupt counter).
func NewProducerIDBlock(broker BrokerID, first int64) (ProducerIDBlock, error) {
	if first < 0 {
		return ProducerIDBlock{}, fmt.Errorf("producer id block start %d: negative", first)
	}
	if first > math.MaxInt64-ProducerIDBlockSize {
		return ProducerIDBlock{}, fmt.Errorf("producer id block start %d: exhausted all producer ids", first)
	}
	return ProducerIDBlock{Broker: broker, First: first, Size: ProducerIDBlockSize}, nil
}

// ProducerIDKeySize is the length of the cluster's producer id key
// (ProducerIDAllocator.ProducerIDKey): the key size of HMAC-SHA256.
const ProducerIDKeySize = 32

// CheckProducerIDKey fails, naming where, unless key is a producer id key
// of ProducerIDKeySize bytes.
func CheckProducerIDKey(where string, key []byte) error {
	if len(key) != ProducerIDKeySize {
		return fmt.Errorf("producer id key at %s: got %d bytes, want %d", where, len(key), ProducerIDKeySize)
	}
	return nil
}
