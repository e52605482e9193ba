package config

import (
	"regexp"
	"strings"
)

// keyDoc documents one broker property for its users. A property is
// either explained here (section, allowed and meaning) or where the
// feature it sets up is (see).
type keyDoc struct {
	// section is the heading of docs/configuration.md whose table lists
	// the property.
	section string
	// allowed is the values the property may take, as text ("1 ..
	// 2147483647", "true, false").
	allowed string
	// meaning is what the property does, one line of Markdown.
	meaning string
	// see is a Markdown link to the part of the docs that explains the
	// property with its feature, for properties without a section.
	see string
}

// The parts of the docs that explain properties with their feature,
// relative to docs/.
const (
	seeListenersTLS  = "[Listeners and TLS](security.md#listeners-and-tls)"
	seeSASL          = "[SASL](security.md#sasl)"
	seeOAuthBearer   = "[OAUTHBEARER](security.md#oauthbearer)"
	seeAuthorization = "[Authorization](security.md#authorization)"
	seeCoordSecurity = "[Securing the coordination backend](security.md#securing-the-coordination-backend)"
	seeLimits        = "[Limits and hostile clients](operations.md#limits-and-hostile-clients)"
	seeBackends      = "[Coordination backends](backends.md)"
)

// documented returns k with its documentation.
func (k configKey) documented(doc keyDoc) configKey {
	k.doc = doc
	return k
}

// PropertyDoc is the documentation of one broker property, as
// docs/configuration.md and `tripod serve --help-config` show it.
type PropertyDoc struct {
	// Name is the property's Kafka name.
	Name string
	// Section is the heading of docs/configuration.md that lists it with
	// its default, Allowed and Meaning; empty when See explains it.
	Section string
	// Default is the property's value in DefaultConfig.
	Default string
	// Allowed is the values it may take, as text.
	Allowed string
	// Meaning is what it does, one line of Markdown.
	Meaning string
	// See is a Markdown link, relative to docs/, to the doc that
	// explains the property with its feature.
	See string
	// Dynamic reports whether IncrementalAlterConfigs changes it on a
	// running broker (without a restart).
	Dynamic bool
}

// PropertyDocs documents every property Set accepts, sorted by name.
func PropertyDocs() []PropertyDoc {
	defaults := DefaultConfig()
	var out []PropertyDoc
	for _, name := range BrokerKeys() {
		k := brokerKeys[name]
		out = append(out, PropertyDoc{
			Name:    name,
			Section: k.doc.section,
			Default: k.get(defaults),
			Allowed: k.doc.allowed,
			Meaning: k.doc.meaning,
			See:     k.doc.see,
			Dynamic: IsDynamicBrokerKey(name),
		})
	}
	return out
}

// markdownLink matches a Markdown link, [text](target).
var markdownLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)]*)\)`)

// plainText is Markdown text of a property's documentation as plain
// text: code spans lose their backticks and a link [text](target)
// becomes "text (docs/target)".
func plainText(markdown string) string {
	s := markdownLink.ReplaceAllString(markdown, "$1 (docs/$2)")
	return strings.ReplaceAll(s, "`", "")
}

// Documentation is the one-line documentation of a property, plain text:
// its meaning and allowed values, or where the docs explain it.
func (d PropertyDoc) Documentation() string {
	if d.Meaning == "" {
		return plainText("explained in " + d.See)
	}
	text := d.Meaning
	if d.Allowed != "" {
		text += "; allowed: " + d.Allowed
	}
	return plainText(text)
}

// BrokerKeyDocumentation is the documentation DescribeConfigs answers
// for broker property name, or false for a name that is not one.
func BrokerKeyDocumentation(name string) (string, bool) {
	k, ok := brokerKeys[name]
	if !ok {
		return "", false
	}
	return PropertyDoc{Allowed: k.doc.allowed, Meaning: k.doc.meaning, See: k.doc.see}.Documentation(), true
}
