package config

// This file holds the listener properties: listeners,
// advertised.listeners, listener.security.protocol.map, the inter-broker
// listener and each listener's TLS and SASL settings, parsed and checked
// into the specs the broker binds.

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tripodmq/tripod/broker/security"
)

// securityProtocolIDs are the security protocols' ids in UpdateMetadata's
// endpoints (Kafka's SecurityProtocol.id).
var securityProtocolIDs = map[string]int16{
	security.ProtocolPlaintext: 0, security.ProtocolSSL: 1, security.ProtocolSASLPlaintext: 2, security.ProtocolSASLSSL: 3,
}

// SecurityProtocolID returns the id of a security protocol, and whether
// the protocol is known.
func SecurityProtocolID(name string) (int16, bool) {
	id, ok := securityProtocolIDs[name]
	return id, ok
}

// SecurityProtocolName returns the name of a security protocol id, or
// "" for an unknown one.
func SecurityProtocolName(id int16) string {
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
		security.ProtocolPlaintext: security.ProtocolPlaintext, security.ProtocolSSL: security.ProtocolSSL,
		security.ProtocolSASLPlaintext: security.ProtocolSASLPlaintext, security.ProtocolSASLSSL: security.ProtocolSASLSSL,
	}
}

// listenerNamePattern is what a listener name may be: Kafka's names are
// free-form, but a name must fit in listener.name.<name>.<key>.
var listenerNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ListenerAddr is one NAME://HOST:PORT entry of listeners or
// advertised.listeners.
type ListenerAddr struct {
	// Name is the listener's name, upper-cased as Kafka normalises it.
	Name string
	// Host is empty for every interface (listeners) or for the bound
	// address (advertised.listeners); Port 0 is a free port (listeners)
	// or the bound port (advertised.listeners).
	Host string
	Port int
}

// parseListenerAddrs parses key's value, comma-separated NAME://HOST:PORT
// entries; an entry without a name (HOST:PORT) is bareName's. Names must
// be unique.
func parseListenerAddrs(key, value, bareName string) ([]ListenerAddr, error) {
	var out []ListenerAddr
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
		la := ListenerAddr{Name: strings.ToUpper(name), Host: h, Port: n}
		if slices.ContainsFunc(out, func(o ListenerAddr) bool { return o.Name == la.Name }) {
			return nil, fmt.Errorf("%s %q: listener %s is named twice", key, value, la.Name)
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

// ListenerSpec is one listener as configured: its listeners entry,
// security protocol, advertised address and TLS settings.
type ListenerSpec struct {
	ListenerAddr
	// Protocol is the listener's security protocol
	// (listener.security.protocol.map).
	Protocol string
	// Advertised is the listener's advertised.listeners entry (or its
	// listeners entry when advertised.listeners is empty); nil when
	// advertised.listeners names other listeners only: the listener is
	// then not registered, so Metadata never names it.
	Advertised *ListenerAddr
	// SSL is the listener's TLS configuration (SSL and SASL_SSL only):
	// the ssl.* properties, each overridden by the listener's
	// listener.name.<name>.ssl.* if set; SSLKey names the property a
	// setting came from, for errors.
	SSL    security.SSLConfig
	SSLKey func(key string) string
	// SASL is a SASL_PLAINTEXT or SASL_SSL listener's mechanisms and
	// PLAIN users (SASLConfig, each property overridden by the listener's
	// listener.name.<name>.<key> if set); nil on PLAINTEXT and SSL.
	SASL *security.SASLListener
}

// UsesTLS reports whether the listener's connections are TLS.
func (s ListenerSpec) UsesTLS() bool {
	return s.Protocol == security.ProtocolSSL || s.Protocol == security.ProtocolSASLSSL
}

// Authenticates reports whether the listener establishes who its clients
// are: SASL, or TLS with ssl.client.auth=required.
func (s ListenerSpec) Authenticates() bool {
	switch s.Protocol {
	case security.ProtocolSASLPlaintext, security.ProtocolSASLSSL:
		return true
	case security.ProtocolSSL:
		return strings.EqualFold(s.SSL.ClientAuth, "required")
	}
	return false
}

// ListenerSpecs returns the configured listeners in listeners' order,
// with the index of the inter-broker one. It checks everything about them
// that needs no I/O; the key and certificate files are read by broker.New.
func (c Config) ListenerSpecs() ([]ListenerSpec, int, error) {
	addrs, err := parseListenerAddrs("listeners", c.Listeners, security.ProtocolPlaintext)
	if err != nil {
		return nil, 0, err
	}
	specs := make([]ListenerSpec, len(addrs))
	bound := map[string]string{}
	for i, a := range addrs {
		protocol, ok := c.ListenerSecurityProtocolMap[a.Name]
		if !ok {
			return nil, 0, fmt.Errorf("listener.security.protocol.map %q: no security protocol for listener %s of listeners",
				formatSecurityProtocolMap(c.ListenerSecurityProtocolMap), a.Name)
		}
		if a.Port != 0 {
			hp := net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
			if other, dup := bound[hp]; dup {
				return nil, 0, fmt.Errorf("listeners %q: listeners %s and %s both bind %s", c.Listeners, other, a.Name, hp)
			}
			bound[hp] = a.Name
		}
		specs[i] = ListenerSpec{ListenerAddr: a, Protocol: protocol, Advertised: &a}
	}
	if c.AdvertisedListeners != "" {
		bare := security.ProtocolPlaintext
		if len(addrs) == 1 {
			bare = addrs[0].Name
		}
		adv, err := parseListenerAddrs("advertised.listeners", c.AdvertisedListeners, bare)
		if err != nil {
			return nil, 0, err
		}
		for i := range specs {
			specs[i].Advertised = nil
		}
		for _, a := range adv {
			i := slices.IndexFunc(specs, func(s ListenerSpec) bool { return s.Name == a.Name })
			if i < 0 {
				return nil, 0, fmt.Errorf("advertised.listeners %q: listener %s is not in listeners %q", c.AdvertisedListeners, a.Name, c.Listeners)
			}
			if ip := net.ParseIP(a.Host); ip != nil && ip.IsUnspecified() {
				return nil, 0, fmt.Errorf("advertised.listeners %q: listener %s advertises %s, which clients cannot connect to", c.AdvertisedListeners, a.Name, a.Host)
			}
			specs[i].Advertised = &a
		}
	}
	for name := range c.ListenerOverrides {
		if !slices.ContainsFunc(specs, func(s ListenerSpec) bool { return strings.EqualFold(s.Name, name) }) {
			keys := slices.Sorted(maps.Keys(c.ListenerOverrides[name]))
			return nil, 0, fmt.Errorf("listener.name.%s.%s: no listener %s in listeners %q", name, keys[0], strings.ToUpper(name), c.Listeners)
		}
	}
	for i := range specs {
		s := &specs[i]
		overrides := c.ListenerOverrides[strings.ToLower(s.Name)]
		s.SSL, s.SSLKey = c.SSL, func(key string) string {
			if _, ok := overrides[key]; ok {
				return "listener.name." + strings.ToLower(s.Name) + "." + key
			}
			return key
		}
		var sslOverrides []string
		for _, key := range slices.Sorted(maps.Keys(overrides)) {
			if _, ok := security.SSLKeys[key]; !ok {
				continue // a SASL key, resolved below
			}
			sslOverrides = append(sslOverrides, key)
			if err := security.SSLKeys[key].Set(&s.SSL, s.SSLKey(key), overrides[key]); err != nil {
				return nil, 0, err
			}
		}
		if s.UsesTLS() {
			if err := s.SSL.Validate(s.Name, s.SSLKey); err != nil {
				return nil, 0, err
			}
		} else if len(sslOverrides) > 0 {
			return nil, 0, fmt.Errorf("%s: listener %s is %s, which has no TLS settings", s.SSLKey(sslOverrides[0]), s.Name, s.Protocol)
		}
	}
	inter, err := c.interBrokerIndex(specs)
	if err != nil {
		return nil, 0, err
	}
	for i := range specs {
		if specs[i].SASL, err = c.SASL.Listener(specs[i].Name, specs[i].Protocol, c.ListenerOverrides[strings.ToLower(specs[i].Name)], i == inter); err != nil {
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
func (c Config) interBrokerIndex(specs []ListenerSpec) (int, error) {
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
		i = slices.IndexFunc(specs, func(s ListenerSpec) bool { return s.Name == name })
		if i < 0 {
			return 0, fmt.Errorf("%s %s: not a listener of listeners %q", key, name, c.Listeners)
		}
	default:
		if j := slices.IndexFunc(specs, func(s ListenerSpec) bool { return s.Name == security.ProtocolPlaintext }); j >= 0 {
			i = j
		}
	}
	if specs[i].Advertised == nil {
		return 0, fmt.Errorf("inter.broker.listener.name %s: the inter-broker listener must be in advertised.listeners %q", specs[i].Name, c.AdvertisedListeners)
	}
	return i, nil
}
