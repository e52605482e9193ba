package security

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// tokenValidator checks an OAUTHBEARER token: it returns the client's
// principal name and when the token expires, or an *invalidToken.
type tokenValidator interface {
	validate(token string, now time.Time) (principal string, expires time.Time, err error)
}

// invalidToken is a refused token: status and scope are what the client
// is told, as RFC 7628's JSON error ("invalid_token",
// "insufficient_scope"); reason is logged only, as Kafka does, so that
// the client learns nothing about the broker's keys and settings.
type invalidToken struct {
	status, scope, reason string
}

func (e *invalidToken) Error() string { return e.reason }

// json is the error's RFC 7628 JSON, as Kafka's OAuthBearerSaslServer
// writes it.
func (e *invalidToken) json() string {
	s := fmt.Sprintf(`{"status":"%s"`, e.status)
	if e.scope != "" {
		s += fmt.Sprintf(`, "scope":"%s"`, e.scope)
	}
	return s + "}"
}

// refused makes an invalid_token error of a reason.
func refused(format string, args ...any) *invalidToken {
	return &invalidToken{status: "invalid_token", reason: fmt.Sprintf(format, args...)}
}

// oauthSigningAlgorithms are the signatures a token may bear: RSA and
// ECDSA, as identity providers sign; never "none" nor HMAC, whose key
// would be a public one.
var oauthSigningAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512}

// jwtValidator validates signed tokens as Kafka's
// OAuthBearerValidatorCallbackHandler (KIP-768) does: signed by a key of
// the provider's JWKS, with "exp" and "iat" claims, not expired nor not
// yet valid ("nbf") beyond the clock skew, of the expected issuer and
// audience when they are set, and with a subject claim.
type jwtValidator struct {
	cfg  OAuthBearerConfig
	keys *jwks
}

func (v *jwtValidator) validate(token string, now time.Time) (string, time.Time, error) {
	tok, err := jwt.ParseSigned(token, oauthSigningAlgorithms)
	if err != nil {
		return "", time.Time{}, refused("malformed or unsigned token: %v", err)
	}
	kid := tok.Headers[0].KeyID
	keys, loaded := v.keys.Keys(kid)
	if !loaded {
		return "", time.Time{}, refused("the JWKS of %s has not been fetched yet", v.keys.url)
	}
	if len(keys) == 0 {
		return "", time.Time{}, refused("key id %q is not in the JWKS of %s", kid, v.keys.url)
	}
	var claims jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if err = tok.Claims(k.Key, &claims, &all); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return "", time.Time{}, refused("signature of key id %q does not verify: %v", kid, err)
	}
	switch {
	case claims.Expiry == nil:
		return "", time.Time{}, refused("no exp claim")
	case claims.IssuedAt == nil:
		return "", time.Time{}, refused("no iat claim")
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.ExpectedIssuer, AnyAudience: v.cfg.ExpectedAudience, Time: now}, v.cfg.ClockSkew); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return "", time.Time{}, refused("token expired at %s (clock skew %s)", claims.Expiry.Time().UTC().Format(time.RFC3339), v.cfg.ClockSkew)
		case errors.Is(err, jwt.ErrInvalidIssuer):
			return "", time.Time{}, refused("issuer %q is not sasl.oauthbearer.expected.issuer %q", claims.Issuer, v.cfg.ExpectedIssuer)
		case errors.Is(err, jwt.ErrInvalidAudience):
			return "", time.Time{}, refused("audience %v names none of sasl.oauthbearer.expected.audience %v", []string(claims.Audience), v.cfg.ExpectedAudience)
		}
		return "", time.Time{}, refused("%v", err)
	}
	sub, err := subjectClaim(all, v.cfg.SubClaimName)
	if err != nil {
		return "", time.Time{}, err
	}
	if _, err := scopeClaim(all, v.cfg.ScopeClaimName); err != nil {
		return "", time.Time{}, err
	}
	return sub, claims.Expiry.Time(), nil
}

// subjectClaim returns the principal's name, claim name of claims: a
// string, not blank.
func subjectClaim(claims map[string]any, name string) (string, error) {
	s, ok := claims[name].(string)
	if !ok || strings.TrimSpace(s) == "" {
		return "", refused("no %s claim naming the client (a non-blank string)", name)
	}
	return strings.TrimSpace(s), nil
}

// scopeClaim returns the token's scopes, claim name of claims: absent, a
// space-separated string or a list of strings.
func scopeClaim(claims map[string]any, name string) ([]string, error) {
	switch v := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		var out []string
		for _, s := range v {
			str, ok := s.(string)
			if !ok || strings.TrimSpace(str) == "" {
				return nil, refused("the %s claim holds a value that is not a scope: %v", name, s)
			}
			out = append(out, str)
		}
		return out, nil
	}
	return nil, refused("the %s claim is neither a string nor a list of strings", name)
}

// unsecuredValidator accepts unsecured tokens (alg "none", no
// signature), as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler:
// for development, never production. The token needs a principal claim
// and "exp"; "iat" and "nbf", when present, must be numbers before
// "exp", with "nbf" not before "iat"; the clock skew and required scope
// are the JAAS config's unsecuredValidator* options.
type unsecuredValidator struct {
	opts unsecuredOptions
}

func (v *unsecuredValidator) validate(token string, now time.Time) (string, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		return "", time.Time{}, refused("not an unsecured JWS: want header.payload. with an empty signature")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeJWTPart(parts[0], &header); err != nil {
		return "", time.Time{}, refused("header: %v", err)
	}
	if header.Alg != "none" {
		return "", time.Time{}, refused(`alg %q: unsecured tokens have alg "none"`, header.Alg)
	}
	var claims map[string]any
	if err := decodeJWTPart(parts[1], &claims); err != nil {
		return "", time.Time{}, refused("claims: %v", err)
	}
	sub, err := subjectClaim(claims, v.opts.principalClaim)
	if err != nil {
		return "", time.Time{}, err
	}
	number := func(name string, required bool) (time.Time, bool, error) {
		raw, ok := claims[name]
		if !ok {
			if required {
				return time.Time{}, false, refused("no %s claim", name)
			}
			return time.Time{}, false, nil
		}
		n, ok := raw.(float64)
		if !ok {
			return time.Time{}, false, refused("the %s claim is not a number", name)
		}
		return time.UnixMilli(int64(n * 1000)), true, nil
	}
	exp, _, err := number("exp", true)
	if err != nil {
		return "", time.Time{}, err
	}
	iat, hasIat, err := number("iat", false)
	if err != nil {
		return "", time.Time{}, err
	}
	nbf, hasNbf, err := number("nbf", false)
	if err != nil {
		return "", time.Time{}, err
	}
	skew := v.opts.clockSkew
	switch {
	case hasIat && iat.After(now.Add(skew)):
		return "", time.Time{}, refused("iat %s is in the future", iat.UTC().Format(time.RFC3339))
	case !now.Before(exp.Add(skew)):
		return "", time.Time{}, refused("token expired at %s", exp.UTC().Format(time.RFC3339))
	case hasIat && !iat.Before(exp), hasNbf && !nbf.Before(exp):
		return "", time.Time{}, refused("iat or nbf is not before exp")
	case hasIat && hasNbf && nbf.Before(iat):
		return "", time.Time{}, refused("nbf precedes iat")
	case hasNbf && nbf.After(now.Add(skew)):
		return "", time.Time{}, refused("token not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	scopes, err := scopeClaim(claims, v.opts.scopeClaim)
	if err != nil {
		return "", time.Time{}, err
	}
	for _, want := range v.opts.requiredScope {
		if !containsString(scopes, want) {
			return "", time.Time{}, &invalidToken{status: "insufficient_scope", scope: strings.Join(v.opts.requiredScope, " "),
				reason: fmt.Sprintf("scope %v lacks %s", scopes, want)}
		}
	}
	return sub, exp, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// decodeJWTPart decodes one base64url part of a compact JWS into dst.
func decodeJWTPart(part string, dst any) error {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, dst)
}

// oauthClientFirst matches RFC 7628's client first message as Kafka's
// OAuthBearerClientInitialResponse reads it: the GS2 header with an
// optional authorization id, then \x01-separated key=value pairs (auth
// among them) ending with \x01\x01.
var oauthClientFirst = regexp.MustCompile(`^n,(?:a=((?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01$`)

// oauthAuthValue matches the auth pair's value: the scheme, then the
// token (RFC 6750's b64token).
var oauthAuthValue = regexp.MustCompile(`^(\w+) +([-_.a-zA-Z0-9]+)$`)

// oauthExchange is OAUTHBEARER's exchange (RFC 7628) as Kafka's
// OAuthBearerSaslServer runs it: the client's first message carries the
// token; a valid one is answered with nothing and the exchange is done;
// a refused one with the JSON error, to which the client answers a lone
// \x01, and the exchange fails with that JSON as the message. Extensions
// are accepted and ignored, as both of Kafka's validators do.
type oauthExchange struct {
	server    *Server
	validator tokenValidator
	// failed is the JSON error answered, empty before.
	failed string
	// expiry is when the validated token expires.
	expiry time.Time
}

// invalidFirstMessage is Kafka's error for a malformed first message.
const invalidFirstMessage = "Invalid OAUTHBEARER client first message"

func (e *oauthExchange) step(_ context.Context, token []byte) ([]byte, bool, Principal, error) {
	if e.failed != "" {
		if len(token) == 1 && token[0] == 0x01 {
			return nil, true, Principal{}, &authError{e.failed}
		}
		return nil, true, Principal{}, &authError{invalidFirstMessage}
	}
	m := oauthClientFirst.FindSubmatch(token)
	if m == nil {
		return nil, true, Principal{}, &authError{invalidFirstMessage}
	}
	authzID := string(m[1])
	var auth string
	found := false
	for pair := range strings.SplitSeq(strings.TrimSuffix(string(m[2]), "\x01"), "\x01") {
		if k, v, ok := strings.Cut(pair, "="); ok && k == "auth" {
			auth, found = v, true
		}
	}
	if !found {
		return nil, true, Principal{}, &authError{invalidFirstMessage + ": 'auth' not specified"}
	}
	av := oauthAuthValue.FindStringSubmatch(auth)
	if av == nil {
		return nil, true, Principal{}, &authError{invalidFirstMessage + ": invalid 'auth' value"}
	}
	if !strings.EqualFold(av[1], "bearer") {
		return nil, true, Principal{}, &authError{"Invalid scheme in OAUTHBEARER client first message: " + av[1]}
	}
	name, expires, err := e.validator.validate(av[2], time.Now())
	if err != nil {
		var it *invalidToken
		if !errors.As(err, &it) {
			return nil, true, Principal{}, err
		}
		e.failed = it.json()
		e.server.logger.Info("SASL OAUTHBEARER token refused", "reason", it.reason)
		return []byte(e.failed), false, Principal{}, nil
	}
	if authzID != "" && authzID != name {
		return nil, true, Principal{}, &authError{fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", authzID, name)}
	}
	e.expiry = expires
	return []byte{}, true, Principal{Type: "User", Name: name}, nil
}

// expires implements expiringExchange.
func (e *oauthExchange) expires() time.Time { return e.expiry }
