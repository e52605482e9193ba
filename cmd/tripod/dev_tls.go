package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// devTLS is the throwaway public key infrastructure of `tripod dev --tls`:
// a CA made for this run, one certificate every broker presents (for
// 127.0.0.1 and localhost, usable as server and as client, so brokers
// verify each other too), and a client certificate, all PEM files in Dir.
type devTLS struct {
	// Dir holds the files.
	Dir string
	// CA is the CA certificate (the brokers' and clients' truststore).
	CA string
	// BrokerKeystore is the brokers' keystore: private key, certificate
	// and the CA's, in one PEM file (ssl.keystore.type=PEM, KIP-651).
	BrokerKeystore string
	// ClientCert and ClientKey are the client certificate (CN=client, so
	// principal User:CN=client) and its private key.
	ClientCert, ClientKey string
	// ClientConfig trusts the CA and presents the client certificate.
	ClientConfig *tls.Config
}

// devTLSValidity is how long dev's certificates are valid.
const devTLSValidity = 30 * 24 * time.Hour

// makeDevTLS writes a new CA and certificates to dir.
func makeDevTLS(dir string) (*devTLS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls dir: %w", err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tripod dev CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(devTLSValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	issue := func(cn string, usage []x509.ExtKeyUsage, server bool) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(devTLSValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
		}
		if server {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
	}
	brokerCert, brokerKey, err := issue("tripod-broker", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true)
	if err != nil {
		return nil, fmt.Errorf("broker certificate: %w", err)
	}
	clientCert, clientKey, err := issue("client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	d := &devTLS{
		Dir:            dir,
		CA:             filepath.Join(dir, "ca.pem"),
		BrokerKeystore: filepath.Join(dir, "broker.pem"),
		ClientCert:     filepath.Join(dir, "client.pem"),
		ClientKey:      filepath.Join(dir, "client-key.pem"),
	}
	files := []struct {
		path string
		data []byte
	}{
		{d.CA, caPEM},
		{d.BrokerKeystore, concat(brokerKey, brokerCert, caPEM)},
		{d.ClientCert, concat(clientCert, caPEM)},
		{d.ClientKey, clientKey},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	pair, err := tls.X509KeyPair(concat(clientCert, caPEM), clientKey)
	if err != nil {
		return nil, fmt.Errorf("client key pair: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	d.ClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{pair}}
	return d, nil
}

// brokerSets are the broker properties of an SSL listener with d's
// keystore and truststore; client certificates are verified when given
// (ssl.client.auth=requested), so clients may connect with the CA alone.
func (d *devTLS) brokerSets() []string {
	return []string{
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + d.BrokerKeystore,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + d.CA,
		"ssl.client.auth=requested",
	}
}

// printClientSettings tells how kcat, franz-go and tripod's own commands
// reach the cluster over TLS.
func (d *devTLS) printClientSettings(out io.Writer, self, bootstrap string) {
	fmt.Fprintf(out, "tls: CA, broker and client certificates in %s (valid %d days)\n", d.Dir, int(devTLSValidity.Hours()/24))
	fmt.Fprintf(out, "tls: kcat -b %s -X security.protocol=SSL -X ssl.ca.location=%s -X ssl.certificate.location=%s -X ssl.key.location=%s -L\n",
		bootstrap, d.CA, d.ClientCert, d.ClientKey)
	fmt.Fprintf(out, "tls: franz-go: pair, _ := tls.LoadX509KeyPair(%q, %q); pool := x509.NewCertPool(); ca, _ := os.ReadFile(%q); pool.AppendCertsFromPEM(ca);"+
		" kgo.NewClient(kgo.SeedBrokers(%q), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}))\n",
		d.ClientCert, d.ClientKey, d.CA, bootstrap)
	fmt.Fprintf(out, "tls: Java clients: security.protocol=SSL ssl.truststore.type=PEM ssl.truststore.location=%s\n", d.CA)
	fmt.Fprintf(out, "tls: %s topics list --bootstrap %s --tls-ca %s\n", self, bootstrap, d.CA)
}

// serial returns a random certificate serial number.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // never fails (crypto/rand)
	return n
}

// concat joins PEM texts.
func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
