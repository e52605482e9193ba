package coord

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SecurityStore keeps the cluster's SCRAM credentials and ACLs (issue #14),
// which every broker watches to authenticate SASL/SCRAM clients and to
// authorise requests. Writes need no controller Term (like
// ProducerIDAllocator): any broker answering AlterUserScramCredentials,
// CreateAcls or DeleteAcls writes them, and the service serialises
// concurrent writers (compare-and-set or transactions, retried on
// conflict), so two brokers writing at once both land.
//
// Invalid input (an empty user, an unknown mechanism, a malformed
// credential, an ACL with an Any or Match pattern or an empty principal, a
// filter with an unknown value) fails before anything is written, with an
// error naming the field and wrapping no sentinel. A backend refuses names
// its layout cannot hold: ZooKeeper, as Kafka's layout there, cannot hold a
// resource name with a '/'.
//
// A write whose answer is lost (ctx ended, the connection dropped) may
// still be applied. A backend that sends it again builds on the store as
// it is then, so DeleteScramCredential may then report ErrNotFound for the
// credential it removed, and DeleteACLs leave out ACLs it removed.
type SecurityStore interface {
	// LoadSecurity reads the whole security state. It does not block
	// beyond the reads it needs (on Raft it is linearizable, as Load).
	// Errors: ErrUnavailable, ctx.Err(), ErrClosed.
	LoadSecurity(ctx context.Context) (*SecurityState, error)

	// WatchSecurity sends the whole security state on the returned
	// channel: first the current state, then a newer state after changes.
	// States may be coalesced (a watcher that falls behind sees only the
	// latest) but their Version never decreases, and every change is
	// contained in some later state. The channel is closed when ctx ends
	// or the backend is closed. Receivers own what they get. Errors (from
	// the call itself): ErrUnavailable, ctx.Err(), ErrClosed.
	WatchSecurity(ctx context.Context) (<-chan *SecurityState, error)

	// SetScramCredential adds user's credential of cred.Mechanism, or
	// replaces the one stored. It blocks until the write is durable or ctx
	// ends (then its outcome is unknown). Errors: an invalid user or
	// credential; ErrUnavailable; ctx.Err() (some backends wrap it together
	// with ErrUnavailable: test with errors.Is); ErrClosed.
	SetScramCredential(ctx context.Context, user string, cred ScramCredential) error

	// DeleteScramCredential removes user's credential of mechanism; a user
	// left with no credential is removed. It blocks as SetScramCredential.
	// Errors: ErrNotFound if user has no credential of mechanism; an
	// invalid user or mechanism; ErrUnavailable; ctx.Err(); ErrClosed.
	DeleteScramCredential(ctx context.Context, user, mechanism string) error

	// CreateACLs adds acls; adding an ACL that is stored already (or twice
	// in acls) is no error and stores it once. It blocks until the writes
	// are durable or ctx ends. The ACLs of one resource pattern are added
	// atomically, not the call as a whole: when it fails, some resources
	// may have their new ACLs, and calling again is safe. Errors: an
	// invalid ACL (nothing is written); ErrUnavailable; ctx.Err();
	// ErrClosed.
	CreateACLs(ctx context.Context, acls []ACL) error

	// DeleteACLs removes every stored ACL that matches any of filters and
	// returns those this call removed, sorted by CompareACLs, each once
	// (an ACL removed by a concurrent call is returned by that call only).
	// No match is no error. It blocks as CreateACLs and, like it, is atomic
	// per resource pattern: when it fails, it returns the ACLs removed
	// before the failure with the error. Errors: an invalid filter (nothing
	// is removed); ErrUnavailable; ctx.Err(); ErrClosed.
	DeleteACLs(ctx context.Context, filters []ACLFilter) ([]ACL, error)
}

// SecurityState is the whole stored security state.
type SecurityState struct {
	// Version orders states of one cluster as Metadata.Version does (its
	// unit is the backend's: ZooKeeper zxid, etcd revision, Raft log
	// index): it grows with every change, and a state sent by
	// WatchSecurity is never older than one sent before.
	Version int64
	// Users holds each user's credentials, by user name, sorted by
	// mechanism; a user without credentials has no entry.
	Users map[string][]ScramCredential
	// ACLs holds every ACL once, sorted by CompareACLs.
	ACLs []ACL
}

// NewSecurityState returns an empty SecurityState.
func NewSecurityState() *SecurityState {
	return &SecurityState{Users: map[string][]ScramCredential{}}
}

// Credential returns user's credential of mechanism.
func (s *SecurityState) Credential(user, mechanism string) (ScramCredential, bool) {
	for _, c := range s.Users[user] {
		if c.Mechanism == mechanism {
			return c, true
		}
	}
	return ScramCredential{}, false
}

// MatchingACLs returns the ACLs that f matches, in order: DescribeAcls.
func (s *SecurityState) MatchingACLs(f ACLFilter) []ACL {
	var out []ACL
	for _, a := range s.ACLs {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// Clone returns a deep copy of s.
func (s *SecurityState) Clone() *SecurityState {
	out := &SecurityState{Version: s.Version, Users: make(map[string][]ScramCredential, len(s.Users)), ACLs: slices.Clone(s.ACLs)}
	for user, creds := range s.Users {
		copied := make([]ScramCredential, len(creds))
		for i, c := range creds {
			copied[i] = c.clone()
		}
		out.Users[user] = copied
	}
	return out
}

// SameContent reports whether s and o hold the same credentials and ACLs,
// whatever their Versions.
func (s *SecurityState) SameContent(o *SecurityState) bool {
	if len(s.Users) != len(o.Users) || !slices.Equal(s.ACLs, o.ACLs) {
		return false
	}
	for user, creds := range s.Users {
		if !slices.EqualFunc(creds, o.Users[user], ScramCredential.equal) {
			return false
		}
	}
	return true
}

// SCRAM mechanisms, as Kafka names them.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// scramKeySize is the size of a mechanism's StoredKey and ServerKey: its
// hash's output.
var scramKeySize = map[string]int{ScramSHA256: 32, ScramSHA512: 64}

// ScramCredential is one SCRAM mechanism's salted credential for a user,
// as Kafka stores it (RFC 5802: StoredKey = H(ClientKey), ServerKey =
// HMAC(SaltedPassword, "Server Key")). It holds no password.
type ScramCredential struct {
	// Mechanism is ScramSHA256 or ScramSHA512.
	Mechanism string
	Salt      []byte
	StoredKey []byte
	ServerKey []byte
	// Iterations is the PBKDF2 iteration count the salted password was
	// made with (Kafka accepts 4096 to 16384; the broker applies that
	// policy, the store only wants it positive).
	Iterations int
}

// Validate checks that c is a credential of a known mechanism: a salt,
// keys of the mechanism's hash size, a positive iteration count.
func (c ScramCredential) Validate() error {
	if err := ValidateScramMechanism(c.Mechanism); err != nil {
		return err
	}
	size := scramKeySize[c.Mechanism]
	switch {
	case len(c.Salt) == 0:
		return fmt.Errorf("scram credential %s: salt: empty", c.Mechanism)
	case len(c.StoredKey) != size:
		return fmt.Errorf("scram credential %s: stored key: %d bytes, want %d", c.Mechanism, len(c.StoredKey), size)
	case len(c.ServerKey) != size:
		return fmt.Errorf("scram credential %s: server key: %d bytes, want %d", c.Mechanism, len(c.ServerKey), size)
	case c.Iterations <= 0:
		return fmt.Errorf("scram credential %s: iterations: %d, want > 0", c.Mechanism, c.Iterations)
	}
	return nil
}

// ValidateScramUser checks a SCRAM user name: it must not be empty.
func ValidateScramUser(user string) error {
	if user == "" {
		return fmt.Errorf("scram user: empty name")
	}
	return nil
}

// ValidateScramMechanism checks that mechanism is ScramSHA256 or
// ScramSHA512.
func ValidateScramMechanism(mechanism string) error {
	if _, ok := scramKeySize[mechanism]; !ok {
		return fmt.Errorf("scram mechanism %q: unknown, want %s or %s", mechanism, ScramSHA256, ScramSHA512)
	}
	return nil
}

func (c ScramCredential) clone() ScramCredential {
	c.Salt, c.StoredKey, c.ServerKey = bytes.Clone(c.Salt), bytes.Clone(c.StoredKey), bytes.Clone(c.ServerKey)
	return c
}

func (c ScramCredential) equal(o ScramCredential) bool {
	return c.Mechanism == o.Mechanism && c.Iterations == o.Iterations &&
		bytes.Equal(c.Salt, o.Salt) && bytes.Equal(c.StoredKey, o.StoredKey) && bytes.Equal(c.ServerKey, o.ServerKey)
}

// FormatScramCredential writes c as Kafka's ScramCredentialUtils does in a
// user's config: "salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>".
func FormatScramCredential(c ScramCredential) string {
	enc := base64.StdEncoding
	return "salt=" + enc.EncodeToString(c.Salt) + ",stored_key=" + enc.EncodeToString(c.StoredKey) +
		",server_key=" + enc.EncodeToString(c.ServerKey) + ",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseScramCredential reads a credential of mechanism written by
// FormatScramCredential (or by Kafka) and validates it.
func ParseScramCredential(mechanism, s string) (ScramCredential, error) {
	c := ScramCredential{Mechanism: mechanism}
	seen := map[string]bool{}
	for field := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return ScramCredential{}, fmt.Errorf("scram credential %s: field %q: want key=value", mechanism, field)
		}
		var err error
		switch key {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(value)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(value)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(value)
		case "iterations":
			c.Iterations, err = strconv.Atoi(value)
		default:
			continue // a later Kafka's addition
		}
		if err != nil {
			return ScramCredential{}, fmt.Errorf("scram credential %s: %s: %w", mechanism, key, err)
		}
		seen[key] = true
	}
	for _, key := range []string{"salt", "stored_key", "server_key", "iterations"} {
		if !seen[key] {
			return ScramCredential{}, fmt.Errorf("scram credential %s: %s: missing", mechanism, key)
		}
	}
	if err := c.Validate(); err != nil {
		return ScramCredential{}, err
	}
	return c, nil
}

// ACLResourceType is the type of an ACL's resource, with Kafka's protocol
// values (kmsg.ACLResourceType).
type ACLResourceType int8

// Resource types.
const (
	ACLResourceAny             ACLResourceType = 1 // filters only
	ACLResourceTopic           ACLResourceType = 2
	ACLResourceGroup           ACLResourceType = 3
	ACLResourceCluster         ACLResourceType = 4
	ACLResourceTransactionalID ACLResourceType = 5
	ACLResourceDelegationToken ACLResourceType = 6
	ACLResourceUser            ACLResourceType = 7
)

// ACLPatternType is how an ACL's resource name matches resources, with
// Kafka's protocol values (kmsg.ACLResourcePatternType).
type ACLPatternType int8

// Pattern types.
const (
	// ACLPatternAny, in a filter, matches ACLs of any pattern type whose
	// name is the filter's.
	ACLPatternAny ACLPatternType = 1
	// ACLPatternMatch, in a filter, matches the ACLs that apply to the
	// filter's resource name: literal ACLs of that name, the literal "*",
	// and prefixed ACLs whose prefix the name starts with.
	ACLPatternMatch ACLPatternType = 2
	// ACLPatternLiteral: the ACL names one resource ("*": every one).
	ACLPatternLiteral ACLPatternType = 3
	// ACLPatternPrefixed: the ACL applies to every resource whose name
	// starts with the ACL's.
	ACLPatternPrefixed ACLPatternType = 4
)

// ACLOperation is what an ACL allows or denies, with Kafka's protocol
// values (kmsg.ACLOperation).
type ACLOperation int8

// Operations.
const (
	ACLOperationAny             ACLOperation = 1 // filters only
	ACLOperationAll             ACLOperation = 2
	ACLOperationRead            ACLOperation = 3
	ACLOperationWrite           ACLOperation = 4
	ACLOperationCreate          ACLOperation = 5
	ACLOperationDelete          ACLOperation = 6
	ACLOperationAlter           ACLOperation = 7
	ACLOperationDescribe        ACLOperation = 8
	ACLOperationClusterAction   ACLOperation = 9
	ACLOperationDescribeConfigs ACLOperation = 10
	ACLOperationAlterConfigs    ACLOperation = 11
	ACLOperationIdempotentWrite ACLOperation = 12
	ACLOperationCreateTokens    ACLOperation = 13
	ACLOperationDescribeTokens  ACLOperation = 14
)

// ACLPermission says whether an ACL allows or denies, with Kafka's
// protocol values (kmsg.ACLPermissionType).
type ACLPermission int8

// Permissions.
const (
	ACLPermissionAny   ACLPermission = 1 // filters only
	ACLPermissionDeny  ACLPermission = 2
	ACLPermissionAllow ACLPermission = 3
)

// Kafka's names (SecurityUtils.resourceTypeName, operationName,
// permissionTypeName), indexed by value; "" is no value.
var (
	resourceTypeNames = []string{"", "Any", "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"}
	patternTypeNames  = []string{"", "Any", "Match", "Literal", "Prefixed"}
	operationNames    = []string{"", "Any", "All", "Read", "Write", "Create", "Delete", "Alter", "Describe",
		"ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens"}
	permissionNames = []string{"", "Any", "Deny", "Allow"}
)

func nameOf[V ~int8](names []string, v V) string {
	if v > 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("Unknown(%d)", v)
}

// parseName finds s among names, ignoring case and underscores, so that
// Kafka's enum spellings ("TRANSACTIONAL_ID") parse as its display names
// ("TransactionalId") do.
func parseName[V ~int8](what string, names []string, s string) (V, error) {
	want := strings.ReplaceAll(s, "_", "")
	for v, name := range names {
		if name != "" && strings.EqualFold(name, want) {
			return V(v), nil
		}
	}
	return 0, fmt.Errorf("%s %q: unknown", what, s)
}

// String returns Kafka's name: Topic, Group, Cluster, TransactionalId,
// DelegationToken, User (Any in filters).
func (t ACLResourceType) String() string { return nameOf(resourceTypeNames, t) }

// String returns Literal, Prefixed, Any or Match.
func (p ACLPatternType) String() string { return nameOf(patternTypeNames, p) }

// String returns Kafka's name: Read, Write, ClusterAction, All, ...
func (o ACLOperation) String() string { return nameOf(operationNames, o) }

// String returns Allow or Deny (Any in filters).
func (p ACLPermission) String() string { return nameOf(permissionNames, p) }

// ParseACLResourceType parses a resource type's name, in any case, with or
// without underscores ("Topic", "TRANSACTIONAL_ID").
func ParseACLResourceType(s string) (ACLResourceType, error) {
	return parseName[ACLResourceType]("acl resource type", resourceTypeNames, s)
}

// ParseACLPatternType parses a pattern type's name, in any case.
func ParseACLPatternType(s string) (ACLPatternType, error) {
	return parseName[ACLPatternType]("acl pattern type", patternTypeNames, s)
}

// ParseACLOperation parses an operation's name, in any case, with or
// without underscores ("Read", "CLUSTER_ACTION").
func ParseACLOperation(s string) (ACLOperation, error) {
	return parseName[ACLOperation]("acl operation", operationNames, s)
}

// ParseACLPermission parses a permission's name, in any case.
func ParseACLPermission(s string) (ACLPermission, error) {
	return parseName[ACLPermission]("acl permission", permissionNames, s)
}

// ACL is one access control entry bound to a resource pattern, Kafka's
// AclBinding.
type ACL struct {
	ResourceType ACLResourceType
	ResourceName string
	// PatternType is ACLPatternLiteral or ACLPatternPrefixed (a stored ACL
	// is never Any or Match).
	PatternType ACLPatternType
	// Principal is "User:alice", or "User:*" for every user.
	Principal string
	// Host is "*" or an IP address.
	Host       string
	Operation  ACLOperation
	Permission ACLPermission
}

// String formats a as "Topic:Literal:orders User:alice Allow Read from *".
func (a ACL) String() string {
	return fmt.Sprintf("%v:%v:%s %s %v %v from %s", a.ResourceType, a.PatternType, a.ResourceName,
		a.Principal, a.Permission, a.Operation, a.Host)
}

// Validate checks that a can be stored: a specific resource type, a
// non-empty name, a Literal or Prefixed pattern, a "Type:name" principal,
// a host, a specific operation and Allow or Deny.
func (a ACL) Validate() error {
	switch {
	case a.ResourceType < ACLResourceTopic || a.ResourceType > ACLResourceUser:
		return fmt.Errorf("acl %v: resource type %v: want Topic, Group, Cluster, TransactionalId, DelegationToken or User", a, a.ResourceType)
	case a.ResourceName == "":
		return fmt.Errorf("acl %v: resource name: empty", a)
	case a.PatternType != ACLPatternLiteral && a.PatternType != ACLPatternPrefixed:
		return fmt.Errorf("acl %v: pattern type %v: want Literal or Prefixed", a, a.PatternType)
	case a.Principal == "":
		return fmt.Errorf("acl %v: principal: empty", a)
	case !strings.Contains(a.Principal, ":"):
		return fmt.Errorf("acl %v: principal %q: want Type:name (User:alice)", a, a.Principal)
	case a.Host == "":
		return fmt.Errorf("acl %v: host: empty", a)
	case a.Operation < ACLOperationAll || a.Operation > ACLOperationDescribeTokens:
		return fmt.Errorf("acl %v: operation %v: want All, Read, Write, ... (not Any)", a, a.Operation)
	case a.Permission != ACLPermissionAllow && a.Permission != ACLPermissionDeny:
		return fmt.Errorf("acl %v: permission %v: want Allow or Deny", a, a.Permission)
	}
	return nil
}

// CompareACLs orders ACLs by resource type, pattern type, resource name,
// principal, host, operation and permission: the order of
// SecurityState.ACLs.
func CompareACLs(a, b ACL) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// SortACLs sorts acls by CompareACLs and drops duplicates.
func SortACLs(acls []ACL) []ACL {
	slices.SortFunc(acls, CompareACLs)
	return slices.Compact(acls)
}

// ACLFilter selects ACLs as Kafka's AclBindingFilter does (DescribeAcls,
// DeleteAcls): an Any value matches every value, a nil string any string,
// and PatternType Match matches the ACLs that apply to ResourceName (see
// ACLPatternMatch).
type ACLFilter struct {
	ResourceType ACLResourceType
	ResourceName *string
	PatternType  ACLPatternType
	Principal    *string
	Host         *string
	Operation    ACLOperation
	Permission   ACLPermission
}

// AnyACL is the filter that matches every ACL.
var AnyACL = ACLFilter{ResourceType: ACLResourceAny, PatternType: ACLPatternAny, Operation: ACLOperationAny, Permission: ACLPermissionAny}

// Validate checks that every value of f is a known one (Any included):
// Kafka answers a filter with an unknown value with an error.
func (f ACLFilter) Validate() error {
	switch {
	case f.ResourceType < ACLResourceAny || f.ResourceType > ACLResourceUser:
		return fmt.Errorf("acl filter: resource type %v: unknown", f.ResourceType)
	case f.PatternType < ACLPatternAny || f.PatternType > ACLPatternPrefixed:
		return fmt.Errorf("acl filter: pattern type %v: unknown", f.PatternType)
	case f.Operation < ACLOperationAny || f.Operation > ACLOperationDescribeTokens:
		return fmt.Errorf("acl filter: operation %v: unknown", f.Operation)
	case f.Permission < ACLPermissionAny || f.Permission > ACLPermissionAllow:
		return fmt.Errorf("acl filter: permission %v: unknown", f.Permission)
	}
	return nil
}

// Matches reports whether f selects a, as Kafka's AclBindingFilter.matches
// (ResourcePatternFilter and AccessControlEntryFilter).
func (f ACLFilter) Matches(a ACL) bool {
	if f.ResourceType != ACLResourceAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.PatternType != ACLPatternAny && f.PatternType != ACLPatternMatch && f.PatternType != a.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType != ACLPatternMatch:
			if name != a.ResourceName {
				return false
			}
		case a.PatternType == ACLPatternLiteral:
			if name != a.ResourceName && a.ResourceName != "*" {
				return false
			}
		case a.PatternType == ACLPatternPrefixed:
			if !strings.HasPrefix(name, a.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if f.Operation != ACLOperationAny && f.Operation != a.Operation {
		return false
	}
	return f.Permission == ACLPermissionAny || f.Permission == a.Permission
}

// MatchesAny reports whether any of filters selects a.
func MatchesAny(filters []ACLFilter, a ACL) bool {
	return slices.ContainsFunc(filters, func(f ACLFilter) bool { return f.Matches(a) })
}

// ValidateACLFilters checks every filter of a DeleteACLs call.
func ValidateACLFilters(filters []ACLFilter) error {
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("filter %d: %w", i, err)
		}
	}
	return nil
}

// ValidateACLs checks every ACL of a CreateACLs call.
func ValidateACLs(acls []ACL) error {
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// SetCredential returns creds with c added or replacing the credential of
// its mechanism, sorted by mechanism; creds is not changed.
func SetCredential(creds []ScramCredential, c ScramCredential) []ScramCredential {
	out := slices.DeleteFunc(slices.Clone(creds), func(o ScramCredential) bool { return o.Mechanism == c.Mechanism })
	out = append(out, c.clone())
	slices.SortFunc(out, func(a, b ScramCredential) int { return cmp.Compare(a.Mechanism, b.Mechanism) })
	return out
}
