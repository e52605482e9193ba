// Package quota enforces the client quotas of a broker, as Kafka's
// ClientQuotaManager does (KIP-13, KIP-55, KIP-124, KIP-219): it resolves
// which stored quota applies to a request's user and client id, measures
// the entity's rate over quota.window.num samples of
// quota.window.size.seconds, and says for how long a client over its
// quota is throttled. It keeps no connection and does no I/O: the broker
// records what a request cost and mutes the connection for the throttle
// time it gets back.
package quota

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/rate"
)

// Kind is what a quota bounds, with the key of its quota.
type Kind int

// Kinds of client quota enforced per request.
const (
	// Produce counts the bytes of Produce requests (producer_byte_rate).
	Produce Kind = iota
	// Fetch counts the bytes of consumers' Fetch responses
	// (consumer_byte_rate).
	Fetch
	// Request counts the time handling a client's requests takes, in
	// percent of one thread (request_percentage, KIP-124).
	Request
	// Mutation counts the partitions a client's CreateTopics,
	// CreatePartitions and DeleteTopics create or delete
	// (controller_mutation_rate, KIP-599); it is recorded through a
	// MutationQuota, not Record.
	Mutation
	numKinds
)

// Key returns the quota key of k.
func (k Kind) Key() string {
	return [...]string{coord.QuotaProducerByteRate, coord.QuotaConsumerByteRate, coord.QuotaRequestPercentage, coord.QuotaControllerMutationRate}[k]
}

// metricType is Kafka's metric type of k (kafka.server:type=Produce, ...).
func (k Kind) metricType() string {
	return [...]string{"Produce", "Fetch", "Request", "ControllerMutation"}[k]
}

// idleExpiry is how long a sensor of no activity is kept, as Kafka's
// quota sensors expire after an hour without use.
const idleExpiry = time.Hour

// Config is how a Manager measures rates.
type Config struct {
	// Samples is quota.window.num: how many samples a rate spans
	// (Kafka's default 11, at least 1).
	Samples int
	// Window is quota.window.size.seconds: one sample's length
	// (default 1 s, whole seconds, at least 1 s).
	Window time.Duration
	// MutationSamples and MutationWindow are controller.quota.window.num
	// and controller.quota.window.size.seconds: a controller mutation
	// quota's burst is the quota × MutationSamples × MutationWindow
	// (Kafka's defaults 11 and 1 s; at least 1, whole seconds).
	MutationSamples int
	MutationWindow  time.Duration
}

// Validate checks c's ranges, naming the property.
func (c Config) Validate() error {
	if c.Samples < 1 {
		return fmt.Errorf("quota.window.num %d: must be at least 1", c.Samples)
	}
	if c.Window < time.Second || c.Window%time.Second != 0 {
		return fmt.Errorf("quota.window.size.seconds %v: must be a whole number of seconds, at least 1", c.Window)
	}
	if c.MutationSamples < 1 {
		return fmt.Errorf("controller.quota.window.num %d: must be at least 1", c.MutationSamples)
	}
	if c.MutationWindow < time.Second || c.MutationWindow%time.Second != 0 {
		return fmt.Errorf("controller.quota.window.size.seconds %v: must be a whole number of seconds, at least 1", c.MutationWindow)
	}
	return nil
}

// Quotas are the stored client quotas parsed, by entity and key.
type Quotas map[coord.QuotaEntity]map[string]float64

// ParseQuotas reads the client quotas of the config store; a value that
// does not parse is reported and left out.
func ParseQuotas(stored map[coord.QuotaEntity]map[string]string) (Quotas, []error) {
	out := Quotas{}
	var errs []error
	for entity, values := range stored {
		for key, v := range values {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				errs = append(errs, fmt.Errorf("client quota %s of %s %q: not a positive number", key, entity, v))
				continue
			}
			if out[entity] == nil {
				out[entity] = map[string]float64{}
			}
			out[entity][key] = f
		}
	}
	return out, errs
}

// Resolve returns the quota of key that applies to a client of user and
// clientID, in Kafka's precedence order (KIP-55):
//
//	/config/users/<user>/clients/<client-id>
//	/config/users/<user>/clients/<default>
//	/config/users/<user>
//	/config/users/<default>/clients/<client-id>
//	/config/users/<default>/clients/<default>
//	/config/users/<default>
//	/config/clients/<client-id>
//	/config/clients/<default>
//
// and the entity whose clients share it (Kafka's quota metric tags): the
// user and client id the matching entity names, a default standing for
// the client's own. ok is false when no quota applies.
func (q Quotas) Resolve(key, user, clientID string) (bound float64, shared coord.QuotaEntity, ok bool) {
	def := coord.DefaultQuotaEntity
	for _, c := range []struct {
		entity coord.QuotaEntity
		shared coord.QuotaEntity
	}{
		{coord.QuotaEntity{User: user, ClientID: clientID}, coord.QuotaEntity{User: user, ClientID: clientID}},
		{coord.QuotaEntity{User: user, ClientID: def}, coord.QuotaEntity{User: user, ClientID: clientID}},
		{coord.QuotaEntity{User: user}, coord.QuotaEntity{User: user}},
		{coord.QuotaEntity{User: def, ClientID: clientID}, coord.QuotaEntity{User: user, ClientID: clientID}},
		{coord.QuotaEntity{User: def, ClientID: def}, coord.QuotaEntity{User: user, ClientID: clientID}},
		{coord.QuotaEntity{User: def}, coord.QuotaEntity{User: user}},
		{coord.QuotaEntity{ClientID: clientID}, coord.QuotaEntity{ClientID: clientID}},
		{coord.QuotaEntity{ClientID: def}, coord.QuotaEntity{ClientID: clientID}},
	} {
		if b, found := q[c.entity][key]; found {
			return b, c.shared, true
		}
	}
	return 0, coord.QuotaEntity{}, false
}

// ThrottleTime is how long a client whose measured rate is above bound
// waits, as Kafka's QuotaUtils.throttleTime (KIP-219): long enough for
// the rate over the window to come back to the bound.
func ThrottleTime(measured, bound float64, window time.Duration) time.Duration {
	if measured <= bound || bound <= 0 {
		return 0
	}
	return time.Duration((measured - bound) / bound * float64(window))
}

// sensorKey names one sensor: a kind and the entity whose clients share
// it.
type sensorKey struct {
	kind   Kind
	entity coord.QuotaEntity
}

// sensor is one entity's rate of one kind, with its throttle total; a
// Mutation sensor enforces its quota with bucket and measures rate for
// the metrics only.
type sensor struct {
	rate     *rate.Rate
	bucket   rate.TokenBucket
	bound    float64
	throttle time.Duration
	last     time.Time
}

// Manager enforces the client quotas of one broker. It is safe for
// concurrent use.
type Manager struct {
	cfg Config

	// any is set while some quota is stored: without one, Record
	// returns at once.
	any atomic.Bool

	mu        sync.Mutex
	quotas    Quotas
	sensors   map[sensorKey]*sensor
	lastSweep time.Time
}

// NewManager returns a Manager measuring as cfg says (cfg valid), with no
// quota.
func NewManager(cfg Config) *Manager {
	return &Manager{cfg: cfg, quotas: Quotas{}, sensors: map[sensorKey]*sensor{}}
}

// SetQuotas makes q the quotas enforced from now on; the rates measured
// so far are kept.
func (m *Manager) SetQuotas(q Quotas) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.quotas = q
	m.any.Store(len(q) > 0)
}

// Applies reports whether any quota applies to a client of user and
// clientID.
func (m *Manager) Applies(user, clientID string) bool {
	if !m.any.Load() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for kind := range numKinds {
		if _, _, ok := m.quotas.Resolve(kind.Key(), user, clientID); ok {
			return true
		}
	}
	return false
}

// Record adds value (bytes, or percent-seconds of handler time for
// Request) to the rate of the entity whose quota of kind applies to user
// and clientID, at now, and returns how long that client is throttled
// for: 0 when no quota applies or the rate is within it.
func (m *Manager) Record(kind Kind, user, clientID string, value float64, now time.Time) time.Duration {
	if !m.any.Load() {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bound, shared, ok := m.quotas.Resolve(kind.Key(), user, clientID)
	if !ok {
		return 0
	}
	s := m.sensorLocked(kind, shared, bound, now)
	s.rate.Record(value, now)
	t := ThrottleTime(s.rate.Measure(now), bound, s.rate.WindowSize(now))
	if kind == Request {
		// As Kafka's ClientRequestQuotaManager, a request quota's
		// throttle is at most one sample: request time is not a
		// volume a client can send less of.
		t = min(t, m.cfg.Window)
	}
	s.throttle += t
	return t
}

// sensorLocked returns the sensor of kind for the entity shared, made
// if new, with its bound and last use set; m.mu is held.
func (m *Manager) sensorLocked(kind Kind, shared coord.QuotaEntity, bound float64, now time.Time) *sensor {
	m.sweepLocked(now)
	key := sensorKey{kind: kind, entity: shared}
	s := m.sensors[key]
	if s == nil {
		samples, window := m.cfg.Samples, m.cfg.Window
		if kind == Mutation {
			samples, window = m.cfg.MutationSamples, m.cfg.MutationWindow
		}
		s = &sensor{rate: rate.New(samples, window, now)}
		m.sensors[key] = s
	}
	s.bound, s.last = bound, now
	return s
}

// sweepLocked forgets the sensors idle for idleExpiry, at most once a
// minute; m.mu is held.
func (m *Manager) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < time.Minute {
		return
	}
	m.lastSweep = now
	for k, s := range m.sensors {
		if now.Sub(s.last) >= idleExpiry {
			delete(m.sensors, k)
		}
	}
}

// NanosToPercent converts handler time to request_percentage's unit, as
// Kafka's ClientQuotaManager.nanosToPercentage: a rate of 100 is one
// thread busy all the time.
func NanosToPercent(d time.Duration) float64 { return float64(d) * 100 / float64(time.Second) }

var (
	rateDesc = prometheus.NewDesc("tripod_client_quota_rate",
		"Rate measured for a client quota entity (Kafka's byte-rate for type Produce and Fetch in bytes/s, request-time for type Request in percent of a thread, mutation-rate for type ControllerMutation in partitions/s)",
		[]string{"type", "user", "client_id"}, nil)
	boundDesc = prometheus.NewDesc("tripod_client_quota_limit",
		"The quota that applies to the entity, in the unit of tripod_client_quota_rate",
		[]string{"type", "user", "client_id"}, nil)
	throttleDesc = prometheus.NewDesc("tripod_client_quota_throttle_time_seconds_total",
		"Time the entity's clients were throttled for (Kafka's throttle-time, summed)",
		[]string{"type", "user", "client_id"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateDesc
	ch <- boundDesc
	ch <- throttleDesc
}

// Collect implements prometheus.Collector: one series of each per entity
// measured, labelled as Kafka's quota metrics (type, user, client-id).
// A nil Manager (a broker built without one, in tests) collects nothing.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	if m == nil {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.sensors {
		labels := []string{k.kind.metricType(), k.entity.User, k.entity.ClientID}
		ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, s.rate.Measure(now), labels...)
		ch <- prometheus.MustNewConstMetric(boundDesc, prometheus.GaugeValue, s.bound, labels...)
		ch <- prometheus.MustNewConstMetric(throttleDesc, prometheus.CounterValue, s.throttle.Seconds(), labels...)
	}
}

// ConnectionCreationRate returns the connection_creation_rate quota of
// connections from ip (KIP-612): ip's own, else the default ip's; ok is
// false when neither is stored.
func (m *Manager) ConnectionCreationRate(ip string) (bound float64, ok bool) {
	if !m.any.Load() {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, entity := range []coord.QuotaEntity{{IP: ip}, {IP: coord.DefaultQuotaEntity}} {
		if b, found := m.quotas[entity][coord.QuotaConnectionCreationRate]; found {
			return b, true
		}
	}
	return 0, false
}
