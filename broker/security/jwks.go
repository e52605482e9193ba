package security

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/hashicorp/go-hclog"
)

// jwksMaxBytes bounds a JWKS document: a provider's key set is a few
// kilobytes; more is refused rather than read.
const jwksMaxBytes = 1 << 20

// jwksMissingKeyInterval is how often a key id the JWKS lacks may ask
// for an early fetch, as Kafka's RefreshingHttpsJwks: a client sending
// tokens of an unknown key cannot make the broker hammer the provider.
const jwksMissingKeyInterval = time.Minute

// jwksFetchTimeout bounds one fetch of the JWKS.
const jwksFetchTimeout = 10 * time.Second

// jwks is a JWKS fetched from an identity provider and kept fresh: Run
// fetches it at once, again every refresh, after a failure with a backoff
// doubling from retryBackoff to retryBackoffMax, and early when a token
// names a key it lacks (Keys). It is safe for concurrent use.
type jwks struct {
	url                           string
	refresh                       time.Duration
	retryBackoff, retryBackoffMax time.Duration
	client                        *http.Client
	logger                        hclog.Logger
	// expedite asks Run for a fetch before the next refresh.
	expedite chan struct{}

	// mu guards keys, the last set fetched (nil before one was), and
	// missing, when each unknown key id last asked for a fetch.
	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	missing map[string]time.Time
}

// newJWKS returns the JWKS of c's endpoint; nothing is fetched before
// Run.
func newJWKS(c OAuthBearerConfig, logger hclog.Logger) *jwks {
	return &jwks{
		url: c.JWKSEndpointURL, refresh: c.JWKSEndpointRefresh,
		retryBackoff: c.JWKSEndpointRetryBackoff, retryBackoffMax: c.JWKSEndpointRetryBackoffMax,
		client:   &http.Client{Timeout: jwksFetchTimeout},
		logger:   logger,
		expedite: make(chan struct{}, 1),
		missing:  map[string]time.Time{},
	}
}

// Keys returns the keys a token naming kid ("" for none) may be signed
// with: the key of that id, or every key when the token names none. A
// kid the JWKS lacks asks Run for an early fetch (at most once a minute
// per kid); the token at hand is still refused. ok is false before the
// JWKS was first fetched.
func (j *jwks) Keys(kid string) (keys []jose.JSONWebKey, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.keys == nil {
		j.askFetchLocked(kid)
		return nil, false
	}
	if kid == "" {
		return j.keys.Keys, true
	}
	keys = j.keys.Key(kid)
	if len(keys) == 0 {
		j.askFetchLocked(kid)
	}
	return keys, true
}

// askFetchLocked asks Run for an early fetch on behalf of kid, unless
// kid asked within jwksMissingKeyInterval. j.mu is held.
func (j *jwks) askFetchLocked(kid string) {
	now := time.Now()
	if last, ok := j.missing[kid]; ok && now.Sub(last) < jwksMissingKeyInterval {
		return
	}
	for k, last := range j.missing {
		if now.Sub(last) >= jwksMissingKeyInterval {
			delete(j.missing, k)
		}
	}
	j.missing[kid] = now
	select {
	case j.expedite <- struct{}{}:
	default:
	}
}

// Run keeps the JWKS fresh until ctx ends, and returns then; it is the
// only goroutine fetching.
func (j *jwks) Run(ctx context.Context) {
	backoff := j.retryBackoff
	for {
		wait := j.refresh
		if err := j.fetch(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			j.logger.Warn("fetch the OAUTHBEARER JWKS failed", "sasl.oauthbearer.jwks.endpoint.url", j.url, "retry_in", backoff, "error", err)
			wait = backoff
			backoff = min(2*backoff, j.retryBackoffMax)
		} else {
			backoff = j.retryBackoff
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-j.expedite:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// fetch reads the JWKS once and keeps it if it parses.
func (j *jwks) fetch(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return err
	}
	if len(body) > jwksMaxBytes {
		return fmt.Errorf("the JWKS is larger than %d bytes", jwksMaxBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("parse the JWKS: %w", err)
	}
	// Only public signing keys verify tokens.
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.IsPublic() && (k.Use == "" || k.Use == "sig") {
			keys = append(keys, k)
		}
	}
	j.mu.Lock()
	j.keys = &jose.JSONWebKeySet{Keys: keys}
	j.mu.Unlock()
	j.logger.Debug("fetched the OAUTHBEARER JWKS", "sasl.oauthbearer.jwks.endpoint.url", j.url, "keys", len(keys))
	return nil
}
