package scenarios

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
