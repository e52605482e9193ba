package console

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// view is a cluster of brokers 1..3 (those in gone are not listed) with
// the topic orders, whose partitions are given as leader, AR and ISR.
func view(at time.Time, controller int32, gone []int32, parts ...partitionView) *clusterState {
	st := &clusterState{At: at, ControllerID: controller, Brokers: map[int32]*brokerView{},
		Topics: map[string]*topicView{"orders": {Name: "orders"}}, names: []string{"orders"},
		Reassignments: map[topicPartition]reassignment{}}
	for id := int32(1); id <= 3; id++ {
		listed := true
		for _, g := range gone {
			listed = listed && g != id
		}
		if listed {
			st.Brokers[id] = &brokerView{ID: id, Host: "127.0.0.1", Port: 9091 + id, State: "live"}
		}
	}
	for i, p := range parts {
		p.Partition = int32(i)
		st.Topics["orders"].Partitions = append(st.Topics["orders"].Partitions, p)
	}
	return st
}

func part(leader int32, epoch int32, ar, isr []int32) partitionView {
	return partitionView{Leader: leader, LeaderEpoch: epoch, Replicas: ar, ISR: isr}
}

// texts are the events' kinds and texts, one a line.
func texts(evs []event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s: %s\n", ev.Kind, ev.Text)
	}
	return b.String()
}

// TestTimelineOfAFailover: broker 1, leader of orders-0 and controller,
// stops answering; the next poll shows it gone, orders-0 led by 2 in
// epoch 1 with 1 out of the ISR, and broker 2 controller; orders-1, which
// 1 did not lead, loses it from its ISR. The timeline says each, the
// shrink with the lag last sampled, and the failover with its detection
// and unavailability from the broker's last answer.
func TestTimelineOfAFailover(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	all := []int32{1, 2, 3}
	before := view(t0, 1, nil, part(1, 0, all, all), part(2, 0, []int32{2, 3, 1}, []int32{2, 3, 1}))
	after := view(t0.Add(900*time.Millisecond), 2, []int32{1},
		part(2, 1, all, []int32{2, 3}), part(2, 0, []int32{2, 3, 1}, []int32{2, 3}))
	after.Brokers[1] = &brokerView{ID: 1, State: "gone", GoneAt: after.At, LastAnswer: t0.Add(-100 * time.Millisecond)}
	lags := map[topicPartition]map[int32]replicaLag{{"orders", 0}: {1: {Lag: 0, At: t0}, 2: {Lag: 3, At: t0}}}
	lastAnswer := map[int32]time.Time{1: t0.Add(-100 * time.Millisecond)}

	tl := newTimeline(100)
	got := texts(tl.diff(before, after, lags, lastAnswer))
	want := `broker: broker 1 gone: no longer listed by the cluster (its session ended; the controller fenced it); it last answered the console 1s before
controller: controller broker 1 → broker 2
election: orders-0: leader broker 1 → broker 2, leader epoch 1
isr: orders-0: ISR shrink, replica 1 out (ISR [1 2 3] → [2 3]); its LEO was 0 behind the leader's at the last sample that had both, 900ms before; its broker is gone
isr: orders-1: ISR shrink, replica 1 out (ISR [2 3 1] → [2 3]); lag unknown: the topic was not open in a page, so the console sampled no LEO
failover: failover of broker 1: 1 partition it led; detection 1000 ms (its last answer to the console → the console first saw it gone or a partition of it with a new leader); unavailability 1000 ms (its last answer → the last of its partitions seen with a new leader). Measured by polling; ` + "`tripod bench failover`" + ` measures from the SIGKILL and, for unavailability, from the last acknowledged write to the first after
`
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

// TestTimelineOfAFailoverInTwoPolls: the broker is seen gone before its
// partitions have new leaders; the failover is reported when the last of
// them has one, its unavailability measured to that poll.
func TestTimelineOfAFailoverInTwoPolls(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	all := []int32{1, 2, 3}
	polls := []*clusterState{
		view(t0, 2, nil, part(1, 0, all, all), part(1, 0, all, all)),
		view(t0.Add(250*time.Millisecond), 2, []int32{1}, part(2, 1, all, []int32{2, 3}), part(1, 0, all, all)),
		view(t0.Add(500*time.Millisecond), 2, []int32{1}, part(2, 1, all, []int32{2, 3}), part(3, 1, all, []int32{2, 3})),
	}
	polls[1].Brokers[1] = &brokerView{ID: 1, State: "gone"}
	polls[2].Brokers[1] = &brokerView{ID: 1, State: "gone"}
	lastAnswer := map[int32]time.Time{1: t0}
	tl := newTimeline(100)
	var failovers []event
	for i := 1; i < len(polls); i++ {
		for _, ev := range tl.diff(polls[i-1], polls[i], nil, lastAnswer) {
			if ev.Kind == kindFailover {
				failovers = append(failovers, ev)
			}
		}
		if i == 1 && len(failovers) != 0 {
			t.Fatalf("a failover reported while orders-1 still has broker 1 as its leader: %s", failovers[0].Text)
		}
	}
	if len(failovers) != 1 || *failovers[0].DetectionMs != 250 || *failovers[0].UnavailabilityMs != 500 {
		t.Fatalf("failovers: %s; want one, detection 250 ms, unavailability 500 ms", texts(failovers))
	}
}

// TestTimelineOfReassignmentsAndRegistrations: a reassignment seen in
// progress and done, an AR change seen only in Metadata, a broker
// registered again, and an ISR expand.
func TestTimelineOfReassignmentsAndRegistrations(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	first := view(t0, 2, []int32{3}, part(1, 0, []int32{1, 2}, []int32{1, 2}), part(2, 0, []int32{2}, []int32{2}))
	second := view(t0.Add(time.Second), 2, nil, part(1, 0, []int32{1, 2, 3}, []int32{1, 2}), part(3, 1, []int32{3}, []int32{3}))
	second.Reassignments[topicPartition{"orders", 0}] = reassignment{Replicas: []int32{1, 2, 3}, Adding: []int32{3}, Removing: []int32{2}}
	third := view(t0.Add(2*time.Second), 2, nil, part(1, 0, []int32{1, 3}, []int32{1, 3}), part(3, 1, []int32{3}, []int32{3}))
	first.Brokers[3] = &brokerView{ID: 3, State: "gone"}

	tl := newTimeline(100)
	got := texts(append(tl.diff(first, second, nil, nil), tl.diff(second, third, nil, nil)...))
	want := `broker: broker 3 registered (127.0.0.1:9094)
reassignment: orders-0: replicas (AR) [1 2] → [1 2 3]
election: orders-1: leader broker 2 → broker 3, leader epoch 1
reassignment: orders-1: replicas (AR) [2] → [3]
isr: orders-1: ISR shrink, replica 2 out (ISR [2] → [3]); lag unknown: the topic was not open in a page, so the console sampled no LEO
isr: orders-1: ISR expand, replica 3 in (ISR [2] → [3]): it caught up with the leader
reassignment: orders-0: reassignment started: replicas [1 2 3], adding [3], removing [2]
reassignment: orders-0: replicas (AR) [1 2 3] → [1 3]
isr: orders-0: ISR shrink, replica 2 out (ISR [1 2] → [1 3]); lag unknown: the topic was not open in a page, so the console sampled no LEO
isr: orders-0: ISR expand, replica 3 in (ISR [1 2] → [1 3]): it caught up with the leader
reassignment: orders-0: reassignment done: replicas [1 3]
`
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

// TestTimelineRing: the timeline keeps the last size events, numbered;
// since(n) returns those after n.
func TestTimelineRing(t *testing.T) {
	tl := newTimeline(3)
	for i := range 5 {
		tl.add(event{Text: fmt.Sprint(i)})
	}
	if got := texts(tl.since(0)); got != ": 2\n: 3\n: 4\n" {
		t.Errorf("since(0): got %q, want the last 3", got)
	}
	if got := tl.since(4); len(got) != 1 || got[0].Seq != 5 {
		t.Errorf("since(4): got %v, want event 5", got)
	}
	if got := tl.since(5); len(got) != 0 {
		t.Errorf("since(5): got %v, want none", got)
	}
}

// TestTimelineOfControllerEpochs: the coordination service names epoch
// 4, then does not answer, then names epoch 5 with another controller:
// one event, from 4 to 5, the failed read in between hiding nothing; a
// poll naming no higher epoch says nothing.
func TestTimelineOfControllerEpochs(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	all := []int32{1, 2, 3}
	polls := make([]*clusterState, 4)
	for i := range polls {
		polls[i] = view(t0.Add(time.Duration(i)*time.Second), 1, nil, part(1, 0, all, all))
	}
	polls[0].Coord = &coordView{ControllerID: 1, Epoch: 4}
	polls[1].Coord = &coordView{ControllerID: -1, Error: "zk: connection closed"}
	polls[2].Coord = &coordView{ControllerID: 2, Epoch: 5}
	polls[3].Coord = &coordView{ControllerID: 2, Epoch: 5}
	tl := newTimeline(100)
	var evs []event
	evs = append(evs, tl.diff(nil, polls[0], nil, nil)...)
	for i := 1; i < len(polls); i++ {
		evs = append(evs, tl.diff(polls[i-1], polls[i], nil, nil)...)
	}
	want := "controller: controller epoch 4 → 5: the coordination service names broker 2 the controller\n"
	if got := texts(evs); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

// TestHealthOfTheCoordinationService: a failed read of the service
// degrades the cluster, naming the error; a controller the service names
// and Metadata does not degrades it only after the grace an election
// takes.
func TestHealthOfTheCoordinationService(t *testing.T) {
	s := &Server{opts: Options{Refresh: DefaultRefresh}}
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	all := []int32{1, 2, 3}
	st := view(t0, 1, nil, part(1, 0, all, all))
	st.Coord = &coordView{ControllerID: -1, Error: "zk: could not connect to a server", At: t0}
	if c := s.clusterOf(st); c.Health != "degraded" || !slices.Contains(c.Reasons, "the coordination service: zk: could not connect to a server") || c.ControllerEpoch != nil {
		t.Errorf("service down: got %s %q epoch %v, want degraded naming the service's error and no epoch", c.Health, c.Reasons, c.ControllerEpoch)
	}
	st.Coord = &coordView{ControllerID: 2, Epoch: 7, At: t0.Add(time.Second), disagreeSince: t0}
	if c := s.clusterOf(st); c.Health != "ok" || c.ControllerEpoch == nil || *c.ControllerEpoch != 7 {
		t.Errorf("a controller just elected: got %s %q epoch %v, want ok with epoch 7", c.Health, c.Reasons, c.ControllerEpoch)
	}
	st.Coord.At = t0.Add(s.disagreeGrace())
	if c := s.clusterOf(st); c.Health != "degraded" || len(c.Reasons) != 1 || !strings.Contains(c.Reasons[0], "names broker 2 the controller, the brokers broker 1") {
		t.Errorf("disagreeing past the grace: got %s %q, want degraded naming both controllers", c.Health, c.Reasons)
	}
}
