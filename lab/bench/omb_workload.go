package bench

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// OMBWorkload is an OpenMessaging Benchmark workload file, with OMB's
// keys (its Workload class): what `tripod bench omb --workload FILE`
// runs, so that a user can run the same file against tripod, Kafka or
// Redpanda and compare.
type OMBWorkload struct {
	Name                    string `yaml:"name"`
	Topics                  int    `yaml:"topics"`
	PartitionsPerTopic      int    `yaml:"partitionsPerTopic"`
	MessageSize             int    `yaml:"messageSize"`
	PayloadFile             string `yaml:"payloadFile"`
	SubscriptionsPerTopic   int    `yaml:"subscriptionsPerTopic"`
	ConsumerPerSubscription int    `yaml:"consumerPerSubscription"`
	ProducersPerTopic       int    `yaml:"producersPerTopic"`
	// ProducerRate is the messages/s of all producers together; 0: as
	// fast as they can, as OMB's rate controller then pushes.
	ProducerRate          int    `yaml:"producerRate"`
	ConsumerBacklogSizeGB int64  `yaml:"consumerBacklogSizeGB"`
	TestDurationMinutes   int    `yaml:"testDurationMinutes"`
	WarmupDurationMinutes int    `yaml:"warmupDurationMinutes"`
	KeyDistributor        string `yaml:"keyDistributor"`

	// payload is the value every record starts from: payloadFile's
	// bytes, or random bytes of messageSize.
	payload []byte
}

// ombKeys are the workload keys tripod runs, in OMB's order.
var ombKeys = []string{"name", "topics", "partitionsPerTopic", "keyDistributor", "messageSize", "payloadFile",
	"subscriptionsPerTopic", "producersPerTopic", "consumerPerSubscription", "producerRate",
	"consumerBacklogSizeGB", "testDurationMinutes", "warmupDurationMinutes"}

// ombUnsupportedKeys are OMB keys tripod does not run yet, with why.
var ombUnsupportedKeys = map[string]string{
	"useRandomizedPayloads":     "randomized payloads are not supported; use payloadFile or neither (random bytes of messageSize)",
	"randomBytesRatio":          "randomized payloads are not supported; use payloadFile or neither (random bytes of messageSize)",
	"randomizedPayloadPoolSize": "randomized payloads are not supported; use payloadFile or neither (random bytes of messageSize)",
	"backlogDrainRatio":         "backlog workloads (consumerBacklogSizeGB above 0) are not supported",
}

// ombKeyDistributors are OMB's KeyDistributorType values.
var ombKeyDistributors = []string{"NO_KEY", "KEY_ROUND_ROBIN", "RANDOM_NANO"}

// ombTimestampBytes is the head of every record's value that carries its
// send time, so that a consumer computes the end-to-end latency.
const ombTimestampBytes = 8

// LoadOMBWorkload reads and checks the workload file at path. Errors
// name the file and the key, and the allowed values.
func LoadOMBWorkload(path string) (*OMBWorkload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--workload: %w", err)
	}
	w, err := parseOMBWorkload(data)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	if err := w.loadPayload(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	return w, nil
}

// parseOMBWorkload decodes and checks a workload, without its payload.
func parseOMBWorkload(data []byte) (*OMBWorkload, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("want a YAML mapping of OpenMessaging Benchmark workload keys")
	}
	m := doc.Content[0]
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i].Value
		if why, ok := ombUnsupportedKeys[k]; ok {
			return nil, fmt.Errorf("key %s (line %d): %s", k, m.Content[i].Line, why)
		}
		if !slices.Contains(ombKeys, k) {
			return nil, fmt.Errorf("key %s (line %d): not an OpenMessaging Benchmark workload key; known keys: %s", k, m.Content[i].Line, strings.Join(ombKeys, ", "))
		}
		if seen[k] {
			return nil, fmt.Errorf("key %s (line %d): given twice", k, m.Content[i].Line)
		}
		seen[k] = true
	}
	// OMB's defaults: one minute of warm-up, no key.
	w := &OMBWorkload{WarmupDurationMinutes: 1, KeyDistributor: "NO_KEY"}
	// One key at a time, so that a value of the wrong type is refused
	// with its key named.
	for i := 0; i+1 < len(m.Content); i += 2 {
		one := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: m.Content[i : i+2]}
		if err := one.Decode(w); err != nil {
			k, v := m.Content[i], m.Content[i+1]
			return nil, fmt.Errorf("%s %q (line %d): not a value of this key: %v", k.Value, v.Value, v.Line, err)
		}
	}
	return w, w.validate()
}

// validate checks every key's value and names the first bad one.
func (w *OMBWorkload) validate() error {
	ranges := []struct {
		key      string
		v, lo, h int
	}{
		{"topics", w.Topics, 1, 10000},
		{"partitionsPerTopic", w.PartitionsPerTopic, 1, 100000},
		{"messageSize", w.MessageSize, ombTimestampBytes, 1 << 20},
		{"subscriptionsPerTopic", w.SubscriptionsPerTopic, 1, 100},
		{"consumerPerSubscription", w.ConsumerPerSubscription, 1, 1000},
		{"producersPerTopic", w.ProducersPerTopic, 1, 1000},
		{"producerRate", w.ProducerRate, 0, 100000000},
		{"testDurationMinutes", w.TestDurationMinutes, 0, 10080},
		{"warmupDurationMinutes", w.WarmupDurationMinutes, 0, 10080},
	}
	for _, r := range ranges {
		if r.v < r.lo || r.v > r.h {
			return fmt.Errorf("%s %d: must be between %d and %d", r.key, r.v, r.lo, r.h)
		}
	}
	if w.ConsumerBacklogSizeGB != 0 {
		return fmt.Errorf("consumerBacklogSizeGB %d: backlog workloads are not supported; must be 0", w.ConsumerBacklogSizeGB)
	}
	if !slices.Contains(ombKeyDistributors, w.KeyDistributor) {
		return fmt.Errorf("keyDistributor %q: must be one of %s", w.KeyDistributor, strings.Join(ombKeyDistributors, ", "))
	}
	return nil
}

// loadPayload sets the records' value: payloadFile, which must hold
// messageSize bytes, or random bytes. A relative payloadFile is looked
// for as OMB does, from the current directory, then from the parent of
// the workload's directory (OMB's layout: workloads/ beside payload/),
// then from the workload's directory.
func (w *OMBWorkload) loadPayload(dir string) error {
	if w.PayloadFile == "" {
		w.payload = make([]byte, w.MessageSize)
		rand.Read(w.payload)
		return nil
	}
	tries := []string{w.PayloadFile}
	if !filepath.IsAbs(w.PayloadFile) {
		tries = append(tries, filepath.Join(dir, "..", w.PayloadFile), filepath.Join(dir, w.PayloadFile))
	}
	for _, p := range tries {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("payloadFile %s: %w", p, err)
		}
		if len(data) != w.MessageSize {
			return fmt.Errorf("payloadFile %s: %d bytes, but messageSize is %d", p, len(data), w.MessageSize)
		}
		w.payload = bytes.Clone(data)
		return nil
	}
	return fmt.Errorf("payloadFile %s: not found in %s", w.PayloadFile, strings.Join(tries, ", "))
}
