// Package dynconfig follows a broker's dynamic configs: the broker
// configs that IncrementalAlterConfigs and
// AlterConfigs change for the whole cluster (the "<default>" entity) or
// one broker, kept in the coordination backend's config store, and the
// topic configs the controller commits with the metadata. Every broker
// watches both (coord.ConfigStore) and applies them to the replicas it
// holds without a restart. Precedence is Kafka's: a topic's override, then
// this broker's dynamic config, the cluster's dynamic default, the static
// properties, and tripod's default. The client quotas the store holds
// are handed to the broker's quota manager (broker/quota) as they change.
package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/quota"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// listKeys are the LIST configs, which APPEND and SUBTRACT change.
var listKeys = []string{"cleanup.policy", config.LeaderThrottledKey, config.FollowerThrottledKey}

// State is what the config watch last delivered, and what follows
// from it for this broker.
type State struct {
	// Configs is the stored state, nil before the first.
	Configs *coord.ConfigState
	// cfg is the broker's config with this broker's dynamic configs and
	// the cluster's dynamic default applied over the static properties.
	cfg config.Config
	// LeaderRate and FollowerRate are the throttle rates in bytes/s.
	LeaderRate, FollowerRate int64
}

// Configs holds the dynamic configs this broker follows: the
// state the config watch last delivered, what follows from it for this
// broker (its live config and the throttle rates), and their application
// to every replica held. The Broker owns one and runs its watch; handlers
// read the live config and validate alterations through it. It does not
// write the config store: alterations go through the controller or the
// backend.
type Configs struct {
	// cfg is the broker's static configuration (the Broker's own, never
	// changed after New).
	cfg     *config.Config
	logger  hclog.Logger
	backend coord.Backend
	// leaderQuota and followerQuota are the replication throttles whose
	// bounds the throttle rates set.
	leaderQuota, followerQuota *replica.Quota
	// partitions returns every replica this broker holds.
	partitions func() []*replica.Partition
	// quotas enforces the client quotas the store holds.
	quotas *quota.Manager

	// mu orders the application of dynamic configs (applyConfigs) with
	// the registration of new replicas (AddReplica); state is the dynamic
	// state last applied, nil before the first; changed (guarded by mu)
	// announces every state applied.
	mu      sync.Mutex
	state   atomic.Pointer[State]
	changed notify.Broadcast
}

// New returns the dynamic configs of a broker configured by cfg (which
// the caller no longer changes), whose replication throttles are
// leaderQuota and followerQuota, whose replicas partitions returns and
// whose client quotas quotas enforces;
// Watch follows backend's config store.
func New(cfg *config.Config, logger hclog.Logger, backend coord.Backend, leaderQuota, followerQuota *replica.Quota, partitions func() []*replica.Partition, quotas *quota.Manager) *Configs {
	return &Configs{cfg: cfg, logger: logger, backend: backend, leaderQuota: leaderQuota, followerQuota: followerQuota, partitions: partitions, quotas: quotas}
}

// Entity returns this broker's config entity: its id in decimal.
func (d *Configs) Entity() string { return strconv.Itoa(int(d.cfg.BrokerID)) }

// BrokerSource is where a dynamic broker config's value comes from.
type BrokerSource struct {
	Entity string // coord.DefaultBrokerEntity or this broker's id
	Value  string
}

// BrokerValues returns the dynamic values of key for this broker
// in precedence order: its own, then the cluster default.
func (d *Configs) BrokerValues(st *coord.ConfigState, key string) []BrokerSource {
	if st == nil {
		return nil
	}
	var out []BrokerSource
	for _, entity := range []string{d.Entity(), coord.DefaultBrokerEntity} {
		if v, ok := st.Brokers[entity][key]; ok {
			out = append(out, BrokerSource{Entity: entity, Value: v})
		}
	}
	return out
}

// effectiveConfig applies st's dynamic broker configs for this broker over
// the static ones. A value the store holds that does not apply (written
// by another tool, or by a newer tripod) is skipped with a warning.
func (d *Configs) effectiveConfig(st *coord.ConfigState) State {
	state := State{Configs: st, cfg: *d.cfg, LeaderRate: replica.Unthrottled, FollowerRate: replica.Unthrottled}
	if st == nil {
		return state
	}
	for _, key := range config.DynamicBrokerKeys() {
		values := d.BrokerValues(st, key)
		if len(values) == 0 {
			continue
		}
		v := values[0].Value
		if config.IsThrottleRateKey(key) {
			n, err := parseRate(key, v)
			if err != nil {
				d.logger.Warn("ignoring a dynamic broker config", "key", key, "value", v, "error", err)
				continue
			}
			if key == config.LeaderThrottleRateKey {
				state.LeaderRate = n
			} else {
				state.FollowerRate = n
			}
			continue
		}
		next := state.cfg
		if err := next.Set(key, v); err != nil {
			d.logger.Warn("ignoring a dynamic broker config", "key", key, "value", v, "error", err)
			continue
		}
		if err := next.Validate(); err != nil {
			d.logger.Warn("ignoring a dynamic broker config", "key", key, "value", v, "error", err)
			continue
		}
		state.cfg = next
	}
	return state
}

// parseRate reads a throttle rate: a long at least 0 (Kafka's
// ConfigDef.Range.atLeast(0)).
func parseRate(key, value string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("broker config %s %q: must be an integer of bytes per second, at least 0", key, value)
	}
	return n, nil
}

// ValidateBrokerConfigs checks a broker entity's dynamic configs as they
// would become: only dynamic keys, each value as the static properties
// would take it. A non-dynamic key is errNotDynamic, naming the keys.
func (d *Configs) ValidateBrokerConfigs(configs map[string]string) error {
	var notDynamic []string
	for key := range configs {
		if !config.IsDynamicBrokerKey(key) {
			notDynamic = append(notDynamic, key)
		}
	}
	if len(notDynamic) > 0 {
		slices.Sort(notDynamic)
		return fmt.Errorf("%w: %s (the dynamic broker configs are %s)", ErrNotDynamic,
			strings.Join(notDynamic, ", "), strings.Join(config.DynamicBrokerKeys(), ", "))
	}
	cfg := *d.cfg
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		value := configs[key]
		if config.IsThrottleRateKey(key) {
			if _, err := parseRate(key, value); err != nil {
				return err
			}
			continue
		}
		if err := cfg.Set(key, value); err != nil {
			return fmt.Errorf("broker config %s %q: %w", key, value, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("broker configs %v: %w", configs, err)
	}
	return nil
}

// ErrNotDynamic: a broker config that cannot be updated without a restart
// (Kafka's "Cannot update these configs dynamically").
var ErrNotDynamic = errors.New("cannot update these configs dynamically")

// ValidateTopicConfigs checks a topic's configs as they would become, as
// CreateTopics checks them.
func ValidateTopicConfigs(configs map[string]string) error {
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		if err := config.ValidateTopicConfig(key, configs[key]); err != nil {
			return err
		}
	}
	return nil
}

// CheckAlterations refuses APPEND and SUBTRACT of a key that is not a
// LIST, as Kafka does, and a DELETE or SET without a key.
func CheckAlterations(alts []coord.ConfigAlteration) error {
	for _, a := range alts {
		if err := a.Validate(); err != nil {
			return err
		}
		if (a.Op == coord.ConfigAppend || a.Op == coord.ConfigSubtract) && !slices.Contains(listKeys, a.Key) {
			return fmt.Errorf("config %s: %v is only allowed for a list config (%s)", a.Key, a.Op, strings.Join(listKeys, ", "))
		}
	}
	return nil
}

// Current returns the dynamic state last applied. Before the first, it
// stores the static one, so that the replicas opened meanwhile share its
// config.
func (d *Configs) Current() *State {
	if state := d.state.Load(); state != nil {
		return state
	}
	state := d.effectiveConfig(nil)
	d.state.CompareAndSwap(nil, &state)
	return d.state.Load()
}

// CurrentConfig returns the broker's config as the dynamic broker configs
// make it now, shared by the replicas opened with it: the caller must not
// change it.
func (d *Configs) CurrentConfig() *config.Config { return &d.Current().cfg }

// LiveConfig returns the broker's config as the dynamic broker configs
// make it now.
func (d *Configs) LiveConfig() config.Config { return d.Current().cfg }

// Watch follows the config store until ctx ends or the backend
// closes, applying every state (applyConfigs). A failed watch is retried
// with backoff.
func (d *Configs) Watch(ctx context.Context) {
	coord.Follow(ctx, d.logger, "dynamic configs", d.backend.WatchConfigs, d.applyConfigs)
}

// applyConfigs makes st the dynamic state, unless a newer one is applied,
// and applies it to every replica held and to the throttles.
func (d *Configs) applyConfigs(st *coord.ConfigState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.state.Load(); old != nil && old.Configs != nil && st.Version < old.Configs.Version {
		return
	}
	state := d.effectiveConfig(st)
	d.state.Store(&state)
	d.changed.Notify()
	d.leaderQuota.SetBound(state.LeaderRate)
	d.followerQuota.SetBound(state.FollowerRate)
	quotas, errs := quota.ParseQuotas(st.Quotas)
	for _, err := range errs {
		d.logger.Warn("ignoring a client quota", "error", err)
	}
	d.quotas.SetQuotas(quotas)
	applied := 0
	for _, p := range d.partitions() {
		if d.applyConfigsTo(p, &state) {
			applied++
		}
	}
	if applied > 0 {
		d.logger.Info("dynamic configs applied", "replicas", applied, "version", st.Version)
	}
}

// applyConfigsTo applies d to p: the topic's configs as stored (kept as
// they are when the state does not hold the topic, deleted meanwhile or
// not seen yet), over the broker's live config. It reports whether p's
// configs changed. The caller holds mu.
func (d *Configs) applyConfigsTo(p *replica.Partition, state *State) bool {
	configs := p.TopicConfigs()
	if state.Configs != nil {
		if stored, ok := state.Configs.Topics[p.Topic()]; ok {
			configs = stored
		}
	}
	if maps.Equal(configs, p.TopicConfigs()) && state.cfg.SameTopicDefaults(*p.BrokerConfig()) {
		return false
	}
	if err := p.SetConfigs(&state.cfg, configs, d.cfg.BrokerID); err != nil {
		d.logger.Warn("topic configs not applied", "partition", p.Name(), "configs", configs, "error", err)
		return false
	}
	d.logger.Debug("topic configs applied", "partition", p.Name(), "configs", configs)
	return true
}

// AddReplica registers a replica just opened (register adds p to the
// partitions this broker holds), with the dynamic state applied to it: mu
// orders it with applyConfigs, so that a state delivered while the
// replica was opening is not missed.
func (d *Configs) AddReplica(p *replica.Partition, register func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	register()
	d.applyConfigsTo(p, d.Current())
}

// Applied returns the stored state last applied (nil before the
// first) and a channel closed when a newer one is applied.
func (d *Configs) Applied() (*coord.ConfigState, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Current().Configs, d.changed.Next()
}

// WatchedTopicConfigs returns the topic configs of names that the config
// watch holds, for opening replicas without reading the backend.
func (d *Configs) WatchedTopicConfigs(names []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	st := d.Current().Configs
	if st == nil {
		return out
	}
	for _, n := range names {
		if c, ok := st.Topics[n]; ok {
			out[n] = c
		}
	}
	return out
}
