package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/etcd"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/testca"
)

// The users of the secured etcd: root administers it, tripod is the
// brokers' user, with read and write on securePrefix only.
const (
	rootPassword   = "root-secret"
	tripodUser     = "tripod"
	tripodPassword = "tripod-secret"
	// securePrefix holds the conformance clusters' prefixes and the
	// tests' own.
	securePrefix = "/tripod-conformance/"
)

// securedEtcd is an embedded etcd serving TLS with auth enabled.
type securedEtcd struct {
	server *etcdserver.Server
	ca     *testca.CA
}

// startSecuredEtcd starts an etcd whose client URL is https:// with a
// certificate of a fresh CA, requiring client certificates of that CA
// when clientCertAuth, and enables etcd's auth: users root and tripod,
// role tripod granting readwrite on securePrefix.
func startSecuredEtcd(t *testing.T, clientCertAuth bool) *securedEtcd {
	t.Helper()
	dir := t.TempDir()
	ca := testca.New(t, "etcd test CA")
	certFile, keyFile := ca.WriteCertAndKey(t, dir, "server", "etcd")
	opts := etcdserver.Options{CertFile: certFile, KeyFile: keyFile}
	if clientCertAuth {
		opts.TrustedCAFile, opts.ClientCertAuth = ca.WriteTruststore(t, dir, "ca.pem"), true
	}
	server, err := etcdserver.StartWith(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("start etcd with TLS: %v", err)
	}
	t.Cleanup(func() { server.Close() })
	e := &securedEtcd{server: server, ca: ca}

	// Auth is still off: the setup needs only TLS (a certificate named
	// root, which with client certificate auth is also root's identity).
	admin := e.client(t, ca.ClientConfig(t, "root"), "", "")
	ctx := ctxFor(t, 30*time.Second)
	steps := []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "tripod"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "tripod", securePrefix, clientv3.GetPrefixRangeEnd(securePrefix),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, tripodUser, tripodPassword); return err },
		func() error { _, err := admin.UserGrantRole(ctx, tripodUser, "tripod"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup step %d: %v", i+1, err)
		}
	}
	return e
}

// client returns a clientv3 client of e with tlsCfg and, when user is not
// empty, etcd's password auth; closed when t ends.
func (e *securedEtcd) client(t *testing.T, tlsCfg *tls.Config, user, password string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: e.server.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: tlsCfg, Username: user, Password: password})
	if err != nil {
		t.Fatalf("etcd client (user %q): %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// config returns a backend Config for e under prefix with tlsCfg and
// password auth when user is not empty.
func (e *securedEtcd) config(t *testing.T, prefix string, tlsCfg *tls.Config, user, password string) coord.Config {
	cfg := coord.DefaultConfig()
	cfg.Backend = "etcd"
	cfg.SessionTimeout = sessionTimeout
	cfg.EtcdEndpoints = e.server.Endpoints()
	cfg.EtcdPrefix = prefix
	cfg.EtcdTLS = tlsCfg
	cfg.EtcdUsername, cfg.EtcdPassword = user, password
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn})
	return cfg
}

// TestConformanceTLSPasswordAuth runs the conformance suite against an
// etcd serving TLS with auth enabled, the backends verifying its
// certificate and authenticating as tripod with a password.
func TestConformanceTLSPasswordAuth(t *testing.T) {
	e := startSecuredEtcd(t, false)
	roots := e.ca.ClientConfig(t, "")
	conformance.Run(t, conformance.NewEtcdHarness(e.server.Endpoints(), e.server, sessionTimeout, func(cfg *coord.Config) {
		cfg.EtcdTLS = roots
		cfg.EtcdUsername, cfg.EtcdPassword = tripodUser, tripodPassword
	}))
}

// TestConformanceClientCertAuth runs the conformance suite against an etcd
// requiring client certificates with auth enabled: the backends present a
// certificate named tripod, which etcd takes as the user tripod.
func TestConformanceClientCertAuth(t *testing.T) {
	e := startSecuredEtcd(t, true)
	mtls := e.ca.ClientConfig(t, tripodUser)
	conformance.Run(t, conformance.NewEtcdHarness(e.server.Endpoints(), e.server, sessionTimeout, func(cfg *coord.Config) {
		cfg.EtcdTLS = mtls
	}))
}

// TestPasswordAuthRefusesOthers: on a TLS etcd with auth enabled, the
// tripod user registers and commits; a client without credentials, or
// with a wrong password, or a plaintext one, or one that does not trust
// etcd's CA, writes nothing.
func TestPasswordAuthRefusesOthers(t *testing.T) {
	e := startSecuredEtcd(t, false)
	prefix := securePrefix + "password-auth"
	roots := e.ca.ClientConfig(t, "")
	b, err := etcd.Open(e.config(t, prefix, roots, tripodUser, tripodPassword))
	if err != nil {
		t.Fatalf("open as %s: %v", tripodUser, err)
	}
	t.Cleanup(func() { b.Close() })
	_, term := elect(t, b, 1)
	if err := b.Commit(ctxFor(t, 10*time.Second), term, topicOp("orders", 1, term.Epoch())); err != nil {
		t.Fatalf("commit as %s: %v", tripodUser, err)
	}

	anonymous := e.client(t, roots, "", "")
	if _, err := anonymous.Put(ctxFor(t, 10*time.Second), prefix+"/brokers/ids/99", "{}"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("put without credentials: got %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	if _, err := anonymous.Delete(ctxFor(t, 10*time.Second), prefix+"/controller"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("delete /controller without credentials: got %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	if _, err := anonymous.Get(ctxFor(t, 10*time.Second), prefix+"/controller"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("get /controller without credentials: got %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	unauthenticated, err := etcd.Open(e.config(t, prefix, roots, "", ""))
	if err != nil {
		t.Fatalf("open without credentials: %v", err)
	}
	t.Cleanup(func() { unauthenticated.Close() })
	if _, err := unauthenticated.Register(ctxFor(t, 5*time.Second), broker(99)); err == nil {
		t.Errorf("register without credentials: got nil error, want a refusal")
	}

	if b, err := etcd.Open(e.config(t, prefix, roots, tripodUser, "guess")); !errors.Is(err, rpctypes.ErrAuthFailed) {
		if err == nil {
			b.Close()
		}
		t.Errorf("open with a wrong password: got %v, want %v", err, rpctypes.ErrAuthFailed)
	}

	plain := e.config(t, prefix, nil, tripodUser, tripodPassword)
	plain.EtcdEndpoints = []string{"http://" + stripScheme(e.server.Endpoints()[0])}
	if b, err := etcd.Open(plain); err == nil {
		b.Close()
		t.Errorf("open over plaintext: got nil error, want a failure (etcd serves TLS only)")
	}
	other := testca.New(t, "another CA").ClientConfig(t, "")
	if b, err := etcd.Open(e.config(t, prefix, other, tripodUser, tripodPassword)); err == nil {
		b.Close()
		t.Errorf("open trusting another CA: got nil error, want a certificate verification failure")
	}

	admin := e.client(t, roots, "root", rootPassword)
	assertOnlyBroker1(t, admin, prefix)
}

// TestClientCertAuthRefusesOthers: on an etcd requiring client
// certificates, a backend presenting the tripod certificate registers and
// commits; one without a certificate, or with a certificate of another
// CA, is refused at the handshake and writes nothing.
func TestClientCertAuthRefusesOthers(t *testing.T) {
	e := startSecuredEtcd(t, true)
	prefix := securePrefix + "cert-auth"
	b, err := etcd.Open(e.config(t, prefix, e.ca.ClientConfig(t, tripodUser), "", ""))
	if err != nil {
		t.Fatalf("open with a tripod certificate: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	_, term := elect(t, b, 1)
	if err := b.Commit(ctxFor(t, 10*time.Second), term, topicOp("orders", 1, term.Epoch())); err != nil {
		t.Fatalf("commit with a tripod certificate: %v", err)
	}

	noCert := e.ca.ClientConfig(t, "")
	otherCert := e.ca.ClientConfig(t, "")
	otherCert.Certificates = testca.New(t, "another CA").ClientConfig(t, tripodUser).Certificates
	for name, tlsCfg := range map[string]*tls.Config{"no client certificate": noCert, "certificate of another CA": otherCert} {
		t.Run(name, func(t *testing.T) {
			// Without a password to send, Open does not wait for etcd.
			rogue, err := etcd.Open(e.config(t, prefix, tlsCfg, "", ""))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer rogue.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := rogue.Register(ctx, broker(99)); err == nil {
				t.Errorf("register: got nil error, want the handshake refused")
			}
			if _, err := rogue.Client().Put(ctx, prefix+"/controller", `{"version":1,"brokerid":99}`); err == nil {
				t.Errorf("put /controller: got nil error, want the handshake refused")
			}
			// With a password the client authenticates in Open, which
			// fails the same way.
			if b, err := etcd.Open(e.config(t, prefix, tlsCfg, tripodUser, tripodPassword)); err == nil {
				b.Close()
				t.Errorf("open with a password: got nil error, want the handshake refused")
			}
		})
	}
	admin := e.client(t, e.ca.ClientConfig(t, "root"), "", "")
	assertOnlyBroker1(t, admin, prefix)
}

// assertOnlyBroker1 checks through admin that broker 1 alone is
// registered under prefix and controls it, with the topic orders only.
func assertOnlyBroker1(t *testing.T, admin *clientv3.Client, prefix string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	brokers, err := admin.Get(ctx, prefix+"/brokers/ids/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(brokers.Kvs) != 1 || string(brokers.Kvs[0].Key) != prefix+"/brokers/ids/1" {
		t.Errorf("registrations under %s: got %v, %v; want broker 1 only", prefix, brokers, err)
	}
	ctrl, err := admin.Get(ctx, prefix+"/controller")
	if err != nil || len(ctrl.Kvs) != 1 || string(ctrl.Kvs[0].Value) != `{"version":1,"brokerid":1}` {
		t.Errorf("controller under %s: got %v, %v; want broker 1", prefix, ctrl, err)
	}
	topics, err := admin.Get(ctx, prefix+"/topics/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(topics.Kvs) != 1 {
		t.Errorf("topics under %s: got %v, %v; want orders only", prefix, topics, err)
	}
}

// stripScheme turns https://host:port into host:port.
func stripScheme(endpoint string) string {
	for i := 0; i+3 <= len(endpoint); i++ {
		if endpoint[i:i+3] == "://" {
			return endpoint[i+3:]
		}
	}
	return endpoint
}
