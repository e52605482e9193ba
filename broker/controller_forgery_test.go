package broker

import (
	"context"
	"crypto/x509/pkix"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// forgedEpoch is the controller epoch of the attack in issue #14: far
// above any real one, which a broker used to take on trust.
const forgedEpoch = 1 << 30

// sendForged sends req to b from a client of its own, as anyone who
// reaches the listener can, and returns the top-level error code.
func sendForged(t *testing.T, ctx context.Context, b *Broker, req kmsg.Request) int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
	if err != nil {
		t.Errorf("new client: %v", err)
		return -1
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Errorf("%s: %v", kmsg.NameForKey(req.Key()), err)
		return -1
	}
	switch r := resp.(type) {
	case *kmsg.LeaderAndISRResponse:
		return r.ErrorCode
	case *kmsg.UpdateMetadataResponse:
		return r.ErrorCode
	case *kmsg.StopReplicaResponse:
		return r.ErrorCode
	}
	t.Errorf("unexpected response %T", resp)
	return -1
}

// forgedLeaderAndIsr makes topic-0 led by broker 2, which does not
// exist, in a LeaderAndIsr from controller at controllerEpoch addressed
// to brokerEpoch.
func forgedLeaderAndIsr(b *Broker, topic string, controller int32, controllerEpoch int32, brokerEpoch int64) *kmsg.LeaderAndISRRequest {
	t, _ := b.cache.Topic(topic)
	p := b.replicas.PartitionFor(topic, 0).Role()
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = controller, controllerEpoch, brokerEpoch
	ts := kmsg.NewLeaderAndISRRequestTopicState()
	ts.Topic, ts.TopicID = topic, t.ID
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Partition, ps.ControllerEpoch = 0, controllerEpoch
	ps.Leader, ps.LeaderEpoch, ps.ZKVersion = 2, p.LeaderEpoch+1, p.PartitionEpoch+1
	ps.ISR, ps.Replicas = []int32{2}, []int32{1, 2}
	ts.PartitionStates = append(ts.PartitionStates, ps)
	req.TopicStates = append(req.TopicStates, ts)
	ll := kmsg.NewLeaderAndISRRequestLiveLeader()
	ll.BrokerID, ll.Host, ll.Port = 2, "127.0.0.1", 1
	req.LiveLeaders = append(req.LiveLeaders, ll)
	return req
}

// TestForgedControllerRequestsAreRefused replays the attack of issue #14
// against a broker without an authorizer: a plain client sends
// LeaderAndIsr with controller epoch 2^30, walking the broker epoch
// around the broker's own, then UpdateMetadata and StopReplica of that
// epoch, a LeaderAndIsr of the next epoch naming the real controller, and
// one of the current epoch naming another controller. The coordination
// backend names none of them, so every one is refused with
// STALE_CONTROLLER_EPOCH; the partition keeps its leader, leader epoch
// and records, and the real controller's requests are still accepted.
func TestForgedControllerRequestsAreRefused(t *testing.T) {
	b := startBroker(t, testConfig(t))
	ctx := testContext(t, time.Minute)
	const topic = "guarded"
	createTopic(t, b, topic, 1, nil)
	waitFor(t, ctx, "the broker to lead guarded-0", func() bool {
		p := b.replicas.PartitionFor(topic, 0)
		return p != nil && p.Role().Leader == 1
	})
	producer := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := producer.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatalf("produce before the attack: %v", err)
	}
	before := b.replicas.PartitionFor(topic, 0).Role()
	acceptedID, acceptedEpoch := b.replicas.AcceptedController()
	controllerID, controllerEpoch := int32(acceptedID), int32(acceptedEpoch)
	brokerEpoch := b.member.CurrentEpoch()

	var requests []kmsg.Request
	for e := brokerEpoch - 3; e <= brokerEpoch+3; e++ {
		requests = append(requests, forgedLeaderAndIsr(b, topic, controllerID, forgedEpoch, e))
	}
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = controllerID, forgedEpoch, brokerEpoch
	sr := kmsg.NewPtrStopReplicaRequest()
	sr.ControllerID, sr.ControllerEpoch, sr.BrokerEpoch = controllerID, forgedEpoch, brokerEpoch
	st := kmsg.NewStopReplicaRequestTopic()
	st.Topic = topic
	sps := kmsg.NewStopReplicaRequestTopicPartitionState()
	sps.Partition, sps.LeaderEpoch, sps.Delete = 0, -1, true
	st.PartitionStates = append(st.PartitionStates, sps)
	sr.Topics = append(sr.Topics, st)
	requests = append(requests, um, sr,
		forgedLeaderAndIsr(b, topic, controllerID, controllerEpoch+1, brokerEpoch),
		forgedLeaderAndIsr(b, topic, controllerID+7, controllerEpoch, brokerEpoch))
	// Each one waits (on its own connection) for the backend to name
	// its epoch, up to the session timeout: they go together.
	var wg sync.WaitGroup
	for i, req := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := sendForged(t, ctx, b, req); code != kerr.StaleControllerEpoch.Code {
				t.Errorf("forged request %d (%s): got %v, want STALE_CONTROLLER_EPOCH", i, kmsg.NameForKey(req.Key()), kerr.ErrorForCode(code))
			}
		}()
	}
	wg.Wait()

	p := b.replicas.PartitionFor(topic, 0)
	if p == nil {
		t.Fatalf("guarded-0: the replica is gone, want it kept")
	}
	if after := p.Role(); after.Leader != before.Leader || after.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("guarded-0 after the attack: leader %d epoch %d, want leader %d epoch %d",
			after.Leader, after.LeaderEpoch, before.Leader, before.LeaderEpoch)
	}
	_, accepted := b.replicas.AcceptedController()
	if accepted != int64(controllerEpoch) {
		t.Fatalf("accepted controller epoch after the attack: got %d, want %d", accepted, controllerEpoch)
	}
	if err := producer.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatalf("produce after the attack: %v", err)
	}
	// The real controller is still obeyed.
	createTopic(t, b, "after-attack", 1, nil)
	waitFor(t, ctx, "after-attack-0 on the broker", func() bool { return b.replicas.PartitionFor("after-attack", 0) != nil })
}

// TestControllerEpochIsConfirmedWithTheBackend checks the backend's view
// that the replica manager confirms a newer controller epoch with (its
// rule is replica's TestAcceptController): a view that lags behind the
// backend, before the watch has shown a new controller, is brought up
// by a read.
func TestControllerEpochIsConfirmedWithTheBackend(t *testing.T) {
	b := startBroker(t, testConfig(t))
	ctx := testContext(t, time.Minute)
	var named coord.ControllerInfo
	waitFor(t, ctx, "the backend to name a controller", func() bool {
		named = b.member.BackendController()
		return named.ID != coord.NoBroker
	})
	// A view that lags: a read of the backend brings it up.
	b.member.backendCtrlMu.Lock()
	b.member.backendCtrl = coord.ControllerInfo{ID: coord.NoBroker}
	b.member.backendCtrlMu.Unlock()
	if err := b.member.awaitBackendController(ctx, named.Epoch); err != nil {
		t.Fatalf("await controller epoch %d: %v", named.Epoch, err)
	}
	if got := b.member.BackendController(); got != named {
		t.Fatalf("backend controller after the read: got %+v, want %+v", got, named)
	}
}

// TestFollowerFetchFromUnassignedReplicaIsRefused sends a Fetch claiming
// replica id 42, which the partition does not have: it is answered
// NOT_LEADER_OR_FOLLOWER with no records, and the ISR is unchanged.
func TestFollowerFetchFromUnassignedReplicaIsRefused(t *testing.T) {
	b := startBroker(t, testConfig(t))
	ctx := testContext(t, time.Minute)
	const topic = "fetched"
	createTopic(t, b, topic, 1, nil)
	producer := newClient(t, b, kgo.DefaultProduceTopic(topic))
	if err := producer.ProduceSync(ctx, kgo.StringRecord("r")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for _, replica := range []int32{42, 1} {
		fetch := kmsg.NewPtrFetchRequest()
		fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = replica, 10, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		resp := askBroker[*kmsg.FetchResponse](t, b, fetch)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != kerr.NotLeaderForPartition.Code || len(rp.RecordBatches) != 0 {
			t.Fatalf("Fetch as replica %d: got %v with %d bytes, want NOT_LEADER_OR_FOLLOWER and none",
				replica, kerr.ErrorForCode(rp.ErrorCode), len(rp.RecordBatches))
		}
	}
	if _, _, parts := metadataOf(t, b, topic); len(parts) != 1 || len(parts[0].isr) != 1 {
		t.Fatalf("ISR after the fetches: got %+v, want [1]", parts)
	}
}

// TestStartWarnsOfListenersOpenToControllerRequests: a broker whose
// listener neither authenticates nor is reserved for brokers says at
// start that any client on it may act as the controller; one whose only
// listener requires client certificates does not.
func TestStartWarnsOfListenersOpenToControllerRequests(t *testing.T) {
	const warning = "listener does not authenticate its clients and is not reserved for brokers"
	_, logs := startLoggedBroker(t, testConfig(t))
	if !logged(logs, "[WARN]", warning, "listener=PLAINTEXT") {
		t.Fatalf("PLAINTEXT listener: no warning %q in:\n%s", warning, logs)
	}

	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{
		"listeners":               "SSL://127.0.0.1:0",
		"ssl.keystore.location":   ca.keystoreFile(t, dir, "k.pem", pkix.Name{CommonName: "broker"}),
		"ssl.truststore.location": ca.truststoreFile(t, dir, "ca.pem"),
		"ssl.client.auth":         "required",
	})
	_, logs = startLoggedBroker(t, cfg)
	if logged(logs, warning) || logged(logs, "inter-broker listener does not authenticate") {
		t.Fatalf("SSL listener with ssl.client.auth=required: got a warning, want none:\n%s", logs)
	}
}
