package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// TestListenerProperties sets listeners, advertised.listeners,
// listener.security.protocol.map and inter.broker.listener.name as Kafka
// reads them: good combinations give the listeners, protocols, advertised
// addresses and inter-broker listener expected; bad ones are refused by
// Validate with an error naming the property.
func TestListenerProperties(t *testing.T) {
	ca := newTestCA(t, "ca")
	keystore := ca.keystoreFile(t, t.TempDir(), "k.pem", pkix.Name{CommonName: "b"})
	good := []struct {
		props map[string]string
		// want lists NAME:PROTOCOL@host:port->advertised host:port (or
		// - when not advertised), the inter-broker one marked with *.
		want []string
	}{
		{map[string]string{}, []string{"*PLAINTEXT:PLAINTEXT@127.0.0.1:9092->127.0.0.1:9092"}},
		{map[string]string{"listeners": "127.0.0.1:9093", "advertised.listeners": "kafka.example.com:19093"},
			[]string{"*PLAINTEXT:PLAINTEXT@127.0.0.1:9093->kafka.example.com:19093"}},
		{map[string]string{"listeners": "CLIENT://0.0.0.0:9093", "listener.security.protocol.map": "CLIENT:PLAINTEXT", "advertised.listeners": "h:1"},
			[]string{"*CLIENT:PLAINTEXT@0.0.0.0:9093->h:1"}},
		{map[string]string{"listeners": "SSL://:9093,PLAINTEXT://127.0.0.1:9092", "ssl.keystore.location": keystore},
			[]string{"SSL:SSL@:9093->:9093", "*PLAINTEXT:PLAINTEXT@127.0.0.1:9092->127.0.0.1:9092"}},
		{map[string]string{"listeners": "client://10.0.0.1:9093,broker://10.0.0.1:9094", "listener.security.protocol.map": "CLIENT:SSL,BROKER:SSL",
			"inter.broker.listener.name": "broker", "listener.name.client.ssl.keystore.location": keystore, "listener.name.broker.ssl.keystore.location": keystore,
			"advertised.listeners": "CLIENT://kafka-1.example.com:9093,BROKER://10.0.0.1:0"},
			[]string{"CLIENT:SSL@10.0.0.1:9093->kafka-1.example.com:9093", "*BROKER:SSL@10.0.0.1:9094->10.0.0.1:0"}},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
			"advertised.listeners": "INTERNAL://127.0.0.1:0", "inter.broker.listener.name": "INTERNAL"},
			[]string{"PLAINTEXT:PLAINTEXT@127.0.0.1:0->-", "*INTERNAL:PLAINTEXT@127.0.0.1:0->127.0.0.1:0"}},
		{map[string]string{"listeners": "A://127.0.0.1:1,SSL://127.0.0.1:2", "listener.security.protocol.map": "A:PLAINTEXT,SSL:SSL",
			"security.inter.broker.protocol": "SSL", "ssl.keystore.location": keystore},
			[]string{"A:PLAINTEXT@127.0.0.1:1->127.0.0.1:1", "*SSL:SSL@127.0.0.1:2->127.0.0.1:2"}},
	}
	for _, c := range good {
		cfg := config.DefaultConfig()
		set(t, &cfg, c.props)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%v: Validate: %v", c.props, err)
			continue
		}
		specs, inter, err := cfg.ListenerSpecs()
		if err != nil {
			t.Fatalf("%v: %v", c.props, err)
		}
		var got []string
		for i, s := range specs {
			adv := "-"
			if s.Advertised != nil {
				adv = net.JoinHostPort(s.Advertised.Host, strconv.Itoa(s.Advertised.Port))
			}
			mark := ""
			if i == inter {
				mark = "*"
			}
			got = append(got, mark+s.Name+":"+s.Protocol+"@"+net.JoinHostPort(s.Host, strconv.Itoa(s.Port))+"->"+adv)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: got %v, want %v", c.props, got, c.want)
		}
	}
	bad := []struct {
		props map[string]string
		key   string
	}{
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:1,plaintext://127.0.0.1:2"}, "listeners"},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1", "ssl.keystore.location": keystore}, "listeners"},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:99999"}, "listeners"},
		{map[string]string{"listeners": "PLAIN TEXT://127.0.0.1:1"}, "listeners"},
		{map[string]string{"listeners": ""}, "listeners"},
		{map[string]string{"listeners": "CLIENT://127.0.0.1:1"}, "listener.security.protocol.map"},
		{map[string]string{"advertised.listeners": "OTHER://h:1"}, "advertised.listeners"},
		{map[string]string{"advertised.listeners": "0.0.0.0:9092"}, "advertised.listeners"},
		{map[string]string{"inter.broker.listener.name": "BROKER"}, "inter.broker.listener.name"},
		{map[string]string{"listeners": "A://127.0.0.1:1,B://127.0.0.1:2", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
			"advertised.listeners": "A://h:1", "inter.broker.listener.name": "B"}, "inter.broker.listener.name"},
		{map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "security.inter.broker.protocol"},
		{map[string]string{"listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT"}, "listener.security.protocol.map"},
	}
	for _, c := range bad {
		cfg := config.DefaultConfig()
		set(t, &cfg, c.props)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%v: Validate: got %v, want an error naming %s", c.props, err, c.key)
		}
	}
	cfg := config.DefaultConfig()
	if err := cfg.Set("listener.security.protocol.map", "PLAINTEXT:TLS"); err == nil || !strings.Contains(err.Error(), "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL") {
		t.Errorf("listener.security.protocol.map PLAINTEXT:TLS: got %v, want the protocols allowed", err)
	}
}

// TestEachListenerIsAdvertisedToItsClients serves a PLAINTEXT and an SSL
// listener: Metadata, DescribeCluster and FindCoordinator over each name
// that listener's port, and the broker registers both endpoints, the
// inter-broker one (PLAINTEXT) as its address.
func TestEachListenerIsAdvertisedToItsClients(t *testing.T) {
	ca := newTestCA(t, "ca")
	cfg := sslConfig(t, ca)
	cfg.OffsetsTopicReplicationFactor = 1
	cfg.OffsetsTopicNumPartitions = 1
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	plain, ssl := b.ListenerAddr("PLAINTEXT").(*net.TCPAddr), b.ListenerAddr("SSL").(*net.TCPAddr)
	if plain.Port == ssl.Port {
		t.Fatalf("both listeners on port %d", plain.Port)
	}
	clients := map[string]*kgo.Client{"PLAINTEXT": newClient(t, b), "SSL": tlsClient(t, b, ca, nil)}
	ports := map[string]int32{"PLAINTEXT": int32(plain.Port), "SSL": int32(ssl.Port)}
	for name, cl := range clients {
		seed := cl.SeedBrokers()[0]
		md, err := seed.Request(ctx, kmsg.NewPtrMetadataRequest())
		if err != nil {
			t.Fatalf("Metadata over %s: %v", name, err)
		}
		if brokers := md.(*kmsg.MetadataResponse).Brokers; len(brokers) != 1 || brokers[0].Port != ports[name] {
			t.Fatalf("Metadata over %s: got brokers %+v, want broker 1 at port %d", name, brokers, ports[name])
		}
		dc, err := seed.Request(ctx, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			t.Fatalf("DescribeCluster over %s: %v", name, err)
		}
		if brokers := dc.(*kmsg.DescribeClusterResponse).Brokers; len(brokers) != 1 || brokers[0].Port != ports[name] {
			t.Fatalf("DescribeCluster over %s: got brokers %+v, want port %d", name, brokers, ports[name])
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{"group-" + name}
		waitFor(t, ctx, "FindCoordinator over "+name, func() bool {
			resp, err := seed.Request(ctx, fc)
			if err != nil {
				t.Fatalf("FindCoordinator over %s: %v", name, err)
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			if len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != 0 {
				return false
			}
			if got := r.Coordinators[0].Port; got != ports[name] {
				t.Fatalf("FindCoordinator over %s: got port %d, want %d", name, got, ports[name])
			}
			return true
		})
	}

	members, err := b.backend.Members(ctx)
	if err != nil || len(members) != 1 {
		t.Fatalf("Members: got %v, %v, want broker 1", members, err)
	}
	want := coord.Broker{ID: 1, Host: "127.0.0.1", Port: int32(plain.Port), Epoch: members[0].Epoch, Endpoints: []coord.Endpoint{
		{Listener: "PLAINTEXT", Host: "127.0.0.1", Port: int32(plain.Port), SecurityProtocol: "PLAINTEXT"},
		{Listener: "SSL", Host: "127.0.0.1", Port: int32(ssl.Port), SecurityProtocol: "SSL"},
	}}
	if !members[0].Equal(want) {
		t.Fatalf("registered: got %+v, want %+v", members[0], want)
	}
}

// TestUnadvertisedListenerLeavesTheBrokerOutOfMetadata advertises only
// the PLAINTEXT listener: a client of the SSL listener is served, but
// its Metadata names no broker, as Kafka answers a client whose listener
// a broker does not register.
func TestUnadvertisedListenerLeavesTheBrokerOutOfMetadata(t *testing.T) {
	ca := newTestCA(t, "ca")
	cfg := sslConfig(t, ca)
	set(t, &cfg, map[string]string{"advertised.listeners": "PLAINTEXT://127.0.0.1:0"})
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	resp, err := tlsClient(t, b, ca, nil).SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatalf("Metadata over SSL: %v", err)
	}
	if brokers := resp.(*kmsg.MetadataResponse).Brokers; len(brokers) != 0 {
		t.Fatalf("Metadata over the unadvertised SSL listener: got brokers %+v, want none", brokers)
	}
	_, ids, _ := metadataOf(t, b, "none")
	if len(ids) != 1 {
		t.Fatalf("Metadata over PLAINTEXT: got brokers %v, want [1]", ids)
	}
}

// TestListenersShareMaxConnections fills max.connections on one
// listener: the other waits too (the limit is the broker's), except the
// inter-broker listener when it is separate, which stays open to the
// brokers.
func TestListenersShareMaxConnections(t *testing.T) {
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{
		"listeners":                      "CLIENT://127.0.0.1:0,OTHER://127.0.0.1:0,BROKER://127.0.0.1:0",
		"listener.security.protocol.map": "CLIENT:PLAINTEXT,OTHER:PLAINTEXT,BROKER:PLAINTEXT",
		"inter.broker.listener.name":     "BROKER",
		"max.connections":                "2",
	})
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	ask := func(listener string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenerAddr(listener).String()))
		if err != nil {
			return err
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err = cl.SeedBrokers()[0].Request(rctx, kmsg.NewPtrApiVersionsRequest())
		return err
	}
	var held []net.Conn
	for range 2 {
		nc, err := net.Dial("tcp", b.ListenerAddr("CLIENT").String())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer nc.Close()
		held = append(held, nc)
	}
	waitFor(t, ctx, "max.connections to be reached", func() bool { return ask("OTHER") != nil })
	if err := ask("BROKER"); err != nil {
		t.Fatalf("the inter-broker listener at max.connections: %v, want served", err)
	}
	held[0].Close()
	waitFor(t, ctx, "OTHER to accept once a connection closed", func() bool { return ask("OTHER") == nil })
}

// TestConnStateAdmitsOnlySASLRequestsBeforeAuthentication checks the
// gate before dispatch: on a SASL listener an unauthenticated connection
// may send ApiVersions, SaslHandshake and SaslAuthenticate only; PLAINTEXT
// and SSL connections are authenticated from the start.
func TestConnStateAdmitsOnlySASLRequestsBeforeAuthentication(t *testing.T) {
	remote := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 4567}
	for _, protocol := range []string{protocolPlaintext, protocolSSL, protocolSASLPlaintext, protocolSASLSSL} {
		l := &listener{ListenerSpec: config.ListenerSpec{ListenerAddr: config.ListenerAddr{Name: "L"}, Protocol: protocol}}
		cs, err := newConnState(l, remote, nil)
		if err != nil {
			t.Fatalf("%s: %v", protocol, err)
		}
		if cs.clientHost != "10.1.2.3" || cs.remote != "10.1.2.3:4567" || cs.principal() != security.Anonymous {
			t.Fatalf("%s: got host %s remote %s principal %s, want 10.1.2.3, 10.1.2.3:4567, User:ANONYMOUS",
				protocol, cs.clientHost, cs.remote, cs.principal())
		}
		sasl := strings.HasPrefix(protocol, "SASL_")
		for _, key := range []int16{apiVersionsKey, saslHandshakeKey, saslAuthenticateKey} {
			if err := cs.Admit(key); err != nil {
				t.Errorf("%s: %s before authentication: %v, want admitted", protocol, kmsg.NameForKey(key), err)
			}
		}
		for _, key := range []int16{0, 1, 3, 4} {
			if err := cs.Admit(key); (err != nil) != sasl {
				t.Errorf("%s: %s: got %v, want refused only on SASL", protocol, kmsg.NameForKey(key), err)
			}
		}
	}
	// A verified client certificate gives its subject.
	ca := newTestCA(t, "ca")
	cert := ca.clientCert(t, pkix.Name{CommonName: "alice", Organization: []string{"eng"}})
	mapper, _ := security.ParsePrincipalMappingRules("DEFAULT")
	l := &listener{ListenerSpec: config.ListenerSpec{ListenerAddr: config.ListenerAddr{Name: "SSL"}, Protocol: protocolSSL}, mapper: mapper}
	cs, err := newConnState(l, remote, &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert.Leaf}})
	if err != nil || cs.principal().String() != "User:CN=alice,O=eng" {
		t.Fatalf("principal of CN=alice,O=eng: got %v, %v", cs.principal(), err)
	}
}
