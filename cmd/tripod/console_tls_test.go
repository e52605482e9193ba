package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tripodmq/tripod/internal/testca"
)

// TestConsoleHTTPS runs `tripod console --tls-cert --tls-key`: it prints
// an https URL, serves its pages and API to a client that trusts the
// certificate's CA, and nothing in plain HTTP.
func TestConsoleHTTPS(t *testing.T) {
	broker := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	ca := testca.New(t, "console CA")
	cert, key := ca.WriteCertAndKey(t, t.TempDir(), "console", "console")
	url, _, _ := startWatching(t, regexp.MustCompile(`serving (https://\S+)`), "console",
		"--bootstrap", broker.addr, "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	for _, path := range []string{"", "api/cluster"} {
		resp, err := client.Get(url + path)
		if err != nil {
			t.Fatalf("GET %s%s over TLS: %v", url, path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s%s over TLS: %d %.200s, want 200", url, path, resp.StatusCode, body)
		}
	}
	plain := "http://" + strings.TrimPrefix(url, "https://")
	if resp, err := http.Get(plain); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s in plain HTTP: 200, want no page", plain)
		}
	}
}
