package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// routesLive registers the API of the live pages: the cluster, topics and
// partitions, and the event timeline; and starts the poller they read.
func (s *Server) routesLive() {
	s.poll = newPoller(s)
	s.goOwned(s.poll.run)
	s.mux.HandleFunc("GET /api/cluster", s.handleCluster)
	s.mux.HandleFunc("GET /api/topics", s.handleTopics)
	s.mux.HandleFunc("GET /api/topics/{name}", s.handleTopic)
	s.mux.HandleFunc("GET /api/events", s.handleEvents)
	s.mux.HandleFunc("GET /api/stream", s.handleStream)
}

// clusterJSON is GET /api/cluster's answer and the stream's `cluster`
// event.
type clusterJSON struct {
	At           time.Time     `json:"at"`
	ClusterID    string        `json:"clusterId"`
	ControllerID int32         `json:"controllerId"`
	Backend      string        `json:"backend"`
	Brokers      []*brokerView `json:"brokers"`
	Quorum       *quorumView   `json:"quorum,omitempty"`
	// Health is "ok", "degraded" (a broker gone or fenced, a partition
	// under-replicated or offline, no controller, the coordination
	// service not answering or naming another controller than the
	// brokers for longer than an election takes) or "unreachable" (the
	// last poll failed; the rest is the last view the console had).
	Health  string   `json:"health"`
	Reasons []string `json:"reasons"`
	Error   string   `json:"error,omitempty"`
	// ControllerEpoch is not carried by any Kafka response a client can
	// ask for (Metadata and DescribeCluster name the controller only): it
	// is the coordination service's answer, null when the console has no
	// Options.Coordination or the service did not answer.
	ControllerEpoch *int64 `json:"controllerEpoch"`
	// Coordination is what the coordination service last answered, null
	// without Options.Coordination.
	Coordination *coordView `json:"coordination"`

	Topics          int `json:"topics"`
	Partitions      int `json:"partitions"`
	UnderReplicated int `json:"underReplicated"`
	Offline         int `json:"offline"`
	Reassignments   int `json:"reassignments"`
	RefreshMs       int `json:"refreshMs"`
}

// clusterOf summarises st.
func (s *Server) clusterOf(st *clusterState) clusterJSON {
	c := clusterJSON{At: st.At, ClusterID: st.ClusterID, ControllerID: st.ControllerID, Backend: st.Backend,
		Quorum: st.Quorum, Error: st.Error, Topics: len(st.names), Reasons: []string{},
		Reassignments: len(st.Reassignments), RefreshMs: int(s.opts.Refresh.Milliseconds())}
	for _, b := range st.Brokers {
		c.Brokers = append(c.Brokers, b)
		if b.State != "live" {
			c.Reasons = append(c.Reasons, fmt.Sprintf("broker %d is %s", b.ID, b.State))
		}
	}
	slices.SortFunc(c.Brokers, func(a, b *brokerView) int { return int(a.ID - b.ID) })
	for _, t := range st.Topics {
		c.Partitions += len(t.Partitions)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.isOffline() {
				c.Offline++
			} else if p.underReplicated() {
				c.UnderReplicated++
			}
		}
	}
	if c.ControllerID < 0 {
		c.Reasons = append(c.Reasons, "no controller")
	}
	if c.UnderReplicated > 0 {
		c.Reasons = append(c.Reasons, fmt.Sprintf("%d partitions under-replicated", c.UnderReplicated))
	}
	if c.Offline > 0 {
		c.Reasons = append(c.Reasons, fmt.Sprintf("%d partitions offline", c.Offline))
	}
	if st.Quorum != nil && st.Quorum.Error != "" {
		c.Reasons = append(c.Reasons, "the Raft quorum: "+st.Quorum.Error)
	}
	if cv := st.Coord; cv != nil {
		c.Coordination = cv
		switch {
		case cv.Error != "":
			c.Reasons = append(c.Reasons, "the coordination service: "+cv.Error)
		default:
			c.ControllerEpoch = ptr(cv.Epoch)
			if d := cv.At.Sub(cv.disagreeSince); !cv.disagreeSince.IsZero() && d >= s.disagreeGrace() {
				c.Reasons = append(c.Reasons, fmt.Sprintf("the coordination service names broker %d the controller, the brokers broker %d, for %s",
					cv.ControllerID, st.ControllerID, d.Round(time.Second)))
			}
		}
	}
	switch {
	case st.Error != "":
		c.Health = "unreachable"
	case len(c.Reasons) > 0:
		c.Health = "degraded"
	default:
		c.Health = "ok"
	}
	return c
}

// disagreeGrace is how long the coordination service and the brokers'
// Metadata may name different controllers before the cluster shows
// degraded: a controller just elected is named by the service at once
// and by the brokers once it has told them, and a console that polls
// between the two must not flap.
func (s *Server) disagreeGrace() time.Duration {
	return max(5*time.Second, 8*s.opts.Refresh)
}

// current returns the last poll's state, waiting for the first for up to
// the request's timeout.
func (s *Server) current(r *http.Request) (*clusterState, error) {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		st, changed := s.poll.snapshot()
		if st != nil {
			return st, nil
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-deadline.C:
			return nil, fmt.Errorf("the console has not read the cluster yet")
		}
	}
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	st, err := s.current(r)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, s.clusterOf(st))
}

// topicSummary is a row of the topics list.
type topicSummary struct {
	Name              string `json:"name"`
	Internal          bool   `json:"internal"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
	UnderReplicated   int    `json:"underReplicated"`
	Offline           int    `json:"offline"`
	Error             string `json:"error,omitempty"`
}

func summarise(t *topicView) topicSummary {
	ts := topicSummary{Name: t.Name, Internal: t.Internal, Partitions: len(t.Partitions), Error: t.Error}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		ts.ReplicationFactor = max(ts.ReplicationFactor, len(p.Replicas))
		if p.isOffline() {
			ts.Offline++
		} else if p.underReplicated() {
			ts.UnderReplicated++
		}
	}
	return ts
}

// pageOfState reads a list's ?page= and ?size= (def by default, at most
// 1000) and the console's current state, for a handler that pages
// through it; when either cannot be had, it answers the request (400 or
// 503) and returns false.
func (s *Server) pageOfState(w http.ResponseWriter, r *http.Request, def int) (st *clusterState, page, size int, ok bool) {
	page, size, err := pageParams(r, def, 1000)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return nil, 0, 0, false
	}
	if st, err = s.current(r); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return nil, 0, 0, false
	}
	return st, page, size, true
}

// pageParams reads ?page= (from 0) and ?size= (1..maxSize, def by
// default).
func pageParams(r *http.Request, def, maxSize int) (page, size int, err error) {
	q := r.URL.Query()
	page, size = 0, def
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 0 {
			return 0, 0, fmt.Errorf("%w: page %q: want a number from 0", errBadRequest, v)
		}
	}
	if v := q.Get("size"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || size < 1 || size > maxSize {
			return 0, 0, fmt.Errorf("%w: size %q: want a number from 1 to %d", errBadRequest, v, maxSize)
		}
	}
	return page, size, nil
}

// topicsJSON is GET /api/topics's answer: one page of the topics whose
// name holds q.
type topicsJSON struct {
	Total  int            `json:"total"`
	Page   int            `json:"page"`
	Size   int            `json:"size"`
	Topics []topicSummary `json:"topics"`
}

func (s *Server) handleTopics(w http.ResponseWriter, r *http.Request) {
	st, page, size, ok := s.pageOfState(w, r, 50)
	if !ok {
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	var names []string
	for _, n := range st.names {
		if q == "" || strings.Contains(strings.ToLower(n), q) {
			names = append(names, n)
		}
	}
	out := topicsJSON{Total: len(names), Page: page, Size: size, Topics: []topicSummary{}}
	for _, n := range pageOf(names, page, size) {
		out.Topics = append(out.Topics, summarise(st.Topics[n]))
	}
	writeJSON(w, http.StatusOK, out)
}

// pageOf returns page (from 0) of xs, size to a page.
func pageOf[T any](xs []T, page, size int) []T {
	lo := min(len(xs), page*size)
	return xs[lo:min(len(xs), lo+size)]
}

// partitionRow is a row of a topic's partitions table: Metadata's view,
// the OSR (AR minus ISR), and when the topic is watched each replica's
// LEO and the HW.
type partitionRow struct {
	partitionView
	OSR []int32 `json:"osr"`
	// HW is the leader's high watermark, -1 if unknown; LEO each
	// replica's log end offset by broker id, missing where not read.
	HW        int64            `json:"hw"`
	LEO       map[string]int64 `json:"leo"`
	SampledAt time.Time        `json:"sampledAt,omitzero"`
}

// partitionsJSON is one page of a topic's partitions: GET
// /api/topics/{name} holds it, and the stream's `partitions` event is it.
type partitionsJSON struct {
	Topic      string         `json:"topic"`
	Exists     bool           `json:"exists"`
	Summary    topicSummary   `json:"summary"`
	Page       int            `json:"page"`
	Size       int            `json:"size"`
	Total      int            `json:"total"`
	Partitions []partitionRow `json:"partitions"`
	At         time.Time      `json:"at"`
}

// partitionsOf returns page of topic's partitions in st, with the offsets
// the poller has of them.
func (p *poller) partitionsOf(st *clusterState, topic string, page, size int) partitionsJSON {
	out := partitionsJSON{Topic: topic, Page: page, Size: size, Partitions: []partitionRow{}, At: st.At}
	t := st.Topics[topic]
	if t == nil {
		return out
	}
	out.Exists, out.Summary, out.Total = true, summarise(t), len(t.Partitions)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pv := range pageOf(t.Partitions, page, size) {
		row := partitionRow{partitionView: pv, OSR: []int32{}, HW: -1, LEO: map[string]int64{}}
		for _, r := range pv.Replicas {
			if !slices.Contains(pv.ISR, r) {
				row.OSR = append(row.OSR, r)
			}
		}
		if o, ok := p.offsets[topicPartition{topic, pv.Partition}]; ok {
			row.HW, row.SampledAt = o.HW, o.At
			for id, leo := range o.LEO {
				row.LEO[strconv.Itoa(int(id))] = leo
			}
		}
		out.Partitions = append(out.Partitions, row)
	}
	return out
}

// configJSON is one of a topic's configs.
type configJSON struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
	ReadOnly  bool    `json:"readOnly"`
}

// topicJSON is GET /api/topics/{name}'s answer.
type topicJSON struct {
	partitionsJSON
	Configs      []configJSON `json:"configs"`
	ConfigsError string       `json:"configsError,omitempty"`
}

func (s *Server) handleTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	st, page, size, ok := s.pageOfState(w, r, 100)
	if !ok {
		return
	}
	out := topicJSON{partitionsJSON: s.poll.partitionsOf(st, name, page, size), Configs: []configJSON{}}
	if !out.Exists {
		writeError(w, http.StatusNotFound, fmt.Errorf("no topic %s", name))
		return
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(r.Context(), s.cl)
	switch {
	case err != nil:
		out.ConfigsError = err.Error()
	case len(resp.Resources) != 1:
		out.ConfigsError = "no answer for the topic"
	case resp.Resources[0].ErrorCode != 0:
		out.ConfigsError = fmt.Sprintf("error code %d", resp.Resources[0].ErrorCode)
		if m := resp.Resources[0].ErrorMessage; m != nil {
			out.ConfigsError += ": " + *m
		}
	default:
		for _, c := range resp.Resources[0].Configs {
			v := c.Value
			if c.IsSensitive {
				v = nil
			}
			out.Configs = append(out.Configs, configJSON{Name: c.Name, Value: v, Source: strings.ToLower(c.Source.String()),
				Sensitive: c.IsSensitive, ReadOnly: c.ReadOnly})
		}
		slices.SortFunc(out.Configs, func(a, b configJSON) int { return strings.Compare(a.Name, b.Name) })
	}
	writeJSON(w, http.StatusOK, out)
}

// eventsJSON is GET /api/events's answer: the timeline so far (oldest
// first; the console keeps the last 1000), and the last event's number.
type eventsJSON struct {
	Events []event `json:"events"`
	Seq    int64   `json:"seq"`
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	s.poll.mu.Lock()
	evs, seq := s.poll.tl.since(0), s.poll.tl.seq
	s.poll.mu.Unlock()
	out := eventsJSON{Events: []event{}, Seq: seq}
	for _, ev := range evs {
		if kind == "" || ev.Kind == kind {
			out.Events = append(out.Events, ev)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleStream follows the cluster as server-sent events: `cluster` (the
// summary GET /api/cluster answers), with ?topic=NAME `partitions` (the
// page ?page=N of ?size=M of that topic's partitions, with each replica's
// LEO and the HW, which the console reads only while a stream watches
// them), and `event` (each timeline event, its number as the event's id:
// after the one the Last-Event-ID header or ?since= names, or from now).
// A snapshot is sent on connect and after every poll that changed it; the
// stream ends with the request or the server.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("the connection cannot stream"))
		return
	}
	page, size, err := pageParams(r, 100, 1000)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	topic := r.URL.Query().Get("topic")
	s.poll.mu.Lock()
	since := s.poll.tl.seq
	s.poll.mu.Unlock()
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("since")} {
		if v == "" {
			continue
		}
		if since, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%w: event id %q: want a number", errBadRequest, v))
			return
		}
		break
	}

	var wt *watch
	if topic != "" {
		wt = &watch{topic: topic}
		defer s.poll.addWatch(wt)()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()

	var lastCluster, lastPartitions []byte
	send := func(name, id string, data []byte) bool {
		var b bytes.Buffer
		if id != "" {
			fmt.Fprintf(&b, "id: %s\n", id)
		}
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, data)
		if _, err := w.Write(b.Bytes()); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	for {
		st, changed := s.poll.snapshot()
		if st != nil {
			if c, _ := json.Marshal(s.clusterOf(st)); !bytes.Equal(c, lastCluster) {
				if !send("cluster", "", c) {
					return
				}
				lastCluster = c
			}
			if wt != nil {
				pj := s.poll.partitionsOf(st, topic, page, size)
				parts := make([]int32, 0, len(pj.Partitions))
				for _, p := range pj.Partitions {
					parts = append(parts, p.Partition)
				}
				s.poll.mu.Lock()
				wt.partitions = parts
				s.poll.mu.Unlock()
				pj.At = time.Time{} // sent when the partitions change, not each poll
				if c, _ := json.Marshal(pj); !bytes.Equal(c, lastPartitions) {
					if !send("partitions", "", c) {
						return
					}
					lastPartitions = c
				}
			}
			s.poll.mu.Lock()
			evs := s.poll.tl.since(since)
			s.poll.mu.Unlock()
			for _, ev := range evs {
				c, _ := json.Marshal(ev)
				if !send("event", strconv.FormatInt(ev.Seq, 10), c) {
					return
				}
				since = ev.Seq
			}
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}
