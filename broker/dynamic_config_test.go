package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/coord"
)

// adminOf returns a kadm client seeded with every broker of brokers.
func adminOf(t *testing.T, brokers []*Broker) *kadm.Client {
	t.Helper()
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr().String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// alterOne checks that an alteration of one resource answers wantErr (nil
// for success) and returns the resource's error message.
func alterOne(t *testing.T, what string, resps kadm.AlterConfigsResponses, err error, wantErr error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: got request error %v, want none", what, err)
	}
	if len(resps) != 1 {
		t.Fatalf("%s: got %d resources, want 1", what, len(resps))
	}
	if !errors.Is(resps[0].Err, wantErr) || (wantErr == nil) != (resps[0].Err == nil) {
		t.Fatalf("%s: got %v (%s), want %v", what, resps[0].Err, resps[0].ErrMessage, wantErr)
	}
	return resps[0].ErrMessage
}

// describedConfigs returns a resource's configs by key, each with its
// value and source.
func describedConfigs(t *testing.T, what string, rcs kadm.ResourceConfigs, err error) map[string]kadm.Config {
	t.Helper()
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("%s: got %v, %d resources (%v), want one", what, err, len(rcs), rcs)
	}
	out := map[string]kadm.Config{}
	for _, c := range rcs[0].Configs {
		out[c.Key] = c
	}
	return out
}

// describeAt asks b itself for a resource's configs.
func describeAt(t *testing.T, b *Broker, typ kmsg.ConfigResourceType, name string) map[string]kadm.Config {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	req.Resources = append(req.Resources, res)
	dc := askBroker[*kmsg.DescribeConfigsResponse](t, b, req)
	if len(dc.Resources) != 1 || dc.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s on broker %d: got %+v", name, b.ID(), dc.Resources)
	}
	out := map[string]kadm.Config{}
	for _, c := range dc.Resources[0].Configs {
		out[c.Name] = kadm.Config{Key: c.Name, Value: c.Value, Source: c.Source}
	}
	return out
}

func wantConfig(t *testing.T, what string, configs map[string]kadm.Config, key, value string, source kmsg.ConfigSource) {
	t.Helper()
	c, ok := configs[key]
	if !ok || c.MaybeValue() != value || c.Source != source {
		t.Fatalf("%s: %s: got %q from %v (present %v), want %q from %v", what, key, c.MaybeValue(), c.Source, ok, value, source)
	}
}

func setKey(key, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: kadm.StringPtr(value)}
}

// produceRaw sends one record to topic-0 at b with acks and returns the
// partition's error code.
func produceRaw(t *testing.T, b *Broker, topic string, acks int16, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = buildBatch(t, []byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, dialBroker(t, b), req, 1).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// leaderOf waits until topic-0 has a leader with an ISR of isr brokers
// and returns the leader and the other brokers.
func leaderOf(t *testing.T, ctx context.Context, brokers []*Broker, topic string, isr int) (*Broker, []*Broker) {
	t.Helper()
	var leader *Broker
	var others []*Broker
	waitFor(t, ctx, fmt.Sprintf("%s-0 led with an ISR of %d", topic, isr), func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		if len(parts) != 1 || len(parts[0].isr) != isr {
			return false
		}
		leader, others = nil, nil
		for _, b := range brokers {
			if b.ID() == parts[0].leader {
				leader = b
			} else {
				others = append(others, b)
			}
		}
		return leader != nil && leader.replicas.PartitionFor(topic, 0) != nil
	})
	return leader, others
}

// TestDynamicConfigsThroughKadm alters topic and broker configs with
// kadm on a three-broker cluster and checks that every broker applies them
// without a restart: min.insync.replicas raised to 3 makes acks=all fail
// once a follower is gone; retention.bytes lowered removes old segments; a
// dynamic broker default applies to topics without an override and shows
// with its source; bad input changes nothing.
func TestDynamicConfigsThroughKadm(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.LogRetentionCheckInterval = 50 * time.Millisecond
	})
	ctx := testContext(t, 2*time.Minute)
	adm := adminOf(t, brokers)
	waitFor(t, ctx, "topic live created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"segment.bytes": kadm.StringPtr("1024")}, "live")
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
	})
	leader, followers := leaderOf(t, ctx, brokers, "live", 3)

	// A topic config through any broker: kadm sends it to one of them,
	// which forwards it to the controller.
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setKey("min.insync.replicas", "3"), setKey("retention.ms", "86400000")}, "live")
	alterOne(t, "set min.insync.replicas=3", resps, err, nil)
	for _, b := range brokers {
		waitFor(t, ctx, fmt.Sprintf("broker %d to apply min.insync.replicas=3", b.ID()), func() bool {
			return b.replicas.PartitionFor("live", 0).TopicConfigs()["min.insync.replicas"] == "3"
		})
		configs := describeAt(t, b, kmsg.ConfigResourceTypeTopic, "live")
		wantConfig(t, "after the alteration", configs, "min.insync.replicas", "3", kmsg.ConfigSourceDynamicTopicConfig)
		wantConfig(t, "after the alteration", configs, "segment.bytes", "1024", kmsg.ConfigSourceDynamicTopicConfig)
		wantConfig(t, "after the alteration", configs, "retention.bytes", "-1", kmsg.ConfigSourceDefaultConfig)
	}
	if code := produceRaw(t, leader, "live", -1, "three in sync"); code != 0 {
		t.Fatalf("acks=all with ISR 3: error %v, want none", kerr.ErrorForCode(code))
	}

	// Bad input: Kafka's error codes, nothing changed.
	for _, bad := range []struct {
		what  string
		alter []kadm.AlterConfig
		topic string
		want  error
	}{
		{"a value that does not parse", []kadm.AlterConfig{setKey("retention.ms", "soon")}, "live", kerr.InvalidConfig},
		{"a value out of range", []kadm.AlterConfig{setKey("min.insync.replicas", "0")}, "live", kerr.InvalidConfig},
		{"an unknown key", []kadm.AlterConfig{setKey("retention.forever", "1")}, "live", kerr.InvalidConfig},
		{"APPEND to a key that is not a list", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, "live", kerr.InvalidConfig},
		{"one good and one bad key", []kadm.AlterConfig{setKey("retention.ms", "1000"), setKey("cleanup.policy", "shred")}, "live", kerr.InvalidConfig},
		{"an unknown topic", []kadm.AlterConfig{setKey("retention.ms", "1000")}, "nope", kerr.UnknownTopicOrPartition},
	} {
		resps, err := adm.AlterTopicConfigs(ctx, bad.alter, bad.topic)
		msg := alterOne(t, bad.what, resps, err, bad.want)
		t.Logf("%s: %v: %s", bad.what, bad.want, msg)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "live")
	configs := describedConfigs(t, "after the bad input", rcs, err)
	wantConfig(t, "after the bad input", configs, "retention.ms", "86400000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, "after the bad input", configs, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	// min.insync.replicas=3 applies live: a follower gone, acks=all is
	// refused.
	gone := followers[0]
	if err := gone.Close(); err != nil {
		t.Fatalf("close broker %d: %v", gone.ID(), err)
	}
	live := []*Broker{leader, followers[1]}
	leaderOf(t, ctx, live, "live", 2)
	if code := produceRaw(t, leader, "live", -1, "two in sync"); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR 2 < min.insync.replicas 3: error %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	// Back to 2 (AlterConfigs: the whole set), and it is accepted again.
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{setKey("min.insync.replicas", "2"), setKey("segment.bytes", "1024")}, "live")
	alterOne(t, "replace the set with min.insync.replicas=2", resps, err, nil)
	waitFor(t, ctx, "the leader to apply min.insync.replicas=2", func() bool {
		c := leader.replicas.PartitionFor("live", 0).TopicConfigs()
		return c["min.insync.replicas"] == "2" && c["retention.ms"] == ""
	})
	if code := produceRaw(t, leader, "live", -1, "two are enough"); code != 0 {
		t.Fatalf("acks=all with ISR 2 = min.insync.replicas 2: error %v, want none", kerr.ErrorForCode(code))
	}

	// retention.bytes lowered: the old segments go, without a restart.
	p := leader.replicas.PartitionFor("live", 0)
	for i := range 20 {
		if code := produceRaw(t, leader, "live", 1, strings.Repeat("r", 400)+fmt.Sprint(i)); code != 0 {
			t.Fatalf("produce %d: error %v", i, kerr.ErrorForCode(code))
		}
	}
	if start := p.Log().StartOffset(); start != 0 {
		t.Fatalf("log start offset before retention: got %d, want 0", start)
	}
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setKey("retention.bytes", "1")}, "live")
	alterOne(t, "set retention.bytes=1", resps, err, nil)
	waitFor(t, ctx, "retention to delete the old segments", func() bool { return p.Log().StartOffset() > 0 })
	t.Logf("retention.bytes=1 moved the log start offset to %d of %d", p.Log().StartOffset(), p.Log().EndOffset())

	// Broker configs: the cluster default and one broker's.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setKey("log.retention.ms", "3600000")})
	alterOne(t, "set the default log.retention.ms", resps, err, nil)
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setKey("log.retention.ms", "7200000")}, leader.ID())
	alterOne(t, "set the leader's log.retention.ms", resps, err, nil)
	for _, b := range live {
		want, source := "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig
		if b == leader {
			want, source = "7200000", kmsg.ConfigSourceDynamicBrokerConfig
		}
		waitFor(t, ctx, fmt.Sprintf("broker %d to apply log.retention.ms", b.ID()), func() bool {
			return b.dyn.LiveConfig().LogRetention == mustMillis(want)
		})
		badm := kadm.NewClient(newClient(t, b))
		rcs, err := badm.DescribeBrokerConfigs(ctx, b.ID())
		configs := describedConfigs(t, fmt.Sprintf("describe broker %d", b.ID()), rcs, err)
		wantConfig(t, "broker configs", configs, "log.retention.ms", want, source)
		wantConfig(t, "broker configs", configs, "num.partitions", "1", kmsg.ConfigSourceStaticBrokerConfig)
		wantConfig(t, "broker configs", configs, config.LeaderThrottleRateKey, "9223372036854775807", kmsg.ConfigSourceDefaultConfig)
		// The topic without a retention.ms override takes it (asked of
		// b itself: kadm sends a topic's DescribeConfigs to any broker).
		configs = describeAt(t, b, kmsg.ConfigResourceTypeTopic, "live")
		wantConfig(t, "topic default", configs, "retention.ms", want, source)
		if got := b.replicas.PartitionFor("live", 0).Log(); got == nil {
			t.Fatalf("broker %d holds no log of live-0", b.ID())
		}
	}
	// Synonyms, when asked: this broker's value, the default's, the static one.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "live", []string{"retention.ms"}
	req.Resources = append(req.Resources, res)
	dc := askBroker[*kmsg.DescribeConfigsResponse](t, leader, req)
	var syn []string
	for _, s := range dc.Resources[0].Configs[0].ConfigSynonyms {
		syn = append(syn, fmt.Sprintf("%s=%s:%v", s.Name, *s.Value, s.Source))
	}
	if got, want := strings.Join(syn, " "), "log.retention.ms=7200000:DYNAMIC_BROKER_CONFIG log.retention.ms=3600000:DYNAMIC_DEFAULT_BROKER_CONFIG log.retention.ms=604800000:DEFAULT_CONFIG"; got != want {
		t.Fatalf("synonyms of retention.ms: got %s, want %s", got, want)
	}
	rcs, err = adm.DescribeBrokerConfigs(ctx)
	configs = describedConfigs(t, "describe the cluster default", rcs, err)
	wantConfig(t, "the cluster default", configs, "log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// Bad broker input: nothing changes.
	for _, bad := range []struct {
		what  string
		alter []kadm.AlterConfig
		want  error
	}{
		{"a static-only key", []kadm.AlterConfig{setKey("num.partitions", "3")}, kerr.InvalidRequest},
		{"an unknown key", []kadm.AlterConfig{setKey("log.retention.forever", "1")}, kerr.InvalidRequest},
		{"a negative rate", []kadm.AlterConfig{setKey(config.LeaderThrottleRateKey, "-5")}, kerr.InvalidConfig},
		{"a value out of range", []kadm.AlterConfig{setKey("min.insync.replicas", "0")}, kerr.InvalidConfig},
	} {
		resps, err := adm.AlterBrokerConfigs(ctx, bad.alter)
		msg := alterOne(t, bad.what, resps, err, bad.want)
		t.Logf("broker %s: %v: %s", bad.what, bad.want, msg)
	}
	// validate_only changes nothing either.
	resps, err = adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{setKey("log.retention.ms", "1000")})
	alterOne(t, "validate only", resps, err, nil)
	st, err := leader.backend.LoadConfigs(ctx)
	if err != nil {
		t.Fatalf("load configs: %v", err)
	}
	if got := st.Brokers[coord.DefaultBrokerEntity]; len(got) != 1 || got["log.retention.ms"] != "3600000" {
		t.Fatalf("the default after the bad input: got %v, want only log.retention.ms=3600000", got)
	}
	// Deleting the broker's own value falls back to the default.
	resps, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, leader.ID())
	alterOne(t, "delete the leader's log.retention.ms", resps, err, nil)
	waitFor(t, ctx, "the leader to fall back to the default", func() bool {
		return leader.dyn.LiveConfig().LogRetention == time.Hour
	})
}

func mustMillis(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Millisecond
}

// TestReplicationThrottleLetsAReplicaCatchUp: a follower that was stopped
// and comes back behind, under leader and follower throttles on its
// topic, still catches up and rejoins the ISR, and the throttles measured
// (and held back) its traffic while the in-sync one went unthrottled.
func TestReplicationThrottleLetsAReplicaCatchUp(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.ReplicaFetchMaxBytes = 4096
		c.ReplicationQuotaWindowNum = 2
		c.ReplicaLagTimeMax = 2 * time.Second
	})
	ctx := testContext(t, 2*time.Minute)
	adm := adminOf(t, brokers)
	waitFor(t, ctx, "topic throttled created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
			config.LeaderThrottledKey: kadm.StringPtr("*"), config.FollowerThrottledKey: kadm.StringPtr("*"),
		}, "throttled")
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
	})
	leader, followers := leaderOf(t, ctx, brokers, "throttled", 3)
	behind := followers[0]
	cfg := behind.cfg
	if err := behind.Close(); err != nil {
		t.Fatalf("close broker %d: %v", behind.ID(), err)
	}
	leaderOf(t, ctx, []*Broker{leader, followers[1]}, "throttled", 2)

	// 300 KB while it is away; then throttles of 100 KB/s.
	const records, size = 300, 1000
	for i := range records {
		if code := produceRaw(t, leader, "throttled", -1, fmt.Sprintf("%04d", i)+strings.Repeat("t", size)); code != 0 {
			t.Fatalf("produce %d: error %v", i, kerr.ErrorForCode(code))
		}
	}
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setKey(config.LeaderThrottleRateKey, "100000"), setKey(config.FollowerThrottleRateKey, "100000")})
	alterOne(t, "set the throttle rates", resps, err, nil)
	waitFor(t, ctx, "the leader to apply the rates", func() bool { return leader.dyn.Current().LeaderRate == 100000 })
	before := scrape(t, leader)
	inSyncBytes, _ := metricValue(before, `tripod_replication_throttled_bytes_total{side="leader"}`)

	back, err := New(cfg, testLogger(t).Named(fmt.Sprintf("broker-%d-again", cfg.BrokerID)))
	if err != nil {
		t.Fatalf("restart broker %d: %v", cfg.BrokerID, err)
	}
	t.Cleanup(func() { back.Close() })
	end := leader.replicas.PartitionFor("throttled", 0).Log().EndOffset()
	waitFor(t, ctx, fmt.Sprintf("broker %d to catch up and rejoin the ISR", back.ID()), func() bool {
		_, _, parts := metadataOf(t, leader, "throttled")
		p := back.replicas.PartitionFor("throttled", 0)
		lp := leader.replicas.PartitionFor("throttled", 0)
		isr := lp.Role().ISR
		return len(parts) == 1 && len(parts[0].isr) == 3 && len(isr) == 3 && p != nil && p.Log().EndOffset() >= end
	})
	page := scrape(t, leader)
	leaderBytes, _ := metricValue(page, `tripod_replication_throttled_bytes_total{side="leader"}`)
	leaderHeld, _ := metricValue(page, `tripod_replication_throttled_partitions_total{side="leader"}`)
	backPage := scrape(t, back)
	followerBytes, _ := metricValue(backPage, `tripod_replication_throttled_bytes_total{side="follower"}`)
	followerHeld, _ := metricValue(backPage, `tripod_replication_throttled_partitions_total{side="follower"}`)
	t.Logf("leader: %.0f throttled bytes sent, %.0f partitions held back; follower: %.0f throttled bytes fetched, %.0f held back",
		leaderBytes, leaderHeld, followerBytes, followerHeld)
	if inSyncBytes != 0 {
		t.Fatalf("throttled bytes before the lagging replica came back: got %v, want 0 (in-sync replicas are not throttled)", inSyncBytes)
	}
	if leaderBytes < records*size/2 {
		t.Fatalf("leader throttled bytes: got %v, want most of the %d bytes the replica caught up", leaderBytes, records*size)
	}
	if leaderHeld+followerHeld == 0 {
		t.Fatalf("partitions held back by the throttles: got 0, want some (%d bytes at 100000 B/s over 2 samples)", records*size)
	}
	// In sync again: no longer throttled.
	for i := range 20 {
		if code := produceRaw(t, leader, "throttled", -1, fmt.Sprint("after ", i)); code != 0 {
			t.Fatalf("produce after the catch-up: error %v", kerr.ErrorForCode(code))
		}
	}
	if after, _ := metricValue(scrape(t, leader), `tripod_replication_throttled_bytes_total{side="leader"}`); after != leaderBytes {
		t.Fatalf("leader throttled bytes after the replica rejoined: got %v, want %v (in-sync replicas are not throttled)", after, leaderBytes)
	}
}

// TestTopicConfigsForwardedToTheController: a topic's IncrementalAlterConfigs
// and AlterConfigs sent to a broker that is not the controller are
// forwarded to it and land; one that a broker forwarded itself, reaching
// a broker that is not the controller, is answered NOT_CONTROLLER and
// not forwarded again.
func TestTopicConfigsForwardedToTheController(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, time.Minute)
	adm := adminOf(t, brokers)
	waitFor(t, ctx, "topic fwd created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, "fwd")
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
	})
	var other *Broker
	for _, b := range brokers {
		if id, _, _ := b.cache.View(); id != coord.BrokerID(b.ID()) && b.member.Controller() == nil {
			other = b
		}
	}
	incremental := func(key, value string) *kmsg.IncrementalAlterConfigsRequest {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		return req
	}
	resp := askBroker[*kmsg.IncrementalAlterConfigsResponse](t, other, incremental("retention.ms", "1000"))
	if code := resp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("IncrementalAlterConfigs at broker %d, not the controller: got %v (%v), want success", other.ID(), kerr.ErrorForCode(code), deref(resp.Resources[0].ErrorMessage))
	}
	if got := other.replicas.PartitionFor("fwd", 0).TopicConfigs()["retention.ms"]; got != "1000" {
		t.Fatalf("broker %d after its answer: retention.ms %q, want 1000 applied", other.ID(), got)
	}
	legacy := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "cleanup.policy", kmsg.StringPtr("compact")
	res.Configs = append(res.Configs, c)
	legacy.Resources = append(legacy.Resources, res)
	lresp := askBroker[*kmsg.AlterConfigsResponse](t, other, legacy)
	if code := lresp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("AlterConfigs at broker %d: got %v, want success", other.ID(), kerr.ErrorForCode(code))
	}
	if got := other.replicas.PartitionFor("fwd", 0).TopicConfigs(); len(got) != 1 || got["cleanup.policy"] != "compact" {
		t.Fatalf("broker %d after AlterConfigs: %v, want only cleanup.policy=compact", other.ID(), got)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(other.Addr().String()), kgo.ClientID(forwardedClientPrefix+"9"))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	kresp, err := cl.SeedBrokers()[0].Request(ctx, incremental("retention.ms", "2000"))
	if err != nil {
		t.Fatalf("a forwarded request to broker %d: %v", other.ID(), err)
	}
	if code := kresp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != kerr.NotController.Code {
		t.Fatalf("a forwarded request at a broker that is not the controller: got %v, want NOT_CONTROLLER", kerr.ErrorForCode(code))
	}
	if got := other.replicas.PartitionFor("fwd", 0).TopicConfigs()["cleanup.policy"]; got != "compact" {
		t.Fatalf("after the refused request: cleanup.policy %q, want compact kept", got)
	}
}

// TestSaramaAltersCleanerBackoff is sarama's functional test
// TestFuncAdminIncrementalAlterConfigs: log.cleaner.backoff.ms is a
// dynamic broker config, as in Kafka, which IncrementalAlterConfigs sets
// for one broker and DescribeConfigs then reports, and the broker's
// cleaner waits for.
func TestSaramaAltersCleanerBackoff(t *testing.T) {
	b := startBroker(t, testConfig(t))
	ctx := testContext(t, time.Minute)
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	admin, err := sarama.NewClusterAdmin([]string{b.Addr().String()}, cfg)
	if err != nil {
		t.Fatalf("sarama admin: %v", err)
	}
	defer admin.Close()
	broker := strconv.Itoa(int(b.cfg.BrokerID))
	describe := func() sarama.ConfigEntry {
		t.Helper()
		results, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.BrokerResource, Name: broker, ConfigNames: []string{config.LogCleanerBackoffKey}}}, sarama.DescribeConfigsOptions{})
		if err != nil || len(results) != 1 || results[0].ErrorCode != sarama.ErrNoError || len(results[0].Configs) != 1 {
			t.Fatalf("describe %s: got %+v, %v, want one entry", config.LogCleanerBackoffKey, results, err)
		}
		return results[0].Configs[0]
	}
	want := strconv.FormatInt(b.cfg.LogCleanerBackoff.Milliseconds()+1, 10)
	if got := describe().Value; got == want {
		t.Fatalf("before the alteration: got %s, want the static value", got)
	}
	err = admin.IncrementalAlterConfig(sarama.BrokerResource, broker, map[string]sarama.IncrementalAlterConfigsEntry{
		config.LogCleanerBackoffKey: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &want},
	}, false)
	if err != nil {
		t.Fatalf("alter %s: %v", config.LogCleanerBackoffKey, err)
	}
	waitFor(t, ctx, "the broker to apply the new backoff", func() bool {
		return b.dyn.CurrentConfig().LogCleanerBackoff == time.Duration(b.cfg.LogCleanerBackoff.Milliseconds()+1)*time.Millisecond
	})
	if got := describe(); got.Value != want || got.Source != sarama.SourceDynamicBroker {
		t.Fatalf("after the alteration: got %s from %v, want %s from the broker's dynamic config", got.Value, got.Source, want)
	}
}
