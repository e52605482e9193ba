package broker

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	pem    []byte
	serial int64
}

// newTestCA makes a self-signed CA named cn.
func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// issue makes a certificate for subject, valid for 127.0.0.1 and
// localhost as a server and as a client, and returns its PEM and its
// key's PEM (PKCS#8).
func (ca *testCA) issue(t testing.TB, subject pkix.Name) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("certificate: %v", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
}

// keystoreFile writes a fresh certificate for subject with its key into
// dir/name (the KIP-651 PEM keystore: key, then chain) and returns the
// path.
func (ca *testCA) keystoreFile(t testing.TB, dir, name string, subject pkix.Name) string {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, subject)
	path := filepath.Join(dir, name)
	writeFile(t, path, append(keyPEM, certPEM...))
	return path
}

// truststoreFile writes the CA's certificate into dir/name.
func (ca *testCA) truststoreFile(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	writeFile(t, path, ca.pem)
	return path
}

// pool is a certificate pool of the CA.
func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// clientCert is a client certificate for subject.
func (ca *testCA) clientCert(t testing.TB, subject pkix.Name) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, subject)
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("client key pair: %v", err)
	}
	return c
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// sslConfig is testConfig with a PLAINTEXT and an SSL listener on free
// ports, the SSL one presenting a certificate of ca for CN=broker.
func sslConfig(t testing.TB, ca *testCA) config.Config {
	t.Helper()
	cfg := testConfig(t)
	dir := t.TempDir()
	set(t, &cfg, map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.location":   ca.keystoreFile(t, dir, "broker.pem", pkix.Name{CommonName: "broker"}),
		"ssl.truststore.location": ca.truststoreFile(t, dir, "ca.pem"),
	})
	return cfg
}

// set sets properties on cfg, failing the test on error.
func set(t testing.TB, cfg *config.Config, props map[string]string) {
	t.Helper()
	for k, v := range props {
		if err := cfg.Set(k, v); err != nil {
			t.Fatalf("set %s=%s: %v", k, v, err)
		}
	}
}

// tlsClient returns a franz-go client of b's SSL listener trusting ca,
// presenting certs, closed when the test ends.
func tlsClient(t *testing.T, b *Broker, ca *testCA, certs []tls.Certificate, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.pool(), Certificates: certs, MinVersion: tls.VersionTLS12}
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr("SSL").String()), kgo.DialTLSConfig(cfg)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new TLS client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestProduceConsumeOverTLS serves a PLAINTEXT and an SSL listener on one
// broker: franz-go over TLS creates a topic, produces and consumes, and
// the records produced over TLS are read over PLAINTEXT too.
func TestProduceConsumeOverTLS(t *testing.T) {
	ca := newTestCA(t, "tripod test CA")
	b := startBroker(t, sslConfig(t, ca))
	ctx := testContext(t, time.Minute)
	const topic = "over-tls"
	adm := kadm.NewClient(tlsClient(t, b, ca, nil))
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic over TLS: %v %v", err, resp.Err)
	}
	producer := tlsClient(t, b, ca, nil, kgo.DefaultProduceTopic(topic))
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("secret-%d", i))
		if err := producer.ProduceSync(ctx, kgo.StringRecord(want[i])).FirstErr(); err != nil {
			t.Fatalf("produce over TLS: %v", err)
		}
	}
	for _, cl := range []*kgo.Client{
		tlsClient(t, b, ca, nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
		newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
	} {
		var got []string
		for len(got) < len(want) {
			fetches := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consume: got %d records %v, want %d", len(got), got, len(want))
			}
			fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("consumed %v, want %v", got, want)
		}
	}
}

// syncBuffer is a log sink that tests read while the broker writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startLoggedBroker starts a broker whose debug log goes to the returned
// buffer (and, with TRIPOD_TEST_LOG, to stderr).
func startLoggedBroker(t *testing.T, cfg config.Config) (*Broker, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	var out = logs
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: out})
	b, err := New(cfg, logger)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
		if os.Getenv("TRIPOD_TEST_LOG") != "" {
			os.Stderr.WriteString(logs.String())
		}
	})
	waitServing(t, b)
	return b, logs
}

// TestMutualTLSGivesTheCertificatesPrincipal requires client
// certificates on the SSL listener: a client without one cannot even ask
// for metadata; one with a certificate is served, and its connection's
// principal is "User:" and the certificate's subject as Kafka prints it
// (RFC 2253, most specific first), or what ssl.principal.mapping.rules
// make of it on a listener that sets them.
func TestMutualTLSGivesTheCertificatesPrincipal(t *testing.T) {
	ca := newTestCA(t, "tripod test CA")
	cfg := sslConfig(t, ca)
	set(t, &cfg, map[string]string{
		"listeners":                                        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MAPPED://127.0.0.1:0",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,SSL:SSL,MAPPED:SSL",
		"ssl.client.auth":                                  "required",
		"listener.name.mapped.ssl.client.auth":             "requested",
		"listener.name.mapped.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/svc-$1/L, DEFAULT",
	})
	b, logs := startLoggedBroker(t, cfg)
	ctx := testContext(t, time.Minute)

	noCert := tlsClient(t, b, ca, nil)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := noCert.SeedBrokers()[0].Request(rctx, kmsg.NewPtrMetadataRequest())
	cancel()
	if err == nil {
		t.Fatalf("Metadata without a client certificate on ssl.client.auth=required: got an answer, want the connection refused")
	}
	waitFor(t, ctx, "the handshake failure in the log", func() bool {
		return strings.Contains(logs.String(), "TLS handshake failed")
	})

	subject := pkix.Name{CommonName: "Admin", OrganizationalUnit: []string{"ops"}, Organization: []string{"Tripod Inc"}}
	withCert := tlsClient(t, b, ca, []tls.Certificate{ca.clientCert(t, subject)})
	if _, err := withCert.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("Metadata with a client certificate: %v", err)
	}
	waitFor(t, ctx, "the connection's principal in the log", func() bool {
		return logged(logs, "connection opened", "listener=SSL", "User:CN=Admin,OU=ops,O=Tripod Inc")
	})

	// On MAPPED a certificate is optional and the rules map it.
	mapped := func(certs []tls.Certificate) {
		cfg := &tls.Config{RootCAs: ca.pool(), Certificates: certs, MinVersion: tls.VersionTLS12}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenerAddr("MAPPED").String()), kgo.DialTLSConfig(cfg))
		if err != nil {
			t.Fatalf("client of MAPPED: %v", err)
		}
		defer cl.Close()
		if _, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("Metadata on MAPPED: %v", err)
		}
	}
	mapped([]tls.Certificate{ca.clientCert(t, subject)})
	mapped(nil)
	for _, want := range []string{"principal=User:svc-admin", "principal=User:ANONYMOUS"} {
		waitFor(t, ctx, want+" on MAPPED in the log", func() bool { return logged(logs, "connection opened", "listener=MAPPED", want) })
	}
}

// logged reports whether one line of logs holds every part.
func logged(logs *syncBuffer, parts ...string) bool {
	for _, line := range strings.Split(logs.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestCertificatesAreReloaded rewrites the SSL listener's keystore with a
// new certificate, then its truststore with a new CA: the next connection
// gets the new certificate, and the broker then accepts only client
// certificates of the new CA.
func TestCertificatesAreReloaded(t *testing.T) {
	ca := newTestCA(t, "first CA")
	cfg := sslConfig(t, ca)
	set(t, &cfg, map[string]string{"ssl.client.auth": "requested"})
	b := startBroker(t, cfg)
	addr := b.ListenerAddr("SSL").String()
	// serverCert connects anew and returns the broker's certificate, once
	// an ApiVersions is answered (TLS 1.3 reports a refused client
	// certificate only then).
	serverCert := func(rootCAs *x509.CertPool, certs []tls.Certificate) (*x509.Certificate, error) {
		var mu sync.Mutex
		var got *x509.Certificate
		cfg := &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12,
			// The certificate is sent even if the broker names other
			// CAs (Go's client would send none).
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if len(certs) == 0 {
					return &tls.Certificate{}, nil
				}
				return &certs[0], nil
			},
			VerifyConnection: func(cs tls.ConnectionState) error {
				mu.Lock()
				defer mu.Unlock()
				got = cs.PeerCertificates[0]
				return nil
			}}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		return got, nil
	}
	first, err := serverCert(ca.pool(), nil)
	if err != nil {
		t.Fatalf("first connection: %v", err)
	}

	keystore, truststore := cfg.SSL.KeystoreLocation, cfg.SSL.TruststoreLocation
	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "broker renewed"})
	writeFile(t, keystore, append(keyPEM, certPEM...))
	second, err := serverCert(ca.pool(), nil)
	if err != nil {
		t.Fatalf("connection after the keystore changed: %v", err)
	}
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 || second.Subject.CommonName != "broker renewed" {
		t.Fatalf("certificate after the keystore changed: got serial %v CN %q, want a new one, CN %q",
			second.SerialNumber, second.Subject.CommonName, "broker renewed")
	}

	// A keystore that does not load keeps the previous certificate.
	writeFile(t, keystore, []byte("not PEM"))
	if kept, err := serverCert(ca.pool(), nil); err != nil || kept.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatalf("connection after a bad keystore: got %v, %v, want the previous certificate", kept, err)
	}

	// A new CA: its client certificates are accepted, the old CA's are
	// not any more.
	next := newTestCA(t, "second CA")
	certPEM, keyPEM = next.issue(t, pkix.Name{CommonName: "broker"})
	writeFile(t, keystore, append(keyPEM, certPEM...))
	writeFile(t, truststore, next.pem)
	if _, err := serverCert(next.pool(), []tls.Certificate{next.clientCert(t, pkix.Name{CommonName: "new client"})}); err != nil {
		t.Fatalf("client of the new CA after the truststore changed: %v", err)
	}
	if _, err := serverCert(next.pool(), []tls.Certificate{ca.clientCert(t, pkix.Name{CommonName: "old client"})}); err == nil {
		t.Fatalf("client of the old CA after the truststore changed: got served, want refused")
	}
}

// TestTLSConfigErrorsNameTheKey starts brokers with bad TLS settings:
// each is refused at start with an error naming the property and, for a
// value out of a set, the values allowed.
func TestTLSConfigErrorsNameTheKey(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	good := ca.keystoreFile(t, dir, "good.pem", pkix.Name{CommonName: "broker"})
	notPEM := filepath.Join(dir, "bad.pem")
	writeFile(t, notPEM, []byte("hello"))
	certOnly := filepath.Join(dir, "cert-only.pem")
	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "broker"})
	writeFile(t, certOnly, certPEM)
	encrypted := filepath.Join(dir, "encrypted.pem")
	block, _ := pem.Decode(keyPEM)
	writeFile(t, encrypted, append(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: block.Bytes}), certPEM...))
	cases := []struct {
		props map[string]string
		// want are substrings of the error.
		want []string
	}{
		{map[string]string{}, []string{"ssl.keystore.location", "listener SSL"}},
		{map[string]string{"ssl.keystore.location": filepath.Join(dir, "missing.pem")}, []string{"ssl.keystore.location", "no such file"}},
		{map[string]string{"ssl.keystore.location": notPEM}, []string{"ssl.keystore.location", "no PEM CERTIFICATE"}},
		{map[string]string{"ssl.keystore.location": certOnly}, []string{"ssl.keystore.location", "no PEM PRIVATE KEY"}},
		{map[string]string{"ssl.keystore.location": encrypted}, []string{"ssl.keystore.location", "encrypted"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.key.password": "secret"}, []string{"ssl.key.password", "not supported"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.keystore.type": "JKS"}, []string{"ssl.keystore.type", "allowed: PEM"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.truststore.location": notPEM}, []string{"ssl.truststore.location", "no PEM CERTIFICATE"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.client.auth": "always"}, []string{"ssl.client.auth", "none, requested or required"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.client.auth": "required"}, []string{"ssl.client.auth", "ssl.truststore.location"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, []string{"ssl.enabled.protocols", "TLSv1.1", "allowed: TLSv1.2, TLSv1.3"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.cipher.suites": "TLS_FANCY"}, []string{"ssl.cipher.suites", "TLS_FANCY", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.cipher.suites": "TLS_RSA_WITH_RC4_128_SHA"}, []string{"ssl.cipher.suites", "insecure"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.principal.mapping.rules": "RULE:x"}, []string{"ssl.principal.mapping.rules", "invalid rule"}},
		{map[string]string{"ssl.keystore.location": good, "ssl.endpoint.identification.algorithm": "dns"}, []string{"ssl.endpoint.identification.algorithm", "https or empty"}},
		{map[string]string{"ssl.keystore.location": good, "listener.name.ssl.ssl.keystore.location": notPEM}, []string{"listener.name.ssl.ssl.keystore.location", "no PEM"}},
		{map[string]string{"ssl.keystore.location": good, "listener.name.client.ssl.client.auth": "required"}, []string{"listener.name.client.ssl.client.auth", "no listener CLIENT"}},
		{map[string]string{"ssl.keystore.location": good, "listener.name.plaintext.ssl.client.auth": "required"}, []string{"listener.name.plaintext.ssl.client.auth", "PLAINTEXT"}},
		{map[string]string{"ssl.keystore.location": good, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SASL_SSL"}, []string{"listener.security.protocol.map", "SASL"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.props), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
			set(t, &cfg, c.props)
			b, err := New(cfg, testLogger(t))
			if err == nil {
				b.Close()
				t.Fatalf("got a broker, want an error naming %v", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("got %v, want it to name %q", err, w)
				}
			}
		})
	}
	cfg := config.DefaultConfig()
	for key, want := range map[string]string{
		"listener.name.ssl.max.connections": "cannot be set per listener",
		"listener.name.SSL.ssl.client.auth": "lower case",
		"security.inter.broker.protocol":    "must be PLAINTEXT, SSL",
	} {
		if err := cfg.Set(key, "x"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), key) {
			t.Errorf("Set %s: got %v, want an error naming the key and %q", key, err, want)
		}
	}
}

// TestInterBrokerListenerOverSSL runs three brokers whose controller
// requests and replication go over an SSL listener with client
// certificates required, while clients use a PLAINTEXT one: a topic of
// replication factor 3 becomes fully in sync and an acks=all produce
// succeeds.
func TestInterBrokerListenerOverSSL(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	dir := t.TempDir()
	truststore := ca.truststoreFile(t, dir, "ca.pem")
	brokers := startRaftClusterWith(t, 3, func(cfg *config.Config) {
		set(t, cfg, map[string]string{
			"listeners":                      "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0",
			"listener.security.protocol.map": "CLIENT:PLAINTEXT,BROKER:SSL",
			"inter.broker.listener.name":     "BROKER",
			"ssl.keystore.location": ca.keystoreFile(t, dir, fmt.Sprintf("broker-%d.pem", cfg.BrokerID),
				pkix.Name{CommonName: fmt.Sprintf("broker-%d", cfg.BrokerID)}),
			"ssl.truststore.location": truststore,
			"ssl.client.auth":         "required",
		})
	})
	ctx := testContext(t, 2*time.Minute)
	for _, b := range brokers {
		if b.interBroker.Name != "BROKER" || b.interBroker.tls == nil {
			t.Fatalf("broker %d: inter-broker listener %s, want BROKER over TLS", b.ID(), b.interBroker.Name)
		}
		if got, want := b.self().Addr(), b.ListenerAddr("BROKER").String(); got != want {
			t.Fatalf("broker %d registers %s, want the BROKER listener %s", b.ID(), got, want)
		}
	}
	const topic = "replicated-over-tls"
	cl := newClient(t, brokers[0], kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	waitFor(t, ctx, "the ISR to hold all three brokers", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		return len(parts) == 1 && len(parts[0].isr) == 3
	})
	for i := range 5 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d", i))).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	// Clients are told the CLIENT listener's ports.
	_, ids, _ := metadataOf(t, brokers[1], topic)
	if len(ids) != 3 {
		t.Fatalf("Metadata on CLIENT: got brokers %v, want 3", ids)
	}
}

// TestInlinePEMFromAPropertiesFile reads the keystore and truststore
// in-line from a server.properties written as Kafka's documentation
// shows, each PEM line continued with a backslash: the broker serves TLS
// with that certificate.
func TestInlinePEMFromAPropertiesFile(t *testing.T) {
	ca := newTestCA(t, "inline CA")
	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "inline broker"})
	continued := func(pemText []byte) string {
		lines := strings.Split(strings.TrimSpace(string(pemText)), "\n")
		return strings.Join(lines, " \\\n  ")
	}
	props := "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n" +
		"ssl.keystore.type=PEM\n" +
		"ssl.keystore.certificate.chain=" + continued(certPEM) + "\n" +
		"ssl.keystore.key=" + continued(keyPEM) + "\n" +
		"ssl.truststore.certificates=" + continued(ca.pem) + "\n"
	parsed, err := config.ParseProperties(strings.NewReader(props))
	if err != nil {
		t.Fatalf("parse properties: %v", err)
	}
	cfg := testConfig(t)
	for _, p := range parsed {
		if err := cfg.Set(p.Key, p.Value); err != nil {
			t.Fatalf("set %s: %v", p.Key, err)
		}
	}
	b := startBroker(t, cfg)
	conn, err := tls.Dial("tcp", b.ListenerAddr("SSL").String(), &tls.Config{RootCAs: ca.pool(), MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "inline broker" {
		t.Fatalf("certificate: got CN %q, want %q", got, "inline broker")
	}
}
