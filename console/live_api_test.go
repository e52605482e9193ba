package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// getAPI GETs the console's path and decodes its JSON body into v,
// returning the status.
func getAPI(t *testing.T, url, path string, v any) int {
	t.Helper()
	resp, err := http.Get(url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil && resp.StatusCode == http.StatusOK {
			t.Fatalf("GET %s: decode: %v", path, err)
		}
	}
	return resp.StatusCode
}

// sse is one server-sent event.
type sse struct {
	id, name string
	data     []byte
}

// follow reads the server-sent events of path, with header lastEventID
// if not empty, until until returns true or ctx ends (failing t).
func follow(t *testing.T, ctx context.Context, url, path, lastEventID, what string, until func(sse) bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("GET %s: content type %q, want text/event-stream", path, ct)
	}
	r := bufio.NewReader(resp.Body)
	var ev sse
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF || ctx.Err() != nil {
				t.Fatalf("GET %s: the stream ended before %s: %v", path, what, err)
			}
			t.Fatalf("GET %s: %v", path, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if until(ev) {
				return
			}
			ev = sse{}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = []byte(line[len("data: "):])
		}
	}
}

// TestLiveAPI: on three brokers, the console's JSON API and its stream.
// The cluster's summary names the brokers, the backend and the Raft
// quorum; the topics list is searched and paginated, bad pages are
// refused; a watched topic's partitions carry each replica's LEO and the
// HW; a reassignment shows in the timeline, which a stream resumes after
// the Last-Event-ID it names.
func TestLiveAPI(t *testing.T) {
	c := startCluster(t, "raft", 3)
	_, url := startConsole(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopics(t, c, 2, 3, "api")
	createTopics(t, c, 1, 2, "moving")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic("api"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	// The console sees the topics at its next poll.
	waitTopic := func(name string, partitions int) (topic topicJSON) {
		for deadline := time.Now().Add(20 * time.Second); ; {
			status := getAPI(t, url, "/api/topics/"+name, &topic)
			if status == http.StatusOK && topic.Total == partitions && topic.Summary.Offline == 0 {
				return topic
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /api/topics/%s: got %d, %d partitions, %d offline; want %d with leaders within 20s",
					name, status, topic.Total, topic.Summary.Offline, partitions)
			}
			time.Sleep(50 * time.Millisecond) // the polling interval of the check
		}
	}
	topic := waitTopic("api", 2)

	var cj clusterJSON
	if status := getAPI(t, url, "/api/cluster", &cj); status != http.StatusOK {
		t.Fatalf("GET /api/cluster: got %d, want 200", status)
	}
	voters := 0
	if cj.Quorum != nil {
		for _, m := range cj.Quorum.Members {
			if m.Voter {
				voters++
			}
		}
	}
	if len(cj.Brokers) != 3 || cj.Backend != "raft" || cj.ControllerID < 0 || voters != 3 {
		t.Errorf("GET /api/cluster: got %d brokers, backend %q, controller %d, %d voters; want 3, raft, one, 3",
			len(cj.Brokers), cj.Backend, cj.ControllerID, voters)
	}

	var tj topicsJSON
	getAPI(t, url, "/api/topics?q=AP&size=1", &tj)
	if tj.Total != 1 || len(tj.Topics) != 1 || tj.Topics[0].Name != "api" || tj.Topics[0].Partitions != 2 || tj.Topics[0].ReplicationFactor != 3 {
		t.Errorf("GET /api/topics?q=AP: got %+v, want the topic api, 2 partitions, RF 3", tj)
	}
	for _, path := range []string{"/api/topics?page=-1", "/api/topics?size=0", "/api/topics?size=x", "/api/topics/api?size=5000", "/api/stream?since=x"} {
		if status := getAPI(t, url, path, nil); status != http.StatusBadRequest {
			t.Errorf("GET %s: got %d, want 400", path, status)
		}
	}
	if status := getAPI(t, url, "/api/topics/nothing-here", nil); status != http.StatusNotFound {
		t.Errorf("GET /api/topics/nothing-here: got %d, want 404", status)
	}
	if len(topic.Configs) == 0 || topic.Total != 2 || len(topic.Partitions) != 2 {
		t.Errorf("GET /api/topics/api: %d configs, %d of %d partitions; want configs and 2 of 2", len(topic.Configs), len(topic.Partitions), topic.Total)
	}

	// Every replica of api-0 at LEO 5, and the HW 5 (acks=all).
	follow(t, ctx, url, "/api/stream?topic=api&size=1", "", "api-0's replicas at LEO 5", func(ev sse) bool {
		if ev.name != "partitions" {
			return false
		}
		var pj partitionsJSON
		if err := json.Unmarshal(ev.data, &pj); err != nil {
			t.Fatalf("partitions event: %v", err)
		}
		if len(pj.Partitions) != 1 || pj.Total != 2 {
			t.Fatalf("partitions event of page size 1: got %d of %d partitions, want 1 of 2", len(pj.Partitions), pj.Total)
		}
		p := pj.Partitions[0]
		return p.HW == 5 && len(p.LEO) == 3 && p.LEO["1"] == 5 && p.LEO["2"] == 5 && p.LEO["3"] == 5
	})

	// Reassign moving-0 to include the broker it lacks.
	adm := kadm.NewClient(cl)
	ar := waitTopic("moving", 1).Partitions[0].Replicas
	var missing int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(ar, id) {
			missing = id
		}
	}
	target := []int32{missing, ar[0]}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moving", 0, target)
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("reassign moving-0 to %v: %v", target, err)
	}
	var seen []event
	follow(t, ctx, url, "/api/stream?since=0", "", "moving-0's reassignment in the timeline", func(ev sse) bool {
		if ev.name != "event" {
			return false
		}
		var e event
		if err := json.Unmarshal(ev.data, &e); err != nil {
			t.Fatalf("event: %v", err)
		}
		if ev.id != fmt.Sprint(e.Seq) {
			t.Fatalf("event id %q, want its number %d", ev.id, e.Seq)
		}
		seen = append(seen, e)
		return e.Kind == kindReassignment && e.Topic == "moving" && strings.Contains(e.Text, fmt.Sprint(target))
	})

	t.Logf("timeline: %s", seen[len(seen)-1].Text)

	// A stream resumed after the next to last event starts with the last.
	last := seen[len(seen)-1].Seq
	follow(t, ctx, url, "/api/stream", fmt.Sprint(last-1), "the stream to resume", func(ev sse) bool {
		if ev.name != "event" {
			return false
		}
		if ev.id != fmt.Sprint(last) {
			t.Fatalf("the stream resumed after event %d with event %s, want %d", last-1, ev.id, last)
		}
		return true
	})
	var evs eventsJSON
	getAPI(t, url, "/api/events?kind=reassignment", &evs)
	if len(evs.Events) == 0 || evs.Seq < last {
		t.Errorf("GET /api/events?kind=reassignment: %d events, last number %d; want the reassignment and at least %d", len(evs.Events), evs.Seq, last)
	}
}
