package replication

import (
	"fmt"
	"slices"
	"time"

	"github.com/tripodmq/tripod/replication/log"
)

// ReplicaID is a broker id as replication sees it; the broker converts it
// to and from coord.BrokerID.
type ReplicaID int32

// NoReplica is the leader of a partition without one.
const NoReplica ReplicaID = -1

// Role is what a replica is for its partition.
type Role int

const (
	// RoleNone is a replica that has not yet been told its role.
	RoleNone Role = iota
	// RoleLeader is the partition's leader.
	RoleLeader
	// RoleFollower fetches from the leader.
	RoleFollower
)

// String names the role.
func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// State is a partition's state as the controller commits it and sends it
// in LeaderAndIsr.
type State struct {
	// Leader is the leader replica, or NoReplica.
	Leader ReplicaID
	// LeaderEpoch grows by one at every leader change.
	LeaderEpoch int32
	// PartitionEpoch grows by one at every write of the state.
	PartitionEpoch int32
	// Replicas is the assignment, in preference order.
	Replicas []ReplicaID
	// ISR is the in-sync replica set.
	ISR []ReplicaID
}

// Proposal is an ISR change the leader asks the controller for
// (controller.AlterPartitionRequest).
type Proposal struct {
	// LeaderEpoch is the leader's epoch, which the controller checks.
	LeaderEpoch int32
	// PartitionEpoch is the partition epoch the change is based on.
	PartitionEpoch int32
	// ISR is the whole proposed ISR, in assignment order.
	ISR []ReplicaID
}

// AckID names a pending acks=all produce; the broker chooses it.
type AckID uint64

// AckResult is the outcome of a pending acks=all produce.
type AckResult struct {
	// ID is the id given to Await.
	ID AckID
	// Err is nil when every ISR member has the batch, else
	// ErrRequestTimedOut, ErrNotEnoughReplicasAfterAppend or ErrNotLeader.
	Err error
}

// Ready is what the state machine decided since the last Ready call, for
// the broker to act on.
type Ready struct {
	// HighWatermark is the replica's HW.
	HighWatermark int64
	// HighWatermarkChanged says HighWatermark differs from the one in the
	// previous Ready: checkpoint it and wake waiting fetches.
	HighWatermarkChanged bool
	// Proposal, when not nil, is an AlterPartition to send to the
	// controller; its outcome goes to AlterPartitionDone.
	Proposal *Proposal
	// Acks are the acks=all produces that completed or failed.
	Acks []AckResult
	// Deletes are the DeleteRecords waits that completed or failed.
	Deletes []DeleteResult
}

// AlterRetryBackoff is how long a leader waits after an AlterPartition
// the controller refused before it proposes again: without it every
// fetch of a follower the controller does not count as live (one
// re-registering) would send another AlterPartition.
const AlterRetryBackoff = 100 * time.Millisecond

// AlterOutcome is how an AlterPartition that did not commit failed.
type AlterOutcome int

const (
	// AlterRetry clears the proposal so that a Tick or fetch from
	// AlterRetryBackoff on proposes again (controller unavailable,
	// moved, request timed out, ineligible replica).
	AlterRetry AlterOutcome = iota
	// AlterAwaitLeaderAndIsr keeps the proposal in flight, blocking ISR
	// changes, until the controller's next LeaderAndIsr (fenced leader
	// epoch, invalid update version, unknown partition): the leader's
	// state is stale and only the controller knows the current one.
	AlterAwaitLeaderAndIsr
)

// follower is the leader's view of one follower.
type follower struct {
	// logEnd is the follower's LEO as its last fetch offset reported it;
	// -1 until it fetches.
	logEnd int64
	// lastCaughtUp is the last time the follower was caught up
	// (Kafka's lastCaughtUpTimeMs).
	lastCaughtUp time.Time
	// lastFetchLeaderLogEnd is the leader's LEO at the follower's
	// previous fetch, or when the leader took its epoch (Kafka's
	// resetReplicaState).
	lastFetchLeaderLogEnd int64
	// lastFetch is the time of the follower's previous fetch; zero before
	// the first, which thus earns no catch-up time.
	lastFetch time.Time
	// logStart is the follower's log start offset as its last fetch
	// reported it; -1 until it reports one.
	logStart int64
}

// pendingAck is an acks=all produce waiting for the HW.
type pendingAck struct {
	id         AckID
	lastOffset int64
	deadline   time.Time
}

// Partition is the replication state machine of one partition on one
// replica. It is not safe for concurrent use: the broker serializes calls.
type Partition struct {
	cfg  Config
	self ReplicaID
	role Role

	leader         ReplicaID
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []ReplicaID
	isr            []ReplicaID

	logEnd        int64
	highWatermark int64
	// logStart is the replica's own log start offset (SetLogStart).
	logStart int64

	// Leader only.
	epochStart int64
	followers  map[ReplicaID]*follower
	inFlight   *Proposal
	// alterRetryAt is when a proposal the controller refused may be
	// made again (AlterRetryBackoff).
	alterRetryAt time.Time
	acks         []pendingAck
	deletes      []pendingDelete

	// Follower only: the local epochs and whether an OffsetForLeaderEpoch
	// answer is awaited.
	epochs     []log.EpochEntry
	truncating bool

	ready      Ready
	reportedHW int64
}

// New returns the state machine of a replica self that has not yet been
// told its role. cfg must be valid.
func New(cfg Config, self ReplicaID) (*Partition, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("replication config of replica %d: %w", self, err)
	}
	return &Partition{cfg: cfg, self: self, leader: NoReplica, leaderEpoch: -1, partitionEpoch: -1, reportedHW: -1}, nil
}

// SetConfig replaces the partition's config, as when its topic's configs
// change while it runs (min.insync.replicas): the acks=all produces
// checked from then on, and those still waiting, are judged by it. It
// refuses an invalid cfg and keeps the one it has.
func (p *Partition) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	p.cfg = cfg
	return nil
}

// Role returns the replica's role.
func (p *Partition) Role() Role { return p.role }

// Leader returns the leader the replica knows.
func (p *Partition) Leader() ReplicaID { return p.leader }

// LeaderEpoch returns the leader epoch the replica knows, -1 before the
// first LeaderAndIsr. The broker fences fetches and OffsetForLeaderEpoch
// requests with it.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// PartitionEpoch returns the partition epoch the replica knows.
func (p *Partition) PartitionEpoch() int32 { return p.partitionEpoch }

// Replicas returns the assignment, in preference order, as the latest
// LeaderAndIsr applied set it.
func (p *Partition) Replicas() []ReplicaID { return slices.Clone(p.replicas) }

// ISR returns the committed ISR.
func (p *Partition) ISR() []ReplicaID { return slices.Clone(p.isr) }

// MaximalISR returns the ISR the HW is computed over: the committed ISR
// plus the replicas an in-flight expansion adds (Kafka's maximalIsr).
func (p *Partition) MaximalISR() []ReplicaID {
	out := slices.Clone(p.isr)
	if p.inFlight != nil {
		for _, id := range p.inFlight.ISR {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// InFlight returns the AlterPartition awaiting its outcome, or nil.
func (p *Partition) InFlight() *Proposal {
	if p.inFlight == nil {
		return nil
	}
	c := *p.inFlight
	c.ISR = slices.Clone(c.ISR)
	return &c
}

// LogEnd returns the replica's own LEO as last reported to it.
func (p *Partition) LogEnd() int64 { return p.logEnd }

// HighWatermark returns the replica's HW: consumers read below it.
func (p *Partition) HighWatermark() int64 { return p.highWatermark }

// LeaderEpochStartOffset returns the leader's LEO when it became leader
// in its current epoch.
func (p *Partition) LeaderEpochStartOffset() int64 { return p.epochStart }

// FollowerLogEnd returns the leader's view of a follower's LEO, -1 if it
// has not fetched in this leader epoch; ok is false for an unknown replica.
func (p *Partition) FollowerLogEnd(id ReplicaID) (logEnd int64, ok bool) {
	f, ok := p.followers[id]
	if !ok {
		return -1, false
	}
	return f.logEnd, true
}

// FollowerLastCaughtUp returns the last time the leader saw a follower
// caught up (Kafka's lastCaughtUpTimeMs), zero if never in this leader
// epoch; ok is false for an unknown replica.
func (p *Partition) FollowerLastCaughtUp(id ReplicaID) (lastCaughtUp time.Time, ok bool) {
	f, ok := p.followers[id]
	if !ok {
		return time.Time{}, false
	}
	return f.lastCaughtUp, true
}

// NextDeadline returns the earliest deadline of the acks=all produces
// and DeleteRecords waiting, for the broker's timer; ok is false when none waits.
func (p *Partition) NextDeadline() (deadline time.Time, ok bool) {
	for _, a := range p.acks {
		if !ok || a.deadline.Before(deadline) {
			deadline, ok = a.deadline, true
		}
	}
	for _, d := range p.deletes {
		if !ok || d.deadline.Before(deadline) {
			deadline, ok = d.deadline, true
		}
	}
	return deadline, ok
}

// PendingAcks returns the number of acks=all produces waiting.
func (p *Partition) PendingAcks() int { return len(p.acks) }

// Ready returns what was decided since the previous call and clears it.
// The broker must act on it before the decisions it reports are relied on
// (send the proposal, answer the acks, checkpoint the HW).
func (p *Partition) Ready() Ready {
	rd := p.ready
	rd.HighWatermark = p.highWatermark
	rd.HighWatermarkChanged = p.highWatermark != p.reportedHW
	p.reportedHW = p.highWatermark
	p.ready = Ready{}
	return rd
}

// HasReady reports whether Ready has something to act on.
func (p *Partition) HasReady() bool {
	return p.ready.Proposal != nil || len(p.ready.Acks) > 0 || len(p.ready.Deletes) > 0 || p.highWatermark != p.reportedHW
}

// BecomeLeader applies a LeaderAndIsr that names this replica leader.
// logEnd is the local log's end offset and checkpointHW the HW from the
// checkpoint file (or the HW the replica had). A new leader epoch resets
// every follower's state, as Kafka's makeLeader does: ISR members count as
// caught up now, their LEOs are unknown until they fetch. The same leader
// epoch with a partition epoch at least the current one only updates the
// replicas and the ISR (an AlterPartition's result coming back). Errors:
// ErrStaleEpoch, and an error when st does not name this replica leader.
func (p *Partition) BecomeLeader(st State, logEnd, checkpointHW int64, now time.Time) error {
	if st.Leader != p.self {
		return fmt.Errorf("become leader of replica %d: the state names leader %d", p.self, st.Leader)
	}
	if st.LeaderEpoch < p.leaderEpoch || (st.LeaderEpoch == p.leaderEpoch && st.PartitionEpoch < p.partitionEpoch) {
		return fmt.Errorf("%w: replica %d at leader epoch %d partition epoch %d got leader epoch %d partition epoch %d",
			ErrStaleEpoch, p.self, p.leaderEpoch, p.partitionEpoch, st.LeaderEpoch, st.PartitionEpoch)
	}
	newEpoch := p.role != RoleLeader || st.LeaderEpoch != p.leaderEpoch
	p.leader = st.Leader
	p.leaderEpoch = st.LeaderEpoch
	p.partitionEpoch = st.PartitionEpoch
	p.replicas = slices.Clone(st.Replicas)
	p.isr = slices.Clone(st.ISR)
	p.inFlight = nil
	p.truncating = false
	p.epochs = nil
	if newEpoch {
		p.role = RoleLeader
		p.logEnd = logEnd
		p.highWatermark = min(checkpointHW, logEnd)
		p.epochStart = logEnd
		p.followers = make(map[ReplicaID]*follower)
	}
	for id := range p.followers {
		if !slices.Contains(p.replicas, id) {
			delete(p.followers, id)
		}
	}
	for _, id := range p.replicas {
		if id == p.self {
			continue
		}
		if _, ok := p.followers[id]; ok {
			continue
		}
		f := &follower{logEnd: -1, lastFetchLeaderLogEnd: p.logEnd, logStart: -1}
		if slices.Contains(p.isr, id) {
			f.lastCaughtUp = now
		}
		p.followers[id] = f
	}
	p.update(now, NoReplica)
	return nil
}

// BecomeFollower applies a LeaderAndIsr that names another replica leader
// (or none). logEnd, checkpointHW and epochs describe the local log. Any
// pending acks=all produce fails with ErrNotLeader. It returns where to
// truncate: by the checkpointed HW in hw mode; in epoch mode the first
// step of the OffsetForLeaderEpoch exchange (see Truncation). A replica
// already following the same leader epoch is not truncated again: it gets
// its log end, Done unless an OffsetForLeaderEpoch answer is still awaited
// (then ask again for Epoch). Errors: ErrStaleEpoch, and an error
// when st names this replica leader.
func (p *Partition) BecomeFollower(st State, logEnd, checkpointHW int64, epochs []log.EpochEntry) (Truncation, error) {
	if st.Leader == p.self {
		return Truncation{}, fmt.Errorf("become follower of replica %d: the state names it leader", p.self)
	}
	if st.LeaderEpoch < p.leaderEpoch || (st.LeaderEpoch == p.leaderEpoch && st.PartitionEpoch < p.partitionEpoch) {
		return Truncation{}, fmt.Errorf("%w: replica %d at leader epoch %d partition epoch %d got leader epoch %d partition epoch %d",
			ErrStaleEpoch, p.self, p.leaderEpoch, p.partitionEpoch, st.LeaderEpoch, st.PartitionEpoch)
	}
	sameEpoch := p.role == RoleFollower && st.LeaderEpoch == p.leaderEpoch && st.Leader == p.leader
	p.failAcks(ErrNotLeader)
	p.failDeletes(ErrNotLeader)
	p.role = RoleFollower
	p.leader = st.Leader
	p.leaderEpoch = st.LeaderEpoch
	p.partitionEpoch = st.PartitionEpoch
	p.replicas = slices.Clone(st.Replicas)
	p.isr = slices.Clone(st.ISR)
	p.inFlight = nil
	p.followers = nil
	p.epochStart = 0
	if sameEpoch {
		return Truncation{Offset: p.logEnd, Done: !p.truncating, Epoch: p.askedEpoch()}, nil
	}
	p.logEnd = logEnd
	p.highWatermark = min(checkpointHW, logEnd)
	p.epochs = slices.Clone(epochs)
	return p.startTruncation(), nil
}

// Appended records the leader's new log end offset after an append and
// may advance the HW (at once when the leader is alone in the ISR).
func (p *Partition) Appended(logEnd int64, now time.Time) error {
	if p.role != RoleLeader {
		return fmt.Errorf("%w: replica %d appended at %d", ErrNotLeader, p.self, logEnd)
	}
	p.logEnd = logEnd
	p.update(now, NoReplica)
	return nil
}

// CheckAcksAll says whether an acks=all produce may be appended: nil, or
// ErrNotLeader, or ErrNotEnoughReplicas when the committed ISR is smaller
// than min.insync.replicas (Kafka checks before the append).
func (p *Partition) CheckAcksAll() error {
	if p.role != RoleLeader {
		return fmt.Errorf("%w: replica %d", ErrNotLeader, p.self)
	}
	if len(p.isr) < p.cfg.MinInsyncReplicas {
		return fmt.Errorf("%w: ISR %v, min.insync.replicas %d", ErrNotEnoughReplicas, p.isr, p.cfg.MinInsyncReplicas)
	}
	return nil
}

// Await registers an appended acks=all produce whose last offset is
// lastOffset: it completes (in a Ready's Acks) when the HW passes
// lastOffset, and fails with ErrRequestTimedOut at deadline. If the HW
// already passed it, it completes at once. Errors: ErrNotLeader.
func (p *Partition) Await(id AckID, lastOffset int64, deadline, now time.Time) error {
	if p.role != RoleLeader {
		return fmt.Errorf("%w: replica %d awaiting offset %d", ErrNotLeader, p.self, lastOffset)
	}
	p.acks = append(p.acks, pendingAck{id: id, lastOffset: lastOffset, deadline: deadline})
	p.settleAcks(now)
	return nil
}

// FollowerFetch records a fetch by follower id at fetchOffset (the
// follower's LEO) reporting its log start offset logStart (-1 if the
// fetch carries none), as Kafka's Replica.updateFetchState: the follower is
// caught up at now if fetchOffset reaches the leader's LEO, or at its
// previous fetch if fetchOffset reaches the leader's LEO of that fetch.
// It may advance the HW, propose an ISR expansion and complete
// DeleteRecords waits. Errors:
// ErrNotLeader, ErrUnknownReplica, ErrOffsetOutOfRange.
func (p *Partition) FollowerFetch(id ReplicaID, fetchOffset, logStart int64, now time.Time) error {
	if p.role != RoleLeader {
		return fmt.Errorf("%w: replica %d got a fetch from %d", ErrNotLeader, p.self, id)
	}
	f, ok := p.followers[id]
	if !ok {
		return fmt.Errorf("%w: replica %d of partition with replicas %v", ErrUnknownReplica, id, p.replicas)
	}
	if fetchOffset > p.logEnd || fetchOffset < 0 {
		return fmt.Errorf("%w: replica %d fetched at %d, log end offset %d", ErrOffsetOutOfRange, id, fetchOffset, p.logEnd)
	}
	switch {
	case fetchOffset >= p.logEnd:
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	case fetchOffset >= f.lastFetchLeaderLogEnd:
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.lastFetchLeaderLogEnd = p.logEnd
	f.lastFetch = now
	if fetchOffset == f.logEnd && (logStart < 0 || logStart == f.logStart) && slices.Contains(p.isr, id) {
		// A member of the ISR at the position it had: no input of the
		// HW, an ack or a DeleteRecords changed since the update that
		// followed its last move, and it cannot join an ISR it is in.
		// Shrinks are Tick's. A leader records such a fetch for every
		// idle partition a follower holds in its fetch session.
		return nil
	}
	f.logEnd = fetchOffset
	if logStart >= 0 {
		f.logStart = logStart
	}
	p.update(now, id)
	return nil
}

// Tick advances time: acks=all produces and DeleteRecords waits past
// their deadline fail, and followers not caught up for
// replica.lag.time.max.ms are proposed out of the ISR. The broker calls
// it every ReplicaLagTimeMax/2 and at NextDeadline. It does nothing on a follower.
func (p *Partition) Tick(now time.Time) {
	if p.role != RoleLeader {
		return
	}
	p.update(now, NoReplica)
}

// AlterPartitionCommitted applies the controller's answer to the in-flight
// proposal: the committed ISR and partition epoch. The HW may advance
// (over the new ISR) and waiting acks complete or fail. An answer for
// another leader epoch, or older than the current partition epoch, is
// ignored (ErrStaleEpoch).
func (p *Partition) AlterPartitionCommitted(leaderEpoch, partitionEpoch int32, isr []ReplicaID, now time.Time) error {
	if p.role != RoleLeader || leaderEpoch != p.leaderEpoch || partitionEpoch < p.partitionEpoch {
		return fmt.Errorf("%w: replica %d at leader epoch %d partition epoch %d got a commit at leader epoch %d partition epoch %d",
			ErrStaleEpoch, p.self, p.leaderEpoch, p.partitionEpoch, leaderEpoch, partitionEpoch)
	}
	p.partitionEpoch = partitionEpoch
	p.isr = slices.Clone(isr)
	p.inFlight = nil
	p.update(now, NoReplica)
	return nil
}

// AlterPartitionFailed applies an AlterPartition that did not commit:
// AlterRetry clears the proposal, and the first Tick (a shrink) or fetch
// (an expansion by that follower) from AlterRetryBackoff on proposes
// again if still needed;
// AlterAwaitLeaderAndIsr keeps it in flight until the next LeaderAndIsr.
func (p *Partition) AlterPartitionFailed(outcome AlterOutcome, now time.Time) {
	if p.role != RoleLeader || p.inFlight == nil {
		return
	}
	if outcome == AlterAwaitLeaderAndIsr {
		return
	}
	p.inFlight = nil
	p.alterRetryAt = now.Add(AlterRetryBackoff)
}

// update recomputes the leader's decisions: ISR changes, HW, acks,
// DeleteRecords waits.
// fetcher is the follower whose fetch caused it, the only one that may
// be proposed into the ISR (as in Kafka), or NoReplica.
func (p *Partition) update(now time.Time, fetcher ReplicaID) {
	p.maybeIncrementHW()
	p.maybeChangeISR(now, fetcher)
	p.maybeIncrementHW()
	p.settleAcks(now)
	p.settleDeletes(now)
}

// maybeChangeISR proposes a shrink of the followers out of sync or, if
// none, an expansion by the fetching follower if its LEO reached the HW and the
// leader epoch's start offset (Kafka's isFollowerInSync), unless a
// proposal is in flight. Unlike Kafka, a follower rejoins only if it is
// also caught up by the shrink rule, so that it is not proposed in and
// out again on the next tick.
func (p *Partition) maybeChangeISR(now time.Time, fetcher ReplicaID) {
	if p.inFlight != nil || now.Before(p.alterRetryAt) {
		return
	}
	var out []ReplicaID
	for _, id := range p.isr {
		if f, ok := p.followers[id]; ok && !p.caughtUp(f, now) {
			out = append(out, id)
		}
	}
	var in []ReplicaID
	if len(out) == 0 {
		if f, ok := p.followers[fetcher]; ok && !slices.Contains(p.isr, fetcher) && f.logEnd >= p.highWatermark && f.logEnd >= p.epochStart && p.caughtUp(f, now) {
			in = append(in, fetcher)
		}
	}
	if len(out) == 0 && len(in) == 0 {
		return
	}
	var isr []ReplicaID
	for _, id := range p.replicas {
		if (slices.Contains(p.isr, id) && !slices.Contains(out, id)) || slices.Contains(in, id) {
			isr = append(isr, id)
		}
	}
	for _, id := range p.isr { // members the assignment no longer names stay until the controller drops them
		if !slices.Contains(isr, id) && !slices.Contains(out, id) {
			isr = append(isr, id)
		}
	}
	p.inFlight = &Proposal{LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, ISR: isr}
	c := *p.inFlight
	c.ISR = slices.Clone(isr)
	p.ready.Proposal = &c
}

// caughtUp is Kafka's Replica.isCaughtUp: at the leader's LEO, or caught
// up within replica.lag.time.max.ms.
func (p *Partition) caughtUp(f *follower, now time.Time) bool {
	return f.logEnd == p.logEnd || now.Sub(f.lastCaughtUp) <= p.cfg.ReplicaLagTimeMax
}

// maybeIncrementHW sets the HW to the minimum LEO over the maximal ISR if
// that is higher (Kafka's maybeIncrementLeaderHW); it never decreases.
func (p *Partition) maybeIncrementHW() {
	hw := p.logEnd
	lower := func(id ReplicaID) {
		if f, ok := p.followers[id]; ok && id != p.self { // a replica no longer assigned waits for the controller to drop it
			hw = min(hw, f.logEnd)
		}
	}
	for _, id := range p.isr {
		lower(id)
	}
	if p.inFlight != nil {
		for _, id := range p.inFlight.ISR {
			if !slices.Contains(p.isr, id) {
				lower(id)
			}
		}
	}
	if hw > p.highWatermark {
		p.highWatermark = hw
	}
}

// settleAcks completes the acks the HW passed and fails those past their
// deadline, in the order they were registered.
func (p *Partition) settleAcks(now time.Time) {
	kept := p.acks[:0]
	for _, a := range p.acks {
		switch {
		case p.highWatermark > a.lastOffset:
			var err error
			if len(p.isr) < p.cfg.MinInsyncReplicas {
				err = fmt.Errorf("%w: offset %d, ISR %v, min.insync.replicas %d", ErrNotEnoughReplicasAfterAppend, a.lastOffset, p.isr, p.cfg.MinInsyncReplicas)
			}
			p.ready.Acks = append(p.ready.Acks, AckResult{ID: a.id, Err: err})
		case !now.Before(a.deadline):
			p.ready.Acks = append(p.ready.Acks, AckResult{ID: a.id, Err: fmt.Errorf("%w: offset %d, high watermark %d", ErrRequestTimedOut, a.lastOffset, p.highWatermark)})
		default:
			kept = append(kept, a)
		}
	}
	clear(p.acks[len(kept):])
	p.acks = kept
}

// failAcks fails every pending ack with err.
func (p *Partition) failAcks(err error) {
	for _, a := range p.acks {
		p.ready.Acks = append(p.ready.Acks, AckResult{ID: a.id, Err: fmt.Errorf("%w: replica %d, offset %d", err, p.self, a.lastOffset)})
	}
	p.acks = nil
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
