package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// updateDocs rewrites docs/configuration.md's property tables from
// brokerKeys instead of failing on a difference.
var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md's property tables from the broker's property table")

// The markers around a generated table of docs/configuration.md: the
// opening one names the section whose properties it lists, or seeMarker
// for the properties explained with their feature.
const (
	docMarkerOpen  = "<!-- properties: "
	docMarkerClose = " -->"
	docMarkerEnd   = "<!-- end properties -->"
	seeMarker      = "explained elsewhere"
)

// TestConfigurationDocMatchesKeys fails when docs/configuration.md's
// property tables differ from what the broker's property table
// generates; go test ./broker/config -run TestConfigurationDoc -update rewrites
// them, leaving the hand-written prose around them alone.
func TestConfigurationDocMatchesKeys(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, sections, err := generateConfigurationDoc(string(old), PropertyDocs())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range PropertyDocs() {
		switch {
		case p.Meaning == "" && p.See == "":
			t.Errorf("%s: got no meaning and no link, want one of them", p.Name)
		case p.Meaning != "" && !slices.Contains(sections, p.Section):
			t.Errorf("%s: got section %q, want one of the doc's marked sections %q", p.Name, p.Section, sections)
		}
	}
	if got == string(old) {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/configuration.md: got tables that differ from the broker's property table, want them equal; run go test ./broker/config -run TestConfigurationDoc -update")
}

// generateConfigurationDoc returns doc with the table between each pair
// of markers generated from props, and the sections it marks.
func generateConfigurationDoc(doc string, props []PropertyDoc) (string, []string, error) {
	var b strings.Builder
	var sections []string
	rest := doc
	for {
		i := strings.Index(rest, docMarkerOpen)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), sections, nil
		}
		j := strings.Index(rest[i:], docMarkerClose)
		k := strings.Index(rest[i:], docMarkerEnd)
		if j < 0 || k < j {
			return "", nil, fmt.Errorf("docs/configuration.md: a %q without %q after it", docMarkerOpen, docMarkerEnd)
		}
		section := rest[i+len(docMarkerOpen) : i+j]
		sections = append(sections, section)
		b.WriteString(rest[:i+j+len(docMarkerClose)])
		b.WriteString("\n\n")
		if section == seeMarker {
			b.WriteString(seeTable(props))
		} else {
			b.WriteString(sectionTable(section, props))
		}
		b.WriteString("\n")
		b.WriteString(docMarkerEnd)
		rest = rest[i+k+len(docMarkerEnd):]
	}
}

// sectionTable is the table of section's properties.
func sectionTable(section string, props []PropertyDoc) string {
	var b strings.Builder
	b.WriteString("| property | default | range | dynamic | meaning |\n|---|---|---|---|---|\n")
	for _, p := range props {
		if p.Section != section || p.Meaning == "" {
			continue
		}
		def := "(empty)"
		if p.Default != "" {
			def = "`" + p.Default + "`"
		}
		dynamic := "no"
		if p.Dynamic {
			dynamic = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Name, def, p.Allowed, dynamic, p.Meaning)
	}
	return b.String()
}

// seeTable is the table of the properties explained with their feature,
// one row per part of the docs.
func seeTable(props []PropertyDoc) string {
	byLink := map[string][]string{}
	for _, p := range props {
		if p.Meaning == "" && p.See != "" {
			byLink[p.See] = append(byLink[p.See], "`"+p.Name+"`")
		}
	}
	var b strings.Builder
	b.WriteString("| property | explained in |\n|---|---|\n")
	for _, link := range slices.Sorted(func(yield func(string) bool) {
		for l := range byLink {
			if !yield(l) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(byLink[link], ", "), link)
	}
	return b.String()
}
