package config

// This file holds the security properties of the broker's table: TLS
// (security.SSLKeys), SASL and the authorizer, with their
// DescribeConfigs types and whether DescribeConfigs hides their values.

import (
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/security"
)

func init() {
	for name, k := range security.SSLKeys {
		brokerKeys[name] = configKey{
			set: func(c *Config, key, v string) error { return k.Set(&c.SSL, key, v) },
			get: func(c Config) string { return k.Get(c.SSL) },
			doc: keyDoc{see: seeListenersTLS},
		}
	}
}

// saslProperty is one SASL broker property: how Config.Set sets it and
// Config.Get shows it, whether DescribeConfigs hides its value, and its
// DescribeConfigs type.
type saslProperty struct {
	configKey
	sensitive  bool
	configType kmsg.ConfigType
}

// saslKeys are the SASL broker properties, by Kafka name.
var saslKeys = map[string]saslProperty{
	"sasl.enabled.mechanisms": {
		configKey: configKey{
			doc: keyDoc{see: seeSASL},
			set: func(c *Config, k, v string) error {
				m, err := security.ParseMechanisms(k, v)
				c.SASL.EnabledMechanisms = m
				return err
			},
			get: func(c Config) string { return strings.Join(c.SASL.EnabledMechanisms, ",") },
		},
		configType: kmsg.ConfigTypeList,
	},
	"sasl.jaas.config": {
		configKey: configKey{
			doc: keyDoc{see: seeSASL},
			set: func(c *Config, k, v string) error {
				if err := security.CheckJAAS(k, v); v != "" && err != nil {
					return err
				}
				c.SASL.JAASConfig = v
				return nil
			},
			get: func(c Config) string { return c.SASL.JAASConfig },
		},
		sensitive:  true,
		configType: kmsg.ConfigTypePassword,
	},
	"sasl.mechanism.inter.broker.protocol": {
		configKey: configKey{
			doc: keyDoc{see: seeSASL},
			set: func(c *Config, k, v string) error {
				m, err := security.ParseMechanism(k, v)
				c.SASL.InterBrokerMechanism = m
				return err
			},
			get: func(c Config) string { return c.SASL.InterBrokerMechanism },
		},
		configType: kmsg.ConfigTypeString,
	},
	"connections.max.reauth.ms": {
		configKey:  millisKey(func(c *Config) *time.Duration { return &c.SASL.ConnectionsMaxReauth }).documented(keyDoc{see: seeSASL}),
		configType: kmsg.ConfigTypeLong,
	},
	"sasl.server.max.receive.size": {
		configKey:  int32Key(func(c *Config) *int32 { return &c.SASL.ServerMaxReceiveSize }).documented(keyDoc{see: seeSASL}),
		configType: kmsg.ConfigTypeInt,
	},
	"connection.failed.authentication.delay.ms": {
		configKey:  millisKey(func(c *Config) *time.Duration { return &c.SASL.FailedAuthenticationDelay }).documented(keyDoc{see: seeLimits}),
		configType: kmsg.ConfigTypeInt,
	},
}

func init() {
	for name, p := range security.OAuthBearerKeys {
		configType := kmsg.ConfigTypeLong
		switch {
		case name == "sasl.oauthbearer.expected.audience":
			configType = kmsg.ConfigTypeList
		case name == "sasl.oauthbearer.clock.skew.seconds":
			configType = kmsg.ConfigTypeInt
		case !strings.HasSuffix(name, ".ms"):
			configType = kmsg.ConfigTypeString
		}
		saslKeys[name] = saslProperty{
			configKey: configKey{
				doc: keyDoc{see: seeOAuthBearer},
				set: func(c *Config, k, v string) error { return p.Set(&c.SASL.OAuthBearer, k, v) },
				get: func(c Config) string { return p.Get(c.SASL.OAuthBearer) },
			},
			configType: configType,
		}
	}
	for name, k := range saslKeys {
		brokerKeys[name] = k.configKey
	}
}

// authorizerKeys are the authorizer's broker properties with their
// DescribeConfigs types.
var authorizerKeys = map[string]struct {
	configKey
	configType kmsg.ConfigType
}{
	"authorizer.class.name": {
		configKey: configKey{
			doc: keyDoc{see: seeAuthorization},
			set: func(c *Config, _, v string) error { c.Authorizer.ClassName = v; return nil },
			get: func(c Config) string { return c.Authorizer.ClassName },
		},
		configType: kmsg.ConfigTypeString,
	},
	"super.users": {
		configKey: configKey{
			doc: keyDoc{see: seeAuthorization},
			set: func(c *Config, k, v string) error {
				users, err := security.ParseSuperUsers(k, v)
				if err == nil {
					c.Authorizer.SuperUsers = users
				}
				return err
			},
			get: func(c Config) string { return strings.Join(c.Authorizer.SuperUsers, ";") },
		},
		configType: kmsg.ConfigTypeString,
	},
	"allow.everyone.if.no.acl.found": {
		configKey: configKey{
			doc: keyDoc{see: seeAuthorization},
			set: func(c *Config, k, v string) error { return setBool(&c.Authorizer.AllowEveryoneIfNoACLFound, k, v) },
			get: func(c Config) string { return strconv.FormatBool(c.Authorizer.AllowEveryoneIfNoACLFound) },
		},
		configType: kmsg.ConfigTypeBoolean,
	},
}

func init() {
	for name, k := range authorizerKeys {
		brokerKeys[name] = k.configKey
	}
}
