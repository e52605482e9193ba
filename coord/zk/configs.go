package zk

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path"
	"slices"
	"sort"
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
	b    *Backend
	out  chan *coord.ConfigState
	dirs []string

	version  int64
	children map[string]map[string]bool   // by directory
	configs  map[string]map[string]string // by znode path
	stale    map[string]struct{}          // znode paths, directories or not
	changed  bool
	last     *coord.ConfigState
}

func (b *Backend) newConfigWatcher(out chan *coord.ConfigState) *configWatcher {
	return &configWatcher{b: b, out: out, dirs: []string{b.brokerConfigsPath(), b.path("/config/topics")}}
}

func (w *configWatcher) reset() {
	w.children = map[string]map[string]bool{}
	w.configs = map[string]map[string]string{}
	w.stale = map[string]struct{}{}
	for _, dir := range w.dirs {
		w.stale[dir] = struct{}{}
	}
	w.changed = true
}

func (w *configWatcher) isDir(p string) bool { return slices.Contains(w.dirs, p) }

func (w *configWatcher) note(ev zk.Event) {
	if w.isDir(ev.Path) || w.isDir(path.Dir(ev.Path)) {
		w.stale[ev.Path] = struct{}{}
	}
}

func (w *configWatcher) dirty() bool { return len(w.stale) > 0 }

func (w *configWatcher) refresh(c *zk.Conn) error { return w.read(c, true) }

// read reads the stale znodes (with watches when watch is set) and the
// znodes that new children reveal, until nothing is stale or a read fails.
func (w *configWatcher) read(c *zk.Conn, watch bool) error {
	for len(w.stale) > 0 {
		paths := slices.Collect(maps.Keys(w.stale))
		w.stale = map[string]struct{}{}
		sort.Slice(paths, func(i, j int) bool { return w.isDir(paths[i]) && !w.isDir(paths[j]) })
		reads := make([]secRead, len(paths))
		parallel(len(paths), func(i int) error {
			r := secRead{path: paths[i]}
			switch {
			case w.isDir(paths[i]) && watch:
				r.children, r.stat, _, r.err = c.ChildrenW(paths[i])
				if errors.Is(r.err, zk.ErrNoNode) {
					_, _, _, r.err = c.ExistsW(paths[i])
					r.missing = true
				}
			case w.isDir(paths[i]):
				r.children, r.stat, r.err = c.Children(paths[i])
				if errors.Is(r.err, zk.ErrNoNode) {
					r.missing, r.err = true, nil
				}
			case watch:
				r.data, r.stat, _, r.err = c.GetW(paths[i])
			default:
				r.data, r.stat, r.err = c.Get(paths[i])
			}
			if !w.isDir(paths[i]) && errors.Is(r.err, zk.ErrNoNode) {
				r.missing, r.err = true, nil
			}
			reads[i] = r
			return nil
		})
		var first error
		for _, r := range reads {
			if r.err != nil {
				w.stale[r.path] = struct{}{}
				if first == nil {
					first = r.err
				}
				continue
			}
			w.apply(r)
		}
		if first != nil {
			return first
		}
	}
	return nil
}

func (w *configWatcher) apply(r secRead) {
	if r.stat != nil {
		w.version = max(w.version, r.stat.Mzxid, r.stat.Pzxid)
	}
	if w.isDir(r.path) {
		names := map[string]bool{}
		if !r.missing {
			for _, n := range r.children {
				names[n] = true
				if !w.children[r.path][n] {
					w.stale[r.path+"/"+n] = struct{}{}
				}
			}
		}
		for n := range w.children[r.path] {
			if !names[n] {
				delete(w.configs, r.path+"/"+n)
			}
		}
		w.children[r.path] = names
		w.changed = true
		return
	}
	dir, name := path.Split(r.path)
	dir = strings.TrimSuffix(dir, "/")
	if !w.children[dir][name] {
		return // removed since: its read is moot
	}
	w.changed = true
	delete(w.configs, r.path)
	if r.missing {
		return
	}
	config, err := decodeConfig(name, r.data)
	if err != nil {
		w.b.log.Warn("ignoring a config znode that does not decode", "znode", r.path, "error", err)
		return
	}
	w.configs[r.path] = config
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
	if len(w.stale) > 0 || !w.changed {
		return
	}
	w.changed = false
	s := w.snapshot()
	if w.last != nil && s.SameContent(w.last) {
		return
	}
	w.last = s
	offer(w.out, s.Clone())
}

func (w *configWatcher) close() { close(w.out) }
