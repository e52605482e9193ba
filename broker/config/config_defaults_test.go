package config

import (
	"testing"
)

// TestDefaultConfigPinned pins the value every property of DefaultConfig
// shows through Get, so that moving a default to the package that owns
// it changes no number.
func TestDefaultConfigPinned(t *testing.T) {
	want := map[string]string{
		"broker.id":                       "1",
		"listeners":                       "PLAINTEXT://127.0.0.1:9092",
		"log.dirs":                        "./data",
		"num.partitions":                  "1",
		"auto.create.topics.enable":       "true",
		"max.request.partitions":          "100000",
		"max.partitions":                  "100000",
		"max.broker.partitions":           "100000",
		"socket.request.max.bytes":        "104857600",
		"queued.max.request.bytes":        "268435456",
		"fetch.max.bytes":                 "57671680",
		"max.connections":                 "2147483647",
		"max.connections.per.ip":          "2147483647",
		"log.segment.bytes":               "1073741824",
		"log.roll.ms":                     "604800000",
		"log.retention.bytes":             "-1",
		"log.retention.ms":                "604800000",
		"log.flush.interval.messages":     "9223372036854775807",
		"log.flush.interval.ms":           "0",
		"log.retention.check.interval.ms": "300000",
		"log.writeback.bytes":             "1048576",
		"log.open.files.max":              "10000",
		"log.cleaner.enable":              "true",
		"log.cleaner.dedupe.buffer.size":  "134217728",
		"log.cleaner.backoff.ms":          "15000",
		"connections.max.idle.ms":         "600000",
		"message.max.bytes":               "1048588",

		"unclean.leader.election.enable":          "false",
		"auto.leader.rebalance.enable":            "true",
		"leader.imbalance.check.interval.seconds": "300",
		"leader.imbalance.per.broker.percentage":  "10",
		"default.replication.factor":              "1",
		"controlled.shutdown.enable":              "true",
		"broker.crash.probe.interval.ms":          "200",
		"controller.socket.timeout.ms":            "30000",

		"replica.lag.time.max.ms":                       "30000",
		"min.insync.replicas":                           "1",
		"replication.truncation":                        "fetch",
		"replica.fetch.wait.max.ms":                     "500",
		"replica.fetch.min.bytes":                       "1",
		"replica.fetch.max.bytes":                       "1048576",
		"replica.fetch.backoff.ms":                      "200",
		"num.replica.fetchers":                          "1",
		"replication.quota.window.num":                  "11",
		"replication.quota.window.size.seconds":         "1",
		"replica.high.watermark.checkpoint.interval.ms": "5000",

		"producer.id.expiration.ms":                "86400000",
		"producer.id.expiration.check.interval.ms": "600000",

		"group.min.session.timeout.ms":             "6000",
		"group.max.session.timeout.ms":             "1800000",
		"group.initial.rebalance.delay.ms":         "3000",
		"group.max.size":                           "2147483647",
		"group.consumer.session.timeout.ms":        "45000",
		"group.consumer.min.session.timeout.ms":    "45000",
		"group.consumer.max.session.timeout.ms":    "60000",
		"group.consumer.heartbeat.interval.ms":     "5000",
		"group.consumer.min.heartbeat.interval.ms": "5000",
		"group.consumer.max.heartbeat.interval.ms": "15000",
		"group.consumer.assignors":                 "uniform,range",
		"group.consumer.max.size":                  "2147483647",
		"group.consumer.migration.policy":          "bidirectional",
		"offsets.topic.num.partitions":             "50",
		"offsets.topic.replication.factor":         "3",
		"offsets.topic.segment.bytes":              "104857600",
		"offsets.retention.minutes":                "10080",
		"offsets.retention.check.interval.ms":      "600000",
		"offsets.commit.timeout.ms":                "5000",
		"offset.metadata.max.bytes":                "4096",
		"offsets.load.buffer.size":                 "5242880",

		"transaction.state.log.num.partitions":                        "50",
		"transaction.state.log.replication.factor":                    "3",
		"transaction.state.log.segment.bytes":                         "104857600",
		"transaction.state.log.min.isr":                               "2",
		"transaction.max.timeout.ms":                                  "900000",
		"transaction.partition.verification.enable":                   "true",
		"transactional.id.expiration.ms":                              "604800000",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
		"transaction.remove.expired.transaction.cleanup.interval.ms":  "3600000",

		"raft.heartbeat.timeout.ms":    "500",
		"raft.election.timeout.ms":     "500",
		"raft.leader.lease.timeout.ms": "400",
		"coordination.backend":         "raft",
	}
	cfg := DefaultConfig()
	for key, v := range want {
		got, ok := cfg.Get(key)
		if !ok {
			t.Errorf("%s: got no such key, want %q", key, v)
			continue
		}
		if got != v {
			t.Errorf("%s: got %q, want %q", key, got, v)
		}
	}
}
