package broker

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// followerFetchLabel is the api label of a Fetch sent by a follower
// replica (replica id set), so replication traffic is told apart from
// consumers'.
const followerFetchLabel = "FetchFollower"

// requestDurationBuckets are the request latency histogram's upper bounds
// in seconds, from sub-millisecond produces to long-poll fetches.
var requestDurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// metrics is the broker's Prometheus registry and the counters the rest of
// the broker reports to. Gauges of broker state are computed when scraped
// (stateCollector); counters are bumped by hooks: requestAnswered from the
// connection, leaderAndIsrSent from the controller's sender, ISRChanged
// from replication, consumerFetched from Fetch. It is safe for concurrent use.
type metrics struct {
	b        *Broker
	registry *prometheus.Registry
	handler  http.Handler

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	// byKey holds each API's request series, resolved at its first
	// request so later ones skip the label lookup; follower is Fetch's
	// from replicas.
	byKey    [kmsg.MaxKey + 1]atomic.Pointer[apiMetrics]
	follower apiMetrics

	bytesIn       prometheus.Counter
	bytesOut      prometheus.Counter
	consumerBytes prometheus.Counter
	// bytesSpliced counts the bytes of bytesOut sent from segment files.
	bytesSpliced    prometheus.Counter
	isrShrinks      prometheus.Counter
	isrExpands      prometheus.Counter
	leaderElections prometheus.Counter
	acceptErrors    prometheus.Counter
	// connectionsRefused counts connections closed at once for
	// max.connections.per.ip.
	connectionsRefused prometheus.Counter
	// connectionsThrottled counts connections closed unserved for their
	// address's connection_creation_rate.
	connectionsThrottled prometheus.Counter
	// throttledBytes and throttledPartitions count, by side (leader,
	// follower), the bytes of throttled replicas sent or fetched and the
	// partitions left out of a fetch while the throttle was exceeded.
	throttledBytes      *prometheus.CounterVec
	throttledPartitions *prometheus.CounterVec

	// electedMu guards elected: the highest leader epoch counted as an
	// election, per partition of a topic ID, so a state sent to every
	// replica counts once.
	electedMu sync.Mutex
	elected   map[electedPartition]int32
}

// apiMetrics are one api label's request series.
type apiMetrics struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// electedPartition names a partition of one incarnation of a topic.
type electedPartition struct {
	topicID   [16]byte
	partition int32
}

// newMetrics builds the broker's metrics; gauges read b when scraped.
func newMetrics(b *Broker) *metrics {
	m := &metrics{
		b:        b,
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tripod_requests_total",
			Help: "Kafka requests answered, by API; Fetch requests from follower replicas are api=\"FetchFollower\" (Kafka's RequestsPerSec, with request=FetchConsumer|FetchFollower).",
		}, []string{"api"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tripod_request_duration_seconds",
			Help:    "Time from a Kafka request's dispatch until its response is ready to send, long-poll and acks=all waits included, by API (Kafka's TotalTimeMs).",
			Buckets: requestDurationBuckets,
		}, []string{"api"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_bytes_in_total",
			Help: "Bytes of Kafka request frames received, every API, size prefix included (Kafka's socket-server incoming-byte-total; BytesInPerSec counts produced records only).",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_bytes_out_total",
			Help: "Bytes of Kafka response frames sent, every API, size prefix included (Kafka's socket-server outgoing-byte-total; BytesOutPerSec counts fetched records only).",
		}),
		bytesSpliced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_bytes_out_spliced_total",
			Help: "Bytes of fetched records sent from the segment files to the socket (sendfile, zero-copy: plaintext listeners), part of tripod_bytes_out_total.",
		}),
		consumerBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_fetch_consumer_bytes_total",
			Help: "Record bytes this broker sent to consumers in Fetch responses, leader or follower (KIP-392); replica fetches are not counted (Kafka's BytesOutPerSec).",
		}),
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_isr_shrinks_total",
			Help: "ISR shrinks committed for partitions this broker leads (Kafka's IsrShrinksPerSec).",
		}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_isr_expands_total",
			Help: "ISR expansions committed for partitions this broker leads (Kafka's IsrExpandsPerSec).",
		}),
		leaderElections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_leader_elections_total",
			Help: "Partition leader changes (new leader epochs) decided by the controller running on this broker; a topic's first leaders are not counted (Kafka's LeaderElectionRateAndTimeMs count).",
		}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_accept_errors_total",
			Help: "Failed accepts on the Kafka listener (out of file descriptors, most often), each followed by a retry (Kafka's socket-server accept errors).",
		}),
		connectionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_connections_refused_total",
			Help: "Connections closed at once because their address had max.connections.per.ip open (Kafka's connection quota rejections).",
		}),
		connectionsThrottled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tripod_connections_throttled_total",
			Help: "Connections closed unserved, after a delay, because their address was over its connection_creation_rate quota (Kafka's connection rate throttling, KIP-612).",
		}),
		throttledBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tripod_replication_throttled_bytes_total",
			Help: "Bytes of throttled replicas out of the ISR that this broker sent as leader or fetched as follower, by side=leader|follower: the bytes the replication throttles measure (Kafka's LeaderReplication and FollowerReplication byte-rate).",
		}, []string{"side"}),
		throttledPartitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tripod_replication_throttled_partitions_total",
			Help: "Partitions of throttled replicas out of the ISR left out of a replica fetch because the side's throttle rate was exceeded, by side=leader|follower (Kafka's ReplicationQuotaManager throttling).",
		}, []string{"side"}),
		elected: map[electedPartition]int32{},
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestDuration, m.bytesIn, m.bytesOut, m.bytesSpliced, m.consumerBytes,
		m.isrShrinks, m.isrExpands, m.leaderElections, m.acceptErrors, m.connectionsRefused, m.connectionsThrottled,
		m.throttledBytes, m.throttledPartitions,
		newStateCollector(b),
		b.quotas,
	)
	// Every API the broker speaks is listed from the start, at zero, so
	// rates over a broker's whole life need no special case.
	for key := range apis {
		m.requests.WithLabelValues(kmsg.NameForKey(key))
	}
	m.follower = m.apiMetricsFor(followerFetchLabel)
	for _, side := range []string{"leader", "follower"} {
		m.throttledBytes.WithLabelValues(side)
		m.throttledPartitions.WithLabelValues(side)
	}
	// Produce and Fetch latencies are listed from the start too; other
	// APIs' appear with their first request.
	for _, key := range []int16{0, 1} {
		m.byKey[key].Store(new(m.apiMetricsFor(kmsg.NameForKey(key))))
	}
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
	return m
}

// requestAnswered counts a request of size bytes (its frame after the size
// prefix) dispatched at start, whose response frame is ready; it returns
// frame unchanged. A nil req (a reply made before decoding) counts only
// bytes; a nil frame (acks=0) counts no bytes out.
func (m *metrics) requestAnswered(req *request, start time.Time, size int, frame network.Frame) network.Frame {
	m.bytesIn.Add(float64(size + 4))
	m.bytesOut.Add(float64(frame.Len()))
	if len(frame.Splices) > 0 {
		m.bytesSpliced.Add(float64(frame.Len() - len(frame.Bytes)))
	}
	if req == nil {
		return frame
	}
	var api *apiMetrics
	if requestLabel(req) == followerFetchLabel {
		api = &m.follower
	} else if key := req.header.key; key >= 0 && int(key) < len(m.byKey) {
		if api = m.byKey[key].Load(); api == nil {
			api = new(m.apiMetricsFor(kmsg.NameForKey(key)))
			m.byKey[key].Store(api)
		}
	} else {
		api = new(m.apiMetricsFor(kmsg.NameForKey(key)))
	}
	api.requests.Inc()
	api.duration.Observe(time.Since(start).Seconds())
	return frame
}

// consumerFetched counts the record bytes of resp, a Fetch response to a
// consumer, those of its slices included.
func (m *metrics) consumerFetched(resp *kmsg.FetchResponse, slices fetchSlices) {
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if s := slices[coord.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; s != nil && len(p.RecordBatches) > 0 && &p.RecordBatches[0] == &spliced[0] {
				n += s.Len
			} else {
				n += len(p.RecordBatches)
			}
		}
	}
	if n > 0 {
		m.consumerBytes.Add(float64(n))
	}
}

// apiMetricsFor resolves an api label's request series.
func (m *metrics) apiMetricsFor(label string) apiMetrics {
	return apiMetrics{requests: m.requests.WithLabelValues(label), duration: m.requestDuration.WithLabelValues(label)}
}

// requestLabel is a request's api label: its Kafka API name, or
// FetchFollower for a fetch by a replica.
func requestLabel(req *request) string {
	if f, ok := req.kreq.(*kmsg.FetchRequest); ok && (f.ReplicaID >= 0 || f.ReplicaState.ID >= 0) {
		return followerFetchLabel
	}
	return kmsg.NameForKey(req.header.key)
}

// Throttled counts, on side (leader or follower), bytes of Throttled
// replicas replicated, and partitions left out of a fetch by the
// throttle.
func (m *metrics) Throttled(side string, bytes, leftOut int) {
	if bytes > 0 {
		m.throttledBytes.WithLabelValues(side).Add(float64(bytes))
	}
	if leftOut > 0 {
		m.throttledPartitions.WithLabelValues(side).Add(float64(leftOut))
	}
}

// ISRChanged counts ISR shrinks and expansions committed for partitions
// this broker leads.
func (m *metrics) ISRChanged(shrinks, expands int) {
	m.isrShrinks.Add(float64(shrinks))
	m.isrExpands.Add(float64(expands))
}

// leaderAndIsrSent counts the leader elections in a LeaderAndIsr the
// controller on this broker sends: partition states with a leader whose leader
// epoch is above both the one in the broker's metadata cache and any already
// counted. A state sent to several replicas counts once; a new
// controller's full state (epochs the cache already holds) counts
// nothing; a partition's first leader (epoch 0) is not an election.
func (m *metrics) leaderAndIsrSent(req controller.Request) {
	r, ok := req.(*controller.LeaderAndIsrRequest)
	if !ok {
		return
	}
	m.electedMu.Lock()
	defer m.electedMu.Unlock()
	for _, p := range r.Partitions {
		if p.Leader == coord.NoBroker || p.LeaderEpoch <= 0 {
			continue
		}
		key := electedPartition{topicID: p.TopicID, partition: p.Partition}
		if counted, ok := m.elected[key]; ok && p.LeaderEpoch <= counted {
			continue
		}
		if cached, ok := m.b.cache.LeaderEpochOf(p.TopicID, p.Topic, p.Partition); ok && p.LeaderEpoch <= cached {
			continue
		}
		m.elected[key] = p.LeaderEpoch
		m.leaderElections.Inc()
	}
}

// MetricsHandler serves the broker's metrics in Prometheus text format,
// for /metrics.
func (b *Broker) MetricsHandler() http.Handler { return b.metrics.handler }

// stateCollector computes the broker's state gauges when scraped.
type stateCollector struct {
	b *Broker
	// lastControllerEpoch is the controller epoch last read, reported
	// while a controller request holds the broker's state lock.
	lastControllerEpoch atomic.Int64

	partitions, leaderPartitions, underReplicated, offline *prometheus.Desc
	activeController, controllerEpoch, offlineLogDirs      *prometheus.Desc
	// The transactions': the coordinator's open ones and timeout aborts,
	// and the partitions led here whose last stable offset lags.
	txnOngoing, txnTimedOut, lsoLagMax, unstable *prometheus.Desc
}

func newStateCollector(b *Broker) *stateCollector {
	return &stateCollector{
		b: b,
		partitions: prometheus.NewDesc("tripod_partitions",
			"Partition replicas this broker holds, led or followed (Kafka's PartitionCount).", nil, nil),
		leaderPartitions: prometheus.NewDesc("tripod_leader_partitions",
			"Partitions this broker leads (Kafka's LeaderCount).", nil, nil),
		underReplicated: prometheus.NewDesc("tripod_under_replicated_partitions",
			"Partitions this broker leads whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions).", nil, nil),
		offline: prometheus.NewDesc("tripod_offline_partitions",
			"Partitions without a leader in this broker's metadata cache; every broker reports the cluster-wide count (Kafka's OfflinePartitionsCount, which only the controller reports).", nil, nil),
		activeController: prometheus.NewDesc("tripod_active_controller",
			"1 if this broker runs the controller, else 0 (Kafka's ActiveControllerCount).", nil, nil),
		controllerEpoch: prometheus.NewDesc("tripod_controller_epoch",
			"Highest controller epoch this broker accepted a controller request from (Kafka's controller epoch).", nil, nil),
		offlineLogDirs: prometheus.NewDesc("tripod_offline_log_dirs",
			"Log dirs of this broker offline after a disk error, until it restarts (Kafka's OfflineLogDirectoryCount).", nil, nil),
		txnOngoing: prometheus.NewDesc("tripod_transactions_ongoing",
			"Transactions open or ending (Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence) among the transactional ids this broker coordinates.", nil, nil),
		txnTimedOut: prometheus.NewDesc("tripod_transactions_aborted_on_timeout_total",
			"Transactions this broker's coordinator aborted because they passed their transaction.timeout.ms.", nil, nil),
		lsoLagMax: prometheus.NewDesc("tripod_last_stable_offset_lag_max",
			"The largest high watermark minus last stable offset of the partitions this broker leads: how far read_committed consumers trail (Kafka's LastStableOffsetLag, the worst partition's).", nil, nil),
		unstable: prometheus.NewDesc("tripod_unstable_partitions",
			"Partitions this broker leads whose last stable offset is below their high watermark: an open transaction holds their read_committed consumers back.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.partitions, c.leaderPartitions, c.underReplicated, c.offline, c.activeController, c.controllerEpoch, c.offlineLogDirs,
		c.txnOngoing, c.txnTimedOut, c.lsoLagMax, c.unstable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	self := coord.BrokerID(b.cfg.BrokerID)
	parts := b.replicas.Partitions()
	var leading, under, unstable int
	var lagMax int64
	for _, p := range parts {
		st := p.Role()
		if st.Leader != self {
			continue
		}
		leading++
		if len(st.ISR) < len(st.Replicas) {
			under++
		}
		if lag := p.HighWatermark() - p.LastStableOffset(); lag > 0 {
			unstable++
			lagMax = max(lagMax, lag)
		}
	}
	var offline int
	for _, t := range b.cache.AllTopics() {
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				offline++
			}
		}
	}
	active := 0.0
	if b.member.Controller() != nil {
		active = 1
	}
	// A controller request may hold the replica manager's state while it opens logs or
	// truncates: a scrape then reports the epoch it read last rather than
	// wait.
	if epoch, ok := b.replicas.TryControllerEpoch(); ok {
		c.lastControllerEpoch.Store(epoch)
	}
	ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(len(parts)))
	ch <- prometheus.MustNewConstMetric(c.leaderPartitions, prometheus.GaugeValue, float64(leading))
	ch <- prometheus.MustNewConstMetric(c.underReplicated, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(offline))
	ch <- prometheus.MustNewConstMetric(c.activeController, prometheus.GaugeValue, active)
	ch <- prometheus.MustNewConstMetric(c.controllerEpoch, prometheus.GaugeValue, float64(c.lastControllerEpoch.Load()))
	ch <- prometheus.MustNewConstMetric(c.offlineLogDirs, prometheus.GaugeValue, float64(b.replicas.LogDirs().OfflineCount()))
	txns := b.txns.Stats()
	ch <- prometheus.MustNewConstMetric(c.txnOngoing, prometheus.GaugeValue, float64(txns.Ongoing))
	ch <- prometheus.MustNewConstMetric(c.txnTimedOut, prometheus.CounterValue, float64(txns.AbortedOnTimeout))
	ch <- prometheus.MustNewConstMetric(c.lsoLagMax, prometheus.GaugeValue, float64(lagMax))
	ch <- prometheus.MustNewConstMetric(c.unstable, prometheus.GaugeValue, float64(unstable))
}
