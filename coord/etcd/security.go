package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// The security store keeps one key per fact under one prefix, so one range
// watch follows it and no write needs a compare-and-set: etcd orders
// concurrent writers itself.
//
//	<prefix>/security/scram/<user>/<mechanism>
//	    Kafka's credential string: salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>
//	<prefix>/security/acls/<literal|prefixed>/<Type>/<name>/<principal>/<host>/<Operation>/<Permission>
//	    the ACL as JSON, in Kafka's names (name, principal and host are
//	    path-escaped in the key)
//
// SecurityState.Version is an etcd revision.

func (b *Backend) securityPrefix() string { return b.prefix + "/security/" }
func (b *Backend) scramPrefix() string    { return b.securityPrefix() + "scram/" }
func (b *Backend) aclsPrefix() string     { return b.securityPrefix() + "acls/" }

func (b *Backend) scramKey(user, mechanism string) string {
	return b.scramPrefix() + user + "/" + mechanism
}

func (b *Backend) aclKey(a coord.ACL) string {
	return b.aclsPrefix() + strings.ToLower(a.PatternType.String()) + "/" + a.ResourceType.String() + "/" +
		url.PathEscape(a.ResourceName) + "/" + url.PathEscape(a.Principal) + "/" + url.PathEscape(a.Host) + "/" +
		a.Operation.String() + "/" + a.Permission.String()
}

// aclValue is an ACL key's JSON: Kafka's ACL entry (principal,
// permissionType, operation, host) with its resource pattern (as Kafka's
// extended ACL change event names it).
type aclValue struct {
	Version        int    `json:"version"`
	ResourceType   string `json:"resourceType"`
	Name           string `json:"name"`
	PatternType    string `json:"patternType"`
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

func encodeACL(a coord.ACL) string {
	data, _ := json.Marshal(aclValue{
		Version:        1,
		ResourceType:   a.ResourceType.String(),
		Name:           a.ResourceName,
		PatternType:    a.PatternType.String(),
		Principal:      a.Principal,
		PermissionType: a.Permission.String(),
		Operation:      a.Operation.String(),
		Host:           a.Host,
	})
	return string(data)
}

func decodeACL(kv *mvccpb.KeyValue) (coord.ACL, error) {
	var v aclValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return coord.ACL{}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	if v.Version != 1 {
		return coord.ACL{}, fmt.Errorf("decode %s: version %d, want 1", kv.Key, v.Version)
	}
	a := coord.ACL{ResourceName: v.Name, Principal: v.Principal, Host: v.Host}
	var errs [4]error
	a.ResourceType, errs[0] = coord.ParseACLResourceType(v.ResourceType)
	a.PatternType, errs[1] = coord.ParseACLPatternType(v.PatternType)
	a.Operation, errs[2] = coord.ParseACLOperation(v.Operation)
	a.Permission, errs[3] = coord.ParseACLPermission(v.PermissionType)
	if err := errors.Join(errs[:]...); err != nil {
		return coord.ACL{}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	if err := a.Validate(); err != nil {
		return coord.ACL{}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return a, nil
}

// securityView is the security store as read from its keys, by key.
type securityView struct {
	b     *Backend
	creds map[string]userCredential
	acls  map[string]coord.ACL
}

type userCredential struct {
	user string
	cred coord.ScramCredential
}

func (b *Backend) newSecurityView() *securityView {
	return &securityView{b: b, creds: map[string]userCredential{}, acls: map[string]coord.ACL{}}
}

// put applies one key as stored; a key that does not decode is skipped
// (and a stale entry of it dropped).
func (v *securityView) put(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	v.remove(key)
	if rest, ok := strings.CutPrefix(key, v.b.scramPrefix()); ok {
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			return
		}
		cred, err := coord.ParseScramCredential(rest[i+1:], string(kv.Value))
		if err != nil {
			v.b.log.Warn("skipping unreadable scram credential", "key", key, "error", err)
			return
		}
		v.creds[key] = userCredential{user: rest[:i], cred: cred}
		return
	}
	if strings.HasPrefix(key, v.b.aclsPrefix()) {
		a, err := decodeACL(kv)
		if err != nil {
			v.b.log.Warn("skipping unreadable acl", "key", key, "error", err)
			return
		}
		v.acls[key] = a
	}
}

func (v *securityView) remove(key string) {
	delete(v.creds, key)
	delete(v.acls, key)
}

// state builds the SecurityState of the view at version.
func (v *securityView) state(version int64) *coord.SecurityState {
	s := coord.NewSecurityState()
	s.Version = version
	for _, uc := range v.creds {
		s.Users[uc.user] = coord.SetCredential(s.Users[uc.user], uc.cred)
	}
	for _, a := range v.acls {
		s.ACLs = append(s.ACLs, a)
	}
	s.ACLs = coord.SortACLs(s.ACLs)
	return s
}

// rangeAt reads every key under prefix at one revision (the first page's,
// or rev when not 0), paging through large ranges, and returns that
// revision. It fails with rpctypes.ErrCompacted, unconverted, when etcd
// compacts the revision meanwhile.
func (b *Backend) rangeAt(ctx context.Context, prefix string, rev int64, fn func(kv *mvccpb.KeyValue)) (int64, error) {
	return b.loadRange(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, fn)
}

// loadSecurityView reads the whole store into a new view at one revision,
// again when etcd compacts it meanwhile.
func (b *Backend) loadSecurityView(ctx context.Context) (*securityView, int64, error) {
	for {
		v := b.newSecurityView()
		rev, err := b.rangeAt(ctx, b.securityPrefix(), 0, v.put)
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		return v, rev, err
	}
}

// LoadSecurity implements coord.SecurityStore. Its Version is the
// revision it read at, raised by the version base.
func (b *Backend) LoadSecurity(ctx context.Context) (*coord.SecurityState, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: load security", coord.ErrClosed)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.record(ctx); err != nil {
		return nil, err
	}
	base := b.bases().Version
	v, rev, err := b.loadSecurityView(ctx)
	if err != nil {
		return nil, err
	}
	return v.state(rev + base), nil
}

// WatchSecurity implements coord.SecurityStore. It follows the one range
// of the store; a state is sent when the credentials or ACLs change.
func (b *Backend) WatchSecurity(ctx context.Context) (<-chan *coord.SecurityState, error) {
	return watchView(ctx, b, "security", [][2]string{
		{b.securityPrefix(), clientv3.GetPrefixRangeEnd(b.securityPrefix())},
	}, b.loadSecurityView)
}

// SetScramCredential implements coord.SecurityStore: one put, guarded by
// the migration record.
func (b *Backend) SetScramCredential(ctx context.Context, user string, cred coord.ScramCredential) error {
	if err := coord.ValidateScramUser(user); err != nil {
		return err
	}
	if err := cred.Validate(); err != nil {
		return err
	}
	key := b.scramKey(user, cred.Mechanism)
	what := "set scram credential " + key
	if b.isClosed() {
		return fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	_, err := b.guardedTxn(ctx, what, nil, []clientv3.Op{clientv3.OpPut(key, coord.FormatScramCredential(cred))}, nil, nil)
	return err
}

// DeleteScramCredential implements coord.SecurityStore: one delete,
// guarded by the migration record, which tells whether the key was there.
func (b *Backend) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	if err := coord.ValidateScramUser(user); err != nil {
		return err
	}
	if err := coord.ValidateScramMechanism(mechanism); err != nil {
		return err
	}
	key := b.scramKey(user, mechanism)
	what := "delete scram credential " + key
	if b.isClosed() {
		return fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	resp, err := b.guardedTxn(ctx, what, nil, []clientv3.Op{clientv3.OpDelete(key)}, nil, nil)
	if err != nil {
		return err
	}
	if resp.Responses[0].GetResponseDeleteRange().GetDeleted() == 0 {
		return fmt.Errorf("%w: scram credential %s of user %q", coord.ErrNotFound, mechanism, user)
	}
	return nil
}

// CreateACLs implements coord.SecurityStore: puts, up to maxTxnOps a
// transaction guarded by the migration record (so each transaction, not
// only each resource, is atomic).
func (b *Backend) CreateACLs(ctx context.Context, acls []coord.ACL) error {
	if err := coord.ValidateACLs(acls); err != nil {
		return err
	}
	what := fmt.Sprintf("create %d acls under %s", len(acls), b.aclsPrefix())
	if b.isClosed() {
		return fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.writableRecord(ctx, what); err != nil {
		return err
	}
	var ops []clientv3.Op
	for _, a := range coord.SortACLs(append([]coord.ACL(nil), acls...)) {
		ops = append(ops, clientv3.OpPut(b.aclKey(a), encodeACL(a)))
	}
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		if _, err := b.guardedTxn(ctx, what, nil, ops[:n], nil, nil); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// DeleteACLs implements coord.SecurityStore. It reads the ACL keys, then
// deletes the matching ones, up to maxTxnOps a transaction guarded by the
// migration record; a key that a concurrent call deleted first is not
// returned (its delete counts 0).
func (b *Backend) DeleteACLs(ctx context.Context, filters []coord.ACLFilter) ([]coord.ACL, error) {
	if err := coord.ValidateACLFilters(filters); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("delete acls under %s", b.aclsPrefix())
	if b.isClosed() {
		return nil, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.writableRecord(ctx, what); err != nil {
		return nil, err
	}
	var view *securityView
	for {
		view = b.newSecurityView()
		_, err := b.rangeAt(ctx, b.aclsPrefix(), 0, view.put)
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	var keys []string
	var matched []coord.ACL
	for key, a := range view.acls {
		if coord.MatchesAny(filters, a) {
			keys, matched = append(keys, key), append(matched, a)
		}
	}
	var removed []coord.ACL
	for start := 0; start < len(keys); start += maxTxnOps {
		end := min(start+maxTxnOps, len(keys))
		ops := make([]clientv3.Op, 0, end-start)
		for _, key := range keys[start:end] {
			ops = append(ops, clientv3.OpDelete(key))
		}
		tr, err := b.guardedTxn(ctx, what, nil, ops, nil, nil)
		if err != nil {
			return coord.SortACLs(removed), err
		}
		for i, r := range tr.Responses {
			if r.GetResponseDeleteRange().GetDeleted() > 0 {
				removed = append(removed, matched[start+i])
			}
		}
	}
	return coord.SortACLs(removed), nil
}
