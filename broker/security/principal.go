package security

import (
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf16"
)

// Principal is who a connection's client is, Kafka's KafkaPrincipal:
// a type, "User" for every principal tripod builds, and a name. ACLs name
// principals as String gives them ("User:alice").
type Principal struct {
	Type, Name string
}

// String is the principal as Kafka writes it, "Type:Name".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// Anonymous is the principal of a connection that has not
// authenticated: a PLAINTEXT one, or an SSL one without a client
// certificate (Kafka's KafkaPrincipal.ANONYMOUS).
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// PrincipalMapper turns a certificate subject, in RFC 2253 form, into a
// principal name by ssl.principal.mapping.rules, as Kafka's
// SslPrincipalMapper: the first rule that applies gives the name; a
// subject no rule applies to is refused.
type PrincipalMapper struct {
	rules []mappingRule
}

// mappingRule is one rule: DEFAULT (the subject itself), or
// RULE:pattern/replacement/ with an optional L or U that lower- or
// upper-cases the result. A RULE applies when its pattern matches the
// whole subject; every match of the pattern in the subject is then
// replaced by replacement, as Java's String.replaceAll ($n is the n-th
// group, \x is x).
type mappingRule struct {
	isDefault bool
	// source is the rule as written, for errors.
	source string
	// whole is the pattern anchored at both ends; pattern is as written.
	whole, pattern *regexp.Regexp
	replacement    string
	lower, upper   bool
}

// The grammar of ssl.principal.mapping.rules, Kafka's RULE_PATTERN:
// splitRule finds each comma-separated rule (a comma may sit inside a
// pattern), parseRule reads one.
var (
	rulePattern = `(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)`
	splitRule   = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(?:,\s*|$)`)
	parseRule   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules. Empty
// rules (",,") are skipped; an empty value is DEFAULT.
func ParsePrincipalMappingRules(value string) (*PrincipalMapper, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		value = "DEFAULT"
	}
	m := &PrincipalMapper{}
	for _, split := range splitRule.FindAllStringSubmatch(value, -1) {
		rule := split[1]
		if rule == "" {
			continue
		}
		g := parseRule.FindStringSubmatchIndex(rule)
		if g == nil || g[1] != len(rule) {
			end := 0
			if g != nil {
				end = g[1]
			}
			return nil, fmt.Errorf("invalid rule %q: unmatched %q (want RULE:pattern/replacement/, RULE:pattern/replacement/L or /U, or DEFAULT)", rule, rule[end:])
		}
		if g[2] >= 0 {
			m.rules = append(m.rules, mappingRule{isDefault: true, source: rule})
			continue
		}
		if g[4] < 0 {
			return nil, fmt.Errorf("invalid rule %q (want RULE:pattern/replacement/[LU] or DEFAULT)", rule)
		}
		pattern, replacement, flag := rule[g[4]:g[5]], rule[g[6]:g[7]], rule[g[8]:g[9]]
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("rule %q: pattern %q: %w", rule, pattern, err)
		}
		m.rules = append(m.rules, mappingRule{
			source: rule, pattern: re, whole: regexp.MustCompile(`^(?:` + pattern + `)$`),
			replacement: replacement, lower: flag == "L", upper: flag == "U",
		})
	}
	return m, nil
}

// Name maps a subject DN to a principal name.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.whole.MatchString(dn) {
			continue
		}
		var out strings.Builder
		last := 0
		for _, match := range r.pattern.FindAllStringSubmatchIndex(dn, -1) {
			out.WriteString(dn[last:match[0]])
			out.WriteString(javaReplacement(r.replacement, dn, match))
			last = match[1]
		}
		out.WriteString(dn[last:])
		name := out.String()
		switch {
		case r.lower:
			name = strings.ToLower(name)
		case r.upper:
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	rules := make([]string, len(m.rules))
	for i, r := range m.rules {
		rules[i] = r.source
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule applies to %q (rules: %s)", dn, strings.Join(rules, ", "))
}

// javaReplacement expands a java.util.regex replacement for one match:
// $n is group n (taking as many digits as still name a group; a $n past
// the last group is literal, as Kafka escapes it), \x is x.
func javaReplacement(repl, src string, match []int) string {
	groups := len(match)/2 - 1
	var out strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\' && i+1 < len(repl):
			i++
			out.WriteByte(repl[i])
		case c == '$' && i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' && int(repl[i+1]-'0') <= groups:
			n := int(repl[i+1] - '0')
			i++
			for i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' && n*10+int(repl[i+1]-'0') <= groups {
				n = n*10 + int(repl[i+1]-'0')
				i++
			}
			if match[2*n] >= 0 {
				out.WriteString(src[match[2*n]:match[2*n+1]])
			}
		default:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// attributeKeywords are the attribute types Java's RFC 2253 form names
// (X500Principal.getName()); others are written as their OIDs.
var attributeKeywords = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
	"2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}

// attribute is one AttributeTypeAndValue of a DER Name, its value kept
// raw.
type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is one RDN, a SET OF attributes (encoding/asn1 reads a slice
// type whose name ends in SET as a SET).
type rdnSET []attribute

// SubjectDN writes a DER Name (a certificate's RawSubject) in RFC 2253
// form exactly as Java's X500Principal.getName() does, which is what
// Kafka's principals carry: the last RDN first, multi-valued RDNs joined
// by '+', known types by keyword, others as OID=#hex of the DER value,
// and ,=+<>#;"\ and leading or trailing spaces escaped by '\'.
func SubjectDN(rawSubject []byte) (string, error) {
	var rdns []rdnSET
	rest, err := asn1.Unmarshal(rawSubject, &rdns)
	if err != nil {
		return "", fmt.Errorf("parse certificate subject: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("parse certificate subject: trailing data")
	}
	var out strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			out.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				out.WriteByte('+')
			}
			oid := a.Type.String()
			keyword, known := attributeKeywords[oid]
			value, isString := derString(a.Value)
			if !known {
				keyword = oid
			}
			out.WriteString(keyword)
			out.WriteByte('=')
			if !known || !isString {
				out.WriteByte('#')
				out.WriteString(hex.EncodeToString(a.Value.FullBytes))
				continue
			}
			out.WriteString(escapeDNValue(value))
		}
	}
	return out.String(), nil
}

// derString decodes the string types Java writes as text.
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString, asn1.TagUTF8String:
		return string(v.Bytes), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		units := make([]uint16, len(v.Bytes)/2)
		for i := range units {
			units[i] = binary.BigEndian.Uint16(v.Bytes[2*i:])
		}
		return string(utf16.Decode(units)), true
	case 28: // UniversalString, UTF-32BE
		if len(v.Bytes)%4 != 0 {
			return "", false
		}
		var s strings.Builder
		for i := 0; i < len(v.Bytes); i += 4 {
			s.WriteRune(rune(binary.BigEndian.Uint32(v.Bytes[i:])))
		}
		return s.String(), true
	}
	return "", false
}

// escapeDNValue escapes an attribute value as Java's RFC 2253 form does.
func escapeDNValue(v string) string {
	const escapees = `,=+<>#;"\`
	var b strings.Builder
	for _, r := range v {
		if strings.ContainsRune(escapees, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	s := b.String()
	lead := len(s) - len(strings.TrimLeft(s, " \r"))
	trail := len(s) - len(strings.TrimRight(s, " \r"))
	if lead == len(s) {
		trail = 0
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if i < lead || i >= len(s)-trail {
			out.WriteByte('\\')
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// PrincipalOf returns the principal of a verified client certificate
// chain's leaf, mapped by the listener's rules; no certificate is
// Anonymous.
func PrincipalOf(mapper *PrincipalMapper, rawSubject []byte) (Principal, error) {
	if rawSubject == nil {
		return Anonymous, nil
	}
	dn, err := SubjectDN(rawSubject)
	if err != nil {
		return Principal{}, err
	}
	name, err := mapper.Name(dn)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Type: "User", Name: name}, nil
}
