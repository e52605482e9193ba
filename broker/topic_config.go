package broker

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
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
}

// topicKeys are the topic configs tripod honours, by Kafka name.
var topicKeys = map[string]topicKey{
	"segment.bytes":                  {brokerKey: "log.segment.bytes", min: 14, max: math.MaxInt32},
	"segment.ms":                     {brokerKey: "log.roll.ms", min: 1, max: math.MaxInt64 / 1000000},
	"retention.bytes":                {brokerKey: "log.retention.bytes", min: -1, max: math.MaxInt64},
	"retention.ms":                   {brokerKey: "log.retention.ms", min: -1, max: math.MaxInt64 / 1000000},
	"flush.messages":                 {brokerKey: "log.flush.interval.messages", min: 1, max: math.MaxInt64},
	"flush.ms":                       {brokerKey: "log.flush.interval.ms", min: 0, max: math.MaxInt64 / 1000000},
	"max.message.bytes":              {brokerKey: "message.max.bytes", min: 0, max: math.MaxInt32},
	"index.interval.bytes":           {min: 0, max: math.MaxInt32},
	"cleanup.policy":                 {allowed: []string{"delete"}},
	"min.insync.replicas":            {brokerKey: "min.insync.replicas", min: 1, max: math.MaxInt32},
	"unclean.leader.election.enable": {brokerKey: "unclean.leader.election.enable", allowed: []string{"true", "false"}},
}

// topicKeyNames lists the topic config names, sorted.
func topicKeyNames() []string {
	names := make([]string, 0, len(topicKeys))
	for k := range topicKeys {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// validateTopicConfig checks one topic config and names the key, the value
// and what is allowed.
func validateTopicConfig(name, value string) error {
	k, ok := topicKeys[name]
	if !ok {
		return fmt.Errorf("unknown topic config %q (known: %s)", name, strings.Join(topicKeyNames(), ", "))
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

// topicDefault returns the value a topic config takes when the topic does
// not override it.
func (c Config) topicDefault(name string) string {
	switch name {
	case "index.interval.bytes":
		return "4096"
	case "cleanup.policy":
		return "delete"
	}
	if topicKeys[name].brokerKey == "" {
		return ""
	}
	v, _ := c.Get(topicKeys[name].brokerKey)
	return v
}

// validTopicName matches Kafka's legal topic names.
var validTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// checkTopicName returns why name is not a legal Kafka topic name, or nil.
func checkTopicName(name string) error {
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

// parseInt parses a decimal 64-bit integer.
func parseInt(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
