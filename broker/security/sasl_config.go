package security

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tripodmq/tripod/coord"
)

// mechanismPlain is the PLAIN SASL mechanism (RFC 4616); the SCRAM ones
// are coord.ScramSHA256 and coord.ScramSHA512.
const mechanismPlain = "PLAIN"

// saslMechanisms are the mechanisms tripod implements, as Kafka names
// them, in the order errors list them. Kafka's GSSAPI is not among them.
var saslMechanisms = []string{mechanismPlain, coord.ScramSHA256, coord.ScramSHA512, MechanismOAuthBearer}

// The login modules of Kafka's JAAS configs for tripod's mechanisms.
const (
	plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// loginModuleOf is the login module a mechanism's JAAS config names.
func loginModuleOf(mechanism string) string {
	switch mechanism {
	case mechanismPlain:
		return plainLoginModule
	case MechanismOAuthBearer:
		return oauthLoginModule
	}
	return scramLoginModule
}

// SASLConfig holds the broker's SASL properties, under Kafka's names. They
// apply to the SASL_PLAINTEXT and SASL_SSL listeners; a listener may
// override its mechanisms and their JAAS configs as
// listener.name.<lower-cased listener name>.<key> (SASLListenerKeys).
type SASLConfig struct {
	// EnabledMechanisms are the mechanisms a SASL listener offers, of
	// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (sasl.enabled.mechanisms,
	// comma separated; a listener's own with
	// listener.name.<listener>.sasl.enabled.mechanisms). Default empty:
	// Kafka's default, GSSAPI, is not implemented, so every SASL listener
	// must name its mechanisms.
	EnabledMechanisms []string
	// JAASConfig is a login module configuration in Kafka's JAAS syntax
	// (sasl.jaas.config), used for the mechanism whose login module it
	// names on every SASL listener that has no
	// listener.name.<listener>.<mechanism>.sasl.jaas.config of its own.
	// PLAIN's PlainLoginModule lists the users as user_<name>="<password>"
	// options; ScramLoginModule needs none (SCRAM's credentials are in the
	// coordination backend). On the inter-broker listener the username
	// and password options are what this broker authenticates as. Default
	// empty.
	JAASConfig string
	// InterBrokerMechanism is the mechanism brokers authenticate to each
	// other with when the inter-broker listener is SASL_PLAINTEXT or
	// SASL_SSL (sasl.mechanism.inter.broker.protocol): one the listener
	// enables, whose JAAS config there has username and password options.
	// Default empty (Kafka's GSSAPI is not implemented): required with a
	// SASL inter-broker listener.
	InterBrokerMechanism string
	// ConnectionsMaxReauth is how long a SASL authentication lasts
	// (connections.max.reauth.ms, KIP-368): SaslAuthenticate v1+ tells the
	// client, which re-authenticates on the same connection before then;
	// a connection whose session expired is closed at its next request
	// other than SaslHandshake and SaslAuthenticate. Default 0: sessions
	// do not expire; at least 0.
	ConnectionsMaxReauth time.Duration
	// ServerMaxReceiveSize bounds a request before the connection has
	// authenticated, in bytes (sasl.server.max.receive.size): a larger
	// one closes the connection. Default 524288; at least 1.
	ServerMaxReceiveSize int32
	// FailedAuthenticationDelay is how long the broker holds a
	// connection whose SASL exchange failed before it answers the
	// failure and closes it (connection.failed.authentication.delay.ms,
	// KIP-306): a client guessing passwords learns of each failure only
	// then. The connection reads nothing meanwhile and holds its place
	// under max.connections; the broker's Close does not wait for it.
	// Default 100 ms; 0 answers and closes at once; 0 .. 2147483647.
	FailedAuthenticationDelay time.Duration
	// OAuthBearer is how OAUTHBEARER tokens are validated
	// (sasl.oauthbearer.*), on listeners that do not override it.
	OAuthBearer OAuthBearerConfig
}

// DefaultSASLConfig returns Kafka's SASL defaults.
func DefaultSASLConfig() SASLConfig {
	return SASLConfig{ServerMaxReceiveSize: 524288, FailedAuthenticationDelay: 100 * time.Millisecond, OAuthBearer: DefaultOAuthBearerConfig()}
}

// SASLListenerKeys are the SASL properties a listener may override as
// listener.name.<listener>.<key>, each with the check the broker's
// Config.Set applies to its value: the listener's mechanisms, and each mechanism's JAAS
// config under Kafka's <lower-cased mechanism>.sasl.jaas.config.
var SASLListenerKeys = map[string]func(key, value string) error{
	"sasl.enabled.mechanisms": func(k, v string) error {
		_, err := ParseMechanisms(k, v)
		return err
	},
	"plain.sasl.jaas.config":         CheckJAAS,
	"scram-sha-256.sasl.jaas.config": CheckJAAS,
	"scram-sha-512.sasl.jaas.config": CheckJAAS,
	"oauthbearer.sasl.jaas.config":   CheckJAAS,
	oauthHandlerKey:                  checkOAuthHandler,
}

func init() {
	for name, p := range OAuthBearerKeys {
		SASLListenerKeys["oauthbearer."+name] = func(key, value string) error {
			var c OAuthBearerConfig
			return p.Set(&c, key, value)
		}
	}
}

// CheckJAAS checks that value is one JAAS login module entry; its error
// names key.
func CheckJAAS(key, value string) error {
	_, err := parseJAASEntry(key, value)
	return err
}

// jaasKey is the per-listener key of a mechanism's JAAS config.
func jaasKey(mechanism string) string {
	return strings.ToLower(mechanism) + ".sasl.jaas.config"
}

// ParseMechanism reads one mechanism's name, in any case; "" is none.
func ParseMechanism(key, value string) (string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return "", nil
	}
	i := slices.IndexFunc(saslMechanisms, func(m string) bool { return strings.EqualFold(m, value) })
	if i < 0 {
		return "", fmt.Errorf("%s %q: SASL mechanism %s is not supported (allowed: %s)", key, value, value, strings.Join(saslMechanisms, ", "))
	}
	return saslMechanisms[i], nil
}

// ParseMechanisms reads a comma-separated list of mechanisms, each once.
func ParseMechanisms(key, value string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(value, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		m, err := ParseMechanism(key, item)
		if err != nil {
			return nil, fmt.Errorf("%s %q: SASL mechanism %s is not supported (allowed: %s)", key, value, strings.TrimSpace(item), strings.Join(saslMechanisms, ", "))
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Validate checks the SASL properties that need no listener; each
// listener's are checked by Listener.
func (c SASLConfig) Validate() error {
	for _, m := range c.EnabledMechanisms {
		if _, err := ParseMechanism("sasl.enabled.mechanisms", m); err != nil {
			return err
		}
	}
	if _, err := ParseMechanism("sasl.mechanism.inter.broker.protocol", c.InterBrokerMechanism); err != nil {
		return err
	}
	if c.JAASConfig != "" {
		e, err := parseJAASEntry("sasl.jaas.config", c.JAASConfig)
		if err != nil {
			return err
		}
		if e.module != plainLoginModule && e.module != scramLoginModule && e.module != oauthLoginModule {
			return fmt.Errorf("sasl.jaas.config: login module %s is not supported (allowed: %s, %s, %s)", e.module, plainLoginModule, scramLoginModule, oauthLoginModule)
		}
	}
	if err := c.OAuthBearer.Validate(""); err != nil {
		return err
	}
	if c.ConnectionsMaxReauth < 0 {
		return fmt.Errorf("connections.max.reauth.ms %d: must be at least 0 (0: sessions do not expire)", c.ConnectionsMaxReauth.Milliseconds())
	}
	if c.ServerMaxReceiveSize < 1 {
		return fmt.Errorf("sasl.server.max.receive.size %d: must be between 1 and 2147483647", c.ServerMaxReceiveSize)
	}
	if c.FailedAuthenticationDelay < 0 || c.FailedAuthenticationDelay > math.MaxInt32*time.Millisecond {
		return fmt.Errorf("connection.failed.authentication.delay.ms %d: must be between 0 (no delay) and 2147483647", c.FailedAuthenticationDelay.Milliseconds())
	}
	return nil
}

// SASLListener is a SASL listener's configuration, resolved from
// SASLConfig and the listener's overrides.
type SASLListener struct {
	// Mechanisms are the enabled mechanisms, as configured; SaslHandshake
	// lists them.
	Mechanisms []string
	// plainUsers are PLAIN's users and their passwords, from the
	// user_<name> options of the listener's PlainLoginModule.
	plainUsers map[string]string
	// name is the listener's name, for logs.
	name string
	// oauth validates OAUTHBEARER tokens when the listener enables it;
	// oauthJWKS is its JWKS when it validates signed tokens, which the
	// Server keeps fresh (Run).
	oauth     tokenValidator
	oauthJWKS *jwks
	// Client is what this broker authenticates with when it connects to
	// the listener, set on the inter-broker listener only
	// (sasl.mechanism.inter.broker.protocol with the username and
	// password of that mechanism's JAAS config).
	Client sasl.Mechanism
}

// Enables reports whether the listener offers mechanism.
func (l *SASLListener) Enables(mechanism string) bool {
	return slices.Contains(l.Mechanisms, mechanism)
}

// Listener resolves the SASL configuration of the listener name of
// security protocol protocol (listener.security.protocol.map), with the
// listener.name.<listener>.* overrides given (SSL keys among them are
// ignored): nil for a PLAINTEXT or SSL listener, which may not have SASL
// overrides. A SASL listener must enable a mechanism; PLAIN needs a
// PlainLoginModule JAAS config; a mechanism's own JAAS config must name
// its login module. On the inter-broker listener the broker's own login
// is resolved too.
func (c SASLConfig) Listener(name, protocol string, overrides map[string]string, interBroker bool) (*SASLListener, error) {
	lower := strings.ToLower(name)
	key := func(sub string) string {
		if _, ok := overrides[sub]; ok {
			return ListenerPrefix + lower + "." + sub
		}
		return sub
	}
	var saslOverrides []string
	for _, sub := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := SASLListenerKeys[sub]; ok {
			saslOverrides = append(saslOverrides, sub)
		}
	}
	if protocol != ProtocolSASLPlaintext && protocol != ProtocolSASLSSL {
		if len(saslOverrides) > 0 {
			return nil, fmt.Errorf("%s: listener %s is %s, which has no SASL settings (SASL_PLAINTEXT and SASL_SSL listeners have)", key(saslOverrides[0]), name, protocol)
		}
		return nil, nil
	}
	l := &SASLListener{Mechanisms: c.EnabledMechanisms, name: name}
	if v, ok := overrides["sasl.enabled.mechanisms"]; ok {
		m, err := ParseMechanisms(key("sasl.enabled.mechanisms"), v)
		if err != nil {
			return nil, err
		}
		l.Mechanisms = m
	}
	if len(l.Mechanisms) == 0 {
		return nil, fmt.Errorf("%s: listener %s is %s in listener.security.protocol.map, so it needs SASL mechanisms: set sasl.enabled.mechanisms or %s to some of %s (Kafka's default, GSSAPI, is not supported)",
			key("sasl.enabled.mechanisms"), name, protocol, ListenerPrefix+lower+".sasl.enabled.mechanisms", strings.Join(saslMechanisms, ", "))
	}
	// jaas returns a mechanism's JAAS entry on this listener and the key
	// it came from; ok is false when it has none.
	jaas := func(mechanism string) (e jaasEntry, from string, ok bool, err error) {
		sub := jaasKey(mechanism)
		if v, set := overrides[sub]; set {
			from = key(sub)
			if e, err = parseJAASEntry(from, v); err != nil {
				return e, from, false, err
			}
			if e.module != loginModuleOf(mechanism) {
				return e, from, false, fmt.Errorf("%s: login module %s is not %s's (want %s)", from, e.module, mechanism, loginModuleOf(mechanism))
			}
			return e, from, true, nil
		}
		if c.JAASConfig != "" {
			if e, err = parseJAASEntry("sasl.jaas.config", c.JAASConfig); err == nil && e.module == loginModuleOf(mechanism) {
				return e, "sasl.jaas.config", true, nil
			}
		}
		return e, ListenerPrefix + lower + "." + sub, false, err
	}
	if l.Enables(mechanismPlain) {
		e, from, ok, err := jaas(mechanismPlain)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s: listener %s enables PLAIN, which needs a JAAS config naming its users: %s required user_NAME=\"PASSWORD\" ...; (or sasl.jaas.config)",
				from, name, plainLoginModule)
		}
		l.plainUsers = map[string]string{}
		for option, value := range e.options {
			if user, isUser := strings.CutPrefix(option, "user_"); isUser && user != "" {
				l.plainUsers[user] = value
			}
		}
	}
	for _, m := range []string{coord.ScramSHA256, coord.ScramSHA512} {
		if l.Enables(m) {
			if _, _, _, err := jaas(m); err != nil {
				return nil, err
			}
		}
	}
	if l.Enables(MechanismOAuthBearer) {
		e, from, ok, err := jaas(MechanismOAuthBearer)
		if err != nil {
			return nil, err
		}
		if err := c.oauthListener(l, lower, overrides, e, from, ok); err != nil {
			return nil, err
		}
	}
	if !interBroker {
		return l, nil
	}
	m := c.InterBrokerMechanism
	if m == MechanismOAuthBearer {
		return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol %s: brokers cannot log in to each other with OAUTHBEARER in tripod (no token retrieval); use PLAIN or SCRAM on the inter-broker listener %s", m, name)
	}
	if m == "" || !l.Enables(m) {
		return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol %q: the inter-broker listener %s is %s, so brokers authenticate to each other: set it to one of the listener's mechanisms (%s)",
			m, name, protocol, strings.Join(l.Mechanisms, ", "))
	}
	e, from, ok, err := jaas(m)
	if err != nil {
		return nil, err
	}
	user, password := e.options["username"], e.options["password"]
	if !ok || user == "" || password == "" {
		return nil, fmt.Errorf("%s: the inter-broker listener %s authenticates brokers with %s: its JAAS config needs the username and password this broker logs in with (%s required username=\"...\" password=\"...\" ...;)",
			from, name, m, loginModuleOf(m))
	}
	switch m {
	case mechanismPlain:
		l.Client = plain.Auth{User: user, Pass: password}.AsMechanism()
	case coord.ScramSHA256:
		l.Client = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case coord.ScramSHA512:
		l.Client = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	}
	return l, nil
}

// oauthListener resolves OAUTHBEARER's validation on listener l (its
// lower-cased name lower): the listener's
// oauthbearer.sasl.oauthbearer.* overrides over c.OAuthBearer, and the
// validator. Kafka's
// listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class
// chooses it; without one, tripod validates signed tokens when a JWKS
// endpoint is set, and accepts unsecured tokens otherwise (Kafka's
// default handler), with the unsecuredValidator* options of the JAAS
// entry e (read from from; hasJAAS false when there is none).
func (c SASLConfig) oauthListener(l *SASLListener, lower string, overrides map[string]string, e jaasEntry, from string, hasJAAS bool) error {
	prefix := ListenerPrefix + lower + ".oauthbearer."
	oc := c.OAuthBearer
	validatePrefix := "" // the broker-wide properties, unless overridden
	for _, name := range slices.Sorted(maps.Keys(OAuthBearerKeys)) {
		if v, ok := overrides["oauthbearer."+name]; ok {
			if err := OAuthBearerKeys[name].Set(&oc, prefix+name, v); err != nil {
				return err
			}
			validatePrefix = prefix
		}
	}
	if err := oc.Validate(validatePrefix); err != nil {
		return err
	}
	handler := strings.TrimSpace(overrides[oauthHandlerKey])
	if err := checkOAuthHandler(ListenerPrefix+lower+"."+oauthHandlerKey, handler); err != nil {
		return err
	}
	urlKey := "sasl.oauthbearer.jwks.endpoint.url"
	if _, ok := overrides["oauthbearer."+urlKey]; ok {
		urlKey = prefix + urlKey
	}
	switch {
	case handler == OAuthBearerValidatorHandler || handler == oauthBearerValidatorHandlerSecured || (handler == "" && oc.JWKSEndpointURL != ""):
		if oc.JWKSEndpointURL == "" {
			return fmt.Errorf("%s: listener %s validates OAUTHBEARER tokens with %s, which needs the identity provider's JWKS: set %s",
				ListenerPrefix+lower+"."+oauthHandlerKey, l.name, handler, urlKey)
		}
		l.oauthJWKS = newJWKS(oc, nil)
		l.oauth = &jwtValidator{cfg: oc, keys: l.oauthJWKS}
	default:
		var opts unsecuredOptions
		var err error
		if hasJAAS {
			if opts, err = parseUnsecuredOptions(from, e.options); err != nil {
				return err
			}
		} else {
			opts, _ = parseUnsecuredOptions(from, nil)
		}
		l.oauth = &unsecuredValidator{opts: opts}
	}
	return nil
}

// OAuthUnsecured reports whether the listener accepts unsecured
// OAUTHBEARER tokens (alg "none"), which anyone can make: for
// development only.
func (l *SASLListener) OAuthUnsecured() bool {
	_, ok := l.oauth.(*unsecuredValidator)
	return ok
}

// jaasEntry is one login module entry of a JAAS configuration, the value
// of Kafka's sasl.jaas.config:
//
//	<login module class> <control flag> (<option>=<value>)*;
type jaasEntry struct {
	module string
	// flag is required, requisite, sufficient or optional, lower-cased;
	// tripod's single login module ignores it, as Kafka's does.
	flag    string
	options map[string]string
}

// parseJAASEntry parses a JAAS config holding exactly one login module
// entry, as Kafka's JaasConfig and JaasContext read sasl.jaas.config:
// bytes up to ' ' are white space; '/' starts a comment to the end of the
// line (so do "//" and "/* */" blocks); '"' and '\” quote a string,
// which ends at its closing quote or the end of the line, with Java's
// backslash escapes; '=' and ';' stand alone; every other run of
// characters is a word. Errors name key.
func parseJAASEntry(key, value string) (jaasEntry, error) {
	fail := func(format string, args ...any) (jaasEntry, error) {
		return jaasEntry{}, fmt.Errorf("%s: %s (want a JAAS config: LoginModuleClass required option=\"value\" ...;)", key, fmt.Sprintf(format, args...))
	}
	toks, err := jaasTokens(value)
	if err != nil {
		return fail("%v", err)
	}
	var entries []jaasEntry
	for len(toks) > 0 {
		if !toks[0].word {
			return fail("login module name expected, found %q", toks[0].text)
		}
		e := jaasEntry{module: toks[0].text, options: map[string]string{}}
		if len(toks) < 2 || !toks[1].word {
			return fail("login module %s has no control flag", e.module)
		}
		e.flag = strings.ToLower(toks[1].text)
		switch e.flag {
		case "required", "requisite", "sufficient", "optional":
		default:
			return fail("login module %s: control flag %q is not required, requisite, sufficient or optional", e.module, toks[1].text)
		}
		toks = toks[2:]
		for len(toks) > 0 && toks[0].text != ";" {
			if !toks[0].word {
				return fail("login module %s: option name expected, found %q", e.module, toks[0].text)
			}
			if len(toks) < 3 || toks[1].text != "=" || toks[1].word || !toks[2].word {
				return fail("login module %s: option %s has no value (want %s=\"value\")", e.module, toks[0].text, toks[0].text)
			}
			e.options[toks[0].text] = toks[2].text
			toks = toks[3:]
		}
		if len(toks) == 0 {
			return fail("login module %s: the entry does not end with ';'", e.module)
		}
		toks = toks[1:]
		entries = append(entries, e)
	}
	if len(entries) != 1 {
		return fail("%d login modules, want exactly one", len(entries))
	}
	return entries[0], nil
}

// jaasToken is one token of a JAAS config: a word (a bare run or a
// quoted string, its quotes and escapes removed), or one of '=' and ';'.
type jaasToken struct {
	text string
	word bool
}

// jaasTokens splits s as Java's StreamTokenizer does with Kafka's
// JaasConfig syntax (see parseJAASEntry).
func jaasTokens(s string) ([]jaasToken, error) {
	var toks []jaasToken
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r <= ' ':
			i += size
		case r == '/':
			if strings.HasPrefix(s[i:], "/*") {
				end := strings.Index(s[i+2:], "*/")
				if end < 0 {
					return nil, fmt.Errorf("comment /* is not closed")
				}
				i += 2 + end + 2
				continue
			}
			// "//" and a lone '/' both comment out the rest of the line.
			end := strings.IndexAny(s[i:], "\r\n")
			if end < 0 {
				end = len(s) - i
			}
			i += end
		case r == '=' || r == ';':
			toks = append(toks, jaasToken{text: string(r)})
			i += size
		case r == '"' || r == '\'':
			text, n, err := jaasQuoted(s[i+1:], byte(r))
			if err != nil {
				return nil, err
			}
			toks = append(toks, jaasToken{text: text, word: true})
			i += 1 + n
		case r > 128 && r < 160:
			return nil, fmt.Errorf("unexpected character %U", r)
		default:
			j := i
			for j < len(s) {
				c, n := utf8.DecodeRuneInString(s[j:])
				if c <= ' ' || c == '/' || c == '=' || c == ';' || c == '"' || c == '\'' || (c > 128 && c < 160) {
					break
				}
				j += n
			}
			toks = append(toks, jaasToken{text: s[i:j], word: true})
			i = j
		}
	}
	return toks, nil
}

// jaasQuoted reads a quoted string's body from s, which follows the
// opening quote: up to the closing quote, or the end of the line or of
// s, which StreamTokenizer accepts as the end too. It returns the text
// with Java's escapes (\n, \t, \b, \f, \r, \a, \v, octal \ooo, and \x
// for any other x) replaced, and how many bytes of s it read.
func jaasQuoted(s string, quote byte) (string, int, error) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == quote:
			return b.String(), i + 1, nil
		case c == '\n' || c == '\r':
			return b.String(), i, nil
		case c == '\\' && i+1 < len(s):
			i++
			e := s[i]
			switch e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '0', '1', '2', '3', '4', '5', '6', '7':
				j := i + 1
				limit := i + 2
				if e <= '3' {
					limit = i + 3
				}
				for j < len(s) && j < limit && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				n, _ := strconv.ParseUint(s[i:j], 8, 8)
				b.WriteRune(rune(n))
				i = j
				continue
			default:
				r, size := utf8.DecodeRuneInString(s[i:])
				b.WriteRune(r)
				i += size
				continue
			}
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), i, nil
}
