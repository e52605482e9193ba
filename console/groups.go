package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/internal/offsetreset"
)

// The bounds of the consumer groups list.
const defaultGroupsPage, maxGroupsPage = 50, 500

// listedGroup is a line of the consumer groups list.
type listedGroup struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocolType"`
	Members      int    `json:"members"`
	// Lag is the group's total lag over the partitions it committed,
	// nil when it could not be computed (LagError says why).
	Lag      *int64 `json:"lag"`
	LagError string `json:"lagError,omitempty"`
}

// groupsPage is a page of the consumer groups list.
type groupsPage struct {
	// Total is the number of groups that match the search.
	Total  int           `json:"total"`
	Offset int           `json:"offset"`
	Groups []listedGroup `json:"groups"`
}

// isConsumerGroup reports whether a listed group is a consumer group,
// the groups kafka-consumer-groups shows: protocol type "consumer", or
// none yet (a group that only has committed offsets).
func isConsumerGroup(g kadm.ListedGroup) bool {
	return g.ProtocolType == "consumer" || g.ProtocolType == ""
}

// handleGroups answers a page of the consumer groups whose name contains
// q (parameters q, offset, limit), by name, with their members and total
// lag; only the groups of the page are described.
func (d *dataAPI) handleGroups(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", defaultGroupsPage, 1, maxGroupsPage)
	if err != nil {
		writeFailure(w, http.StatusBadRequest, err)
		return
	}
	offset, err := intParam(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		writeFailure(w, http.StatusBadRequest, err)
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	listed, err := d.adm.ListGroups(r.Context())
	if err != nil && len(listed) == 0 {
		writeError(w, http.StatusBadGateway, fmt.Errorf("list groups: %w", err))
		return
	}
	var found []kadm.ListedGroup
	for _, g := range listed.Sorted() {
		if isConsumerGroup(g) && strings.Contains(strings.ToLower(g.Group), q) {
			found = append(found, g)
		}
	}
	page := groupsPage{Total: len(found), Offset: int(offset), Groups: []listedGroup{}}
	found = found[min(int(offset), len(found)):min(int(offset+limit), len(found))]
	if len(found) == 0 {
		writeJSON(w, http.StatusOK, page)
		return
	}
	names := make([]string, len(found))
	for i, g := range found {
		names[i] = g.Group
	}
	lags, lagErr := d.adm.Lag(r.Context(), names...)
	for _, g := range found {
		line := listedGroup{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType}
		l, ok := lags[g.Group]
		switch {
		case !ok && lagErr != nil:
			line.LagError = lagErr.Error()
		case !ok:
			line.LagError = "not in the response"
		case l.Error() != nil:
			line.LagError = l.Error().Error()
		default:
			line.State = l.State
			line.Members = len(l.Members)
			total := totalLag(l.Lag)
			line.Lag = &total
		}
		page.Groups = append(page.Groups, line)
	}
	writeJSON(w, http.StatusOK, page)
}

// totalLag is the sum of a group's lag over the partitions it has
// committed offsets for; as in Kafka, a partition without a committed
// offset has no lag.
func totalLag(l kadm.GroupLag) int64 {
	var total int64
	for _, pl := range l.Sorted() {
		if pl.Err == nil && pl.Commit.At >= 0 {
			total += pl.Lag
		}
	}
	return total
}

// groupMember is a member of a group and its assignment.
type groupMember struct {
	MemberID   string            `json:"memberId"`
	InstanceID string            `json:"instanceId,omitempty"`
	ClientID   string            `json:"clientId"`
	Host       string            `json:"host"`
	Assignment []topicPartitions `json:"assignment"`
}

// topicPartitions are some partitions of a topic.
type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupPartition is a partition a group is assigned or committed.
type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// CommittedOffset, LogEndOffset and Lag are nil where there is none:
	// no commit, or the end offset could not be listed (Error).
	CommittedOffset *int64 `json:"committedOffset"`
	LogEndOffset    *int64 `json:"logEndOffset"`
	Lag             *int64 `json:"lag"`
	MemberID        string `json:"memberId,omitempty"`
	ClientID        string `json:"clientId,omitempty"`
	Error           string `json:"error,omitempty"`
}

// groupDetail is a group's page.
type groupDetail struct {
	Group        string           `json:"group"`
	State        string           `json:"state"`
	ProtocolType string           `json:"protocolType"`
	Protocol     string           `json:"protocol"`
	Coordinator  int32            `json:"coordinator"`
	Members      []groupMember    `json:"members"`
	Partitions   []groupPartition `json:"partitions"`
	TotalLag     int64            `json:"totalLag"`
	// History is the group's total lag over time, oldest first.
	History []lagSample `json:"history"`
	// SampleEvery is how often the console samples the lag, in ms.
	SampleEvery int64 `json:"sampleEvery"`
}

// describeGroup returns group's members, offsets and lag; a group the
// cluster does not know is the request's fault.
func (d *dataAPI) describeGroup(ctx context.Context, group string) (kadm.DescribedGroupLag, error) {
	lags, err := d.adm.Lag(ctx, group)
	l, ok := lags[group]
	switch {
	case !ok && err != nil:
		return l, fmt.Errorf("describe group %s: %w", group, err)
	case !ok:
		return l, fmt.Errorf("describe group %s: not in the response", group)
	case l.Error() != nil:
		return l, fmt.Errorf("describe group %s: %w", group, l.Error())
	case l.State == "Dead" && len(l.Lag) == 0:
		return l, badRequest("consumer group %s does not exist", group)
	}
	return l, nil
}

// handleGroup answers a group's members and assignments, per partition
// its committed offset, log end offset and lag, and its lag over time.
// Asking for a group starts its sampling.
func (d *dataAPI) handleGroup(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	l, err := d.describeGroup(r.Context(), group)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, errBadRequest) {
			status = http.StatusNotFound
			err = errors.New(strings.TrimPrefix(err.Error(), errBadRequest.Error()+": "))
		}
		writeError(w, status, err)
		return
	}
	g := groupDetail{Group: group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
		Coordinator: l.Coordinator.NodeID, Members: []groupMember{}, Partitions: []groupPartition{},
		SampleEvery: lagSampleInterval.Milliseconds()}
	for _, m := range l.Members {
		gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: []topicPartitions{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				gm.Assignment = append(gm.Assignment, topicPartitions{t.Topic, t.Partitions})
			}
		}
		g.Members = append(g.Members, gm)
	}
	for _, pl := range l.Lag.Sorted() {
		p := groupPartition{Topic: pl.Topic, Partition: pl.Partition}
		if pl.Commit.At >= 0 {
			p.CommittedOffset = &pl.Commit.At
		}
		if pl.End.Err == nil {
			p.LogEndOffset = &pl.End.Offset
		}
		if pl.Err == nil && pl.Commit.At >= 0 {
			p.Lag = &pl.Lag
		}
		if pl.Err != nil {
			p.Error = pl.Err.Error()
		}
		if pl.Member != nil {
			p.MemberID, p.ClientID = pl.Member.MemberID, pl.Member.ClientID
		}
		g.Partitions = append(g.Partitions, p)
	}
	g.TotalLag = totalLag(l.Lag)
	g.History = d.lag.view(group, time.Now(), g.TotalLag)
	writeJSON(w, http.StatusOK, g)
}

// resetRequest is the body of POST /api/groups/{group}/reset-offsets.
type resetRequest struct {
	// Scenario is reset-offsets' scenario: to-earliest, to-latest,
	// to-offset (Offset), shift-by (Offset) or to-datetime (Datetime).
	Scenario string `json:"scenario"`
	// Topic limits the reset to its partitions; empty resets every topic
	// the group has committed offsets for (--all-topics).
	Topic    string `json:"topic"`
	Offset   *int64 `json:"offset"`
	Datetime string `json:"datetime"`
	// Execute commits the plan; without it the answer is a dry run.
	Execute bool `json:"execute"`
	// Confirmed, with Execute, is the plan the user confirmed (its
	// topic, partition and newOffset): the reset is refused (409) when
	// the plan made now differs, so what is committed is what was shown.
	Confirmed []resetLine `json:"confirmed"`
}

// resetLine is one partition of a reset's plan.
type resetLine struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// CurrentOffset is the committed offset before the reset, nil when
	// the group has none.
	CurrentOffset *int64 `json:"currentOffset"`
	NewOffset     int64  `json:"newOffset"`
	// Error is why the commit of this partition failed (execute only).
	Error string `json:"error,omitempty"`
}

// resetAnswer is a reset's plan, and with execute what was committed.
type resetAnswer struct {
	Group    string      `json:"group"`
	State    string      `json:"state"`
	Executed bool        `json:"executed"`
	Plan     []resetLine `json:"plan"`
	// Notes are kafka-consumer-groups' notes: offsets moved to the end
	// of the log, a group that would refuse the reset.
	Notes []string `json:"notes"`
}

// scenario returns req's offsetreset scenario, or a 400 error naming the
// field and what it takes.
func (req resetRequest) scenario() (offsetreset.Scenario, error) {
	var sc offsetreset.Scenario
	switch req.Scenario {
	case "to-earliest":
		sc.ToEarliest = true
	case "to-latest":
		sc.ToLatest = true
	case "to-offset":
		if req.Offset == nil || *req.Offset < 0 {
			return sc, badRequest("offset: to-offset needs an offset of at least 0")
		}
		sc.ToOffset = req.Offset
	case "shift-by":
		if req.Offset == nil {
			return sc, badRequest("offset: shift-by needs a number of offsets (negative moves back)")
		}
		sc.ShiftBy = req.Offset
	case "to-datetime":
		t, err := time.Parse(time.RFC3339Nano, req.Datetime)
		if err != nil {
			return sc, badRequest("datetime %q: to-datetime needs an RFC 3339 time such as 2024-05-01T12:00:00Z", req.Datetime)
		}
		sc.ToDatetime = &t
	default:
		return sc, badRequest("scenario %q: want to-earliest, to-latest, to-offset, shift-by or to-datetime", req.Scenario)
	}
	return sc, nil
}

// members says how many members a group has, in words.
func members(n int) string {
	if n == 1 {
		return "1 member"
	}
	return fmt.Sprintf("%d members", n)
}

// errGroupActive is the refusal of a reset while the group has members.
var errGroupActive = errors.New("group has active members")

// errPlanChanged is the refusal of a reset whose plan is no longer the
// one the user confirmed: the logs moved since the dry run.
var errPlanChanged = errors.New("the plan changed since the dry run")

// samePlan reports whether plan commits exactly the confirmed offsets.
func samePlan(plan kadm.Offsets, confirmed []resetLine) bool {
	n := 0
	plan.Each(func(kadm.Offset) { n++ })
	if n != len(confirmed) {
		return false
	}
	for _, c := range confirmed {
		if o, ok := plan.Lookup(c.Topic, c.Partition); !ok || o.At != c.NewOffset {
			return false
		}
	}
	return true
}

// handleResetOffsets plans the reset of a group's committed offsets as
// `tripod groups reset-offsets` does and, with execute, commits it. As
// in Kafka, a reset is refused (409) while the group has members.
func (d *dataAPI) handleResetOffsets(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	var req resetRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: want JSON {scenario, topic, offset, datetime, execute}: %v", err))
		return
	}
	sc, err := req.scenario()
	if err != nil {
		writeFailure(w, http.StatusBadRequest, err)
		return
	}
	answer, err := d.resetOffsets(r.Context(), group, req, sc)
	switch {
	case errors.Is(err, errGroupActive), errors.Is(err, errPlanChanged):
		writeError(w, http.StatusConflict, err)
	case err != nil:
		writeFailure(w, http.StatusBadGateway, err)
	default:
		writeJSON(w, http.StatusOK, answer)
	}
}

// resetOffsets plans group's reset by sc and, with req.Execute, commits
// it.
func (d *dataAPI) resetOffsets(ctx context.Context, group string, req resetRequest, sc offsetreset.Scenario) (resetAnswer, error) {
	a := resetAnswer{Group: group, Plan: []resetLine{}, Notes: []string{}}
	described, err := d.adm.DescribeGroups(ctx, group)
	if err != nil {
		return a, fmt.Errorf("describe group %s: %w", group, err)
	}
	g := described[group]
	if g.Err != nil {
		return a, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	a.State = g.State
	inactive := offsetreset.Inactive(g.State)
	if req.Execute && !inactive {
		return a, fmt.Errorf("reset offsets of group %s: %w: it is %s with %s, and Kafka resets committed offsets only while a group is Empty; stop its consumers first", group, errGroupActive, g.State, members(len(g.Members)))
	}
	fetched, err := d.adm.FetchOffsets(ctx, group)
	if err != nil {
		return a, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	committed := offsetreset.Committed(fetched)
	var partitions kadm.TopicsSet
	if req.Topic == "" {
		partitions = committed.TopicsSet()
		if len(partitions) == 0 {
			return a, badRequest("topic: group %s has no committed offsets; name a topic to reset", group)
		}
	} else {
		topics, err := d.adm.ListTopics(ctx, req.Topic)
		if err != nil {
			return a, fmt.Errorf("describe topic %s: %w", req.Topic, err)
		}
		t, ok := topics[req.Topic]
		switch {
		case !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition):
			return a, badRequest("topic %s: the cluster has no such topic", req.Topic)
		case t.Err != nil:
			return a, fmt.Errorf("describe topic %s: %w", req.Topic, t.Err)
		}
		partitions = kadm.TopicsSet{}
		partitions.Add(req.Topic, t.Partitions.Numbers()...)
	}
	plan, notes, err := offsetreset.Plan(ctx, d.adm, partitions, committed, sc)
	a.Notes = append(a.Notes, notes...)
	if err != nil {
		return a, fmt.Errorf("reset offsets of group %s: %w", group, err)
	}
	if !req.Execute && !inactive {
		a.Notes = append(a.Notes, fmt.Sprintf("Consumer group %s is %s with %s: the reset will be refused until it has none (Empty).", group, g.State, members(len(g.Members))))
	}
	if req.Execute && req.Confirmed != nil && !samePlan(plan, req.Confirmed) {
		return a, fmt.Errorf("reset offsets of group %s: %w (log offsets moved): nothing was committed; run the dry run again", group, errPlanChanged)
	}
	var failed kadm.OffsetResponses
	if req.Execute {
		resps, err := d.adm.CommitOffsets(ctx, group, plan)
		if err != nil {
			return a, fmt.Errorf("commit offsets of group %s: %w", group, err)
		}
		failed = kadm.OffsetResponses{}
		var active bool
		for _, r := range resps.Sorted() {
			if r.Err != nil {
				failed.Add(r)
				active = active || offsetreset.IsActiveMemberError(r.Err)
			}
		}
		if active {
			return a, fmt.Errorf("reset offsets of group %s: %w: members joined before the commit, and Kafka resets committed offsets only while a group is Empty", group, errGroupActive)
		}
		a.Executed = true
	}
	for _, o := range plan.Sorted() {
		line := resetLine{Topic: o.Topic, Partition: o.Partition, NewOffset: o.At}
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok {
			line.CurrentOffset = &c.At
		}
		if f, ok := failed.Lookup(o.Topic, o.Partition); ok {
			line.Error = f.Err.Error()
		}
		a.Plan = append(a.Plan, line)
	}
	return a, nil
}
