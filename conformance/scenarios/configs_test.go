package scenarios

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// setConfig is a kadm SET of key to value.
func setConfig(key, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: kadm.StringPtr(value)}
}

// checkAltered fails the test unless an alteration of one resource
// answered want (nil: success).
func checkAltered(t *testing.T, what string, resps kadm.AlterConfigsResponses, err, want error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: got request error %v, want none", what, err)
	}
	if len(resps) != 1 || !errors.Is(resps[0].Err, want) || (want == nil) != (resps[0].Err == nil) {
		t.Fatalf("%s: got %v, want %v", what, resps, want)
	}
	if want != nil {
		t.Logf("%s: %v: %s", what, resps[0].Err, resps[0].ErrMessage)
	}
}

// describeOn asks broker id itself for a resource's configs and returns
// key's value and source.
func describeOn(ctx context.Context, c *cluster.Cluster, id int32, typ kmsg.ConfigResourceType, name, key string) (string, kmsg.ConfigSource, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = typ, name, []string{key}
	req.Resources = append(req.Resources, res)
	kresp, err := c.Request(ctx, id, req)
	if err != nil {
		return "", 0, err
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
		return "", 0, fmt.Errorf("broker %d: describe %s %s: got %+v", id, name, key, resp.Resources)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return "", 0, err
	}
	cfg := resp.Resources[0].Configs[0]
	if cfg.Value == nil {
		return "", cfg.Source, nil
	}
	return *cfg.Value, cfg.Source, nil
}

// waitConfigDescribed waits until every live broker describes key of a resource
// with value from source.
func waitConfigDescribed(t *testing.T, c *cluster.Cluster, typ kmsg.ConfigResourceType, name func(id int32) string, key, value string, source kmsg.ConfigSource) {
	t.Helper()
	ctx := context.Background()
	err := cluster.WaitFor(ctx, settle, func() error {
		for _, b := range c.Live() {
			got, src, err := describeOn(ctx, c, b.ID, typ, name(b.ID), key)
			if err != nil {
				return err
			}
			if got != value || src != source {
				return fmt.Errorf("broker %d: %s: got %q from %v, want %q from %v", b.ID, key, got, src, value, source)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for every broker to describe %s=%s: %v", key, value, err)
	}
}

// TestDynamicConfigs alters topic and broker configs with kadm on a
// cluster of three `tripod serve` processes on each backend: a topic's
// min.insync.replicas raised to 3 takes effect on the running leader (a
// follower stopped, acks=all is refused NOT_ENOUGH_REPLICAS) and is
// described DYNAMIC_TOPIC_CONFIG by every broker; bad input gets Kafka's
// error and changes nothing; a dynamic default broker config reaches
// every broker and the topics without an override; the stopped broker
// comes back with every config in force.
func TestDynamicConfigs(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		createTopic(t, c, "dyn", 1, 3)
		ctx := context.Background()
		adm := admin(t, c)
		topic := func(int32) string { return "dyn" }

		resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setConfig("min.insync.replicas", "3")}, "dyn")
		checkAltered(t, "set min.insync.replicas=3", resps, err, nil)
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeTopic, topic, "min.insync.replicas", "3", kmsg.ConfigSourceDynamicTopicConfig)

		for _, bad := range []struct {
			what  string
			alter []kadm.AlterConfig
			topic string
			want  error
		}{
			{"min.insync.replicas=0", []kadm.AlterConfig{setConfig("min.insync.replicas", "0")}, "dyn", kerr.InvalidConfig},
			{"an unknown key", []kadm.AlterConfig{setConfig("retention.forever", "1")}, "dyn", kerr.InvalidConfig},
			{"an unknown topic", []kadm.AlterConfig{setConfig("retention.ms", "1000")}, "absent", kerr.UnknownTopicOrPartition},
		} {
			resps, err := adm.AlterTopicConfigs(ctx, bad.alter, bad.topic)
			checkAltered(t, bad.what, resps, err, bad.want)
		}
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeTopic, topic, "min.insync.replicas", "3", kmsg.ConfigSourceDynamicTopicConfig)

		p := waitLeader(t, c, "dyn", 0, "dyn/0 led with a full ISR", func(p cluster.Partition) error {
			if len(p.ISR) != 3 {
				return fmt.Errorf("ISR %v, want 3 replicas", p.ISR)
			}
			return nil
		})
		if err := produceRaw(t, c, p.Leader, "dyn", 0, -1, "three"); err != nil {
			t.Fatalf("acks=all with ISR 3: error %v, want none", err)
		}
		stopped := others(c, p.Leader, controller(t, c))[0]
		if err := c.Broker(stopped).Stop(settle); err != nil {
			t.Fatalf("stop broker %d: %v", stopped, err)
		}
		waitLeader(t, c, "dyn", 0, fmt.Sprintf("dyn/0 without broker %d", stopped), func(q cluster.Partition) error {
			if q.Leader != p.Leader || slices.Contains(q.ISR, stopped) {
				return fmt.Errorf("want leader %d and broker %d out of the ISR", p.Leader, stopped)
			}
			return nil
		})
		if err := produceRaw(t, c, p.Leader, "dyn", 0, -1, "two"); !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("acks=all with ISR 2 < min.insync.replicas 3: error %v, want NOT_ENOUGH_REPLICAS", err)
		}

		// A dynamic default broker config: every broker, and the topic's
		// default.
		resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setConfig("log.retention.ms", "3600000"),
			setConfig("leader.replication.throttled.rate", "10485760")})
		checkAltered(t, "set the default log.retention.ms", resps, err, nil)
		resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setConfig("num.partitions", "8")})
		checkAltered(t, "set num.partitions dynamically", resps, err, kerr.InvalidRequest)
		self := func(id int32) string { return strconv.Itoa(int(id)) }
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeBroker, self, "log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeBroker, self, "num.partitions", "1", kmsg.ConfigSourceStaticBrokerConfig)
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setConfig("log.retention.ms", "7200000")}, p.Leader)
		checkAltered(t, "set the leader's log.retention.ms", resps, err, nil)
		if got, src, err := describeOn(ctx, c, p.Leader, kmsg.ConfigResourceTypeBroker, self(p.Leader), "log.retention.ms"); err != nil ||
			got != "7200000" || src != kmsg.ConfigSourceDynamicBrokerConfig {
			t.Fatalf("the leader's log.retention.ms: got %q from %v (%v), want 7200000 from DYNAMIC_BROKER_CONFIG", got, src, err)
		}

		// The stopped broker comes back with them all.
		if err := c.Broker(stopped).Start(); err != nil {
			t.Fatalf("start broker %d: %v", stopped, err)
		}
		waitRejoined(t, c, stopped, "dyn")
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeTopic, topic, "min.insync.replicas", "3", kmsg.ConfigSourceDynamicTopicConfig)
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeBroker, self, "leader.replication.throttled.rate", "10485760", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		waitLeader(t, c, "dyn", 0, "dyn/0 with a full ISR again", func(q cluster.Partition) error {
			if len(q.ISR) != 3 {
				return fmt.Errorf("ISR %v, want 3 replicas", q.ISR)
			}
			return nil
		})
		// The leader counts the returning follower once its own ISR
		// expansion is answered, which may come after the metadata.
		err = cluster.WaitFor(ctx, settle, func() error {
			err := produceRaw(t, c, p.Leader, "dyn", 0, -1, "three again")
			if errors.Is(err, kerr.NotEnoughReplicas) {
				return err
			}
			if err != nil {
				return cluster.Permanent(err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("acks=all with ISR 3 again: error %v, want none", err)
		}
		// AlterConfigs replaces the whole set.
		resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{setConfig("retention.ms", "1000")}, "dyn")
		checkAltered(t, "replace dyn's configs", resps, err, nil)
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeTopic, topic, "min.insync.replicas", "1", kmsg.ConfigSourceDefaultConfig)
		waitConfigDescribed(t, c, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)
	})
}
