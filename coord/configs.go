package coord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ConfigStore keeps the cluster's dynamic broker configs (Kafka's
// kafka-configs --entity-type brokers) and lets every broker follow them
// together with the topic configs, so that a changed config applies
// without a restart. Writes need no controller Term (like SecurityStore):
// any broker answering IncrementalAlterConfigs or AlterConfigs for a
// broker resource writes them, and the service serialises concurrent
// writers (compare-and-set or the log, retried on conflict), so two
// alterations of one entity at once both land.
//
// Topic configs are not written here: they are part of the metadata
// (Topic.Config, written by the controller through MetadataStore.Commit).
// The watched state carries them as the backend stores them for the
// metadata, so that a broker learns of a topic config change without
// following every partition state.
type ConfigStore interface {
	// LoadConfigs reads the whole config state. It does not block beyond
	// the reads it needs (on Raft it is linearizable, as Load). Errors:
	// ErrUnavailable, ctx.Err(), ErrClosed.
	LoadConfigs(ctx context.Context) (*ConfigState, error)

	// WatchConfigs sends the whole config state on the returned channel:
	// first the current state, then a newer state after changes. States
	// may be coalesced (a watcher that falls behind sees only the latest)
	// but their Version never decreases, and every change is contained in
	// some later state. The channel is closed when ctx ends or the backend
	// is closed. Receivers own what they get. Errors (from the call
	// itself): ErrUnavailable, ctx.Err(), ErrClosed.
	WatchConfigs(ctx context.Context) (<-chan *ConfigState, error)

	// AlterBrokerConfigs applies alterations to the dynamic configs of
	// entity (DefaultBrokerEntity or a broker id in decimal) as stored when
	// the write lands: with replace, the entity's configs become exactly
	// those the alterations set (AlterConfigs); without, they change the
	// stored ones (IncrementalAlterConfigs). It returns the entity's
	// configs as written. An entity left with no config is removed. It
	// blocks until the write is durable or ctx ends (then its outcome is
	// unknown). Errors: an invalid entity or alteration (nothing is
	// written, no sentinel wrapped); ErrUnavailable; ctx.Err() (some
	// backends wrap it together with ErrUnavailable: test with errors.Is);
	// ErrClosed.
	AlterBrokerConfigs(ctx context.Context, entity string, replace bool, alterations []ConfigAlteration) (map[string]string, error)

	// AlterClientQuotas applies alterations (SET or DELETE of the
	// entity's quota keys, QuotaEntity.Keys) to the client quotas of
	// entity as stored when the write lands (Kafka's AlterClientQuotas)
	// and returns the entity's quotas as written. An entity left with no
	// quota is removed. It blocks until the write is durable or ctx ends
	// (then its outcome is unknown). Errors: an invalid entity or
	// alteration (ValidateQuotaAlterations; nothing is written, no
	// sentinel wrapped); ErrUnavailable; ctx.Err(); ErrClosed.
	AlterClientQuotas(ctx context.Context, entity QuotaEntity, alterations []ConfigAlteration) (map[string]string, error)
}

// DefaultBrokerEntity names the cluster-wide default of the dynamic broker
// configs, as Kafka names it (/config/brokers/<default>).
const DefaultBrokerEntity = "<default>"

// ConfigState is the whole stored config state.
type ConfigState struct {
	// Version orders states of one cluster as Metadata.Version does (its
	// unit is the backend's: ZooKeeper zxid, etcd revision, Raft log
	// index); a state sent by WatchConfigs is never older than one sent
	// before.
	Version int64
	// Brokers holds the dynamic broker configs by entity:
	// DefaultBrokerEntity or a broker id in decimal. An entity without
	// configs has no entry.
	Brokers map[string]map[string]string
	// Topics holds each topic's configs (Topic.Config) by topic name; a
	// topic without overrides may have an empty entry or none.
	Topics map[string]map[string]string
	// Quotas holds the client quotas by entity (values as Kafka writes
	// them: decimal numbers). An entity without quotas has no entry.
	Quotas map[QuotaEntity]map[string]string
}

// NewConfigState returns an empty ConfigState.
func NewConfigState() *ConfigState {
	return &ConfigState{Brokers: map[string]map[string]string{}, Topics: map[string]map[string]string{},
		Quotas: map[QuotaEntity]map[string]string{}}
}

// Clone returns a deep copy of s.
func (s *ConfigState) Clone() *ConfigState {
	out := &ConfigState{Version: s.Version, Brokers: make(map[string]map[string]string, len(s.Brokers)),
		Topics: make(map[string]map[string]string, len(s.Topics)), Quotas: make(map[QuotaEntity]map[string]string, len(s.Quotas))}
	for e, c := range s.Quotas {
		out.Quotas[e] = maps.Clone(c)
	}
	for e, c := range s.Brokers {
		out.Brokers[e] = maps.Clone(c)
	}
	for t, c := range s.Topics {
		out.Topics[t] = maps.Clone(c)
	}
	return out
}

// SameContent reports whether s and o hold the same configs, whatever
// their Versions; a topic with an empty entry equals one with none.
func (s *ConfigState) SameContent(o *ConfigState) bool {
	if len(s.Brokers) != len(o.Brokers) || len(s.Quotas) != len(o.Quotas) {
		return false
	}
	for e, c := range s.Quotas {
		if oc, ok := o.Quotas[e]; !ok || !maps.Equal(c, oc) {
			return false
		}
	}
	for e, c := range s.Brokers {
		if oc, ok := o.Brokers[e]; !ok || !maps.Equal(c, oc) {
			return false
		}
	}
	seen := 0
	for t, c := range s.Topics {
		if len(c) == 0 {
			continue
		}
		seen++
		if !maps.Equal(c, o.Topics[t]) {
			return false
		}
	}
	for _, c := range o.Topics {
		if len(c) > 0 {
			seen--
		}
	}
	return seen == 0
}

// ConfigOp is what a ConfigAlteration does, with Kafka's protocol values
// (IncrementalAlterConfigs' OpType).
type ConfigOp int8

// Alteration ops.
const (
	ConfigSet      ConfigOp = 0
	ConfigDelete   ConfigOp = 1
	ConfigAppend   ConfigOp = 2
	ConfigSubtract ConfigOp = 3
)

// String returns Kafka's name: SET, DELETE, APPEND or SUBTRACT.
func (o ConfigOp) String() string {
	switch o {
	case ConfigSet:
		return "SET"
	case ConfigDelete:
		return "DELETE"
	case ConfigAppend:
		return "APPEND"
	case ConfigSubtract:
		return "SUBTRACT"
	}
	return fmt.Sprintf("Unknown(%d)", o)
}

// ConfigAlteration is one change of one config key. Append and Subtract
// treat the value as a comma-separated list (Kafka's LIST configs): Append
// adds the items of Value not in the list yet, Subtract removes them.
type ConfigAlteration struct {
	Op    ConfigOp
	Key   string
	Value string
}

// Validate checks that a has a known op and a key.
func (a ConfigAlteration) Validate() error {
	if a.Key == "" {
		return fmt.Errorf("config alteration %v: empty key", a.Op)
	}
	if a.Op < ConfigSet || a.Op > ConfigSubtract {
		return fmt.Errorf("config %s: op %v: want SET, DELETE, APPEND or SUBTRACT", a.Key, a.Op)
	}
	return nil
}

// ValidateBrokerEntity checks a broker config entity: DefaultBrokerEntity
// or a non-negative broker id in decimal.
func ValidateBrokerEntity(entity string) error {
	if entity == DefaultBrokerEntity {
		return nil
	}
	id, err := strconv.ParseInt(entity, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != entity {
		return fmt.Errorf("broker config entity %q: want %s or a broker id", entity, DefaultBrokerEntity)
	}
	return nil
}

// ValidateConfigAlterations checks entity and every alteration of an
// AlterBrokerConfigs call.
func ValidateConfigAlterations(entity string, alterations []ConfigAlteration) error {
	if err := ValidateBrokerEntity(entity); err != nil {
		return err
	}
	for _, a := range alterations {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// ApplyConfigAlterations returns configs changed by alterations, in
// order (with replace: starting from no config); configs is not changed.
// It is how every backend applies AlterBrokerConfigs, and how a topic's
// configs are altered.
func ApplyConfigAlterations(configs map[string]string, replace bool, alterations []ConfigAlteration) map[string]string {
	next := map[string]string{}
	if !replace {
		maps.Copy(next, configs)
	}
	for _, a := range alterations {
		switch a.Op {
		case ConfigSet:
			next[a.Key] = a.Value
		case ConfigDelete:
			delete(next, a.Key)
		case ConfigAppend:
			list := splitList(next[a.Key])
			for _, item := range splitList(a.Value) {
				if !slices.Contains(list, item) {
					list = append(list, item)
				}
			}
			next[a.Key] = strings.Join(list, ",")
		case ConfigSubtract:
			remove := splitList(a.Value)
			list := slices.DeleteFunc(splitList(next[a.Key]), func(item string) bool { return slices.Contains(remove, item) })
			if len(list) == 0 {
				delete(next, a.Key)
			} else {
				next[a.Key] = strings.Join(list, ",")
			}
		}
	}
	return next
}

// splitList splits a LIST config's value at commas, trimming spaces and
// dropping empty items.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
