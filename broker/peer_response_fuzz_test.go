package broker

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/kafkatest"
)

// FuzzPeerResponse feeds arbitrary response bodies to the code with which
// a broker reads the controller's and other brokers' answers (the replica
// manager's fetchers and ISR reports read theirs in replica's
// FuzzFollowerResponse). A fake peer (kafkatest.Peer) answers the API the
// input names, at a version the input bounds, with the fuzzed body; the
// broker's own functions send the request over a real franz-go client
// and apply what it decodes:
//   - ControlledShutdown: askControlledShutdown;
//   - CreateTopics: autoCreate's forward to the controller;
//   - LeaderAndIsr, UpdateMetadata and StopReplica: the request the
//     controller's sender delivers (deliverOne keeps only the error).
//
// The property is that nothing panics and every call returns within
// peerCallTimeout.
func FuzzPeerResponse(f *testing.F) {
	peer := kafkatest.Start(f)
	pb := newPeerFuzzBroker(f, peer)
	kafkatest.FuzzResponses(f, peer, peerResponseKeys, peerResponseSeeds(), peerCallTimeout, pb.applyPeerResponse)
}

// peerResponseKeys are the APIs whose responses a broker decodes outside
// the replica manager.
var peerResponseKeys = []int16{4, 5, 6, 7, 19}

// fakePeerID is the broker id of the fake peer: the controller the fuzz
// broker asks.
const fakePeerID = 99

// peerCallTimeout bounds one call of the broker's code to the fake peer.
const peerCallTimeout = 2 * time.Second

// peerFuzzBroker is a broker reduced to what reads peers' answers: a
// metadata cache naming the fake peer as controller and live broker, and
// no controller of its own.
type peerFuzzBroker struct {
	b *Broker
	// addr is the fake peer's address.
	addr string
}

// newPeerFuzzBroker builds the peerFuzzBroker of peer.
func newPeerFuzzBroker(f *testing.F, peer *kafkatest.Peer) *peerFuzzBroker {
	f.Helper()
	cfg := testConfig(f)
	b := &Broker{cfg: cfg, logger: hclog.NewNullLogger(), cache: metadata.NewCache(), closing: make(chan struct{}),
		interBroker: &listener{ListenerSpec: config.ListenerSpec{ListenerAddr: config.ListenerAddr{Name: protocolPlaintext}, Protocol: protocolPlaintext}}}
	b.member = &membership{cfg: &b.cfg, logger: b.logger, cache: b.cache, interBroker: b.interBroker}
	b.replicas = replica.NewManager(&b.cfg, &replica.LogDirs{}, nil, replica.Deps{Logger: b.logger, Metadata: b.cache, Membership: b.member, Closing: b.closing})
	b.metrics = newMetrics(b)
	host, port := peer.HostPort()
	b.cache.SetController(fakePeerID)
	b.cache.SetLive([]coord.Broker{{ID: fakePeerID, Host: host, Port: port}})
	return &peerFuzzBroker{b: b, addr: peer.Addr()}
}

// applyPeerResponse makes the call of the broker's code that reads a
// response of key from the fake peer, as FuzzPeerResponse lists.
func (pf *peerFuzzBroker) applyPeerResponse(t *testing.T, key int16) {
	ctx, cancel := context.WithTimeout(context.Background(), peerCallTimeout)
	defer cancel()
	b := pf.b
	addr := pf.addr
	switch key {
	case 4, 5, 6:
		cl, err := b.member.PeerClient(addr)
		if err != nil {
			t.Fatalf("client of the fake peer: %v", err)
		}
		defer cl.Close()
		_, _ = cl.SeedBrokers()[0].Request(ctx, kmsg.RequestForKey(key))
	case 7:
		_, _ = b.member.askControlledShutdown(ctx, 1)
	case 19:
		_ = b.autoCreate(ctx, "peer-auto", 1)
	default:
		t.Fatalf("no call reads a %s response", kmsg.NameForKey(key))
	}
}

// peerResponseSeeds returns FuzzPeerResponse's seeds: every response kind
// with kmsg's defaults at its highest version, answers that reach the
// handling (partitions remaining, a created topic), and truncated
// copies.
func peerResponseSeeds() kafkatest.Seeds {
	seeds := kafkatest.DefaultResponses(peerResponseKeys)

	cs := kmsg.NewPtrControlledShutdownResponse()
	rem := kmsg.NewControlledShutdownResponsePartitionsRemaining()
	rem.Topic = "peer"
	cs.PartitionsRemaining = append(cs.PartitionsRemaining, rem)
	seeds.Add(cs, 3)

	ct := kmsg.NewPtrCreateTopicsResponse()
	ctt := kmsg.NewCreateTopicsResponseTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "peer-auto", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	seeds.Add(ct, 7)
	return seeds
}
