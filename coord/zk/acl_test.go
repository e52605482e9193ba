package zk_test

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/zk"
)

// The brokers' digest identity of the secured tests.
const (
	brokerUser     = "tripod-broker"
	brokerPassword = "broker-secret"
)

// securedBase is the chroot under which the secured tests' chroots lie:
// the backends create it, and so its parents, with the brokers' ACLs,
// under which only the same credentials may create a znode. The other
// tests, unauthenticated, use other chroots.
const securedBase = "/tripod-secured"

// secured is the HarnessOption of a backend with zookeeper.set.acl and the
// brokers' digest credentials.
func secured(cfg *coord.Config) {
	cfg.ZKSetACL = true
	cfg.ZKDigestUsername = brokerUser
	cfg.ZKDigestPassword = brokerPassword
}

// TestConformanceSetACL runs the conformance suite on backends that
// authenticate with digest credentials and create every znode with
// Kafka's secure ACLs.
func TestConformanceSetACL(t *testing.T) {
	s := server(t)
	conformance.Run(t, conformance.NewZKHarness(s.Addr()+securedBase, s, 2*time.Second, secured))
}

// authed returns a plain go-zookeeper connection that authenticated with
// digest user:password, as zkCli after "addauth digest" would.
func authed(t *testing.T, addr, user, password string) *gozk.Conn {
	t.Helper()
	conn := raw(t, addr)
	if err := conn.AddAuth("digest", []byte(user+":"+password)); err != nil {
		t.Fatalf("addauth digest %s: %v", user, err)
	}
	return conn
}

// TestSetACLOnlyBrokersWrite: with zookeeper.set.acl, every znode a
// broker creates (registration, controller, epoch, topic, partition state,
// producer id block, SCRAM credentials, producer id key) carries the
// brokers' digest identity with ALL and the world with READ (the
// credentials and the key none), so a
// client without the brokers' credentials, unauthenticated or with other
// digest credentials, reads the metadata but cannot delete /controller,
// set a partition's state, register a broker, or read a SCRAM credential
// or the producer id key;
// and nothing it tried changed anything.
func TestSetACLOnlyBrokersWrite(t *testing.T) {
	s := server(t)
	root := securedBase + chroot()
	cfg := coord.DefaultConfig()
	cfg.Backend = "zk"
	cfg.ZKConnect = s.Addr() + root
	cfg.SessionTimeout = 6 * time.Second
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.LevelFromString(os.Getenv("TRIPOD_TEST_LOG"))})
	secured(&cfg)
	b, err := zk.Open(cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.ZKConnect, err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := ctxFor(t, 30*time.Second)

	_, term := controllerTerm(t, ctx, b, 1)
	state := coord.PartitionState{Topic: "orders", Partition: 0, Leader: 1, ISR: []coord.BrokerID{1}, ControllerEpoch: term.Epoch()}
	topic := coord.Topic{Name: "orders", ID: [16]byte{9}, Assignment: [][]coord.BrokerID{{1}}}
	if err := b.Commit(ctx, term, coord.CreateTopic{Topic: topic, States: []coord.PartitionState{state}}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if _, err := b.AllocateProducerIDs(ctx, 1); err != nil {
		t.Fatalf("allocate producer ids: %v", err)
	}
	if _, err := b.ProducerIDKey(ctx, bytes.Repeat([]byte{7}, coord.ProducerIDKeySize)); err != nil {
		t.Fatalf("producer id key: %v", err)
	}
	cred := coord.ScramCredential{Mechanism: coord.ScramSHA256, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32),
		ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 4096}
	if err := b.SetScramCredential(ctx, "alice", cred); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}

	owner := gozk.DigestACL(gozk.PermAll, brokerUser, brokerPassword)
	public := append(slices.Clone(owner), gozk.WorldACL(gozk.PermRead)...)
	statePath := root + "/brokers/topics/orders/partitions/0/state"
	admin := authed(t, s.Addr(), brokerUser, brokerPassword)
	for p, want := range map[string][]gozk.ACL{
		root:                               public,
		root + "/brokers/ids":              public,
		root + "/brokers/ids/1":            public,
		root + "/controller":               public,
		root + "/controller_epoch":         public,
		root + "/brokers/topics/orders":    public,
		root + "/config/topics/orders":     public,
		statePath:                          public,
		root + "/latest_producer_id_block": public,
		root + "/config/changes":           public,
		root + "/config/users":             owner,
		root + "/config/users/alice":       owner,
		root + "/producer_id_key":          owner,
	} {
		got, _, err := admin.GetACL(p)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ACL of %s: got %v, %v; want %v", p, got, err, want)
		}
	}

	before, beforeStat, err := admin.Get(statePath)
	if err != nil {
		t.Fatalf("get %s: %v", statePath, err)
	}
	for name, conn := range map[string]*gozk.Conn{
		"unauthenticated":         raw(t, s.Addr()),
		"other digest user":       authed(t, s.Addr(), "intruder", "guess"),
		"broker user, wrong pass": authed(t, s.Addr(), brokerUser, "guess"),
	} {
		t.Run(name, func(t *testing.T) {
			if data, _, err := conn.Get(root + "/controller"); err != nil || len(data) == 0 {
				t.Errorf("read /controller: got %q, %v; want the controller (world READ)", data, err)
			}
			if err := conn.Delete(root+"/controller", -1); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("delete /controller: got %v, want %v", err, gozk.ErrNoAuth)
			}
			if _, err := conn.Set(statePath, []byte(`{"leader":-1}`), -1); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("set %s: got %v, want %v", statePath, err, gozk.ErrNoAuth)
			}
			if _, err := conn.Create(root+"/brokers/ids/99", []byte(`{}`), gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("create /brokers/ids/99: got %v, want %v", err, gozk.ErrNoAuth)
			}
			if _, err := conn.Create(root+"/brokers/topics/evil", []byte(`{}`), 0, gozk.WorldACL(gozk.PermAll)); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("create /brokers/topics/evil: got %v, want %v", err, gozk.ErrNoAuth)
			}
			if _, _, err := conn.Get(root + "/config/users/alice"); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("read /config/users/alice: got %v, want %v (SCRAM credentials are not world-readable)", err, gozk.ErrNoAuth)
			}
			if _, _, err := conn.Get(root + "/producer_id_key"); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("read /producer_id_key: got %v, want %v (the producer id key is not world-readable)", err, gozk.ErrNoAuth)
			}
			if _, err := conn.SetACL(root+"/controller", gozk.WorldACL(gozk.PermAll), -1); !errors.Is(err, gozk.ErrNoAuth) {
				t.Errorf("setAcl /controller: got %v, want %v", err, gozk.ErrNoAuth)
			}
		})
	}

	after, afterStat, err := admin.Get(statePath)
	if err != nil || !bytes.Equal(after, before) || afterStat.Version != beforeStat.Version {
		t.Errorf("%s after the refused writes: got %q (version %d), %v; want %q (version %d)", statePath, after, afterStat.Version, err, before, beforeStat.Version)
	}
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if _, ok := md.Topics["evil"]; ok || len(md.Topics) != 1 {
		t.Errorf("topics after the refused writes: got %v, want orders only", md.TopicNames())
	}
	brokers, err := b.Members(ctx)
	if err != nil || len(brokers) != 1 || brokers[0].ID != 1 {
		t.Errorf("brokers after the refused writes: got %v, %v; want broker 1 only", brokers, err)
	}
	if ctrl, err := b.Controller(ctx); err != nil || ctrl.ID != 1 {
		t.Errorf("controller after the refused writes: got %+v, %v; want broker 1", ctrl, err)
	}

	// The brokers themselves still write: a moved leader commits.
	moved := state
	moved.LeaderEpoch = 1
	if err := b.Commit(ctx, term, coord.SetPartition{State: moved, ExpectedEpoch: 0}); err != nil {
		t.Fatalf("set partition as the broker: %v", err)
	}
}

// TestSetACLNeedsCredentials: zookeeper.set.acl without digest
// credentials, or half the credentials, is refused by Open.
func TestSetACLNeedsCredentials(t *testing.T) {
	for name, set := range map[string]func(*coord.Config){
		"set.acl without credentials": func(c *coord.Config) { c.ZKSetACL = true },
		"username without password":   func(c *coord.Config) { c.ZKDigestUsername = "u" },
		"password without username":   func(c *coord.Config) { c.ZKDigestPassword = "p" },
		"colon in username":           func(c *coord.Config) { c.ZKDigestUsername, c.ZKDigestPassword = "a:b", "p" },
	} {
		cfg := coord.DefaultConfig()
		cfg.Backend = "zk"
		cfg.ZKConnect = "127.0.0.1:1"
		set(&cfg)
		if b, err := zk.Open(cfg); err == nil {
			b.Close()
			t.Errorf("%s: Open got nil error, want one naming zookeeper.*", name)
		}
	}
}
