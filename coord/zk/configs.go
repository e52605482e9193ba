package zk

import (
	"context"
	"encoding/json"
	"errors"
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
//	/config/users/<user>                         {"version":1,"config":{"producer_byte_rate":"1048576"}}, beside the user's SCRAM credentials
//	/config/users/<user>/clients/<client-id>     the same, for a user and client id
//	/config/clients/<client-id>                  the same, for a client id
//	/config/ips/<ip>                             {"version":1,"config":{"connection_creation_rate":"10"}}
//	/config/changes/config_change_<seq>          {"version":2,"entity_path":"users/<user>/clients/<client-id>"}
//
// Client quota entities' names are sanitized as Kafka's Sanitizer does,
// <default> excepted.
//
// An entity's znode is written with its version as compare-and-set,
// together with its change notification in one multi, and removed when no
// config is left. ConfigState.Version is the greatest zxid among the
// znodes read, raised by the version base.

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

// quotaDirs are the directories of the client quota entities.
func (b *Backend) quotaDirs() []string {
	return []string{b.usersPath(), b.path("/config/clients"), b.path("/config/ips")}
}

// isUserClientsDir reports whether p is /config/users/<user>/clients.
func (b *Backend) isUserClientsDir(p string) bool {
	return path.Base(p) == "clients" && path.Dir(path.Dir(p)) == b.usersPath()
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

// AlterClientQuotas implements coord.ConfigStore: one compare-and-set of
// the entity's znode, with its change notification, after creating its
// parents as Kafka does. A user's znode keeps its SCRAM credentials.
func (b *Backend) AlterClientQuotas(ctx context.Context, entity coord.QuotaEntity, alterations []coord.ConfigAlteration) (map[string]string, error) {
	if err := coord.ValidateQuotaAlterations(entity, alterations); err != nil {
		return nil, err
	}
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	p := b.path("/config/" + entity.String())
	if err := b.refusing("alter client quotas at " + p); err != nil {
		return nil, err
	}
	// A user's client quota lives under the user's znode, which a
	// concurrent SCRAM credential delete removes when it is empty. The
	// write that creates the quota's znode creates the parents found
	// missing in the same multi, so that a delete between the two
	// cannot fail it; after a conflict the parents are looked at again.
	if err := b.do(ctx, p, func(c *zk.Conn) error { return createDirs(c, b, b.quotaDirs()) }); err != nil {
		return nil, convertError(err, "create the client quota directories")
	}
	var userParents, missingParents []string
	if entity.User != "" && entity.ClientID != "" {
		user := path.Dir(path.Dir(p))
		userParents = []string{user, user + "/clients"}
	}
	findMissing := func(ctx context.Context, _ bool) error {
		missingParents = missingParents[:0]
		return convertError(b.do(ctx, p, func(c *zk.Conn) error {
			missingParents = missingParents[:0]
			for _, parent := range userParents {
				ok, _, err := c.Exists(parent)
				if err != nil {
					return err
				}
				if !ok {
					missingParents = append(missingParents, parent)
				}
			}
			return nil
		}), "look for the parents of "+p)
	}
	if err := findMissing(ctx, false); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(configChangeZNode{Version: 2, EntityPath: entity.String()})
	changePath := b.configChangesPath() + "/config_change_"
	change := &zk.CreateRequest{Path: changePath, Data: data, Acl: b.aclFor(changePath), Flags: zk.FlagSequence}
	var written map[string]string
	what := "alter client quotas at " + p
	err := b.updateZNodeUnder(ctx, p, b.configChangesPath(), what, findMissing, func(data []byte, stat *zk.Stat) ([]any, error) {
		stored, err := decodeConfig(entity.String(), data)
		if err != nil {
			return nil, err
		}
		next := coord.ApplyConfigAlterations(stored, false, alterations)
		written = quotasOf(entity, next)
		switch {
		case maps.Equal(stored, next):
			return nil, nil
		case stat == nil:
			var ops []any
			for _, parent := range missingParents {
				var data []byte
				if parent == path.Dir(path.Dir(p)) {
					data = encodeConfig(nil)
				}
				ops = append(ops, &zk.CreateRequest{Path: parent, Data: data, Acl: b.aclFor(parent)})
			}
			return append(ops, &zk.CreateRequest{Path: p, Data: encodeConfig(next), Acl: b.aclFor(p)}, change), nil
		case len(next) == 0 && stat.NumChildren == 0:
			return []any{&zk.DeleteRequest{Path: p, Version: stat.Version}, change}, nil
		default:
			return []any{&zk.SetDataRequest{Path: p, Data: encodeConfig(next), Version: stat.Version}, change}, nil
		}
	})
	if err != nil {
		return nil, err
	}
	return written, nil
}

// quotasOf returns the quota keys of config, which may hold other keys
// (a user's SCRAM credentials).
func quotasOf(entity coord.QuotaEntity, config map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range entity.Keys() {
		if v, ok := config[k]; ok {
			out[k] = v
		}
	}
	return out
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

// configWatcher follows /config/brokers, /config/topics and the client
// quota entities' directories.
type configWatcher struct {
	znodeTree
	b   *Backend
	out chan *coord.ConfigState

	configs map[string]map[string]string // by znode path
	last    *coord.ConfigState
}

func (b *Backend) newConfigWatcher(out chan *coord.ConfigState) *configWatcher {
	w := &configWatcher{b: b, out: out}
	dirs := append([]string{b.brokerConfigsPath(), b.path("/config/topics")}, b.quotaDirs()...)
	w.znodeTree = znodeTree{
		dirs:  dirs,
		isDir: func(p string) bool { return slices.Contains(dirs, p) || b.isUserClientsDir(p) },
		subdirs: func(p string) []string {
			if path.Dir(p) == b.usersPath() {
				return []string{p + "/clients"}
			}
			return nil
		},
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
	s.Version = w.version + w.b.bases().Version
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
		default:
			entity, err := coord.ParseQuotaEntity(strings.TrimPrefix(p, w.b.path("/config/")))
			if err != nil {
				continue // not an entity tripod knows
			}
			if quotas := quotasOf(entity, config); len(quotas) > 0 {
				s.Quotas[entity] = quotas
			}
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

// createDirs makes each of dirs, empty, unless it exists.
func createDirs(c *zk.Conn, b *Backend, dirs []string) error {
	for _, dir := range dirs {
		if _, err := c.Create(dir, nil, 0, b.aclFor(dir)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}
