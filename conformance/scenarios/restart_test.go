package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestRestartedBrokerKnowsItsTopics is the README's quickstart with a
// crash in it: a lone broker holds a topic with records, is killed with
// SIGKILL and started again, and from the moment its port accepts
// connections it never answers as if the topic did not exist. Metadata
// waits for the controller's metadata, or names the topic with the
// retriable LEADER_NOT_AVAILABLE, never UNKNOWN_TOPIC_OR_PARTITION; and
// kcat, run as soon as the port accepts, reads every record.
func TestRestartedBrokerKnowsItsTopics(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 1)
		const topic = "restarted"
		createTopic(t, c, topic, 3, 1)
		want := values("r", 200)
		produceValues(t, kafkaClient(t, c, acksAll...), topic, 0, want...)
		b := c.Broker(1)

		// A fresh client per probe, seeded with the restarted broker only,
		// asks Metadata for the topic until the answer is complete.
		restart(t, b)
		probes, complete := 0, false
		err := cluster.WaitFor(context.Background(), settle, func() error {
			code, partitions, err := probeMetadata(b.Addr, topic)
			if err != nil {
				return err
			}
			probes++
			if code == kerr.UnknownTopicOrPartition.Code {
				return cluster.Permanent(kerr.ErrorForCode(code))
			}
			if code != 0 || partitions < 3 {
				return kerr.ErrorForCode(code)
			}
			complete = true
			return nil
		})
		if err != nil || !complete {
			t.Fatalf("Metadata for %s after a restart (%d answers): got %v, want the topic with 3 partitions and never UNKNOWN_TOPIC_OR_PARTITION\n%s",
				topic, probes, err, b.LogTail(4096))
		}

		kcat, err := exec.LookPath("kcat")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("kcat is not installed (CI=true): %v", err)
			}
			t.Logf("kcat is not installed, skipping its read: %v", err)
			return
		}
		restart(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), settle)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, "-C", "-b", b.Addr, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat -C right after a restart: %v\nstderr:\n%s", err, stderr.String())
		}
		got := strings.Fields(stdout.String())
		if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
			t.Fatalf("kcat -C right after a restart: got %d records (%.80q), want %d\nstderr:\n%s",
				len(got), stdout.String(), len(want), stderr.String())
		}
	})
}

// restart kills b with SIGKILL, starts it again and returns once its
// Kafka port accepts connections.
func restart(t *testing.T, b *cluster.Broker) {
	t.Helper()
	if err := b.Kill(); err != nil {
		t.Fatalf("kill %s: %v", b, err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("start %s: %v", b, err)
	}
	err := cluster.WaitFor(context.Background(), settle, func() error {
		conn, err := net.DialTimeout("tcp", b.Addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		t.Fatalf("%s does not accept connections after its restart: %v", b, err)
	}
}

// probeMetadata asks the broker at addr, on a new connection, for topic's
// Metadata, and returns the topic's error code and partition count.
func probeMetadata(addr, topic string) (int16, int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	for _, st := range resp.Topics {
		if st.Topic != nil && *st.Topic == topic {
			return st.ErrorCode, len(st.Partitions), nil
		}
	}
	return kerr.UnknownTopicOrPartition.Code, 0, nil
}

// BenchmarkRestartToFirstFetch measures what a crash costs a lone broker
// holding 100 partitions, per backend: from starting the killed process
// until one Fetch of every partition from offset 0 is answered without
// error. Run it with
//
//	go test ./conformance/scenarios/ -run '^$' -bench RestartToFirstFetch -benchtime 5x
func BenchmarkRestartToFirstFetch(bm *testing.B) {
	for _, backend := range cluster.Backends {
		bm.Run(backend, func(bm *testing.B) {
			cfg, err := env.Configure(backend, 1)
			if err != nil {
				bm.Fatalf("configure a %s cluster: %v", backend, err)
			}
			cfg.SessionTimeout = 6 * time.Second
			c := env.StartForTest(bm, cfg)
			const topic, partitions = "restart-fetch", 100
			cl, err := newKafkaClient(c, acksAll...)
			if err != nil {
				bm.Fatalf("client: %v", err)
			}
			adm := kadm.NewClient(cl)
			ctx := context.Background()
			if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
				bm.Fatalf("create topic %s: %v", topic, err)
			}
			for p := range int32(partitions) {
				rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					bm.Fatalf("produce to %s/%d: %v", topic, p, err)
				}
			}
			cl.Close()
			b := c.Broker(1)
			bm.ResetTimer()
			for range bm.N {
				bm.StopTimer()
				if err := b.Kill(); err != nil {
					bm.Fatalf("kill %s: %v", b, err)
				}
				bm.StartTimer()
				start := time.Now()
				if err := b.Start(); err != nil {
					bm.Fatalf("start %s: %v", b, err)
				}
				// Polled every 5 ms: cluster.WaitFor's 100 ms would be the
				// resolution of the figure.
				for err := fetchEvery(b.Addr, topic, partitions); err != nil; err = fetchEvery(b.Addr, topic, partitions) {
					if time.Since(start) > settle {
						bm.Fatalf("%s: no complete fetch within %v of its start: %v", b, settle, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				bm.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/restart")
			}
		})
	}
}

// fetchEvery sends one Fetch of every partition of topic from offset 0 to
// the broker at addr, on a new connection, and returns an error unless
// every partition answers with records and no error.
func fetchEvery(addr, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 50<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	req.Version = 12
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	answered := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("partition %d: %w", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			if len(p.RecordBatches) == 0 {
				return fmt.Errorf("partition %d: no records", p.Partition)
			}
			answered++
		}
	}
	if answered != int(partitions) {
		return fmt.Errorf("%d of %d partitions answered", answered, partitions)
	}
	return nil
}
