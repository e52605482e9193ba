package coord

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Errors the controller returns to the brokers that ask it for something.
// The broker maps them to Kafka error codes.
var (
	// ErrNotController: the controller has stopped (its term ended).
	ErrNotController = errors.New("coord: not the controller")
	// ErrInvalidReplicationFactor: more replicas than live brokers, or < 1.
	ErrInvalidReplicationFactor = errors.New("coord: invalid replication factor")
	// ErrInvalidPartitions: a partition count below 1 or not above the
	// current count.
	ErrInvalidPartitions = errors.New("coord: invalid partition count")
	// ErrInvalidReplicaAssignment: a manual assignment naming unknown or
	// repeated brokers.
	ErrInvalidReplicaAssignment = errors.New("coord: invalid replica assignment")
	// ErrStaleBrokerEpoch: the request came from an earlier incarnation of
	// the broker.
	ErrStaleBrokerEpoch = errors.New("coord: stale broker epoch")
	// ErrFencedLeaderEpoch: an AlterPartition from a deposed leader.
	ErrFencedLeaderEpoch = errors.New("coord: fenced leader epoch")
	// ErrInvalidUpdateVersion: an AlterPartition based on an old partition
	// epoch.
	ErrInvalidUpdateVersion = errors.New("coord: invalid partition update version")
	// ErrIneligibleReplica: an ISR naming a replica that is not assigned or
	// not live.
	ErrIneligibleReplica = errors.New("coord: ineligible replica")
	// ErrPreferredLeaderNotAvailable: the preferred replica is down or out
	// of sync.
	ErrPreferredLeaderNotAvailable = errors.New("coord: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no replica may lead.
	ErrEligibleLeadersNotAvailable = errors.New("coord: eligible leaders not available")
	// ErrElectionNotNeeded: the partition already has the leader asked for.
	ErrElectionNotNeeded = errors.New("coord: election not needed")
)

// ControllerConfig configures the controller that runs for one Term.
type ControllerConfig struct {
	// Backend stores the metadata; Term is the tenure the controller acts
	// for. It stops when Term ends.
	Backend Backend
	Term    Term
	// Sender delivers LeaderAndIsr, UpdateMetadata and StopReplica.
	Sender Sender
	// Logger receives the controller's logs. Default: discard.
	Logger hclog.Logger
	// UncleanLeaderElection is the cluster default of
	// unclean.leader.election.enable (default false); a topic's config
	// overrides it.
	UncleanLeaderElection bool
	// AutoLeaderRebalance enables the preferred-leader rebalance
	// (auto.leader.rebalance.enable, default true).
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is how often the rebalance runs
	// (leader.imbalance.check.interval.seconds, default 300 s).
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is the share of a broker's
	// preferred partitions it may fail to lead before the rebalance moves
	// them back (leader.imbalance.per.broker.percentage, default 10).
	LeaderImbalancePerBrokerPercentage int
	// RetryBackoff is the wait before a failed commit is tried again.
	// Default 500 ms.
	RetryBackoff time.Duration
}

// DefaultControllerConfig returns Kafka's defaults; Backend, Term and
// Sender must still be set.
func DefaultControllerConfig() ControllerConfig {
	return ControllerConfig{
		AutoLeaderRebalance:                true,
		LeaderImbalanceCheckInterval:       300 * time.Second,
		LeaderImbalancePerBrokerPercentage: 10,
		RetryBackoff:                       500 * time.Millisecond,
	}
}

// Controller is the cluster's one controller, for the duration of one
// Term. All its state is owned by one goroutine (run); the exported
// methods hand work to it and wait, so decisions are taken one at a time
// in the order they arrive, as Kafka's controller event queue does.
type Controller struct {
	cfg  ControllerConfig
	log  hclog.Logger
	work chan func(context.Context)
	done chan struct{}

	errMu sync.Mutex
	err   error

	// Owned by run.
	md           *Metadata
	live         map[BrokerID]Broker
	shuttingDown map[BrokerID]bool
	// offline are the replicas each live broker reported offline
	// (KAFKA_STORAGE_ERROR: a failed log dir); they neither lead nor stay
	// in an ISR until the broker restarts (a new broker epoch).
	offline map[BrokerID]map[TopicPartition]bool
	retry   *time.Timer
}

// StartController loads the metadata and starts the controller for
// cfg.Term: it elects leaders for partitions whose leader is not live,
// drops dead brokers from ISRs, and sends every live broker its state.
// It returns once the metadata and the first set of live brokers are
// loaded; the controller then runs until the term ends. Errors: those of
// Load and WatchMembers, ErrNotController if the term ends first,
// ctx.Err().
func StartController(ctx context.Context, cfg ControllerConfig) (*Controller, error) {
	def := DefaultControllerConfig()
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = def.LeaderImbalanceCheckInterval
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = def.RetryBackoff
	}
	md, err := cfg.Backend.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("controller: load metadata: %w", err)
	}
	termCtx := cfg.Term.Context()
	members, err := cfg.Backend.WatchMembers(termCtx)
	if err != nil {
		return nil, fmt.Errorf("controller: watch members: %w", err)
	}
	// The first member set is taken before the controller serves anything,
	// so no request (a CreateTopics, say) is decided on an empty live set.
	var first []Broker
	select {
	case brokers, ok := <-members:
		if !ok {
			return nil, fmt.Errorf("controller: watch members: %w", ErrNotController)
		}
		first = brokers
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-termCtx.Done():
		return nil, fmt.Errorf("controller: %w", ErrNotController)
	}
	c := &Controller{
		cfg:          cfg,
		log:          cfg.Logger.Named("controller").With("epoch", cfg.Term.Epoch()),
		work:         make(chan func(context.Context)),
		done:         make(chan struct{}),
		md:           md,
		live:         map[BrokerID]Broker{},
		shuttingDown: map[BrokerID]bool{},
		offline:      map[BrokerID]map[TopicPartition]bool{},
	}
	go c.run(termCtx, first, members)
	return c, nil
}

// Done is closed when the controller has stopped.
func (c *Controller) Done() <-chan struct{} { return c.done }

// Err returns why the controller stopped (nil while running).
func (c *Controller) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// Epoch is the controller epoch of its term.
func (c *Controller) Epoch() int64 { return c.cfg.Term.Epoch() }

// Wait blocks until the controller has stopped: its term ended (resign
// the term to stop it).
func (c *Controller) Wait() { <-c.done }

func (c *Controller) stop(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
}

// do runs f on the controller's goroutine and waits for it. It returns
// ErrNotController if the controller stops first, ctx.Err() if ctx ends.
func (c *Controller) do(ctx context.Context, f func(context.Context)) error {
	finished := make(chan struct{})
	wrapped := func(runCtx context.Context) {
		defer close(finished)
		f(runCtx)
	}
	select {
	case c.work <- wrapped:
	case <-c.done:
		return ErrNotController
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-finished:
		return nil
	case <-c.done:
		return ErrNotController
	}
}

func (c *Controller) run(ctx context.Context, initial []Broker, members <-chan []Broker) {
	defer close(c.done)
	defer c.stop(ErrNotController)
	c.retry = time.NewTimer(time.Hour)
	c.retry.Stop()
	defer c.retry.Stop()
	rebalance := time.NewTicker(c.cfg.LeaderImbalanceCheckInterval)
	defer rebalance.Stop()
	c.log.Info("controller started", "topics", len(c.md.Topics), "partitions", len(c.md.Partitions), "brokers", len(initial))
	c.onMembers(ctx, initial, true)
	for {
		select {
		case <-ctx.Done():
			c.log.Info("controller stopped: term ended")
			return
		case brokers, ok := <-members:
			if !ok {
				return
			}
			c.onMembers(ctx, brokers, false)
		case f := <-c.work:
			f(ctx)
		case <-c.retry.C:
			c.reload(ctx)
			c.reconcile(ctx, nil)
		case <-rebalance.C:
			if c.cfg.AutoLeaderRebalance {
				c.rebalance(ctx)
			}
		}
		if c.Err() != nil && !errors.Is(c.Err(), ErrNotController) {
			return
		}
	}
}

// isLive reports whether id may hold leadership or ISR membership now.
func (c *Controller) isLive(id BrokerID) bool {
	_, ok := c.live[id]
	return ok && !c.shuttingDown[id]
}

// online returns whether a broker's replica of tp may hold leadership or
// ISR membership now: the broker is live and has not reported the replica
// offline.
func (c *Controller) online(tp TopicPartition) func(BrokerID) bool {
	return func(id BrokerID) bool { return c.isLive(id) && !c.offline[id][tp] }
}

// onMembers handles a new set of live brokers: brokers gone (or restarted
// with a new broker epoch) lose their leaderships and ISR places; brokers
// new (or restarted) get their full state.
func (c *Controller) onMembers(ctx context.Context, brokers []Broker, first bool) {
	next := make(map[BrokerID]Broker, len(brokers))
	for _, b := range brokers {
		next[b.ID] = b
	}
	var joined []Broker
	bounced := map[BrokerID]bool{}
	for id, old := range c.live {
		b, ok := next[id]
		if !ok {
			c.log.Info("broker left", "broker", id, "broker_epoch", old.Epoch)
			c.cfg.Sender.Drop(id)
			delete(c.shuttingDown, id)
			delete(c.offline, id)
		} else if b.Epoch != old.Epoch {
			c.log.Info("broker restarted", "broker", id, "old_epoch", old.Epoch, "broker_epoch", b.Epoch)
			c.cfg.Sender.Drop(id)
			delete(c.shuttingDown, id)
			// A restart opens the broker's log dirs again: its offline
			// replicas are online again once it rejoins.
			delete(c.offline, id)
			bounced[id] = true
		}
	}
	for id, b := range next {
		if old, ok := c.live[id]; !ok || old.Epoch != b.Epoch {
			joined = append(joined, b)
		}
	}
	sort.Slice(joined, func(i, j int) bool { return joined[i].ID < joined[j].ID })
	membershipChanged := len(joined) > 0 || len(next) != len(c.live)
	c.live = next
	// A restarted broker first counts as failed, so leadership moves off
	// the incarnation that lost its state, then as a newcomer.
	if len(bounced) > 0 {
		c.reconcile(ctx, bounced)
	}
	for _, b := range joined {
		if first {
			c.log.Debug("broker live", "broker", b.ID, "broker_epoch", b.Epoch)
		} else {
			c.log.Info("broker joined", "broker", b.ID, "broker_epoch", b.Epoch)
		}
		c.sendFullState(b)
	}
	c.reconcile(ctx, nil)
	// Every broker learns the new live set, even when no partition
	// changed (Kafka sends UpdateMetadata on every broker startup and
	// failure), so Metadata lists the same brokers everywhere.
	if membershipChanged {
		c.propagate(nil, nil)
	}
}

// reconcile brings every partition in line with the live set: a
// partition whose leader is not live (or whose replica there is offline)
// gets one elected by R11, and dead brokers and offline replicas leave
// ISRs. excluded brokers count as dead for this pass. All changes go to
// the backend in one Commit (chunked by the backend).
func (c *Controller) reconcile(ctx context.Context, excluded map[BrokerID]bool) {
	var ops []Op
	for _, tp := range c.sortedPartitions() {
		online := c.online(tp)
		live := func(id BrokerID) bool { return online(id) && !excluded[id] }
		st := c.md.Partitions[tp]
		topic := c.md.Topics[tp.Topic]
		if int(tp.Partition) >= len(topic.Assignment) {
			continue
		}
		assignment := topic.Assignment[tp.Partition]
		next := st
		if st.Leader == NoBroker || !live(st.Leader) {
			e := ElectLeader(assignment, st.ISR, live, c.unclean(topic))
			if e.Leader == st.Leader && slices.Equal(e.ISR, st.ISR) {
				continue
			}
			if e.Unclean {
				c.log.Warn("unclean leader election: acknowledged records may be lost", "partition", tp, "leader", e.Leader)
			}
			next.Leader, next.ISR = e.Leader, e.ISR
			next.LeaderEpoch = st.LeaderEpoch + 1
		} else {
			isr := slices.DeleteFunc(slices.Clone(st.ISR), func(id BrokerID) bool { return !live(id) })
			if slices.Equal(isr, st.ISR) {
				continue
			}
			next.ISR = isr
		}
		ops = append(ops, SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})
	}
	c.commitStates(ctx, ops)
}

// commitStates commits SetPartition ops, applies them to the local state
// and tells the brokers. A fenced commit stops the controller; any other
// failure reloads the state and tries again after RetryBackoff.
func (c *Controller) commitStates(ctx context.Context, ops []Op) bool {
	if len(ops) == 0 {
		return true
	}
	if !c.commit(ctx, ops) {
		return false
	}
	changed := make([]TopicPartition, 0, len(ops))
	for _, op := range ops {
		sp := op.(SetPartition)
		st := sp.State
		st.PartitionEpoch = sp.ExpectedEpoch + 1
		st.ControllerEpoch = c.Epoch()
		c.md.Partitions[st.TopicPartition()] = st
		changed = append(changed, st.TopicPartition())
	}
	c.log.Info("partition states committed", "partitions", len(changed))
	c.propagate(changed, nil)
	return true
}

// commit writes ops through the backend under the controller's term.
func (c *Controller) commit(ctx context.Context, ops []Op) bool {
	for i, op := range ops {
		if sp, ok := op.(SetPartition); ok {
			sp.State.ControllerEpoch = c.Epoch()
			ops[i] = sp
		}
	}
	err := c.cfg.Backend.Commit(ctx, c.cfg.Term, ops...)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrFenced):
		c.log.Warn("controller fenced: a newer controller exists", "error", err)
		c.stop(err)
		return false
	case ctx.Err() != nil:
		return false
	default:
		c.log.Warn("commit failed; reloading and retrying", "ops", len(ops), "error", err, "backoff", c.cfg.RetryBackoff)
		c.retry.Reset(c.cfg.RetryBackoff)
		return false
	}
}

// reload replaces the local state with the backend's after a failed
// commit, whose chunks may have been partly applied.
func (c *Controller) reload(ctx context.Context) {
	md, err := c.cfg.Backend.Load(ctx)
	if err != nil {
		c.log.Warn("reload failed", "error", err)
		c.retry.Reset(c.cfg.RetryBackoff)
		return
	}
	c.md = md
}

func (c *Controller) unclean(t Topic) bool {
	if v, ok := t.Config["unclean.leader.election.enable"]; ok {
		b, err := strconv.ParseBool(v)
		if err == nil {
			return b
		}
	}
	return c.cfg.UncleanLeaderElection
}

func (c *Controller) sortedPartitions() []TopicPartition {
	tps := make([]TopicPartition, 0, len(c.md.Partitions))
	for tp := range c.md.Partitions {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

func (c *Controller) info(tp TopicPartition) PartitionInfo {
	topic := c.md.Topics[tp.Topic]
	var replicas []BrokerID
	if int(tp.Partition) < len(topic.Assignment) {
		replicas = topic.Assignment[tp.Partition]
	}
	return PartitionInfo{PartitionState: c.md.Partitions[tp], TopicID: topic.ID, Replicas: replicas}
}

func (c *Controller) liveBrokers() []Broker {
	bs := make([]Broker, 0, len(c.live))
	for _, b := range c.live {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	return bs
}

// sendFullState sends a broker that just joined every partition state
// (UpdateMetadata) and its own replicas (LeaderAndIsr).
func (c *Controller) sendFullState(b Broker) {
	all := c.sortedPartitions()
	infos := make([]PartitionInfo, 0, len(all))
	var mine []PartitionInfo
	for _, tp := range all {
		info := c.info(tp)
		infos = append(infos, info)
		if slices.Contains(info.Replicas, b.ID) {
			mine = append(mine, info)
		}
	}
	live := c.liveBrokers()
	c.cfg.Sender.Send(b, &UpdateMetadataRequest{
		ControllerID: c.cfg.Term.Controller(), ControllerEpoch: c.Epoch(), BrokerEpoch: b.Epoch,
		Live: live, Partitions: infos,
	})
	if len(mine) > 0 {
		c.cfg.Sender.Send(b, &LeaderAndIsrRequest{
			ControllerID: c.cfg.Term.Controller(), ControllerEpoch: c.Epoch(), BrokerEpoch: b.Epoch,
			Partitions: mine, Leaders: live,
		})
	}
}

// propagate tells every live replica of the changed partitions its new
// role (LeaderAndIsr) and every live broker the new metadata
// (UpdateMetadata), including deleted topics.
func (c *Controller) propagate(changed []TopicPartition, deleted []string) {
	live := c.liveBrokers()
	infos := make([]PartitionInfo, 0, len(changed))
	perBroker := map[BrokerID][]PartitionInfo{}
	for _, tp := range changed {
		info := c.info(tp)
		infos = append(infos, info)
		for _, r := range info.Replicas {
			// An offline replica is not told: its broker cannot act on
			// it until it restarts and gets its full state.
			if _, ok := c.live[r]; ok && !c.offline[r][tp] {
				perBroker[r] = append(perBroker[r], info)
			}
		}
	}
	for _, b := range live {
		if parts := perBroker[b.ID]; len(parts) > 0 {
			c.cfg.Sender.Send(b, &LeaderAndIsrRequest{
				ControllerID: c.cfg.Term.Controller(), ControllerEpoch: c.Epoch(), BrokerEpoch: b.Epoch,
				Partitions: parts, Leaders: live,
			})
		}
		c.cfg.Sender.Send(b, &UpdateMetadataRequest{
			ControllerID: c.cfg.Term.Controller(), ControllerEpoch: c.Epoch(), BrokerEpoch: b.Epoch,
			Live: live, Partitions: infos, Deleted: deleted,
		})
	}
}

// TopicSpec asks for a new topic.
type TopicSpec struct {
	Name string
	// Partitions and ReplicationFactor are used when Assignment is empty.
	Partitions        int
	ReplicationFactor int
	// Assignment, when set, is a manual replica assignment.
	Assignment [][]BrokerID
	Config     map[string]string
	// ValidateOnly checks the request and changes nothing.
	ValidateOnly bool
}

// CreateTopic creates a topic with Kafka's replica assignment over the
// live brokers, elects its leaders and tells the brokers. It returns once
// the topic is committed. Errors: ErrExists, ErrInvalidReplicationFactor,
// ErrInvalidPartitions, ErrInvalidReplicaAssignment, ErrNotController,
// backend errors.
func (c *Controller) CreateTopic(ctx context.Context, spec TopicSpec) (Topic, error) {
	var topic Topic
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) { topic, err = c.createTopic(runCtx, spec) }); doErr != nil {
		return Topic{}, doErr
	}
	return topic, err
}

func (c *Controller) createTopic(ctx context.Context, spec TopicSpec) (Topic, error) {
	if _, ok := c.md.Topics[spec.Name]; ok {
		return Topic{}, fmt.Errorf("%w: topic %q", ErrExists, spec.Name)
	}
	assignment := spec.Assignment
	var err error
	if len(assignment) == 0 {
		if spec.Partitions < 1 {
			return Topic{}, fmt.Errorf("%w: topic %q: %d partitions, must be at least 1", ErrInvalidPartitions, spec.Name, spec.Partitions)
		}
		ids := make([]BrokerID, 0, len(c.live))
		for id := range c.live {
			if !c.shuttingDown[id] {
				ids = append(ids, id)
			}
		}
		if spec.ReplicationFactor < 1 || spec.ReplicationFactor > len(ids) {
			return Topic{}, fmt.Errorf("%w: topic %q: replication factor %d, must be between 1 and the %d live brokers",
				ErrInvalidReplicationFactor, spec.Name, spec.ReplicationFactor, len(ids))
		}
		n := len(ids)
		assignment, err = AssignReplicas(ids, spec.Partitions, spec.ReplicationFactor, 0, mrand.IntN(n), mrand.IntN(n))
		if err != nil {
			return Topic{}, fmt.Errorf("%w: topic %q: %v", ErrInvalidReplicationFactor, spec.Name, err)
		}
	} else if err := c.checkAssignment(spec.Name, assignment); err != nil {
		return Topic{}, err
	}
	topic := Topic{Name: spec.Name, Assignment: assignment, Config: spec.Config}
	if _, err := rand.Read(topic.ID[:]); err != nil {
		return Topic{}, fmt.Errorf("topic %q: generate id: %w", spec.Name, err)
	}
	if spec.ValidateOnly {
		return topic, nil
	}
	states := make([]PartitionState, len(assignment))
	for p, replicas := range assignment {
		e := ElectLeader(replicas, replicas, c.isLive, false)
		states[p] = PartitionState{Topic: spec.Name, Partition: int32(p), Leader: e.Leader, ISR: e.ISR, ControllerEpoch: c.Epoch()}
	}
	if err := c.cfg.Backend.Commit(ctx, c.cfg.Term, CreateTopic{Topic: topic, States: states}); err != nil {
		if errors.Is(err, ErrFenced) {
			c.stop(err)
		}
		return Topic{}, err
	}
	c.md.Topics[topic.Name] = topic
	changed := make([]TopicPartition, len(states))
	for p, st := range states {
		c.md.Partitions[st.TopicPartition()] = st
		changed[p] = st.TopicPartition()
	}
	c.log.Info("topic created", "topic", topic.Name, "partitions", len(assignment))
	c.propagate(changed, nil)
	return topic, nil
}

func (c *Controller) checkAssignment(topic string, assignment [][]BrokerID) error {
	for p, replicas := range assignment {
		if len(replicas) == 0 {
			return fmt.Errorf("%w: topic %q partition %d: no replicas", ErrInvalidReplicaAssignment, topic, p)
		}
		seen := map[BrokerID]bool{}
		for _, r := range replicas {
			if seen[r] {
				return fmt.Errorf("%w: topic %q partition %d: broker %d twice", ErrInvalidReplicaAssignment, topic, p, r)
			}
			seen[r] = true
			if _, ok := c.live[r]; !ok {
				return fmt.Errorf("%w: topic %q partition %d: broker %d is not live", ErrInvalidReplicaAssignment, topic, p, r)
			}
		}
	}
	return nil
}

// CreatePartitions grows a topic to total partitions, assigning the new
// ones as topic creation does (or by assignment, when given). Errors:
// ErrNotFound, ErrInvalidPartitions, ErrInvalidReplicaAssignment,
// ErrNotController, backend errors.
func (c *Controller) CreatePartitions(ctx context.Context, name string, total int, assignment [][]BrokerID, validateOnly bool) error {
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) { err = c.createPartitions(runCtx, name, total, assignment, validateOnly) }); doErr != nil {
		return doErr
	}
	return err
}

func (c *Controller) createPartitions(ctx context.Context, name string, total int, manual [][]BrokerID, validateOnly bool) error {
	topic, ok := c.md.Topics[name]
	if !ok {
		return fmt.Errorf("%w: topic %q", ErrNotFound, name)
	}
	have := len(topic.Assignment)
	if total <= have {
		return fmt.Errorf("%w: topic %q has %d partitions, asked for %d: must be more", ErrInvalidPartitions, name, have, total)
	}
	added := manual
	if len(added) == 0 {
		ids := make([]BrokerID, 0, len(c.live))
		for id := range c.live {
			ids = append(ids, id)
		}
		rf := len(topic.Assignment[0])
		var err error
		added, err = AssignReplicas(ids, total-have, rf, have, mrand.IntN(len(ids)), mrand.IntN(len(ids)))
		if err != nil {
			return fmt.Errorf("%w: topic %q: %v", ErrInvalidReplicationFactor, name, err)
		}
	} else if len(added) != total-have {
		return fmt.Errorf("%w: topic %q: %d assignments for %d new partitions", ErrInvalidReplicaAssignment, name, len(added), total-have)
	} else if err := c.checkAssignment(name, added); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	grown := topic
	grown.Assignment = append(slices.Clone(topic.Assignment), added...)
	ops := []Op{SetTopic{Topic: grown}}
	var changed []TopicPartition
	for i, replicas := range added {
		e := ElectLeader(replicas, replicas, c.isLive, false)
		st := PartitionState{Topic: name, Partition: int32(have + i), Leader: e.Leader, ISR: e.ISR, ControllerEpoch: c.Epoch()}
		ops = append(ops, SetPartition{State: st, ExpectedEpoch: NewPartition})
		changed = append(changed, st.TopicPartition())
	}
	if err := c.cfg.Backend.Commit(ctx, c.cfg.Term, ops...); err != nil {
		if errors.Is(err, ErrFenced) {
			c.stop(err)
		}
		return err
	}
	c.md.Topics[name] = grown
	for _, op := range ops[1:] {
		st := op.(SetPartition).State
		c.md.Partitions[st.TopicPartition()] = st
	}
	c.propagate(changed, nil)
	return nil
}

// DeleteTopic deletes a topic: its metadata, then its replicas' logs
// (StopReplica with delete). Errors: ErrNotFound, ErrNotController,
// backend errors.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) { err = c.deleteTopic(runCtx, name) }); doErr != nil {
		return doErr
	}
	return err
}

func (c *Controller) deleteTopic(ctx context.Context, name string) error {
	topic, ok := c.md.Topics[name]
	if !ok {
		return fmt.Errorf("%w: topic %q", ErrNotFound, name)
	}
	if err := c.cfg.Backend.Commit(ctx, c.cfg.Term, DeleteTopic{Name: name}); err != nil {
		if errors.Is(err, ErrFenced) {
			c.stop(err)
		}
		return err
	}
	delete(c.md.Topics, name)
	perBroker := map[BrokerID][]TopicPartition{}
	for p, replicas := range topic.Assignment {
		tp := TopicPartition{Topic: name, Partition: int32(p)}
		delete(c.md.Partitions, tp)
		for _, r := range replicas {
			perBroker[r] = append(perBroker[r], tp)
		}
	}
	for _, b := range c.liveBrokers() {
		if tps := perBroker[b.ID]; len(tps) > 0 {
			c.cfg.Sender.Send(b, &StopReplicaRequest{
				ControllerID: c.cfg.Term.Controller(), ControllerEpoch: c.Epoch(), BrokerEpoch: b.Epoch,
				Partitions: tps, Delete: true,
			})
		}
	}
	c.propagate(nil, []string{name})
	c.log.Info("topic deleted", "topic", name)
	return nil
}

// AlterPartitionRequest is a partition leader's request to change its
// ISR (Kafka's AlterPartition).
type AlterPartitionRequest struct {
	BrokerID       BrokerID
	BrokerEpoch    int64
	Partition      TopicPartition
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []BrokerID
}

// AlterPartition changes a partition's ISR at its leader's request, after
// checking that the leader is current (ErrFencedLeaderEpoch), that it saw
// the latest state (ErrInvalidUpdateVersion) and that every new member is
// an assigned, live replica (ErrIneligibleReplica). It returns the
// committed state. Other errors: ErrStaleBrokerEpoch, ErrNotFound,
// ErrNotController, backend errors.
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartitionRequest) (PartitionState, error) {
	res, err := c.AlterPartitions(ctx, []AlterPartitionRequest{req})
	if err != nil {
		return PartitionState{}, err
	}
	return res[0].State, res[0].Err
}

// AlterPartitionResult is the outcome of one AlterPartitionRequest: the
// committed state, or why the change was refused (with the current state
// when there is one).
type AlterPartitionResult struct {
	State PartitionState
	Err   error
}

// AlterPartitions is AlterPartition for many partitions at once, as a
// leader sends them after a broker returns: every valid change is
// committed in one backend Commit and propagated once. The results are in
// the order of reqs; the error is for the whole call (ErrNotController,
// the controller stopping).
func (c *Controller) AlterPartitions(ctx context.Context, reqs []AlterPartitionRequest) ([]AlterPartitionResult, error) {
	var res []AlterPartitionResult
	if doErr := c.do(ctx, func(runCtx context.Context) { res = c.alterPartitions(runCtx, reqs) }); doErr != nil {
		return nil, doErr
	}
	return res, nil
}

func (c *Controller) alterPartitions(ctx context.Context, reqs []AlterPartitionRequest) []AlterPartitionResult {
	res := make([]AlterPartitionResult, len(reqs))
	var ops []Op
	var valid []int
	seen := map[TopicPartition]bool{}
	for i, req := range reqs {
		if seen[req.Partition] {
			res[i].Err = fmt.Errorf("%w: partition %s named twice in one request", ErrInvalidUpdateVersion, req.Partition)
			continue
		}
		seen[req.Partition] = true
		next, err := c.checkAlterPartition(req)
		if err != nil {
			res[i] = AlterPartitionResult{State: next, Err: err}
			continue
		}
		ops = append(ops, SetPartition{State: next, ExpectedEpoch: next.PartitionEpoch})
		valid = append(valid, i)
	}
	if len(ops) == 0 {
		return res
	}
	if !c.commit(ctx, ops) {
		err := c.commitErr()
		for _, i := range valid {
			res[i] = AlterPartitionResult{State: c.md.Partitions[reqs[i].Partition],
				Err: fmt.Errorf("partition %s: commit of ISR %v failed: %w", reqs[i].Partition, reqs[i].ISR, err)}
		}
		return res
	}
	changed := make([]TopicPartition, 0, len(valid))
	for k, i := range valid {
		tp := reqs[i].Partition
		st := c.md.Partitions[tp]
		next := ops[k].(SetPartition).State
		next.PartitionEpoch = st.PartitionEpoch + 1
		next.ControllerEpoch = c.Epoch()
		c.md.Partitions[tp] = next
		c.log.Info("ISR changed", "partition", tp, "from", st.ISR, "to", next.ISR)
		res[i] = AlterPartitionResult{State: next}
		changed = append(changed, tp)
	}
	c.propagate(changed, nil)
	return res
}

// checkAlterPartition validates one ISR change against the current state
// and returns the state to commit (with the current partition epoch, which
// the commit expects), or the current state and why the change is
// refused.
func (c *Controller) checkAlterPartition(req AlterPartitionRequest) (PartitionState, error) {
	if b, ok := c.live[req.BrokerID]; !ok || (req.BrokerEpoch >= 0 && b.Epoch != req.BrokerEpoch) {
		return PartitionState{}, fmt.Errorf("%w: broker %d epoch %d", ErrStaleBrokerEpoch, req.BrokerID, req.BrokerEpoch)
	}
	st, ok := c.md.Partitions[req.Partition]
	if !ok {
		return PartitionState{}, fmt.Errorf("%w: partition %s", ErrNotFound, req.Partition)
	}
	if st.Leader != req.BrokerID || st.LeaderEpoch != req.LeaderEpoch {
		return st, fmt.Errorf("%w: partition %s: leader %d epoch %d, request from %d at epoch %d",
			ErrFencedLeaderEpoch, req.Partition, st.Leader, st.LeaderEpoch, req.BrokerID, req.LeaderEpoch)
	}
	if st.PartitionEpoch != req.PartitionEpoch {
		return st, fmt.Errorf("%w: partition %s: epoch %d, request based on %d", ErrInvalidUpdateVersion, req.Partition, st.PartitionEpoch, req.PartitionEpoch)
	}
	replicas := c.md.Topics[req.Partition.Topic].Assignment[req.Partition.Partition]
	if !slices.Contains(req.ISR, req.BrokerID) {
		return st, fmt.Errorf("%w: partition %s: the ISR must hold its leader %d", ErrIneligibleReplica, req.Partition, req.BrokerID)
	}
	isr := make([]BrokerID, 0, len(req.ISR))
	for _, id := range replicas { // keep assignment order
		if !slices.Contains(req.ISR, id) {
			continue
		}
		if !slices.Contains(st.ISR, id) && !c.online(req.Partition)(id) {
			return st, fmt.Errorf("%w: partition %s: broker %d is not live or its replica is offline", ErrIneligibleReplica, req.Partition, id)
		}
		isr = append(isr, id)
	}
	if len(isr) != len(req.ISR) {
		return st, fmt.Errorf("%w: partition %s: ISR %v names unassigned replicas (%v)", ErrIneligibleReplica, req.Partition, req.ISR, replicas)
	}
	next := st
	next.ISR = isr
	return next, nil
}

func (c *Controller) commitErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrUnavailable
}

// ControlledShutdown moves every leadership off a broker that is about to
// stop, to another live ISR member, and removes it from every ISR. It
// returns the partitions it still leads (those with no other live ISR
// member); the broker retries while that is not empty. Errors:
// ErrStaleBrokerEpoch, ErrNotController, backend errors.
func (c *Controller) ControlledShutdown(ctx context.Context, id BrokerID, brokerEpoch int64) ([]TopicPartition, error) {
	var remaining []TopicPartition
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) { remaining, err = c.controlledShutdown(runCtx, id, brokerEpoch) }); doErr != nil {
		return nil, doErr
	}
	return remaining, err
}

func (c *Controller) controlledShutdown(ctx context.Context, id BrokerID, brokerEpoch int64) ([]TopicPartition, error) {
	if b, ok := c.live[id]; !ok || (brokerEpoch >= 0 && b.Epoch != brokerEpoch) {
		return nil, fmt.Errorf("%w: broker %d epoch %d", ErrStaleBrokerEpoch, id, brokerEpoch)
	}
	c.shuttingDown[id] = true
	var ops []Op
	for _, tp := range c.sortedPartitions() {
		st := c.md.Partitions[tp]
		assignment := c.md.Topics[tp.Topic].Assignment[tp.Partition]
		if !slices.Contains(assignment, id) {
			continue
		}
		next := st
		if st.Leader == id {
			e, ok := ElectForShutdown(assignment, st.ISR, c.online(tp), id)
			if !ok {
				continue
			}
			next.Leader, next.ISR, next.LeaderEpoch = e.Leader, e.ISR, st.LeaderEpoch+1
		} else if slices.Contains(st.ISR, id) && len(st.ISR) > 1 {
			next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(r BrokerID) bool { return r == id })
		} else {
			continue
		}
		ops = append(ops, SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})
	}
	if !c.commitStates(ctx, ops) {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", id, c.commitErr())
	}
	var remaining []TopicPartition
	for _, tp := range c.sortedPartitions() {
		if c.md.Partitions[tp].Leader == id {
			remaining = append(remaining, tp)
		}
	}
	c.log.Info("controlled shutdown", "broker", id, "moved", len(ops), "remaining", len(remaining))
	return remaining, nil
}

// ElectLeaders runs preferred (preferred true) or unclean elections for
// the given partitions (all partitions when nil), as Kafka's ElectLeaders
// API. It returns one result per partition: nil, ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable or
// ErrNotFound. The error is for the call as a whole.
func (c *Controller) ElectLeaders(ctx context.Context, preferred bool, partitions []TopicPartition) (map[TopicPartition]error, error) {
	var results map[TopicPartition]error
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) { results, err = c.electLeaders(runCtx, preferred, partitions) }); doErr != nil {
		return nil, doErr
	}
	return results, err
}

func (c *Controller) electLeaders(ctx context.Context, preferred bool, partitions []TopicPartition) (map[TopicPartition]error, error) {
	if partitions == nil {
		partitions = c.sortedPartitions()
	}
	results := make(map[TopicPartition]error, len(partitions))
	var ops []Op
	for _, tp := range partitions {
		st, ok := c.md.Partitions[tp]
		if !ok {
			results[tp] = fmt.Errorf("%w: partition %s", ErrNotFound, tp)
			continue
		}
		assignment := c.md.Topics[tp.Topic].Assignment[tp.Partition]
		next := st
		if preferred {
			if len(assignment) > 0 && st.Leader == assignment[0] {
				results[tp] = ErrElectionNotNeeded
				continue
			}
			leader, ok := ElectPreferred(assignment, st.ISR, c.online(tp))
			if !ok {
				results[tp] = ErrPreferredLeaderNotAvailable
				continue
			}
			next.Leader = leader
		} else {
			if st.Leader != NoBroker && c.online(tp)(st.Leader) {
				results[tp] = ErrElectionNotNeeded
				continue
			}
			e := ElectLeader(assignment, st.ISR, c.online(tp), true)
			if e.Leader == NoBroker {
				results[tp] = ErrEligibleLeadersNotAvailable
				continue
			}
			next.Leader, next.ISR = e.Leader, e.ISR
		}
		next.LeaderEpoch = st.LeaderEpoch + 1
		ops = append(ops, SetPartition{State: next, ExpectedEpoch: st.PartitionEpoch})
		results[tp] = nil
	}
	if !c.commitStates(ctx, ops) {
		return nil, fmt.Errorf("elect leaders: %w", c.commitErr())
	}
	return results, nil
}

// rebalance moves leadership back to preferred replicas for every broker
// that fails to lead more than LeaderImbalancePerBrokerPercentage of the
// partitions it is preferred for (auto.leader.rebalance.enable).
func (c *Controller) rebalance(ctx context.Context) {
	preferredOf := map[BrokerID][]TopicPartition{}
	notLed := map[BrokerID]int{}
	for _, tp := range c.sortedPartitions() {
		assignment := c.md.Topics[tp.Topic].Assignment[tp.Partition]
		if len(assignment) == 0 {
			continue
		}
		p := assignment[0]
		preferredOf[p] = append(preferredOf[p], tp)
		if c.md.Partitions[tp].Leader != p {
			notLed[p]++
		}
	}
	var candidates []TopicPartition
	for id, tps := range preferredOf {
		if !c.isLive(id) || notLed[id] == 0 {
			continue
		}
		if notLed[id]*100 > c.cfg.LeaderImbalancePerBrokerPercentage*len(tps) {
			for _, tp := range tps {
				if c.md.Partitions[tp].Leader != id {
					candidates = append(candidates, tp)
				}
			}
		}
	}
	if len(candidates) == 0 {
		return
	}
	c.log.Info("preferred leader rebalance", "partitions", len(candidates))
	if _, err := c.electLeaders(ctx, true, candidates); err != nil {
		c.log.Warn("preferred leader rebalance failed", "error", err)
	}
}

// Snapshot returns a copy of the controller's view of the metadata and the
// live brokers (for tests and describe tools).
func (c *Controller) Snapshot(ctx context.Context) (*Metadata, []Broker, error) {
	var md *Metadata
	var live []Broker
	err := c.do(ctx, func(context.Context) {
		md = NewMetadata()
		md.Version = c.md.Version
		for n, t := range c.md.Topics {
			md.Topics[n] = t
		}
		for tp, st := range c.md.Partitions {
			md.Partitions[tp] = st
		}
		live = c.liveBrokers()
	})
	return md, live, err
}

// ReplicasOffline implements Results: the replicas of partitions on
// broker are offline (it answered KAFKA_STORAGE_ERROR). They leave their
// ISRs and lose their leaderships to other live ISR members (R11 without
// them), and are not elected again until the broker restarts. A report
// from another incarnation of the broker than the live one is ignored.
func (c *Controller) ReplicasOffline(ctx context.Context, broker Broker, partitions []TopicPartition) error {
	return c.do(ctx, func(runCtx context.Context) { c.replicasOffline(runCtx, broker, partitions) })
}

func (c *Controller) replicasOffline(ctx context.Context, broker Broker, partitions []TopicPartition) {
	if b, ok := c.live[broker.ID]; !ok || b.Epoch != broker.Epoch {
		c.log.Debug("offline replicas of a broker not live ignored", "broker", broker.ID, "broker_epoch", broker.Epoch)
		return
	}
	var added []TopicPartition
	for _, tp := range partitions {
		if _, ok := c.md.Partitions[tp]; !ok || c.offline[broker.ID][tp] {
			continue
		}
		if c.offline[broker.ID] == nil {
			c.offline[broker.ID] = map[TopicPartition]bool{}
		}
		c.offline[broker.ID][tp] = true
		added = append(added, tp)
	}
	if len(added) == 0 {
		return
	}
	c.log.Warn("replicas offline: moving their leaderships and leaving them out of ISRs", "broker", broker.ID, "partitions", added)
	c.reconcile(ctx, nil)
}

// Deposed implements Results: broker refused this controller's epoch as
// stale, so a newer controller exists and this one stops as a fenced
// commit stops it (its owner then resigns the term). A report for another
// epoch than this controller's is ignored.
func (c *Controller) Deposed(ctx context.Context, broker BrokerID, epoch int64) error {
	return c.do(ctx, func(context.Context) {
		if epoch != c.Epoch() {
			return
		}
		c.log.Warn("controller deposed: a broker has accepted a newer controller epoch", "broker", broker)
		c.stop(fmt.Errorf("%w: broker %d refused controller epoch %d as stale", ErrFenced, broker, epoch))
	})
}

// LogDirFailure handles a broker's report that one of its log dirs went
// offline (Kafka's log dir event notification): the controller sends that
// broker a LeaderAndIsr for every replica it holds that is not known to
// be offline, and learns which are offline from the answers
// (KAFKA_STORAGE_ERROR, reported through ReplicasOffline). Errors:
// ErrStaleBrokerEpoch for a report from another incarnation than the live
// one, ErrNotController, ctx.Err().
func (c *Controller) LogDirFailure(ctx context.Context, id BrokerID, brokerEpoch int64) error {
	var err error
	if doErr := c.do(ctx, func(context.Context) { err = c.logDirFailure(id, brokerEpoch) }); doErr != nil {
		return doErr
	}
	return err
}

func (c *Controller) logDirFailure(id BrokerID, brokerEpoch int64) error {
	b, ok := c.live[id]
	if !ok || (brokerEpoch >= 0 && b.Epoch != brokerEpoch) {
		return fmt.Errorf("%w: broker %d epoch %d", ErrStaleBrokerEpoch, id, brokerEpoch)
	}
	var mine []PartitionInfo
	for _, tp := range c.sortedPartitions() {
		info := c.info(tp)
		if slices.Contains(info.Replicas, id) && !c.offline[id][tp] {
			mine = append(mine, info)
		}
	}
	c.log.Warn("log dir failure reported: asking the broker for its replicas' state", "broker", id, "partitions", len(mine))
	if len(mine) > 0 {
		c.cfg.Sender.Send(b, &LeaderAndIsrRequest{
			ControllerID: c.cfg.Term.Controller(), ControllerEpoch: c.Epoch(), BrokerEpoch: b.Epoch,
			Partitions: mine, Leaders: c.liveBrokers(),
		})
	}
	return nil
}
