package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// The security store keeps Kafka's ZooKeeper layout and JSON, so Kafka's
// tools (kafka-configs, kafka-acls with --zookeeper, zkCli) read and write
// it:
//
//	/config/users/<user>                         {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}
//	/config/changes/config_change_<seq>          {"version":2,"entity_path":"users/<user>"}
//	/kafka-acl/<Type>/<name>                     literal ACLs: {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
//	/kafka-acl-changes/acl_changes_<seq>         "TOPIC:<name>"
//	/kafka-acl-extended/prefixed/<Type>/<name>   prefixed ACLs, the same JSON
//	/kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}
//
// all under the chroot. <user> is sanitized as Kafka's Sanitizer does
// (URL-encoded, "*" as %2A); <Type> is Topic, Group, Cluster,
// TransactionalId, DelegationToken or User. A user's or a resource's znode
// is written with its version as compare-and-set, together with its
// change notification in one multi, and removed when nothing is left in
// it. SecurityState.Version is the greatest zxid among the znodes read,
// raised by the version base.

// maxSecurityConflicts bounds how many conflicting writes of one znode a
// security write outlasts, as maxProducerIDConflicts does.
const maxSecurityConflicts = 1000

// changeExpiration is how long change notifications are kept: Kafka's
// ZkNodeChangeNotificationListener purges them after 15 minutes, and so
// does every security write here.
const changeExpiration = 15 * time.Minute

// Znode paths of the security store, under the chroot.
func (b *Backend) usersPath() string             { return b.path("/config/users") }
func (b *Backend) configChangesPath() string     { return b.path("/config/changes") }
func (b *Backend) userPath(user string) string   { return b.usersPath() + "/" + sanitize(user) }
func (b *Backend) literalACLChangesPath() string { return b.path("/kafka-acl-changes") }
func (b *Backend) prefixedACLChangesPath() string {
	return b.path("/kafka-acl-extended-changes")
}

// aclStorePath is the root of the ACLs of pattern type p.
func (b *Backend) aclStorePath(p coord.ACLPatternType) string {
	if p == coord.ACLPatternPrefixed {
		return b.path("/kafka-acl-extended/prefixed")
	}
	return b.path("/kafka-acl")
}

func (b *Backend) aclChangesPath(p coord.ACLPatternType) string {
	if p == coord.ACLPatternPrefixed {
		return b.prefixedACLChangesPath()
	}
	return b.literalACLChangesPath()
}

// aclResourceTypes are the resource types that have a directory.
var aclResourceTypes = []coord.ACLResourceType{coord.ACLResourceTopic, coord.ACLResourceGroup, coord.ACLResourceCluster,
	coord.ACLResourceTransactionalID, coord.ACLResourceDelegationToken, coord.ACLResourceUser}

// aclResource is a resource pattern: one znode of ACLs.
type aclResource struct {
	pattern coord.ACLPatternType
	typ     coord.ACLResourceType
	name    string
}

func resourceOf(a coord.ACL) aclResource {
	return aclResource{pattern: a.PatternType, typ: a.ResourceType, name: a.ResourceName}
}

func (b *Backend) aclTypePath(p coord.ACLPatternType, t coord.ACLResourceType) string {
	return b.aclStorePath(p) + "/" + t.String()
}

func (b *Backend) aclPath(r aclResource) string {
	return b.aclTypePath(r.pattern, r.typ) + "/" + r.name
}

// aclDirs returns the directories holding ACL znodes, with their resource
// patterns' types.
func (b *Backend) aclDirs() map[string]aclResource {
	dirs := map[string]aclResource{}
	for _, p := range []coord.ACLPatternType{coord.ACLPatternLiteral, coord.ACLPatternPrefixed} {
		for _, t := range aclResourceTypes {
			dirs[b.aclTypePath(p, t)] = aclResource{pattern: p, typ: t}
		}
	}
	return dirs
}

// ensureSecurityBase creates the store's directories; writes call it when
// ZooKeeper says one is missing.
func (b *Backend) ensureSecurityBase(ctx context.Context) error {
	if err := b.ensureBase(ctx); err != nil {
		return err
	}
	paths := []string{b.usersPath(), b.configChangesPath(), b.path("/kafka-acl"), b.literalACLChangesPath(),
		b.path("/kafka-acl-extended"), b.aclStorePath(coord.ACLPatternPrefixed), b.prefixedACLChangesPath()}
	dirs := slices.Collect(maps.Keys(b.aclDirs()))
	sort.Strings(dirs)
	for _, p := range append(paths, dirs...) {
		err := b.do(ctx, p, func(c *zk.Conn) error {
			_, err := c.Create(p, nil, 0, b.aclFor(p))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return convertError(err, "create "+p)
		}
	}
	return nil
}

// sanitize encodes a user name for a znode name as Kafka's
// Sanitizer.sanitize does: every byte but ASCII letters, digits and
// ".-_~" is percent-encoded (so '/' and '*' are too).
func sanitize(name string) string { return coord.SanitizeName(name) }

// desanitize decodes a znode name written by sanitize, or by Kafka (whose
// URL decoding reads '+' as a space).
func desanitize(name string) (string, error) { return url.QueryUnescape(name) }

// kafkaEnumName spells a type's name as Kafka's Java enum does
// (TransactionalId: TRANSACTIONAL_ID), as the change notifications carry
// it.
func kafkaEnumName(name string) string {
	var sb strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			sb.WriteByte('_')
		}
		sb.WriteRune(unicode.ToUpper(r))
	}
	return sb.String()
}

// userConfigZNode is the JSON of /config/users/<user>, Kafka's entity
// config: the SCRAM credentials by mechanism, besides whatever else Kafka
// keeps there (quotas), which writes keep.
type userConfigZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

func decodeUserConfig(p string, data []byte) (map[string]string, error) {
	if len(data) == 0 {
		return map[string]string{}, nil
	}
	var z userConfigZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("decode %s: %w", p, err)
	}
	if z.Config == nil {
		z.Config = map[string]string{}
	}
	return z.Config, nil
}

// scramCredentials returns the credentials of a user's config, sorted by
// mechanism; one that does not parse is skipped.
func (b *Backend) scramCredentials(p string, config map[string]string) []coord.ScramCredential {
	var creds []coord.ScramCredential
	for _, mechanism := range []string{coord.ScramSHA256, coord.ScramSHA512} {
		value, ok := config[mechanism]
		if !ok {
			continue
		}
		cred, err := coord.ParseScramCredential(mechanism, value)
		if err != nil {
			b.log.Warn("skipping an unreadable scram credential", "znode", p, "error", err)
			continue
		}
		creds = append(creds, cred)
	}
	return creds
}

// configChangeZNode is a config change notification's JSON (Kafka's
// ConfigEntityChangeNotificationSequenceZNode, version 2).
type configChangeZNode struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

func (b *Backend) userChange(user string) *zk.CreateRequest {
	data, _ := json.Marshal(configChangeZNode{Version: 2, EntityPath: "users/" + sanitize(user)})
	return &zk.CreateRequest{Path: b.configChangesPath() + "/config_change_", Data: data,
		Acl: b.aclFor(b.configChangesPath()), Flags: zk.FlagSequence}
}

// aclZNode is the JSON of a resource's ACL znode (Kafka's ResourceZNode).
type aclZNode struct {
	Version int        `json:"version"`
	ACLs    []aclEntry `json:"acls"`
}

// aclEntry is one ACL of a resource, in Kafka's names.
type aclEntry struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

func encodeACLs(acls []coord.ACL) []byte {
	z := aclZNode{Version: 1, ACLs: make([]aclEntry, len(acls))}
	for i, a := range acls {
		z.ACLs[i] = aclEntry{Principal: a.Principal, PermissionType: a.Permission.String(), Operation: a.Operation.String(), Host: a.Host}
	}
	data, _ := json.Marshal(z)
	return data
}

// decodeACLs reads the ACLs of resource r's znode p, sorted.
func decodeACLs(p string, r aclResource, data []byte) ([]coord.ACL, error) {
	var z aclZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("decode %s: %w", p, err)
	}
	if z.Version != 1 {
		return nil, fmt.Errorf("decode %s: version %d, want 1", p, z.Version)
	}
	acls := make([]coord.ACL, 0, len(z.ACLs))
	for _, e := range z.ACLs {
		a := coord.ACL{ResourceType: r.typ, ResourceName: r.name, PatternType: r.pattern, Principal: e.Principal, Host: e.Host}
		var opErr, permErr error
		a.Operation, opErr = coord.ParseACLOperation(e.Operation)
		a.Permission, permErr = coord.ParseACLPermission(e.PermissionType)
		if err := errors.Join(opErr, permErr); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p, err)
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p, err)
		}
		acls = append(acls, a)
	}
	return coord.SortACLs(acls), nil
}

// aclChangeZNode is a prefixed ACL change notification's JSON (Kafka's
// ExtendedAclChangeEvent).
type aclChangeZNode struct {
	Version      int    `json:"version"`
	ResourceType string `json:"resourceType"`
	Name         string `json:"name"`
	PatternType  string `json:"patternType"`
}

// aclChange is the change notification of resource r, as Kafka writes it:
// "TOPIC:name" for a literal one, JSON for a prefixed one.
func (b *Backend) aclChange(r aclResource) *zk.CreateRequest {
	data := []byte(kafkaEnumName(r.typ.String()) + ":" + r.name)
	if r.pattern == coord.ACLPatternPrefixed {
		data, _ = json.Marshal(aclChangeZNode{Version: 1, ResourceType: kafkaEnumName(r.typ.String()), Name: r.name,
			PatternType: strings.ToUpper(r.pattern.String())})
	}
	return &zk.CreateRequest{Path: b.aclChangesPath(r.pattern) + "/acl_changes_", Data: data,
		Acl: b.aclFor(b.aclChangesPath(r.pattern)), Flags: zk.FlagSequence}
}

// validResourceName refuses a resource name that Kafka's layout cannot
// hold as one znode name.
func validResourceName(a coord.ACL) error {
	if strings.ContainsAny(a.ResourceName, "/\x00") || a.ResourceName == "." || a.ResourceName == ".." {
		return fmt.Errorf("acl %v: resource name %q: the zookeeper layout cannot hold '/', NUL, \".\" or \"..\"", a, a.ResourceName)
	}
	return nil
}

// LoadSecurity implements coord.SecurityStore. It reads every user and
// ACL znode with pipelined, concurrent gets.
func (b *Backend) LoadSecurity(ctx context.Context) (*coord.SecurityState, error) {
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	var s *coord.SecurityState
	err := b.do(ctx, "load security", func(c *zk.Conn) error {
		var err error
		s, err = b.readSecurity(c)
		return err
	})
	if err != nil {
		return nil, convertError(err, "load security under "+b.path(""))
	}
	return s, nil
}

func (b *Backend) readSecurity(c *zk.Conn) (*coord.SecurityState, error) {
	s := coord.NewSecurityState()
	names, stat, err := c.Children(b.usersPath())
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return nil, err
	default:
		s.Version = stat.Pzxid
	}
	users := make([]string, len(names))
	creds := make([][]coord.ScramCredential, len(names))
	zxids := make([]int64, len(names))
	err = parallel(len(names), func(i int) error {
		p := b.usersPath() + "/" + names[i]
		user, err := desanitize(names[i])
		if err != nil {
			b.log.Warn("skipping a user znode whose name does not decode", "znode", p, "error", err)
			return nil
		}
		data, stat, err := c.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		config, err := decodeUserConfig(p, data)
		if err != nil {
			b.log.Warn("skipping a user config that does not decode", "error", err)
			return nil
		}
		users[i], creds[i], zxids[i] = user, b.scramCredentials(p, config), stat.Mzxid
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, user := range users {
		s.Version = max(s.Version, zxids[i])
		if len(creds[i]) > 0 {
			s.Users[user] = creds[i]
		}
	}
	acls, version, err := b.readACLs(c)
	if err != nil {
		return nil, err
	}
	s.ACLs, s.Version = acls, max(s.Version, version)+b.bases().Version
	return s, nil
}

// readACLs reads every ACL znode; it returns the ACLs, sorted, and the
// greatest zxid read.
func (b *Backend) readACLs(c *zk.Conn) ([]coord.ACL, int64, error) {
	dirs := b.aclDirs()
	var nodes []aclResource
	var version int64
	for dir, r := range dirs {
		names, stat, err := c.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		version = max(version, stat.Pzxid)
		for _, name := range names {
			nodes = append(nodes, aclResource{pattern: r.pattern, typ: r.typ, name: name})
		}
	}
	reads := make([][]coord.ACL, len(nodes))
	zxids := make([]int64, len(nodes))
	err := parallel(len(nodes), func(i int) error {
		p := b.aclPath(nodes[i])
		data, stat, err := c.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		acls, err := decodeACLs(p, nodes[i], data)
		if err != nil {
			b.log.Warn("skipping an acl znode that does not decode", "error", err)
			return nil
		}
		reads[i], zxids[i] = acls, stat.Mzxid
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var acls []coord.ACL
	for i := range nodes {
		acls = append(acls, reads[i]...)
		version = max(version, zxids[i])
	}
	return coord.SortACLs(acls), version, nil
}

// update computes the multi that changes one znode as read (data and stat
// nil when it does not exist), or no ops when nothing is to change.
type update func(data []byte, stat *zk.Stat) ([]any, error)

// updateZNode reads the znode at p and writes what update makes of it,
// with the version read as compare-and-set, again after a conflict (the
// znode changed, appeared or went meanwhile; a directory is missing),
// until it lands or ctx ends. After a write it purges the expired change
// notifications of changes. A write whose answer was lost may be made
// again on the znode as it is then: update must build on what it reads.
func (b *Backend) updateZNode(ctx context.Context, p, changes, what string, up update) error {
	return b.updateZNodeUnder(ctx, p, changes, what, func(ctx context.Context, missing bool) error {
		if !missing {
			return nil
		}
		return b.ensureSecurityBase(ctx)
	}, up)
}

// Every write through updateZNode is one the migration record refuses:
// its multi goes behind the record's guard (guardedMulti), and a write
// with nothing to change confirms with the guard alone that the record
// does not refuse it.

// updateZNodeUnder is updateZNode with ensure called after every
// conflicting write, missing set when a znode the write needed was not
// there (deleted meanwhile, or never made): it may make the parents again
// or note which the next write is to make.
func (b *Backend) updateZNodeUnder(ctx context.Context, p, changes, what string, ensure func(ctx context.Context, missing bool) error, up update) error {
	if err := b.ensureBase(ctx); err != nil {
		return err
	}
	if err := b.refusing(what); err != nil {
		return err
	}
	for attempt := 0; attempt < maxSecurityConflicts; attempt++ {
		if attempt > 0 && !wait(ctx, b.closing, rand.N(time.Duration(min(attempt, 10))*time.Millisecond)) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %s", coord.ErrClosed, what)
		}
		conflict, missing := false, false
		err := b.do(ctx, p, func(c *zk.Conn) error {
			conflict, missing = false, false
			data, stat, err := c.Get(p)
			if errors.Is(err, zk.ErrNoNode) {
				data, stat, err = nil, nil, nil
			}
			if err != nil {
				return err
			}
			ops, err := up(data, stat)
			if err != nil {
				return err
			}
			_, err = b.guardedMulti(c, what, ops...)
			if len(ops) == 0 {
				return err
			}
			switch {
			case errors.Is(err, zk.ErrNoNode):
				conflict, missing = true, true
			case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNotEmpty):
				conflict = true
			case err != nil:
				return err
			default:
				b.purgeChanges(c, changes)
			}
			return nil
		})
		if err != nil {
			return convertError(err, what)
		}
		if !conflict {
			return nil
		}
		// A directory may be missing (a fresh chroot), or the znode
		// went between the read and the write.
		if err := ensure(ctx, missing); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %s: %d conflicting writes in a row", coord.ErrUnavailable, what, maxSecurityConflicts)
}

// purgeChanges deletes the change notifications under dir older than
// changeExpiration, oldest first (their sequence numbers are zero-padded,
// so names sort in order), as Kafka's listeners do. It is best effort.
func (b *Backend) purgeChanges(c *zk.Conn, dir string) {
	names, _, err := c.Children(dir)
	if err != nil {
		return
	}
	sort.Strings(names)
	cutoff := time.Now().Add(-changeExpiration).UnixMilli()
	for _, name := range names {
		exists, stat, err := c.Exists(dir + "/" + name)
		if err != nil {
			return
		}
		if !exists {
			continue
		}
		if stat.Ctime > cutoff {
			return
		}
		if err := c.Delete(dir+"/"+name, stat.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
			b.log.Debug("purging a change notification", "znode", dir+"/"+name, "error", err)
			return
		}
	}
}

// updateUser changes the config of user with change, which returns the new
// config and whether it differs.
func (b *Backend) updateUser(ctx context.Context, user, what string, change func(config map[string]string) (map[string]string, bool)) error {
	p := b.userPath(user)
	return b.updateZNode(ctx, p, b.configChangesPath(), what, func(data []byte, stat *zk.Stat) ([]any, error) {
		config, err := decodeUserConfig(p, data)
		if err != nil {
			return nil, err
		}
		next, changed := change(config)
		switch {
		case !changed:
			return nil, nil
		case stat == nil:
			return []any{&zk.CreateRequest{Path: p, Data: encodeConfig(next), Acl: b.aclFor(p)}, b.userChange(user)}, nil
		case len(next) == 0 && stat.NumChildren == 0:
			return []any{&zk.DeleteRequest{Path: p, Version: stat.Version}, b.userChange(user)}, nil
		default:
			return []any{&zk.SetDataRequest{Path: p, Data: encodeConfig(next), Version: stat.Version}, b.userChange(user)}, nil
		}
	})
}

// SetScramCredential implements coord.SecurityStore: it writes the
// credential into the user's config znode.
func (b *Backend) SetScramCredential(ctx context.Context, user string, cred coord.ScramCredential) error {
	if err := coord.ValidateScramUser(user); err != nil {
		return err
	}
	if err := cred.Validate(); err != nil {
		return err
	}
	value := coord.FormatScramCredential(cred)
	what := fmt.Sprintf("set scram credential %s at %s", cred.Mechanism, b.userPath(user))
	return b.updateUser(ctx, user, what, func(config map[string]string) (map[string]string, bool) {
		if config[cred.Mechanism] == value {
			return config, false
		}
		next := maps.Clone(config)
		next[cred.Mechanism] = value
		return next, true
	})
}

// DeleteScramCredential implements coord.SecurityStore: it removes the
// mechanism from the user's config znode, and the znode once it is empty.
func (b *Backend) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	if err := coord.ValidateScramUser(user); err != nil {
		return err
	}
	if err := coord.ValidateScramMechanism(mechanism); err != nil {
		return err
	}
	what := fmt.Sprintf("delete scram credential %s at %s", mechanism, b.userPath(user))
	missing := false
	err := b.updateUser(ctx, user, what, func(config map[string]string) (map[string]string, bool) {
		_, ok := config[mechanism]
		missing = !ok
		if !ok {
			return config, false
		}
		next := maps.Clone(config)
		delete(next, mechanism)
		return next, true
	})
	if err != nil {
		return err
	}
	if missing {
		return fmt.Errorf("%w: scram credential %s of user %q", coord.ErrNotFound, mechanism, user)
	}
	return nil
}

// updateACLs changes the ACLs of resource r with change, which returns the
// new ACLs and whether they differ.
func (b *Backend) updateACLs(ctx context.Context, r aclResource, what string, change func(acls []coord.ACL) ([]coord.ACL, bool)) error {
	p := b.aclPath(r)
	return b.updateZNode(ctx, p, b.aclChangesPath(r.pattern), what, func(data []byte, stat *zk.Stat) ([]any, error) {
		var acls []coord.ACL
		if stat != nil {
			var err error
			if acls, err = decodeACLs(p, r, data); err != nil {
				return nil, err
			}
		}
		next, changed := change(acls)
		switch {
		case !changed:
			return nil, nil
		case stat == nil:
			return []any{&zk.CreateRequest{Path: p, Data: encodeACLs(next), Acl: b.aclFor(p)}, b.aclChange(r)}, nil
		case len(next) == 0:
			return []any{&zk.DeleteRequest{Path: p, Version: stat.Version}, b.aclChange(r)}, nil
		default:
			return []any{&zk.SetDataRequest{Path: p, Data: encodeACLs(next), Version: stat.Version}, b.aclChange(r)}, nil
		}
	})
}

// groupByResource returns acls by resource pattern, and the patterns in
// order.
func groupByResource(acls []coord.ACL) ([]aclResource, map[aclResource][]coord.ACL) {
	byResource := map[aclResource][]coord.ACL{}
	var order []aclResource
	for _, a := range coord.SortACLs(slices.Clone(acls)) {
		r := resourceOf(a)
		if _, ok := byResource[r]; !ok {
			order = append(order, r)
		}
		byResource[r] = append(byResource[r], a)
	}
	return order, byResource
}

// CreateACLs implements coord.SecurityStore: one compare-and-set of each
// resource's znode, as Kafka's AclAuthorizer writes them.
func (b *Backend) CreateACLs(ctx context.Context, acls []coord.ACL) error {
	if err := coord.ValidateACLs(acls); err != nil {
		return err
	}
	for _, a := range acls {
		if err := validResourceName(a); err != nil {
			return err
		}
	}
	order, byResource := groupByResource(acls)
	for _, r := range order {
		adding := byResource[r]
		what := fmt.Sprintf("create %d acls at %s", len(adding), b.aclPath(r))
		err := b.updateACLs(ctx, r, what, func(stored []coord.ACL) ([]coord.ACL, bool) {
			next := coord.SortACLs(append(slices.Clone(stored), adding...))
			return next, len(next) != len(stored)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteACLs implements coord.SecurityStore. It reads every ACL znode,
// then rewrites each resource's znode holding a match without its matches
// (compare-and-set, filtered again after a conflict).
func (b *Backend) DeleteACLs(ctx context.Context, filters []coord.ACLFilter) ([]coord.ACL, error) {
	if err := coord.ValidateACLFilters(filters); err != nil {
		return nil, err
	}
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	if err := b.refusing("delete acls under " + b.path("")); err != nil {
		return nil, err
	}
	var stored []coord.ACL
	err := b.do(ctx, "read acls", func(c *zk.Conn) error {
		var err error
		stored, _, err = b.readACLs(c)
		return err
	})
	if err != nil {
		return nil, convertError(err, "delete acls: read acls under "+b.path(""))
	}
	var matched []coord.ACL
	for _, a := range stored {
		if coord.MatchesAny(filters, a) {
			matched = append(matched, a)
		}
	}
	order, _ := groupByResource(matched)
	var removed []coord.ACL
	for _, r := range order {
		var removedHere []coord.ACL
		what := "delete acls at " + b.aclPath(r)
		err := b.updateACLs(ctx, r, what, func(acls []coord.ACL) ([]coord.ACL, bool) {
			var kept []coord.ACL
			removedHere = nil
			for _, a := range acls {
				if coord.MatchesAny(filters, a) {
					removedHere = append(removedHere, a)
				} else {
					kept = append(kept, a)
				}
			}
			return kept, len(removedHere) > 0
		})
		if err != nil {
			return coord.SortACLs(removed), err
		}
		removed = append(removed, removedHere...)
	}
	return coord.SortACLs(removed), nil
}

// WatchSecurity implements coord.SecurityStore. It keeps a copy of the
// store up to date with one ZooKeeper watch per znode (the user and ACL
// directories' children, each user's and resource's data), re-reading
// only the znodes whose watch fired, and sends a whole state once every
// stale znode has been read again and the credentials or ACLs changed.
func (b *Backend) WatchSecurity(ctx context.Context) (<-chan *coord.SecurityState, error) {
	w := b.newSecurityWatcher()
	if err := b.startWatch(ctx, "watch security under "+b.path(""), w); err != nil {
		return nil, err
	}
	return w.out, nil
}

// securityWatcher follows the security store's znodes. Its directories are
// the users' (an aclResource with no pattern) and the ACLs' per pattern
// and resource type.
type securityWatcher struct {
	znodeTree
	b    *Backend
	out  chan *coord.SecurityState
	dirs map[string]aclResource

	users map[string]userRead    // by znode path
	acls  map[string][]coord.ACL // by znode path
	last  *coord.SecurityState
}

type userRead struct {
	user  string
	creds []coord.ScramCredential
}

func (b *Backend) newSecurityWatcher() *securityWatcher {
	w := &securityWatcher{b: b, out: make(chan *coord.SecurityState, 1), dirs: b.aclDirs()}
	w.dirs[b.usersPath()] = aclResource{}
	w.znodeTree = znodeTree{
		dirs: slices.Sorted(maps.Keys(w.dirs)),
		isDir: func(p string) bool {
			_, ok := w.dirs[p]
			return ok
		},
		forget: func(p string) {
			delete(w.users, p)
			delete(w.acls, p)
		},
		decode: w.decode,
	}
	return w
}

func (w *securityWatcher) reset() {
	w.znodeTree.reset()
	w.users = map[string]userRead{}
	w.acls = map[string][]coord.ACL{}
}

// decode takes in a user's credentials or a resource's ACLs.
func (w *securityWatcher) decode(p, dir, name string, data []byte) {
	if dir == w.b.usersPath() {
		user, err := desanitize(name)
		if err != nil {
			w.b.log.Warn("ignoring a user znode whose name does not decode", "znode", p, "error", err)
			return
		}
		config, err := decodeUserConfig(p, data)
		if err != nil {
			w.b.log.Warn("ignoring a user config that does not decode", "error", err)
			return
		}
		w.users[p] = userRead{user: user, creds: w.b.scramCredentials(p, config)}
		return
	}
	res := w.dirs[dir]
	res.name = name
	acls, err := decodeACLs(p, res, data)
	if err != nil {
		w.b.log.Warn("ignoring an acl znode that does not decode", "error", err)
		return
	}
	w.acls[p] = acls
}

// snapshot builds the whole state from what was read.
func (w *securityWatcher) snapshot() *coord.SecurityState {
	s := coord.NewSecurityState()
	s.Version = w.version + w.b.bases().Version
	for _, u := range w.users {
		if len(u.creds) > 0 {
			s.Users[u.user] = u.creds
		}
	}
	for _, acls := range w.acls {
		s.ACLs = append(s.ACLs, acls...)
	}
	s.ACLs = coord.SortACLs(s.ACLs)
	return s
}

func (w *securityWatcher) publish() {
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

func (w *securityWatcher) close() { close(w.out) }
