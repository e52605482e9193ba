package security

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tripodmq/tripod/coord"
)

// AuthorizerConfig holds the authorizer's properties, under Kafka's
// names. With an authorizer every request is checked against the ACLs
// of the coordination backend's security store (rules.go says what each
// API needs); without one every request is allowed and the ACL APIs
// answer SECURITY_DISABLED, as in Kafka.
type AuthorizerConfig struct {
	// ClassName turns the ACL authorizer on when it is not empty
	// (authorizer.class.name). tripod has one authorizer, Kafka's
	// AclAuthorizer semantics; Kafka's class names
	// (kafka.security.authorizer.AclAuthorizer,
	// org.apache.kafka.metadata.authorizer.StandardAuthorizer) and any
	// other value select it. Default empty: no authorizer.
	ClassName string
	// SuperUsers are the principals allowed every operation on every
	// resource whatever the ACLs say, "User:name" each (super.users,
	// semicolon separated). Brokers authenticate as principals too: with
	// an authorizer, the inter-broker listener's principal (User:ANONYMOUS
	// on PLAINTEXT) must be a super user or be granted CLUSTER_ACTION on
	// the cluster. Default none.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows every principal a resource that no
	// ACL names at all (allow.everyone.if.no.acl.found). Default false.
	AllowEveryoneIfNoACLFound bool
}

// Enabled reports whether an authorizer is configured.
func (c AuthorizerConfig) Enabled() bool { return c.ClassName != "" }

// Validate checks every super user is a principal.
func (c AuthorizerConfig) Validate() error {
	for _, p := range c.SuperUsers {
		if err := checkPrincipal(p); err != nil {
			return fmt.Errorf("super.users %q: %w", strings.Join(c.SuperUsers, ";"), err)
		}
	}
	return nil
}

// checkPrincipal checks that p is written "Type:name", as Kafka's
// KafkaPrincipal.fromString wants it.
func checkPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q: want Type:name (User:alice)", p)
	}
	return nil
}

// ParseSuperUsers reads super.users: principals separated by ';', blanks
// around them ignored, as Kafka reads it; errors name key.
func ParseSuperUsers(key, value string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(value, ";") {
		p := strings.TrimSpace(item)
		if p == "" {
			continue
		}
		if err := checkPrincipal(p); err != nil {
			return nil, fmt.Errorf("%s %q: %w", key, value, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ACLIndex decides whether a principal may perform an operation on
// a resource, as Kafka's AclAuthorizer does, from one security state's
// ACLs. It does no I/O; the broker makes a new one when the ACLs change.
//
//   - A super user may do everything.
//   - The ACLs that apply to a resource are the LITERAL ones naming it or
//     "*", and the PREFIXED ones whose name starts it. When none apply
//     and allow.everyone.if.no.acl.found is set, everyone is allowed.
//   - Of those, the ones that match the request are those of its
//     principal or User:*, of its host or "*".
//   - A matching DENY of the operation, or of ALL, denies; otherwise a
//     matching ALLOW of the operation, of ALL or of an operation that
//     implies it allows (READ, WRITE, DELETE and ALTER imply DESCRIBE;
//     ALTER_CONFIGS implies DESCRIBE_CONFIGS); otherwise the request is
//     denied.
type ACLIndex struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	// byType holds the ACLs by resource type; literal the LITERAL ones
	// by resource type and name, prefixed the PREFIXED ones by resource
	// type, so a decision reads the ACLs of its resource only.
	byType   map[coord.ACLResourceType][]coord.ACL
	literal  map[coord.ACLResourceType]map[string][]coord.ACL
	prefixed map[coord.ACLResourceType][]coord.ACL
}

// NewACLIndex makes the index of acls under cfg (super users,
// allow.everyone.if.no.acl.found).
func NewACLIndex(cfg AuthorizerConfig, acls []coord.ACL) *ACLIndex {
	a := &ACLIndex{superUsers: map[string]bool{}, allowIfNoACL: cfg.AllowEveryoneIfNoACLFound, byType: map[coord.ACLResourceType][]coord.ACL{},
		literal: map[coord.ACLResourceType]map[string][]coord.ACL{}, prefixed: map[coord.ACLResourceType][]coord.ACL{}}
	for _, p := range cfg.SuperUsers {
		a.superUsers[p] = true
	}
	for _, acl := range acls {
		rt := acl.ResourceType
		a.byType[rt] = append(a.byType[rt], acl)
		switch acl.PatternType {
		case coord.ACLPatternLiteral:
			if a.literal[rt] == nil {
				a.literal[rt] = map[string][]coord.ACL{}
			}
			a.literal[rt][acl.ResourceName] = append(a.literal[rt][acl.ResourceName], acl)
		case coord.ACLPatternPrefixed:
			a.prefixed[rt] = append(a.prefixed[rt], acl)
		}
	}
	return a
}

// wildcardPrincipal and wildcardHost are the ACL principal and host that
// match every principal and every host; wildcardResource is the LITERAL
// resource name that matches every resource.
const (
	wildcardPrincipal = "User:*"
	wildcardHost      = "*"
	wildcardResource  = "*"
)

// ClusterResource is the name of the one CLUSTER resource, Kafka's
// "kafka-cluster".
const ClusterResource = "kafka-cluster"

// impliedBy lists, for an operation an ALLOW of other operations also
// grants, those operations.
var impliedBy = map[coord.ACLOperation][]coord.ACLOperation{
	coord.ACLOperationDescribe:        {coord.ACLOperationRead, coord.ACLOperationWrite, coord.ACLOperationDelete, coord.ACLOperationAlter},
	coord.ACLOperationDescribeConfigs: {coord.ACLOperationAlterConfigs},
}

// Authorize reports whether principal, connected from host, may perform
// op on the resource of type rt named name.
func (a *ACLIndex) Authorize(principal, host string, op coord.ACLOperation, rt coord.ACLResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	applying := slices.Concat(a.literal[rt][name], a.literal[rt][wildcardResource])
	if name == wildcardResource {
		applying = a.literal[rt][name]
	}
	for _, acl := range a.prefixed[rt] {
		if strings.HasPrefix(name, acl.ResourceName) {
			applying = append(applying, acl)
		}
	}
	if len(applying) == 0 {
		return a.allowIfNoACL
	}
	matches := func(acl coord.ACL, perm coord.ACLPermission) bool {
		return acl.Permission == perm && (acl.Principal == principal || acl.Principal == wildcardPrincipal) &&
			(acl.Host == host || acl.Host == wildcardHost)
	}
	for _, acl := range applying {
		if matches(acl, coord.ACLPermissionDeny) && (acl.Operation == op || acl.Operation == coord.ACLOperationAll) {
			return false
		}
	}
	for _, acl := range applying {
		if matches(acl, coord.ACLPermissionAllow) &&
			(acl.Operation == op || acl.Operation == coord.ACLOperationAll || slices.Contains(impliedBy[op], acl.Operation)) {
			return true
		}
	}
	return false
}

// AuthorizeByResourceType reports whether principal, connected from host,
// may perform op on some resource of type rt, as Kafka's
// Authorizer.AuthorizeByResourceType (KIP-679: InitProducerId for an
// idempotent producer wants WRITE on some topic): a super user may, as
// may anyone allowed op on a resource no ACL names when
// allow.everyone.if.no.acl.found is set; otherwise some ALLOW of op (or
// ALL) must name a resource no DENY covers.
func (a *ACLIndex) AuthorizeByResourceType(principal, host string, op coord.ACLOperation, rt coord.ACLResourceType) bool {
	// As Kafka, a name no ACL is likely to cover stands for "any
	// resource" for super users and allow.everyone.if.no.acl.found.
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	var denyLiterals, denyPrefixes, allowLiterals, allowPrefixes []string
	for _, acl := range a.byType[rt] {
		if (acl.Principal != principal && acl.Principal != wildcardPrincipal) || (acl.Host != host && acl.Host != wildcardHost) ||
			(acl.Operation != op && acl.Operation != coord.ACLOperationAll) {
			continue
		}
		literal := acl.PatternType == coord.ACLPatternLiteral
		switch {
		case acl.Permission == coord.ACLPermissionDeny && literal:
			denyLiterals = append(denyLiterals, acl.ResourceName)
		case acl.Permission == coord.ACLPermissionDeny:
			denyPrefixes = append(denyPrefixes, acl.ResourceName)
		case literal:
			allowLiterals = append(allowLiterals, acl.ResourceName)
		default:
			allowPrefixes = append(allowPrefixes, acl.ResourceName)
		}
	}
	if slices.Contains(denyLiterals, wildcardResource) {
		return false
	}
	deniedByPrefix := func(name string) bool {
		return slices.ContainsFunc(denyPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
	for _, name := range allowLiterals {
		if name == wildcardResource || (!slices.Contains(denyLiterals, name) && !deniedByPrefix(name)) {
			return true
		}
	}
	for _, prefix := range allowPrefixes {
		if !deniedByPrefix(prefix) {
			return true
		}
	}
	return false
}
