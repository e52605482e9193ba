package zk

import (
	"context"
	"encoding/json"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// The config store keeps Kafka's ZooKeeper layout and JSON, so Kafka's
// kafka-configs --zookeeper and zkCli read and write it:
//
//	/config/brokers/<default>                    {"version":1,"config":{"leader.replication.throttled.rate":"1048576"}}
//	/config/brokers/<id>                         the same, for one broker
//	/config/changes/config_change_<seq>          {"version":2,"entity_path":"brokers/<default>"}
//	/config/topics/<topic>                       written by Commit with the metadata; watched here
//
// An entity's znode is written with its version as compare-and-set,
// together with its change notification in one multi, and removed when no
// config is left. ConfigState.Version is the greatest zxid among the
// znodes read.

// Znode paths of the config store, under the chroot.
func (b *Backend) brokerConfigsPath() string { return b.path("/config/brokers") }
func (b *Backend) brokerConfigPath(entity string) string {
	return b.brokerConfigsPath() + "/" + entity
}

func (b *Backend) brokerConfigChange(entity string) *zk.CreateRequest {
	data, _ := json.Marshal(configChangeZNode{Version: 2, EntityPath: "brokers/" + entity})
	path := b.configChangesPath() + "/config_change_"
	return &zk.CreateRequest{Path: path, Data: data, Acl: b.aclFor(path), Flags: zk.FlagSequence}
}

// LoadConfigs implements coord.ConfigStore. It reads every broker and
// topic config znode with pipelined, concurrent gets.
func (b *Backend) LoadConfigs(ctx context.Context) (*coord.ConfigState, error) {
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	w := b.newConfigWatcher(nil)
	err := b.do(ctx, "load configs", func(c *zk.Conn) error {
		w.reset()
		return w.read(c, false)
	})
	if err != nil {
		return nil, convertError(err, "load configs under "+b.path("/config"))
	}
	return w.snapshot(), nil
}

// AlterBrokerConfigs implements coord.ConfigStore: one compare-and-set of
// the entity's znode, with its change notification.
func (b *Backend) AlterBrokerConfigs(ctx context.Context, entity string, replace bool, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if err := coord.ValidateConfigAlterations(entity, alterations); err != nil {
		return nil, err
	}
	p := b.brokerConfigPath(entity)
	var written map[string]string
	what := "alter broker configs at " + p
	err := b.updateZNode(ctx, p, b.configChangesPath(), what, func(data []byte, stat *zk.Stat) ([]any, error) {
		stored, err := decodeConfig(entity, data)
		if err != nil {
			return nil, err
		}
		next := coord.ApplyConfigAlterations(stored, replace, alterations)
		written = next
		switch {
		case maps.Equal(stored, next):
			return nil, nil
		case stat == nil:
			return []any{&zk.CreateRequest{Path: p, Data: encodeConfig(next), Acl: b.aclFor(p)}, b.brokerConfigChange(entity)}, nil
		case len(next) == 0 && stat.NumChildren == 0:
			return []any{&zk.DeleteRequest{Path: p, Version: stat.Version}, b.brokerConfigChange(entity)}, nil
		default:
			return []any{&zk.SetDataRequest{Path: p, Data: encodeConfig(next), Version: stat.Version}, b.brokerConfigChange(entity)}, nil
		}
	})
	if err != nil {
		return nil, err
	}
	return written, nil
}

// WatchConfigs implements coord.ConfigStore. It keeps a copy of the broker
// and topic configs up to date with one ZooKeeper watch per znode (the two
// directories' children, each entity's and topic's data), re-reading only
// the znodes whose watch fired; it does not watch partition states.
func (b *Backend) WatchConfigs(ctx context.Context) (<-chan *coord.ConfigState, error) {
	w := b.newConfigWatcher(make(chan *coord.ConfigState, 1))
	if err := b.startWatch(ctx, "watch configs under "+b.path("/config"), w); err != nil {
		return nil, err
	}
	return w.out, nil
}

// configWatcher follows /config/brokers and /config/topics.
type configWatcher struct {
	znodeTree
	b   *Backend
	out chan *coord.ConfigState

	configs map[string]map[string]string // by znode path
	last    *coord.ConfigState
}

func (b *Backend) newConfigWatcher(out chan *coord.ConfigState) *configWatcher {
	w := &configWatcher{b: b, out: out}
	dirs := []string{b.brokerConfigsPath(), b.path("/config/topics")}
	w.znodeTree = znodeTree{
		dirs:   dirs,
		isDir:  func(p string) bool { return slices.Contains(dirs, p) },
		forget: func(p string) { delete(w.configs, p) },
		decode: func(p, _, name string, data []byte) {
			config, err := decodeConfig(name, data)
			if err != nil {
				w.b.log.Warn("ignoring a config znode that does not decode", "znode", p, "error", err)
				return
			}
			w.configs[p] = config
		},
	}
	return w
}

func (w *configWatcher) reset() {
	w.znodeTree.reset()
	w.configs = map[string]map[string]string{}
}

// snapshot builds the whole state from what was read.
func (w *configWatcher) snapshot() *coord.ConfigState {
	s := coord.NewConfigState()
	s.Version = w.version
	for p, config := range w.configs {
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		switch {
		case dir == w.dirs[0] && len(config) > 0:
			if coord.ValidateBrokerEntity(name) != nil {
				continue // not an entity tripod knows
			}
			s.Brokers[name] = maps.Clone(config)
		case dir == w.dirs[1]:
			s.Topics[name] = maps.Clone(config)
		}
	}
	return s
}

func (w *configWatcher) publish() {
	if !w.ready() {
		return
	}
	s := w.snapshot()
	if w.last != nil && s.SameContent(w.last) {
		return
	}
	w.last = s
	offer(w.out, s.Clone())
}

func (w *configWatcher) close() { close(w.out) }
