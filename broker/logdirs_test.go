package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/cluster"
)

// TestDecodeControllerResponse decodes the brokers' answers the
// controller acts on: a refused request's code, and the LeaderAndIsr
// partitions answered KAFKA_STORAGE_ERROR, named by topic ID.
func TestDecodeControllerResponse(t *testing.T) {
	idA, idB := [16]byte{1}, [16]byte{2}
	lair := &controller.LeaderAndIsrRequest{Partitions: []controller.PartitionInfo{
		{PartitionState: coord.PartitionState{Topic: "a", Partition: 0}, TopicID: idA},
		{PartitionState: coord.PartitionState{Topic: "a", Partition: 1}, TopicID: idA},
		{PartitionState: coord.PartitionState{Topic: "b", Partition: 0}, TopicID: idB},
	}}
	leaderAndIsr := func(code int16, codes map[[16]byte][]int16) *kmsg.LeaderAndISRResponse {
		resp := kmsg.NewPtrLeaderAndISRResponse()
		resp.SetVersion(leaderAndIsrVersion)
		resp.ErrorCode = code
		for _, id := range [][16]byte{idA, idB} {
			rt := kmsg.NewLeaderAndISRResponseTopic()
			rt.TopicID = id
			for p, c := range codes[id] {
				rp := kmsg.NewLeaderAndISRResponseTopicPartition()
				rp.Partition, rp.ErrorCode = int32(p), c
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	storage := kerr.KafkaStorageError.Code
	stale := kerr.StaleControllerEpoch.Code
	um := kmsg.NewPtrUpdateMetadataResponse()
	um.ErrorCode = stale
	for _, tc := range []struct {
		name string
		req  controller.Request
		resp kmsg.Response
		want replica.ControllerAnswer
	}{
		{"all applied", lair, leaderAndIsr(0, map[[16]byte][]int16{idA: {0, 0}, idB: {0}}), replica.ControllerAnswer{}},
		{"one storage error", lair, leaderAndIsr(0, map[[16]byte][]int16{idA: {0, storage}, idB: {0}}),
			replica.ControllerAnswer{Offline: []coord.TopicPartition{{Topic: "a", Partition: 1}}}},
		{"storage errors in two topics", lair, leaderAndIsr(0, map[[16]byte][]int16{idA: {storage, 0}, idB: {storage}}),
			replica.ControllerAnswer{Offline: []coord.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 0}}}},
		{"stale controller epoch", lair, leaderAndIsr(stale, map[[16]byte][]int16{idA: {stale, stale}, idB: {stale}}),
			replica.ControllerAnswer{Code: stale}},
		{"stale UpdateMetadata", &controller.UpdateMetadataRequest{}, um, replica.ControllerAnswer{Code: stale}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeControllerResponse(tc.req, tc.resp)
			if got.Code != tc.want.Code || !slices.Equal(got.Offline, tc.want.Offline) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// controllerOf returns the broker running the controller.
func controllerOf(t *testing.T, ctx context.Context, brokers []*Broker) *Broker {
	t.Helper()
	var found *Broker
	waitFor(t, ctx, "a controller", func() bool {
		for _, b := range brokers {
			if b.member.Controller() != nil {
				found = b
				return true
			}
		}
		return false
	})
	return found
}

// createAssignedTopic creates topic with a manual replica assignment at
// the controller.
func createAssignedTopic(t *testing.T, ctx context.Context, brokers []*Broker, topic string, assignment [][]int32) {
	t.Helper()
	waitFor(t, ctx, "topic "+topic+" created", func() bool {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, replicas := range assignment {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(p), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		req.Topics = append(req.Topics, rt)
		resp := askBroker[*kmsg.CreateTopicsResponse](t, controllerOf(t, ctx, brokers), req)
		code := resp.Topics[0].ErrorCode
		return code == 0 || code == kerr.TopicAlreadyExists.Code
	})
}

// TestLeaderAndIsrStorageErrorMovesLeadership: broker 2 cannot create the
// log of a new partition (a regular file stands where its directory
// should be), so it answers the controller's LeaderAndIsr with
// KAFKA_STORAGE_ERROR for it; the controller leaves broker 2 out of the
// ISR and elects another member, produce to broker 2 gets
// KAFKA_STORAGE_ERROR, and the cluster serves the partition.
func TestLeaderAndIsrStorageErrorMovesLeadership(t *testing.T) {
	brokers := startRaftCluster(t, 3)
	ctx := testContext(t, 2*time.Minute)
	b2 := brokers[1]
	const topic = "unopenable"
	blocker := filepath.Join(b2.cfg.LogDirs[0], topic+"-0")
	if err := os.WriteFile(blocker, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatalf("write %s: %v", blocker, err)
	}
	// Broker 2 is the preferred leader, so the controller first elects it.
	createAssignedTopic(t, ctx, brokers, topic, [][]int32{{2, 1, 3}})
	tp := coord.TopicPartition{Topic: topic, Partition: 0}
	waitFor(t, ctx, "broker 2's replica offline and out of the ISR everywhere", func() bool {
		if !b2.replicas.LogDirs().ReplicaOffline(tp) {
			return false
		}
		for _, b := range brokers {
			_, _, parts := metadataOf(t, b, topic)
			if len(parts) != 1 || parts[0].leader < 0 || parts[0].leader == 2 || slices.Contains(parts[0].isr, 2) {
				return false
			}
		}
		return true
	})
	_, _, parts := metadataOf(t, brokers[0], topic)
	if want := []int32{1, 3}; !slices.Equal(parts[0].isr, want) || parts[0].leader != 1 {
		t.Errorf("got leader %d ISR %v, want leader 1 ISR %v", parts[0].leader, parts[0].isr, want)
	}
	if code := produceTo(t, b2, topic, 0); code != kerr.KafkaStorageError.Code {
		t.Errorf("produce to broker 2: got %v, want %v", kerr.ErrorForCode(code), kerr.KafkaStorageError)
	}
	cl := newClient(t, brokers[0], kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("served")}).FirstErr(); err != nil {
		t.Fatalf("produce acks=all: got %v, want nil", err)
	}

	// A log dir failure report (BrokerHeartbeat with OfflineLogDirs) is
	// taken by the controller only, from the live incarnation only.
	ctrl := controllerOf(t, ctx, brokers)
	var other *Broker
	for _, b := range brokers {
		if b != ctrl {
			other = b
		}
	}
	heartbeat := func(to *Broker, epoch int64) int16 {
		req := kmsg.NewPtrBrokerHeartbeatRequest()
		req.SetVersion(replica.BrokerHeartbeatVersion)
		req.BrokerID, req.BrokerEpoch = other.cfg.BrokerID, epoch
		req.OfflineLogDirs = [][16]byte{replica.LogDirID(other.cfg.LogDirs[0])}
		return askBroker[*kmsg.BrokerHeartbeatResponse](t, to, req).ErrorCode
	}
	for _, tc := range []struct {
		name  string
		to    *Broker
		epoch int64
		want  int16
	}{
		{"at the controller", ctrl, other.member.CurrentEpoch(), 0},
		{"from another incarnation", ctrl, other.member.CurrentEpoch() + 1000, kerr.StaleBrokerEpoch.Code},
		{"at another broker", other, other.member.CurrentEpoch(), kerr.NotController.Code},
	} {
		if got := heartbeat(tc.to, tc.epoch); got != tc.want {
			t.Errorf("BrokerHeartbeat %s: got %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
}

// produceTo sends one acks=1 record to partition of topic at b itself and
// returns the partition's error code.
func produceTo(t *testing.T, b *Broker, topic string, partition int32) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = buildBatch(t, []byte("direct"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := askBroker[*kmsg.ProduceResponse](t, b, req)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestFullDiskTakesLogDirOffline fills broker 2's second log dir (a real
// 2 MiB tmpfs): its next append there fails with ENOSPC and takes that
// dir offline, not the broker. Broker 2 keeps its session and its
// partitions in the other dir; the controller moves the leaderships and
// ISR places of its offline replicas; produce to them at broker 2 gets
// KAFKA_STORAGE_ERROR while clients go on at the new leaders; every
// record acknowledged with acks=all is read back; the metric shows one
// offline dir. With space freed, broker 2 restarts on the same dirs and
// rejoins every ISR.
func TestFullDiskTakesLogDirOffline(t *testing.T) {
	root := t.TempDir()
	okDir, fullDir := filepath.Join(root, "ok"), filepath.Join(root, "tmpfs")
	cluster.MountTmpfs(t, fullDir, "2m")
	brokers := startRaftClusterWith(t, 3, func(c *config.Config) {
		c.ReplicaLagTimeMax = 10 * time.Second
		if c.BrokerID == 2 {
			c.LogDirs = []string{okDir, fullDir}
			// The full disk is found by an append, not by a checkpoint.
			c.ReplicaHighWatermarkCheckpointInterval = time.Hour
		}
	})
	ctx := testContext(t, 3*time.Minute)
	b2 := brokers[1]
	const topic = "disk"
	// Broker 2 is the preferred leader of partitions 0 and 1, and places
	// its four replicas alternately in its two dirs.
	createAssignedTopic(t, ctx, brokers, topic, [][]int32{{2, 1, 3}, {2, 3, 1}, {1, 2, 3}, {3, 2, 1}})
	waitFor(t, ctx, "broker 2 to hold every partition with a full ISR", func() bool {
		for p := int32(0); p < 4; p++ {
			if b2.replicas.PartitionFor(topic, p) == nil {
				return false
			}
		}
		_, _, parts := metadataOf(t, b2, topic)
		return len(parts) == 4 && !slices.ContainsFunc(parts, func(v partitionView) bool { return len(v.isr) != 3 })
	})
	var inFull, inOK []int32
	for p := int32(0); p < 4; p++ {
		if b2.replicas.PartitionFor(topic, p).LogDir() == fullDir {
			inFull = append(inFull, p)
		} else {
			inOK = append(inOK, p)
		}
	}
	_, _, parts := metadataOf(t, b2, topic)
	ledInOK := slices.IndexFunc(inOK, func(p int32) bool { return parts[p].leader == 2 })
	ledInFull := slices.IndexFunc(inFull, func(p int32) bool { return parts[p].leader == 2 })
	if ledInOK < 0 || ledInFull < 0 {
		t.Fatalf("broker 2: got partitions %v in %s and %v in %s, leaders %+v; want it to lead one in each dir", inFull, fullDir, inOK, okDir, parts)
	}
	keptPartition := inOK[ledInOK]
	sessionEpoch := b2.member.CurrentEpoch()

	seeds := []string{brokers[0].Addr().String(), brokers[2].Addr().String(), b2.Addr().String()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	acked := map[string]bool{}
	produce := func(p int32, value string) error {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := cl.ProduceSync(pctx, &kgo.Record{Partition: p, Value: []byte(value)}).FirstErr()
		if err == nil {
			acked[value] = true
		}
		return err
	}
	for p := int32(0); p < 4; p++ {
		for i := range 5 {
			if err := produce(p, fmt.Sprintf("before-%d-%d", p, i)); err != nil {
				t.Fatalf("produce to partition %d before the disk fills: %v", p, err)
			}
		}
	}

	cluster.FillFileSystem(t, filepath.Join(fullDir, "filler"))
	value := make([]byte, 8<<10)
	for i := 0; !b2.replicas.LogDirs().Offline(fullDir); i++ {
		if ctx.Err() != nil {
			t.Fatalf("dir %s still online after %d produces to a full disk", fullDir, i)
		}
		for _, p := range inFull {
			// An error is an unacknowledged produce; the loop goes on
			// until broker 2 notices the full disk.
			_ = produce(p, fmt.Sprintf("full-%d-%d-%s", p, i, value))
		}
	}
	t.Logf("log dir %s offline on broker 2 (the controller broker: %v)", fullDir, b2.member.Controller() != nil)

	waitFor(t, ctx, "the controller to move broker 2's offline replicas out of leadership and ISRs", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		for _, p := range inFull {
			if parts[p].leader < 0 || parts[p].leader == 2 || slices.Contains(parts[p].isr, 2) {
				return false
			}
		}
		return true
	})
	for _, p := range inFull {
		if code := produceTo(t, b2, topic, p); code != kerr.KafkaStorageError.Code {
			t.Errorf("produce to offline partition %d at broker 2: got %v, want %v", p, kerr.ErrorForCode(code), kerr.KafkaStorageError)
		}
	}
	_, _, parts = metadataOf(t, brokers[0], topic)
	if parts[keptPartition].leader != 2 || len(parts[keptPartition].isr) != 3 {
		t.Errorf("partition %d in broker 2's online dir: got leader %d ISR %v, want leader 2 and a full ISR",
			keptPartition, parts[keptPartition].leader, parts[keptPartition].isr)
	}
	if got := b2.member.CurrentEpoch(); got != sessionEpoch {
		t.Errorf("broker 2's session: got broker epoch %d, want %d kept", got, sessionEpoch)
	}
	if v, ok := metricValue(scrape(t, b2), "tripod_offline_log_dirs"); !ok || v != 1 {
		t.Errorf("tripod_offline_log_dirs on broker 2: got %v (found %v), want 1", v, ok)
	}
	for p := int32(0); p < 4; p++ {
		for i := range 3 {
			if err := produce(p, fmt.Sprintf("after-%d-%d", p, i)); err != nil {
				t.Fatalf("produce to partition %d after the dir went offline: %v", p, err)
			}
		}
	}
	readAll(t, ctx, seeds, topic, acked)

	// Space freed, broker 2 restarts on the same dirs and catches up.
	if err := os.Remove(filepath.Join(fullDir, "filler")); err != nil {
		t.Fatalf("free the tmpfs: %v", err)
	}
	cfg := b2.cfg
	if err := b2.Close(); err != nil {
		t.Fatalf("close broker 2: %v", err)
	}
	restarted, err := New(cfg, testLogger(t).Named("broker-2-restarted"))
	if err != nil {
		t.Fatalf("restart broker 2: %v", err)
	}
	t.Cleanup(func() {
		if err := restarted.Close(); err != nil {
			t.Errorf("close restarted broker 2: %v", err)
		}
	})
	waitFor(t, ctx, "restarted broker 2 back in every ISR", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		return len(parts) == 4 && !slices.ContainsFunc(parts, func(v partitionView) bool { return !slices.Contains(v.isr, 2) })
	})
	if n := restarted.replicas.LogDirs().OfflineCount(); n != 0 {
		t.Errorf("restarted broker 2: got %d offline log dirs, want 0", n)
	}
	for _, p := range inFull {
		if rp := restarted.replicas.PartitionFor(topic, p); rp == nil || rp.LogDir() != fullDir {
			t.Errorf("restarted broker 2: partition %d not reopened in %s", p, fullDir)
		}
	}
}

// readAll consumes every partition of topic from the start until each
// value in want has been read.
func readAll(t *testing.T, ctx context.Context, seeds []string, topic string, want map[string]bool) {
	t.Helper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()
	missing := len(want)
	seen := map[string]bool{}
	for missing > 0 {
		fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		fs := consumer.PollFetches(fctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read back: %d acknowledged records missing, want none", missing)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if want[v] && !seen[v] {
				seen[v] = true
				missing--
			}
		})
	}
}
