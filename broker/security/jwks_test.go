package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/hashicorp/go-hclog"
)

// TestJWKSFetchRetryAndExpedite runs a JWKS against a provider that
// fails its first two fetches: Run retries with backoff until the keys
// load; a key id it lacks asks for an early fetch, which finds the
// provider's new key; a second ask within a minute does not fetch
// again; Run returns when its context ends.
func TestJWKSFetchRetryAndExpedite(t *testing.T) {
	newKey := func(kid string) jose.JSONWebKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return jose.JSONWebKey{Key: k.Public(), KeyID: kid, Algorithm: "ES256", Use: "sig"}
	}
	var (
		mu      sync.Mutex
		served  = []jose.JSONWebKey{newKey("a")}
		fetches atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fetches.Add(1) <= 2 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: served})
	}))
	defer srv.Close()
	cfg := DefaultOAuthBearerConfig()
	cfg.JWKSEndpointURL, cfg.JWKSEndpointRetryBackoff, cfg.JWKSEndpointRetryBackoffMax = srv.URL, time.Millisecond, 4*time.Millisecond
	j := newJWKS(cfg, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		j.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitUntil("the JWKS to load after two failed fetches", func() bool {
		keys, ok := j.Keys("a")
		return ok && len(keys) == 1
	})
	if n := fetches.Load(); n != 3 {
		t.Fatalf("fetches: got %d, want 3 (two failures, one success)", n)
	}
	mu.Lock()
	served = append(served, newKey("b"))
	mu.Unlock()
	waitUntil("key b after an early fetch", func() bool {
		keys, _ := j.Keys("b")
		return len(keys) == 1
	})
	before := fetches.Load()
	for range 10 {
		j.Keys("c")
	}
	waitUntil("the early fetch asked by key c", func() bool { return fetches.Load() == before+1 })
	for range 10 {
		j.Keys("c")
	}
	if n := fetches.Load(); n != before+1 {
		t.Fatalf("fetches after asking again for c within a minute: got %d, want %d", n, before+1)
	}
}
