package replica

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/kafkatest"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// FuzzFollowerResponse feeds arbitrary response bodies to the code with
// which the replica manager reads its leaders' and the controller's
// answers (the rest of the broker reads its own in broker's
// FuzzPeerResponse). A fake peer (kafkatest.Peer) answers the API the
// input names, at a version the input bounds, with the fuzzed body; the
// manager's own functions send the request over a real franz-go client
// and apply what it decodes:
//   - Fetch, OffsetForLeaderEpoch and ListOffsets: a fetcher's fetch,
//     truncateByEpoch and outOfRange on two follower partitions of
//     leader fakePeerID (fetched, appendAsFollower and truncation
//     included);
//   - AlterPartition: isrSender.sendRemote, then alterFailure on each
//     partition's error.
//
// The property is that nothing panics and every call returns within
// peerCallTimeout.
func FuzzFollowerResponse(f *testing.F) {
	peer := kafkatest.Start(f)
	pb := newPeerFuzzBroker(f, peer)
	kafkatest.FuzzResponses(f, peer, peerResponseKeys, peerResponseSeeds(), peerCallTimeout, pb.applyPeerResponse)
}

// peerResponseKeys are the APIs whose responses the replica manager
// decodes.
var peerResponseKeys = []int16{1, 2, 23, 56}

// fakePeerID is the broker id of the fake peer: the leader the follower
// partitions fetch from and the controller the manager asks.
const fakePeerID = 99

// peerCallTimeout bounds one call of the broker's code to the fake peer.
const peerCallTimeout = 2 * time.Second

// peerFuzzBroker is a replica manager reduced to what reads peers'
// answers: a metadata cache and a membership naming the fake peer as
// controller and live broker, and two partitions following the fake
// peer.
type peerFuzzBroker struct {
	m *Manager
	// peer is the fake peer's membership: its clients reach the peer.
	peer *fakePeerMembership
	// addr is the fake peer's address.
	addr    string
	fetcher *fetcher
	parts   []*fetchPartition
}

// fakePeerMembership is a Membership whose controller and only peer is
// the fake peer, reached over real franz-go clients.
type fakePeerMembership struct {
	addr string
	peer coord.Broker
}

func (p *fakePeerMembership) CurrentEpoch() int64                          { return 1 }
func (p *fakePeerMembership) CheckBrokerEpoch(context.Context, int64) bool { return true }
func (p *fakePeerMembership) Controller() *controller.Controller           { return nil }
func (p *fakePeerMembership) BackendController() coord.ControllerInfo {
	return coord.ControllerInfo{ID: fakePeerID, Epoch: 1}
}
func (p *fakePeerMembership) AskController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := p.PeerClient(p.addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}
func (p *fakePeerMembership) PeerAddr(cb coord.Broker) string { return cb.Addr() }
func (p *fakePeerMembership) PeerClient(addr string, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(5 * time.Second)}, extra...)...)
}

func (p *fakePeerMembership) PeerDial() PeerDial { return PeerDial{ClientID: "fuzz"} }

// fakePeerMetadata is a Metadata whose only broker is the fake peer.
type fakePeerMetadata struct{ peer coord.Broker }

func (c fakePeerMetadata) Update(*controller.UpdateMetadataRequest, bool) {}
func (c fakePeerMetadata) IsSynced() bool                                 { return true }
func (c fakePeerMetadata) HasPartition(string, int32) bool                { return true }
func (c fakePeerMetadata) Broker(id coord.BrokerID) (coord.Broker, bool) {
	return c.peer, id == c.peer.ID
}

// uncounted is Metrics that counts nothing.
type uncounted struct{}

func (uncounted) Throttled(string, int, int) {}
func (uncounted) ISRChanged(int, int)        {}

// newPeerFuzzBroker builds the peerFuzzBroker of peer; its partitions'
// logs are closed when the target ends.
func newPeerFuzzBroker(f *testing.F, peer *kafkatest.Peer) *peerFuzzBroker {
	f.Helper()
	cfg := config.DefaultConfig()
	cfg.BrokerID = 1
	cfg.LogDirs = []string{f.TempDir()}
	host, port := peer.HostPort()
	pb := coord.Broker{ID: fakePeerID, Host: host, Port: port}
	member := &fakePeerMembership{addr: peer.Addr(), peer: pb}
	closing := make(chan struct{})
	followerQuota := NewQuota(config.QuotaSamples, config.QuotaWindow, time.Now)
	m := NewManager(&cfg, &LogDirs{}, nil, Deps{Logger: hclog.NewNullLogger(), Metrics: uncounted{},
		Metadata: fakePeerMetadata{peer: pb}, Membership: member, FollowerQuota: followerQuota, Closing: closing})
	// The fetcher manager is closed at once: the harness calls the
	// fetcher's methods itself, so applyRole must start no fetcher.
	m.fetchers.close()

	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	pf := &peerFuzzBroker{m: m, peer: member, addr: peer.Addr()}
	pf.fetcher = &fetcher{m: m.fetchers, leader: fakePeerID, ctx: ctx, cancel: cancel,
		parts: map[*Partition]*fetchPartition{}, byTP: map[coord.TopicPartition]*fetchPartition{}, aside: map[*fetchPartition]struct{}{},
		changed: make(chan struct{}, 1)}
	self := coord.BrokerID(cfg.BrokerID)
	for i := int32(0); i < 2; i++ {
		info := controller.PartitionInfo{
			PartitionState: coord.PartitionState{Topic: "peer", Partition: i, Leader: fakePeerID, LeaderEpoch: 1,
				ISR: []coord.BrokerID{fakePeerID, self}},
			Replicas: []coord.BrokerID{fakePeerID, self},
		}
		rep, err := m.newReplicationState(cfg, info.TopicPartition(), nil)
		if err != nil {
			f.Fatalf("replication state: %v", err)
		}
		l, err := tlog.Open(filepath.Join(cfg.LogDirs[0], fmt.Sprintf("peer-%d", i)), cfg.LogConfig(nil))
		if err != nil {
			f.Fatalf("open log: %v", err)
		}
		f.Cleanup(func() { l.Close() })
		p := newPartition(info, l, &cfg, nil, cfg.BrokerID, rep, 0, new(atomic.Bool))
		m.applyRole(p, info)
		if p.rep.Role() != replication.RoleFollower {
			f.Fatalf("partition %s: got role %v, want follower", p.Name(), p.rep.Role())
		}
		p.appendMu.Lock()
		gen := p.followGen
		p.appendMu.Unlock()
		fp := &fetchPartition{p: p, leaderEpoch: info.LeaderEpoch, gen: gen}
		pf.fetcher.parts[p] = fp
		pf.fetcher.byTP[info.TopicPartition()] = fp
		pf.parts = append(pf.parts, fp)
	}
	return pf
}

// applyPeerResponse makes the call of the manager's code that reads a
// response of key from the fake peer, as FuzzFollowerResponse lists.
func (pf *peerFuzzBroker) applyPeerResponse(t *testing.T, key int16) {
	ctx, cancel := context.WithTimeout(context.Background(), peerCallTimeout)
	defer cancel()
	addr := pf.addr
	switch key {
	case 1, 2, 23:
		cl, err := DialPeer(ctx, addr, pf.peer.PeerDial())
		if err != nil {
			t.Fatalf("connection to the fake peer: %v", err)
		}
		defer cl.Close()
		switch key {
		case 1:
			_ = pf.fetcher.fetch(ctx, cl, slices.Clone(pf.parts), nil, time.Time{}, false)
		case 2:
			pf.fetcher.outOfRange(ctx, cl, pf.parts[0], -1)
		case 23:
			for _, fp := range pf.parts {
				fp.truncating, fp.askEpoch = true, 1
			}
			_ = pf.fetcher.truncateByEpoch(ctx, cl, pf.parts)
		}
		for _, fp := range pf.parts {
			fp.truncating, fp.retryAt, fp.failures = false, time.Time{}, 0
		}
	case 56:
		batch := map[*Partition]replication.Proposal{}
		for _, fp := range pf.parts {
			batch[fp.p] = replication.Proposal{LeaderEpoch: 1, ISR: []replication.ReplicaID{fakePeerID}}
		}
		for _, out := range (&isrSender{rm: pf.m}).sendRemote(ctx, 1, batch) {
			if out.err != nil {
				_ = alterFailure(out.err)
			}
		}
	default:
		t.Fatalf("no call reads a %s response", kmsg.NameForKey(key))
	}
}

// peerResponseSeeds returns FuzzFollowerResponse's seeds: every response
// kind with kmsg's defaults at its highest version, answers that reach
// the handling (a fetch with records, an out-of-range fetch, epoch ends,
// ISR changes), and truncated copies.
func peerResponseSeeds() kafkatest.Seeds {
	seeds := kafkatest.DefaultResponses(peerResponseKeys)

	fetch := kmsg.NewPtrFetchResponse()
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic = "peer"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = 2, 2, 0
	fp.RecordBatches = kafkatest.FuzzBatch([]byte("leader-one"), []byte("leader-two"))
	oor := kmsg.NewFetchResponseTopicPartition()
	oor.Partition, oor.ErrorCode, oor.LogStartOffset = 1, 1, 5
	ft.Partitions = append(ft.Partitions, fp, oor)
	fetch.Topics = append(fetch.Topics, ft)
	seeds.Add(fetch, 11)

	lo := kmsg.NewPtrListOffsetsResponse()
	lt := kmsg.NewListOffsetsResponseTopic()
	lt.Topic = "peer"
	lp := kmsg.NewListOffsetsResponseTopicPartition()
	lp.Offset = 1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	seeds.Add(lo, 4)

	oe := kmsg.NewPtrOffsetForLeaderEpochResponse()
	ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
	ot.Topic = "peer"
	for p := int32(0); p < 2; p++ {
		op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		op.Partition, op.LeaderEpoch, op.EndOffset = p, 1, 1
		ot.Partitions = append(ot.Partitions, op)
	}
	oe.Topics = append(oe.Topics, ot)
	seeds.Add(oe, 3)

	ap := kmsg.NewPtrAlterPartitionResponse()
	at := kmsg.NewAlterPartitionResponseTopic()
	at.Topic = "peer"
	ok := kmsg.NewAlterPartitionResponseTopicPartition()
	ok.LeaderID, ok.LeaderEpoch, ok.ISR, ok.PartitionEpoch = fakePeerID, 1, []int32{fakePeerID}, 2
	fenced := kmsg.NewAlterPartitionResponseTopicPartition()
	fenced.Partition, fenced.ErrorCode = 1, 74
	at.Partitions = append(at.Partitions, ok, fenced)
	ap.Topics = append(ap.Topics, at)
	seeds.Add(ap, AlterPartitionVersion)

	return seeds
}

// TestWriteFuzzCorpus writes FuzzFollowerResponse's seed corpus under
// testdata/fuzz when TRIPOD_WRITE_FUZZ_CORPUS is set; `go test` then
// runs the target over it. Regenerate after changing the seeds:
//
//	TRIPOD_WRITE_FUZZ_CORPUS=1 go test -run TestWriteFuzzCorpus ./broker/replica/
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("TRIPOD_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set TRIPOD_WRITE_FUZZ_CORPUS to write testdata/fuzz")
	}
	for _, s := range peerResponseSeeds() {
		kafkatest.WriteCorpusEntry(t, "FuzzFollowerResponse", s.Key, s.Version, s.Body)
	}
}
