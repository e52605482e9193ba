package broker

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicsAndDataSurviveRestart closes a broker and opens another on the
// same data directory: topics keep their partitions, configs and IDs, and
// the records are still served.
func TestTopicsAndDataSurviveRestart(t *testing.T) {
	cfg := testConfig(t)
	ctx := testContext(t, time.Minute)
	str := func(s string) *string { return &s }

	b, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	createTopic(t, b, "kept", 3, map[string]*string{"retention.ms": str("86400000")})
	cl := newClient(t, b, kgo.DefaultProduceTopic("kept"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte{byte(p)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	before, _ := b.cache.Topic("kept")
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	b = startBroker(t, cfg)
	waitFor(t, ctx, "the partitions of kept after restart", func() bool { return b.replicas.PartitionFor("kept", 2) != nil })
	after, ok := b.cache.Topic("kept")
	if !ok || after.ID != before.ID || len(after.Partitions) != 3 || b.replicas.PartitionFor("kept", 0).TopicConfigs()["retention.ms"] != "86400000" {
		t.Fatalf("after restart: got %+v (exists %v), want %+v", after, ok, before)
	}
	end, err := kadm.NewClient(newClient(t, b)).ListEndOffsets(ctx, "kept")
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	end.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 1 {
			t.Errorf("partition %d: got end offset %d (%v), want 1", o.Partition, o.Offset, o.Err)
		}
	})
}

// TestRetentionLoopHonoursTopicConfigs gives a topic tiny segments and a
// tiny retention.bytes; the broker's retention loop deletes old segments
// and moves the log start offset, which ListOffsets earliest reports.
func TestRetentionLoopHonoursTopicConfigs(t *testing.T) {
	cfg := testConfig(t)
	cfg.LogRetentionCheckInterval = 10 * time.Millisecond
	b := startBroker(t, cfg)
	str := func(s string) *string { return &s }
	createTopic(t, b, "retained", 1, map[string]*string{
		"segment.bytes":   str("1024"),
		"retention.bytes": str("2048"),
	})
	cl := newClient(t, b, kgo.DefaultProduceTopic("retained"), kgo.ProducerLinger(0))
	ctx := testContext(t, time.Minute)
	value := []byte(strings.Repeat("r", 300))
	for range 40 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	adm := kadm.NewClient(cl)
	waitFor(t, ctx, "retention to move the log start offset", func() bool {
		start, err := adm.ListStartOffsets(ctx, "retained")
		if err != nil {
			return false
		}
		o, _ := start.Lookup("retained", 0)
		return o.Offset > 0
	})
	p := b.replicas.PartitionFor("retained", 0)
	if p.Log().EndOffset() != 40 {
		t.Fatalf("got end offset %d, want 40", p.Log().EndOffset())
	}
}

// TestSecondBrokerOnSameDirectoryIsRefused starts a broker and then
// another on the same log dir: the second is refused, naming the dir.
func TestSecondBrokerOnSameDirectoryIsRefused(t *testing.T) {
	cfg := testConfig(t)
	startBroker(t, cfg)
	if b, err := New(cfg, nil); err == nil {
		b.Close()
		t.Fatalf("second broker on %s started, want a refusal", cfg.LogDirs[0])
	} else if !strings.Contains(err.Error(), cfg.LogDirs[0]) {
		t.Fatalf("got %v, want an error naming %s", err, cfg.LogDirs[0])
	}
}

// TestSecondBrokerOnDataDirRefused starts a second broker on a data dir
// that a live broker holds: it is refused at once, with an error naming
// the directory and the process that holds it.
func TestSecondBrokerOnDataDirRefused(t *testing.T) {
	cfg := testConfig(t)
	startBroker(t, cfg)
	second := cfg
	second.Listeners = "PLAINTEXT://127.0.0.1:0"
	b, err := New(second, testLogger(t))
	if err == nil {
		b.Close()
		t.Fatalf("second broker on %s: got no error, want the directory in use", cfg.LogDirs[0])
	}
	want := "pid " + strconv.Itoa(os.Getpid())
	if !strings.Contains(err.Error(), cfg.LogDirs[0]) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second broker on %s: got %v, want an error naming the dir and %q", cfg.LogDirs[0], err, want)
	}
}
