package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// issue sends req through cl and fails the test on a transport error.
func issue[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("%s request: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

// TestCreateTopicsChecksEveryField covers CreateTopics' answers: created
// with the default partition count, validate-only creating nothing, and
// TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
// INVALID_CONFIG and INVALID_TOPIC_EXCEPTION.
func TestCreateTopicsChecksEveryField(t *testing.T) {
	cfg := testConfig(t)
	cfg.NumPartitions = 3
	b := startBroker(t, cfg)
	cl := newClient(t, b)
	createTopic(t, b, "taken", 1, nil)

	str := func(s string) *string { return &s }
	cases := []struct {
		name         string
		topic        string
		partitions   int32
		replication  int16
		configs      map[string]*string
		validateOnly bool
		wantErr      *kerr.Error
		wantCreated  int32 // partitions the topic ends with; 0: not created
	}{
		{name: "default partitions", topic: "defaults", partitions: -1, replication: -1, wantCreated: 3},
		{name: "explicit with configs", topic: "configured", partitions: 2, replication: 1,
			configs: map[string]*string{"retention.ms": str("60000"), "segment.bytes": str("1048576")}, wantCreated: 2},
		{name: "validate only", topic: "validated", partitions: 2, replication: 1, validateOnly: true},
		{name: "already exists", topic: "taken", partitions: 1, replication: 1, wantErr: kerr.TopicAlreadyExists, wantCreated: 1},
		{name: "zero partitions", topic: "zero", partitions: 0, replication: 1, wantErr: kerr.InvalidPartitions},
		{name: "replication three", topic: "rf3", partitions: 1, replication: 3, wantErr: kerr.InvalidReplicationFactor},
		{name: "unknown config", topic: "badcfg", partitions: 1, replication: 1,
			configs: map[string]*string{"no.such.config": str("1")}, wantErr: kerr.InvalidConfig},
		{name: "bad config value", topic: "badval", partitions: 1, replication: 1,
			configs: map[string]*string{"retention.ms": str("soon")}, wantErr: kerr.InvalidConfig},
		{name: "invalid name", topic: "no/slashes", partitions: 1, replication: 1, wantErr: kerr.InvalidTopicException},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 10000
			req.ValidateOnly = c.validateOnly
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = c.topic
			rt.NumPartitions = c.partitions
			rt.ReplicationFactor = c.replication
			for k, v := range c.configs {
				rc := kmsg.NewCreateTopicsRequestTopicConfig()
				rc.Name, rc.Value = k, v
				rt.Configs = append(rt.Configs, rc)
			}
			req.Topics = append(req.Topics, rt)
			resp := issue[*kmsg.CreateTopicsResponse](t, cl, req)
			got := resp.Topics[0]
			if err := kerr.ErrorForCode(got.ErrorCode); err != errOrNil(c.wantErr) {
				t.Fatalf("got error %v, want %v", err, c.wantErr)
			}
			tp, ok := b.cache.Topic(c.topic)
			if c.wantCreated == 0 && ok {
				t.Fatalf("topic %s exists with %d partitions, want none", c.topic, len(tp.Partitions))
			}
			if c.wantCreated > 0 && (!ok || int32(len(tp.Partitions)) != c.wantCreated) {
				t.Fatalf("topic %s: got %d partitions (exists %v), want %d", c.topic, len(tp.Partitions), ok, c.wantCreated)
			}
			configs := b.replicas.TopicConfigs(context.Background(), []string{c.topic})[c.topic]
			for k, v := range c.configs {
				if c.wantErr == nil && !c.validateOnly && configs[k] != *v {
					t.Fatalf("config %s: got %q, want %q", k, configs[k], *v)
				}
			}
		})
	}
}

// errOrNil turns a typed nil *kerr.Error into a nil error.
func errOrNil(e *kerr.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// TestMetadataAutoCreatesValidTopicsOnly shows Metadata auto-creating a
// named topic with num.partitions, refusing an invalid name with
// INVALID_TOPIC_EXCEPTION, and answering UNKNOWN_TOPIC_OR_PARTITION when
// auto-creation is off, with this broker as controller and every leader.
func TestMetadataAutoCreatesValidTopicsOnly(t *testing.T) {
	for _, autoCreate := range []bool{true, false} {
		t.Run("auto.create.topics.enable="+strconv.FormatBool(autoCreate), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.BrokerID = 7
			cfg.NumPartitions = 2
			cfg.AutoCreateTopics = autoCreate
			b := startBroker(t, cfg)
			cl := newClient(t, b)

			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = true
			for _, name := range []string{"fresh", "bad name!"} {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			resp := issue[*kmsg.MetadataResponse](t, cl, req)
			if resp.ControllerID != 7 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 {
				t.Fatalf("got controller %d brokers %+v, want broker 7 alone", resp.ControllerID, resp.Brokers)
			}
			fresh, bad := resp.Topics[0], resp.Topics[1]
			if bad.ErrorCode != kerr.InvalidTopicException.Code {
				t.Fatalf("invalid name: got error %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(bad.ErrorCode))
			}
			if !autoCreate {
				if fresh.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("got error %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(fresh.ErrorCode))
				}
				return
			}
			if fresh.ErrorCode != 0 || len(fresh.Partitions) != 2 {
				t.Fatalf("got error %v with %d partitions, want 2 partitions", kerr.ErrorForCode(fresh.ErrorCode), len(fresh.Partitions))
			}
			for _, p := range fresh.Partitions {
				if p.Leader != 7 || !slices.Equal(p.ISR, []int32{7}) || !slices.Equal(p.Replicas, []int32{7}) {
					t.Fatalf("partition %d: got leader %d replicas %v isr %v, want broker 7", p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
		})
	}
}

// TestProduceErrorsAndAcksZero covers Produce's refusals
// (UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE for a batch whose CRC does
// not match) and acks=0, which is appended but never answered.
func TestProduceErrorsAndAcksZero(t *testing.T) {
	b := startBroker(t, testConfig(t))
	createTopic(t, b, "target", 1, nil)
	nc := dialBroker(t, b)

	produce := func(topic string, partition int32, acks int16, records []byte) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = acks
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = partition
		rp.Records = records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	corrupt := buildBatch(t, []byte("flipped"))
	corrupt[len(corrupt)-2] ^= 0xff

	cases := []struct {
		name    string
		req     *kmsg.ProduceRequest
		wantErr error
	}{
		{"unknown topic", produce("missing", 0, 1, buildBatch(t, []byte("x"))), kerr.UnknownTopicOrPartition},
		{"unknown partition", produce("target", 5, -1, buildBatch(t, []byte("x"))), kerr.UnknownTopicOrPartition},
		{"corrupt batch", produce("target", 0, 1, corrupt), kerr.CorruptMessage},
		{"acks all", produce("target", 0, -1, buildBatch(t, []byte("first"))), nil},
	}
	for i, c := range cases {
		resp := roundTrip(t, nc, c.req, int32(i)).(*kmsg.ProduceResponse)
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != c.wantErr {
			t.Fatalf("%s: got error %v, want %v", c.name, err, c.wantErr)
		}
	}

	// acks=0: no response; the next response on the connection is the
	// following request's, and the record is in the log.
	if _, err := nc.Write(encodeRequest(produce("target", 0, 0, buildBatch(t, []byte("second"))), 100)); err != nil {
		t.Fatalf("write: %v", err)
	}
	list := kmsg.NewPtrListOffsetsRequest()
	list.SetVersion(4)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "target"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = listLatest
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	lr := roundTrip(t, nc, list, 101).(*kmsg.ListOffsetsResponse)
	if got := lr.Topics[0].Partitions[0].Offset; got != 2 {
		t.Fatalf("after the acks=0 produce: got latest offset %d, want 2", got)
	}
}

// TestFetchAndListOffsets covers Fetch's OFFSET_OUT_OF_RANGE and its high
// watermark and log start offset, a long poll woken by an append on
// another connection, and ListOffsets' earliest, latest and by-timestamp
// answers.
func TestFetchAndListOffsets(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "offsets"
	createTopic(t, b, topic, 1, nil)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic))
	ctx := testContext(t, time.Minute)

	base := time.UnixMilli(1_800_000_000_000)
	for i := range 10 {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	fetch := func(offset int64, wait time.Duration) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = int32(wait.Milliseconds())
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = offset
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		return issue[*kmsg.FetchResponse](t, cl, req).Topics[0].Partitions[0]
	}
	if p := fetch(11, 0); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: got error %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := fetch(3, 0); p.ErrorCode != 0 || p.HighWatermark != 10 || p.LastStableOffset != 10 || p.LogStartOffset != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch at 3: got error %v hw %d lso %d log start %d, %d bytes; want none, 10, 10, 0, >0",
			kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, p.LastStableOffset, p.LogStartOffset, len(p.RecordBatches))
	}

	// A fetch at the end waits far longer than the test allows; only the
	// append from another client can answer it in time.
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { done <- fetch(10, 10*time.Minute) }()
	other := newClient(t, b, kgo.DefaultProduceTopic(topic))
	waitFor(t, ctx, "the fetch to wait on the partition", func() bool {
		p := b.replicas.PartitionFor(topic, 0)
		return p.WaitingFetches() > 0
	})
	if err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("wake"), Timestamp: base.Add(time.Hour)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	select {
	case p := <-done:
		if p.HighWatermark != 11 || len(p.RecordBatches) == 0 {
			t.Fatalf("woken fetch: got hw %d and %d bytes, want 11 and >0", p.HighWatermark, len(p.RecordBatches))
		}
	case <-ctx.Done():
		t.Fatalf("the long-poll fetch was not woken by the append")
	}

	adm := kadm.NewClient(cl)
	start, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	if o, _ := start.Lookup(topic, 0); o.Offset != 0 {
		t.Fatalf("earliest: got %d, want 0", o.Offset)
	}
	if o, _ := end.Lookup(topic, 0); o.Offset != 11 {
		t.Fatalf("latest: got %d, want 11", o.Offset)
	}
	byTime, err := adm.ListOffsetsAfterMilli(ctx, base.Add(4*time.Second).UnixMilli(), topic)
	if err != nil {
		t.Fatalf("list offsets by time: %v", err)
	}
	if o, _ := byTime.Lookup(topic, 0); o.Offset != 4 {
		t.Fatalf("by timestamp: got offset %d, want 4", o.Offset)
	}

	// The special timestamps of v7 and later: max timestamp (the "wake"
	// record, an hour ahead), earliest local (the log start) and latest
	// tiered (nothing tiered); before v7, -3 is not a query. The raw
	// connection keeps each request at its version.
	nc := dialBroker(t, b)
	for i, tc := range []struct {
		version         int16
		timestamp       int64
		wantErr         int16
		wantOffset, wTs int64
	}{
		{7, listMaxTimestamp, 0, 10, base.Add(time.Hour).UnixMilli()},
		{9, listMaxTimestamp, 0, 10, base.Add(time.Hour).UnixMilli()},
		{8, listEarliestLocal, 0, 0, -1},
		{9, listLatestTiered, 0, -1, -1},
		{6, listMaxTimestamp, kerr.InvalidRequest.Code, -1, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(tc.version)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = tc.timestamp, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		got := roundTrip(t, nc, req, int32(200+i)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if got.ErrorCode != tc.wantErr || got.Offset != tc.wantOffset || got.Timestamp != tc.wTs {
			t.Errorf("ListOffsets v%d timestamp %d: got error %d, offset %d, timestamp %d; want %d, %d, %d",
				tc.version, tc.timestamp, got.ErrorCode, got.Offset, got.Timestamp, tc.wantErr, tc.wantOffset, tc.wTs)
		}
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestDeleteTopicsAndDescribeConfigs deletes a topic (a fetch waiting on
// it is answered, a second delete gets UNKNOWN_TOPIC_OR_PARTITION) and
// describes the broker's and a topic's configs.
func TestDeleteTopicsAndDescribeConfigs(t *testing.T) {
	cfg := testConfig(t)
	cfg.AutoCreateTopics = false
	cfg.LogRetention = time.Hour
	b := startBroker(t, cfg)
	str := func(s string) *string { return &s }
	createTopic(t, b, "described", 1, map[string]*string{"retention.bytes": str("123456")})
	createTopic(t, b, "doomed", 2, nil)
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	ctx := testContext(t, time.Minute)

	configs, err := adm.DescribeTopicConfigs(ctx, "described")
	if err != nil {
		t.Fatalf("describe topic configs: %v", err)
	}
	rc, err := configs.On("described", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe topic configs: %v %v", err, rc.Err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["retention.bytes"] != "123456" || got["retention.ms"] != "3600000" {
		t.Fatalf("topic configs: got retention.bytes=%q retention.ms=%q, want 123456 and 3600000", got["retention.bytes"], got["retention.ms"])
	}
	bconfigs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	got = map[string]string{}
	for _, rc := range bconfigs {
		for _, c := range rc.Configs {
			got[c.Key] = c.MaybeValue()
		}
	}
	if got["auto.create.topics.enable"] != "false" || got["socket.request.max.bytes"] != "104857600" {
		t.Fatalf("broker configs: got %v", got)
	}

	done := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 600_000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "doomed"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		_, err := cl.Request(ctx, req)
		done <- err
	}()
	waitFor(t, ctx, "the fetch to wait on doomed-0", func() bool {
		p := b.replicas.PartitionFor("doomed", 0)
		return p.WaitingFetches() > 0
	})
	deleted, err := adm.DeleteTopics(ctx, "doomed")
	if err != nil || deleted["doomed"].Err != nil {
		t.Fatalf("delete topic: %v %v", err, deleted["doomed"].Err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fetch on the deleted topic: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the fetch waiting on the deleted topic was not answered")
	}
	if _, ok := b.cache.Topic("doomed"); ok {
		t.Fatalf("topic doomed still exists")
	}
	again, err := adm.DeleteTopics(ctx, "doomed")
	if err != nil {
		t.Fatalf("delete topic again: %v", err)
	}
	if err := again["doomed"].Err; err != kerr.UnknownTopicOrPartition {
		t.Fatalf("second delete: got %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// TestDeletedLogsRemovedAside: deleting a topic renames its partitions'
// directories to names marked for deletion and removes them in the
// background, the topic can be created again at once and starts empty,
// and what an earlier run left marked is removed at start.
func TestDeletedLogsRemovedAside(t *testing.T) {
	cfg := testConfig(t)
	cfg.AutoCreateTopics = false
	logDir := cfg.LogDirs[0]
	leftover := filepath.Join(logDir, "gone-0.0123456789abcdef"+tlog.DeletedSuffix)
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "00000000000000000000.log"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	entries := func(prefix string) []string {
		var names []string
		des, err := os.ReadDir(logDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range des {
			if strings.HasPrefix(e.Name(), prefix) {
				names = append(names, e.Name())
			}
		}
		return names
	}
	waitFor(t, ctx, "the log an earlier run left marked deleted to be removed", func() bool { return len(entries("gone-")) == 0 })

	const topic = "doomed"
	createTopic(t, b, topic, 3, nil)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	for i := range 30 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if got := entries(topic + "-"); len(got) != 3 {
		t.Fatalf("log dir holds %v, want the 3 partitions of %s", got, topic)
	}
	deleted, err := adm.DeleteTopics(ctx, topic)
	if err != nil || deleted[topic].Err != nil {
		t.Fatalf("delete topic: %v %v", err, deleted[topic].Err)
	}
	waitFor(t, ctx, "the deleted topic's logs to be removed", func() bool { return len(entries(topic+"-")) == 0 })

	createTopic(t, b, topic, 3, nil)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("recreated %s-%d: end offset %d (%v), want 0", topic, o.Partition, o.Offset, o.Err)
		}
	})
}

// TestLeaderEpochAnswers covers OffsetForLeaderEpoch (the current epoch
// ends at the log end offset; an epoch above it is undefined) and the
// current-leader-epoch checks of Fetch and ListOffsets: an epoch newer than
// the broker's is UNKNOWN_LEADER_EPOCH.
func TestLeaderEpochAnswers(t *testing.T) {
	b := startBroker(t, testConfig(t))
	const topic = "epochs"
	createTopic(t, b, topic, 1, nil)
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic))
	ctx := testContext(t, time.Minute)
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	ask := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch = current
		rp.LeaderEpoch = epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return issue[*kmsg.OffsetForLeaderEpochResponse](t, cl, req).Topics[0].Partitions[0]
	}
	if p := ask(0, 0); p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 3 {
		t.Fatalf("epoch 0: got error %v epoch %d end %d, want none, 0, 3", kerr.ErrorForCode(p.ErrorCode), p.LeaderEpoch, p.EndOffset)
	}
	if p := ask(-1, 5); p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("epoch 5: got error %v epoch %d end %d, want none, -1, -1", kerr.ErrorForCode(p.ErrorCode), p.LeaderEpoch, p.EndOffset)
	}
	if p := ask(1, 0); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("current epoch 1: got error %v, want UNKNOWN_LEADER_EPOCH", kerr.ErrorForCode(p.ErrorCode))
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.CurrentLeaderEpoch = 1
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if p := issue[*kmsg.FetchResponse](t, cl, fetch).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("fetch with current epoch 1: got error %v, want UNKNOWN_LEADER_EPOCH", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestKafkaTopicConfigsAccepted creates a topic the way Kafka tools and
// frameworks do, with Kafka topic configs tripod does not act on and
// Kafka's Long.MAX_VALUE for "never": it is created, DescribeConfigs
// shows every config as set and Kafka's defaults for the rest (flush.ms
// Long.MAX_VALUE, not 0); a bad value of such a config or of
// cleanup.policy is refused with INVALID_CONFIG.
func TestKafkaTopicConfigsAccepted(t *testing.T) {
	b := startBroker(t, testConfig(t))
	adm := kadm.NewClient(newClient(t, b))
	ctx := testContext(t, time.Minute)
	set := map[string]*string{
		"compression.type":          kmsg.StringPtr("gzip"),
		"message.timestamp.type":    kmsg.StringPtr("LogAppendTime"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.25"),
		"retention.ms":              kmsg.StringPtr("9223372036854775807"),
		"segment.ms":                kmsg.StringPtr("9223372036854775807"),
		"preallocate":               kmsg.StringPtr("true"),
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, set, "kafka-configs")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic with Kafka configs: got %v / %v, want it created", err, resp.Err)
	}
	described, err := adm.DescribeTopicConfigs(ctx, "kafka-configs")
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	rc, err := described.On("kafka-configs", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs of kafka-configs: %v / %v", err, rc.Err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, v := range set {
		if got[k] != *v {
			t.Errorf("DescribeConfigs %s: got %q, want %q as set", k, got[k], *v)
		}
	}
	for k, want := range map[string]string{"flush.ms": "9223372036854775807", "max.compaction.lag.ms": "9223372036854775807", "cleanup.policy": "delete"} {
		if got[k] != want {
			t.Errorf("DescribeConfigs %s: got %q, want Kafka's default %q", k, got[k], want)
		}
	}
	for _, bad := range []map[string]*string{
		{"message.timestamp.type": kmsg.StringPtr("WallClock")},
		{"min.cleanable.dirty.ratio": kmsg.StringPtr("2")},
		{"cleanup.policy": kmsg.StringPtr("compact,archive")},
	} {
		resp, err := adm.CreateTopic(ctx, 1, 1, bad, "refused")
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("create topic with %v: got %v, want INVALID_CONFIG", bad, err)
		}
	}
}
