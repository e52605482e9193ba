package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The poller reads the cluster's state every Options.Refresh over the
// Kafka protocol, as any client may: Metadata (topics, partitions,
// leaders and ISR), DescribeCluster (brokers, controller, cluster id),
// DescribeConfigs of a broker (coordination.backend), DescribeQuorum on
// embedded Raft, ListPartitionReassignments, and a probe of every broker
// (when it last answered). For the partitions a page watches it also
// reads each replica's log end offset (ListOffsets from Kafka's debugging
// replica id, -2, answered by every replica) and the high watermark (the
// leader's latest for a consumer, -1). Successive polls are diffed into
// the timeline's events (timeline.go). Given Options.Coordination, each
// poll also asks the coordination service for the controller and its
// epoch, beside the Kafka requests.

// brokerView is a broker as the console last saw it.
type brokerView struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Rack *string `json:"rack,omitempty"`
	// State is "live" (listed by the cluster), "fenced" (listed as fenced
	// by DescribeCluster v2) or "gone" (listed before, not any more: its
	// session ended and the controller fenced it).
	State      string `json:"state"`
	Controller bool   `json:"controller"`
	// LastAnswer is when the broker last answered the console's probe;
	// zero if never.
	LastAnswer time.Time `json:"lastAnswer,omitzero"`
	// GoneAt is when the console first saw it missing.
	GoneAt time.Time `json:"goneAt,omitzero"`
}

// partitionView is a partition as Metadata describes it.
type partitionView struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Replicas    []int32 `json:"replicas"` // AR
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline"`
	Error       string  `json:"error,omitempty"`
}

// underReplicated reports whether the ISR is smaller than the AR.
func (p *partitionView) underReplicated() bool { return len(p.ISR) < len(p.Replicas) }

// isOffline reports whether the partition has no leader.
func (p *partitionView) isOffline() bool { return p.Leader < 0 }

// topicView is a topic as Metadata describes it, partitions by index.
type topicView struct {
	Name       string
	Internal   bool
	Partitions []partitionView
	Error      string
}

// quorumMember is one member of the Raft quorum as its leader sees it.
type quorumMember struct {
	ID           int32 `json:"id"`
	Voter        bool  `json:"voter"`
	LogEndOffset int64 `json:"logEndOffset"`
	// Lag is the leader's log end offset minus the member's.
	Lag int64 `json:"lag"`
	// LastFetch is when the leader last heard from it (ms since the
	// epoch, -1 if unknown).
	LastFetch int64 `json:"lastFetchMs"`
}

// quorumView is the embedded Raft quorum (DescribeQuorum).
type quorumView struct {
	LeaderID      int32          `json:"leaderId"`
	LeaderEpoch   int32          `json:"leaderEpoch"`
	HighWatermark int64          `json:"highWatermark"`
	Members       []quorumMember `json:"members"`
	Error         string         `json:"error,omitempty"`
}

// coordView is what the coordination service (Options.Coordination)
// answered at one poll.
type coordView struct {
	// ControllerID is the controller the service names, -1 for none or
	// when it did not answer; Epoch its controller epoch, 0 then.
	ControllerID int32 `json:"controllerId"`
	Epoch        int64 `json:"epoch"`
	// LatencyMs is how long the read took, answered or not.
	LatencyMs float64   `json:"latencyMs"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
	// disagreeSince is when the service and Metadata began to name
	// different controllers, zero while they agree (or one of them
	// names none, or the service did not answer).
	disagreeSince time.Time
}

// reassignment is one partition's reassignment in progress.
type reassignment struct {
	Replicas []int32 `json:"replicas"`
	Adding   []int32 `json:"adding"`
	Removing []int32 `json:"removing"`
}

// clusterState is one poll's view of the cluster.
type clusterState struct {
	At           time.Time
	ClusterID    string
	ControllerID int32
	Brokers      map[int32]*brokerView
	// Backend is the coordination.backend a broker describes ("raft",
	// "zookeeper", "etcd"), empty when no broker said.
	Backend string
	Quorum  *quorumView
	// Coord is what the coordination service answered, nil without
	// Options.Coordination.
	Coord  *coordView
	Topics map[string]*topicView
	// names are the topics' names, sorted.
	names []string
	// Reassignments are the reassignments in progress; nil when the
	// poll could not list them.
	Reassignments map[topicPartition]reassignment
	// Error is why the poll failed, if it did: the cluster is
	// unreachable from the console.
	Error string
}

// topicPartition names a partition.
type topicPartition struct {
	Topic     string
	Partition int32
}

// offsetSample is what the console last read of a watched partition's
// replicas.
type offsetSample struct {
	At time.Time
	// HW is the leader's high watermark, -1 if unknown.
	HW int64
	// LEO is each replica's log end offset, by broker; a replica that did
	// not answer is missing.
	LEO map[int32]int64
}

// watch is the partitions a stream follows.
type watch struct {
	topic      string
	partitions []int32
}

// poller owns the console's view of the cluster: the last poll, the
// offsets of watched partitions, the timeline, and the streams to wake.
type poller struct {
	s *Server

	mu      sync.Mutex
	state   *clusterState
	offsets map[topicPartition]offsetSample
	watches map[*watch]struct{}
	// changed is closed and replaced after every poll: streams wait on it.
	changed chan struct{}
	tl      timeline
	// lastAnswer is when each broker last answered a probe.
	lastAnswer map[int32]time.Time
	// backendAsked is set once a broker answered what its
	// coordination.backend is, if only that it has none (a Kafka broker);
	// the poll goroutine alone uses it.
	backendAsked bool
	// lags are each watched replica's LEO behind its leader's at the
	// last sample that had both: the lag a shrink of the ISR reports.
	lags map[topicPartition]map[int32]replicaLag
}

func newPoller(s *Server) *poller {
	return &poller{s: s, offsets: map[topicPartition]offsetSample{}, watches: map[*watch]struct{}{},
		changed: make(chan struct{}), lastAnswer: map[int32]time.Time{}, tl: newTimeline(1000),
		lags: map[topicPartition]map[int32]replicaLag{}}
}

// run polls every Refresh until ctx ends.
func (p *poller) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		p.pollOnce(ctx)
		t.Reset(max(0, p.s.opts.Refresh-time.Since(start)))
	}
}

// snapshot returns the last poll's state (nil before the first) and the
// channel closed at the next.
func (p *poller) snapshot() (*clusterState, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.changed
}

// addWatch registers w until the returned function is called.
func (p *poller) addWatch(w *watch) func() {
	p.mu.Lock()
	p.watches[w] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.watches, w)
		p.mu.Unlock()
	}
}

// requestTimeout bounds each request of a poll, so that a broker that
// stopped answering delays the view by no more than it.
func (p *poller) requestTimeout() time.Duration {
	return max(time.Second, 4*p.s.opts.Refresh)
}

// pollOnce reads the cluster's state, diffs it into events and wakes
// the streams; then it probes the brokers and reads the watched
// partitions' offsets, and wakes them again. The two phases keep a
// broker that hangs (its requests time out rather than fail) from
// delaying what Metadata already shows: a new leader, a shrunk ISR.
func (p *poller) pollOnce(ctx context.Context) {
	// The coordination service is asked beside the brokers, so that a
	// slow one delays neither.
	var st *clusterState
	var cv *coordView
	var rwg sync.WaitGroup
	rwg.Go(func() { st = p.readState(ctx) })
	if p.s.opts.Coordination != nil {
		rwg.Go(func() { cv = p.readCoordination(ctx) })
	}
	rwg.Wait()

	p.mu.Lock()
	prev := p.state
	if cv != nil {
		var since time.Time
		if prev != nil && prev.Coord != nil {
			since = prev.Coord.disagreeSince
		}
		metaController := st.ControllerID
		if st.Error != "" && prev != nil {
			metaController = prev.ControllerID
		}
		switch {
		case cv.Error != "" || cv.ControllerID < 0 || metaController < 0 || cv.ControllerID == metaController:
			since = time.Time{}
		case since.IsZero():
			since = cv.At
		}
		cv.disagreeSince = since
		st.Coord = cv
	}
	if st.Error == "" {
		for id, b := range st.Brokers {
			b.LastAnswer = p.lastAnswer[id]
		}
		if prev != nil {
			p.carryGoneLocked(prev, st)
		}
		for _, ev := range p.tl.diff(prev, st, p.lags, p.lastAnswer) {
			p.tl.add(ev)
		}
		p.state = st
	} else if prev == nil {
		p.state = st
	} else {
		// Keep the last view, marked with why it is stale.
		stale := *prev
		stale.Error = st.Error
		stale.Coord = st.Coord
		p.state = &stale
	}
	st = p.state
	// The brokers to probe: every one listed now, and those listed
	// before that are not known gone (the poll may have failed).
	ids := map[int32]bool{}
	for id, b := range st.Brokers {
		if b.State != "gone" || prev == nil || prev.Brokers[id] == nil || prev.Brokers[id].State != "gone" {
			ids[id] = true
		}
	}
	watched := map[topicPartition]bool{}
	for w := range p.watches {
		for _, i := range w.partitions {
			watched[topicPartition{w.topic, i}] = true
		}
	}
	p.wakeLocked()
	p.mu.Unlock()

	var answered map[int32]time.Time
	var offsets map[topicPartition]offsetSample
	var wg sync.WaitGroup
	wg.Go(func() { answered = p.probe(ctx, ids) })
	wg.Go(func() { offsets = p.readOffsets(ctx, st, watched) })
	wg.Wait()

	p.mu.Lock()
	defer p.mu.Unlock()
	for id, at := range answered {
		p.lastAnswer[id] = at
	}
	if p.state == st {
		// A copy: the state published above is read without the lock.
		next := *st
		next.Brokers = make(map[int32]*brokerView, len(st.Brokers))
		for id, b := range st.Brokers {
			nb := *b
			nb.LastAnswer = p.lastAnswer[id]
			next.Brokers[id] = &nb
		}
		p.state = &next
	}
	p.updateLagsLocked(st, offsets, watched)
	// Samples of partitions no longer watched are dropped; those that
	// failed this time keep their last value.
	nextOffsets := map[topicPartition]offsetSample{}
	for tp := range watched {
		if o, ok := offsets[tp]; ok {
			nextOffsets[tp] = o
		} else if o, ok := p.offsets[tp]; ok {
			nextOffsets[tp] = o
		}
	}
	p.offsets = nextOffsets
	p.wakeLocked()
}

// wakeLocked wakes every stream waiting for a change.
func (p *poller) wakeLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// updateLagsLocked records, from a sample of the watched partitions,
// each replica's LEO behind its leader's, and forgets the partitions no
// longer watched.
func (p *poller) updateLagsLocked(st *clusterState, offsets map[topicPartition]offsetSample, watched map[topicPartition]bool) {
	for tp, o := range offsets {
		leader := st.Topics[tp.Topic].Partitions[tp.Partition].Leader
		leaderLEO, ok := o.LEO[leader]
		if !ok {
			continue
		}
		if p.lags[tp] == nil {
			p.lags[tp] = map[int32]replicaLag{}
		}
		for r, leo := range o.LEO {
			p.lags[tp][r] = replicaLag{Lag: leaderLEO - leo, At: o.At}
		}
	}
	for tp := range p.lags {
		if !watched[tp] {
			delete(p.lags, tp)
		}
	}
}

// readState reads one view of the cluster.
func (p *poller) readState(ctx context.Context) *clusterState {
	st := &clusterState{At: time.Now(), ControllerID: -1, Brokers: map[int32]*brokerView{},
		Topics: map[string]*topicView{}, Reassignments: map[topicPartition]reassignment{}}
	rctx, cancel := context.WithTimeout(ctx, p.requestTimeout())
	defer cancel()

	mreq := kmsg.NewPtrMetadataRequest()
	mresp, err := mreq.RequestWith(rctx, p.s.cl)
	if err != nil {
		st.Error = fmt.Sprintf("metadata: %v", err)
		return st
	}
	st.At = time.Now()
	st.ControllerID = mresp.ControllerID
	if mresp.ClusterID != nil {
		st.ClusterID = *mresp.ClusterID
	}
	for _, b := range mresp.Brokers {
		st.Brokers[b.NodeID] = &brokerView{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, State: "live"}
	}
	for _, t := range mresp.Topics {
		if t.Topic == nil {
			continue
		}
		tv := &topicView{Name: *t.Topic, Internal: t.IsInternal}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			tv.Error = err.Error()
		}
		for _, mp := range t.Partitions {
			pv := partitionView{Partition: mp.Partition, Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch,
				Replicas: mp.Replicas, ISR: mp.ISR, Offline: mp.OfflineReplicas}
			if err := kerr.ErrorForCode(mp.ErrorCode); err != nil && !errors.Is(err, kerr.LeaderNotAvailable) {
				pv.Error = err.Error()
			}
			tv.Partitions = append(tv.Partitions, pv)
		}
		sort.Slice(tv.Partitions, func(i, j int) bool { return tv.Partitions[i].Partition < tv.Partitions[j].Partition })
		st.Topics[tv.Name] = tv
		st.names = append(st.names, tv.Name)
	}
	slices.Sort(st.names)

	// DescribeCluster v2 lists fenced brokers too (a Kafka cluster on
	// KRaft has them; tripod lists live brokers only).
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dreq.IncludeFencedBrokers = true
	if dresp, err := dreq.RequestWith(rctx, p.s.cl); err == nil && dresp.ErrorCode == 0 {
		st.ClusterID = dresp.ClusterID
		for _, b := range dresp.Brokers {
			bv := st.Brokers[b.NodeID]
			if bv == nil {
				bv = &brokerView{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, State: "live"}
				st.Brokers[b.NodeID] = bv
			}
			if b.IsFenced {
				bv.State = "fenced"
			}
		}
	}
	if bv := st.Brokers[st.ControllerID]; bv != nil {
		bv.Controller = true
	}

	st.Backend = p.backend(rctx, st)
	if st.Backend == "raft" {
		st.Quorum = p.readQuorum(rctx)
	}
	if rs, err := p.s.adm.ListPartitionReassignments(rctx, nil); err == nil {
		rs.Each(func(r kadm.ListPartitionReassignmentsResponse) {
			st.Reassignments[topicPartition{r.Topic, r.Partition}] = reassignment{r.Replicas, r.AddingReplicas, r.RemovingReplicas}
		})
	} else {
		st.Reassignments = nil // unknown this time
	}
	return st
}

// readCoordination asks the coordination service for the controller,
// within the poll's request timeout.
func (p *poller) readCoordination(ctx context.Context) *coordView {
	rctx, cancel := context.WithTimeout(ctx, p.requestTimeout())
	defer cancel()
	start := time.Now()
	info, err := p.s.opts.Coordination.Controller(rctx)
	cv := &coordView{ControllerID: int32(info.ID), Epoch: info.Epoch, LatencyMs: ms(time.Since(start)), At: time.Now()}
	if err != nil {
		cv.ControllerID, cv.Epoch, cv.Error = -1, 0, err.Error()
	}
	return cv
}

// backend asks a live broker for its coordination.backend, once: every
// broker of a cluster has the same.
func (p *poller) backend(ctx context.Context, st *clusterState) string {
	p.mu.Lock()
	prev := p.state
	p.mu.Unlock()
	if p.backendAsked {
		if prev == nil {
			return ""
		}
		return prev.Backend
	}
	id := int32(-1)
	for bid, b := range st.Brokers {
		if b.State == "live" {
			id = bid
			break
		}
	}
	if id < 0 {
		return ""
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	res.ResourceName = fmt.Sprint(id)
	res.ConfigNames = []string{"coordination.backend"}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, p.s.cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		return ""
	}
	p.backendAsked = true
	// A broker that answers without the key is not tripod's (a Kafka
	// broker): its backend is not known to the console.
	for _, c := range resp.Resources[0].Configs {
		if c.Name == "coordination.backend" && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// readQuorum asks for the Raft quorum's state (DescribeQuorum).
func (p *poller) readQuorum(ctx context.Context) *quorumView {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, p.s.cl)
	if err != nil {
		return &quorumView{Error: err.Error()}
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return &quorumView{Error: err.Error()}
	}
	for _, t := range resp.Topics {
		for _, qp := range t.Partitions {
			if t.Topic != "__cluster_metadata" || qp.Partition != 0 {
				continue
			}
			if err := kerr.ErrorForCode(qp.ErrorCode); err != nil {
				return &quorumView{Error: err.Error()}
			}
			q := &quorumView{LeaderID: qp.LeaderID, LeaderEpoch: qp.LeaderEpoch, HighWatermark: qp.HighWatermark}
			var leaderEnd int64 = -1
			for _, v := range qp.CurrentVoters {
				if v.ReplicaID == qp.LeaderID {
					leaderEnd = v.LogEndOffset
				}
			}
			add := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, voter bool) {
				for _, r := range rs {
					q.Members = append(q.Members, quorumMember{ID: r.ReplicaID, Voter: voter, LogEndOffset: r.LogEndOffset,
						Lag: max(0, leaderEnd-r.LogEndOffset), LastFetch: r.LastFetchTimestamp})
				}
			}
			add(qp.CurrentVoters, true)
			add(qp.Observers, false)
			return q
		}
	}
	return &quorumView{Error: "no __cluster_metadata partition in the answer"}
}

// probe asks each broker of ids for its metadata of no topic, and
// returns when each answered: the last answer of a broker that fails is
// where the console's failover times start.
func (p *poller) probe(ctx context.Context, ids map[int32]bool) map[int32]time.Time {
	rctx, cancel := context.WithTimeout(ctx, p.requestTimeout())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := map[int32]time.Time{}
	for id := range ids {
		wg.Go(func() {
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			if _, err := req.RequestWith(rctx, p.s.cl.Broker(int(id))); err == nil {
				mu.Lock()
				answered[id] = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return answered
}

// carryGoneLocked keeps, in st, the brokers prev listed that st does
// not: gone (fenced), with when they last answered.
func (p *poller) carryGoneLocked(prev, st *clusterState) {
	for id, b := range prev.Brokers {
		if _, ok := st.Brokers[id]; ok {
			continue
		}
		gone := *b
		gone.Controller = false
		if gone.State != "gone" {
			gone.State, gone.GoneAt = "gone", st.At
		}
		gone.LastAnswer = p.lastAnswer[id]
		st.Brokers[id] = &gone
	}
}

// readOffsets reads, for the watched partitions, each replica's LEO
// (ListOffsets latest from the debugging replica id, sent to each
// replica's broker) and the HW (latest for a consumer, sent to the
// leader). One request per broker, all at once.
func (p *poller) readOffsets(ctx context.Context, st *clusterState, watched map[topicPartition]bool) map[topicPartition]offsetSample {
	out := map[topicPartition]offsetSample{}
	if len(watched) == 0 || st.Error != "" {
		return out
	}
	type query struct {
		replicaID int32
		tps       []topicPartition
	}
	// byBroker[id] are the -2 (LEO) and -1 (HW) queries for broker id.
	byBroker := map[int32][2]*query{}
	for tp := range watched {
		t := st.Topics[tp.Topic]
		if t == nil || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		pv := t.Partitions[tp.Partition]
		out[tp] = offsetSample{At: st.At, HW: -1, LEO: map[int32]int64{}}
		add := func(id int32, i int) {
			b := st.Brokers[id]
			if b == nil || b.State == "gone" {
				return
			}
			qs := byBroker[id]
			if qs[i] == nil {
				qs[i] = &query{replicaID: []int32{-2, -1}[i]}
				byBroker[id] = qs
			}
			qs[i].tps = append(qs[i].tps, tp)
		}
		for _, r := range pv.Replicas {
			add(r, 0)
		}
		if pv.Leader >= 0 {
			add(pv.Leader, 1)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, p.requestTimeout())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for id, qs := range byBroker {
		for _, q := range qs {
			if q == nil {
				continue
			}
			wg.Go(func() {
				req := kmsg.NewPtrListOffsetsRequest()
				req.ReplicaID = q.replicaID
				byTopic := map[string]*kmsg.ListOffsetsRequestTopic{}
				for _, tp := range q.tps {
					rt := byTopic[tp.Topic]
					if rt == nil {
						t := kmsg.NewListOffsetsRequestTopic()
						t.Topic = tp.Topic
						rt = &t
						byTopic[tp.Topic] = rt
					}
					rp := kmsg.NewListOffsetsRequestTopicPartition()
					rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.Partition, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				for _, rt := range byTopic {
					req.Topics = append(req.Topics, *rt)
				}
				resp, err := req.RequestWith(rctx, p.s.cl.Broker(int(id)))
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, t := range resp.Topics {
					for _, rp := range t.Partitions {
						tp := topicPartition{t.Topic, rp.Partition}
						o, ok := out[tp]
						if !ok || rp.ErrorCode != 0 {
							continue
						}
						if q.replicaID == -2 {
							o.LEO[id] = rp.Offset
						} else {
							o.HW = rp.Offset
						}
						out[tp] = o
					}
				}
			})
		}
	}
	wg.Wait()
	return out
}
