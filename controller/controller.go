package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
)

// Store is what the controller needs of a coordination backend: the
// metadata it loads and commits, and the live brokers. Every
// coord.Backend is one.
type Store interface {
	coord.MetadataStore
	// WatchMembers is coord.Registrar's.
	WatchMembers(ctx context.Context) (<-chan []coord.Broker, error)
}

// Controller is the cluster's one controller, for the duration of one
// Term: the actor that carries out the decisions of its State. All that
// state is owned by one goroutine (run); the exported methods hand work
// to it and wait, so decisions are taken one at a time in the order they
// arrive, as Kafka's controller event queue does.
//
// Every plan is carried out by execute, and every commit goes through
// commit, which handles each failure one way: a fenced commit
// (coord.ErrFenced) stops the controller; any other failure reloads the
// metadata at once (the failed commit's first chunks may have been
// applied) and tells the brokers what those chunks changed
// (State.Reload), answers the request that caused it with an error
// wrapping coord.ErrUnavailable and the backend's error, and after
// RetryBackoff reloads again if that reload failed, then reconciles. No
// decision is taken on metadata known to be behind the backend: while a
// reload is owed, requests fail with coord.ErrUnavailable.
type Controller struct {
	cfg    Config
	store  Store
	term   coord.Term
	sender Sender
	log    hclog.Logger
	work   chan func(context.Context)
	done   chan struct{}

	errMu sync.Mutex
	err   error

	// Owned by run.
	state *State
	// stale is set when a commit failed and the metadata could not be
	// reloaded since.
	stale bool
	retry *time.Timer
	// loaded is how long Start's Load took.
	loaded time.Duration
}

// Start loads the metadata and starts the controller for term, which
// commits through store and sends through sender: it elects leaders for
// partitions whose leader is not live, drops dead brokers from ISRs, and
// sends every live broker its state. It returns once the metadata and the
// first set of live brokers are loaded; the controller then runs until
// the term ends. Errors: cfg's Validate's, those of Load and
// WatchMembers, ErrNotController if the term ends first, ctx.Err().
func Start(ctx context.Context, cfg Config, store Store, term coord.Term, sender Sender) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("controller config: %w", err)
	}
	if store == nil || term == nil || sender == nil {
		return nil, errors.New("controller: start needs a store, a term and a sender")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	loadStart := time.Now()
	md, err := store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("controller: load metadata: %w", err)
	}
	loaded := time.Since(loadStart)
	termCtx := term.Context()
	members, err := store.WatchMembers(termCtx)
	if err != nil {
		return nil, fmt.Errorf("controller: watch members: %w", err)
	}
	// The first member set is taken before the controller serves anything,
	// so no request (a CreateTopics, say) is decided on an empty live set.
	var first []coord.Broker
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
	// Brokers already crashed are fenced in the first plan: a term that
	// starts because the previous controller's broker crashed then moves
	// its partitions at once.
	var crashed []coord.Broker
	if cfg.Crashed != nil {
		crashed = cfg.Crashed(ctx, first)
	}
	log := cfg.Logger.Named("controller").With("epoch", term.Epoch())
	c := &Controller{
		cfg:    cfg,
		store:  store,
		term:   term,
		sender: sender,
		log:    log,
		work:   make(chan func(context.Context)),
		done:   make(chan struct{}),
		state:  NewState(term.Controller(), term.Epoch(), md, cfg.policy(), log),
		retry:  time.NewTimer(time.Hour),
	}
	c.retry.Stop()
	c.loaded = loaded
	c.state.Crashed(crashed)
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
func (c *Controller) Epoch() int64 { return c.term.Epoch() }

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
		// f may have finished just before the controller stopped (a
		// fenced commit stops it): its outcome is the answer.
		select {
		case <-finished:
			return nil
		default:
			return ErrNotController
		}
	}
}

// decide runs decision on the controller's goroutine, on metadata that is
// not known to be stale, and carries out the plan it returns.
func (c *Controller) decide(ctx context.Context, decision func() (Plan, error)) error {
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) {
		if err = c.freshen(runCtx); err != nil {
			return
		}
		var plan Plan
		if plan, err = decision(); err != nil {
			return
		}
		err = c.execute(runCtx, plan)
	}); doErr != nil {
		return doErr
	}
	return err
}

func (c *Controller) run(ctx context.Context, initial []coord.Broker, members <-chan []coord.Broker) {
	defer close(c.done)
	defer c.stop(ErrNotController)
	defer c.retry.Stop()
	rebalance := time.NewTicker(c.cfg.LeaderImbalanceCheckInterval)
	defer rebalance.Stop()
	md := c.state.Metadata()
	c.log.Info("controller started", "topics", len(md.Topics), "partitions", len(md.Partitions), "brokers", len(initial),
		"load_took", c.loaded.Round(time.Millisecond))
	c.onMembers(ctx, initial)
	for {
		select {
		case <-ctx.Done():
			c.log.Info("controller stopped: term ended")
			return
		case brokers, ok := <-members:
			if !ok {
				return
			}
			c.onMembers(ctx, brokers)
		case f := <-c.work:
			f(ctx)
		case <-c.retry.C:
			if c.freshen(ctx) == nil {
				c.executeLogged(ctx, "reconcile after a failed commit", c.state.Reconcile())
			}
		case <-rebalance.C:
			if c.cfg.AutoLeaderRebalance && c.freshen(ctx) == nil {
				c.executeLogged(ctx, "preferred leader rebalance", c.state.Rebalance())
			}
		}
		if err := c.Err(); err != nil && !errors.Is(err, ErrNotController) {
			return
		}
	}
}

// onMembers handles a new set of live brokers.
func (c *Controller) onMembers(ctx context.Context, brokers []coord.Broker) {
	// Facts about brokers are recorded even on stale metadata; the
	// commits the plan asks for then fail and are retried after the
	// reload.
	_ = c.freshen(ctx)
	c.executeLogged(ctx, "membership change", c.state.Members(brokers))
}

// execute carries out plan, step by step (see Plan), and returns the
// error of the commit that failed, after which nothing more is done.
func (c *Controller) execute(ctx context.Context, plan Plan) error {
	for _, step := range plan.Steps {
		for _, id := range step.Drops {
			c.sender.Drop(id)
		}
		if len(step.Ops) > 0 {
			if err := c.commit(ctx, step.Ops); err != nil {
				return err
			}
			c.log.Info("metadata committed", "ops", len(step.Ops))
		}
		c.state.Committed(step)
		for _, m := range step.Messages {
			c.sender.Send(m.To, m.Request)
		}
	}
	return nil
}

// executeLogged is execute for plans no caller waits for.
func (c *Controller) executeLogged(ctx context.Context, what string, plan Plan) {
	if err := c.execute(ctx, plan); err != nil {
		c.log.Warn(what+" not carried out", "error", err)
	}
}

// commit writes ops through the backend under the controller's term. It
// is the controller's one commit path; see Controller for how it handles
// a failure.
func (c *Controller) commit(ctx context.Context, ops []coord.Op) error {
	err := c.store.Commit(ctx, c.term, ops...)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, coord.ErrFenced):
		c.log.Warn("controller fenced: a newer controller exists", "error", err)
		c.stop(err)
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w: term ended during a commit: %w", ErrNotController, err)
	case errors.Is(err, coord.ErrTooLarge):
		// Refused before anything was written: the metadata is as it
		// was, and the request that asked for it fails.
		c.log.Warn("commit refused by the backend: too large", "ops", len(ops), "error", err)
		return err
	}
	if errors.Is(err, coord.ErrMigrated) {
		// The cluster is moving to another coordination backend: this
		// term ends at the switch and the target's controller reconciles
		// what is left; until then the commit is retried.
		c.log.Info("commit refused while the cluster migrates to another coordination backend; retrying after the backoff", "ops", len(ops), "backoff", c.cfg.RetryBackoff)
	} else {
		c.log.Warn("commit failed; reloading the metadata, reconciling again after the backoff", "ops", len(ops), "error", err, "backoff", c.cfg.RetryBackoff)
	}
	c.reload(ctx)
	c.retry.Reset(c.cfg.RetryBackoff)
	return fmt.Errorf("%w: commit of %d ops failed, metadata reloaded: %w", coord.ErrUnavailable, len(ops), err)
}

// reload replaces the metadata with the backend's; when the backend
// cannot be read, the metadata stays marked stale and the retry timer
// tries again.
func (c *Controller) reload(ctx context.Context) {
	md, err := c.store.Load(ctx)
	if err != nil {
		c.log.Warn("reload failed; retrying after the backoff", "error", err, "backoff", c.cfg.RetryBackoff)
		c.stale = true
		c.retry.Reset(c.cfg.RetryBackoff)
		return
	}
	c.stale = false
	told := c.state.Reload(md)
	for _, line := range c.state.IncompleteTopics() {
		c.log.Warn("a topic change was cut off midway: retry the CreateTopics, CreatePartitions or DeleteTopics", "detail", line)
	}
	// Reload's plan has no ops: it only sends.
	_ = c.execute(ctx, told)
}

// freshen reloads the metadata if a reload is owed, and fails with
// coord.ErrUnavailable if it still is.
func (c *Controller) freshen(ctx context.Context) error {
	if !c.stale {
		return nil
	}
	c.reload(ctx)
	if c.stale {
		return fmt.Errorf("%w: metadata not reloaded since a commit failed", coord.ErrUnavailable)
	}
	return nil
}

// seed draws the randomness of a decision.
func seed() Seed {
	s := Seed{Start: mrand.Int(), Shift: mrand.Int()}
	rand.Read(s.TopicID[:]) // never fails (crypto/rand, Go 1.24+)
	return s
}

// CreateTopic creates a topic (State.CreateTopic) and returns it once it
// is committed. Errors: coord.ErrExists, ErrInvalidReplicationFactor,
// ErrInvalidPartitions, ErrInvalidReplicaAssignment, ErrPartitionLimit,
// ErrNotController, commit errors.
func (c *Controller) CreateTopic(ctx context.Context, spec TopicSpec) (coord.Topic, error) {
	var topic coord.Topic
	err := c.decide(ctx, func() (Plan, error) {
		plan, t, err := c.state.CreateTopic(spec, seed())
		topic = t
		return plan, err
	})
	if err != nil {
		return coord.Topic{}, err
	}
	if !spec.ValidateOnly {
		c.log.Info("topic created", "topic", topic.Name, "partitions", topic.Partitions())
	}
	return topic, nil
}

// CreatePartitions grows a topic to total partitions
// (State.CreatePartitions). Errors: coord.ErrNotFound,
// ErrInvalidPartitions, ErrInvalidReplicaAssignment, ErrPartitionLimit,
// ErrInvalidReplicationFactor, ErrNotController, commit errors.
func (c *Controller) CreatePartitions(ctx context.Context, name string, total int, assignment [][]coord.BrokerID, validateOnly bool) error {
	return c.decide(ctx, func() (Plan, error) {
		return c.state.CreatePartitions(name, total, assignment, validateOnly, seed())
	})
}

// DeleteTopic deletes a topic: its metadata, then its replicas' logs
// (StopReplica with delete). Errors: coord.ErrNotFound, ErrNotController,
// commit errors.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	err := c.decide(ctx, func() (Plan, error) { return c.state.DeleteTopic(name) })
	if err == nil {
		c.log.Info("topic deleted", "topic", name)
	}
	return err
}

// AlterPartition changes a partition's ISR at its leader's request
// (State.AlterPartitions) and returns the committed state. Errors:
// ErrStaleBrokerEpoch, coord.ErrNotFound, ErrFencedLeaderEpoch,
// ErrInvalidUpdateVersion, ErrIneligibleReplica, ErrNotController, commit
// errors.
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartitionRequest) (coord.PartitionState, error) {
	res, err := c.AlterPartitions(ctx, []AlterPartitionRequest{req})
	if err != nil {
		return coord.PartitionState{}, err
	}
	return res[0].State, res[0].Err
}

// AlterPartitions is AlterPartition for many partitions at once, all
// valid changes in one Commit. The results are in the order of reqs; when
// the commit fails, every valid change's result holds the commit's error
// and the partition's state as reloaded. The error is for the whole call
// (ErrNotController, or coord.ErrUnavailable while the metadata cannot be
// reloaded).
func (c *Controller) AlterPartitions(ctx context.Context, reqs []AlterPartitionRequest) ([]AlterPartitionResult, error) {
	var res []AlterPartitionResult
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) {
		if err = c.freshen(runCtx); err != nil {
			return
		}
		var plan Plan
		plan, res = c.state.AlterPartitions(reqs)
		if cerr := c.execute(runCtx, plan); cerr != nil {
			for i, r := range res {
				if r.Err == nil {
					tp := reqs[i].Partition
					res[i] = AlterPartitionResult{State: c.state.Metadata().Partitions[tp],
						Err: fmt.Errorf("partition %s: commit of ISR %v failed: %w", tp, reqs[i].ISR, cerr)}
				}
			}
		}
	}); doErr != nil {
		return nil, doErr
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ControlledShutdown moves every leadership off a broker that is about to
// stop (State.ControlledShutdown) and returns the partitions it still
// leads (those with no other live ISR member); the broker retries while
// that is not empty. Errors: ErrStaleBrokerEpoch, ErrNotController,
// commit errors.
func (c *Controller) ControlledShutdown(ctx context.Context, id coord.BrokerID, brokerEpoch int64) ([]coord.TopicPartition, error) {
	var remaining []coord.TopicPartition
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) {
		if err = c.freshen(runCtx); err != nil {
			return
		}
		var plan Plan
		if plan, err = c.state.ControlledShutdown(id, brokerEpoch); err != nil {
			return
		}
		if err = c.execute(runCtx, plan); err != nil {
			return
		}
		remaining = c.state.LedBy(id)
	}); doErr != nil {
		return nil, doErr
	}
	if err != nil {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", id, err)
	}
	c.log.Info("controlled shutdown", "broker", id, "remaining", len(remaining))
	return remaining, nil
}

// ElectLeaders runs preferred (preferred true) or unclean elections for
// the given partitions, all when nil (State.ElectLeaders), and returns
// one result per partition. The error is for the call as a whole.
func (c *Controller) ElectLeaders(ctx context.Context, preferred bool, partitions []coord.TopicPartition) (map[coord.TopicPartition]error, error) {
	var results map[coord.TopicPartition]error
	err := c.decide(ctx, func() (Plan, error) {
		plan, r := c.state.ElectLeaders(preferred, partitions)
		results = r
		return plan, nil
	})
	if err != nil {
		return nil, fmt.Errorf("elect leaders: %w", err)
	}
	return results, nil
}

// AlterReassignments starts, replaces or cancels partition
// reassignments (State.AlterReassignments) and returns one error per
// request, in order, once the accepted ones are committed. When the
// commit fails, every accepted request's error is the commit's. The error
// is for the call as a whole (ErrNotController, coord.ErrUnavailable
// while the metadata cannot be reloaded).
func (c *Controller) AlterReassignments(ctx context.Context, reqs []Reassignment) ([]error, error) {
	var errs []error
	var err error
	if doErr := c.do(ctx, func(runCtx context.Context) {
		if err = c.freshen(runCtx); err != nil {
			return
		}
		var plan Plan
		plan, errs = c.state.AlterReassignments(reqs)
		if cerr := c.execute(runCtx, plan); cerr != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("partition %s: reassignment not committed: %w", reqs[i].Partition, cerr)
				}
			}
		}
	}); doErr != nil {
		return nil, doErr
	}
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// Reassignments returns the partition reassignments in progress among
// tps, all when nil (State.Reassignments).
func (c *Controller) Reassignments(ctx context.Context, tps []coord.TopicPartition) ([]OngoingReassignment, error) {
	var out []OngoingReassignment
	err := c.do(ctx, func(context.Context) { out = c.state.Reassignments(tps) })
	return out, err
}

// BrokerUnreachable handles a refused connection to broker's listener
// (State.Unreachable). A failure to commit what follows is logged and
// retried, not returned.
func (c *Controller) BrokerUnreachable(ctx context.Context, broker coord.Broker) error {
	return c.do(ctx, func(runCtx context.Context) {
		_ = c.freshen(runCtx)
		c.executeLogged(runCtx, "unreachable broker", c.state.Unreachable(broker))
	})
}

// BrokerReachable handles an unreachable broker answering again
// (State.Reachable).
func (c *Controller) BrokerReachable(ctx context.Context, broker coord.Broker) error {
	return c.do(ctx, func(runCtx context.Context) {
		_ = c.freshen(runCtx)
		c.executeLogged(runCtx, "reachable broker", c.state.Reachable(broker))
	})
}

// LogDirFailure handles a broker's report that one of its log dirs went
// offline (State.LogDirFailure). Errors: ErrStaleBrokerEpoch for a report
// from another incarnation than the live one, ErrNotController,
// ctx.Err().
func (c *Controller) LogDirFailure(ctx context.Context, id coord.BrokerID, brokerEpoch int64) error {
	return c.decide(ctx, func() (Plan, error) { return c.state.LogDirFailure(id, brokerEpoch) })
}

// ReplicasOffline implements Results (State.ReplicasOffline). A failure
// to commit what follows is logged and retried, not returned.
func (c *Controller) ReplicasOffline(ctx context.Context, broker coord.Broker, partitions []coord.TopicPartition) error {
	return c.do(ctx, func(runCtx context.Context) {
		_ = c.freshen(runCtx)
		c.executeLogged(runCtx, "offline replicas", c.state.ReplicasOffline(broker, partitions))
	})
}

// Deposed implements Results: broker refused this controller's epoch as
// stale, so a newer controller exists and this one stops as a fenced
// commit stops it (its owner then resigns the term). A report for another
// epoch than this controller's is ignored.
func (c *Controller) Deposed(ctx context.Context, broker coord.BrokerID, epoch int64) error {
	return c.do(ctx, func(context.Context) {
		if epoch != c.Epoch() {
			return
		}
		c.log.Warn("controller deposed: a broker has accepted a newer controller epoch", "broker", broker)
		c.stop(fmt.Errorf("%w: broker %d refused controller epoch %d as stale", coord.ErrFenced, broker, epoch))
	})
}

// Snapshot returns a copy of the controller's view of the metadata and the
// live brokers (for tests and describe tools).
func (c *Controller) Snapshot(ctx context.Context) (*coord.Metadata, []coord.Broker, error) {
	var md *coord.Metadata
	var live []coord.Broker
	err := c.do(ctx, func(context.Context) {
		cur := c.state.Metadata()
		md = coord.NewMetadata()
		md.Version, md.PartitionBase = cur.Version, cur.PartitionBase
		for n, t := range cur.Topics {
			md.Topics[n] = t
		}
		for tp, st := range cur.Partitions {
			md.Partitions[tp] = st
		}
		live = c.state.LiveBrokers()
	})
	return md, live, err
}

// AlterTopicConfigs changes a topic's configs (State.AlterTopicConfigs)
// and returns them as committed (or, validating only, as they would
// become). Errors: coord.ErrNotFound, ErrInvalidConfig, ErrNotController,
// commit errors.
func (c *Controller) AlterTopicConfigs(ctx context.Context, a TopicConfigsAlteration) (map[string]string, error) {
	var configs map[string]string
	err := c.decide(ctx, func() (Plan, error) {
		plan, next, err := c.state.AlterTopicConfigs(a)
		configs = next
		return plan, err
	})
	if err != nil {
		return nil, err
	}
	if !a.ValidateOnly {
		c.log.Info("topic configs altered", "topic", a.Topic, "configs", configs)
	}
	return configs, nil
}
