package config

// This file holds what DescribeConfigs and the dynamic configs read of
// the table: the properties that change on a running broker, and each
// property's declared type and sensitivity.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/security"
)

// The replication throttles: the rates (bytes/s), dynamic broker
// configs only, and the replicas they apply to, topic configs.
const (
	LeaderThrottleRateKey   = "leader.replication.throttled.rate"
	FollowerThrottleRateKey = "follower.replication.throttled.rate"
	LeaderThrottledKey      = "leader.replication.throttled.replicas"
	FollowerThrottledKey    = "follower.replication.throttled.replicas"
)

// dynamicBrokerKeys are the broker configs that can be updated without a
// restart: Kafka's dynamically updatable ones that tripod applies live
// (the topic defaults its replicas read, the cleaner's backoff and the
// throttle rates). Any other key is refused as Kafka refuses it: "Cannot
// update these configs dynamically".
var dynamicBrokerKeys = []string{
	FollowerThrottleRateKey,
	LeaderThrottleRateKey,
	LogCleanerBackoffKey,
	"log.flush.interval.messages",
	"log.flush.interval.ms",
	"log.retention.bytes",
	"log.retention.ms",
	"log.roll.ms",
	"log.segment.bytes",
	"message.max.bytes",
	"min.insync.replicas",
}

// DynamicBrokerKeys returns the broker configs that can be updated
// without a restart, sorted.
func DynamicBrokerKeys() []string { return slices.Clone(dynamicBrokerKeys) }

// IsDynamicBrokerKey reports whether key can be updated without a
// restart.
func IsDynamicBrokerKey(key string) bool { return slices.Contains(dynamicBrokerKeys, key) }

// LogCleanerBackoffKey is the cleaner's wait between rounds, dynamic as
// in Kafka (LogCleaner's reconfigurable configs); the cleaner reads it
// before each wait.
const LogCleanerBackoffKey = "log.cleaner.backoff.ms"

// IsThrottleRateKey reports whether key is a throttle rate, which the
// static properties do not hold.
func IsThrottleRateKey(key string) bool {
	return key == LeaderThrottleRateKey || key == FollowerThrottleRateKey
}

// SameTopicDefaults reports whether c and o give topics the same defaults
// (the dynamic broker configs that replicas read).
func (c Config) SameTopicDefaults(o Config) bool {
	for _, key := range dynamicBrokerKeys {
		if IsThrottleRateKey(key) || key == LogCleanerBackoffKey {
			continue
		}
		cv, _ := c.Get(key)
		ov, _ := o.Get(key)
		if cv != ov {
			return false
		}
	}
	return true
}

// Sensitive reports whether a broker config holds a key or a password,
// whose value DescribeConfigs never shows.
func Sensitive(name string) bool {
	return security.SSLKeys[name].Sensitive || saslKeys[name].sensitive || coordSensitiveKeys[name]
}

// Type is the declared type of a config, for DescribeConfigs v3+.
func Type(name string) kmsg.ConfigType {
	if k, ok := security.SSLKeys[name]; ok {
		switch {
		case k.Sensitive:
			return kmsg.ConfigTypePassword
		case name == "ssl.enabled.protocols" || name == "ssl.cipher.suites":
			return kmsg.ConfigTypeList
		}
		return kmsg.ConfigTypeString
	}
	if k, ok := saslKeys[name]; ok {
		return k.configType
	}
	if k, ok := authorizerKeys[name]; ok {
		return k.configType
	}
	if coordSensitiveKeys[name] {
		return kmsg.ConfigTypePassword
	}
	switch name {
	case "cleanup.policy", LeaderThrottledKey, FollowerThrottledKey:
		return kmsg.ConfigTypeList
	case "broker.rack", "replica.selector.class", "listeners", "advertised.listeners", "log.dirs", "listener.security.protocol.map",
		"inter.broker.listener.name", "security.inter.broker.protocol":
		return kmsg.ConfigTypeString
	case "auto.create.topics.enable":
		return kmsg.ConfigTypeBoolean
	case "broker.id", "num.partitions", "socket.request.max.bytes", "message.max.bytes", "max.message.bytes", "segment.bytes", "index.interval.bytes":
		return kmsg.ConfigTypeInt
	}
	return kmsg.ConfigTypeLong
}
