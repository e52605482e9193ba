package verify

import (
	"strings"
	"testing"
)

// TestConfigValidateMigrateTo checks that --migrate-to takes another
// backend than --coord, only for a cluster verify starts, and that
// --zk-connect and --etcd-endpoints may name the target's servers.
func TestConfigValidateMigrateTo(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string // a flag the error names; empty: valid
	}{
		{"zk to etcd", func(c *Config) { c.Coord, c.MigrateTo = "zk", "etcd" }, ""},
		{"raft to zk", func(c *Config) { c.Coord, c.MigrateTo = "raft", "zk" }, ""},
		{"same backend", func(c *Config) { c.Coord, c.MigrateTo = "etcd", "etcd" }, "--migrate-to"},
		{"unknown backend", func(c *Config) { c.MigrateTo = "consul" }, "--migrate-to"},
		{"with bootstrap", func(c *Config) { c.Bootstrap, c.Faults, c.MigrateTo = "127.0.0.1:9092", nil, "zk" }, "--migrate-to"},
		{"zk-connect of the target", func(c *Config) { c.Coord, c.MigrateTo, c.ZKConnect = "etcd", "zk", "127.0.0.1:2181" }, ""},
		{"etcd-endpoints of the target", func(c *Config) {
			c.Coord, c.MigrateTo, c.EtcdEndpoints = "raft", "etcd", "http://127.0.0.1:2379"
		}, ""},
		{"zk-connect of neither", func(c *Config) { c.Coord, c.MigrateTo, c.ZKConnect = "raft", "etcd", "127.0.0.1:2181" }, "--zk-connect"},
		{"etcd-endpoints of neither", func(c *Config) {
			c.Coord, c.MigrateTo, c.EtcdEndpoints = "zk", "raft", "http://127.0.0.1:2379"
		}, "--etcd-endpoints"},
	}
	for _, tc := range cases {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
