package broker

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// TestKafkaGoConnDeleteTopicsThenReadPartitions takes the steps of
// kafka-go's TestConn delete-topics cases with kafka-go's Conn: create
// two topics, delete them (one DeleteTopics also naming a topic that
// does not exist), then read their partitions. Conn.ReadPartitions asks
// Metadata to auto-create what it names. With auto-creation off the
// deleted topics are gone. With it on the read creates them again and
// tripod answers with their new partitions, where Kafka answers that
// request with LEADER_NOT_AVAILABLE and no partitions (which is what
// kafka-go's test relies on): the deletion itself is complete either way.
func TestKafkaGoConnDeleteTopicsThenReadPartitions(t *testing.T) {
	for _, autoCreate := range []bool{false, true} {
		t.Run("auto.create.topics.enable="+strconv.FormatBool(autoCreate), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.AutoCreateTopics = autoCreate
			b := startBroker(t, cfg)
			// The connection's own topic: kafka-go's Conn reports
			// Metadata errors of that topic only.
			createLocalTopic(t, b, "conn-topic", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := (&kafka.Dialer{}).DialLeader(ctx, "tcp", b.Addr().String(), "conn-topic", 0)
			if err != nil {
				t.Fatalf("dial the leader of conn-topic-0: %v", err)
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}

			// Two topics are created and deleted together.
			if err := conn.CreateTopics(
				kafka.TopicConfig{Topic: "deleted-1", NumPartitions: 1, ReplicationFactor: 1},
				kafka.TopicConfig{Topic: "deleted-2", NumPartitions: 1, ReplicationFactor: 1},
			); err != nil {
				t.Fatalf("create deleted-1 and deleted-2: %v", err)
			}
			if err := conn.DeleteTopics("deleted-1", "deleted-2"); err != nil {
				t.Fatalf("delete deleted-1 and deleted-2: got %v, want no error", err)
			}
			// A DeleteTopics naming a topic that does not exist answers
			// UNKNOWN_TOPIC_OR_PARTITION for it and deletes the other.
			if err := conn.CreateTopics(kafka.TopicConfig{Topic: "deleted-3", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
				t.Fatalf("create deleted-3: %v", err)
			}
			if err := conn.DeleteTopics("never-created", "deleted-3"); !errors.Is(err, kafka.UnknownTopicOrPartition) {
				t.Fatalf("delete never-created and deleted-3: got %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
			}

			// DeleteTopics has answered: this broker's Metadata no
			// longer has the topics.
			for _, name := range []string{"deleted-1", "deleted-2", "deleted-3"} {
				if _, ok := b.cache.Topic(name); ok {
					t.Fatalf("%s: still in the metadata cache after DeleteTopics answered", name)
				}
			}
			partitions, err := conn.ReadPartitions("deleted-1", "deleted-2", "deleted-3")
			if err != nil {
				t.Fatalf("read partitions: %v", err)
			}
			want := 0
			if autoCreate {
				want = 3 // one per topic, created again by this read
			}
			if len(partitions) != want {
				t.Fatalf("read partitions of the deleted topics: got %d (%+v), want %d", len(partitions), partitions, want)
			}
		})
	}
}
