package coord

import (
	"maps"
	"testing"
)

// TestApplyConfigAlterations checks every op, in order, with and without
// replace, and that the input is not changed.
func TestApplyConfigAlterations(t *testing.T) {
	set := func(k, v string) ConfigAlteration { return ConfigAlteration{Op: ConfigSet, Key: k, Value: v} }
	op := func(o ConfigOp, k, v string) ConfigAlteration { return ConfigAlteration{Op: o, Key: k, Value: v} }
	stored := map[string]string{"a": "1", "list": "x,y"}
	tests := []struct {
		name    string
		replace bool
		alts    []ConfigAlteration
		want    map[string]string
	}{
		{"nothing", false, nil, map[string]string{"a": "1", "list": "x,y"}},
		{"replace with nothing", true, nil, map[string]string{}},
		{"set a new key and an old one", false, []ConfigAlteration{set("b", "2"), set("a", "3")}, map[string]string{"a": "3", "b": "2", "list": "x,y"}},
		{"replace with one key", true, []ConfigAlteration{set("b", "2")}, map[string]string{"b": "2"}},
		{"delete a key and a missing one", false, []ConfigAlteration{op(ConfigDelete, "a", ""), op(ConfigDelete, "zzz", "")}, map[string]string{"list": "x,y"}},
		{"append new items only", false, []ConfigAlteration{op(ConfigAppend, "list", "y, z")}, map[string]string{"a": "1", "list": "x,y,z"}},
		{"append to a missing list", false, []ConfigAlteration{op(ConfigAppend, "new", "p,q")}, map[string]string{"a": "1", "list": "x,y", "new": "p,q"}},
		{"subtract some items", false, []ConfigAlteration{op(ConfigSubtract, "list", "x,w")}, map[string]string{"a": "1", "list": "y"}},
		{"subtract every item removes the key", false, []ConfigAlteration{op(ConfigSubtract, "list", "y,x")}, map[string]string{"a": "1"}},
		{"in order: set then delete", false, []ConfigAlteration{set("b", "2"), op(ConfigDelete, "b", "")}, map[string]string{"a": "1", "list": "x,y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(stored)
			got := ApplyConfigAlterations(stored, tt.replace, tt.alts)
			if !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if !maps.Equal(stored, before) {
				t.Errorf("the input changed to %v", stored)
			}
		})
	}
}

// TestValidateConfigAlterations: entities are <default> or a broker id;
// alterations need a key and a known op.
func TestValidateConfigAlterations(t *testing.T) {
	good := []ConfigAlteration{{Op: ConfigSet, Key: "k", Value: "v"}, {Op: ConfigSubtract, Key: "l", Value: "x"}}
	for _, entity := range []string{DefaultBrokerEntity, "0", "1", "2147483647"} {
		if err := ValidateConfigAlterations(entity, good); err != nil {
			t.Errorf("entity %q: got %v, want nil", entity, err)
		}
	}
	for _, entity := range []string{"", "-1", "01", "+1", "one", "<Default>", "2147483648"} {
		if err := ValidateConfigAlterations(entity, good); err == nil {
			t.Errorf("entity %q: got nil, want an error", entity)
		}
	}
	for _, bad := range []ConfigAlteration{{Op: ConfigSet}, {Op: 4, Key: "k"}, {Op: -1, Key: "k"}} {
		if err := ValidateConfigAlterations("1", []ConfigAlteration{bad}); err == nil {
			t.Errorf("alteration %+v: got nil, want an error", bad)
		}
	}
}

// TestConfigStateSameContent: Versions do not count, nor empty topic
// entries; every config does.
func TestConfigStateSameContent(t *testing.T) {
	base := func() *ConfigState {
		s := NewConfigState()
		s.Version = 5
		s.Brokers[DefaultBrokerEntity] = map[string]string{"r": "1"}
		s.Topics["t"] = map[string]string{"retention.ms": "1"}
		s.Topics["empty"] = map[string]string{}
		return s
	}
	other := base()
	other.Version = 9
	delete(other.Topics, "empty")
	if !base().SameContent(other) || !other.SameContent(base()) {
		t.Errorf("states differing in Version and an empty topic entry: not the same, want the same")
	}
	for name, change := range map[string]func(s *ConfigState){
		"a broker value":   func(s *ConfigState) { s.Brokers[DefaultBrokerEntity]["r"] = "2" },
		"a broker entity":  func(s *ConfigState) { s.Brokers["1"] = map[string]string{"r": "1"} },
		"a topic value":    func(s *ConfigState) { s.Topics["t"]["retention.ms"] = "2" },
		"a topic config":   func(s *ConfigState) { s.Topics["u"] = map[string]string{"x": "y"} },
		"a topic removed":  func(s *ConfigState) { delete(s.Topics, "t") },
		"a broker removed": func(s *ConfigState) { delete(s.Brokers, DefaultBrokerEntity) },
	} {
		s := base()
		change(s)
		if base().SameContent(s) || s.SameContent(base()) {
			t.Errorf("%s changed: the same, want different", name)
		}
	}
	b := base()
	c := b.Clone()
	c.Brokers[DefaultBrokerEntity]["r"] = "changed"
	c.Topics["t"]["retention.ms"] = "changed"
	if b.Brokers[DefaultBrokerEntity]["r"] != "1" || b.Topics["t"]["retention.ms"] != "1" {
		t.Errorf("a change to a Clone changed the original: %v %v", b.Brokers, b.Topics)
	}
}
