package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeLogDirs describes a broker with two log dirs through kadm:
// every partition appears once, in the dir holding it, with its log's
// size in bytes, offset lag 0 and not future; each dir reports its
// volume's total and usable bytes; a request for some partitions gets
// only those; DescribeProducers lists no producer for records of a
// producer that is not idempotent; and once a dir fails it answers
// KAFKA_STORAGE_ERROR while the other is still described.
func TestDescribeLogDirs(t *testing.T) {
	cfg := testConfig(t)
	cfg.LogDirs = []string{t.TempDir(), t.TempDir()}
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	const topic = "described"
	createTopic(t, b, topic, 4, nil)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(4) {
		for i := range int(p) * 3 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "value-%d-%d", p, i)}).FirstErr(); err != nil {
				t.Fatalf("produce to partition %d: %v", p, err)
			}
		}
	}
	adm := kadm.NewClient(cl)

	dirs, err := adm.DescribeBrokerLogDirs(ctx, b.ID(), nil)
	if err != nil {
		t.Fatalf("describe log dirs: %v", err)
	}
	if len(dirs) != 2 {
		t.Fatalf("described dirs: got %d, want 2", len(dirs))
	}
	seen := map[int32]string{}
	for _, dir := range cfg.LogDirs {
		d, ok := dirs[dir]
		if !ok || d.Err != nil {
			t.Fatalf("log dir %s: got %+v, want it described", dir, d)
		}
		if d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("log dir %s: total %d usable %d bytes, want 0 <= usable <= total, total > 0", dir, d.TotalBytes, d.UsableBytes)
		}
		for index, dp := range d.Topics[topic] {
			if prev, dup := seen[index]; dup {
				t.Errorf("partition %d in %s and %s", index, prev, dir)
			}
			seen[index] = dir
			p := b.replicas.PartitionFor(topic, index)
			if p.LogDir() != filepath.Clean(dir) {
				t.Errorf("partition %d described in %s, but its log is in %s", index, dir, p.LogDir())
			}
			if want := p.Log().Size(); dp.Size != want || (index > 0 && dp.Size == 0) {
				t.Errorf("partition %d size: got %d, want %d (not 0 once written)", index, dp.Size, want)
			}
			if dp.OffsetLag != 0 || dp.IsFuture {
				t.Errorf("partition %d: offset lag %d, future %t, want 0 and false", index, dp.OffsetLag, dp.IsFuture)
			}
		}
	}
	if len(seen) != 4 {
		t.Fatalf("partitions described: got %v, want 0..3", seen)
	}

	some, err := adm.DescribeBrokerLogDirs(ctx, b.ID(), kadm.TopicsSet{topic: {1: {}, 3: {}}})
	if err != nil {
		t.Fatalf("describe log dirs of partitions 1 and 3: %v", err)
	}
	var got []int32
	for _, d := range some {
		for index := range d.Topics[topic] {
			got = append(got, index)
		}
	}
	if len(got) != 2 || got[0]+got[1] != 4 || got[0] == got[1] {
		t.Errorf("describe log dirs of partitions 1 and 3: got partitions %v, want [1 3]", got)
	}

	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {3: {}}})
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	if dp := producers[topic].Partitions[3]; dp.Err != nil || len(dp.ActiveProducers) != 0 {
		t.Errorf("describe producers of partition 3, written without idempotence: got %+v, want no producer", dp)
	}

	failed := cfg.LogDirs[1]
	b.manager().FailLogDir(filepath.Clean(failed), fmt.Errorf("write: %w", syscall.EIO))
	req := kmsg.NewPtrDescribeLogDirsRequest()
	resp := askBroker[*kmsg.DescribeLogDirsResponse](t, b, req)
	if len(resp.Dirs) != 2 {
		t.Fatalf("describe log dirs with one offline: got %d dirs, want 2", len(resp.Dirs))
	}
	for _, d := range resp.Dirs {
		want := int16(0)
		if d.Dir == failed {
			want = kerr.KafkaStorageError.Code
		}
		if d.ErrorCode != want {
			t.Errorf("log dir %s: got %v, want %v", d.Dir, kerr.ErrorForCode(d.ErrorCode), kerr.ErrorForCode(want))
		}
	}
	dirs, err = adm.DescribeBrokerLogDirs(ctx, b.ID(), nil)
	if err != nil {
		t.Fatalf("describe log dirs with one offline: %v", err)
	}
	if d := dirs[failed]; !errors.Is(d.Err, kerr.KafkaStorageError) || len(d.Topics) != 0 {
		t.Errorf("offline log dir through kadm: got %+v, want KAFKA_STORAGE_ERROR and no partitions", d)
	}
}
