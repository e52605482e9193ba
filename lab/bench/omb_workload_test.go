package bench

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestOMBWorkloadFiles checks that every workload tripod ships parses,
// finds its payload file of messageSize bytes and keeps OMB's values.
func TestOMBWorkloadFiles(t *testing.T) {
	files, err := filepath.Glob("omb/workloads/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("shipped workloads: %v (%v), want at least 5", files, err)
	}
	want := map[string]struct{ partitions, size, rate int }{
		"1-topic-100-partitions-1kb.yaml":          {100, 1024, 50000},
		"1-topic-100-partitions-1kb-100k.yaml":     {100, 1024, 100000},
		"max-rate-1-topic-100-partitions-1kb.yaml": {100, 1024, 0},
		"1-topic-16-partitions-1kb.yaml":           {16, 1024, 50000},
		"1-topic-16-partition-100b.yaml":           {16, 100, 50000},
	}
	for _, f := range files {
		w, err := LoadOMBWorkload(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(w.payload) != w.MessageSize {
			t.Errorf("%s: payload of %d bytes, want messageSize %d", f, len(w.payload), w.MessageSize)
		}
		if w.WarmupDurationMinutes != 1 || w.KeyDistributor != "NO_KEY" {
			t.Errorf("%s: warm-up %d min and keys %s, want OMB's defaults 1 and NO_KEY", f, w.WarmupDurationMinutes, w.KeyDistributor)
		}
		x, ok := want[filepath.Base(f)]
		if !ok {
			continue
		}
		delete(want, filepath.Base(f))
		if w.Topics != 1 || w.PartitionsPerTopic != x.partitions || w.MessageSize != x.size || w.ProducerRate != x.rate {
			t.Errorf("%s: %d topic(s) × %d partitions of %d B at %d msg/s, want 1 × %d of %d B at %d", f,
				w.Topics, w.PartitionsPerTopic, w.MessageSize, w.ProducerRate, x.partitions, x.size, x.rate)
		}
	}
	for f := range want {
		t.Errorf("workload %s not shipped", f)
	}
}

// TestOMBWorkloadRefusesBadKeys checks that a workload with an unknown
// key, an unsupported one or a value out of range is refused with the
// key named.
func TestOMBWorkloadRefusesBadKeys(t *testing.T) {
	const base = "name: x\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 100\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\nproducerRate: 10\ntestDurationMinutes: 1\n"
	if _, err := parseOMBWorkload([]byte(base)); err != nil {
		t.Fatalf("base workload: %v", err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"partitionPerTopic: 3\n", "key partitionPerTopic (line 10): not an OpenMessaging Benchmark workload key"},
		{"useRandomizedPayloads: true\n", "key useRandomizedPayloads"},
		{"topics: 2\n", "key topics (line 10): given twice"},
		{"consumerBacklogSizeGB: 512\n", "consumerBacklogSizeGB 512: backlog workloads are not supported; must be 0"},
		{"keyDistributor: ROUND\n", `keyDistributor "ROUND": must be one of NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO`},
		{"warmupDurationMinutes: -1\n", "warmupDurationMinutes -1: must be between 0 and 10080"},
	} {
		if _, err := parseOMBWorkload([]byte(base + c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
	for _, c := range []struct{ key, value, want string }{
		{"partitionsPerTopic", "0", "partitionsPerTopic 0: must be between 1 and 100000"},
		{"messageSize", "4", "messageSize 4: must be between 8 and 1048576"},
		{"producerRate", "-5", "producerRate -5: must be between 0 and 100000000"},
		{"producerRate", "fast", "producerRate"},
	} {
		y := strings.Replace(base, c.key+": ", c.key+": "+c.value+" #", 1)
		if _, err := parseOMBWorkload([]byte(y)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %s: got %v, want an error containing %q", c.key, c.value, err, c.want)
		}
	}
}
