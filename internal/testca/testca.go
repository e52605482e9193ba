// Package testca makes throwaway certificate authorities and certificates
// for tests of tripod's TLS: a CA per test, certificates valid for
// 127.0.0.1 and localhost as servers and as clients, and the tls.Config
// values and PEM files built from them. Nothing it makes is checked in.
// The package must not be imported outside tests.
package testca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// CA is a self-signed certificate authority made for one test. Its
// methods are safe for concurrent use.
type CA struct {
	// Cert is the CA's certificate, PEM its PEM encoding.
	Cert *x509.Certificate
	PEM  []byte

	key    crypto.Signer
	mu     sync.Mutex
	serial int64
}

// New makes a CA named cn, valid from an hour ago for a day.
func New(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("CA %s: key: %v", cn, err)
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
		t.Fatalf("CA %s: certificate: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("CA %s: parse certificate: %v", cn, err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key, serial: 1}
}

// Issue makes a certificate with common name cn, valid for 127.0.0.1 and
// localhost as a server and as a client, and returns its PEM and its
// key's PEM (PKCS#8).
func (ca *CA) Issue(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("certificate %s: key: %v", cn, err)
	}
	ca.mu.Lock()
	ca.serial++
	serial := ca.serial
	ca.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("certificate %s: %v", cn, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("certificate %s: marshal key: %v", cn, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
}

// KeyPair is a fresh certificate for cn with its key.
func (ca *CA) KeyPair(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, cn)
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("certificate %s: key pair: %v", cn, err)
	}
	return c
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ServerConfig is a server's TLS configuration presenting a certificate
// for cn and, with requireClientCert, requiring a client certificate that
// chains to the CA.
func (ca *CA) ServerConfig(t testing.TB, cn string, requireClientCert bool) *tls.Config {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.KeyPair(t, cn)}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = ca.Pool()
	}
	return cfg
}

// ClientConfig is a client's TLS configuration trusting the CA and, when
// cn is not empty, presenting a certificate for cn.
func (ca *CA) ClientConfig(t testing.TB, cn string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cn != "" {
		cfg.Certificates = []tls.Certificate{ca.KeyPair(t, cn)}
	}
	return cfg
}

// WriteKeystore writes a fresh certificate for cn and its key into
// dir/name as a KIP-651 PEM keystore (key, then certificate) and returns
// the path.
func (ca *CA) WriteKeystore(t testing.TB, dir, name, cn string) string {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, cn)
	return write(t, filepath.Join(dir, name), append(keyPEM, certPEM...))
}

// WriteCertAndKey writes a fresh certificate for cn into dir/name.crt and
// its key into dir/name.key, as etcd's --cert-file and --key-file want
// them, and returns both paths.
func (ca *CA) WriteCertAndKey(t testing.TB, dir, name, cn string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, cn)
	return write(t, filepath.Join(dir, name+".crt"), certPEM), write(t, filepath.Join(dir, name+".key"), keyPEM)
}

// WriteTruststore writes the CA's certificate into dir/name and returns
// the path.
func (ca *CA) WriteTruststore(t testing.TB, dir, name string) string {
	t.Helper()
	return write(t, filepath.Join(dir, name), ca.PEM)
}

func write(t testing.TB, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}
