package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
)

// TestCoordSecurityPropertiesValidate: the coordination backend's
// security properties are refused, naming the key, when they do not fit
// together.
func TestCoordSecurityPropertiesValidate(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		key   string
	}{
		{"set.acl without credentials", map[string]string{"coordination.backend": "zk", "zookeeper.connect": "127.0.0.1:2181",
			"zookeeper.set.acl": "true"}, "zookeeper.set.acl"},
		{"digest user without password", map[string]string{"coordination.backend": "zk", "zookeeper.connect": "127.0.0.1:2181",
			"zookeeper.digest.username": "broker"}, "zookeeper.digest"},
		{"etcd user without password", map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "https://127.0.0.1:2379",
			"etcd.username": "tripod"}, "etcd.username"},
		{"etcd.ssl with http endpoint", map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "http://127.0.0.1:2379",
			"etcd.ssl.truststore.location": "/ca.pem"}, "etcd.endpoints"},
		{"raft keystore without truststore", map[string]string{"raft.ssl.keystore.location": "/node.pem"}, "raft.ssl"},
	}
	for _, c := range cases {
		cfg := testConfig(t)
		set(t, &cfg, c.props)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: Validate got %v, want an error naming %s", c.name, err, c.key)
		}
	}
	if err := (withProps(t, testConfig(t), map[string]string{"coordination.backend": "zk", "zookeeper.connect": "127.0.0.1:2181",
		"zookeeper.set.acl": "true", "zookeeper.digest.username": "broker", "zookeeper.digest.password": "secret"})).Validate(); err != nil {
		t.Errorf("set.acl with credentials: Validate got %v, want nil", err)
	}
	if err := (withProps(t, testConfig(t), map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "https://127.0.0.1:2379",
		"etcd.username": "tripod", "etcd.password": "secret"})).Validate(); err != nil {
		t.Errorf("https etcd with a password and the system's roots: Validate got %v, want nil", err)
	}
}

// withProps returns cfg with props set.
func withProps(t *testing.T, cfg config.Config, props map[string]string) config.Config {
	t.Helper()
	set(t, &cfg, props)
	return cfg
}

// TestCoordTLSFromFiles: raft.ssl.* files become a server and a client
// TLS configuration that complete a mutual handshake with each other and
// refuse a client of another CA; etcd.ssl.truststore.location alone gives
// a client that verifies etcd's certificate and presents none.
func TestCoordTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cluster CA")
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{
		"raft.ssl.keystore.location":   ca.keystoreFile(t, dir, "node.pem", pkix.Name{CommonName: "raft-1"}),
		"raft.ssl.truststore.location": ca.truststoreFile(t, dir, "ca.pem"),
	})
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cc := cfg.CoordConfig()
	if err := cfg.OpenCoordTLS(&cc, hclog.NewNullLogger()); err != nil {
		t.Fatalf("OpenCoordTLS: %v", err)
	}
	if cc.RaftServerTLS == nil || cc.RaftClientTLS == nil {
		t.Fatalf("raft TLS: got server %v, client %v; want both", cc.RaftServerTLS, cc.RaftClientTLS)
	}
	if err := tlsHandshake(t, cc.RaftServerTLS, cc.RaftClientTLS); err != nil {
		t.Errorf("mutual handshake between two nodes of the cluster: %v", err)
	}
	rogue := cc.RaftClientTLS.Clone()
	rogue.GetClientCertificate = nil
	rogue.Certificates = []tls.Certificate{newTestCA(t, "another CA").clientCert(t, pkix.Name{CommonName: "rogue"})}
	if err := tlsHandshake(t, cc.RaftServerTLS, rogue); err == nil {
		t.Errorf("handshake of a client of another CA: got nil error, want refused")
	}

	etcdCfg := testConfig(t)
	set(t, &etcdCfg, map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "https://127.0.0.1:2379",
		"etcd.ssl.truststore.location": ca.truststoreFile(t, dir, "etcd-ca.pem")})
	ec := etcdCfg.CoordConfig()
	if err := etcdCfg.OpenCoordTLS(&ec, hclog.NewNullLogger()); err != nil {
		t.Fatalf("OpenCoordTLS for etcd: %v", err)
	}
	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "etcd"})
	serverCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("etcd server key pair: %v", err)
	}
	if err := tlsHandshake(t, &tls.Config{Certificates: []tls.Certificate{serverCert}}, ec.EtcdTLS); err != nil {
		t.Errorf("handshake with etcd's certificate: %v", err)
	}
	if err := tlsHandshake(t, &tls.Config{Certificates: []tls.Certificate{newTestCA(t, "another CA").clientCert(t, pkix.Name{CommonName: "etcd"})}}, ec.EtcdTLS); err == nil {
		t.Errorf("handshake with a certificate of another CA: got nil error, want refused")
	}
}

// tlsHandshake runs a TLS handshake over loopback between server and client
// (dialing 127.0.0.1) and returns the server's error, or the client's.
func tlsHandshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	serverErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// Finish TLS 1.3's exchange so the client's read sees the
			// outcome.
			tc.Write([]byte{1})
		}
		serverErr <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	cfg := client.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = "127.0.0.1"
	}
	tc := tls.Client(c, cfg)
	clientErr := tc.HandshakeContext(ctx)
	if clientErr == nil {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var b [1]byte
		_, clientErr = tc.Read(b[:])
	}
	if err := <-serverErr; err != nil {
		return err
	}
	return clientErr
}

// TestWarnUnsecuredCoord: a broker warns once at startup when its
// coordination backend lets anyone who reaches it change the metadata,
// and not when it is secured (or is a lone Raft voter on loopback).
func TestWarnUnsecuredCoord(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		warn  string // "" for none
	}{
		{"zk without set.acl", map[string]string{"coordination.backend": "zk", "zookeeper.connect": "127.0.0.1:2181"}, "zookeeper.set.acl is false"},
		{"zk with set.acl", map[string]string{"coordination.backend": "zk", "zookeeper.connect": "127.0.0.1:2181",
			"zookeeper.set.acl": "true", "zookeeper.digest.username": "b", "zookeeper.digest.password": "p"}, ""},
		{"etcd plaintext", map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "http://127.0.0.1:2379"}, "etcd is reached without TLS"},
		{"etcd TLS without auth", map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "https://127.0.0.1:2379"}, "etcd is reached without TLS or without authentication"},
		{"etcd TLS with password", map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "https://127.0.0.1:2379",
			"etcd.username": "tripod", "etcd.password": "p"}, ""},
		{"etcd TLS with client certificate", map[string]string{"coordination.backend": "etcd", "etcd.endpoints": "https://127.0.0.1:2379",
			"etcd.ssl.keystore.location": "/client.pem"}, ""},
		{"raft voters plain", map[string]string{"raft.voters": "1@127.0.0.1:19192,2@127.0.0.1:19193"}, "the Raft transport is plain TCP"},
		{"raft lone voter on all interfaces", map[string]string{"raft.listen": "0.0.0.0:19192"}, "the Raft transport is plain TCP"},
		{"raft lone voter on loopback", map[string]string{"raft.listen": "127.0.0.1:19192"}, ""},
		{"raft voters with mTLS", map[string]string{"raft.voters": "1@127.0.0.1:19192,2@127.0.0.1:19193",
			"raft.ssl.keystore.location": "/node.pem", "raft.ssl.truststore.location": "/ca.pem"}, ""},
	}
	for _, c := range cases {
		cfg := testConfig(t)
		set(t, &cfg, c.props)
		out := &syncBuffer{}
		cfg.WarnUnsecuredCoord(hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Warn}))
		got := out.String()
		switch {
		case c.warn == "" && got != "":
			t.Errorf("%s: got warning %q, want none", c.name, got)
		case c.warn != "" && (!strings.Contains(got, c.warn) || strings.Count(got, "\n") != 1):
			t.Errorf("%s: got %q, want one warning containing %q", c.name, got, c.warn)
		}
	}
}

// TestCoordPasswordsHidden: a broker on Raft with mutual TLS from its
// files starts and serves, and DescribeConfigs shows the coordination
// backend's file locations but never its passwords.
func TestCoordPasswordsHidden(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cluster CA")
	cfg := testConfig(t)
	keystore := ca.keystoreFile(t, dir, "node.pem", pkix.Name{CommonName: "raft-1"})
	set(t, &cfg, map[string]string{
		"raft.ssl.keystore.location":   keystore,
		"raft.ssl.truststore.location": ca.truststoreFile(t, dir, "ca.pem"),
		"zookeeper.digest.password":    "zk-secret",
		"etcd.password":                "etcd-secret",
	})
	b := startBroker(t, cfg)
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	res.ResourceName = strconv.Itoa(int(b.ID())) // empty names the cluster default
	res.ConfigNames = []string{"zookeeper.digest.password", "etcd.password", "raft.ssl.keystore.location"}
	req.Resources = append(req.Resources, res)
	dc := issue[*kmsg.DescribeConfigsResponse](t, newClient(t, b), req)
	if len(dc.Resources) != 1 || len(dc.Resources[0].Configs) != 3 {
		t.Fatalf("DescribeConfigs: got %+v, want the 3 configs", dc.Resources)
	}
	for _, c := range dc.Resources[0].Configs {
		switch c.Name {
		case "raft.ssl.keystore.location":
			if c.Value == nil || *c.Value != keystore || c.IsSensitive {
				t.Errorf("DescribeConfigs %s: got %v sensitive=%v, want %s", c.Name, c.Value, c.IsSensitive, keystore)
			}
		default:
			if c.Value != nil || !c.IsSensitive || c.ConfigType != kmsg.ConfigTypePassword {
				t.Errorf("DescribeConfigs %s: got %v sensitive=%v type %v, want hidden, a password", c.Name, c.Value, c.IsSensitive, c.ConfigType)
			}
		}
	}
}
