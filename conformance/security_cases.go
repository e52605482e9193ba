package conformance

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// Sizes of the concurrent security writes.
const (
	securityBackends   = 2
	securityGoroutines = 6
	securityRounds     = 3
)

// scramCredential derives the credential of password as a Kafka client's
// AlterUserScramCredentials does: SaltedPassword = PBKDF2(password, salt,
// iterations), from which the broker's security.ScramCredential derives
// the stored and server keys (RFC 5802).
func scramCredential(t T, mechanism, password string, salt []byte) coord.ScramCredential {
	t.Helper()
	h, size := sha256.New, sha256.Size
	if mechanism == coord.ScramSHA512 {
		h, size = sha512.New, sha512.Size
	}
	const iterations = 4096
	salted, err := pbkdf2.Key(h, password, salt, iterations, size)
	if err != nil {
		t.Fatalf("pbkdf2 of %s: %v", mechanism, err)
	}
	return security.ScramCredential(mechanism, salt, salted, iterations)
}

// acl builds an ACL; pattern is "literal" or "prefixed".
func acl(typ coord.ACLResourceType, pattern, name, principal, host string, op coord.ACLOperation, perm coord.ACLPermission) coord.ACL {
	p := coord.ACLPatternLiteral
	if pattern == "prefixed" {
		p = coord.ACLPatternPrefixed
	}
	return coord.ACL{ResourceType: typ, ResourceName: name, PatternType: p, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// aclFilter returns coord.AnyACL changed by set.
func aclFilter(set func(f *coord.ACLFilter)) coord.ACLFilter {
	f := coord.AnyACL
	set(&f)
	return f
}

func strPtr(s string) *string { return &s }

// waitSecurityReady waits until every backend of c reads the security
// store (a fresh Raft cluster must elect a leader first).
func waitSecurityReady(t T, h Harness, c Cluster, n int) {
	t.Helper()
	for i := range n {
		waitUntil(t, startupBound(h), fmt.Sprintf("LoadSecurity through backend %d", i+1), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			_, err := c.Backend(i).LoadSecurity(ctx)
			if err == nil {
				return true, ""
			}
			if errors.Is(err, coord.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				return false, "last error: " + err.Error()
			}
			t.Fatalf("LoadSecurity through backend %d: got error %v, want nil (or ErrUnavailable while the cluster starts)", i+1, err)
			return false, ""
		})
	}
}

func loadSecurity(t T, be coord.Backend, what string) *coord.SecurityState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	s, err := be.LoadSecurity(ctx)
	if err != nil {
		t.Fatalf("%s: LoadSecurity: got error %v, want nil", what, err)
	}
	if s.Users == nil {
		t.Fatalf("%s: LoadSecurity: got nil Users, want a map", what)
	}
	if !slices.IsSortedFunc(s.ACLs, coord.CompareACLs) || len(slices.Compact(slices.Clone(s.ACLs))) != len(s.ACLs) {
		t.Fatalf("%s: LoadSecurity: got ACLs %v, want sorted by CompareACLs, each once", what, s.ACLs)
	}
	return s
}

func setScram(t T, be coord.Backend, user string, cred coord.ScramCredential) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	if err := be.SetScramCredential(ctx, user, cred); err != nil {
		t.Fatalf("SetScramCredential(%q, %s): got error %v, want nil", user, cred.Mechanism, err)
	}
}

func deleteScram(be coord.Backend, user, mechanism string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	return be.DeleteScramCredential(ctx, user, mechanism)
}

func createACLs(t T, be coord.Backend, acls ...coord.ACL) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	if err := be.CreateACLs(ctx, acls); err != nil {
		t.Fatalf("CreateACLs(%v): got error %v, want nil", acls, err)
	}
}

func deleteACLs(t T, be coord.Backend, filters ...coord.ACLFilter) []coord.ACL {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	removed, err := be.DeleteACLs(ctx, filters)
	if err != nil {
		t.Fatalf("DeleteACLs(%+v): got error %v, want nil", filters, err)
	}
	return removed
}

// checkACLs fails t unless got holds exactly want, in CompareACLs order.
func checkACLs(t T, what string, got, want []coord.ACL) {
	t.Helper()
	want = coord.SortACLs(slices.Clone(want))
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got ACLs\n\t%s\nwant\n\t%s", what, formatACLs(got), formatACLs(want))
	}
}

func formatACLs(acls []coord.ACL) string {
	if len(acls) == 0 {
		return "none"
	}
	parts := make([]string, len(acls))
	for i, a := range acls {
		parts[i] = a.String()
	}
	return strings.Join(parts, "\n\t")
}

// describeSecurity formats a state for failures: its version, users with
// their mechanisms, and how many ACLs.
func describeSecurity(s *coord.SecurityState) string {
	var users []string
	for _, user := range slices.Sorted(maps.Keys(s.Users)) {
		var mechs []string
		for _, c := range s.Users[user] {
			mechs = append(mechs, c.Mechanism)
		}
		users = append(users, fmt.Sprintf("%s%v", user, mechs))
	}
	return fmt.Sprintf("version %d, users %v, %d acls", s.Version, users, len(s.ACLs))
}

// checkCredentials fails t unless s holds exactly want for user (nil:
// the user has none and no entry).
func checkCredentials(t T, what string, s *coord.SecurityState, user string, want ...coord.ScramCredential) {
	t.Helper()
	got, ok := s.Users[user]
	if len(want) == 0 {
		if ok {
			t.Fatalf("%s: user %q: got %d credentials, want no entry", what, user, len(got))
		}
		return
	}
	expected := &coord.SecurityState{Users: map[string][]coord.ScramCredential{user: want}}
	actual := &coord.SecurityState{Users: map[string][]coord.ScramCredential{user: got}}
	if !actual.SameContent(expected) {
		t.Fatalf("%s: user %q: got %s, want %s", what, user, describeSecurity(actual), describeSecurity(expected))
	}
}

// checkInvalid fails t unless err is an error naming field that wraps none
// of coord's sentinels.
func checkInvalid(t T, what string, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil, want an error naming the %s", what, field)
	}
	for _, sentinel := range []error{coord.ErrUnavailable, coord.ErrNotFound, coord.ErrClosed, coord.ErrExists, coord.ErrFenced} {
		if errors.Is(err, sentinel) {
			t.Fatalf("%s: got %v, want an invalid-input error, not %v", what, err, sentinel)
		}
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("%s: got %q, want an error naming the %s", what, err, field)
	}
}

// testScramCredentialLifecycle: credentials are added, replaced and
// removed per mechanism, through either backend; a user left without
// credentials disappears; deleting a credential that is not stored is
// ErrNotFound; every change grows the Version; user names with characters
// that need escaping come back as written; invalid input is refused naming
// the field, and writes nothing.
func testScramCredentialLifecycle(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitSecurityReady(t, h, c, 2)
	b0, b1 := c.Backend(0), c.Backend(1)
	alice256 := scramCredential(t, coord.ScramSHA256, "alice-secret", []byte("salt-a-256"))
	alice512 := scramCredential(t, coord.ScramSHA512, "alice-secret", []byte("salt-a-512"))
	alice256b := scramCredential(t, coord.ScramSHA256, "alice-new-secret", []byte("salt-a-256-new"))
	bot := scramCredential(t, coord.ScramSHA512, "bot-secret", []byte("salt-bot"))
	const botUser = "ops/bot* 1+é@example.com"

	last := loadSecurity(t, b0, "initially")
	if len(last.Users) != 0 || len(last.ACLs) != 0 {
		t.Fatalf("initially: got %s, want an empty store", describeSecurity(last))
	}
	// step applies a change through be and returns the state read after
	// it, whose Version must be above the one before.
	step := func(be coord.Backend, what string, change func()) *coord.SecurityState {
		t.Helper()
		change()
		s := loadSecurity(t, be, "after "+what)
		if s.Version <= last.Version {
			t.Fatalf("after %s: got Version %d, want above %d, the Version before", what, s.Version, last.Version)
		}
		last = s
		return s
	}

	s := step(b0, "set alice's SCRAM-SHA-256", func() { setScram(t, b0, "alice", alice256) })
	checkCredentials(t, "after set alice's SCRAM-SHA-256", s, "alice", alice256)
	s = step(b1, "set alice's SCRAM-SHA-512 through backend 2", func() { setScram(t, b1, "alice", alice512) })
	checkCredentials(t, "after set alice's SCRAM-SHA-512", s, "alice", alice256, alice512)
	s = step(b0, "replace alice's SCRAM-SHA-256", func() { setScram(t, b0, "alice", alice256b) })
	checkCredentials(t, "after replace alice's SCRAM-SHA-256", s, "alice", alice256b, alice512)
	s = step(b1, "set "+botUser, func() { setScram(t, b1, botUser, bot) })
	checkCredentials(t, "after set "+botUser, s, botUser, bot)
	checkCredentials(t, "after set "+botUser, s, "alice", alice256b, alice512)
	if got, ok := s.Credential(botUser, coord.ScramSHA512); !ok || got.Iterations != bot.Iterations {
		t.Fatalf("Credential(%q, SCRAM-SHA-512): got %+v, %v, want the credential set", botUser, got, ok)
	}

	s = step(b1, "delete alice's SCRAM-SHA-256", func() {
		if err := deleteScram(b1, "alice", coord.ScramSHA256); err != nil {
			t.Fatalf("DeleteScramCredential(alice, SCRAM-SHA-256): got %v, want nil", err)
		}
	})
	checkCredentials(t, "after delete alice's SCRAM-SHA-256", s, "alice", alice512)
	if err := deleteScram(b0, "alice", coord.ScramSHA256); !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("DeleteScramCredential(alice, SCRAM-SHA-256) again: got %v, want ErrNotFound", err)
	}
	s = step(b0, "delete alice's SCRAM-SHA-512", func() {
		if err := deleteScram(b0, "alice", coord.ScramSHA512); err != nil {
			t.Fatalf("DeleteScramCredential(alice, SCRAM-SHA-512): got %v, want nil", err)
		}
	})
	checkCredentials(t, "after delete alice's last credential", s, "alice")
	checkCredentials(t, "after delete alice's last credential", s, botUser, bot)
	if err := deleteScram(b1, "carol", coord.ScramSHA256); !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("DeleteScramCredential(carol, SCRAM-SHA-256) of a user never set: got %v, want ErrNotFound", err)
	}
	if err := deleteScram(b1, "alice", coord.ScramSHA512); !errors.Is(err, coord.ErrNotFound) {
		t.Fatalf("DeleteScramCredential(alice, SCRAM-SHA-512) of a removed user: got %v, want ErrNotFound", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	short := alice256
	short.StoredKey = short.StoredKey[:16]
	unknown := alice256
	unknown.Mechanism = "SCRAM-SHA-1"
	noSalt := alice256
	noSalt.Salt = nil
	checkInvalid(t, "SetScramCredential with an empty user", b0.SetScramCredential(ctx, "", alice256), "user")
	checkInvalid(t, "SetScramCredential of SCRAM-SHA-1", b0.SetScramCredential(ctx, "dave", unknown), "mechanism")
	checkInvalid(t, "SetScramCredential with a 16-byte stored key", b1.SetScramCredential(ctx, "dave", short), "stored key")
	checkInvalid(t, "SetScramCredential without a salt", b1.SetScramCredential(ctx, "dave", noSalt), "salt")
	checkInvalid(t, "DeleteScramCredential with an empty user", b0.DeleteScramCredential(ctx, "", coord.ScramSHA256), "user")
	checkInvalid(t, "DeleteScramCredential of PLAIN", b1.DeleteScramCredential(ctx, "alice", "PLAIN"), "mechanism")
	if s := loadSecurity(t, b0, "after invalid writes"); !s.SameContent(last) {
		t.Fatalf("after invalid writes: got %s, want %s, nothing written", describeSecurity(s), describeSecurity(last))
	}
}

// securityACLs is the ACL set of the ACL cases, by name.
type securityACLs struct {
	ordersRead, ordersWrite, ordersEUDeny, anyTopic, ordersDashPrefix, ordPrefix,
	billingGroup, clusterAction, txPrefix, userResource coord.ACL
}

func newSecurityACLs() securityACLs {
	return securityACLs{
		ordersRead:       acl(coord.ACLResourceTopic, "literal", "orders", "User:alice", "*", coord.ACLOperationRead, coord.ACLPermissionAllow),
		ordersWrite:      acl(coord.ACLResourceTopic, "literal", "orders", "User:alice", "*", coord.ACLOperationWrite, coord.ACLPermissionAllow),
		ordersEUDeny:     acl(coord.ACLResourceTopic, "literal", "orders-eu", "User:bob", "10.0.0.1", coord.ACLOperationRead, coord.ACLPermissionDeny),
		anyTopic:         acl(coord.ACLResourceTopic, "literal", "*", "User:*", "*", coord.ACLOperationDescribe, coord.ACLPermissionAllow),
		ordersDashPrefix: acl(coord.ACLResourceTopic, "prefixed", "orders-", "User:carol", "*", coord.ACLOperationRead, coord.ACLPermissionAllow),
		ordPrefix:        acl(coord.ACLResourceTopic, "prefixed", "ord", "User:carol", "*", coord.ACLOperationWrite, coord.ACLPermissionAllow),
		billingGroup:     acl(coord.ACLResourceGroup, "literal", "billing", "User:alice", "*", coord.ACLOperationRead, coord.ACLPermissionAllow),
		clusterAction:    acl(coord.ACLResourceCluster, "literal", "kafka-cluster", "User:broker", "*", coord.ACLOperationClusterAction, coord.ACLPermissionAllow),
		txPrefix:         acl(coord.ACLResourceTransactionalID, "prefixed", "tx-", "User:alice", "*", coord.ACLOperationWrite, coord.ACLPermissionAllow),
		userResource:     acl(coord.ACLResourceUser, "literal", "bob", "User:admin", "*", coord.ACLOperationCreateTokens, coord.ACLPermissionAllow),
	}
}

func (s securityACLs) all() []coord.ACL {
	return []coord.ACL{s.ordersRead, s.ordersWrite, s.ordersEUDeny, s.anyTopic, s.ordersDashPrefix, s.ordPrefix,
		s.billingGroup, s.clusterAction, s.txPrefix, s.userResource}
}

// testACLCreateIdempotentAndFilter: ACLs of every resource type and both
// pattern types are stored once each, however often they are created and
// through whichever backend; the loaded ACLs filter as Kafka's DescribeAcls
// does (exact patterns, Match with the wildcard and prefixes, principals,
// hosts, operations, permissions); an invalid ACL is refused naming the
// field, and nothing of its call is written.
func testACLCreateIdempotentAndFilter(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitSecurityReady(t, h, c, 2)
	b0, b1 := c.Backend(0), c.Backend(1)
	a := newSecurityACLs()
	createACLs(t, b0, append(a.all(), a.ordersRead, a.txPrefix)...)
	s := loadSecurity(t, b0, "after CreateACLs")
	checkACLs(t, "after CreateACLs with duplicates", s.ACLs, a.all())

	extra := acl(coord.ACLResourceTopic, "literal", "orders", "User:dave", "*", coord.ACLOperationRead, coord.ACLPermissionAllow)
	createACLs(t, b1, a.ordersRead, a.ordPrefix, a.clusterAction, extra)
	s = loadSecurity(t, b1, "after CreateACLs again through backend 2")
	checkACLs(t, "after creating stored ACLs again", s.ACLs, append(a.all(), extra))

	for _, tc := range []struct {
		what   string
		filter coord.ACLFilter
		want   []coord.ACL
	}{
		{"any", coord.AnyACL, append(a.all(), extra)},
		{"literal topic orders", aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternLiteral, strPtr("orders")
		}), []coord.ACL{a.ordersRead, a.ordersWrite, extra}},
		{"match topic orders-eu", aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternMatch, strPtr("orders-eu")
		}), []coord.ACL{a.ordersEUDeny, a.anyTopic, a.ordersDashPrefix, a.ordPrefix}},
		{"match topic payments", aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternMatch, strPtr("payments")
		}), []coord.ACL{a.anyTopic}},
		{"any pattern named orders-", aclFilter(func(f *coord.ACLFilter) { f.ResourceName = strPtr("orders-") }),
			[]coord.ACL{a.ordersDashPrefix}},
		{"prefixed, any type", aclFilter(func(f *coord.ACLFilter) { f.PatternType = coord.ACLPatternPrefixed }),
			[]coord.ACL{a.ordersDashPrefix, a.ordPrefix, a.txPrefix}},
		{"principal User:alice", aclFilter(func(f *coord.ACLFilter) { f.Principal = strPtr("User:alice") }),
			[]coord.ACL{a.ordersRead, a.ordersWrite, a.billingGroup, a.txPrefix}},
		{"host 10.0.0.1", aclFilter(func(f *coord.ACLFilter) { f.Host = strPtr("10.0.0.1") }), []coord.ACL{a.ordersEUDeny}},
		{"operation Write", aclFilter(func(f *coord.ACLFilter) { f.Operation = coord.ACLOperationWrite }),
			[]coord.ACL{a.ordersWrite, a.ordPrefix, a.txPrefix}},
		{"permission Deny", aclFilter(func(f *coord.ACLFilter) { f.Permission = coord.ACLPermissionDeny }), []coord.ACL{a.ordersEUDeny}},
		{"group", aclFilter(func(f *coord.ACLFilter) { f.ResourceType = coord.ACLResourceGroup }), []coord.ACL{a.billingGroup}},
		{"cluster ClusterAction of User:broker", aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.Operation, f.Principal = coord.ACLResourceCluster, coord.ACLOperationClusterAction, strPtr("User:broker")
		}), []coord.ACL{a.clusterAction}},
		{"user resource bob", aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.ResourceName = coord.ACLResourceUser, strPtr("bob")
		}), []coord.ACL{a.userResource}},
	} {
		checkACLs(t, "describe "+tc.what, s.MatchingACLs(tc.filter), tc.want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	valid := acl(coord.ACLResourceTopic, "literal", "new-topic", "User:erin", "*", coord.ACLOperationRead, coord.ACLPermissionAllow)
	for _, tc := range []struct {
		what, field string
		change      func(a *coord.ACL)
	}{
		{"an Any pattern", "pattern type", func(a *coord.ACL) { a.PatternType = coord.ACLPatternAny }},
		{"a Match pattern", "pattern type", func(a *coord.ACL) { a.PatternType = coord.ACLPatternMatch }},
		{"an empty principal", "principal", func(a *coord.ACL) { a.Principal = "" }},
		{"an Any resource type", "resource type", func(a *coord.ACL) { a.ResourceType = coord.ACLResourceAny }},
		{"an Any operation", "operation", func(a *coord.ACL) { a.Operation = coord.ACLOperationAny }},
		{"an empty host", "host", func(a *coord.ACL) { a.Host = "" }},
	} {
		bad := valid
		tc.change(&bad)
		checkInvalid(t, "CreateACLs with "+tc.what, b0.CreateACLs(ctx, []coord.ACL{valid, bad}), tc.field)
	}
	if got := loadSecurity(t, b0, "after invalid CreateACLs"); !got.SameContent(s) {
		t.Fatalf("after invalid CreateACLs: got ACLs\n\t%s\nwant nothing written:\n\t%s", formatACLs(got.ACLs), formatACLs(s.ACLs))
	}
}

// testDeleteACLsReturnsWhatItRemoved: DeleteACLs through each backend in
// turn, with literal, prefixed, Match, overlapping and Any filters,
// returns exactly the ACLs it removed, each once, and leaves the others;
// a filter matching nothing removes nothing and is no error; an invalid
// filter is refused naming the field.
func testDeleteACLsReturnsWhatItRemoved(t T, h Harness) {
	const n = 3
	c := h.NewCluster(t, n)
	waitSecurityReady(t, h, c, n)
	a := newSecurityACLs()
	createACLs(t, c.Backend(0), a.all()...)
	left := a.all()
	for i, tc := range []struct {
		what    string
		filters []coord.ACLFilter
		want    []coord.ACL
	}{
		{"literal topic orders", []coord.ACLFilter{aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternLiteral, strPtr("orders")
		})}, []coord.ACL{a.ordersRead, a.ordersWrite}},
		{"prefixed topic orders-", []coord.ACLFilter{aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternPrefixed, strPtr("orders-")
		})}, []coord.ACL{a.ordersDashPrefix}},
		{"match topic orders-eu", []coord.ACLFilter{aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternMatch, strPtr("orders-eu")
		})}, []coord.ACL{a.ordersEUDeny, a.anyTopic, a.ordPrefix}},
		{"literal topic that has none", []coord.ACLFilter{aclFilter(func(f *coord.ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternLiteral, strPtr("nope")
		})}, nil},
		{"group, or User:alice's (overlapping)", []coord.ACLFilter{
			aclFilter(func(f *coord.ACLFilter) { f.ResourceType = coord.ACLResourceGroup }),
			aclFilter(func(f *coord.ACLFilter) { f.Principal = strPtr("User:alice") }),
		}, []coord.ACL{a.billingGroup, a.txPrefix}},
		{"any", []coord.ACLFilter{coord.AnyACL}, []coord.ACL{a.clusterAction, a.userResource}},
		{"any, once more", []coord.ACLFilter{coord.AnyACL}, nil},
	} {
		be := c.Backend(i % n)
		removed := deleteACLs(t, be, tc.filters...)
		checkACLs(t, fmt.Sprintf("DeleteACLs(%s) through backend %d", tc.what, i%n+1), removed, tc.want)
		left = slices.DeleteFunc(left, func(x coord.ACL) bool { return slices.Contains(tc.want, x) })
		s := loadSecurity(t, be, "after DeleteACLs "+tc.what)
		checkACLs(t, "stored after DeleteACLs "+tc.what, s.ACLs, left)
	}

	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	createACLs(t, c.Backend(1), a.ordersRead)
	_, err := c.Backend(2).DeleteACLs(ctx, []coord.ACLFilter{coord.AnyACL, {}})
	checkInvalid(t, "DeleteACLs with a zero filter", err, "resource type")
	checkACLs(t, "stored after an invalid DeleteACLs", loadSecurity(t, c.Backend(1), "after an invalid DeleteACLs").ACLs, []coord.ACL{a.ordersRead})
}

// testConcurrentSecurityWriters: two backends (two brokers) write at once,
// from several goroutines each: credentials of their own users and both
// mechanisms of one shared user, ACLs of their own resources and of one
// shared resource. Every write lands. Then both delete the shared
// resource's ACLs at once: each ACL is returned by exactly one of them.
func testConcurrentSecurityWriters(t T, h Harness) {
	c := h.NewCluster(t, securityBackends)
	waitSecurityReady(t, h, c, securityBackends)
	mechanisms := []string{coord.ScramSHA256, coord.ScramSHA512}
	var (
		mu        sync.Mutex
		wantACLs  []coord.ACL
		wantUsers = map[string][]coord.ScramCredential{}
		v         violations
		wg        sync.WaitGroup
	)
	for i := range securityBackends {
		be := c.Backend(i)
		shared := scramCredential(t, mechanisms[i%2], fmt.Sprintf("shared-%d", i), []byte(fmt.Sprintf("salt-shared-%d", i)))
		wantUsers["shared"] = coord.SetCredential(wantUsers["shared"], shared)
		for g := range securityGoroutines {
			user := fmt.Sprintf("user-%d-%d", i, g)
			cred := scramCredential(t, mechanisms[g%2], user, []byte("salt-"+user))
			wantUsers[user] = []coord.ScramCredential{cred}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range securityRounds {
					ctx, cancel := context.WithTimeout(context.Background(), callBound)
					principal := fmt.Sprintf("User:%s-%d", user, r)
					acls := []coord.ACL{
						acl(coord.ACLResourceTopic, "literal", "shared", principal, "*", coord.ACLOperationRead, coord.ACLPermissionAllow),
						acl(coord.ACLResourceGroup, "prefixed", user+"-", principal, "*", coord.ACLOperationRead, coord.ACLPermissionAllow),
					}
					if err := be.CreateACLs(ctx, acls); err != nil {
						v.addf("CreateACLs through backend %d: got error %v, want nil", i+1, err)
					}
					if err := be.SetScramCredential(ctx, user, cred); err != nil {
						v.addf("SetScramCredential(%q) through backend %d: got error %v, want nil", user, i+1, err)
					}
					if err := be.SetScramCredential(ctx, "shared", shared); err != nil {
						v.addf("SetScramCredential(shared, %s) through backend %d: got error %v, want nil", shared.Mechanism, i+1, err)
					}
					cancel()
					mu.Lock()
					wantACLs = append(wantACLs, acls...)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	v.report(t)
	if t.Failed() {
		return
	}
	want := &coord.SecurityState{Users: wantUsers, ACLs: coord.SortACLs(wantACLs)}
	for i := range securityBackends {
		s := loadSecurity(t, c.Backend(i), fmt.Sprintf("after the concurrent writes, through backend %d", i+1))
		if !s.SameContent(want) {
			checkACLs(t, fmt.Sprintf("ACLs through backend %d", i+1), s.ACLs, want.ACLs)
			t.Fatalf("through backend %d: got %s, want %s", i+1, describeSecurity(s), describeSecurity(want))
		}
	}

	sharedTopic := aclFilter(func(f *coord.ACLFilter) {
		f.ResourceType, f.PatternType, f.ResourceName = coord.ACLResourceTopic, coord.ACLPatternLiteral, strPtr("shared")
	})
	removed := make([][]coord.ACL, securityBackends)
	for i := range securityBackends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			var err error
			if removed[i], err = c.Backend(i).DeleteACLs(ctx, []coord.ACLFilter{sharedTopic}); err != nil {
				v.addf("concurrent DeleteACLs through backend %d: got error %v, want nil", i+1, err)
			}
		}()
	}
	wg.Wait()
	v.report(t)
	if t.Failed() {
		return
	}
	var union []coord.ACL
	for _, r := range removed {
		union = append(union, r...)
	}
	slices.SortFunc(union, coord.CompareACLs)
	checkACLs(t, "ACLs removed by the concurrent DeleteACLs together (each by one)", union, want.MatchingACLs(sharedTopic))
	left := slices.DeleteFunc(slices.Clone(want.ACLs), sharedTopic.Matches)
	checkACLs(t, "stored after the concurrent DeleteACLs", loadSecurity(t, c.Backend(0), "after the concurrent DeleteACLs").ACLs, left)
	t.Logf("%d ACLs and %d users written concurrently by %d backends; the shared topic's %d ACLs removed %d + %d",
		len(want.ACLs), len(wantUsers), securityBackends, len(union), len(removed[0]), len(removed[1]))
}

// securityWatch is a WatchSecurity whose Versions must never decrease.
type securityWatch struct{ *watcher[*coord.SecurityState] }

func watchSecurity(t T, be coord.Backend, what string) securityWatch {
	t.Helper()
	return securityWatch{startWatchDescribed(t, what, be.WatchSecurity, func(prev **coord.SecurityState, next *coord.SecurityState) string {
		if next == nil {
			return "got a nil state"
		}
		if prev != nil && next.Version < (*prev).Version {
			return fmt.Sprintf("got %s after %s, want the Version never to decrease", describeSecurity(next), describeSecurity(*prev))
		}
		return ""
	}, describeSecurity)}
}

// waitFor waits for a state with want's content from index from on and
// returns its index.
func (w securityWatch) waitFor(t T, from int, want *coord.SecurityState, what string) int {
	t.Helper()
	return w.waitMatch(t, from, callBound, fmt.Sprintf("%s sending %s", w.what, describeSecurity(want)),
		func(s *coord.SecurityState) bool { return s.SameContent(want) })
}

// testSecurityWatchSeesEveryChange: a watch on another backend than the
// writer's, and one on the writer's, opened on an empty store (on
// ZooKeeper: before its znodes exist), start with that state and then see
// every change, one after the other (credentials set, replaced and
// removed; ACLs created and deleted), with Versions that never decrease;
// a receiver changing what it got changes nothing for the next; the
// channels close when their contexts end.
func testSecurityWatchSeesEveryChange(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitSecurityReady(t, h, c, 2)
	writer := c.Backend(0)
	a := newSecurityACLs()
	initial := loadSecurity(t, writer, "before the watches")

	other := watchSecurity(t, c.Backend(1), "WatchSecurity on backend 2")
	own := watchSecurity(t, writer, "WatchSecurity on the writer's backend")
	watches := []securityWatch{other, own}
	at := make([]int, len(watches))
	for i, w := range watches {
		at[i] = w.waitFor(t, 0, initial, "the first state")
	}

	bob := scramCredential(t, coord.ScramSHA256, "bob", []byte("salt-bob"))
	bob2 := scramCredential(t, coord.ScramSHA256, "bob-2", []byte("salt-bob-2"))
	bob512 := scramCredential(t, coord.ScramSHA512, "bob", []byte("salt-bob-512"))
	for _, change := range []struct {
		what  string
		apply func()
	}{
		{"create the first ACL", func() { createACLs(t, writer, a.billingGroup) }},
		{"set bob's SCRAM-SHA-256", func() { setScram(t, writer, "bob", bob) }},
		{"create three ACLs", func() { createACLs(t, writer, a.ordersRead, a.ordPrefix, a.anyTopic) }},
		{"set bob's SCRAM-SHA-512", func() { setScram(t, writer, "bob", bob512) }},
		{"replace bob's SCRAM-SHA-256", func() { setScram(t, writer, "bob", bob2) }},
		{"delete the prefixed ACL", func() {
			deleteACLs(t, writer, aclFilter(func(f *coord.ACLFilter) { f.PatternType = coord.ACLPatternPrefixed }))
		}},
		{"delete bob's SCRAM-SHA-256", func() {
			if err := deleteScram(writer, "bob", coord.ScramSHA256); err != nil {
				t.Fatalf("DeleteScramCredential(bob, SCRAM-SHA-256): got %v, want nil", err)
			}
		}},
		{"create an ACL of a new resource type", func() { createACLs(t, writer, a.clusterAction) }},
		{"delete bob's last credential", func() {
			if err := deleteScram(writer, "bob", coord.ScramSHA512); err != nil {
				t.Fatalf("DeleteScramCredential(bob, SCRAM-SHA-512): got %v, want nil", err)
			}
		}},
		{"delete every ACL", func() { deleteACLs(t, writer, coord.AnyACL) }},
	} {
		change.apply()
		want := loadSecurity(t, writer, "after "+change.what)
		for i, w := range watches {
			at[i] = w.waitFor(t, at[i], want, "after "+change.what)
			got := w.since(at[i])[0]
			got.Users["mallory"] = []coord.ScramCredential{bob}
			got.ACLs = append(got.ACLs, a.txPrefix)
		}
	}
	for _, w := range watches {
		w.stop(t)
	}
}

// testSecuritySurvivesRestart: credentials and ACLs written through two
// backends are there, unchanged, after every backend was closed and opened
// again in turn; the closed backends refuse every call with ErrClosed; the
// reopened ones write on.
func testSecuritySurvivesRestart(t T, h Harness) {
	const n = 3
	c := h.NewCluster(t, n)
	waitSecurityReady(t, h, c, n)
	a := newSecurityACLs()
	setScram(t, c.Backend(0), "alice", scramCredential(t, coord.ScramSHA256, "alice", []byte("salt-alice")))
	setScram(t, c.Backend(1), "alice", scramCredential(t, coord.ScramSHA512, "alice", []byte("salt-alice-512")))
	setScram(t, c.Backend(1), "bob", scramCredential(t, coord.ScramSHA512, "bob", []byte("salt-bob")))
	createACLs(t, c.Backend(0), a.all()[:5]...)
	createACLs(t, c.Backend(1), a.all()[5:]...)
	want := loadSecurity(t, c.Backend(1), "before the restarts")
	checkACLs(t, "before the restarts", want.ACLs, a.all())

	for i := range n {
		closed := c.Backend(i)
		c.Restart(t, i)
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		_, loadErr := closed.LoadSecurity(ctx)
		_, watchErr := closed.WatchSecurity(ctx)
		setErr := closed.SetScramCredential(ctx, "carol", scramCredential(t, coord.ScramSHA256, "carol", []byte("salt-carol")))
		deleteErr := closed.DeleteScramCredential(ctx, "alice", coord.ScramSHA256)
		createErr := closed.CreateACLs(ctx, []coord.ACL{a.ordersRead})
		_, deleteACLsErr := closed.DeleteACLs(ctx, []coord.ACLFilter{coord.AnyACL})
		cancel()
		for call, err := range map[string]error{"LoadSecurity": loadErr, "WatchSecurity": watchErr, "SetScramCredential": setErr,
			"DeleteScramCredential": deleteErr, "CreateACLs": createErr, "DeleteACLs": deleteACLsErr} {
			if !errors.Is(err, coord.ErrClosed) {
				t.Fatalf("%s on the closed backend %d: got %v, want ErrClosed", call, i+1, err)
			}
		}
	}
	waitSecurityReady(t, h, c, n)
	for i := range n {
		if s := loadSecurity(t, c.Backend(i), fmt.Sprintf("after the restarts, through backend %d", i+1)); !s.SameContent(want) {
			t.Fatalf("after the restarts, through backend %d: got %s, want %s", i+1, describeSecurity(s), describeSecurity(want))
		}
	}
	carol := scramCredential(t, coord.ScramSHA256, "carol", []byte("salt-carol"))
	setScram(t, c.Backend(2), "carol", carol)
	removed := deleteACLs(t, c.Backend(2), aclFilter(func(f *coord.ACLFilter) { f.ResourceType = coord.ACLResourceGroup }))
	checkACLs(t, "DeleteACLs(group) after the restarts", removed, []coord.ACL{a.billingGroup})
	s := loadSecurity(t, c.Backend(2), "after writes through a reopened backend")
	checkCredentials(t, "after writes through a reopened backend", s, "carol", carol)
	checkACLs(t, "after writes through a reopened backend", s.ACLs, slices.DeleteFunc(a.all(), func(x coord.ACL) bool { return x == a.billingGroup }))
}
