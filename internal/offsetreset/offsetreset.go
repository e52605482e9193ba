// Package offsetreset plans the reset of a consumer group's committed
// offsets as kafka-consumer-groups --reset-offsets does: to the log
// start or end, to an offset, by a shift, or to a time, each new offset
// kept within the log. Both `tripod groups reset-offsets` and the web
// console plan with it, so a dry run means the same in both.
//
// offsetreset only reads offsets: it must not commit them. Its callers
// commit the plan (after showing it) and report the answers.
package offsetreset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Scenario is how a reset picks each partition's new offset; exactly one
// of its fields is set, named after kafka-consumer-groups' flags.
type Scenario struct {
	// ToEarliest, ToLatest: the log start or end offset.
	ToEarliest, ToLatest bool
	// ToOffset, when set: that offset, within the log's range.
	ToOffset *int64
	// ShiftBy, when set: the committed offset moved by that many, within
	// the log's range.
	ShiftBy *int64
	// ToDatetime, when set: the first offset of a record at or after it,
	// the log end offset when there is none.
	ToDatetime *time.Time
}

// Plan returns the new offset of every partition of partitions by
// scenario sc, from the partitions' log start and end offsets and the
// group's committed offsets. An offset past either end of the log is
// moved to that end, and a note says so in kafka-consumer-groups' words.
// An error names every partition that could not be planned.
func Plan(ctx context.Context, adm *kadm.Client, partitions kadm.TopicsSet, committed kadm.Offsets, sc Scenario) (plan kadm.Offsets, notes []string, err error) {
	topics := partitions.Topics()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if sc.ToDatetime != nil {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, sc.ToDatetime.UnixMilli(), topics...); err != nil {
			return nil, nil, fmt.Errorf("list offsets at %s: %w", sc.ToDatetime.Format(time.RFC3339Nano), err)
		}
	}
	listed := func(l kadm.ListedOffsets, what, t string, p int32) (int64, error) {
		o, ok := l.Lookup(t, p)
		if !ok {
			// A topic the cluster does not have is listed as partition -1.
			o, ok = l.Lookup(t, -1)
		}
		switch {
		case !ok:
			return 0, fmt.Errorf("list %s offset of %s[%d]: not in the response", what, t, p)
		case o.Err != nil:
			return 0, fmt.Errorf("list %s offset of %s[%d]: %w", what, t, p, o.Err)
		}
		return o.Offset, nil
	}
	plan = kadm.Offsets{}
	var errs []error
	partitions.Each(func(t string, p int32) {
		start, err := listed(starts, "start", t, p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		end, err := listed(ends, "end", t, p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		var offset int64
		switch {
		case sc.ToEarliest:
			offset = start
		case sc.ToLatest:
			offset = end
		case sc.ToOffset != nil:
			offset = *sc.ToOffset
		case sc.ShiftBy != nil:
			c, ok := committed.Lookup(t, p)
			if !ok || c.At < 0 {
				errs = append(errs, fmt.Errorf("shift by %d: %s[%d] has no committed offset to shift", *sc.ShiftBy, t, p))
				return
			}
			offset = c.At + *sc.ShiftBy
		case sc.ToDatetime != nil:
			if offset, err = listed(atTime, "timestamp", t, p); err != nil {
				errs = append(errs, err)
				return
			}
			if offset < 0 {
				offset = end
			}
		}
		switch {
		case offset < start:
			notes = append(notes, fmt.Sprintf("New offset (%d) is lower than earliest offset for topic partition %s-%d. Value will be set to %d", offset, t, p, start))
			offset = start
		case offset > end:
			notes = append(notes, fmt.Sprintf("New offset (%d) is higher than latest offset for topic partition %s-%d. Value will be set to %d", offset, t, p, end))
			offset = end
		}
		plan.AddOffset(t, p, offset, -1)
	})
	if len(errs) > 0 {
		return nil, notes, errors.Join(errs...)
	}
	return plan, notes, nil
}

// Committed returns the offsets a group has committed: those fetched
// without error and not -1.
func Committed(fetched kadm.OffsetResponses) kadm.Offsets {
	committed := kadm.Offsets{}
	fetched.Each(func(r kadm.OffsetResponse) {
		if r.Err == nil && r.At >= 0 {
			committed.Add(r.Offset)
		}
	})
	return committed
}

// Inactive reports whether a group in state may have its offsets reset:
// it has no members (Empty) or does not exist (Dead).
func Inactive(state string) bool {
	return state == "Empty" || state == "Dead"
}

// activeMemberErrors are the answers to a commit with generation -1 while
// the group has members.
var activeMemberErrors = []error{kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress}

// IsActiveMemberError reports whether err is the broker's refusal of a
// reset's commit because the group has members: they joined between
// the check and the commit.
func IsActiveMemberError(err error) bool {
	return slices.ContainsFunc(activeMemberErrors, func(e error) bool { return errors.Is(err, e) })
}
