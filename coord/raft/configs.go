package raft

import (
	"context"
	"fmt"
	"maps"

	"github.com/tripodmq/tripod/coord"
)

// cmdAlterBrokerConfigs alters one broker config entity: one log entry,
// applied through the leader (a follower forwards it, as Register), so the
// log serialises concurrent writers.
const cmdAlterBrokerConfigs cmdType = "alter_broker_configs"

// cmdAlterClientQuotas alters one client quota entity, as
// alter_broker_configs does a broker config entity.
const cmdAlterClientQuotas cmdType = "alter_client_quotas"

// configsCommand holds the fields of alter_broker_configs.
type configsCommand struct {
	// Entity is the broker config entity, or the client quota entity's
	// path (coord.QuotaEntity.String) in alter_client_quotas.
	Entity      string                   `json:"entity"`
	Replace     bool                     `json:"replace,omitempty"`
	Alterations []coord.ConfigAlteration `json:"alterations,omitempty"`
}

// configsData is the config store in the state machine and its snapshots
// (snapshots written before it existed restore it empty). Apply replaces
// Brokers rather than changing it inside, so that Snapshot's shallow copy
// of fsmData stays a point-in-time copy. Topic configs are the topics'
// own (fsmData.Topics).
type configsData struct {
	// Brokers holds the dynamic configs by entity.
	Brokers map[string]map[string]string `json:"brokers,omitempty"`
	// Quotas holds the client quotas by entity path
	// (coord.QuotaEntity.String), replaced as Brokers is.
	Quotas map[string]map[string]string `json:"quotas,omitempty"`
	// Version is the index of the last entry that changed Brokers or
	// Quotas.
	Version uint64 `json:"version,omitempty"`
}

// applyConfigsLocked applies alter_broker_configs at index; f.mu is held.
// It validates the command again (a forwarded entry comes from another
// node), so the outcome depends on the log alone.
func (f *fsm) applyConfigsLocked(index uint64, cmd *command) applyResult {
	cc := cmd.Configs
	if cc == nil {
		return applyResult{Err: fmt.Errorf("raft log entry %d: %s command without its fields", index, cmd.Type)}
	}
	d := &f.data.Configs
	entities := &d.Brokers
	if cmd.Type == cmdAlterClientQuotas {
		entity, err := coord.ParseQuotaEntity(cc.Entity)
		if err == nil {
			err = coord.ValidateQuotaAlterations(entity, cc.Alterations)
		}
		if err != nil {
			return applyResult{Err: err}
		}
		entities = &d.Quotas
	} else if err := coord.ValidateConfigAlterations(cc.Entity, cc.Alterations); err != nil {
		return applyResult{Err: err}
	}
	stored := (*entities)[cc.Entity]
	next := coord.ApplyConfigAlterations(stored, cc.Replace, cc.Alterations)
	if !maps.Equal(stored, next) {
		changed := maps.Clone(*entities)
		if changed == nil {
			changed = map[string]map[string]string{}
		}
		if len(next) == 0 {
			delete(changed, cc.Entity)
		} else {
			changed[cc.Entity] = next
		}
		*entities, d.Version = changed, index
	}
	return applyResult{Configs: maps.Clone(next)}
}

// configs returns a deep copy of the config state. Its Version is the
// index of the last change to the broker configs or the metadata, raised
// by the bases.
func (f *fsm) configs() *coord.ConfigState {
	s, _ := f.configsAt()
	return s
}

// configsAt returns configs and configsVersion, read together.
func (f *fsm) configsAt() (*coord.ConfigState, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	changed := max(f.data.Configs.Version, f.data.MetaVersion)
	s := &coord.ConfigState{Version: f.data.Migration.Bases.version(changed),
		Brokers: f.data.Configs.Brokers, Topics: make(map[string]map[string]string, len(f.data.Topics))}
	for name, ts := range f.data.Topics {
		s.Topics[name] = ts.Topic.Config
	}
	s.Quotas = make(map[coord.QuotaEntity]map[string]string, len(f.data.Configs.Quotas))
	for p, quotas := range f.data.Configs.Quotas {
		if entity, err := coord.ParseQuotaEntity(p); err == nil {
			s.Quotas[entity] = quotas
		}
	}
	return s.Clone(), max(changed, f.data.Migration.BasesVersion)
}

// configsVersion returns the index of the last change to the broker
// configs, the metadata or the bases.
func (f *fsm) configsVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.data.Configs.Version, f.data.MetaVersion, f.data.Migration.BasesVersion)
}

// LoadConfigs implements coord.ConfigStore. It is linearizable, as Load.
func (b *Backend) LoadConfigs(ctx context.Context) (*coord.ConfigState, error) {
	if err := b.readable(ctx, "load configs"); err != nil {
		return nil, err
	}
	return b.fsm.configs(), nil
}

// WatchConfigs implements coord.ConfigStore. A metadata change wakes it;
// it sends a state only when a config changed.
func (b *Backend) WatchConfigs(ctx context.Context) (<-chan *coord.ConfigState, error) {
	return watch(ctx, b, "watch configs", b.fsm.configsVersion, b.fsm.configsAt,
		(*coord.ConfigState).SameContent)
}

// AlterBrokerConfigs implements coord.ConfigStore: one
// alter_broker_configs entry.
func (b *Backend) AlterBrokerConfigs(ctx context.Context, entity string, replace bool, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if err := coord.ValidateConfigAlterations(entity, alterations); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("alter broker configs of %s", entity)
	res, err := b.apply(ctx, what, &command{Type: cmdAlterBrokerConfigs,
		Configs: &configsCommand{Entity: entity, Replace: replace, Alterations: alterations}})
	if err != nil {
		return nil, err
	}
	if res.Configs == nil {
		res.Configs = map[string]string{}
	}
	return res.Configs, nil
}

// AlterClientQuotas implements coord.ConfigStore: one
// alter_client_quotas entry.
func (b *Backend) AlterClientQuotas(ctx context.Context, entity coord.QuotaEntity, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if err := coord.ValidateQuotaAlterations(entity, alterations); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("alter client quotas of %s", entity)
	res, err := b.apply(ctx, what, &command{Type: cmdAlterClientQuotas,
		Configs: &configsCommand{Entity: entity.String(), Alterations: alterations}})
	if err != nil {
		return nil, err
	}
	if res.Configs == nil {
		res.Configs = map[string]string{}
	}
	return res.Configs, nil
}
