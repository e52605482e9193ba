package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// The config store keeps one key per broker config entity beside the
// security keys:
//
//	<prefix>/configs/brokers/<default>   {"leader.replication.throttled.rate":"1048576"}
//	<prefix>/configs/brokers/<id>        the same, for one broker
//
//	<prefix>/configs/quotas/<entity path> {"producer_byte_rate":"1048576"}, the entity path as
//	                                      coord.QuotaEntity.String writes it (users/<user>/clients/<client-id>, ips/<ip>, ...)
//
// A write is a transaction comparing the key's mod revision with the one
// read (compare-and-set), retried on conflict; an entity left with no
// config is deleted. Topic configs are the Config of the topic keys
// (<prefix>/topics/<name>), which the config watch follows without the
// partition states.

// maxConfigConflicts bounds how many conflicting writes of one entity an
// alteration outlasts.
const maxConfigConflicts = 1000

func (b *Backend) brokerConfigsPrefix() string { return b.prefix + "/configs/brokers/" }
func (b *Backend) brokerConfigKey(entity string) string {
	return b.brokerConfigsPrefix() + entity
}

func (b *Backend) quotasPrefix() string { return b.prefix + "/configs/quotas/" }

// configsPrefix holds both the broker configs and the client quotas, so
// that one watched range follows both.
func (b *Backend) configsPrefix() string { return b.prefix + "/configs/" }

// configView is a config watch's or load's view of the three ranges.
type configView struct {
	b       *Backend
	brokers map[string]map[string]string
	topics  map[string]map[string]string
	quotas  map[coord.QuotaEntity]map[string]string
}

func (b *Backend) newConfigView() *configView {
	return &configView{b: b, brokers: map[string]map[string]string{}, topics: map[string]map[string]string{},
		quotas: map[coord.QuotaEntity]map[string]string{}}
}

// put applies one key as stored; a key that does not decode is skipped
// (and a stale entry of it dropped).
func (v *configView) put(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	v.remove(key)
	if entity, ok := strings.CutPrefix(key, v.b.brokerConfigsPrefix()); ok {
		var config map[string]string
		if err := json.Unmarshal(kv.Value, &config); err != nil || coord.ValidateBrokerEntity(entity) != nil {
			v.b.log.Warn("skipping unreadable broker configs", "key", key, "error", err)
			return
		}
		if len(config) > 0 {
			v.brokers[entity] = config
		}
		return
	}
	if p, ok := strings.CutPrefix(key, v.b.quotasPrefix()); ok {
		var quotas map[string]string
		entity, err := coord.ParseQuotaEntity(p)
		if err == nil {
			err = json.Unmarshal(kv.Value, &quotas)
		}
		if err != nil {
			v.b.log.Warn("skipping unreadable client quotas", "key", key, "error", err)
			return
		}
		if len(quotas) > 0 {
			v.quotas[entity] = quotas
		}
		return
	}
	if name, ok := strings.CutPrefix(key, v.b.topicsPrefix()); ok {
		var t coord.Topic
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			v.b.log.Warn("skipping unreadable topic", "key", key, "error", err)
			return
		}
		v.topics[name] = t.Config
	}
}

func (v *configView) remove(key string) {
	if entity, ok := strings.CutPrefix(key, v.b.brokerConfigsPrefix()); ok {
		delete(v.brokers, entity)
	} else if name, ok := strings.CutPrefix(key, v.b.topicsPrefix()); ok {
		delete(v.topics, name)
	} else if p, ok := strings.CutPrefix(key, v.b.quotasPrefix()); ok {
		if entity, err := coord.ParseQuotaEntity(p); err == nil {
			delete(v.quotas, entity)
		}
	}
}

// state builds the ConfigState of the view at version.
func (v *configView) state(version int64) *coord.ConfigState {
	s := &coord.ConfigState{Version: version, Brokers: v.brokers, Topics: v.topics, Quotas: v.quotas}
	return s.Clone()
}

// loadConfigView reads both ranges into a new view at one revision, again
// when etcd compacts it meanwhile.
func (b *Backend) loadConfigView(ctx context.Context) (*configView, int64, error) {
	for {
		v := b.newConfigView()
		rev, err := b.rangeAt(ctx, b.configsPrefix(), 0, v.put)
		if err == nil {
			_, err = b.rangeAt(ctx, b.topicsPrefix(), rev, v.put)
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		return v, rev, err
	}
}

// LoadConfigs implements coord.ConfigStore. Its Version is the revision
// it read at, raised by the version base.
func (b *Backend) LoadConfigs(ctx context.Context) (*coord.ConfigState, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: load configs", coord.ErrClosed)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.record(ctx); err != nil {
		return nil, err
	}
	base := b.bases().Version
	v, rev, err := b.loadConfigView(ctx)
	if err != nil {
		return nil, err
	}
	return v.state(rev + base), nil
}

// WatchConfigs implements coord.ConfigStore. It follows the range of the
// broker configs and client quotas and the topics' (not the partition
// states'); a state is sent when a config changes.
func (b *Backend) WatchConfigs(ctx context.Context) (<-chan *coord.ConfigState, error) {
	return watchView(ctx, b, "configs", [][2]string{
		{b.configsPrefix(), clientv3.GetPrefixRangeEnd(b.configsPrefix())},
		{b.topicsPrefix(), clientv3.GetPrefixRangeEnd(b.topicsPrefix())},
	}, b.loadConfigView)
}

// AlterBrokerConfigs implements coord.ConfigStore: a get, then a
// transaction conditional on the key's mod revision, again on conflict.
func (b *Backend) AlterBrokerConfigs(ctx context.Context, entity string, replace bool, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if err := coord.ValidateConfigAlterations(entity, alterations); err != nil {
		return nil, err
	}
	key := b.brokerConfigKey(entity)
	return b.alterConfigKey(ctx, key, "alter broker configs "+key, replace, alterations)
}

// AlterClientQuotas implements coord.ConfigStore: as AlterBrokerConfigs,
// on the entity's key.
func (b *Backend) AlterClientQuotas(ctx context.Context, entity coord.QuotaEntity, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if err := coord.ValidateQuotaAlterations(entity, alterations); err != nil {
		return nil, err
	}
	key := b.quotasPrefix() + entity.String()
	return b.alterConfigKey(ctx, key, "alter client quotas "+key, false, alterations)
}

// alterConfigKey applies alterations to the config map stored at key: a
// get, then a transaction conditional on the key's mod revision and
// guarded by the migration record, again on conflict. Even an alteration
// that changes nothing is refused while the record refuses writes.
func (b *Backend) alterConfigKey(ctx context.Context, key, what string, replace bool, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.writableRecord(ctx, what); err != nil {
		return nil, err
	}
	for range maxConfigConflicts {
		resp, err := b.client.Get(ctx, key)
		if err != nil {
			return nil, b.convertError(err, what)
		}
		var stored map[string]string
		var modRev int64
		if len(resp.Kvs) > 0 {
			modRev = resp.Kvs[0].ModRevision
			if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil {
				return nil, fmt.Errorf("%s: decode: %w", what, err)
			}
		}
		next := coord.ApplyConfigAlterations(stored, replace, alterations)
		if maps.Equal(stored, next) {
			return next, nil
		}
		write := clientv3.OpDelete(key)
		if len(next) > 0 {
			data, _ := json.Marshal(next)
			write = clientv3.OpPut(key, string(data))
		}
		tr, err := b.guardedTxn(ctx, what, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)}, []clientv3.Op{write},
			[]clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())},
			func(tr *clientv3.TxnResponse) bool {
				var now int64
				if kvs := tr.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
					now = kvs[0].ModRevision
				}
				return now != modRev
			})
		if err != nil {
			return nil, err
		}
		if tr.Succeeded {
			return next, nil
		}
	}
	return nil, fmt.Errorf("%w: %s: %d conflicting writes in a row", coord.ErrUnavailable, what, maxConfigConflicts)
}
