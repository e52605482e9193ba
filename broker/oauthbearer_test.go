package broker

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/tripodmq/tripod/broker/config"
)

// The issuer and audience of the tests' identity provider.
const (
	testIssuer   = "https://idp.example"
	testAudience = "tripod"
)

// identityProvider serves a JWKS over HTTP on 127.0.0.1, as an OIDC
// provider does; publish changes the keys it serves.
type identityProvider struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []jose.JSONWebKey
}

// newIdentityProvider starts a provider serving keys, stopped when the
// test ends.
func newIdentityProvider(t *testing.T, keys ...signingKey) *identityProvider {
	t.Helper()
	p := &identityProvider{}
	p.publish(keys...)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		body, _ := json.Marshal(jose.JSONWebKeySet{Keys: p.keys})
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// url is the JWKS endpoint.
func (p *identityProvider) url() string { return p.srv.URL + "/jwks" }

// publish makes the JWKS the public keys of keys.
func (p *identityProvider) publish(keys ...signingKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = nil
	for _, k := range keys {
		p.keys = append(p.keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
}

// signingKey is a key the provider signs tokens with.
type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newRSAKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate RSA key: %v", err)
	}
	return signingKey{kid: kid, alg: jose.RS256, priv: k}
}

func newECKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate EC key: %v", err)
	}
	return signingKey{kid: kid, alg: jose.ES256, priv: k}
}

// claims are a valid token's claims for subject: the provider's issuer
// and tripod's audience, issued now, expiring in an hour.
func claims(subject string) map[string]any {
	now := time.Now()
	return map[string]any{"sub": subject, "iss": testIssuer, "aud": testAudience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "kafka"}
}

// sign returns the compact JWS of c signed by k.
func (k signingKey) sign(t *testing.T, c map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return tok
}

// unsecuredToken is an alg "none" token of c, as Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler makes them.
func unsecuredToken(c map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none"}) + "." + enc(c) + "."
}

// bearer is franz-go's OAUTHBEARER mechanism with token.
func bearer(token string) oauth.Auth { return oauth.Auth{Token: token} }

// oauthConfig is testConfig with a PLAINTEXT listener and a
// SASL_PLAINTEXT one enabling OAUTHBEARER, validating signed tokens of
// p's JWKS, issuer and audience, with extra properties.
func oauthConfig(t *testing.T, p *identityProvider, extra map[string]string) config.Config {
	t.Helper()
	cfg := testConfig(t)
	props := map[string]string{
		"listeners":                          "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":            "OAUTHBEARER",
		"sasl.oauthbearer.jwks.endpoint.url": p.url(),
		"sasl.oauthbearer.expected.issuer":   testIssuer,
		"sasl.oauthbearer.expected.audience": testAudience,
	}
	for k, v := range extra {
		props[k] = v
	}
	set(t, &cfg, props)
	return cfg
}

// TestOAuthBearerProducesAndConsumesAsTheTokenSubject validates signed
// tokens against a JWKS served by the test, with an authorizer whose
// super user is the PLAINTEXT listener's:
//  1. alice's RS256 token authenticates, as User:alice, and is refused
//     the topic she has no ACL for;
//  2. admin grants User:alice WRITE and READ; she produces and consumes;
//  3. bob's ES256 token authenticates too, as User:bob, who is still
//     refused: the ACLs apply to the token's subject;
//  4. SaslAuthenticate tells the client the session ends when the token
//     expires.
func TestOAuthBearerProducesAndConsumesAsTheTokenSubject(t *testing.T) {
	rsaKey, ecKey := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")
	idp := newIdentityProvider(t, rsaKey, ecKey)
	b, logs := startLoggedBroker(t, oauthConfig(t, idp, map[string]string{"authorizer.class.name": "tripod", "super.users": "User:ANONYMOUS"}))
	ctx := testContext(t, time.Minute)
	const topic = "over-oauthbearer"
	createTopic(t, b, topic, 1, nil)
	alice := bearer(rsaKey.sign(t, claims("alice")))
	waitFor(t, ctx, "the JWKS to be fetched", func() bool { return login(ctx, b, alice.AsMechanism()) == nil })

	// 1. alice without ACLs.
	producer := saslClient(t, b, alice.AsMechanism(), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	if err := producer.ProduceSync(ctx, kgo.StringRecord("denied")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's produce without ACLs: got %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if !logged(logs, "SASL authentication succeeded", "mechanism=OAUTHBEARER", "principal=User:alice") {
		t.Fatalf("no OAUTHBEARER authentication of User:alice in the log:\n%s", logs.String())
	}

	// 2. admin grants alice the topic.
	adm := kadm.NewClient(newClient(t, b))
	acl := kadm.NewACLs().Allow("User:alice").Topics(topic).Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("grant alice: %v %v", err, res)
	}
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("token-%d", i))
	}
	waitFor(t, ctx, "alice's produce to be authorized", func() bool {
		return producer.ProduceSync(ctx, kgo.StringRecord(want[0])).FirstErr() == nil
	})
	for _, v := range want[1:] {
		if err := producer.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("alice's produce: %v", err)
		}
	}
	consumer := saslClient(t, b, alice.AsMechanism(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("alice consumes: got %v, want %v", got, want)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	// Records of the authorization wait may repeat the first value.
	if got = slices.Compact(got); !slices.Equal(got, want) {
		t.Fatalf("alice consumed %v, want %v", got, want)
	}

	// 3. bob, another subject, is not alice.
	bob := saslClient(t, b, bearer(ecKey.sign(t, claims("bob"))).AsMechanism(), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	if err := bob.ProduceSync(ctx, kgo.StringRecord("bob")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob's produce: got %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if !logged(logs, "SASL authentication succeeded", "mechanism=OAUTHBEARER", "principal=User:bob") {
		t.Fatalf("no OAUTHBEARER authentication of User:bob (ES256) in the log")
	}

	// 4. The session lifetime is the token's.
	c := claims("alice")
	c["exp"] = time.Now().Add(10 * time.Minute).Unix()
	nc := dialListener(t, b, "SASL_PLAINTEXT")
	if hs := handshake(t, nc, "OAUTHBEARER", 1); hs.ErrorCode != 0 {
		t.Fatalf("handshake: got error %d, want none", hs.ErrorCode)
	}
	resp := authenticateToken(t, nc, []byte("n,,\x01auth=Bearer "+rsaKey.sign(t, c)+"\x01\x01"), 2)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 9*60*1000 || resp.SessionLifetimeMillis > 10*60*1000 {
		t.Fatalf("SaslAuthenticate: got error %d, lifetime %d ms, want none, about 600000", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
}

// TestOAuthBearerRefusesInvalidTokens presents tokens that are expired,
// of another audience or issuer, signed by a key other than the JWKS's
// of the same id, and of a key id the JWKS lacks: each is refused as
// Kafka refuses it (the client hears {"status":"invalid_token"}, the
// log says why), and a valid token still authenticates after each. On
// the wire the refusal is RFC 7628's: the JSON error answers the token,
// the client's \x01 completes the failure, and the connection closes.
func TestOAuthBearerRefusesInvalidTokens(t *testing.T) {
	key := newRSAKey(t, "rsa-1")
	idp := newIdentityProvider(t, key)
	b, logs := startLoggedBroker(t, oauthConfig(t, idp, nil))
	ctx := testContext(t, time.Minute)
	valid := bearer(key.sign(t, claims("alice"))).AsMechanism()
	waitFor(t, ctx, "the JWKS to be fetched", func() bool { return login(ctx, b, valid) == nil })

	with := func(k, v string) map[string]any {
		c := claims("mallory")
		c[k] = v
		return c
	}
	expired := claims("mallory")
	expired["iat"], expired["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	impostor := newRSAKey(t, "rsa-1")
	cases := []struct {
		name, token, reason string
	}{
		{"expired", key.sign(t, expired), "token expired"},
		{"wrong audience", key.sign(t, with("aud", "someone-else")), "names none of sasl.oauthbearer.expected.audience"},
		{"wrong issuer", key.sign(t, with("iss", "https://evil.example")), "is not sasl.oauthbearer.expected.issuer"},
		{"bad signature", impostor.sign(t, claims("mallory")), "does not verify"},
		{"key not in the JWKS", newECKey(t, "unknown").sign(t, claims("mallory")), "unknown\\\" is not in the JWKS of"},
	}
	for _, c := range cases {
		err := login(ctx, b, bearer(c.token).AsMechanism())
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s: got %v, want SASL_AUTHENTICATION_FAILED with invalid_token", c.name, err)
		}
		if !logged(logs, "SASL OAUTHBEARER token refused", c.reason) {
			t.Errorf("%s: the log does not say %q:\n%s", c.name, c.reason, logs.String())
		}
		if err := login(ctx, b, valid); err != nil {
			t.Fatalf("a valid token after the %s one: %v", c.name, err)
		}
	}

	nc := dialListener(t, b, "SASL_PLAINTEXT")
	handshake(t, nc, "OAUTHBEARER", 1)
	resp := authenticateToken(t, nc, []byte("n,,\x01auth=Bearer "+cases[0].token+"\x01\x01"), 2)
	if resp.ErrorCode != 0 || string(resp.SASLAuthBytes) != `{"status":"invalid_token"}` {
		t.Fatalf("expired token: got error %d, answer %q, want none and {\"status\":\"invalid_token\"}", resp.ErrorCode, resp.SASLAuthBytes)
	}
	resp = authenticateToken(t, nc, []byte{0x01}, 3)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || errorMessage(resp.ErrorMessage) != `{"status":"invalid_token"}` {
		t.Fatalf("the client's \\x01: got %d %q, want SASL_AUTHENTICATION_FAILED {\"status\":\"invalid_token\"}", resp.ErrorCode, errorMessage(resp.ErrorMessage))
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	handshake(t, nc, "OAUTHBEARER", 1)
	resp = authenticateToken(t, nc, []byte("n,,auth=Bearer x"), 2)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || errorMessage(resp.ErrorMessage) != "Invalid OAUTHBEARER client first message" {
		t.Fatalf("malformed first message: got %d %q, want SASL_AUTHENTICATION_FAILED Invalid OAUTHBEARER client first message", resp.ErrorCode, errorMessage(resp.ErrorMessage))
	}
	expectUnanswered(t, nc)
}

// TestOAuthBearerJWKSRotation rotates the provider's key: a token of the
// new key, unknown to the broker's JWKS, makes the broker fetch it again
// at once, and authenticates once it has; the periodic refresh
// (sasl.oauthbearer.jwks.endpoint.refresh.ms) then drops the old key,
// whose tokens are refused.
func TestOAuthBearerJWKSRotation(t *testing.T) {
	oldKey, newKey := newRSAKey(t, "2024"), newRSAKey(t, "2025")
	idp := newIdentityProvider(t, oldKey)
	b := startBroker(t, oauthConfig(t, idp, map[string]string{"sasl.oauthbearer.jwks.endpoint.refresh.ms": "300"}))
	ctx := testContext(t, time.Minute)
	oldToken, newToken := bearer(oldKey.sign(t, claims("alice"))).AsMechanism(), bearer(newKey.sign(t, claims("alice"))).AsMechanism()
	waitFor(t, ctx, "the old key's token to authenticate", func() bool { return login(ctx, b, oldToken) == nil })

	idp.publish(newKey)
	waitFor(t, ctx, "the new key's token to authenticate", func() bool { return login(ctx, b, newToken) == nil })
	waitFor(t, ctx, "the old key's token to be refused", func() bool {
		return errors.Is(login(ctx, b, oldToken), kerr.SaslAuthenticationFailed)
	})
}

// TestOAuthBearerUnsecuredTokens runs a listener without a JWKS
// endpoint, which accepts unsecured tokens for development as Kafka's
// default OAuthBearerUnsecuredValidatorCallbackHandler does, with its
// JAAS options: a token with the required scope authenticates as its
// subject and produces; one without it is refused insufficient_scope; a
// signed token is not an unsecured one. The broker warns at start.
func TestOAuthBearerUnsecuredTokens(t *testing.T) {
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
			unsecuredValidatorRequiredScope="kafka"
			unsecuredValidatorAllowableClockSkewMs="1000";`,
	})
	b, logs := startLoggedBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	if !logged(logs, "accepts unsecured OAUTHBEARER tokens", "listener=SASL_PLAINTEXT") {
		t.Fatalf("no warning of the unsecured listener in the log:\n%s", logs.String())
	}
	createTopic(t, b, "dev", 1, nil)
	dev := bearer(unsecuredToken(claims("developer"))).AsMechanism()
	producer := saslClient(t, b, dev, kgo.DefaultProduceTopic("dev"))
	if err := producer.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatalf("produce with an unsecured token: %v", err)
	}
	if !logged(logs, "SASL authentication succeeded", "mechanism=OAUTHBEARER", "principal=User:developer") {
		t.Fatalf("no authentication of User:developer in the log")
	}
	noScope := claims("developer")
	delete(noScope, "scope")
	if err := login(ctx, b, bearer(unsecuredToken(noScope)).AsMechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Fatalf("a token without the required scope: got %v, want SASL_AUTHENTICATION_FAILED with insufficient_scope", err)
	}
	if err := login(ctx, b, bearer(newRSAKey(t, "k").sign(t, claims("developer"))).AsMechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a signed token on the unsecured listener: got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	expired := claims("developer")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	if err := login(ctx, b, bearer(unsecuredToken(expired)).AsMechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("an expired unsecured token: got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestOAuthBearerConfigErrorsNameTheKey checks that bad OAUTHBEARER
// settings are refused with an error naming the property and, for a
// number, its range.
func TestOAuthBearerConfigErrorsNameTheKey(t *testing.T) {
	for key, c := range map[string]struct{ value, want string }{
		"sasl.oauthbearer.jwks.endpoint.refresh.ms":                                    {"0", "between 1 and 2147483647"},
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":                              {"-1", "between 0 and 2147483647"},
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms":                          {"x", "between 0 and 2147483647"},
		"sasl.oauthbearer.clock.skew.seconds":                                          {"-1", "between 0 and 2147483647"},
		"sasl.oauthbearer.jwks.endpoint.url":                                           {"file:///etc/jwks.json", "http:// or https://"},
		"sasl.oauthbearer.sub.claim.name":                                              {" ", "must name a claim"},
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds": {"3000000000", "between 0 and 2147483647"},
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":  {"com.example.Handler", "OAuthBearerValidatorCallbackHandler"},
	} {
		cfg := testConfig(t)
		if err := cfg.Set(key, c.value); err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Set %s=%q: got %v, want an error naming the key with %q", key, c.value, err, c.want)
		}
	}
	base := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
	for _, c := range []struct {
		props map[string]string
		want  []string
	}{
		{map[string]string{"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
			[]string{"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class", "sasl.oauthbearer.jwks.endpoint.url"}},
		{map[string]string{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "5000", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "1000"},
			[]string{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms 5000", "at most sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"}},
		{map[string]string{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorAllowableClockSkewMs="-5";`},
			[]string{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "unsecuredValidatorAllowableClockSkewMs", "between 0 and 2147483647"}},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
			[]string{"sasl.mechanism.inter.broker.protocol", "OAUTHBEARER"}},
	} {
		cfg := testConfig(t)
		set(t, &cfg, base)
		set(t, &cfg, c.props)
		err := cfg.Validate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: Validate: got %v, want an error containing %q", c.props, err, w)
				break
			}
		}
	}
}
