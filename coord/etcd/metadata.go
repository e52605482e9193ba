package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/parallel"
	"github.com/tripodmq/tripod/internal/statejson"
)

const (
	// maxTxnOps is etcd's default --max-txn-ops. etcd checks it against
	// the compares, the writes and the reads of the Else branch of a
	// transaction separately (the largest of the three counts:
	// checkTxnRequest in etcdserver/api/v3rpc/key.go), so a chunk holds up
	// to 128 compares and 128 writes.
	maxTxnOps = 128
	// loadPageSize is how many keys one Get of Load reads.
	loadPageSize = 2000
	// loadRanges is how many ranges of partition states Load reads at
	// once.
	loadRanges = 8
)

// partitionValue is a partition state's JSON, as Kafka writes
// /brokers/topics/T/partitions/P/state. The partition epoch is not stored:
// it is the key's etcd Version − 1.
type partitionValue struct {
	ControllerEpoch int64            `json:"controller_epoch"`
	Leader          coord.BrokerID   `json:"leader"`
	Version         int              `json:"version"`
	LeaderEpoch     int32            `json:"leader_epoch"`
	ISR             []coord.BrokerID `json:"isr"`
}

func encodePartition(p coord.PartitionState) (string, error) {
	isr := p.ISR
	if isr == nil {
		isr = []coord.BrokerID{}
	}
	v, err := json.Marshal(partitionValue{
		ControllerEpoch: p.ControllerEpoch,
		Leader:          p.Leader,
		Version:         1,
		LeaderEpoch:     p.LeaderEpoch,
		ISR:             isr,
	})
	if err != nil {
		return "", fmt.Errorf("encode partition %s: %w", p.TopicPartition(), err)
	}
	return string(v), nil
}

// Load implements coord.MetadataStore.
func (b *Backend) Load(ctx context.Context) (*coord.Metadata, error) {
	if b.isClosed() {
		return nil, fmt.Errorf("%w: load metadata", coord.ErrClosed)
	}
	if _, err := b.record(ctx); err != nil {
		return nil, err
	}
	bases := b.bases()
	if s := b.standby.Load(); s != nil {
		if md, ok := s.load(ctx); ok {
			raiseMetadata(md, bases)
			return md, nil
		}
	}
	md, err := b.loadMetadata(ctx)
	if err != nil {
		return nil, err
	}
	raiseMetadata(md, bases)
	return md, nil
}

// raiseMetadata raises md's Version and partition epochs, as read from
// etcd, by bases, and sets the epoch of a state created now
// (PartitionBase).
func raiseMetadata(md *coord.Metadata, bases coord.EpochBases) {
	if bases.Partition == 0 && bases.Version == 0 {
		return
	}
	md.Version += bases.Version
	md.PartitionBase = bases.Partition
	for tp, st := range md.Partitions {
		st.PartitionEpoch += bases.Partition
		md.Partitions[tp] = st
	}
}

// raiseEpoch raises a broker or controller epoch read from etcd (a create
// revision) by base; 0, no epoch, stays 0.
func raiseEpoch(epoch, base int64) int64 {
	if epoch == 0 {
		return 0
	}
	return epoch + base
}

// loadMetadata reads every topic and partition state at one revision,
// paging through large ranges; it starts again if etcd compacts that
// revision meanwhile. Its epochs and Version are etcd's own, not raised.
func (b *Backend) loadMetadata(ctx context.Context) (*coord.Metadata, error) {
	for {
		md, err := b.loadMetadataOnce(ctx)
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		return md, err
	}
}

func (b *Backend) loadMetadataOnce(ctx context.Context) (*coord.Metadata, error) {
	md := coord.NewMetadata()
	topics := b.topicsPrefix()
	rev, err := b.rangeAt(ctx, topics, 0, func(kv *mvccpb.KeyValue) {
		b.applyMetadataKV(md, kv, 0)
	})
	if err != nil {
		return nil, err
	}
	// Partition keys sort by topic. Each topic's, and whatever lies
	// between two topics' (a state whose topic key is missing), is read
	// as a range of its own, several at once: etcd counts every key
	// from a page's start to its range's end, so one range paged over
	// every partition would cost the server a count per page of all the
	// partitions after it.
	prefix := b.partitionsPrefix()
	bounds := make([]string, 0, len(md.Topics)+2)
	for name := range md.Topics {
		bounds = append(bounds, prefix+name+"/")
	}
	slices.Sort(bounds)
	bounds = append(append([]string{prefix}, bounds...), clientv3.GetPrefixRangeEnd(prefix))
	type rangeRead struct {
		states []coord.PartitionState
		err    error
	}
	reads := make([]rangeRead, len(bounds)-1)
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(loadRanges, len(reads)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := &reads[i]
				_, r.err = b.loadRange(ctx, bounds[i], bounds[i+1], rev, func(kv *mvccpb.KeyValue) {
					if st, ok := b.decodePartitionKV(kv, 0); ok {
						r.states = append(r.states, st)
					}
				})
			}
		}()
	}
	for i := range reads {
		if bounds[i] < bounds[i+1] {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	for _, r := range reads {
		if r.err != nil {
			return nil, r.err
		}
		for _, st := range r.states {
			md.Partitions[st.TopicPartition()] = st
		}
	}
	md.Version = rev
	return md, nil
}

// loadRange reads the keys of [key, end) at revision rev (0: the
// current one), loadPageSize at a time, passing each to f, and returns
// the revision read. It returns rpctypes.ErrCompacted as it is.
func (b *Backend) loadRange(ctx context.Context, key, end string, rev int64, f func(kv *mvccpb.KeyValue)) (int64, error) {
	what := key
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := b.client.Get(ctx, key, opts...)
		if errors.Is(err, rpctypes.ErrCompacted) {
			return 0, err
		}
		if err != nil {
			return 0, b.convertError(err, what)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			f(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// metadataRangeEnd ends the one range the metadata watches follow, from
// partitionsPrefix: it holds <prefix>/partitions/ and <prefix>/topics/,
// and between them the security keys, which applyMetadataKV skips, and
// the standby's barrier key.
func (b *Backend) metadataRangeEnd() string { return clientv3.GetPrefixRangeEnd(b.topicsPrefix()) }

// applyMetadataEvent applies one watch event of the metadata range to md,
// raising its partition epoch and version by bases.
func (b *Backend) applyMetadataEvent(md *coord.Metadata, ev *clientv3.Event, bases coord.EpochBases) {
	if ev.Type == mvccpb.DELETE {
		b.removeMetadataKey(md, string(ev.Kv.Key))
	} else {
		b.applyMetadataKV(md, ev.Kv, bases.Partition)
	}
	md.Version = max(md.Version, ev.Kv.ModRevision+bases.Version)
}

// applyMetadataKV stores one topic or partition key into md, its
// partition epoch raised by partitionBase.
func (b *Backend) applyMetadataKV(md *coord.Metadata, kv *mvccpb.KeyValue, partitionBase int32) {
	key := string(kv.Key)
	if name, ok := strings.CutPrefix(key, b.topicsPrefix()); ok {
		var t coord.Topic
		if err := json.Unmarshal(kv.Value, &t); err != nil {
			b.log.Warn("skipping unreadable topic", "key", key, "error", err)
			return
		}
		t.Name = name
		md.Topics[name] = t
		return
	}
	if st, ok := b.decodePartitionKV(kv, partitionBase); ok {
		md.Partitions[st.TopicPartition()] = st
	}
}

// decodePartitionKV decodes a partition state key, its partition epoch
// raised by partitionBase; false when it is not one, or does not decode
// (logged).
func (b *Backend) decodePartitionKV(kv *mvccpb.KeyValue, partitionBase int32) (coord.PartitionState, bool) {
	key := string(kv.Key)
	tp, ok := b.parsePartitionKey(key)
	if !ok {
		return coord.PartitionState{}, false
	}
	v, err := statejson.Decode(kv.Value)
	if err != nil {
		b.log.Warn("skipping unreadable partition state", "key", key, "error", err)
		return coord.PartitionState{}, false
	}
	var isr []coord.BrokerID
	if v.ISR != nil {
		isr = make([]coord.BrokerID, len(v.ISR))
		for i, id := range v.ISR {
			isr[i] = coord.BrokerID(id)
		}
	}
	return coord.PartitionState{
		Topic:           tp.Topic,
		Partition:       tp.Partition,
		Leader:          coord.BrokerID(v.Leader),
		LeaderEpoch:     v.LeaderEpoch,
		ISR:             isr,
		PartitionEpoch:  int32(kv.Version-1) + partitionBase,
		ControllerEpoch: v.ControllerEpoch,
	}, true
}

// removeMetadataKey removes a deleted topic or partition key from md.
func (b *Backend) removeMetadataKey(md *coord.Metadata, key string) {
	if name, ok := strings.CutPrefix(key, b.topicsPrefix()); ok {
		delete(md.Topics, name)
		return
	}
	if tp, ok := b.parsePartitionKey(key); ok {
		delete(md.Partitions, tp)
	}
}

func (b *Backend) parsePartitionKey(key string) (coord.TopicPartition, bool) {
	rest, ok := strings.CutPrefix(key, b.partitionsPrefix())
	if !ok {
		return coord.TopicPartition{}, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return coord.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil {
		return coord.TopicPartition{}, false
	}
	return coord.TopicPartition{Topic: rest[:i], Partition: int32(p)}, true
}

// Commit implements coord.MetadataStore.
//
// Every chunk is one etcd transaction whose first compare is the fence:
// the election key's create revision must still be term's epoch. When a
// chunk's compares fail, its Else branch reads every compared key, so the
// failure is told apart (fenced, missing topic, existing topic, partition
// epoch) without a second round trip. Chunks that share no key run at
// once, up to commitParallel (commitWaves): a failover's 10 000 partition
// states are 80 transactions, and one after the other they took 0.3-0.7 s
// on a busy machine.
func (b *Backend) Commit(ctx context.Context, ct coord.Term, ops ...coord.Op) error {
	t, ok := ct.(*term)
	if !ok || t.s.b != b {
		return fmt.Errorf("etcd commit: term of epoch %d was not won through this backend", ct.Epoch())
	}
	if b.isClosed() {
		return fmt.Errorf("%w: commit of controller epoch %d", coord.ErrClosed, t.epoch)
	}
	if t.ctx.Err() != nil {
		return fmt.Errorf("%w: controller epoch %d has ended", coord.ErrFenced, t.Epoch())
	}
	if _, err := b.record(ctx); err != nil {
		return err
	}
	bases := b.bases()
	chunks, err := b.planCommit(t.epoch, bases, ops)
	if err != nil {
		return err
	}
	for _, wave := range commitWaves(chunks) {
		if err := b.commitWave(ctx, wave, bases); err != nil {
			return err
		}
	}
	return nil
}

// commitParallel is how many transactions of a Commit are in flight at
// once.
const commitParallel = 8

// commitWaves groups chunks, in order, into waves whose chunks may be
// applied in any order: none writes a key another of its wave writes or
// compares, and a chunk that deletes a topic is a wave of its own. (The
// chunks of one topic's creation after the first compare the topic key
// the first writes, so they wait for it.)
func commitWaves(chunks []*chunk) [][]*chunk {
	var waves [][]*chunk
	var cur []*chunk
	written, compared := map[string]bool{}, map[string]bool{}
	flush := func() {
		if len(cur) > 0 {
			waves = append(waves, cur)
		}
		cur = nil
		clear(written)
		clear(compared)
	}
	for _, c := range chunks {
		conflict := len(c.deleted) > 0
		for k := range c.written {
			conflict = conflict || written[k] || compared[k]
		}
		for _, ch := range c.checks[1:] { // after the fence, which none writes
			conflict = conflict || written[ch.key]
		}
		if conflict {
			flush()
		}
		cur = append(cur, c)
		for k := range c.written {
			written[k] = true
		}
		for _, ch := range c.checks[1:] {
			compared[ch.key] = true
		}
		if len(c.deleted) > 0 {
			flush()
		}
	}
	flush()
	return waves
}

// commitWave applies the chunks of one wave, up to commitParallel at
// once, and returns the error of the first that failed (in op order).
// The others are applied or not, whichever they were.
func (b *Backend) commitWave(ctx context.Context, wave []*chunk, bases coord.EpochBases) error {
	return parallel.FirstError(len(wave), commitParallel, func(i int) error { return b.commitChunk(ctx, wave[i], bases) })
}

// checkKind is what one compare of a chunk asserts.
type checkKind int

const (
	checkFence         checkKind = iota // election key created at the term's epoch
	checkTopicAbsent                    // CreateTopic: no such topic
	checkTopicPresent                   // the topic exists
	checkPartitionNew                   // SetPartition(NewPartition): no state yet
	checkPartitionSeen                  // SetPartition: state at the expected epoch
)

// A check's epochs are etcd's own (create revision, version − 1), not
// raised by the bases.
type check struct {
	kind  checkKind
	key   string
	epoch int64 // checkFence: term epoch; checkPartitionSeen: expected partition epoch
}

func (c check) compare() clientv3.Cmp {
	switch c.kind {
	case checkFence:
		return clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.epoch)
	case checkTopicAbsent, checkPartitionNew:
		return clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)
	case checkTopicPresent:
		return clientv3.Compare(clientv3.CreateRevision(c.key), ">", 0)
	default:
		return clientv3.Compare(clientv3.Version(c.key), "=", c.epoch+1)
	}
}

// failure returns the error of c against the key as read (nil kv: absent),
// or nil if c holds; it names epochs raised by bases, as reported.
func (c check) failure(kv *mvccpb.KeyValue, bases coord.EpochBases) error {
	exists := kv != nil
	partitionBase := int64(bases.Partition)
	switch c.kind {
	case checkFence:
		if !exists || kv.CreateRevision != c.epoch {
			return fmt.Errorf("%w: controller epoch %d no longer holds %s", coord.ErrFenced, c.epoch+bases.Controller, c.key)
		}
	case checkTopicAbsent:
		if exists {
			return fmt.Errorf("%w: topic %s", coord.ErrExists, c.key)
		}
	case checkTopicPresent:
		if !exists {
			return fmt.Errorf("%w: topic %s", coord.ErrNotFound, c.key)
		}
	case checkPartitionNew:
		if exists {
			return fmt.Errorf("%w: partition %s exists at epoch %d, want none", coord.ErrVersionMismatch, c.key, kv.Version-1+partitionBase)
		}
	case checkPartitionSeen:
		if !exists {
			return fmt.Errorf("%w: partition %s", coord.ErrNotFound, c.key)
		}
		if kv.Version != c.epoch+1 {
			return fmt.Errorf("%w: partition %s is at epoch %d, want %d", coord.ErrVersionMismatch, c.key, kv.Version-1+partitionBase, c.epoch+partitionBase)
		}
	}
	return nil
}

// chunk is one fenced transaction of a Commit.
type chunk struct {
	checks  []check
	writes  []clientv3.Op
	written map[string]bool // keys put in this chunk
	deleted map[string]bool // topics deleted in this chunk
	known   map[string]bool // topics checked present or created in this chunk
}

// fits reports whether the chunk can take checks more compares (each with
// its Else read) and writes more writes. One compare and read of each
// transaction are the migration record's (guardedTxn).
func (c *chunk) fits(checks, writes int) bool {
	return len(c.checks)+checks <= maxTxnOps-1 && len(c.writes)+writes <= maxTxnOps
}

// planner splits a Commit's ops into chunks.
type planner struct {
	b      *Backend
	epoch  int64
	chunks []*chunk
	cur    *chunk
}

// next starts a new chunk, fenced on the term's epoch.
func (p *planner) next() {
	p.cur = &chunk{written: map[string]bool{}, deleted: map[string]bool{}, known: map[string]bool{}}
	p.cur.checks = append(p.cur.checks, check{kind: checkFence, key: p.b.controllerKey(), epoch: p.epoch})
	p.chunks = append(p.chunks, p.cur)
}

// room makes sure the current chunk can take checks more compares and
// writes more writes, and touches none of keys or topics already written
// or deleted in it.
func (p *planner) room(checks, writes int, topic string, keys ...string) {
	conflict := p.cur.deleted[topic]
	for _, k := range keys {
		conflict = conflict || p.cur.written[k]
	}
	if conflict || !p.cur.fits(checks, writes) {
		p.next()
	}
}

// topicCost is how many compares requireTopic would add for topic to the
// current chunk.
func (p *planner) topicCost(topic string) int {
	if p.cur.known[topic] {
		return 0
	}
	return 1
}

// requireTopic adds a presence compare for topic unless the chunk already
// has one or creates the topic.
func (p *planner) requireTopic(topic string) {
	if !p.cur.known[topic] {
		p.cur.checks = append(p.cur.checks, check{kind: checkTopicPresent, key: p.b.topicKey(topic)})
		p.cur.known[topic] = true
	}
}

// put adds a write of key to the current chunk.
func (p *planner) put(key, value string) {
	p.cur.writes = append(p.cur.writes, clientv3.OpPut(key, value))
	p.cur.written[key] = true
}

// planCommit splits ops, of the term of etcd epoch (not raised), into
// chunks; a SetPartition's ExpectedEpoch is taken back by bases.
func (b *Backend) planCommit(epoch int64, bases coord.EpochBases, ops []coord.Op) ([]*chunk, error) {
	p := &planner{b: b, epoch: epoch}
	p.next()
	for _, op := range ops {
		switch op := op.(type) {
		case coord.CreateTopic:
			name := op.Topic.Name
			if len(op.States) != op.Topic.Partitions() {
				return nil, fmt.Errorf("create topic %s: %d partition states for %d partitions", name, len(op.States), op.Topic.Partitions())
			}
			tkey := b.topicKey(name)
			value, err := json.Marshal(op.Topic)
			if err != nil {
				return nil, fmt.Errorf("encode topic %s: %w", name, err)
			}
			// A presence compare of the same topic earlier in the chunk
			// makes the whole chunk fail, as it should: that op needed
			// the topic before it was created.
			p.room(1, 1, name, tkey)
			p.cur.checks = append(p.cur.checks, check{kind: checkTopicAbsent, key: tkey})
			p.cur.known[name] = true
			p.put(tkey, string(value))
			for _, st := range op.States {
				st.Topic = name
				pkey := b.partitionKey(st.TopicPartition())
				v, err := encodePartition(st)
				if err != nil {
					return nil, err
				}
				p.room(p.topicCost(name), 1, name, pkey)
				p.requireTopic(name)
				p.put(pkey, v)
			}
		case coord.SetTopic:
			name := op.Topic.Name
			tkey := b.topicKey(name)
			value, err := json.Marshal(op.Topic)
			if err != nil {
				return nil, fmt.Errorf("encode topic %s: %w", name, err)
			}
			p.room(p.topicCost(name), 1, name, tkey)
			p.requireTopic(name)
			p.put(tkey, string(value))
		case coord.DeleteTopic:
			tkey := b.topicKey(op.Name)
			conflict := false
			for k := range p.cur.written {
				conflict = conflict || k == tkey || strings.HasPrefix(k, b.topicPartitionsPrefix(op.Name))
			}
			if conflict || !p.cur.fits(1, 2) {
				p.next()
			}
			p.requireTopic(op.Name)
			p.cur.writes = append(p.cur.writes,
				clientv3.OpDelete(tkey),
				clientv3.OpDelete(b.topicPartitionsPrefix(op.Name), clientv3.WithPrefix()))
			p.cur.deleted[op.Name] = true
		case coord.SetPartition:
			st := op.State
			pkey := b.partitionKey(st.TopicPartition())
			v, err := encodePartition(st)
			if err != nil {
				return nil, err
			}
			p.room(1+p.topicCost(st.Topic), 1, st.Topic, pkey)
			p.requireTopic(st.Topic)
			if op.ExpectedEpoch == coord.NewPartition {
				p.cur.checks = append(p.cur.checks, check{kind: checkPartitionNew, key: pkey})
			} else {
				// An epoch below the base is none this backend
				// reported: -2 compares a version of -1, which no key
				// has, so the chunk fails as for any stale epoch.
				expected := max(int64(op.ExpectedEpoch)-int64(bases.Partition), -2)
				p.cur.checks = append(p.cur.checks, check{kind: checkPartitionSeen, key: pkey, epoch: expected})
			}
			p.put(pkey, v)
		default:
			return nil, fmt.Errorf("etcd commit: unknown op %T", op)
		}
	}
	return p.chunks, nil
}

// commitChunk applies one chunk atomically, or explains why not. It is
// a guardedTxn: refused while the migration record refuses writes.
func (b *Backend) commitChunk(ctx context.Context, c *chunk, bases coord.EpochBases) error {
	// A chunk without writes (an empty Commit) still checks the fence, so
	// a controller can ask whether its term still holds.
	cmps := make([]clientv3.Cmp, len(c.checks))
	reads := make([]clientv3.Op, len(c.checks))
	for i, ch := range c.checks {
		cmps[i] = ch.compare()
		reads[i] = clientv3.OpGet(ch.key, clientv3.WithKeysOnly())
	}
	failure := func(resp *clientv3.TxnResponse) error {
		for i, ch := range c.checks {
			var kv *mvccpb.KeyValue
			if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				kv = kvs[0]
			}
			if err := ch.failure(kv, bases); err != nil {
				return err
			}
		}
		return nil
	}
	resp, err := b.guardedTxn(ctx, fmt.Sprintf("commit of %d writes under %s", len(c.writes), b.prefix), cmps, c.writes, reads,
		func(resp *clientv3.TxnResponse) bool { return failure(resp) != nil })
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	if err := failure(resp); err != nil {
		return err
	}
	return fmt.Errorf("etcd commit under %s: transaction failed but every compare holds on re-read", b.prefix)
}
