package controller

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
)

// Policy is what of the controller's settings its decisions follow.
type Policy struct {
	// UncleanLeaderElection is the cluster default of
	// unclean.leader.election.enable; a topic's config overrides it.
	UncleanLeaderElection bool
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage.
	LeaderImbalancePerBrokerPercentage int
	// MaxPartitions bounds the partitions of the whole cluster
	// (max.partitions); 0: no bound.
	MaxPartitions int
	// MaxBrokerPartitions bounds the replicas one broker is assigned
	// (max.broker.partitions); 0: no bound.
	MaxBrokerPartitions int
}

// State is what the controller knows of the cluster, and what every
// decision is taken from. It holds two kinds of knowledge:
//
//   - the metadata (topics and partition states), which belongs to the
//     backend: a decision never changes it, it proposes ops; the state
//     takes them in only once the backend has committed them (Committed),
//     or by reading the backend again (Reload);
//   - facts about brokers that are not stored (which are live at which
//     broker epoch, which are in controlled shutdown, which of their
//     replicas are offline), which the events that bring them record at
//     once, and the work those facts leave owed (the previous
//     incarnation of a restarted broker to fence, brokers to send their
//     full state, the live set to announce), which the next Reconcile
//     plans and Committed marks done.
//
// A State does no I/O, reads no clock and starts no goroutine: given the
// same state and event, a decision returns the same Plan. Randomness
// (replica placement, topic IDs) comes in through a Seed. It is not safe
// for concurrent use; the Controller owns one.
type State struct {
	controller coord.BrokerID
	epoch      int64
	policy     Policy
	log        hclog.Logger

	md           *coord.Metadata
	live         map[coord.BrokerID]coord.Broker
	shuttingDown map[coord.BrokerID]bool
	// offline are the replicas each live broker reported offline
	// (KAFKA_STORAGE_ERROR: a failed log dir); they neither lead nor stay
	// in an ISR until the broker restarts (a new broker epoch).
	offline map[coord.BrokerID]map[coord.TopicPartition]bool

	// unreachable are live brokers whose listener refused a connection:
	// their process is gone although their session lives on (Unreachable).
	// They count as not live until they answer again (Reachable), leave,
	// or come back as a new incarnation.
	unreachable map[coord.BrokerID]bool

	// membersSeen is false until the first member set is recorded.
	membersSeen bool
	// crashedAtStart are the broker epochs of incarnations found crashed
	// before the first member set (Crashed); that Members marks them
	// unreachable.
	crashedAtStart map[coord.BrokerID]int64
	// restarted are brokers whose new incarnation replaced one that may
	// still lead partitions: the next Reconcile first moves those
	// leaderships as if the broker had failed.
	restarted map[coord.BrokerID]bool
	// unsynced are live brokers that have not been sent their full state.
	unsynced map[coord.BrokerID]bool
	// liveChanged is set when the live set changed and not every broker
	// has been told.
	liveChanged bool

	// sorted caches sortedPartitions until the set of partitions with a
	// state changes (nil: not computed). Callers never change it.
	sorted []coord.TopicPartition
}

// NewState returns the state of the controller broker controller at
// controller epoch epoch, over the metadata md (which it keeps, without a
// copy), with no live broker yet. A nil log discards.
func NewState(controller coord.BrokerID, epoch int64, md *coord.Metadata, policy Policy, log hclog.Logger) *State {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if md == nil {
		md = coord.NewMetadata()
	}
	return &State{
		controller:   controller,
		epoch:        epoch,
		policy:       policy,
		log:          log,
		md:           md,
		live:         map[coord.BrokerID]coord.Broker{},
		shuttingDown: map[coord.BrokerID]bool{},
		offline:      map[coord.BrokerID]map[coord.TopicPartition]bool{},
		unreachable:  map[coord.BrokerID]bool{},
		restarted:    map[coord.BrokerID]bool{},
		unsynced:     map[coord.BrokerID]bool{},
	}
}

// Plan is a decision's outcome: steps that the actor carries out in
// order. For each step it drops the queues of Drops, commits Ops in one
// backend Commit (none: nothing to commit), marks the step done in the
// state (Committed), and sends Messages. When a commit fails the steps
// after it are not carried out; the work they held is still owed in the
// state (or was a request's, which fails) and the next Reconcile plans it
// again.
type Plan struct {
	Steps []Step
}

// Step is one commit and what follows it.
type Step struct {
	// Drops are brokers whose queued requests are discarded before the
	// commit: they left, or restarted as a new incarnation.
	Drops []coord.BrokerID
	// Ops go to the backend in one Commit.
	Ops []coord.Op
	// Messages are sent, in order, once Ops are committed.
	Messages []Message

	// settles is the owed work the step does.
	settles settlement
}

// settlement is owed work a step does, marked done by Committed.
type settlement struct {
	restarted []coord.BrokerID
	synced    []coord.BrokerID
	live      bool
}

// Message is a request addressed to a broker at its broker epoch.
type Message struct {
	To      coord.Broker
	Request Request
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool {
	for _, s := range p.Steps {
		if len(s.Drops) > 0 || len(s.Ops) > 0 || len(s.Messages) > 0 || !s.settles.empty() {
			return false
		}
	}
	return true
}

func (s settlement) empty() bool {
	return len(s.restarted) == 0 && len(s.synced) == 0 && !s.live
}

// add appends step unless it does nothing.
func (p *Plan) add(step Step) {
	if len(step.Drops) == 0 && len(step.Ops) == 0 && len(step.Messages) == 0 && step.settles.empty() {
		return
	}
	p.Steps = append(p.Steps, step)
}

// Epoch returns the controller epoch the state decides for.
func (s *State) Epoch() int64 { return s.epoch }

// Metadata returns the metadata the state holds. The caller must not
// change it.
func (s *State) Metadata() *coord.Metadata { return s.md }

// Committed takes in a step whose ops the backend has committed: it
// applies them to the metadata exactly as the backend stored them, and
// marks the step's owed work done.
func (s *State) Committed(step Step) {
	if applyOps(s.md, step.Ops) {
		s.sorted = nil
	}
	for _, id := range step.settles.restarted {
		delete(s.restarted, id)
	}
	for _, id := range step.settles.synced {
		delete(s.unsynced, id)
	}
	if step.settles.live {
		s.liveChanged = false
	}
}

// Reload replaces the metadata with md, read from the backend after a
// commit failed, and returns the plan that tells the brokers what the
// backend holds that they were not told. A failed Commit may have applied
// its first chunks: their partition states are committed, but the plan
// that made them stopped before its messages. So every partition whose
// state md holds differently from the state before (or that is new) is
// propagated as a decision's would be, and a topic md no longer holds is
// announced deleted, with StopReplica to its replicas, as DeleteTopic
// does. The facts about brokers and the owed work stay.
func (s *State) Reload(md *coord.Metadata) Plan {
	old := s.md
	s.md = md
	s.sorted = nil
	var changed []PartitionInfo
	for _, tp := range s.sortedPartitions() {
		if prev, ok := old.Partitions[tp]; ok && samePartitionState(prev, md.Partitions[tp]) {
			continue
		}
		changed = append(changed, s.info(tp))
	}
	var msgs []Message
	var deleted []string
	for _, name := range old.TopicNames() {
		if _, ok := md.Topics[name]; !ok {
			deleted = append(deleted, name)
			msgs = append(msgs, s.stopReplicas(old.Topics[name])...)
		}
	}
	var plan Plan
	if len(changed) > 0 || len(deleted) > 0 {
		plan.add(Step{Messages: append(msgs, s.propagate(changed, deleted)...)})
	}
	return plan
}

// samePartitionState reports whether a and b are the same write of a
// partition's state.
func samePartitionState(a, b coord.PartitionState) bool {
	return a.PartitionEpoch == b.PartitionEpoch && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && slices.Equal(a.ISR, b.ISR)
}

// applyOps applies committed ops to md as the contract says the backend
// stores them: a created partition state has PartitionEpoch
// md.PartitionBase (0 but on the target of a migration), a set one its
// ExpectedEpoch + 1. It reports whether the set of partitions with a
// state may have changed.
func applyOps(md *coord.Metadata, ops []coord.Op) (partitionsChanged bool) {
	for _, op := range ops {
		switch op := op.(type) {
		case coord.CreateTopic:
			md.Topics[op.Topic.Name] = op.Topic
			for p, st := range op.States {
				st.Topic, st.Partition, st.PartitionEpoch = op.Topic.Name, int32(p), md.PartitionBase
				md.Partitions[st.TopicPartition()] = st
			}
			partitionsChanged = true
		case coord.SetTopic:
			md.Topics[op.Topic.Name] = op.Topic
		case coord.DeleteTopic:
			for tp := range md.Partitions {
				if tp.Topic == op.Name {
					delete(md.Partitions, tp)
				}
			}
			delete(md.Topics, op.Name)
			partitionsChanged = true
		case coord.SetPartition:
			st := committedState(op, md.PartitionBase)
			tp := st.TopicPartition()
			if _, ok := md.Partitions[tp]; !ok {
				partitionsChanged = true
			}
			md.Partitions[tp] = st
		}
	}
	return partitionsChanged
}

// committedState is the state a committed SetPartition stores, on a
// backend whose created states get PartitionEpoch base
// (coord.Metadata.PartitionBase).
func committedState(op coord.SetPartition, base int32) coord.PartitionState {
	st := op.State
	st.PartitionEpoch = op.ExpectedEpoch + 1
	if op.ExpectedEpoch == coord.NewPartition {
		st.PartitionEpoch = base
	}
	return st
}

// setPartition is the op that writes next over the stored state of
// partition epoch expected (coord.NewPartition: none), stamped with the
// controller epoch.
func (s *State) setPartition(next coord.PartitionState, expected int32) coord.SetPartition {
	next.ControllerEpoch = s.epoch
	return coord.SetPartition{State: next, ExpectedEpoch: expected}
}

// clone returns a copy of s whose metadata maps and owed work can change
// without changing s (the states and broker records themselves are
// values, and slices in them are never changed in place).
func (s *State) clone() *State {
	c := *s
	c.md = &coord.Metadata{Version: s.md.Version, Topics: make(map[string]coord.Topic, len(s.md.Topics)),
		Partitions: make(map[coord.TopicPartition]coord.PartitionState, len(s.md.Partitions)), PartitionBase: s.md.PartitionBase}
	for n, t := range s.md.Topics {
		c.md.Topics[n] = t
	}
	for tp, st := range s.md.Partitions {
		c.md.Partitions[tp] = st
	}
	c.restarted = cloneSet(s.restarted)
	c.unsynced = cloneSet(s.unsynced)
	return &c
}

func cloneSet(m map[coord.BrokerID]bool) map[coord.BrokerID]bool {
	c := make(map[coord.BrokerID]bool, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// isLive reports whether id may hold leadership or ISR membership, or get
// new replicas: it is live and not in controlled shutdown.
func (s *State) isLive(id coord.BrokerID) bool {
	return s.reachable(id) && !s.shuttingDown[id]
}

// reachable reports whether id is live and not known unreachable: it may
// be sent requests and named in the live set.
func (s *State) reachable(id coord.BrokerID) bool {
	_, ok := s.live[id]
	return ok && !s.unreachable[id]
}

// online returns whether a broker's replica of tp may hold leadership or
// ISR membership now: the broker is live, not shutting down, and has not
// reported the replica offline.
func (s *State) online(tp coord.TopicPartition) func(coord.BrokerID) bool {
	return func(id coord.BrokerID) bool { return s.isLive(id) && !s.offline[id][tp] }
}

// checkIncarnation returns ErrStaleBrokerEpoch unless id is live at
// brokerEpoch (a negative brokerEpoch, from a request version without
// one, matches any).
func (s *State) checkIncarnation(id coord.BrokerID, brokerEpoch int64) error {
	if b, ok := s.live[id]; !ok || (brokerEpoch >= 0 && b.Epoch != brokerEpoch) {
		return fmt.Errorf("%w: broker %d epoch %d", ErrStaleBrokerEpoch, id, brokerEpoch)
	}
	return nil
}

// eligible returns the brokers that may get new replicas, sorted: live
// and not in controlled shutdown.
func (s *State) eligible() []coord.BrokerID {
	ids := make([]coord.BrokerID, 0, len(s.live))
	for id := range s.live {
		if s.isLive(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// unclean reports whether topic t allows unclean leader election.
func (s *State) unclean(t coord.Topic) bool {
	if v, ok := t.Config["unclean.leader.election.enable"]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return s.policy.UncleanLeaderElection
}

// replicas returns the assigned replicas of tp, nil when the topic has no
// such partition.
func (s *State) replicas(tp coord.TopicPartition) []coord.BrokerID {
	t := s.md.Topics[tp.Topic]
	if tp.Partition < 0 || int(tp.Partition) >= len(t.Assignment) {
		return nil
	}
	return t.Assignment[tp.Partition]
}

// sortedPartitions returns every partition that has a state, by topic
// then index. The caller must not change the slice: it is kept until the
// set of partitions changes (sorting 100 000 took 20 ms, and a decision
// may walk them several times).
func (s *State) sortedPartitions() []coord.TopicPartition {
	if s.sorted != nil && len(s.sorted) == len(s.md.Partitions) {
		return s.sorted
	}
	tps := make([]coord.TopicPartition, 0, len(s.md.Partitions))
	for tp := range s.md.Partitions {
		tps = append(tps, tp)
	}
	sortPartitions(tps)
	s.sorted = tps
	return tps
}

func sortPartitions(tps []coord.TopicPartition) {
	slices.SortFunc(tps, func(a, b coord.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}

// info returns what brokers are told of tp as the state holds it.
func (s *State) info(tp coord.TopicPartition) PartitionInfo {
	return partitionInfo(s.md.Topics[tp.Topic], s.md.Partitions[tp])
}

// partitionInfo is st of topic t as brokers are told it.
func partitionInfo(t coord.Topic, st coord.PartitionState) PartitionInfo {
	var replicas []coord.BrokerID
	if int(st.Partition) < len(t.Assignment) {
		replicas = t.Assignment[st.Partition]
	}
	return PartitionInfo{PartitionState: st, TopicID: t.ID, Replicas: replicas}
}

// liveBrokers returns the live brokers that are not known unreachable,
// by ID.
func (s *State) liveBrokers() []coord.Broker {
	bs := make([]coord.Broker, 0, len(s.live))
	for _, b := range s.live {
		if !s.unreachable[b.ID] {
			bs = append(bs, b)
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	return bs
}

// LiveBrokers returns a copy of the live brokers, by ID.
func (s *State) LiveBrokers() []coord.Broker { return s.liveBrokers() }

// LedBy returns the partitions broker id leads, in order.
func (s *State) LedBy(id coord.BrokerID) []coord.TopicPartition {
	var led []coord.TopicPartition
	for _, tp := range s.sortedPartitions() {
		if s.md.Partitions[tp].Leader == id {
			led = append(led, tp)
		}
	}
	return led
}

// missingStates returns the partitions of topic t that have no state, in
// order: a commit that created t or grew it was cut off after its first
// chunks (or, on ZooKeeper, one that deleted it).
func (s *State) missingStates(t coord.Topic) []int32 {
	var missing []int32
	for p := range t.Assignment {
		if _, ok := s.md.Partitions[coord.TopicPartition{Topic: t.Name, Partition: int32(p)}]; !ok {
			missing = append(missing, int32(p))
		}
	}
	return missing
}

// IncompleteTopics describes, one a line, every topic some partitions of
// which have no state (see missingStates), for the controller's log.
func (s *State) IncompleteTopics() []string {
	var out []string
	for _, name := range s.md.TopicNames() {
		t := s.md.Topics[name]
		if missing := s.missingStates(t); len(missing) > 0 {
			out = append(out, fmt.Sprintf("topic %s: %d of %d partitions have no state (%s)", name, len(missing), len(t.Assignment), formatIndexes(missing)))
		}
	}
	return out
}

func formatIndexes(ps []int32) string {
	const shown = 10
	parts := make([]string, 0, min(len(ps), shown)+1)
	for i, p := range ps {
		if i == shown {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, strconv.Itoa(int(p)))
	}
	return strings.Join(parts, " ")
}
