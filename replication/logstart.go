package replication

import (
	"fmt"
	"time"
)

// This file is the leader's side of Kafka's DeleteRecords: which offset
// a request moves the log start offset to, the low watermark (the lowest
// log start offset over the leader and the ISR, as the followers' fetches
// report theirs), and the waits that complete when the low watermark
// reaches the new log start (Kafka's DelayedDeleteRecords); and the
// follower's side: how far it raises its own log start to its leader's.

// DeleteRecordsHighWatermark is the DeleteRecords offset that means the
// high watermark (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark = -1

// DeleteID names a pending DeleteRecords wait; the broker chooses it.
type DeleteID uint64

// DeleteResult is the outcome of a pending DeleteRecords wait.
type DeleteResult struct {
	// ID is the id given to AwaitLowWatermark.
	ID DeleteID
	// LowWatermark is the low watermark when the wait ended (Kafka's
	// DeleteRecords low_watermark).
	LowWatermark int64
	// Err is nil when the low watermark reached the offset, else
	// ErrRequestTimedOut or ErrNotLeader.
	Err error
}

// pendingDelete is a DeleteRecords waiting for the low watermark.
type pendingDelete struct {
	id       DeleteID
	offset   int64
	deadline time.Time
}

// SetLogStart records the replica's own log start offset. The broker
// calls it whenever the log start moves (DeleteRecords, retention, a
// follower raising it to its leader's) and when the replica becomes
// leader; on a leader it may complete DeleteRecords waits.
func (p *Partition) SetLogStart(logStart int64, now time.Time) {
	p.logStart = logStart
	if p.role == RoleLeader {
		p.update(now, NoReplica)
	}
}

// LogStart returns the replica's own log start offset as last set.
func (p *Partition) LogStart() int64 { return p.logStart }

// FollowerLogStart returns the leader's view of a follower's log start
// offset, -1 if it has not reported one in this leader epoch; ok is
// false for an unknown replica.
func (p *Partition) FollowerLogStart(id ReplicaID) (logStart int64, ok bool) {
	f, ok := p.followers[id]
	if !ok {
		return -1, false
	}
	return f.logStart, true
}

// DeleteRecordsOffset decides where a DeleteRecords moves the leader's
// log start offset, as Kafka's deleteRecordsOnLeader and
// maybeIncrementLogStartOffset do: DeleteRecordsHighWatermark (-1) is
// the high watermark; an offset above the high watermark, or another
// negative one, is refused. An offset at or below the log start is
// accepted and moves nothing. The broker advances the log to the
// returned offset, calls SetLogStart, then AwaitLowWatermark for it.
// Errors: ErrNotLeader, ErrOffsetOutOfRange.
func (p *Partition) DeleteRecordsOffset(offset int64) (int64, error) {
	if p.role != RoleLeader {
		return 0, fmt.Errorf("%w: replica %d got a DeleteRecords to offset %d", ErrNotLeader, p.self, offset)
	}
	if offset == DeleteRecordsHighWatermark {
		offset = p.highWatermark
	}
	if offset < 0 || offset > p.highWatermark {
		return 0, fmt.Errorf("%w: DeleteRecords offset %d, high watermark %d", ErrOffsetOutOfRange, offset, p.highWatermark)
	}
	return offset, nil
}

// LowWatermark returns the lowest log start offset over the leader and
// the ISR members (Kafka's lowWatermarkIfLeader, over the ISR): -1 while
// an ISR member has not reported its log start in this leader epoch.
func (p *Partition) LowWatermark() int64 {
	low := p.logStart
	for _, id := range p.isr {
		if f, ok := p.followers[id]; ok && id != p.self {
			low = min(low, f.logStart)
		}
	}
	return low
}

// AwaitLowWatermark registers a DeleteRecords that moved the log start
// to offset: it completes (in a Ready's Deletes) when the low watermark
// reaches offset, that is once every ISR member's log start has, and
// fails with ErrRequestTimedOut at deadline (Kafka's
// DelayedDeleteRecords). If the low watermark is already there, it
// completes at once. Errors: ErrNotLeader.
func (p *Partition) AwaitLowWatermark(id DeleteID, offset int64, deadline, now time.Time) error {
	if p.role != RoleLeader {
		return fmt.Errorf("%w: replica %d awaiting low watermark %d", ErrNotLeader, p.self, offset)
	}
	p.deletes = append(p.deletes, pendingDelete{id: id, offset: offset, deadline: deadline})
	p.settleDeletes(now)
	return nil
}

// PendingDeletes returns the number of DeleteRecords waits.
func (p *Partition) PendingDeletes() int { return len(p.deletes) }

// settleDeletes completes the DeleteRecords waits the low watermark
// reached and fails those past their deadline.
func (p *Partition) settleDeletes(now time.Time) {
	if len(p.deletes) == 0 {
		return
	}
	low := p.LowWatermark()
	kept := p.deletes[:0]
	for _, d := range p.deletes {
		switch {
		case low >= d.offset:
			p.ready.Deletes = append(p.ready.Deletes, DeleteResult{ID: d.id, LowWatermark: low})
		case !now.Before(d.deadline):
			p.ready.Deletes = append(p.ready.Deletes, DeleteResult{ID: d.id, LowWatermark: low,
				Err: fmt.Errorf("%w: low watermark %d, DeleteRecords offset %d", ErrRequestTimedOut, low, d.offset)})
		default:
			kept = append(kept, d)
		}
	}
	clear(p.deletes[len(kept):])
	p.deletes = kept
}

// failDeletes fails every DeleteRecords wait with err.
func (p *Partition) failDeletes(err error) {
	for _, d := range p.deletes {
		p.ready.Deletes = append(p.ready.Deletes, DeleteResult{ID: d.id, LowWatermark: -1,
			Err: fmt.Errorf("%w: replica %d, DeleteRecords offset %d", err, p.self, d.offset)})
	}
	p.deletes = nil
}

// LeaderLogStart decides, on a follower after FollowerFetched, how far
// its log start follows the leader's log start from a fetch response:
// up to it but never above the follower's high watermark (Kafka's
// maybeIncrementLogStartOffset refuses a log start above the high
// watermark), and never down. advance is false when the log start stays.
func (p *Partition) LeaderLogStart(leaderLogStart int64) (logStart int64, advance bool) {
	if p.role != RoleFollower {
		return p.logStart, false
	}
	target := min(leaderLogStart, p.highWatermark)
	if target <= p.logStart {
		return p.logStart, false
	}
	return target, true
}
