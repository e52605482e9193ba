package zk

import (
	"errors"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"
)

// znodeTree keeps a copy of a few directories' children and of each
// child's data up to date with one ZooKeeper watch per znode, re-reading
// only the znodes whose watch fired (note, then refresh). It is the part
// the security and config watchers share; each takes in a child's data
// with decode and drops what it held of a child with forget (the child
// was removed, or is read again).
type znodeTree struct {
	isDir  func(p string) bool
	dirs   []string
	decode func(p, dir, name string, data []byte)
	forget func(p string)
	// subdirs, when set, names the directories below a child that has
	// data of its own (a user's clients under /config/users/<user>); a
	// child read makes them stale unless they are followed already.
	subdirs func(p string) []string

	version  int64
	children map[string]map[string]bool // by directory
	stale    map[string]struct{}        // znode paths, directories or not
	changed  bool
}

// secRead is the outcome of reading one znode.
type secRead struct {
	path     string
	missing  bool
	data     []byte
	children []string
	stat     *zk.Stat
	err      error
}

// reset marks every directory stale, as after a new session; the caller
// drops what it decoded.
func (t *znodeTree) reset() {
	t.children = map[string]map[string]bool{}
	t.stale = map[string]struct{}{}
	for _, dir := range t.dirs {
		t.stale[dir] = struct{}{}
	}
	t.changed = true
}

// note marks the znode of a watch event stale if it is one of the tree's.
func (t *znodeTree) note(ev zk.Event) {
	if t.isDir(ev.Path) || t.isDir(path.Dir(ev.Path)) {
		t.stale[ev.Path] = struct{}{}
	}
}

func (t *znodeTree) dirty() bool { return len(t.stale) > 0 }

// refresh reads the stale znodes, with watches, and the znodes that new
// children reveal, until nothing is stale or a read fails.
func (t *znodeTree) refresh(c *zk.Conn) error { return t.read(c, true) }

// read is refresh, with watches only when watch is set.
func (t *znodeTree) read(c *zk.Conn, watch bool) error {
	for len(t.stale) > 0 {
		paths := slices.Collect(maps.Keys(t.stale))
		t.stale = map[string]struct{}{}
		sort.Slice(paths, func(i, j int) bool { return t.isDir(paths[i]) && !t.isDir(paths[j]) })
		reads := make([]secRead, len(paths))
		parallel(len(paths), func(i int) error {
			r := secRead{path: paths[i]}
			switch {
			case t.isDir(paths[i]) && watch:
				r.children, r.stat, _, r.err = c.ChildrenW(paths[i])
				if errors.Is(r.err, zk.ErrNoNode) {
					// Watch for the directory to be created.
					_, _, _, r.err = c.ExistsW(paths[i])
					r.missing = true
				}
			case t.isDir(paths[i]):
				r.children, r.stat, r.err = c.Children(paths[i])
				if errors.Is(r.err, zk.ErrNoNode) {
					r.missing, r.err = true, nil
				}
			case watch:
				r.data, r.stat, _, r.err = c.GetW(paths[i])
			default:
				r.data, r.stat, r.err = c.Get(paths[i])
			}
			if !t.isDir(paths[i]) && errors.Is(r.err, zk.ErrNoNode) {
				r.missing, r.err = true, nil
			}
			reads[i] = r
			return nil
		})
		var first error
		for _, r := range reads {
			if r.err != nil {
				t.stale[r.path] = struct{}{}
				if first == nil {
					first = r.err
				}
				continue
			}
			t.apply(r)
		}
		if first != nil {
			return first
		}
	}
	return nil
}

// apply takes in one read: a directory's children (new ones become stale,
// removed ones are forgotten) or a child's data (decoded, unless the
// child was removed since).
func (t *znodeTree) apply(r secRead) {
	if r.stat != nil {
		t.version = max(t.version, r.stat.Mzxid, r.stat.Pzxid)
	}
	if t.isDir(r.path) {
		names := map[string]bool{}
		if !r.missing {
			for _, n := range r.children {
				names[n] = true
				if !t.children[r.path][n] {
					t.stale[r.path+"/"+n] = struct{}{}
				}
			}
		}
		for n := range t.children[r.path] {
			if !names[n] {
				t.forget(r.path + "/" + n)
			}
		}
		t.children[r.path] = names
		t.changed = true
		return
	}
	dir, name := path.Split(r.path)
	dir = strings.TrimSuffix(dir, "/")
	if !t.children[dir][name] {
		return // removed since: its read is moot
	}
	t.changed = true
	t.forget(r.path)
	if r.missing {
		return
	}
	t.decode(r.path, dir, name, r.data)
	if t.subdirs != nil {
		for _, sub := range t.subdirs(r.path) {
			if _, followed := t.children[sub]; !followed {
				t.stale[sub] = struct{}{}
			}
		}
	}
}

// ready reports whether a state may be sent: nothing is stale and
// something changed since the last; it clears the change.
func (t *znodeTree) ready() bool {
	if len(t.stale) > 0 || !t.changed {
		return false
	}
	t.changed = false
	return true
}
