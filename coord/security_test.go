package coord

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

// TestACLFilterMatches checks ACLFilter.Matches against Kafka's
// AclBindingFilter.matches, case by case: Any values, nil strings, exact
// pattern types, and Match's literal, wildcard and prefix rules.
func TestACLFilterMatches(t *testing.T) {
	literal := ACL{ResourceType: ACLResourceTopic, ResourceName: "orders", PatternType: ACLPatternLiteral,
		Principal: "User:alice", Host: "*", Operation: ACLOperationRead, Permission: ACLPermissionAllow}
	wildcard := literal
	wildcard.ResourceName = "*"
	prefixed := literal
	prefixed.ResourceName, prefixed.PatternType = "ord", ACLPatternPrefixed
	group := literal
	group.ResourceType = ACLResourceGroup

	// filter returns AnyACL changed by set.
	filter := func(set func(f *ACLFilter)) ACLFilter {
		f := AnyACL
		set(&f)
		return f
	}
	for _, tc := range []struct {
		name   string
		filter ACLFilter
		acl    ACL
		want   bool
	}{
		{"any matches a literal acl", AnyACL, literal, true},
		{"any matches a prefixed acl", AnyACL, prefixed, true},
		{"zero filter matches nothing", ACLFilter{}, literal, false},
		{"resource type topic", filter(func(f *ACLFilter) { f.ResourceType = ACLResourceTopic }), literal, true},
		{"resource type group vs topic", filter(func(f *ACLFilter) { f.ResourceType = ACLResourceGroup }), literal, false},
		{"resource type group", filter(func(f *ACLFilter) { f.ResourceType = ACLResourceGroup }), group, true},
		{"literal pattern, exact name", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternLiteral, ptr("orders") }), literal, true},
		{"literal pattern, other name", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternLiteral, ptr("payments") }), literal, false},
		{"literal pattern, prefixed acl", filter(func(f *ACLFilter) { f.PatternType = ACLPatternLiteral }), prefixed, false},
		{"literal pattern does not expand the wildcard", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternLiteral, ptr("orders") }), wildcard, false},
		{"literal pattern names the wildcard itself", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternLiteral, ptr("*") }), wildcard, true},
		{"prefixed pattern, exact prefix", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternPrefixed, ptr("ord") }), prefixed, true},
		{"prefixed pattern does not match by prefix", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternPrefixed, ptr("orders") }), prefixed, false},
		{"prefixed pattern, literal acl", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternPrefixed, ptr("orders") }), literal, false},
		{"any pattern, exact name of a literal", filter(func(f *ACLFilter) { f.ResourceName = ptr("orders") }), literal, true},
		{"any pattern, exact name of a prefixed", filter(func(f *ACLFilter) { f.ResourceName = ptr("ord") }), prefixed, true},
		{"any pattern does not match by prefix", filter(func(f *ACLFilter) { f.ResourceName = ptr("orders") }), prefixed, false},
		{"any pattern does not expand the wildcard", filter(func(f *ACLFilter) { f.ResourceName = ptr("orders") }), wildcard, false},
		{"match, literal of the name", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("orders") }), literal, true},
		{"match, literal of another name", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("payments") }), literal, false},
		{"match, the literal wildcard", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("payments") }), wildcard, true},
		{"match, a prefix of the name", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("orders") }), prefixed, true},
		{"match, the prefix itself", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("ord") }), prefixed, true},
		{"match, a name shorter than the prefix", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("or") }), prefixed, false},
		{"match, a name not starting with the prefix", filter(func(f *ACLFilter) { f.PatternType, f.ResourceName = ACLPatternMatch, ptr("xord") }), prefixed, false},
		{"match without a name matches every pattern", filter(func(f *ACLFilter) { f.PatternType = ACLPatternMatch }), prefixed, true},
		{"match, the resource type still counts", filter(func(f *ACLFilter) {
			f.ResourceType, f.PatternType, f.ResourceName = ACLResourceGroup, ACLPatternMatch, ptr("orders")
		}), literal, false},
		{"principal equal", filter(func(f *ACLFilter) { f.Principal = ptr("User:alice") }), literal, true},
		{"principal differs", filter(func(f *ACLFilter) { f.Principal = ptr("User:bob") }), literal, false},
		{"principal is not a wildcard match", filter(func(f *ACLFilter) { f.Principal = ptr("User:*") }), literal, false},
		{"host equal", filter(func(f *ACLFilter) { f.Host = ptr("*") }), literal, true},
		{"host differs", filter(func(f *ACLFilter) { f.Host = ptr("10.0.0.1") }), literal, false},
		{"operation equal", filter(func(f *ACLFilter) { f.Operation = ACLOperationRead }), literal, true},
		{"operation differs", filter(func(f *ACLFilter) { f.Operation = ACLOperationWrite }), literal, false},
		{"operation All is not any operation", filter(func(f *ACLFilter) { f.Operation = ACLOperationAll }), literal, false},
		{"permission equal", filter(func(f *ACLFilter) { f.Permission = ACLPermissionAllow }), literal, true},
		{"permission differs", filter(func(f *ACLFilter) { f.Permission = ACLPermissionDeny }), literal, false},
	} {
		if got := tc.filter.Matches(tc.acl); got != tc.want {
			t.Errorf("%s: %+v.Matches(%v): got %v, want %v", tc.name, tc.filter, tc.acl, got, tc.want)
		}
	}
}

// TestACLValidateNamesTheField: an ACL that cannot be stored is refused
// with an error naming what is wrong.
func TestACLValidateNamesTheField(t *testing.T) {
	good := ACL{ResourceType: ACLResourceTopic, ResourceName: "orders", PatternType: ACLPatternLiteral,
		Principal: "User:alice", Host: "*", Operation: ACLOperationRead, Permission: ACLPermissionAllow}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(%v): got %v, want nil", good, err)
	}
	for _, tc := range []struct {
		field  string
		change func(a *ACL)
	}{
		{"resource type", func(a *ACL) { a.ResourceType = ACLResourceAny }},
		{"resource type", func(a *ACL) { a.ResourceType = 0 }},
		{"resource name", func(a *ACL) { a.ResourceName = "" }},
		{"pattern type", func(a *ACL) { a.PatternType = ACLPatternAny }},
		{"pattern type", func(a *ACL) { a.PatternType = ACLPatternMatch }},
		{"principal", func(a *ACL) { a.Principal = "" }},
		{"principal", func(a *ACL) { a.Principal = "alice" }},
		{"host", func(a *ACL) { a.Host = "" }},
		{"operation", func(a *ACL) { a.Operation = ACLOperationAny }},
		{"permission", func(a *ACL) { a.Permission = ACLPermissionAny }},
	} {
		a := good
		tc.change(&a)
		err := a.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%v): got %v, want an error naming the %s", a, err, tc.field)
		}
	}
	if err := (ACLFilter{}).Validate(); err == nil || !strings.Contains(err.Error(), "resource type") {
		t.Errorf("Validate of the zero filter: got %v, want an error naming the resource type", err)
	}
	if err := AnyACL.Validate(); err != nil {
		t.Errorf("Validate(AnyACL): got %v, want nil", err)
	}
}

// TestScramCredentialKafkaFormat: a credential is written in Kafka's
// ScramCredentialUtils format and read back, and malformed ones are
// refused naming the field.
func TestScramCredentialKafkaFormat(t *testing.T) {
	c := ScramCredential{Mechanism: ScramSHA256, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32),
		ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 4096}
	s := FormatScramCredential(c)
	want := "salt=c2FsdA==,stored_key=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=," +
		"server_key=AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=,iterations=4096"
	if s != want {
		t.Fatalf("FormatScramCredential: got %q, want %q", s, want)
	}
	back, err := ParseScramCredential(ScramSHA256, s)
	if err != nil || !back.equal(c) {
		t.Fatalf("ParseScramCredential(%q): got %+v, %v, want %+v", s, back, err, c)
	}
	for _, tc := range []struct {
		mechanism, value, field string
	}{
		{"SCRAM-SHA-1", s, "mechanism"},
		{ScramSHA512, s, "stored key"},
		{ScramSHA256, strings.Replace(s, "iterations=4096", "iterations=0", 1), "iterations"},
		{ScramSHA256, strings.Replace(s, ",iterations=4096", "", 1), "iterations"},
		{ScramSHA256, strings.Replace(s, "salt=c2FsdA==", "salt=", 1), "salt"},
		{ScramSHA256, strings.Replace(s, "salt=c2FsdA==", "salt=!!", 1), "salt"},
	} {
		if _, err := ParseScramCredential(tc.mechanism, tc.value); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("ParseScramCredential(%s, %q): got %v, want an error naming the %s", tc.mechanism, tc.value, err, tc.field)
		}
	}
	if err := ValidateScramUser(""); err == nil || !strings.Contains(err.Error(), "user") {
		t.Errorf("ValidateScramUser(\"\"): got %v, want an error naming the user", err)
	}
}

// TestACLNamesRoundTrip: every value's Kafka name parses back, in Kafka's
// enum spelling too.
func TestACLNamesRoundTrip(t *testing.T) {
	for v := ACLResourceAny; v <= ACLResourceUser; v++ {
		if got, err := ParseACLResourceType(v.String()); err != nil || got != v {
			t.Errorf("ParseACLResourceType(%q): got %v, %v, want %v", v.String(), got, err, v)
		}
	}
	for v := ACLOperationAny; v <= ACLOperationDescribeTokens; v++ {
		if got, err := ParseACLOperation(v.String()); err != nil || got != v {
			t.Errorf("ParseACLOperation(%q): got %v, %v, want %v", v.String(), got, err, v)
		}
	}
	for s, want := range map[string]ACLResourceType{"TRANSACTIONAL_ID": ACLResourceTransactionalID, "topic": ACLResourceTopic, "DELEGATION_TOKEN": ACLResourceDelegationToken} {
		if got, err := ParseACLResourceType(s); err != nil || got != want {
			t.Errorf("ParseACLResourceType(%q): got %v, %v, want %v", s, got, err, want)
		}
	}
	if got, err := ParseACLOperation("CLUSTER_ACTION"); err != nil || got != ACLOperationClusterAction {
		t.Errorf("ParseACLOperation(CLUSTER_ACTION): got %v, %v, want ClusterAction", got, err)
	}
	if _, err := ParseACLPermission("Maybe"); err == nil {
		t.Errorf("ParseACLPermission(Maybe): got nil, want an error")
	}
	if got := ACLOperation(99).String(); got != "Unknown(99)" {
		t.Errorf("ACLOperation(99).String(): got %q, want Unknown(99)", got)
	}
}

// TestSecurityStateHelpers: SortACLs orders and deduplicates, Clone is deep,
// SameContent ignores the Version, SetCredential replaces by mechanism.
func TestSecurityStateHelpers(t *testing.T) {
	a := ACL{ResourceType: ACLResourceTopic, ResourceName: "b", PatternType: ACLPatternLiteral, Principal: "User:x", Host: "*", Operation: ACLOperationRead, Permission: ACLPermissionAllow}
	b := a
	b.ResourceName = "a"
	c := a
	c.ResourceType = ACLResourceGroup
	if got, want := SortACLs([]ACL{c, a, b, a}), []ACL{b, a, c}; !slices.Equal(got, want) {
		t.Errorf("SortACLs: got %v, want %v", got, want)
	}

	cred := ScramCredential{Mechanism: ScramSHA512, Salt: []byte{1}, StoredKey: make([]byte, 64), ServerKey: make([]byte, 64), Iterations: 8192}
	s := NewSecurityState()
	s.Version = 7
	s.Users["alice"] = SetCredential(nil, cred)
	s.ACLs = []ACL{a}
	clone := s.Clone()
	clone.Version = 9
	if !s.SameContent(clone) {
		t.Errorf("SameContent of a clone with another Version: got false, want true")
	}
	clone.Users["alice"][0].Salt[0] = 2
	if s.Users["alice"][0].Salt[0] != 1 {
		t.Errorf("changing a clone's salt changed the original: Clone is not deep")
	}
	if s.SameContent(clone) {
		t.Errorf("SameContent after the clone's salt changed: got true, want false")
	}

	sha256 := ScramCredential{Mechanism: ScramSHA256, Salt: []byte{3}, StoredKey: make([]byte, 32), ServerKey: make([]byte, 32), Iterations: 4096}
	creds := SetCredential(s.Users["alice"], sha256)
	if len(creds) != 2 || creds[0].Mechanism != ScramSHA256 || creds[1].Mechanism != ScramSHA512 {
		t.Fatalf("SetCredential of a second mechanism: got %+v, want SHA-256 then SHA-512", creds)
	}
	replaced := cred
	replaced.Iterations = 10000
	creds = SetCredential(creds, replaced)
	if got, ok := (&SecurityState{Users: map[string][]ScramCredential{"alice": creds}}).Credential("alice", ScramSHA512); !ok || got.Iterations != 10000 || len(creds) != 2 {
		t.Errorf("SetCredential replacing SHA-512: got %+v (%d credentials), want iterations 10000 and 2 credentials", got, len(creds))
	}
}
