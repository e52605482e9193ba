package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
)

// Dynamic configs: the broker configs that IncrementalAlterConfigs and
// AlterConfigs change for the whole cluster (the "<default>" entity) or
// one broker, kept in the coordination backend's config store, and the
// topic configs the controller commits with the metadata. Every broker
// watches both (coord.ConfigStore) and applies them to the replicas it
// holds without a restart. Precedence is Kafka's: a topic's override, then
// this broker's dynamic config, the cluster's dynamic default, the static
// properties, and tripod's default.

// The replication throttle rates, dynamic broker configs only.
const (
	leaderThrottleRateKey   = "leader.replication.throttled.rate"
	followerThrottleRateKey = "follower.replication.throttled.rate"
	leaderThrottledKey      = "leader.replication.throttled.replicas"
	followerThrottledKey    = "follower.replication.throttled.replicas"
)

// dynamicBrokerKeys are the broker configs that can be updated without a
// restart: Kafka's dynamically updatable ones that tripod applies live
// (the topic defaults its replicas read, and the throttle rates). Any
// other key is refused as Kafka refuses it: "Cannot update these configs
// dynamically".
var dynamicBrokerKeys = []string{
	followerThrottleRateKey,
	leaderThrottleRateKey,
	"log.flush.interval.messages",
	"log.flush.interval.ms",
	"log.retention.bytes",
	"log.retention.ms",
	"log.roll.ms",
	"log.segment.bytes",
	"message.max.bytes",
	"min.insync.replicas",
}

// isDynamicBrokerKey reports whether key is one of dynamicBrokerKeys.
func isDynamicBrokerKey(key string) bool { return slices.Contains(dynamicBrokerKeys, key) }

// isRateKey reports whether key is a throttle rate, which the static
// properties do not hold.
func isRateKey(key string) bool {
	return key == leaderThrottleRateKey || key == followerThrottleRateKey
}

// listKeys are the LIST configs, which APPEND and SUBTRACT change.
var listKeys = []string{"cleanup.policy", leaderThrottledKey, followerThrottledKey}

// dynamicState is what the config watch last delivered, and what follows
// from it for this broker.
type dynamicState struct {
	// configs is the stored state, nil before the first.
	configs *coord.ConfigState
	// cfg is the broker's config with this broker's dynamic configs and
	// the cluster's dynamic default applied over the static properties.
	cfg Config
	// leaderRate and followerRate are the throttle rates in bytes/s.
	leaderRate, followerRate int64
}

// entity returns this broker's config entity: its id in decimal.
func (b *Broker) entity() string { return strconv.Itoa(int(b.cfg.BrokerID)) }

// brokerSource is where a dynamic broker config's value comes from.
type brokerSource struct {
	entity string // coord.DefaultBrokerEntity or this broker's id
	value  string
}

// dynamicBrokerValues returns the dynamic values of key for this broker
// in precedence order: its own, then the cluster default.
func (b *Broker) dynamicBrokerValues(st *coord.ConfigState, key string) []brokerSource {
	if st == nil {
		return nil
	}
	var out []brokerSource
	for _, entity := range []string{b.entity(), coord.DefaultBrokerEntity} {
		if v, ok := st.Brokers[entity][key]; ok {
			out = append(out, brokerSource{entity: entity, value: v})
		}
	}
	return out
}

// effectiveConfig applies st's dynamic broker configs for this broker over
// the static ones. A value the store holds that does not apply (written
// by another tool, or by a newer tripod) is skipped with a warning.
func (b *Broker) effectiveConfig(st *coord.ConfigState) dynamicState {
	d := dynamicState{configs: st, cfg: b.cfg, leaderRate: replica.Unthrottled, followerRate: replica.Unthrottled}
	if st == nil {
		return d
	}
	for _, key := range dynamicBrokerKeys {
		values := b.dynamicBrokerValues(st, key)
		if len(values) == 0 {
			continue
		}
		v := values[0].value
		if isRateKey(key) {
			n, err := parseRate(key, v)
			if err != nil {
				b.logger.Warn("ignoring a dynamic broker config", "key", key, "value", v, "error", err)
				continue
			}
			if key == leaderThrottleRateKey {
				d.leaderRate = n
			} else {
				d.followerRate = n
			}
			continue
		}
		next := d.cfg
		if err := next.Set(key, v); err != nil {
			b.logger.Warn("ignoring a dynamic broker config", "key", key, "value", v, "error", err)
			continue
		}
		if err := next.Validate(); err != nil {
			b.logger.Warn("ignoring a dynamic broker config", "key", key, "value", v, "error", err)
			continue
		}
		d.cfg = next
	}
	return d
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

// validateBrokerConfigs checks a broker entity's dynamic configs as they
// would become: only dynamic keys, each value as the static properties
// would take it. A non-dynamic key is errNotDynamic, naming the keys.
func (b *Broker) validateBrokerConfigs(configs map[string]string) error {
	var notDynamic []string
	for key := range configs {
		if !isDynamicBrokerKey(key) {
			notDynamic = append(notDynamic, key)
		}
	}
	if len(notDynamic) > 0 {
		slices.Sort(notDynamic)
		return fmt.Errorf("%w: %s (the dynamic broker configs are %s)", errNotDynamic,
			strings.Join(notDynamic, ", "), strings.Join(dynamicBrokerKeys, ", "))
	}
	cfg := b.cfg
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		value := configs[key]
		if isRateKey(key) {
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

// errNotDynamic: a broker config that cannot be updated without a restart
// (Kafka's "Cannot update these configs dynamically").
var errNotDynamic = errors.New("cannot update these configs dynamically")

// validateTopicConfigs checks a topic's configs as they would become, as
// CreateTopics checks them.
func validateTopicConfigs(configs map[string]string) error {
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		if err := validateTopicConfig(key, configs[key]); err != nil {
			return err
		}
	}
	return nil
}

// checkAlterations refuses APPEND and SUBTRACT of a key that is not a
// LIST, as Kafka does, and a DELETE or SET without a key.
func checkAlterations(alts []coord.ConfigAlteration) error {
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

// dynamic returns the dynamic state last applied. Before the first, it
// stores the static one, so that the replicas opened meanwhile share its
// config.
func (b *Broker) dynamic() *dynamicState {
	if d := b.dyn.Load(); d != nil {
		return d
	}
	d := b.effectiveConfig(nil)
	b.dyn.CompareAndSwap(nil, &d)
	return b.dyn.Load()
}

// liveConfig returns the broker's config as the dynamic broker configs
// make it now.
func (b *Broker) liveConfig() Config { return b.dynamic().cfg }

// watchConfigs follows the config store until ctx ends or the backend
// closes, applying every state (applyConfigs). A failed watch is retried
// with backoff.
func (b *Broker) watchConfigs(ctx context.Context) {
	followStore(ctx, b.logger, "dynamic configs", b.backend.WatchConfigs, b.applyConfigs)
}

// applyConfigs makes st the dynamic state, unless a newer one is applied,
// and applies it to every replica held and to the throttles.
func (b *Broker) applyConfigs(st *coord.ConfigState) {
	b.configsMu.Lock()
	defer b.configsMu.Unlock()
	if old := b.dyn.Load(); old != nil && old.configs != nil && st.Version < old.configs.Version {
		return
	}
	d := b.effectiveConfig(st)
	b.dyn.Store(&d)
	b.configsChanged.Notify()
	b.leaderQuota.SetBound(d.leaderRate)
	b.followerQuota.SetBound(d.followerRate)
	applied := 0
	for _, p := range b.allPartitions() {
		if b.applyConfigsTo(p, &d) {
			applied++
		}
	}
	if applied > 0 {
		b.logger.Info("dynamic configs applied", "replicas", applied, "version", st.Version)
	}
}

// applyConfigsTo applies d to p: the topic's configs as stored (kept as
// they are when the state does not hold the topic, deleted meanwhile or
// not seen yet), over the broker's live config. It reports whether p's
// configs changed. The caller holds configsMu.
func (b *Broker) applyConfigsTo(p *partition, d *dynamicState) bool {
	configs := p.topicConfigs()
	if d.configs != nil {
		if stored, ok := d.configs.Topics[p.topic]; ok {
			configs = stored
		}
	}
	if maps.Equal(configs, p.topicConfigs()) && d.cfg.sameTopicDefaults(p.brokerCfg()) {
		return false
	}
	if err := p.setConfigs(&d.cfg, configs, b.cfg.BrokerID); err != nil {
		b.logger.Warn("topic configs not applied", "partition", p.name(), "configs", configs, "error", err)
		return false
	}
	b.logger.Debug("topic configs applied", "partition", p.name(), "configs", configs)
	return true
}

// sameTopicDefaults reports whether c and o give topics the same defaults
// (the dynamic broker configs that replicas read).
func (c Config) sameTopicDefaults(o Config) bool {
	for _, key := range dynamicBrokerKeys {
		if isRateKey(key) {
			continue
		}
		cv, _ := c.Get(key)
		ov, _ := o.Get(key)
		if cv != ov {
			return false
		}
	}
	return true
}

// addReplica registers a replica just opened, with the dynamic state
// applied to it: configsMu orders it with applyConfigs, so that a state
// delivered while the replica was opening is not missed.
func (b *Broker) addReplica(tp coord.TopicPartition, p *partition) {
	b.configsMu.Lock()
	defer b.configsMu.Unlock()
	b.replicasMu.Lock()
	b.replicas[tp] = p
	b.replicasMu.Unlock()
	b.applyConfigsTo(p, b.dynamic())
}

// watchedTopicConfigs returns the topic configs of names that the config
// watch holds, for opening replicas without reading the backend.
func (b *Broker) watchedTopicConfigs(names []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	st := b.dynamic().configs
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
