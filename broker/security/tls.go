package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SSLConfig is the TLS configuration of an SSL listener under Kafka's
// ssl.* property names; listener.name.<name>.ssl.* overrides a property
// for one listener. Keys and certificates are PEM (KIP-651);
// DefaultSSLConfig gives the defaults, Validate checks the settings of
// one SSL listener and NewTLSStore reads the files.
type SSLConfig struct {
	// KeystoreType is the format of the keystore (ssl.keystore.type):
	// PEM is the only one. Default PEM (Kafka's default, JKS, is refused).
	KeystoreType string
	// KeystoreLocation is a PEM file holding the listener's private key
	// and its certificate chain, leaf first (ssl.keystore.location). The
	// key is PKCS#8, PKCS#1 or SEC 1, and unencrypted. Default empty.
	KeystoreLocation string
	// KeystoreCertificateChain and KeystoreKey are the same in-line, PEM
	// text instead of a file (ssl.keystore.certificate.chain,
	// ssl.keystore.key); both or neither, and not with KeystoreLocation.
	// Default empty.
	KeystoreCertificateChain string
	KeystoreKey              string
	// KeyPassword is the key's password (ssl.key.password): encrypted keys
	// are not supported, so it must be empty. Default empty.
	KeyPassword string
	// TruststoreType is the format of the truststore
	// (ssl.truststore.type): PEM only. Default PEM.
	TruststoreType string
	// TruststoreLocation is a PEM file of the CA certificates that
	// client certificates (and, on the inter-broker listener, the other
	// brokers' certificates) must chain to (ssl.truststore.location).
	// Default empty: no client certificates can be verified, and peers
	// are verified against the system's roots.
	TruststoreLocation string
	// TruststoreCertificates is the same in-line
	// (ssl.truststore.certificates), not with TruststoreLocation. Default
	// empty.
	TruststoreCertificates string
	// ClientAuth is whether the listener asks clients for a certificate
	// (ssl.client.auth): none, requested (verified if given) or required.
	// A requested or required certificate needs a truststore. Default
	// none.
	ClientAuth string
	// EnabledProtocols are the TLS versions allowed
	// (ssl.enabled.protocols): TLSv1.2 and TLSv1.3. Default both.
	EnabledProtocols []string
	// CipherSuites are the TLS 1.2 cipher suites allowed, by their IANA
	// names as Go's crypto/tls spells them (ssl.cipher.suites); TLS 1.3
	// suites may be named but are always enabled, as Go does not make
	// them configurable. Default empty: Go's defaults.
	CipherSuites []string
	// EndpointIdentificationAlgorithm is how a broker checks the
	// certificate of a broker it connects to on the inter-broker listener
	// (ssl.endpoint.identification.algorithm): "https" checks the host
	// name against the certificate, "" checks only its chain. Default
	// https.
	EndpointIdentificationAlgorithm string
	// PrincipalMappingRules turn a client certificate's subject, in RFC
	// 2253 form, into its principal's name (ssl.principal.mapping.rules,
	// Kafka's "RULE:pattern/replacement/[LU], ..., DEFAULT"). Default
	// DEFAULT: the subject itself.
	PrincipalMappingRules string
}

// DefaultSSLConfig returns the defaults of the ssl.* properties.
func DefaultSSLConfig() SSLConfig {
	return SSLConfig{
		KeystoreType:                    "PEM",
		TruststoreType:                  "PEM",
		ClientAuth:                      "none",
		EnabledProtocols:                []string{"TLSv1.2", "TLSv1.3"},
		EndpointIdentificationAlgorithm: "https",
		PrincipalMappingRules:           "DEFAULT",
	}
}

// SSLProperty is one ssl.* property: how to set it on an SSLConfig and how to
// print it back; sensitive ones are not shown by DescribeConfigs.
type SSLProperty struct {
	// Set sets the property from its text; key names it in errors.
	Set func(s *SSLConfig, key, value string) error
	// Get prints the property back.
	Get func(s SSLConfig) string
	// Sensitive properties are not shown by DescribeConfigs.
	Sensitive bool
}

// stringSSLProperty is the SSLProperty of a string property.
func stringSSLProperty(field func(*SSLConfig) *string, sensitive bool) SSLProperty {
	return SSLProperty{
		Set:       func(s *SSLConfig, _, v string) error { *field(s) = strings.TrimSpace(v); return nil },
		Get:       func(s SSLConfig) string { return *field(&s) },
		Sensitive: sensitive,
	}
}

// listSSLProperty is the SSLProperty of a comma-separated list property.
func listSSLProperty(field func(*SSLConfig) *[]string) SSLProperty {
	return SSLProperty{
		Set: func(s *SSLConfig, _, v string) error {
			var items []string
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					items = append(items, item)
				}
			}
			*field(s) = items
			return nil
		},
		Get: func(s SSLConfig) string { return strings.Join(*field(&s), ",") },
	}
}

// SSLKeys are the ssl.* properties, by Kafka name. Each may also be set
// for one listener as listener.name.<lower-cased name>.<key>.
var SSLKeys = map[string]SSLProperty{
	"ssl.keystore.type":     stringSSLProperty(func(s *SSLConfig) *string { return &s.KeystoreType }, false),
	"ssl.keystore.location": stringSSLProperty(func(s *SSLConfig) *string { return &s.KeystoreLocation }, false),
	// In-line PEM keeps its line breaks: only the ends are trimmed.
	"ssl.keystore.certificate.chain":        stringSSLProperty(func(s *SSLConfig) *string { return &s.KeystoreCertificateChain }, true),
	"ssl.keystore.key":                      stringSSLProperty(func(s *SSLConfig) *string { return &s.KeystoreKey }, true),
	"ssl.key.password":                      stringSSLProperty(func(s *SSLConfig) *string { return &s.KeyPassword }, true),
	"ssl.truststore.type":                   stringSSLProperty(func(s *SSLConfig) *string { return &s.TruststoreType }, false),
	"ssl.truststore.location":               stringSSLProperty(func(s *SSLConfig) *string { return &s.TruststoreLocation }, false),
	"ssl.truststore.certificates":           stringSSLProperty(func(s *SSLConfig) *string { return &s.TruststoreCertificates }, true),
	"ssl.client.auth":                       stringSSLProperty(func(s *SSLConfig) *string { return &s.ClientAuth }, false),
	"ssl.enabled.protocols":                 listSSLProperty(func(s *SSLConfig) *[]string { return &s.EnabledProtocols }),
	"ssl.cipher.suites":                     listSSLProperty(func(s *SSLConfig) *[]string { return &s.CipherSuites }),
	"ssl.endpoint.identification.algorithm": stringSSLProperty(func(s *SSLConfig) *string { return &s.EndpointIdentificationAlgorithm }, false),
	"ssl.principal.mapping.rules":           stringSSLProperty(func(s *SSLConfig) *string { return &s.PrincipalMappingRules }, false),
}

// tlsVersions are the ssl.enabled.protocols tripod accepts.
var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// clientAuthTypes are the values of ssl.client.auth.
var clientAuthTypes = map[string]tls.ClientAuthType{
	"none": tls.NoClientCert, "requested": tls.VerifyClientCertIfGiven, "required": tls.RequireAndVerifyClientCert,
}

// tls13Suites are the TLS 1.3 cipher suites' names, which
// ssl.cipher.suites may list but cannot turn off.
var tls13Suites = []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

// Validate checks the TLS settings of the SSL listener named listener,
// without reading any file; key names the property each setting came
// from.
func (s SSLConfig) Validate(listener string, key func(string) string) error {
	if !strings.EqualFold(s.KeystoreType, "PEM") {
		return fmt.Errorf("%s %q: listener %s: only PEM keystores are supported (allowed: PEM)", key("ssl.keystore.type"), s.KeystoreType, listener)
	}
	if !strings.EqualFold(s.TruststoreType, "PEM") {
		return fmt.Errorf("%s %q: listener %s: only PEM truststores are supported (allowed: PEM)", key("ssl.truststore.type"), s.TruststoreType, listener)
	}
	inline := s.KeystoreCertificateChain != "" || s.KeystoreKey != ""
	switch {
	case s.KeystoreLocation != "" && inline:
		return fmt.Errorf("%s and %s: listener %s: give the keystore as a file or in-line, not both",
			key("ssl.keystore.location"), key("ssl.keystore.certificate.chain"), listener)
	case inline && (s.KeystoreCertificateChain == "" || s.KeystoreKey == ""):
		return fmt.Errorf("%s and %s: listener %s: an in-line keystore needs both the certificate chain and the key",
			key("ssl.keystore.certificate.chain"), key("ssl.keystore.key"), listener)
	case s.KeystoreLocation == "" && !inline:
		return fmt.Errorf("%s: listener %s is SSL and needs a key and certificate: set %s (a PEM file with both), or %s and %s",
			key("ssl.keystore.location"), listener, key("ssl.keystore.location"), key("ssl.keystore.certificate.chain"), key("ssl.keystore.key"))
	}
	if s.KeyPassword != "" {
		return fmt.Errorf("%s: listener %s: encrypted private keys are not supported; give the key unencrypted and protect its file", key("ssl.key.password"), listener)
	}
	if s.TruststoreLocation != "" && s.TruststoreCertificates != "" {
		return fmt.Errorf("%s and %s: listener %s: give the truststore as a file or in-line, not both",
			key("ssl.truststore.location"), key("ssl.truststore.certificates"), listener)
	}
	auth, ok := clientAuthTypes[strings.ToLower(s.ClientAuth)]
	if !ok {
		return fmt.Errorf("%s %q: listener %s: must be none, requested or required", key("ssl.client.auth"), s.ClientAuth, listener)
	}
	if auth != tls.NoClientCert && s.TruststoreLocation == "" && s.TruststoreCertificates == "" {
		return fmt.Errorf("%s %s: listener %s: verifying client certificates needs the CA certificates in %s",
			key("ssl.client.auth"), s.ClientAuth, listener, key("ssl.truststore.location"))
	}
	if _, _, err := tlsVersionRange(s.EnabledProtocols); err != nil {
		return fmt.Errorf("%s %q: listener %s: %w", key("ssl.enabled.protocols"), strings.Join(s.EnabledProtocols, ","), listener, err)
	}
	if _, err := cipherSuiteIDs(s.CipherSuites); err != nil {
		return fmt.Errorf("%s %q: listener %s: %w", key("ssl.cipher.suites"), strings.Join(s.CipherSuites, ","), listener, err)
	}
	switch strings.ToLower(s.EndpointIdentificationAlgorithm) {
	case "https", "":
	default:
		return fmt.Errorf("%s %q: listener %s: must be https or empty", key("ssl.endpoint.identification.algorithm"), s.EndpointIdentificationAlgorithm, listener)
	}
	if _, err := ParsePrincipalMappingRules(s.PrincipalMappingRules); err != nil {
		return fmt.Errorf("%s %q: listener %s: %w", key("ssl.principal.mapping.rules"), s.PrincipalMappingRules, listener, err)
	}
	return nil
}

// tlsVersionRange returns the lowest and highest TLS version of
// ssl.enabled.protocols.
func tlsVersionRange(protocols []string) (uint16, uint16, error) {
	if len(protocols) == 0 {
		return 0, 0, errors.New("must name at least one protocol (allowed: TLSv1.2, TLSv1.3)")
	}
	var lo, hi uint16
	for _, p := range protocols {
		v, ok := tlsVersions[p]
		if !ok {
			return 0, 0, fmt.Errorf("protocol %q is not supported (allowed: TLSv1.2, TLSv1.3)", p)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return lo, hi, nil
}

// cipherSuiteIDs returns the TLS 1.2 suites of ssl.cipher.suites; nil
// when it names none (Go's defaults).
func cipherSuiteIDs(names []string) ([]uint16, error) {
	var ids []uint16
	for _, name := range names {
		if slices.Contains(tls13Suites, name) {
			continue
		}
		i := slices.IndexFunc(tls.CipherSuites(), func(cs *tls.CipherSuite) bool { return cs.Name == name })
		if i < 0 {
			if slices.ContainsFunc(tls.InsecureCipherSuites(), func(cs *tls.CipherSuite) bool { return cs.Name == name }) {
				return nil, fmt.Errorf("cipher suite %s is insecure and not allowed", name)
			}
			var known []string
			for _, cs := range tls.CipherSuites() {
				known = append(known, cs.Name)
			}
			return nil, fmt.Errorf("unknown cipher suite %q (allowed: %s, and the TLS 1.3 suites %s)",
				name, strings.Join(known, ", "), strings.Join(tls13Suites, ", "))
		}
		ids = append(ids, tls.CipherSuites()[i].ID)
	}
	return ids, nil
}

// TLSStore holds the key material of one SSL listener, as its ssl.*
// settings give it: the certificate chain and key it presents, and the
// CA certificates it trusts. Files are read again when they change: every
// server handshake and every new inter-broker client first compares the
// files' size, modification time and inode with those of the loaded
// material (a stat each), so a renewed certificate is used from the next
// connection on, without a goroutine or a restart. A file that does not
// load then keeps the previous material, and the error is logged once.
// It is safe for concurrent use.
type TLSStore struct {
	// name is the listener's (or the coordination client's) name, ssl
	// its settings and key the property each setting came from.
	name   string
	ssl    SSLConfig
	key    func(string) string
	logger hclog.Logger
	// clientAuth, minVersion, maxVersion and cipherSuites are the
	// settings that do not come from files.
	clientAuth             tls.ClientAuthType
	minVersion, maxVersion uint16
	cipherSuites           []uint16

	mu sync.Mutex
	// stamps are the files' stamps when material was read.
	stamps map[string]fileStamp
	// material is the loaded key material, server the listener's server
	// configuration built from it.
	material *tlsMaterial
	server   *tls.Config
	// failed is the last reload error logged, so a bad file is logged
	// once rather than at every handshake.
	failed string
}

// tlsMaterial is a listener's loaded key material.
type tlsMaterial struct {
	// cert is the certificate chain and private key.
	cert tls.Certificate
	// roots are the truststore's CA certificates; nil without a
	// truststore.
	roots *x509.CertPool
}

// fileStamp tells a file's versions apart without reading it.
type fileStamp struct {
	size    int64
	modTime time.Time
	inode   uint64
}

// NewTLSStore loads the key material of the listener name with settings
// ssl, validated (Validate); key names the property each setting came
// from, and an error names the property whose file or PEM text is bad.
func NewTLSStore(name string, ssl SSLConfig, key func(string) string, logger hclog.Logger) (*TLSStore, error) {
	minV, maxV, _ := tlsVersionRange(ssl.EnabledProtocols)
	suites, _ := cipherSuiteIDs(ssl.CipherSuites)
	s := &TLSStore{
		name: name, ssl: ssl, key: key, logger: logger,
		clientAuth: clientAuthTypes[strings.ToLower(ssl.ClientAuth)],
		minVersion: minV, maxVersion: maxV, cipherSuites: suites,
	}
	stamps := s.stampFiles()
	m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.setLocked(m, stamps)
	return s, nil
}

// files are the files the material is read from.
func (s *TLSStore) files() []string {
	var out []string
	for _, f := range []string{s.ssl.KeystoreLocation, s.ssl.TruststoreLocation} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// stampFiles stats the files; a file that cannot be stat'ed gets the
// zero stamp.
func (s *TLSStore) stampFiles() map[string]fileStamp {
	stamps := map[string]fileStamp{}
	for _, f := range s.files() {
		fi, err := os.Stat(f)
		if err != nil {
			stamps[f] = fileStamp{}
			continue
		}
		st := fileStamp{size: fi.Size(), modTime: fi.ModTime()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.inode = sys.Ino
		}
		stamps[f] = st
	}
	return stamps
}

// load reads and parses the key material.
func (s *TLSStore) load() (*tlsMaterial, error) {
	ssl, key := s.ssl, s.key
	certPEM, keyPEM := inlinePEM(ssl.KeystoreCertificateChain), inlinePEM(ssl.KeystoreKey)
	source := key("ssl.keystore.certificate.chain") + " and " + key("ssl.keystore.key")
	if strings.Contains(ssl.KeystoreKey, "ENCRYPTED") {
		return nil, fmt.Errorf("%s: listener %s: %w", key("ssl.keystore.key"), s.name, errEncryptedKey)
	}
	if ssl.KeystoreLocation != "" {
		data, err := os.ReadFile(ssl.KeystoreLocation)
		if err != nil {
			return nil, fmt.Errorf("%s: listener %s: %w", key("ssl.keystore.location"), s.name, err)
		}
		certPEM, keyPEM = data, data
		source = key("ssl.keystore.location") + " " + ssl.KeystoreLocation
	}
	m := &tlsMaterial{}
	// A listener always has a keystore (Validate); a client of a
	// coordination backend may have none, and then presents no
	// certificate.
	if ssl.KeystoreLocation != "" || ssl.KeystoreCertificateChain != "" || ssl.KeystoreKey != "" {
		cert, err := parseKeystore(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: listener %s: %w", source, s.name, err)
		}
		m.cert = cert
	}
	trustPEM := inlinePEM(ssl.TruststoreCertificates)
	source = key("ssl.truststore.certificates")
	if ssl.TruststoreLocation != "" {
		data, err := os.ReadFile(ssl.TruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("%s: listener %s: %w", key("ssl.truststore.location"), s.name, err)
		}
		trustPEM = data
		source = key("ssl.truststore.location") + " " + ssl.TruststoreLocation
	}
	if len(trustPEM) > 0 {
		roots, err := parseTruststore(trustPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: listener %s: %w", source, s.name, err)
		}
		m.roots = roots
	}
	return m, nil
}

// pemBlock is one PEM block written on one line or on several.
var pemBlock = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----`)

// inlinePEM restores the line breaks of PEM text given in-line: a
// properties file's continuation lines join a PEM block's lines with
// spaces, as Kafka's documentation writes ssl.keystore.key.
func inlinePEM(text string) []byte {
	var out []byte
	for _, m := range pemBlock.FindAllStringSubmatch(text, -1) {
		body := strings.Join(strings.Fields(m[2]), "")
		out = fmt.Appendf(out, "-----BEGIN %s-----\n%s\n-----END %s-----\n", m[1], body, m[3])
	}
	return out
}

// parseKeystore reads a certificate chain (leaf first) from certPEM and
// one unencrypted private key from keyPEM (which may be the same text).
func parseKeystore(certPEM, keyPEM []byte) (tls.Certificate, error) {
	certs, _, err := splitPEM(certPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	_, keys, err := splitPEM(keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	switch {
	case len(certs) == 0:
		return tls.Certificate{}, errors.New("no PEM CERTIFICATE block")
	case len(keys) == 0:
		return tls.Certificate{}, errors.New("no PEM PRIVATE KEY block")
	case len(keys) > 1:
		return tls.Certificate{}, fmt.Errorf("%d PEM private keys, want one", len(keys))
	}
	var chain []byte
	for _, c := range certs {
		chain = append(chain, pem.EncodeToMemory(c)...)
	}
	return tls.X509KeyPair(chain, pem.EncodeToMemory(keys[0]))
}

// errEncryptedKey refuses an encrypted private key.
var errEncryptedKey = errors.New("the private key is encrypted; tripod needs it unencrypted (ssl.key.password is not supported)")

// splitPEM returns data's CERTIFICATE blocks and private key blocks
// (PKCS#8 "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"); an
// encrypted key is an error.
func splitPEM(data []byte) (certs, keys []*pem.Block, err error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, keys, nil
		}
		switch {
		case block.Type == "CERTIFICATE":
			certs = append(certs, block)
		case block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED"):
			return nil, nil, errEncryptedKey
		case strings.HasSuffix(block.Type, "PRIVATE KEY"):
			keys = append(keys, block)
		}
	}
}

// parseTruststore reads CA certificates.
func parseTruststore(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return pool, nil
}

// setLocked installs m, read from files with stamps. The caller holds
// s.mu or is the only one to know s.
func (s *TLSStore) setLocked(m *tlsMaterial, stamps map[string]fileStamp) {
	s.material, s.stamps, s.failed = m, stamps, ""
	s.server = &tls.Config{
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   s.clientAuth,
		ClientCAs:    m.roots,
		MinVersion:   s.minVersion,
		MaxVersion:   s.maxVersion,
		CipherSuites: s.cipherSuites,
	}
}

// current returns the material, read again first if a file changed.
func (s *TLSStore) current() (*tlsMaterial, *tls.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamps := s.stampFiles()
	if !maps.EqualFunc(stamps, s.stamps, fileStamp.equal) {
		m, err := s.load()
		switch {
		case err == nil:
			s.setLocked(m, stamps)
			var notAfter time.Time
			if m.cert.Leaf != nil {
				notAfter = m.cert.Leaf.NotAfter
			}
			s.logger.Info("TLS key material reloaded", "listener", s.name, "files", s.files(),
				"not_after", notAfter)
		case err.Error() != s.failed:
			s.failed = err.Error()
			s.logger.Error("TLS key material changed but does not load; the previous one stays in use", "listener", s.name, "error", err)
		}
	}
	return s.material, s.server
}

// equal reports whether two stamps are of the same version of a file.
func (f fileStamp) equal(o fileStamp) bool {
	return f.size == o.size && f.modTime.Equal(o.modTime) && f.inode == o.inode
}

// ServerConfig is the listener's server configuration: each handshake
// takes the material as it is then.
func (s *TLSStore) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: s.minVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			_, cfg := s.current()
			return cfg, nil
		},
	}
}

// ClientConfig is the configuration of a connection to another broker's
// listener of this name: its certificate must chain to the truststore
// (the system's roots without one) and, with
// ssl.endpoint.identification.algorithm=https, name the host dialled
// (franz-go sets ServerName to it); this broker presents its own
// certificate when asked.
func (s *TLSStore) ClientConfig() *tls.Config {
	m, _ := s.current()
	cfg := &tls.Config{
		RootCAs:      m.roots,
		MinVersion:   s.minVersion,
		MaxVersion:   s.maxVersion,
		CipherSuites: s.cipherSuites,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m, _ := s.current()
			return &m.cert, nil
		},
	}
	if s.ssl.EndpointIdentificationAlgorithm == "" {
		// The chain is still verified, by VerifyConnection, only not
		// against the host name.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the broker presented no certificate")
			}
			opts := x509.VerifyOptions{Roots: m.roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg
}
