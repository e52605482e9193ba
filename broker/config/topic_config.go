package config

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// topicKey describes one topic-level config: its range and the broker
// property whose value it defaults to.
type topicKey struct {
	// brokerKey names the broker property holding the default.
	brokerKey string
	// min and max bound an integer value.
	min, max int64
	// allowed, when set, lists the only accepted string values.
	allowed []string
	// ratio marks a number between 0 and 1.
	ratio bool
}

// topicKeys are the topic configs tripod honours, by Kafka name.
var topicKeys = map[string]topicKey{
	"segment.bytes":                  {brokerKey: "log.segment.bytes", min: 14, max: math.MaxInt32},
	"segment.ms":                     {brokerKey: "log.roll.ms", min: 1, max: math.MaxInt64},
	"retention.bytes":                {brokerKey: "log.retention.bytes", min: -1, max: math.MaxInt64},
	"retention.ms":                   {brokerKey: "log.retention.ms", min: -1, max: math.MaxInt64},
	"flush.messages":                 {brokerKey: "log.flush.interval.messages", min: 1, max: math.MaxInt64},
	"flush.ms":                       {brokerKey: "log.flush.interval.ms", min: 0, max: math.MaxInt64},
	"max.message.bytes":              {brokerKey: "message.max.bytes", min: 0, max: math.MaxInt32},
	"index.interval.bytes":           {min: 0, max: math.MaxInt32},
	"cleanup.policy":                 {allowed: []string{"delete", "compact", "compact,delete"}},
	"delete.retention.ms":            {min: 0, max: math.MaxInt64},
	"min.cleanable.dirty.ratio":      {ratio: true},
	"min.compaction.lag.ms":          {min: 0, max: math.MaxInt64},
	"max.compaction.lag.ms":          {min: 1, max: math.MaxInt64},
	"min.insync.replicas":            {brokerKey: "min.insync.replicas", min: 1, max: math.MaxInt32},
	"unclean.leader.election.enable": {brokerKey: "unclean.leader.election.enable", allowed: []string{"true", "false"}},
	// The replicas the throttles apply to (replica/throttle.go): "*" or
	// "partition:broker,...".
	LeaderThrottledKey:   {},
	FollowerThrottledKey: {},
}

// kafkaOnlyTopicKey is a Kafka topic config that tripod accepts and shows
// as set, but does not act on: its Kafka default and how a value is
// checked.
type kafkaOnlyTopicKey struct {
	// kafkaDefault is Kafka's default, what DescribeConfigs shows when the
	// topic does not set it.
	kafkaDefault string
	// kind is "long" (min..max), "bool", "ratio" (0..1), "enum"
	// (allowed) or "string" (anything).
	kind     string
	min, max int64
	allowed  []string
}

// kafkaOnlyTopicKeys are the topic configs of Kafka that tripod takes
// without acting on them (tiered storage,
// timestamps, recompression, ...), so that a tool or an application that
// creates its topics with them still runs; the broker logs a warning when
// a topic sets one.
var kafkaOnlyTopicKeys = map[string]kafkaOnlyTopicKey{
	"compression.type":                    {kafkaDefault: "producer", kind: "enum", allowed: []string{"producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"}},
	"compression.gzip.level":              {kafkaDefault: "-1", kind: "long", min: -1, max: 9},
	"compression.lz4.level":               {kafkaDefault: "9", kind: "long", min: 1, max: 17},
	"compression.zstd.level":              {kafkaDefault: "3", kind: "long", min: -131072, max: 22},
	"file.delete.delay.ms":                {kafkaDefault: "60000", kind: "long", min: 0, max: math.MaxInt64},
	"local.retention.bytes":               {kafkaDefault: "-2", kind: "long", min: -2, max: math.MaxInt64},
	"local.retention.ms":                  {kafkaDefault: "-2", kind: "long", min: -2, max: math.MaxInt64},
	"message.downconversion.enable":       {kafkaDefault: "true", kind: "bool"},
	"message.format.version":              {kafkaDefault: "3.0-IV1", kind: "string"},
	"message.timestamp.after.max.ms":      {kafkaDefault: "9223372036854775807", kind: "long", min: 0, max: math.MaxInt64},
	"message.timestamp.before.max.ms":     {kafkaDefault: "9223372036854775807", kind: "long", min: 0, max: math.MaxInt64},
	"message.timestamp.difference.max.ms": {kafkaDefault: "9223372036854775807", kind: "long", min: 0, max: math.MaxInt64},
	"message.timestamp.type":              {kafkaDefault: "CreateTime", kind: "enum", allowed: []string{"CreateTime", "LogAppendTime"}},
	"preallocate":                         {kafkaDefault: "false", kind: "bool"},
	"remote.storage.enable":               {kafkaDefault: "false", kind: "bool"},
	"remote.log.copy.disable":             {kafkaDefault: "false", kind: "bool"},
	"remote.log.delete.on.disable":        {kafkaDefault: "false", kind: "bool"},
	"segment.index.bytes":                 {kafkaDefault: "10485760", kind: "long", min: 4, max: math.MaxInt32},
	"segment.jitter.ms":                   {kafkaDefault: "0", kind: "long", min: 0, max: math.MaxInt64},
}

// TopicConfigSynonym returns the broker property whose value topic
// config name defaults to, or "" when no broker property does (Kafka's
// topic config synonym).
func TopicConfigSynonym(name string) string { return topicKeys[name].brokerKey }

// TopicKeys lists the topic config names, those tripod honours and
// those it only accepts, sorted.
func TopicKeys() []string {
	names := make([]string, 0, len(topicKeys)+len(kafkaOnlyTopicKeys))
	for k := range topicKeys {
		names = append(names, k)
	}
	for k := range kafkaOnlyTopicKeys {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// TopicConfigHasEffect reports whether tripod acts on a topic config set
// to value: false for the Kafka configs it only accepts, except a value
// that asks for what tripod does anyway (compression.type=producer:
// batches are stored as produced).
func TopicConfigHasEffect(name, value string) bool {
	if _, ok := kafkaOnlyTopicKeys[name]; !ok {
		return true
	}
	return name == "compression.type" && value == "producer"
}

// validateKafkaOnlyTopicConfig checks the value of one of
// kafkaOnlyTopicKeys.
func validateKafkaOnlyTopicConfig(name, value string, k kafkaOnlyTopicKey) error {
	switch k.kind {
	case "bool":
		if value != "true" && value != "false" {
			return fmt.Errorf("topic config %s %q: must be true or false", name, value)
		}
	case "ratio":
		if f, err := strconv.ParseFloat(value, 64); err != nil || f < 0 || f > 1 {
			return fmt.Errorf("topic config %s %q: must be a number between 0 and 1", name, value)
		}
	case "enum":
		for _, a := range k.allowed {
			if value == a {
				return nil
			}
		}
		return fmt.Errorf("topic config %s %q: must be one of %s", name, value, strings.Join(k.allowed, ", "))
	case "long":
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < k.min || n > k.max {
			return fmt.Errorf("topic config %s %q: must be an integer between %d and %d", name, value, k.min, k.max)
		}
	}
	return nil
}

// ValidateTopicConfig checks one topic config and names the key, the value
// and what is allowed.
func ValidateTopicConfig(name, value string) error {
	k, ok := topicKeys[name]
	if !ok {
		if ko, ok := kafkaOnlyTopicKeys[name]; ok {
			return validateKafkaOnlyTopicConfig(name, value, ko)
		}
		return fmt.Errorf("unknown topic config %q (known: %s)", name, strings.Join(TopicKeys(), ", "))
	}
	if name == LeaderThrottledKey || name == FollowerThrottledKey {
		return ValidateThrottledReplicas(name, value)
	}
	if name == "cleanup.policy" {
		// Kafka takes a list: compact, delete or both, in any order.
		seen := map[string]bool{}
		for _, p := range strings.Split(value, ",") {
			p = strings.TrimSpace(p)
			if (p != "compact" && p != "delete") || seen[p] {
				return fmt.Errorf("topic config cleanup.policy %q: must be one of %s", value, strings.Join(k.allowed, ", "))
			}
			seen[p] = true
		}
		return nil
	}
	if k.ratio {
		if f, err := strconv.ParseFloat(value, 64); err != nil || !(f >= 0 && f <= 1) {
			return fmt.Errorf("topic config %s %q: must be a number between 0 and 1", name, value)
		}
		return nil
	}
	if k.allowed != nil {
		for _, a := range k.allowed {
			if value == a {
				return nil
			}
		}
		return fmt.Errorf("topic config %s %q: must be one of %s", name, value, strings.Join(k.allowed, ", "))
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < k.min || n > k.max {
		return fmt.Errorf("topic config %s %q: must be an integer between %d and %d", name, value, k.min, k.max)
	}
	return nil
}

// TopicDefault returns the value a topic config takes when the topic does
// not override it.
func (c Config) TopicDefault(name string) string {
	switch name {
	case "index.interval.bytes":
		return "4096"
	case "cleanup.policy":
		return "delete"
	case "delete.retention.ms":
		return strconv.FormatInt(tlog.DefaultCleanConfig().DeleteRetention.Milliseconds(), 10)
	case "min.cleanable.dirty.ratio":
		return strconv.FormatFloat(tlog.DefaultCleanConfig().MinCleanableDirtyRatio, 'f', -1, 64)
	case "min.compaction.lag.ms":
		return strconv.FormatInt(tlog.DefaultCleanConfig().MinCompactionLag.Milliseconds(), 10)
	case "max.compaction.lag.ms":
		return neverMs // Kafka's Long.MAX_VALUE, beyond time.Duration in ms.
	}
	if k, ok := kafkaOnlyTopicKeys[name]; ok {
		return k.kafkaDefault
	}
	if topicKeys[name].brokerKey == "" {
		return ""
	}
	v, _ := c.Get(topicKeys[name].brokerKey)
	return KafkaMeaning(topicKeys[name].brokerKey, v)
}

// neverMs is Kafka's "never" for a time in milliseconds: Long.MAX_VALUE.
const neverMs = "9223372036854775807"

// KafkaMeaning returns a broker property's value as Kafka tools read it:
// log.flush.interval.ms 0, tripod's "never on time", is Kafka's
// Long.MAX_VALUE (a tool reads flush.ms=0 as "fsync every batch").
func KafkaMeaning(key, value string) string {
	if key == "log.flush.interval.ms" && value == "0" {
		return neverMs
	}
	return value
}

// validTopicName matches Kafka's legal topic names.
var validTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// ValidateTopicName returns why name is not a legal Kafka topic name, or nil.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > 249:
		return fmt.Errorf("topic name %q is longer than 249 characters", name)
	case !validTopicName.MatchString(name):
		return fmt.Errorf("topic name %q holds characters other than ASCII letters, digits, '.', '_' and '-'", name)
	}
	return nil
}
