package broker

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// The security protocols of listener.security.protocol.map, Kafka's
// SecurityProtocol names (package security declares them).
const (
	protocolPlaintext     = security.ProtocolPlaintext
	protocolSSL           = security.ProtocolSSL
	protocolSASLPlaintext = security.ProtocolSASLPlaintext
	protocolSASLSSL       = security.ProtocolSASLSSL
)

// listener is one bound listener of a running broker.
type listener struct {
	config.ListenerSpec
	ln net.Listener
	// advertisedHost and advertisedPort are the address registered for
	// the listener: its advertised entry with the bound address filled in
	// for an empty host (the bound IP, or the host name when bound to
	// every interface) and the bound port for port 0. Unset when the
	// listener is not advertised.
	advertisedHost string
	advertisedPort int32
	// tls holds an SSL listener's key material; nil on PLAINTEXT.
	tls *security.TLSStore
	// mapper turns client certificates' subjects into principal names
	// (ssl.principal.mapping.rules); nil on PLAINTEXT.
	mapper *security.PrincipalMapper
	// protected is set on the inter-broker listener when there are
	// others: it accepts connections beyond max.connections, so that
	// clients filling the broker cannot lock the controller and the
	// followers out (Kafka's protected listener).
	protected bool
}

// endpoint is the listener's registered endpoint.
func (l *listener) endpoint() coord.Endpoint {
	return coord.Endpoint{Listener: l.Name, Host: l.advertisedHost, Port: l.advertisedPort, SecurityProtocol: l.Protocol}
}

// bindListeners binds every configured listener and loads the SSL
// listeners' key material; it returns them with the inter-broker one. On
// error it closes what it bound.
func bindListeners(cfg config.Config, logger hclog.Logger) ([]*listener, *listener, error) {
	specs, inter, err := cfg.ListenerSpecs()
	if err != nil {
		return nil, nil, err
	}
	var out []*listener
	fail := func(err error) ([]*listener, *listener, error) {
		for _, l := range out {
			l.ln.Close()
		}
		return nil, nil, err
	}
	for i, spec := range specs {
		l := &listener{ListenerSpec: spec, protected: i == inter && len(specs) > 1}
		if spec.UsesTLS() {
			if l.mapper, err = security.ParsePrincipalMappingRules(spec.SSL.PrincipalMappingRules); err != nil {
				return fail(fmt.Errorf("%s: %w", spec.SSLKey("ssl.principal.mapping.rules"), err))
			}
			if l.tls, err = security.NewTLSStore(spec.Name, spec.SSL, spec.SSLKey, logger); err != nil {
				return fail(err)
			}
		}
		addr := net.JoinHostPort(spec.Host, strconv.Itoa(spec.Port))
		if l.ln, err = net.Listen("tcp", addr); err != nil {
			return fail(fmt.Errorf("listen on listener %s (listeners %s) at %s: %w", spec.Name, cfg.Listeners, addr, err))
		}
		if spec.Advertised != nil {
			bound := l.ln.Addr().(*net.TCPAddr)
			l.advertisedHost, l.advertisedPort = spec.Advertised.Host, int32(spec.Advertised.Port)
			if l.advertisedHost == "" {
				l.advertisedHost = bound.IP.String()
				if bound.IP.IsUnspecified() {
					if name, err := os.Hostname(); err == nil {
						l.advertisedHost = name
					}
				}
			}
			if l.advertisedPort == 0 {
				l.advertisedPort = int32(bound.Port)
			}
		}
		out = append(out, l)
	}
	return out, out[inter], nil
}

// self is this broker as it registers: the inter-broker listener's
// advertised address, every advertised listener's endpoint and its rack.
func (b *Broker) self() coord.Broker {
	me := coord.Broker{ID: coord.BrokerID(b.cfg.BrokerID), Host: b.interBroker.advertisedHost, Port: b.interBroker.advertisedPort, Rack: b.cfg.Rack}
	for _, l := range b.listeners {
		if l.Advertised != nil {
			me.Endpoints = append(me.Endpoints, l.endpoint())
		}
	}
	return me
}

// listenerNamed returns the listener of that name, or nil.
func (b *Broker) listenerNamed(name string) *listener {
	for _, l := range b.listeners {
		if strings.EqualFold(l.Name, name) {
			return l
		}
	}
	return nil
}

// warnUnauthenticatedListeners warns, as Kafka's documentation does, of
// the listeners on which anyone who connects may act as the controller
// or as a follower: without an authorizer a controller request
// (LeaderAndIsr, UpdateMetadata, StopReplica) is checked only against the
// controller and epoch the coordination backend names, and a follower's
// fetch only against the partition's replicas; with one, its clients'
// principal (User:ANONYMOUS) needs CLUSTER_ACTION too, which it has when
// it is a super user. A listener that does not
// authenticate its clients (PLAINTEXT, SSL without
// ssl.client.auth=required; SASL ones do) should be reachable by the
// brokers only.
func warnUnauthenticatedListeners(logger hclog.Logger, listeners []*listener) {
	for _, l := range listeners {
		if l.Authenticates() {
			continue
		}
		if l.protected {
			logger.Warn("the inter-broker listener does not authenticate its clients: keep it reachable by the brokers only, "+
				"as any client on it may send controller and replication requests",
				"listener", l.Name, "security_protocol", l.Protocol, "addr", l.ln.Addr().String())
			continue
		}
		logger.Warn("listener does not authenticate its clients and is not reserved for brokers: without an authorizer, "+
			"any client that reaches it may send controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) and follower fetches; "+
			"use SASL, SSL with ssl.client.auth=required, or a separate inter-broker listener that only the brokers can reach",
			"listener", l.Name, "security_protocol", l.Protocol, "addr", l.ln.Addr().String())
	}
}
