package console

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Event kinds of the timeline.
const (
	kindBroker       = "broker"
	kindController   = "controller"
	kindElection     = "election"
	kindISR          = "isr"
	kindReassignment = "reassignment"
	kindFailover     = "failover"
)

// event is one entry of the timeline: something the console saw change
// between two polls. At is the time of the poll that saw it, so an event
// happened at most one refresh interval before it.
type event struct {
	Seq       int64     `json:"seq"`
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"`
	Topic     string    `json:"topic,omitempty"`
	Partition *int32    `json:"partition,omitempty"`
	Broker    *int32    `json:"broker,omitempty"`
	Text      string    `json:"text"`
	// An election's leaders and leader epoch.
	OldLeader   *int32 `json:"oldLeader,omitempty"`
	NewLeader   *int32 `json:"newLeader,omitempty"`
	LeaderEpoch *int32 `json:"leaderEpoch,omitempty"`
	// An ISR change's replica and, for a shrink, how far its LEO was
	// behind the leader's at the last sample that had both (-1: the
	// topic was not watched, so the console had no sample).
	Replica *int32 `json:"replica,omitempty"`
	Lag     *int64 `json:"lag,omitempty"`
	// A failover's times, in milliseconds from the failed broker's last
	// answer to the console.
	DetectionMs      *float64 `json:"detectionMs,omitempty"`
	UnavailabilityMs *float64 `json:"unavailabilityMs,omitempty"`
}

// replicaLag is a replica's LEO behind its leader's at one sample.
type replicaLag struct {
	Lag int64
	At  time.Time
}

// election is the last leader change the console saw of a partition.
type election struct {
	old, new int32
	at       time.Time
}

// failover follows a broker the console saw gone until every partition
// it led has a new leader.
type failover struct {
	broker     int32
	lastAnswer time.Time
	detectedAt time.Time
	// led are the partitions it led, and when each was first seen with
	// another leader (zero while not yet).
	led map[topicPartition]time.Time
}

// failoverDeadline is how long the console waits for the partitions of a
// gone broker to get new leaders before it reports those that did not.
const failoverDeadline = 2 * time.Minute

// timeline is the ring of the last events, and what diffing needs to
// remember between polls.
type timeline struct {
	size   int
	events []event
	seq    int64

	elections map[topicPartition]election
	failovers map[int32]*failover
	// controllerEpoch is the highest controller epoch the coordination
	// service named, 0 before it first answered.
	controllerEpoch int64
}

func newTimeline(size int) timeline {
	return timeline{size: size, elections: map[topicPartition]election{}, failovers: map[int32]*failover{}}
}

// add appends ev, numbered, dropping the oldest beyond the ring's size.
func (tl *timeline) add(ev event) {
	tl.seq++
	ev.Seq = tl.seq
	tl.events = append(tl.events, ev)
	if len(tl.events) > tl.size {
		tl.events = slices.Delete(tl.events, 0, len(tl.events)-tl.size)
	}
}

// since returns the events numbered after seq.
func (tl *timeline) since(seq int64) []event {
	i := sort.Search(len(tl.events), func(i int) bool { return tl.events[i].Seq > seq })
	return slices.Clone(tl.events[i:])
}

func ptr[T any](v T) *T { return &v }

// diff returns the events between two successive views: brokers
// registered and gone, controller changes (as Metadata names the
// controller, and each rise of the controller epoch the coordination
// service names), leader elections, ISR shrinks and expands, reassignment
// phases, and failovers as they complete. lags are the replicas' last
// sampled lags; lastAnswer when each broker last answered.
func (tl *timeline) diff(prev, st *clusterState, lags map[topicPartition]map[int32]replicaLag, lastAnswer map[int32]time.Time) []event {
	// The epoch is compared with the highest seen, not prev's: polls
	// whose read of the service failed in between do not hide a rise.
	var epochEvent *event
	if cv := st.Coord; cv != nil && cv.Error == "" && cv.Epoch > tl.controllerEpoch {
		if tl.controllerEpoch > 0 {
			epochEvent = &event{At: st.At, Kind: kindController, Broker: ptr(cv.ControllerID),
				Text: fmt.Sprintf("controller epoch %d → %d: the coordination service names %s the controller", tl.controllerEpoch, cv.Epoch, brokerName(cv.ControllerID))}
		}
		tl.controllerEpoch = cv.Epoch
	}
	if prev == nil {
		return nil
	}
	var evs []event
	at := st.At

	// Brokers.
	var ids []int32
	for id := range st.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b, was := st.Brokers[id], prev.Brokers[id]
		switch {
		case was == nil || (was.State == "gone" && b.State != "gone"):
			evs = append(evs, event{At: at, Kind: kindBroker, Broker: ptr(id),
				Text: fmt.Sprintf("broker %d registered (%s:%d)", id, b.Host, b.Port)})
		case was.State != "gone" && b.State == "gone":
			text := fmt.Sprintf("broker %d gone: no longer listed by the cluster (its session ended; the controller fenced it)", id)
			if !b.LastAnswer.IsZero() {
				text += fmt.Sprintf("; it last answered the console %s before", at.Sub(b.LastAnswer).Round(time.Millisecond))
			}
			evs = append(evs, event{At: at, Kind: kindBroker, Broker: ptr(id), Text: text})
			tl.startFailover(prev, st, id, lastAnswer[id])
		case was.State != "fenced" && b.State == "fenced":
			evs = append(evs, event{At: at, Kind: kindBroker, Broker: ptr(id), Text: fmt.Sprintf("broker %d fenced", id)})
		}
	}

	// Controller.
	if st.ControllerID != prev.ControllerID {
		evs = append(evs, event{At: at, Kind: kindController, Broker: ptr(st.ControllerID),
			Text: fmt.Sprintf("controller %s → %s", brokerName(prev.ControllerID), brokerName(st.ControllerID))})
	}
	if epochEvent != nil {
		evs = append(evs, *epochEvent)
	}

	// Partitions.
	for _, name := range st.names {
		t, pt := st.Topics[name], prev.Topics[name]
		if pt == nil {
			continue
		}
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if int(p.Partition) >= len(pt.Partitions) {
				continue
			}
			pp := &pt.Partitions[p.Partition]
			if pp.Partition != p.Partition {
				continue
			}
			tp := topicPartition{name, p.Partition}
			if p.Leader != pp.Leader {
				tl.elections[tp] = election{pp.Leader, p.Leader, at}
				text := fmt.Sprintf("%s-%d: leader %s → %s, leader epoch %d", name, p.Partition, brokerName(pp.Leader), brokerName(p.Leader), p.LeaderEpoch)
				if p.Leader < 0 {
					text = fmt.Sprintf("%s-%d: offline, no leader (was %s)", name, p.Partition, brokerName(pp.Leader))
				}
				evs = append(evs, event{At: at, Kind: kindElection, Topic: name, Partition: ptr(p.Partition),
					OldLeader: ptr(pp.Leader), NewLeader: ptr(p.Leader), LeaderEpoch: ptr(p.LeaderEpoch), Text: text})
			}
			if !sameSet(p.Replicas, pp.Replicas) {
				// A reassignment that began and ended between two polls
				// shows only as this.
				evs = append(evs, event{At: at, Kind: kindReassignment, Topic: name, Partition: ptr(p.Partition),
					Text: fmt.Sprintf("%s-%d: replicas (AR) %v → %v", name, p.Partition, pp.Replicas, p.Replicas)})
			}
			for _, r := range pp.ISR {
				if slices.Contains(p.ISR, r) {
					continue
				}
				lag := int64(-1)
				why := "lag unknown: the topic was not open in a page, so the console sampled no LEO"
				if l, ok := lags[tp][r]; ok {
					lag = l.Lag
					why = fmt.Sprintf("its LEO was %d behind the leader's at the last sample that had both, %s before", l.Lag, at.Sub(l.At).Round(time.Millisecond))
					if b := st.Brokers[r]; b != nil && b.State == "gone" {
						why += "; its broker is gone"
					}
				}
				evs = append(evs, event{At: at, Kind: kindISR, Topic: name, Partition: ptr(p.Partition), Replica: ptr(r), Lag: ptr(lag),
					Text: fmt.Sprintf("%s-%d: ISR shrink, replica %d out (ISR %v → %v); %s", name, p.Partition, r, pp.ISR, p.ISR, why)})
			}
			for _, r := range p.ISR {
				if !slices.Contains(pp.ISR, r) {
					evs = append(evs, event{At: at, Kind: kindISR, Topic: name, Partition: ptr(p.Partition), Replica: ptr(r),
						Text: fmt.Sprintf("%s-%d: ISR expand, replica %d in (ISR %v → %v): it caught up with the leader", name, p.Partition, r, pp.ISR, p.ISR)})
				}
			}
		}
	}

	// Reassignments, when both polls could list them.
	if prev.Reassignments == nil || st.Reassignments == nil {
		return append(evs, tl.progressFailovers(st)...)
	}
	for tp, r := range st.Reassignments {
		was, ok := prev.Reassignments[tp]
		switch {
		case !ok:
			evs = append(evs, event{At: at, Kind: kindReassignment, Topic: tp.Topic, Partition: ptr(tp.Partition),
				Text: fmt.Sprintf("%s-%d: reassignment started: replicas %v, adding %v, removing %v", tp.Topic, tp.Partition, r.Replicas, r.Adding, r.Removing)})
		case !slices.Equal(was.Replicas, r.Replicas) || !slices.Equal(was.Adding, r.Adding) || !slices.Equal(was.Removing, r.Removing):
			evs = append(evs, event{At: at, Kind: kindReassignment, Topic: tp.Topic, Partition: ptr(tp.Partition),
				Text: fmt.Sprintf("%s-%d: reassignment: replicas %v, adding %v, removing %v", tp.Topic, tp.Partition, r.Replicas, r.Adding, r.Removing)})
		}
	}
	for tp := range prev.Reassignments {
		if _, ok := st.Reassignments[tp]; !ok {
			var ar []int32
			if t := st.Topics[tp.Topic]; t != nil && int(tp.Partition) < len(t.Partitions) {
				ar = t.Partitions[tp.Partition].Replicas
			}
			evs = append(evs, event{At: at, Kind: kindReassignment, Topic: tp.Topic, Partition: ptr(tp.Partition),
				Text: fmt.Sprintf("%s-%d: reassignment done: replicas %v", tp.Topic, tp.Partition, ar)})
		}
	}

	return append(evs, tl.progressFailovers(st)...)
}

// startFailover begins following broker id, seen gone in st: the
// partitions it led in prev, and those whose leadership moved away from
// it since it last answered.
func (tl *timeline) startFailover(prev, st *clusterState, id int32, lastAnswer time.Time) {
	f := &failover{broker: id, lastAnswer: lastAnswer, detectedAt: st.At, led: map[topicPartition]time.Time{}}
	for _, name := range prev.names {
		for _, p := range prev.Topics[name].Partitions {
			if p.Leader == id {
				f.led[topicPartition{name, p.Partition}] = time.Time{}
			}
		}
	}
	for tp, e := range tl.elections {
		if e.old == id && e.at.After(lastAnswer) && e.new >= 0 {
			f.led[tp] = e.at
			f.detectedAt = minTime(f.detectedAt, e.at)
		}
	}
	tl.failovers[id] = f
}

// progressFailovers marks the followed partitions st shows with a new
// leader and returns the event of each failover that is complete (or
// past its deadline).
func (tl *timeline) progressFailovers(st *clusterState) []event {
	var evs []event
	for id, f := range tl.failovers {
		pending := 0
		var last time.Time
		for tp, resolved := range f.led {
			if resolved.IsZero() {
				if t := st.Topics[tp.Topic]; t != nil && int(tp.Partition) < len(t.Partitions) {
					if l := t.Partitions[tp.Partition].Leader; l >= 0 && l != id {
						resolved = st.At
						f.led[tp] = resolved
					}
				}
			}
			if resolved.IsZero() {
				pending++
			} else if resolved.After(last) {
				last = resolved
			}
		}
		if pending > 0 && st.At.Sub(f.detectedAt) < failoverDeadline {
			continue
		}
		delete(tl.failovers, id)
		ev := event{At: st.At, Kind: kindFailover, Broker: ptr(id)}
		var b strings.Builder
		fmt.Fprintf(&b, "failover of broker %d: %s it led", id, count(len(f.led), "partition"))
		if f.lastAnswer.IsZero() {
			b.WriteString("; the console never saw it answer, so it measures no times")
		} else {
			ev.DetectionMs = ptr(ms(f.detectedAt.Sub(f.lastAnswer)))
			fmt.Fprintf(&b, "; detection %.0f ms (its last answer to the console → the console first saw it gone or a partition of it with a new leader)", *ev.DetectionMs)
			if len(f.led) > 0 && !last.IsZero() {
				ev.UnavailabilityMs = ptr(ms(last.Sub(f.lastAnswer)))
				fmt.Fprintf(&b, "; unavailability %.0f ms (its last answer → the last of its partitions seen with a new leader)", *ev.UnavailabilityMs)
			}
		}
		if pending > 0 {
			fmt.Fprintf(&b, "; %s still without a new leader after %v", count(pending, "partition"), failoverDeadline)
		}
		b.WriteString(". Measured by polling; `tripod bench failover` measures from the SIGKILL and, for unavailability, from the last acknowledged write to the first after")
		ev.Text = b.String()
		evs = append(evs, ev)
	}
	return evs
}

// count is "1 partition", "2 partitions".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sameSet reports whether a and b hold the same broker ids.
func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// brokerName is "broker N", or "none" for -1.
func brokerName(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprintf("broker %d", id)
}
