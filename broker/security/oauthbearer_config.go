package security

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MechanismOAuthBearer is the OAUTHBEARER SASL mechanism (RFC 7628,
// KIP-255).
const MechanismOAuthBearer = "OAUTHBEARER"

// The server callback handlers a listener's
// listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class
// may name, as Kafka names them: the one that validates signed JWTs
// against a JWKS (KIP-768; Kafka 3.1 to 3.3 had it in the secured
// package), and the one that accepts unsecured (alg "none") tokens, for
// development only.
const (
	OAuthBearerValidatorHandler          = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	oauthBearerValidatorHandlerSecured   = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
	OAuthBearerUnsecuredValidatorHandler = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// oauthLoginModule is the login module of OAUTHBEARER's JAAS config; the
// unsecured validator reads its unsecuredValidator* options.
const oauthLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

// OAuthBearerConfig holds the properties of OAUTHBEARER's token
// validation (KIP-768), under Kafka's names: sasl.oauthbearer.<key>
// broker-wide, or listener.name.<listener>.oauthbearer.sasl.oauthbearer.<key>
// for one listener (OAuthBearerKeys).
type OAuthBearerConfig struct {
	// JWKSEndpointURL is where the identity provider publishes the keys
	// tokens are signed with, an http:// or https:// URL
	// (sasl.oauthbearer.jwks.endpoint.url). Setting it turns on the
	// validation of signed tokens on a listener that names no server
	// callback handler. Default empty.
	JWKSEndpointURL string
	// JWKSEndpointRefresh is how often the JWKS is fetched again
	// (sasl.oauthbearer.jwks.endpoint.refresh.ms); a token naming a key
	// the JWKS lacks also asks for a fetch, at most once a minute per
	// key id. Default 3600000 ms; at least 1 ms.
	JWKSEndpointRefresh time.Duration
	// JWKSEndpointRetryBackoff and JWKSEndpointRetryBackoffMax bound the
	// wait between failed fetches, which doubles from the first to the
	// second (sasl.oauthbearer.jwks.endpoint.retry.backoff.ms, default
	// 100 ms, and .retry.backoff.max.ms, default 10000 ms; 0 ..
	// 2147483647, the first at most the second).
	JWKSEndpointRetryBackoff    time.Duration
	JWKSEndpointRetryBackoffMax time.Duration
	// ExpectedAudience lists the audiences a token's "aud" claim must
	// name one of (sasl.oauthbearer.expected.audience, comma separated).
	// Default empty: "aud" is not checked.
	ExpectedAudience []string
	// ExpectedIssuer is what a token's "iss" claim must be
	// (sasl.oauthbearer.expected.issuer). Default empty: not checked.
	ExpectedIssuer string
	// ClockSkew is how far the broker's clock may be off the identity
	// provider's when "exp", "nbf" and "iat" are checked
	// (sasl.oauthbearer.clock.skew.seconds). Default 30 s; 0 ..
	// 2147483647 s.
	ClockSkew time.Duration
	// ScopeClaimName is the claim holding the token's scopes
	// (sasl.oauthbearer.scope.claim.name). Default "scope".
	ScopeClaimName string
	// SubClaimName is the claim naming the client: its principal is
	// User:<that claim> (sasl.oauthbearer.sub.claim.name). Default "sub".
	SubClaimName string
}

// DefaultOAuthBearerConfig returns Kafka's defaults.
func DefaultOAuthBearerConfig() OAuthBearerConfig {
	return OAuthBearerConfig{
		JWKSEndpointRefresh:         time.Hour,
		JWKSEndpointRetryBackoff:    100 * time.Millisecond,
		JWKSEndpointRetryBackoffMax: 10 * time.Second,
		ClockSkew:                   30 * time.Second,
		ScopeClaimName:              "scope",
		SubClaimName:                "sub",
	}
}

// OAuthBearerProperty is one sasl.oauthbearer.* property: Set parses and
// range-checks a value (its error names key), Get shows it.
type OAuthBearerProperty struct {
	Set func(c *OAuthBearerConfig, key, value string) error
	Get func(c OAuthBearerConfig) string
	// Allowed is the values it may take, for the docs.
	Allowed string
}

// oauthMaxDuration is the longest millisecond property Kafka accepts
// (an int of milliseconds).
const oauthMaxDuration = math.MaxInt32 * time.Millisecond

// oauthMillis is a millisecond property of field, min .. 2147483647.
func oauthMillis(field func(*OAuthBearerConfig) *time.Duration, minimum time.Duration) OAuthBearerProperty {
	return OAuthBearerProperty{
		Set: func(c *OAuthBearerConfig, key, value string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || time.Duration(n)*time.Millisecond < minimum || time.Duration(n)*time.Millisecond > oauthMaxDuration {
				return fmt.Errorf("%s %q: must be between %d and 2147483647 (milliseconds)", key, value, minimum.Milliseconds())
			}
			*field(c) = time.Duration(n) * time.Millisecond
			return nil
		},
		Get:     func(c OAuthBearerConfig) string { return strconv.FormatInt(field(&c).Milliseconds(), 10) },
		Allowed: fmt.Sprintf("%d .. 2147483647", minimum.Milliseconds()),
	}
}

// oauthString is a string property of field; check, if set, vets it.
func oauthString(field func(*OAuthBearerConfig) *string, check func(key, value string) error, allowed string) OAuthBearerProperty {
	return OAuthBearerProperty{
		Set: func(c *OAuthBearerConfig, key, value string) error {
			value = strings.TrimSpace(value)
			if check != nil {
				if err := check(key, value); err != nil {
					return err
				}
			}
			*field(c) = value
			return nil
		},
		Get:     func(c OAuthBearerConfig) string { return *field(&c) },
		Allowed: allowed,
	}
}

// claimName checks a claim's name: not empty.
func claimName(key, value string) error {
	if value == "" {
		return fmt.Errorf("%s: must name a claim, not be empty", key)
	}
	return nil
}

// checkJWKSURL checks sasl.oauthbearer.jwks.endpoint.url: empty, or an
// absolute http or https URL with a host.
func checkJWKSURL(key, value string) error {
	if value == "" {
		return nil
	}
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: must be an http:// or https:// URL of the identity provider's JWKS (file:// JWKS are not supported)", key, value)
	}
	return nil
}

// OAuthBearerKeys are the OAUTHBEARER validation properties, by Kafka
// name; each may be set for one listener as
// listener.name.<listener>.oauthbearer.<key>.
var OAuthBearerKeys = map[string]OAuthBearerProperty{
	"sasl.oauthbearer.jwks.endpoint.url":        oauthString(func(c *OAuthBearerConfig) *string { return &c.JWKSEndpointURL }, checkJWKSURL, "an http:// or https:// URL"),
	"sasl.oauthbearer.jwks.endpoint.refresh.ms": oauthMillis(func(c *OAuthBearerConfig) *time.Duration { return &c.JWKSEndpointRefresh }, time.Millisecond),
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": oauthMillis(func(c *OAuthBearerConfig) *time.Duration {
		return &c.JWKSEndpointRetryBackoff
	}, 0),
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": oauthMillis(func(c *OAuthBearerConfig) *time.Duration {
		return &c.JWKSEndpointRetryBackoffMax
	}, 0),
	"sasl.oauthbearer.expected.audience": {
		Set: func(c *OAuthBearerConfig, _, value string) error {
			c.ExpectedAudience = nil
			for a := range strings.SplitSeq(value, ",") {
				if a = strings.TrimSpace(a); a != "" {
					c.ExpectedAudience = append(c.ExpectedAudience, a)
				}
			}
			return nil
		},
		Get:     func(c OAuthBearerConfig) string { return strings.Join(c.ExpectedAudience, ",") },
		Allowed: "audiences, comma separated",
	},
	"sasl.oauthbearer.expected.issuer": oauthString(func(c *OAuthBearerConfig) *string { return &c.ExpectedIssuer }, nil, "an issuer"),
	"sasl.oauthbearer.clock.skew.seconds": {
		Set: func(c *OAuthBearerConfig, key, value string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || n < 0 || n > math.MaxInt32 {
				return fmt.Errorf("%s %q: must be between 0 and 2147483647 (seconds)", key, value)
			}
			c.ClockSkew = time.Duration(n) * time.Second
			return nil
		},
		Get:     func(c OAuthBearerConfig) string { return strconv.FormatInt(int64(c.ClockSkew/time.Second), 10) },
		Allowed: "0 .. 2147483647",
	},
	"sasl.oauthbearer.scope.claim.name": oauthString(func(c *OAuthBearerConfig) *string { return &c.ScopeClaimName }, claimName, "a claim name"),
	"sasl.oauthbearer.sub.claim.name":   oauthString(func(c *OAuthBearerConfig) *string { return &c.SubClaimName }, claimName, "a claim name"),
}

// Validate checks the relations between the properties; each value's
// range is checked when it is set.
func (c OAuthBearerConfig) Validate(prefix string) error {
	if c.JWKSEndpointRetryBackoff > c.JWKSEndpointRetryBackoffMax {
		return fmt.Errorf("%ssasl.oauthbearer.jwks.endpoint.retry.backoff.ms %d: must be at most %ssasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms (%d)",
			prefix, c.JWKSEndpointRetryBackoff.Milliseconds(), prefix, c.JWKSEndpointRetryBackoffMax.Milliseconds())
	}
	return nil
}

// oauthHandlerKey is the per-listener key naming OAUTHBEARER's server
// callback handler.
const oauthHandlerKey = "oauthbearer.sasl.server.callback.handler.class"

// checkOAuthHandler checks a server callback handler's class name.
func checkOAuthHandler(key, value string) error {
	switch strings.TrimSpace(value) {
	case "", OAuthBearerValidatorHandler, oauthBearerValidatorHandlerSecured, OAuthBearerUnsecuredValidatorHandler:
		return nil
	}
	return fmt.Errorf("%s %q: not a server callback handler tripod has (allowed: %s, %s)", key, value, OAuthBearerValidatorHandler, OAuthBearerUnsecuredValidatorHandler)
}

// unsecuredOptions are the unsecured validator's JAAS options, as
// Kafka's OAuthBearerUnsecuredValidatorCallbackHandler reads them.
type unsecuredOptions struct {
	principalClaim string
	scopeClaim     string
	requiredScope  []string
	clockSkew      time.Duration
}

// parseUnsecuredOptions reads the unsecuredValidator* options of an
// OAuthBearerLoginModule entry read from key.
func parseUnsecuredOptions(key string, options map[string]string) (unsecuredOptions, error) {
	o := unsecuredOptions{principalClaim: "sub", scopeClaim: "scope"}
	if v := strings.TrimSpace(options["unsecuredValidatorPrincipalClaimName"]); v != "" {
		o.principalClaim = v
	}
	if v := strings.TrimSpace(options["unsecuredValidatorScopeClaimName"]); v != "" {
		o.scopeClaim = v
	}
	o.requiredScope = strings.Fields(options["unsecuredValidatorRequiredScope"])
	if v := strings.TrimSpace(options["unsecuredValidatorAllowableClockSkewMs"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return o, fmt.Errorf("%s: option unsecuredValidatorAllowableClockSkewMs %q: must be between 0 and 2147483647 (milliseconds)", key, v)
		}
		o.clockSkew = time.Duration(n) * time.Millisecond
	}
	return o, nil
}
