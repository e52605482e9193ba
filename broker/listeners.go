package broker

import (
	"fmt"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

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

// securityProtocolIDs are the security protocols' ids in UpdateMetadata's
// endpoints (Kafka's SecurityProtocol.id).
var securityProtocolIDs = map[string]int16{
	protocolPlaintext: 0, protocolSSL: 1, protocolSASLPlaintext: 2, protocolSASLSSL: 3,
}

// securityProtocolName returns the name of a security protocol id, or
// "" for an unknown one.
func securityProtocolName(id int16) string {
	for name, n := range securityProtocolIDs {
		if n == id {
			return name
		}
	}
	return ""
}

// defaultSecurityProtocolMap returns Kafka's default
// listener.security.protocol.map: each protocol's name is a listener name
// of that protocol.
func defaultSecurityProtocolMap() map[string]string {
	return map[string]string{
		protocolPlaintext: protocolPlaintext, protocolSSL: protocolSSL,
		protocolSASLPlaintext: protocolSASLPlaintext, protocolSASLSSL: protocolSASLSSL,
	}
}

// listenerNamePattern is what a listener name may be: Kafka's names are
// free-form, but a name must fit in listener.name.<name>.<key>.
var listenerNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// listenerAddr is one NAME://HOST:PORT entry of listeners or
// advertised.listeners.
type listenerAddr struct {
	// name is the listener's name, upper-cased as Kafka normalises it.
	name string
	// host is empty for every interface (listeners) or for the bound
	// address (advertised.listeners); port 0 is a free port (listeners)
	// or the bound port (advertised.listeners).
	host string
	port int
}

// parseListenerAddrs parses key's value, comma-separated NAME://HOST:PORT
// entries; an entry without a name (HOST:PORT) is bareName's. Names must
// be unique.
func parseListenerAddrs(key, value, bareName string) ([]listenerAddr, error) {
	var out []listenerAddr
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, named := strings.Cut(item, "://")
		if !named {
			name, addr = bareName, item
		}
		if !listenerNamePattern.MatchString(name) {
			return nil, fmt.Errorf("%s %q: listener name %q must be letters, digits, '_' and '-'", key, value, name)
		}
		h, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %q must be NAME://HOST:PORT", key, value, item)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%s %q: port of %q must be between 0 and 65535", key, value, item)
		}
		la := listenerAddr{name: strings.ToUpper(name), host: h, port: n}
		if slices.ContainsFunc(out, func(o listenerAddr) bool { return o.name == la.name }) {
			return nil, fmt.Errorf("%s %q: listener %s is named twice", key, value, la.name)
		}
		out = append(out, la)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %q: must name at least one listener, NAME://HOST:PORT", key, value)
	}
	return out, nil
}

// setSecurityProtocolMap parses listener.security.protocol.map,
// "NAME:PROTOCOL,NAME:PROTOCOL".
func setSecurityProtocolMap(dst *map[string]string, key, value string) error {
	out := map[string]string{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, protocol, ok := strings.Cut(item, ":")
		name, protocol = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(protocol))
		if !ok || !listenerNamePattern.MatchString(name) {
			return fmt.Errorf("%s %q: %q must be LISTENER:PROTOCOL", key, value, item)
		}
		if _, known := securityProtocolIDs[protocol]; !known {
			return fmt.Errorf("%s %q: security protocol %q of listener %s must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", key, value, protocol, name)
		}
		out[name] = protocol
	}
	*dst = out
	return nil
}

// formatSecurityProtocolMap is the inverse of setSecurityProtocolMap,
// sorted by listener name.
func formatSecurityProtocolMap(m map[string]string) string {
	items := make([]string, 0, len(m))
	for name, protocol := range m {
		items = append(items, name+":"+protocol)
	}
	sort.Strings(items)
	return strings.Join(items, ",")
}

// listenerSpec is one listener as configured: its listeners entry,
// security protocol, advertised address and TLS settings.
type listenerSpec struct {
	listenerAddr
	// protocol is the listener's security protocol
	// (listener.security.protocol.map).
	protocol string
	// advertised is the listener's advertised.listeners entry (or its
	// listeners entry when advertised.listeners is empty); nil when
	// advertised.listeners names other listeners only: the listener is
	// then not registered, so Metadata never names it.
	advertised *listenerAddr
	// ssl is the listener's TLS configuration (SSL and SASL_SSL only):
	// the ssl.* properties, each overridden by the listener's
	// listener.name.<name>.ssl.* if set; sslKey names the property a
	// setting came from, for errors.
	ssl    security.SSLConfig
	sslKey func(key string) string
	// sasl is a SASL_PLAINTEXT or SASL_SSL listener's mechanisms and
	// PLAIN users (SASLConfig, each property overridden by the listener's
	// listener.name.<name>.<key> if set); nil on PLAINTEXT and SSL.
	sasl *security.SASLListener
}

// usesTLS reports whether the listener's connections are TLS.
func (s listenerSpec) usesTLS() bool {
	return s.protocol == protocolSSL || s.protocol == protocolSASLSSL
}

// authenticates reports whether the listener establishes who its clients
// are: SASL, or TLS with ssl.client.auth=required.
func (s listenerSpec) authenticates() bool {
	switch s.protocol {
	case protocolSASLPlaintext, protocolSASLSSL:
		return true
	case protocolSSL:
		return strings.EqualFold(s.ssl.ClientAuth, "required")
	}
	return false
}

// listenerSpecs returns the configured listeners in listeners' order,
// with the index of the inter-broker one. It checks everything about them
// that needs no I/O; the key and certificate files are read by New.
func (c Config) listenerSpecs() ([]listenerSpec, int, error) {
	addrs, err := parseListenerAddrs("listeners", c.Listeners, protocolPlaintext)
	if err != nil {
		return nil, 0, err
	}
	specs := make([]listenerSpec, len(addrs))
	bound := map[string]string{}
	for i, a := range addrs {
		protocol, ok := c.ListenerSecurityProtocolMap[a.name]
		if !ok {
			return nil, 0, fmt.Errorf("listener.security.protocol.map %q: no security protocol for listener %s of listeners",
				formatSecurityProtocolMap(c.ListenerSecurityProtocolMap), a.name)
		}
		if a.port != 0 {
			hp := net.JoinHostPort(a.host, strconv.Itoa(a.port))
			if other, dup := bound[hp]; dup {
				return nil, 0, fmt.Errorf("listeners %q: listeners %s and %s both bind %s", c.Listeners, other, a.name, hp)
			}
			bound[hp] = a.name
		}
		specs[i] = listenerSpec{listenerAddr: a, protocol: protocol, advertised: &a}
	}
	if c.AdvertisedListeners != "" {
		bare := protocolPlaintext
		if len(addrs) == 1 {
			bare = addrs[0].name
		}
		adv, err := parseListenerAddrs("advertised.listeners", c.AdvertisedListeners, bare)
		if err != nil {
			return nil, 0, err
		}
		for i := range specs {
			specs[i].advertised = nil
		}
		for _, a := range adv {
			i := slices.IndexFunc(specs, func(s listenerSpec) bool { return s.name == a.name })
			if i < 0 {
				return nil, 0, fmt.Errorf("advertised.listeners %q: listener %s is not in listeners %q", c.AdvertisedListeners, a.name, c.Listeners)
			}
			if ip := net.ParseIP(a.host); ip != nil && ip.IsUnspecified() {
				return nil, 0, fmt.Errorf("advertised.listeners %q: listener %s advertises %s, which clients cannot connect to", c.AdvertisedListeners, a.name, a.host)
			}
			specs[i].advertised = &a
		}
	}
	for name := range c.ListenerOverrides {
		if !slices.ContainsFunc(specs, func(s listenerSpec) bool { return strings.EqualFold(s.name, name) }) {
			keys := slices.Sorted(maps.Keys(c.ListenerOverrides[name]))
			return nil, 0, fmt.Errorf("listener.name.%s.%s: no listener %s in listeners %q", name, keys[0], strings.ToUpper(name), c.Listeners)
		}
	}
	for i := range specs {
		s := &specs[i]
		overrides := c.ListenerOverrides[strings.ToLower(s.name)]
		s.ssl, s.sslKey = c.SSL, func(key string) string {
			if _, ok := overrides[key]; ok {
				return "listener.name." + strings.ToLower(s.name) + "." + key
			}
			return key
		}
		var sslOverrides []string
		for _, key := range slices.Sorted(maps.Keys(overrides)) {
			if _, ok := security.SSLKeys[key]; !ok {
				continue // a SASL key, resolved below
			}
			sslOverrides = append(sslOverrides, key)
			if err := security.SSLKeys[key].Set(&s.ssl, s.sslKey(key), overrides[key]); err != nil {
				return nil, 0, err
			}
		}
		if s.usesTLS() {
			if err := s.ssl.Validate(s.name, s.sslKey); err != nil {
				return nil, 0, err
			}
		} else if len(sslOverrides) > 0 {
			return nil, 0, fmt.Errorf("%s: listener %s is %s, which has no TLS settings", s.sslKey(sslOverrides[0]), s.name, s.protocol)
		}
	}
	inter, err := c.interBrokerIndex(specs)
	if err != nil {
		return nil, 0, err
	}
	for i := range specs {
		if specs[i].sasl, err = c.SASL.Listener(specs[i].name, specs[i].protocol, c.ListenerOverrides[strings.ToLower(specs[i].name)], i == inter); err != nil {
			return nil, 0, err
		}
	}
	return specs, inter, nil
}

// interBrokerIndex returns the index of the inter-broker listener among
// specs: inter.broker.listener.name, or the listener named by
// security.inter.broker.protocol, or by default (Kafka's
// security.inter.broker.protocol=PLAINTEXT) the listener named PLAINTEXT,
// or else the first listener. It must be advertised.
func (c Config) interBrokerIndex(specs []listenerSpec) (int, error) {
	name := strings.ToUpper(strings.TrimSpace(c.InterBrokerListenerName))
	key := "inter.broker.listener.name"
	if c.SecurityInterBrokerProtocol != "" {
		if name != "" {
			return 0, fmt.Errorf("security.inter.broker.protocol %s and inter.broker.listener.name %s: set one of them, not both",
				c.SecurityInterBrokerProtocol, name)
		}
		name, key = c.SecurityInterBrokerProtocol, "security.inter.broker.protocol"
	}
	i := 0
	switch {
	case name != "":
		i = slices.IndexFunc(specs, func(s listenerSpec) bool { return s.name == name })
		if i < 0 {
			return 0, fmt.Errorf("%s %s: not a listener of listeners %q", key, name, c.Listeners)
		}
	default:
		if j := slices.IndexFunc(specs, func(s listenerSpec) bool { return s.name == protocolPlaintext }); j >= 0 {
			i = j
		}
	}
	if specs[i].advertised == nil {
		return 0, fmt.Errorf("inter.broker.listener.name %s: the inter-broker listener must be in advertised.listeners %q", specs[i].name, c.AdvertisedListeners)
	}
	return i, nil
}

// listener is one bound listener of a running broker.
type listener struct {
	listenerSpec
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
	return coord.Endpoint{Listener: l.name, Host: l.advertisedHost, Port: l.advertisedPort, SecurityProtocol: l.protocol}
}

// bindListeners binds every configured listener and loads the SSL
// listeners' key material; it returns them with the inter-broker one. On
// error it closes what it bound.
func bindListeners(cfg Config, logger hclog.Logger) ([]*listener, *listener, error) {
	specs, inter, err := cfg.listenerSpecs()
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
		l := &listener{listenerSpec: spec, protected: i == inter && len(specs) > 1}
		if spec.usesTLS() {
			if l.mapper, err = security.ParsePrincipalMappingRules(spec.ssl.PrincipalMappingRules); err != nil {
				return fail(fmt.Errorf("%s: %w", spec.sslKey("ssl.principal.mapping.rules"), err))
			}
			if l.tls, err = security.NewTLSStore(spec.name, spec.ssl, spec.sslKey, logger); err != nil {
				return fail(err)
			}
		}
		addr := net.JoinHostPort(spec.host, strconv.Itoa(spec.port))
		if l.ln, err = net.Listen("tcp", addr); err != nil {
			return fail(fmt.Errorf("listen on listener %s (listeners %s) at %s: %w", spec.name, cfg.Listeners, addr, err))
		}
		if spec.advertised != nil {
			bound := l.ln.Addr().(*net.TCPAddr)
			l.advertisedHost, l.advertisedPort = spec.advertised.host, int32(spec.advertised.port)
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
// advertised address and every advertised listener's endpoint.
func (b *Broker) self() coord.Broker {
	me := coord.Broker{ID: coord.BrokerID(b.cfg.BrokerID), Host: b.interBroker.advertisedHost, Port: b.interBroker.advertisedPort}
	for _, l := range b.listeners {
		if l.advertised != nil {
			me.Endpoints = append(me.Endpoints, l.endpoint())
		}
	}
	return me
}

// listenerNamed returns the listener of that name, or nil.
func (b *Broker) listenerNamed(name string) *listener {
	for _, l := range b.listeners {
		if strings.EqualFold(l.name, name) {
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
		if l.authenticates() {
			continue
		}
		if l.protected {
			logger.Warn("the inter-broker listener does not authenticate its clients: keep it reachable by the brokers only, "+
				"as any client on it may send controller and replication requests",
				"listener", l.name, "security_protocol", l.protocol, "addr", l.ln.Addr().String())
			continue
		}
		logger.Warn("listener does not authenticate its clients and is not reserved for brokers: without an authorizer, "+
			"any client that reaches it may send controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) and follower fetches; "+
			"use SASL, SSL with ssl.client.auth=required, or a separate inter-broker listener that only the brokers can reach",
			"listener", l.name, "security_protocol", l.protocol, "addr", l.ln.Addr().String())
	}
}
