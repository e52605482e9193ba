package replication

import (
	"fmt"
	"slices"

	"github.com/tripodmq/tripod/replication/log"
)

// Truncation is a follower's truncation decision.
type Truncation struct {
	// Offset is where to cut the log (log.TruncateTo; a no-op at the log
	// end). When Done, the follower fetches from Offset.
	Offset int64
	// Done says truncation is over. If not, the follower sends the leader
	// OffsetForLeaderEpoch for Epoch and passes the answer to
	// EpochEndOffset.
	Done bool
	// Epoch is the leader epoch to ask the leader about when not Done.
	Epoch int32
}

// startTruncation makes the first truncation decision of a new follower.
func (p *Partition) startTruncation() Truncation {
	if p.cfg.Truncation == TruncateHW || len(p.epochs) == 0 {
		// The seeds' rule; in epoch mode, Kafka's rule for a log that
		// holds no epochs.
		return p.truncateTo(p.highWatermark, true)
	}
	if p.cfg.Truncation == TruncateFetch {
		// The first fetch names the last batch's epoch; the leader
		// answers where the logs part, if they do (DivergingEpoch).
		return Truncation{Offset: p.logEnd, Done: true, Epoch: -1}
	}
	p.truncating = true
	return Truncation{Offset: p.logEnd, Epoch: p.askedEpoch()}
}

// DivergingEpoch takes a leader's answer to a fetch in fetch mode that
// says the follower's log parts from its own (Fetch's DivergingEpoch:
// the largest epoch at most the fetch's LastFetchedEpoch that the leader
// has, and where it ends there) and cuts as EpochEndOffset decides. The
// decision is always Done: where EpochEndOffset would ask again, the
// next fetch names the follower's new last epoch and the leader answers
// again if the logs still part. Errors: ErrNotTruncating on a replica
// that is not a follower, or one truncating by epoch.
func (p *Partition) DivergingEpoch(leaderEpoch int32, endOffset int64) (Truncation, error) {
	if p.role != RoleFollower || p.truncating {
		return Truncation{}, fmt.Errorf("%w: replica %d (%s) got diverging epoch %d end offset %d", ErrNotTruncating, p.self, p.role, leaderEpoch, endOffset)
	}
	p.truncating = true
	tr, err := p.EpochEndOffset(leaderEpoch, endOffset)
	p.truncating = false
	return Truncation{Offset: tr.Offset, Done: true, Epoch: -1}, err
}

// FetchDiverges is the leader's check of a fetch from fetchOffset whose
// last batch was of lastFetchedEpoch (Kafka's Partition.fetchRecords),
// given what the leader's log answers for that epoch (epoch, end:
// log.LeaderEndOffsetFor): the logs part when the leader's largest epoch
// at most lastFetchedEpoch is below it or ends before fetchOffset, and
// the answer is DivergingEpoch{epoch, end}. undefined says the leader
// cannot tell (no such epoch: Kafka answers OFFSET_OUT_OF_RANGE).
func FetchDiverges(lastFetchedEpoch int32, fetchOffset int64, epoch int32, end int64) (diverges, undefined bool) {
	if epoch < 0 || end < 0 {
		return false, true
	}
	return epoch < lastFetchedEpoch || end < fetchOffset, false
}

// askedEpoch is the epoch a truncating follower asks the leader about: its
// latest.
func (p *Partition) askedEpoch() int32 {
	if !p.truncating || len(p.epochs) == 0 {
		return -1
	}
	return p.epochs[len(p.epochs)-1].Epoch
}

// EpochEndOffset takes the leader's answer to OffsetForLeaderEpoch for
// the epoch the last Truncation asked about, and decides as Kafka's
// follower does (KIP-101, KIP-279; AbstractFetcherThread's
// getOffsetTruncationState):
//   - the leader knows no such epoch (endOffset -1): cut to the HW;
//   - the leader answers with an epoch the follower also has: cut to the
//     lower of the two end offsets of that epoch;
//   - the leader answers with an epoch the follower does not have: cut to
//     the end of the follower's largest epoch below it and ask again
//     about the follower's new latest epoch (not Done);
//   - the follower has no epoch at or below the answer: cut to endOffset.
//
// The cut is never above the follower's LEO. Errors: ErrNotTruncating.
func (p *Partition) EpochEndOffset(leaderEpoch int32, endOffset int64) (Truncation, error) {
	if p.role != RoleFollower || !p.truncating {
		return Truncation{}, fmt.Errorf("%w: replica %d got epoch %d end offset %d", ErrNotTruncating, p.self, leaderEpoch, endOffset)
	}
	if endOffset < 0 {
		return p.truncateTo(p.highWatermark, true), nil
	}
	if leaderEpoch < 0 {
		return p.truncateTo(endOffset, true), nil
	}
	localEpoch, localEnd := EndOffsetForEpoch(p.epochs, p.logEnd, leaderEpoch)
	switch {
	case localEpoch < 0:
		return p.truncateTo(endOffset, true), nil
	case localEpoch != leaderEpoch:
		t := p.truncateTo(localEnd, false)
		if len(p.epochs) == 0 {
			return p.truncateTo(min(p.highWatermark, p.logEnd), true), nil
		}
		return t, nil
	default:
		return p.truncateTo(min(endOffset, localEnd), true), nil
	}
}

// truncateTo cuts the follower's view of its log at offset (never above
// its LEO) and returns the decision; a follower still truncating asks
// about its new latest epoch.
func (p *Partition) truncateTo(offset int64, done bool) Truncation {
	offset = min(offset, p.logEnd)
	p.logEnd = offset
	p.highWatermark = min(p.highWatermark, offset)
	i := len(p.epochs)
	for i > 0 && p.epochs[i-1].StartOffset >= offset {
		i--
	}
	p.epochs = p.epochs[:i]
	p.truncating = !done
	return Truncation{Offset: offset, Done: done, Epoch: p.askedEpoch()}
}

// FollowerFetched records a fetch response at a follower: logEnd is its
// LEO after appending the records, leaderHW the HW in the response. It
// returns the follower's HW, min(leaderHW, logEnd). It fails on a
// replica that is not a follower or is still truncating.
func (p *Partition) FollowerFetched(logEnd, leaderHW int64) (int64, error) {
	if p.role != RoleFollower {
		return 0, fmt.Errorf("replica %d got a fetch response as %s", p.self, p.role)
	}
	if p.truncating {
		return 0, fmt.Errorf("replica %d got a fetch response before truncating (epoch %d)", p.self, p.askedEpoch())
	}
	p.logEnd = logEnd
	p.highWatermark = min(leaderHW, logEnd)
	return p.highWatermark, nil
}

// Epochs returns the follower's view of its leader epochs after the
// truncation decided so far.
func (p *Partition) Epochs() []log.EpochEntry { return slices.Clone(p.epochs) }

// EndOffsetForEpoch answers OffsetForLeaderEpoch over epochs and a log
// end offset exactly as log.Log.EndOffsetForEpoch does, for a log that is
// not open here (a follower's view mid-truncation, or a test's model).
func EndOffsetForEpoch(epochs []log.EpochEntry, logEnd int64, epoch int32) (int32, int64) {
	return log.EndOffsetFor(epochs, logEnd, epoch)
}

// FetchOutOfRange takes a leader's OFFSET_OUT_OF_RANGE answer to the
// follower's fetch, with the leader's log end offset (from ListOffsets):
// a follower ahead of its leader cuts its log to the leader's end, as
// Kafka's handleOutOfRangeError does; the fetcher then fetches from the
// returned Offset. A follower behind the leader's log start is the log's
// business (TruncateFullyAndStartAt), not decided here.
func (p *Partition) FetchOutOfRange(leaderLogEnd int64) (Truncation, error) {
	if p.role != RoleFollower || p.truncating {
		return Truncation{}, fmt.Errorf("replica %d got OFFSET_OUT_OF_RANGE as %s (truncating %t)", p.self, p.role, p.truncating)
	}
	return p.truncateTo(leaderLogEnd, true), nil
}
