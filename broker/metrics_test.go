package broker

import (
	"bufio"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// scrape returns b's /metrics page in Prometheus text format.
func scrape(t *testing.T, b *Broker) string {
	t.Helper()
	rec := httptest.NewRecorder()
	b.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: got status %d, want 200: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// metricValue returns the value of series (a name with its labels, as
// printed: `tripod_requests_total{api="Produce"}`) in a scrape.
func metricValue(page, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		return v, err == nil
	}
	return 0, false
}

// wantMetric fails the test unless series is in page with a value that
// check accepts (described by want).
func wantMetric(t *testing.T, page, series, want string, check func(float64) bool) {
	t.Helper()
	v, ok := metricValue(page, series)
	if !ok {
		t.Fatalf("scrape has no %s, want %s", series, want)
	}
	if !check(v) {
		t.Fatalf("%s: got %v, want %s", series, v, want)
	}
}

func equals(want float64) func(float64) bool  { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }

// TestMetricsScrapeShowsRequestsAndBrokerState produces and consumes with
// franz-go on a one-broker cluster and scrapes its metrics: produce and
// fetch requests are counted and timed, no fetch counts as a follower's,
// bytes are counted, the broker holds and leads both partitions, none is
// under-replicated or offline, it is the active controller at an epoch,
// and the Go and process collectors are there.
func TestMetricsScrapeShowsRequestsAndBrokerState(t *testing.T) {
	const topic = "metered"
	b := startBroker(t, testConfig(t))
	createLocalTopic(t, b, topic, 2)
	ctx := testContext(t, 30*time.Second)

	producer := newClient(t, b, kgo.DefaultProduceTopic(topic))
	var records []*kgo.Record
	for i := range 10 {
		records = append(records, &kgo.Record{Value: []byte(fmt.Sprintf("record-%d", i))})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	consumer := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for seen := 0; seen < len(records); {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consume %d of %d records: %v", seen, len(records), err)
		}
		seen += len(fetches.Records())
	}

	page := scrape(t, b)
	wantMetric(t, page, `tripod_requests_total{api="Produce"}`, ">= 1", atLeast(1))
	wantMetric(t, page, `tripod_request_duration_seconds_count{api="Produce"}`, ">= 1", atLeast(1))
	wantMetric(t, page, `tripod_requests_total{api="Fetch"}`, ">= 1", atLeast(1))
	wantMetric(t, page, `tripod_requests_total{api="FetchFollower"}`, "0", equals(0))
	wantMetric(t, page, `tripod_requests_total{api="Metadata"}`, ">= 1", atLeast(1))
	wantMetric(t, page, `tripod_bytes_in_total`, "> 0", atLeast(1))
	wantMetric(t, page, `tripod_bytes_out_total`, "> 0", atLeast(1))
	wantMetric(t, page, `tripod_partitions`, "2", equals(2))
	wantMetric(t, page, `tripod_leader_partitions`, "2", equals(2))
	wantMetric(t, page, `tripod_under_replicated_partitions`, "0", equals(0))
	wantMetric(t, page, `tripod_offline_partitions`, "0", equals(0))
	wantMetric(t, page, `tripod_active_controller`, "1", equals(1))
	wantMetric(t, page, `tripod_controller_epoch`, ">= 1", atLeast(1))
	wantMetric(t, page, `tripod_leader_elections_total`, "0 (a topic's first leaders are no election)", equals(0))
	wantMetric(t, page, `tripod_isr_shrinks_total`, "0", equals(0))
	wantMetric(t, page, `go_goroutines`, "> 0", atLeast(1))
	wantMetric(t, page, `process_resident_memory_bytes`, "> 0", atLeast(1))
}

// TestRequestLabelTellsFollowerFetches labels a fetch with a replica id,
// in the old field (v0-14) or KIP-903's replica state (v15+), as
// FetchFollower and every other request by its API name.
func TestRequestLabelTellsFollowerFetches(t *testing.T) {
	consumer := kmsg.NewPtrFetchRequest()
	oldFollower := kmsg.NewPtrFetchRequest()
	oldFollower.ReplicaID = 2
	newFollower := kmsg.NewPtrFetchRequest()
	newFollower.SetVersion(15)
	newFollower.ReplicaState.ID = 3
	for _, tc := range []struct {
		req  kmsg.Request
		want string
	}{
		{consumer, "Fetch"},
		{oldFollower, "FetchFollower"},
		{newFollower, "FetchFollower"},
		{kmsg.NewPtrProduceRequest(), "Produce"},
		{kmsg.NewPtrMetadataRequest(), "Metadata"},
	} {
		req := &request{header: requestHeader{key: tc.req.Key()}, kreq: tc.req}
		if got := requestLabel(req); got != tc.want {
			t.Errorf("%T with replica id: got label %q, want %q", tc.req, got, tc.want)
		}
	}
}

// TestLeaderElectionsCountNewLeaderEpochsOnce feeds the sender hook the
// LeaderAndIsr requests a controller sends and checks what counts as an
// election: a new leader epoch above the metadata cache's, once however
// many replicas it is sent to; not a topic's first leaders, not a new
// controller's resent state, not a partition left without a leader.
func TestLeaderElectionsCountNewLeaderEpochsOnce(t *testing.T) {
	b := &Broker{cache: metadata.NewCache(), replicas: replica.NewManager(&config.Config{}, &replica.LogDirs{}, nil, replica.Deps{}), member: &membership{}}
	m := newMetrics(b)
	topicID := [16]byte{1}
	state := func(leader coord.BrokerID, epoch int32) controller.PartitionInfo {
		return controller.PartitionInfo{
			PartitionState: coord.PartitionState{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: epoch, ISR: []coord.BrokerID{1, 2, 3}},
			TopicID:        topicID,
			Replicas:       []coord.BrokerID{1, 2, 3},
		}
	}
	// sendToReplicas sends p to the three replicas, as the controller does,
	// and records it in the cache as the UpdateMetadata that follows does.
	sendToReplicas := func(p controller.PartitionInfo) {
		for range 3 {
			m.leaderAndIsrSent(&controller.LeaderAndIsrRequest{Partitions: []controller.PartitionInfo{p}})
		}
		b.cache.Update(&controller.UpdateMetadataRequest{Partitions: []controller.PartitionInfo{p}}, false)
	}
	steps := []struct {
		what  string
		state controller.PartitionInfo
		want  float64
	}{
		{"the topic's first leader", state(1, 0), 0},
		{"leader 1 fails, 2 elected", state(2, 1), 1},
		{"a new controller resends the state", state(2, 1), 1},
		{"every replica fails: no leader", state(coord.NoBroker, 2), 1},
		{"replica 3 returns and is elected", state(3, 3), 2},
	}
	for _, s := range steps {
		sendToReplicas(s.state)
		if got := leaderElections(m); got != s.want {
			t.Fatalf("after %s: got tripod_leader_elections_total %v, want %v", s.what, got, s.want)
		}
	}
	// An UpdateMetadata or StopReplica is no election.
	m.leaderAndIsrSent(&controller.UpdateMetadataRequest{Partitions: []controller.PartitionInfo{state(1, 9)}})
	if got := leaderElections(m); got != 2 {
		t.Fatalf("after an UpdateMetadata: got tripod_leader_elections_total %v, want 2", got)
	}
}

// leaderElections reads tripod_leader_elections_total from m's registry.
func leaderElections(m *metrics) float64 {
	families, err := m.registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == "tripod_leader_elections_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// TestMetricsFollowAControlledShutdown runs three brokers, one topic of
// three partitions on all three, so every broker leads one and its
// followers' fetches count as FetchFollower; then it shuts down a broker
// that leads one: the controller counts the leader election, the two left
// lead all three partitions, which are under-replicated (the ISR lost a
// member) and none offline.
func TestMetricsFollowAControlledShutdown(t *testing.T) {
	const topic = "moved"
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, 30*time.Second)
	var ctrl *Broker
	waitFor(t, ctx, "a broker to run the controller", func() bool {
		for _, b := range brokers {
			if b.member.Controller() != nil {
				ctrl = b
				return true
			}
		}
		return false
	})
	if _, err := ctrl.member.Controller().CreateTopic(ctx, controller.TopicSpec{Name: topic, Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("broker %d to hold every partition of %s", b.ID(), topic), func() bool {
			v, _ := metricValue(scrape(t, b), "tripod_partitions")
			return v == 3
		})
	}
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("followers to fetch from broker %d", b.ID()), func() bool {
			v, _ := metricValue(scrape(t, b), `tripod_requests_total{api="FetchFollower"}`)
			return v >= 1
		})
	}
	var victim *Broker
	var rest []*Broker
	for _, b := range brokers {
		if v, _ := metricValue(scrape(t, b), "tripod_leader_partitions"); victim == nil && b != ctrl && v > 0 {
			victim = b
			continue
		}
		rest = append(rest, b)
	}
	if victim == nil {
		t.Fatalf("no broker but the controller leads a partition of %s", topic)
	}
	if err := victim.Close(); err != nil {
		t.Fatalf("close broker %d: %v", victim.ID(), err)
	}

	waitFor(t, ctx, "the controller to count the election", func() bool {
		v, _ := metricValue(scrape(t, ctrl), "tripod_leader_elections_total")
		return v >= 1
	})
	sum := func(name string) float64 {
		var total float64
		for _, b := range rest {
			v, _ := metricValue(scrape(t, b), name)
			total += v
		}
		return total
	}
	waitFor(t, ctx, "the two brokers left to lead three under-replicated partitions", func() bool {
		return sum("tripod_leader_partitions") == 3 && sum("tripod_under_replicated_partitions") == 3
	})
	for _, b := range rest {
		page := scrape(t, b)
		wantMetric(t, page, "tripod_offline_partitions", "0", equals(0))
		wantMetric(t, page, "tripod_controller_epoch", ">= 1", atLeast(1))
	}
	if v, _ := metricValue(scrape(t, ctrl), "tripod_leader_elections_total"); v != 1 {
		t.Fatalf("controller: got tripod_leader_elections_total %v, want 1 (one partition changed leader)", v)
	}
}

// BenchmarkRequestAnswered measures what the metrics add to every request
// the broker answers: a counter, a histogram and the byte counters.
func BenchmarkRequestAnswered(bm *testing.B) {
	m := newMetrics(&Broker{cache: metadata.NewCache(), replicas: replica.NewManager(&config.Config{}, &replica.LogDirs{}, nil, replica.Deps{}), member: &membership{}})
	req := &request{header: requestHeader{key: 0}, kreq: kmsg.NewPtrProduceRequest()}
	frame := network.Frame{Bytes: make([]byte, 128)}
	start := time.Now()
	bm.ReportAllocs()
	for bm.Loop() {
		m.requestAnswered(req, start, 1024, frame)
	}
}

// BenchmarkMetricsScrape1000 measures one /metrics scrape of a broker
// holding and leading 1 000 partitions.
func BenchmarkMetricsScrape1000(bm *testing.B) {
	cfg := testConfig(bm)
	b, err := New(cfg, nil)
	if err != nil {
		bm.Fatalf("start broker: %v", err)
	}
	defer b.Close()
	waitServing(bm, b)
	createLocalTopic(bm, b, "scraped", 1000)
	handler := b.MetricsHandler()
	bm.ReportAllocs()
	for bm.Loop() {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			bm.Fatalf("GET /metrics: got status %d, want 200", rec.Code)
		}
	}
}
