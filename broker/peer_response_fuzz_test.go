package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// FuzzPeerResponse feeds arbitrary response bodies to the code with which
// a broker reads other brokers' and the controller's answers. A fake peer
// (fakePeer) answers the API the input names, at a version the input
// bounds, with the fuzzed body; the broker's own functions send the
// request over a real franz-go client and apply what it decodes:
//   - Fetch, OffsetForLeaderEpoch and ListOffsets: a fetcher's fetch,
//     truncateByEpoch and outOfRange on two follower partitions of
//     leader fakePeerID (fetched, appendAsFollower and truncation
//     included);
//   - AlterPartition: isrSender.sendRemote, then alterFailure on each
//     partition's error;
//   - ControlledShutdown: askControlledShutdown;
//   - CreateTopics: autoCreate's forward to the controller;
//   - LeaderAndIsr, UpdateMetadata and StopReplica: the request the
//     controller's sender delivers (deliverOne keeps only the error).
//
// The property is that nothing panics and every call returns within
// peerCallTimeout.
func FuzzPeerResponse(f *testing.F) {
	peer := startFakePeer(f)
	pb := newPeerFuzzBroker(f, peer)
	for _, s := range peerResponseSeeds() {
		f.Add(s.key, s.version, s.body)
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		key, version = peerKeyVersion(key, version)
		peer.set(key, version, body)
		start := time.Now()
		pb.applyPeerResponse(t, key)
		if took := time.Since(start); took > 2*peerCallTimeout {
			t.Errorf("%s v%d response (%d bytes): got a return after %v, want one within %v",
				kmsg.NameForKey(key), version, len(body), took, 2*peerCallTimeout)
		}
	})
}

// peerResponseKeys are the APIs whose responses a broker decodes.
var peerResponseKeys = []int16{1, 2, 4, 5, 6, 7, 19, 23, 56}

// peerKeyVersion maps a fuzzed key and version onto peerResponseKeys and
// the versions kmsg knows for the key; a key of the list and a known
// version are kept.
func peerKeyVersion(key, version int16) (int16, int16) {
	if !slices.Contains(peerResponseKeys, key) {
		key = peerResponseKeys[int(uint16(key))%len(peerResponseKeys)]
	}
	if maxVersion := kmsg.ResponseForKey(key).MaxVersion(); version < 0 || version > maxVersion {
		version = int16(int(uint16(version)) % (int(maxVersion) + 1))
	}
	return key, version
}

// fakePeerID is the broker id of the fake peer: the leader the follower
// partitions fetch from and the controller the fuzz broker asks.
const fakePeerID = 99

// peerCallTimeout bounds one call of the broker's code to the fake peer.
const peerCallTimeout = 2 * time.Second

// peerFuzzBroker is a broker reduced to what reads peers' answers: a
// metadata cache naming the fake peer as controller and live broker, no
// controller of its own, and two partitions following the fake peer.
type peerFuzzBroker struct {
	b *Broker
	// addr is the fake peer's address.
	addr    string
	fetcher *fetcher
	parts   []*fetchPartition
}

// newPeerFuzzBroker builds the peerFuzzBroker of peer; its partitions'
// logs are closed when the target ends.
func newPeerFuzzBroker(f *testing.F, peer *fakePeer) *peerFuzzBroker {
	f.Helper()
	cfg := testConfig(f)
	b := &Broker{cfg: cfg, logger: hclog.NewNullLogger(), cache: newMetadataCache(), closing: make(chan struct{}),
		interBroker: &listener{ListenerSpec: config.ListenerSpec{ListenerAddr: config.ListenerAddr{Name: protocolPlaintext}, Protocol: protocolPlaintext}}}
	// The fetcher manager is closed at once: the harness calls the
	// fetcher's methods itself, so applyRole must start no fetcher.
	b.member = &membership{cfg: &b.cfg, logger: b.logger, cache: b.cache, interBroker: b.interBroker}
	b.leaderQuota = replica.NewQuota(config.QuotaSamples, config.QuotaWindow, time.Now)
	b.followerQuota = replica.NewQuota(config.QuotaSamples, config.QuotaWindow, time.Now)
	b.replicas = &Manager{replicas: map[coord.TopicPartition]*Partition{}, controllerID: coord.NoBroker, waiting: map[*Partition]struct{}{},
		cfg: &b.cfg, logger: b.logger, cache: b.cache, member: b.member, followerQuota: b.followerQuota, closing: b.closing, logDirs: &replica.LogDirs{}}
	b.metrics = newMetrics(b)
	b.replicas.metrics = b.metrics
	b.replicas.fetchers = newFetcherManager(b.replicas)
	b.replicas.fetchers.close()
	b.replicas.isr = newISRSender(b.replicas)
	host, port := peer.hostPort()
	b.cache.setController(fakePeerID)
	b.cache.setLive([]coord.Broker{{ID: fakePeerID, Host: host, Port: port}})

	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	pf := &peerFuzzBroker{b: b, addr: peer.ln.Addr().String()}
	pf.fetcher = &fetcher{m: b.replicas.fetchers, leader: fakePeerID, ctx: ctx, cancel: cancel,
		parts: map[*Partition]*fetchPartition{}, byTP: map[coord.TopicPartition]*fetchPartition{}, changed: make(chan struct{}, 1)}
	self := coord.BrokerID(cfg.BrokerID)
	for i := int32(0); i < 2; i++ {
		info := controller.PartitionInfo{
			PartitionState: coord.PartitionState{Topic: "peer", Partition: i, Leader: fakePeerID, LeaderEpoch: 1,
				ISR: []coord.BrokerID{fakePeerID, self}},
			Replicas: []coord.BrokerID{fakePeerID, self},
		}
		rep, err := b.replicas.newReplicationState(cfg, info.TopicPartition(), nil)
		if err != nil {
			f.Fatalf("replication state: %v", err)
		}
		l, err := tlog.Open(filepath.Join(cfg.LogDirs[0], fmt.Sprintf("peer-%d", i)), cfg.LogConfig(nil))
		if err != nil {
			f.Fatalf("open log: %v", err)
		}
		f.Cleanup(func() { l.Close() })
		p := newPartition(info, l, &cfg, nil, cfg.BrokerID, rep, 0)
		b.replicas.applyRole(p, info)
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

// applyPeerResponse makes the call of the broker's code that reads a
// response of key from the fake peer, as FuzzPeerResponse lists.
func (pf *peerFuzzBroker) applyPeerResponse(t *testing.T, key int16) {
	ctx, cancel := context.WithTimeout(context.Background(), peerCallTimeout)
	defer cancel()
	b := pf.b
	addr := pf.addr
	switch key {
	case 1, 2, 23:
		cl, err := b.member.PeerClient(addr)
		if err != nil {
			t.Fatalf("client of the fake peer: %v", err)
		}
		defer cl.Close()
		switch key {
		case 1:
			_ = pf.fetcher.fetch(ctx, cl, slices.Clone(pf.parts), nil)
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
	case 56:
		batch := map[*Partition]replication.Proposal{}
		for _, fp := range pf.parts {
			batch[fp.p] = replication.Proposal{LeaderEpoch: 1, ISR: []replication.ReplicaID{fakePeerID}}
		}
		for _, out := range (&isrSender{rm: b.replicas}).sendRemote(ctx, 1, batch) {
			if out.err != nil {
				_ = alterFailure(out.err)
			}
		}
	default:
		t.Fatalf("no call reads a %s response", kmsg.NameForKey(key))
	}
}

// peerResponseSeed is one FuzzPeerResponse input.
type peerResponseSeed struct {
	key, version int16
	body         []byte
}

// peerResponseSeeds returns FuzzPeerResponse's seeds: every response kind
// with kmsg's defaults at its highest version, answers that reach the
// handling (a fetch with records, an out-of-range fetch, epoch ends, ISR
// changes, a created topic), and truncated copies.
func peerResponseSeeds() []peerResponseSeed {
	var seeds []peerResponseSeed
	add := func(resp kmsg.Response, version int16) {
		resp.SetVersion(version)
		body := resp.AppendTo(nil)
		seeds = append(seeds, peerResponseSeed{key: resp.Key(), version: version, body: body},
			peerResponseSeed{key: resp.Key(), version: version, body: body[:len(body)/2]})
	}
	for _, key := range peerResponseKeys {
		resp := kmsg.ResponseForKey(key)
		add(resp, resp.MaxVersion())
	}

	fetch := kmsg.NewPtrFetchResponse()
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic = "peer"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = 2, 2, 0
	fp.RecordBatches = fuzzRecordBatch([]byte("leader-one"), []byte("leader-two"))
	oor := kmsg.NewFetchResponseTopicPartition()
	oor.Partition, oor.ErrorCode, oor.LogStartOffset = 1, 1, 5
	ft.Partitions = append(ft.Partitions, fp, oor)
	fetch.Topics = append(fetch.Topics, ft)
	add(fetch, 11)

	lo := kmsg.NewPtrListOffsetsResponse()
	lt := kmsg.NewListOffsetsResponseTopic()
	lt.Topic = "peer"
	lp := kmsg.NewListOffsetsResponseTopicPartition()
	lp.Offset = 1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	add(lo, 4)

	oe := kmsg.NewPtrOffsetForLeaderEpochResponse()
	ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
	ot.Topic = "peer"
	for p := int32(0); p < 2; p++ {
		op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		op.Partition, op.LeaderEpoch, op.EndOffset = p, 1, 1
		ot.Partitions = append(ot.Partitions, op)
	}
	oe.Topics = append(oe.Topics, ot)
	add(oe, 3)

	ap := kmsg.NewPtrAlterPartitionResponse()
	at := kmsg.NewAlterPartitionResponseTopic()
	at.Topic = "peer"
	ok := kmsg.NewAlterPartitionResponseTopicPartition()
	ok.LeaderID, ok.LeaderEpoch, ok.ISR, ok.PartitionEpoch = fakePeerID, 1, []int32{fakePeerID}, 2
	fenced := kmsg.NewAlterPartitionResponseTopicPartition()
	fenced.Partition, fenced.ErrorCode = 1, 74
	at.Partitions = append(at.Partitions, ok, fenced)
	ap.Topics = append(ap.Topics, at)
	add(ap, AlterPartitionVersion)

	cs := kmsg.NewPtrControlledShutdownResponse()
	rem := kmsg.NewControlledShutdownResponsePartitionsRemaining()
	rem.Topic = "peer"
	cs.PartitionsRemaining = append(cs.PartitionsRemaining, rem)
	add(cs, 3)

	ct := kmsg.NewPtrCreateTopicsResponse()
	ctt := kmsg.NewCreateTopicsResponseTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "peer-auto", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	add(ct, 7)
	return seeds
}

// fakePeer is a TCP server standing in for another broker or the
// controller: it answers ApiVersions advertising one API up to one
// version, answers that API's requests with a set body, and closes the
// connection on any other request. Close (a cleanup of the target) waits
// for its goroutines.
type fakePeer struct {
	ln net.Listener
	wg sync.WaitGroup

	mu           sync.Mutex
	key, version int16
	body         []byte
	conns        map[net.Conn]struct{}
	closed       bool
}

// startFakePeer starts a fakePeer on a loopback port, closed when the
// target ends.
func startFakePeer(f *testing.F) *fakePeer {
	f.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatalf("listen: %v", err)
	}
	p := &fakePeer{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.accept()
	}()
	f.Cleanup(p.close)
	return p
}

// hostPort returns the peer's address.
func (p *fakePeer) hostPort() (string, int32) {
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), int32(a.Port)
}

// set makes the peer answer requests of key with body, advertising
// versions up to version.
func (p *fakePeer) set(key, version int16, body []byte) {
	p.mu.Lock()
	p.key, p.version, p.body = key, version, body
	p.mu.Unlock()
}

// close stops accepting, closes every connection and waits for the
// peer's goroutines.
func (p *fakePeer) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for nc := range p.conns {
		nc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// accept serves connections until the listener closes.
func (p *fakePeer) accept() {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.conns[nc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, nc)
				p.mu.Unlock()
				nc.Close()
			}()
			_ = p.serve(nc)
		}()
	}
}

// serve answers one connection's requests until it closes or sends a
// request the peer does not answer.
func (p *fakePeer) serve(nc net.Conn) error {
	br := bufio.NewReader(nc)
	for {
		var sizeBuf [4]byte
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(sizeBuf[:])
		if size < 8 || size > 64<<20 {
			return fmt.Errorf("request frame of %d bytes", size)
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			return err
		}
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := binary.BigEndian.Uint32(frame[4:])
		p.mu.Lock()
		wantKey, maxVersion, body := p.key, p.version, p.body
		p.mu.Unlock()
		var resp kmsg.Response
		switch key {
		case apiVersionsKey:
			av := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []struct{ key, max int16 }{{apiVersionsKey, 3}, {wantKey, maxVersion}} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MaxVersion = k.key, k.max
				av.ApiKeys = append(av.ApiKeys, ak)
			}
			av.SetVersion(version)
			body = av.AppendTo(nil)
			resp = av
		case wantKey:
			resp = kmsg.ResponseForKey(key)
			resp.SetVersion(version)
		default:
			return errors.New("request for another api")
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 4, 9+len(body)), corr)
		if resp.IsFlexible() && key != apiVersionsKey {
			out = append(out, 0)
		}
		out = append(out, body...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := nc.Write(out); err != nil {
			return err
		}
	}
}
