package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
)

// TestCompactedTopic produces many values for a few keys to a compacted
// topic with small segments, runs a cleaner round and consumes from the
// start with franz-go: it gets, with their original offsets, only the
// latest value of each key below the active segment and every record
// of the active segment. A record without a key is refused with
// INVALID_RECORD.
func TestCompactedTopic(t *testing.T) {
	cfg := testConfig(t)
	cfg.LogCleanerBackoff = time.Hour // The test runs the rounds.
	b := startBroker(t, cfg)
	createTopic(t, b, "compacted", 1, map[string]*string{
		"cleanup.policy": kmsg.StringPtr("compact"),
		"segment.bytes":  kmsg.StringPtr("1024"),
	})
	ctx := testContext(t, time.Minute)
	cl := newClient(t, b, kgo.DefaultProduceTopic("compacted"))

	type produced struct {
		offset     int64
		key, value string
	}
	var all []produced
	for i := range 200 {
		key, value := fmt.Sprintf("key-%d", i%5), fmt.Sprintf("value-%d", i)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).First()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		all = append(all, produced{offset: r.Offset, key: key, value: value})
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce without a key: got %v, want %v", err, kerr.InvalidRecord)
	}

	if n := b.manager().CleanLogs(time.Now()); n != 1 {
		t.Fatalf("cleaner round: got %d logs cleaned, want 1", n)
	}

	consumer := newClient(t, b, kgo.ConsumeTopics("compacted"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := all[len(all)-1].offset
	var got []produced
	for len(got) == 0 || got[len(got)-1].offset < last {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: got %d records up to %v, want up to offset %d: %v", len(got), got, last, err)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Fatalf("consume %s-%d: %v", topic, partition, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, produced{offset: r.Offset, key: string(r.Key), value: string(r.Value)})
		})
	}

	// want is what cleaning below active leaves: the latest record of
	// each key below it, and everything from it on.
	want := func(active int64) []produced {
		latest := map[string]int64{}
		for _, p := range all {
			if p.offset < active {
				latest[p.key] = p.offset
			}
		}
		var out []produced
		for _, p := range all {
			if p.offset >= active || latest[p.key] == p.offset {
				out = append(out, p)
			}
		}
		return out
	}
	equal := func(a, b []produced) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if len(got) >= len(all)/2 {
		t.Fatalf("consumed %d of %d records after cleaning, want most removed", len(got), len(all))
	}
	for _, p := range all {
		if equal(got, want(p.offset)) {
			return
		}
	}
	t.Fatalf("consumed %v, want the latest value of each key below the active segment and every record after", got)
}

// TestCleanupPolicyConfig checks how cleanup.policy and the compaction
// topic configs reach the log: retention only with delete, the topic's
// compaction settings over Kafka's defaults.
func TestCleanupPolicyConfig(t *testing.T) {
	cfg := config.DefaultConfig()
	tests := []struct {
		policy            string
		compact, retained bool
	}{
		{"", false, true},
		{"delete", false, true},
		{"compact", true, false},
		{"compact,delete", true, true},
		{"delete, compact", true, true},
	}
	for _, tt := range tests {
		configs := map[string]string{}
		if tt.policy != "" {
			if err := config.ValidateTopicConfig("cleanup.policy", tt.policy); err != nil {
				t.Fatalf("validate cleanup.policy %q: %v", tt.policy, err)
			}
			configs["cleanup.policy"] = tt.policy
		}
		compact, _ := config.CleanupPolicy(configs)
		lc := cfg.LogConfig(configs)
		if retained := lc.RetentionTime >= 0; compact != tt.compact || retained != tt.retained {
			t.Errorf("cleanup.policy %q: got compact %v, retention %v, want %v, %v", tt.policy, compact, retained, tt.compact, tt.retained)
		}
	}
	if err := config.ValidateTopicConfig("cleanup.policy", "compact,compact"); err == nil {
		t.Error("validate cleanup.policy compact,compact: got no error, want one")
	}
	cc := cfg.CleanConfig(map[string]string{"delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.25",
		"min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "9223372036854775807"})
	if cc.DeleteRetention != time.Second || cc.MinCleanableDirtyRatio != 0.25 || cc.MinCompactionLag != 2*time.Second || cc.Validate() != nil {
		t.Errorf("CleanConfig: got %+v, want the topic's settings", cc)
	}
}
