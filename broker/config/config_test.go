package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConfigSetAndValidateNameTheKey sets each kind of bad value and
// checks that the error names the key.
func TestConfigSetAndValidateNameTheKey(t *testing.T) {
	cases := []struct {
		key, value string
		// atSet: Set refuses it; otherwise Validate does.
		atSet bool
	}{
		{"log.segment.bytes", "abc", true},
		{"max.connections", "0", false},
		{"log.open.files.max", "0", false},
		{"log.open.files.max", "many", true},
		{"log.writeback.bytes", "4095", false},
		{"log.writeback.bytes", "2147483648", false},
		{"log.writeback.bytes", "-1", false},
		{"num.replica.fetchers", "0", false},
		{"num.replica.fetchers", "65", false},
		{"max.connections.per.ip", "-1", false},
		{"max.connections.per.ip.overrides", "localhost:3", true},
		{"max.connections.per.ip.overrides", "127.0.0.1:many", true},
		{"log.segment.bytes", "10", false},
		{"socket.request.max.bytes", "-5", false},
		{"socket.request.max.bytes", "99999999999", true},
		{"queued.max.request.bytes", "0", false},
		{"queued.max.request.bytes", "lots", true},
		{"fetch.max.bytes", "1023", false},
		{"num.partitions", "0", false},
		{"auto.create.topics.enable", "yes", true},
		{"log.retention.ms", "-2", false},
		{"log.retention.check.interval.ms", "0", false},
		{"producer.id.expiration.ms", "0", false},
		{"producer.id.expiration.ms", "1d", true},
		{"producer.id.expiration.check.interval.ms", "-1", false},
		{"listeners", "PLAINTEXT://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9094", false},
		{"listeners", "CLIENT://127.0.0.1:9093", false},
		{"listeners", "127.0.0.1", false},
		{"broker.id", "-1", false},
		{"controller.socket.timeout.ms", "50", false},
		{"controller.socket.timeout.ms", "soon", true},
		{"group.consumer.session.timeout.ms", "1000", false},
		{"group.consumer.session.timeout.ms", "61000", false},
		{"group.consumer.min.session.timeout.ms", "0", false},
		{"group.consumer.max.session.timeout.ms", "1000", false},
		{"group.consumer.heartbeat.interval.ms", "4000", false},
		{"group.consumer.min.heartbeat.interval.ms", "0", false},
		{"group.consumer.max.heartbeat.interval.ms", "1000", false},
		{"group.consumer.assignors", "sticky", false},
		{"group.consumer.assignors", "", false},
		{"group.consumer.max.size", "0", false},
		{"group.consumer.migration.policy", "sideways", false},
		{"broker.rack", "az\n1", true},
		{"broker.rack", "az\x001", true},
		{"broker.rack", "az\xff", true},
		{"replica.selector.class", "org.apache.kafka.common.replica.LeaderSelector", true},
		{"replica.selector.class", "RackAwareReplicaSelector", true},
		{"no.such.key", "1", true},
	}
	for _, c := range cases {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			cfg := DefaultConfig()
			err := cfg.Set(c.key, c.value)
			if c.atSet {
				if err == nil || !strings.Contains(err.Error(), c.key) {
					t.Fatalf("Set: got %v, want an error naming %s", err, c.key)
				}
				return
			}
			if err != nil {
				t.Fatalf("Set: %v", err)
			}
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("Validate: got %v, want an error naming %s", err, c.key)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate(): %v", err)
	}
	// Kafka takes any other string as a rack, spaces and all.
	cfg := DefaultConfig()
	if err := cfg.Set("broker.rack", "eu west 1a/zone é"); err != nil || cfg.Rack != "eu west 1a/zone é" {
		t.Fatalf("Set broker.rack: got %v and rack %q, want it taken as given", err, cfg.Rack)
	}
	// replica.selector.class takes Kafka's rack-aware selector, and
	// empty for the leader.
	for _, v := range []string{RackAwareReplicaSelector, ""} {
		if err := cfg.Set("replica.selector.class", v); err != nil || cfg.ReplicaSelectorClass != v {
			t.Fatalf("Set replica.selector.class %q: got %v and %q, want it taken", v, err, cfg.ReplicaSelectorClass)
		}
	}
	err := cfg.Set("replica.selector.class", "Other")
	if err == nil || !strings.Contains(err.Error(), RackAwareReplicaSelector) {
		t.Fatalf("Set replica.selector.class Other: got %v, want an error naming the allowed value", err)
	}
}

// TestParsePropertiesReadsJavaSyntax reads separators, comments,
// continuations and escapes as Java's Properties does.
func TestParsePropertiesReadsJavaSyntax(t *testing.T) {
	in := `# comment
! another comment
broker.id=3
listeners : PLAINTEXT://127.0.0.1:9093
log.dirs /a,\
    /b
  num.partitions   =   4   
message.max.bytes=1\
000
escaped\=key=x\ty
`
	props, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	got := map[string]string{}
	for _, p := range props {
		got[p.Key] = p.Value
	}
	want := map[string]string{
		"broker.id":         "3",
		"listeners":         "PLAINTEXT://127.0.0.1:9093",
		"log.dirs":          "/a,/b",
		"num.partitions":    "4",
		"message.max.bytes": "1000",
		"escaped=key":       "x\ty",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d keys %v, want %d", len(got), got, len(want))
	}
}

// TestPropertiesApplyInFileOrder applies a file that sets the session
// timeout twice, under two names, a hundred times over: the last line
// wins every time, as Java's Properties would have it, and a Kafka key
// tripod does not act on is accepted with ErrNoEffect while an unknown
// key is refused by name.
func TestPropertiesApplyInFileOrder(t *testing.T) {
	in := "zookeeper.session.timeout.ms=9000\netcd.lease.ttl.ms=4000\nnum.network.threads=3\n"
	for range 100 {
		props, err := ParseProperties(strings.NewReader(in))
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		cfg := DefaultConfig()
		var noEffect []string
		for _, p := range props {
			if err := cfg.Set(p.Key, p.Value); errors.Is(err, ErrNoEffect) {
				noEffect = append(noEffect, p.Key)
			} else if err != nil {
				t.Fatalf("line %d %s: %v", p.Line, p.Key, err)
			}
		}
		if cfg.Coord.SessionTimeout != 4*time.Second {
			t.Fatalf("session timeout: got %v, want 4s (the file's last line)", cfg.Coord.SessionTimeout)
		}
		if len(noEffect) != 1 || noEffect[0] != "num.network.threads" {
			t.Fatalf("keys without effect: got %v, want [num.network.threads]", noEffect)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Set("num.netwrok.threads", "3"); err == nil || errors.Is(err, ErrNoEffect) || !strings.Contains(err.Error(), "num.netwrok.threads") {
		t.Fatalf("misspelt key: got %v, want an unknown-property error naming it", err)
	}
}

// TestRaftObserverStatesItsListener: a broker not among raft.voters is
// an observer; its Raft address is not derived from its listener, so
// without raft.listen it is refused naming raft.listen and raft.voters,
// and with it, it is accepted.
func TestRaftObserverStatesItsListener(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BrokerID = 4
	cfg.Listeners = "PLAINTEXT://10.0.0.4:9092"
	cfg.LogDirs = []string{t.TempDir()}
	if err := cfg.Set("raft.voters", "1@10.0.0.1:9192,2@10.0.0.2:9192,3@10.0.0.3:9192"); err != nil {
		t.Fatalf("set raft.voters: %v", err)
	}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "raft.listen") || !strings.Contains(err.Error(), "raft.voters") {
		t.Fatalf("Validate of an observer without raft.listen: got %v, want an error naming raft.listen and raft.voters", err)
	}
	if err := cfg.Set("raft.listen", "10.0.0.4:9192"); err != nil {
		t.Fatalf("set raft.listen: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of an observer with raft.listen: %v", err)
	}
	if cc := cfg.CoordConfig(); cc.RaftListen != "10.0.0.4:9192" || cc.LoneRaftVoter() {
		t.Fatalf("observer's coord config: raft.listen %q, lone %v; want 10.0.0.4:9192, not lone", cc.RaftListen, cc.LoneRaftVoter())
	}
}

// TestCoordConfigIsDerivedFromBrokerSettings checks the coordination
// settings a broker derives (Raft directory and listener, broker id) and
// the properties that set the others.
func TestCoordConfigIsDerivedFromBrokerSettings(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BrokerID = 3
	cfg.Listeners = "PLAINTEXT://127.0.0.1:19092"
	cfg.LogDirs = []string{"/var/lib/tripod"}
	cc := cfg.CoordConfig()
	if cc.Backend != "raft" || cc.BrokerID != 3 || cc.RaftListen != "127.0.0.1:19192" || cc.RaftDir != "/var/lib/tripod/raft" {
		t.Fatalf("derived coord config: got backend %s broker %d raft.listen %s raft dir %s, want raft 3 127.0.0.1:19192 /var/lib/tripod/raft",
			cc.Backend, cc.BrokerID, cc.RaftListen, cc.RaftDir)
	}
	for key, value := range map[string]string{
		"coordination.backend": "etcd", "etcd.endpoints": "http://127.0.0.1:2379, http://127.0.0.1:2380",
		"etcd.lease.ttl.ms": "3000", "unclean.leader.election.enable": "true", "auto.leader.rebalance.enable": "false",
		"leader.imbalance.check.interval.seconds": "7", "default.replication.factor": "3", "controlled.shutdown.enable": "false",
	} {
		if err := cfg.Set(key, value); err != nil {
			t.Fatalf("set %s=%s: %v", key, value, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	cc = cfg.CoordConfig()
	if cc.Backend != "etcd" || len(cc.EtcdEndpoints) != 2 || cc.SessionTimeout != 3*time.Second {
		t.Fatalf("etcd settings: got %s %v %v, want etcd, 2 endpoints, 3s", cc.Backend, cc.EtcdEndpoints, cc.SessionTimeout)
	}
	if !cfg.UncleanLeaderElection || cfg.AutoLeaderRebalance || cfg.LeaderImbalanceCheckInterval != 7*time.Second ||
		cfg.DefaultReplicationFactor != 3 || cfg.ControlledShutdown {
		t.Fatalf("controller settings not applied: %+v", cfg)
	}
	if got, _ := cfg.Get("raft.listen"); got != "127.0.0.1:19192" {
		t.Fatalf("raft.listen: got %q, want the derived 127.0.0.1:19192", got)
	}
}
