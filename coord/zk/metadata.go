package zk

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
	bounded "github.com/tripodmq/tripod/internal/parallel"
	"github.com/tripodmq/tripod/internal/statejson"
)

// Chunk limits of one Commit multi: ZooKeeper refuses requests above
// jute.maxbuffer (1 MB by default), and very long multis hold its request
// pipeline.
const (
	maxChunkOps   = 1000
	maxChunkBytes = 900 * 1024
	// opOverhead is a generous estimate of one multi op's bytes besides its
	// path and data (headers, ACL, flags).
	opOverhead = 64
)

// topicZNode is the JSON of /brokers/topics/T, Kafka's version 3.
type topicZNode struct {
	Version          int                `json:"version"`
	TopicID          string             `json:"topic_id,omitempty"`
	Partitions       map[string][]int32 `json:"partitions"`
	AddingReplicas   map[string][]int32 `json:"adding_replicas"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas"`
}

// configZNode is the JSON of /config/topics/T.
type configZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// stateZNode is the JSON of /brokers/topics/T/partitions/P/state.
type stateZNode struct {
	ControllerEpoch int64   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
}

func encodeTopic(t coord.Topic) []byte {
	z := topicZNode{
		Version:          3,
		Partitions:       make(map[string][]int32, len(t.Assignment)),
		AddingReplicas:   map[string][]int32{},
		RemovingReplicas: map[string][]int32{},
	}
	if t.ID != [16]byte{} {
		// Kafka's Uuid.toString: URL-safe base64 without padding.
		z.TopicID = base64.RawURLEncoding.EncodeToString(t.ID[:])
	}
	for p, replicas := range t.Assignment {
		z.Partitions[strconv.Itoa(p)] = brokerIDsToInt32(replicas)
	}
	for p, replicas := range t.Adding {
		z.AddingReplicas[strconv.Itoa(int(p))] = brokerIDsToInt32(replicas)
	}
	for p, replicas := range t.Removing {
		z.RemovingReplicas[strconv.Itoa(int(p))] = brokerIDsToInt32(replicas)
	}
	data, _ := json.Marshal(z)
	return data
}

func decodeTopic(name string, data []byte) (coord.Topic, error) {
	var z topicZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return coord.Topic{}, fmt.Errorf("decode topic %s: %w", name, err)
	}
	t := coord.Topic{Name: name, Assignment: make([][]coord.BrokerID, len(z.Partitions))}
	if z.TopicID != "" {
		id, err := base64.RawURLEncoding.DecodeString(z.TopicID)
		if err != nil || len(id) != 16 {
			return coord.Topic{}, fmt.Errorf("decode topic %s: topic_id %q is not a base64 uuid", name, z.TopicID)
		}
		copy(t.ID[:], id)
	}
	for key, replicas := range z.Partitions {
		p, err := strconv.Atoi(key)
		if err != nil || p < 0 || p >= len(z.Partitions) {
			return coord.Topic{}, fmt.Errorf("decode topic %s: partition %q out of 0..%d", name, key, len(z.Partitions)-1)
		}
		t.Assignment[p] = int32sToBrokerIDs(replicas)
	}
	var err error
	if t.Adding, err = decodeReassigning(name, "adding_replicas", z.AddingReplicas, len(z.Partitions)); err != nil {
		return coord.Topic{}, err
	}
	if t.Removing, err = decodeReassigning(name, "removing_replicas", z.RemovingReplicas, len(z.Partitions)); err != nil {
		return coord.Topic{}, err
	}
	return t, nil
}

// decodeReassigning decodes a topic znode's adding_replicas or
// removing_replicas, nil when it holds none.
func decodeReassigning(name, field string, m map[string][]int32, partitions int) (map[int32][]coord.BrokerID, error) {
	var out map[int32][]coord.BrokerID
	for key, replicas := range m {
		p, err := strconv.Atoi(key)
		if err != nil || p < 0 || p >= partitions {
			return nil, fmt.Errorf("decode topic %s: %s partition %q out of 0..%d", name, field, key, partitions-1)
		}
		if len(replicas) == 0 {
			continue
		}
		if out == nil {
			out = map[int32][]coord.BrokerID{}
		}
		out[int32(p)] = int32sToBrokerIDs(replicas)
	}
	return out, nil
}

func encodeConfig(config map[string]string) []byte {
	if config == nil {
		config = map[string]string{}
	}
	data, _ := json.Marshal(configZNode{Version: 1, Config: config})
	return data
}

func decodeConfig(name string, data []byte) (map[string]string, error) {
	var z configZNode
	if len(data) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("decode config of topic %s: %w", name, err)
	}
	if len(z.Config) == 0 {
		return nil, nil
	}
	return z.Config, nil
}

func encodeState(s coord.PartitionState) []byte {
	isr := brokerIDsToInt32(s.ISR)
	if isr == nil {
		isr = []int32{}
	}
	data, _ := json.Marshal(stateZNode{ControllerEpoch: s.ControllerEpoch, Leader: int32(s.Leader),
		Version: 1, LeaderEpoch: s.LeaderEpoch, ISR: isr})
	return data
}

// decodeState reads a partition state; its PartitionEpoch is the znode's
// version, which every setData bumps (not raised by the partition base:
// raiseMetadata does that).
func decodeState(tp coord.TopicPartition, data []byte, stat *zk.Stat) (coord.PartitionState, error) {
	z, err := statejson.Decode(data)
	if err != nil {
		return coord.PartitionState{}, fmt.Errorf("decode state of partition %s: %w", tp, err)
	}
	return coord.PartitionState{
		Topic:           tp.Topic,
		Partition:       tp.Partition,
		Leader:          coord.BrokerID(z.Leader),
		LeaderEpoch:     z.LeaderEpoch,
		ISR:             int32sToBrokerIDs(z.ISR),
		PartitionEpoch:  stat.Version,
		ControllerEpoch: z.ControllerEpoch,
	}, nil
}

func brokerIDsToInt32(ids []coord.BrokerID) []int32 {
	if ids == nil {
		return nil
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

func int32sToBrokerIDs(ids []int32) []coord.BrokerID {
	if len(ids) == 0 {
		return nil
	}
	out := make([]coord.BrokerID, len(ids))
	for i, id := range ids {
		out[i] = coord.BrokerID(id)
	}
	return out
}

// Znode paths of the metadata, under the chroot.
func (b *Backend) topicsPath() string         { return b.path("/brokers/topics") }
func (b *Backend) topicPath(t string) string  { return b.path("/brokers/topics/" + t) }
func (b *Backend) configPath(t string) string { return b.path("/config/topics/" + t) }
func (b *Backend) partitionsPath(t string) string {
	return b.path("/brokers/topics/" + t + "/partitions")
}
func (b *Backend) partitionPath(t string, p int32) string {
	return b.partitionsPath(t) + "/" + strconv.Itoa(int(p))
}
func (b *Backend) statePath(t string, p int32) string { return b.partitionPath(t, p) + "/state" }

// Load implements coord.MetadataStore. It reads every topic and partition
// state with pipelined, concurrent gets; its Version is the greatest zxid
// among the znodes it read (their mzxid, and the pzxid of the directories)
// and each partition epoch its state znode's version, raised by the
// bases.
func (b *Backend) Load(ctx context.Context) (*coord.Metadata, error) {
	if err := b.ensureBase(ctx); err != nil {
		return nil, err
	}
	if s := b.currentStandby(); s != nil {
		if md, ok := s.load(ctx); ok {
			return md, nil
		}
	}
	var md *coord.Metadata
	err := b.do(ctx, "load", func(c *zk.Conn) error {
		var err error
		md, err = b.readMetadata(c)
		return err
	})
	if err != nil {
		return nil, convertError(err, "load "+b.topicsPath())
	}
	return raiseMetadata(md, b.bases()), nil
}

func (b *Backend) readMetadata(c *zk.Conn) (*coord.Metadata, error) {
	md := coord.NewMetadata()
	names, stat, err := c.Children(b.topicsPath())
	if err != nil {
		return nil, err
	}
	md.Version = stat.Pzxid
	type topicRead struct {
		ok      bool
		topic   coord.Topic
		parts   []string
		version int64
	}
	reads := make([]topicRead, len(names))
	err = parallel(len(names), func(i int) error {
		name := names[i]
		data, stat, err := c.Get(b.topicPath(name))
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		t, err := decodeTopic(name, data)
		if err != nil {
			return err
		}
		version := stat.Mzxid
		data, stat, err = c.Get(b.configPath(name))
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return err
		default:
			if t.Config, err = decodeConfig(name, data); err != nil {
				return err
			}
			version = max(version, stat.Mzxid)
		}
		parts, stat, err := c.Children(b.partitionsPath(name))
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return err
		default:
			version = max(version, stat.Pzxid)
		}
		reads[i] = topicRead{ok: true, topic: t, parts: parts, version: version}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var tps []coord.TopicPartition
	for _, r := range reads {
		if !r.ok {
			continue
		}
		md.Topics[r.topic.Name] = r.topic
		md.Version = max(md.Version, r.version)
		for _, p := range r.parts {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
				tps = append(tps, coord.TopicPartition{Topic: r.topic.Name, Partition: int32(n)})
			}
		}
	}
	states, found, zxids, err := b.readStates(c, tps)
	if err != nil {
		return nil, err
	}
	for i, st := range states {
		if found[i] {
			md.Partitions[tps[i]] = st
			md.Version = max(md.Version, zxids[i])
		}
	}
	return md, nil
}

// Partition states of a large metadata are read over loadSessions
// ZooKeeper sessions of Load's own, opened for the Load and closed after
// it: ZooKeeper serves the requests of one connection one after another,
// so one connection bounds how fast a new controller reads 100 000
// states, and several cut that time about by as many, up to the server's
// cores.
const (
	loadSessions     = 8
	loadSessionsFrom = 2000 // partitions
)

// readStates reads the states of tps: over loader sessions when there are
// at least loadSessionsFrom (on c when they cannot be had, or fail), else
// on c. A state that does not exist is not found.
func (b *Backend) readStates(c *zk.Conn, tps []coord.TopicPartition) ([]coord.PartitionState, []bool, []int64, error) {
	if len(tps) >= loadSessionsFrom {
		loaders, release := b.openLoaders(loadSessions)
		if len(loaders) > 0 {
			states, found, zxids, err := b.readStatesOn(loaders, tps)
			release()
			if err == nil {
				return states, found, zxids, nil
			}
			b.log.Debug("reading partition states over loader sessions failed; reading them on the backend's session", "error", err)
		}
	}
	return b.readStatesOn([]*zk.Conn{c}, tps)
}

// readStatesOn reads the states of tps with pipelined gets spread over
// conns.
func (b *Backend) readStatesOn(conns []*zk.Conn, tps []coord.TopicPartition) ([]coord.PartitionState, []bool, []int64, error) {
	states := make([]coord.PartitionState, len(tps))
	found := make([]bool, len(tps))
	zxids := make([]int64, len(tps))
	err := parallelOn(len(tps), len(conns), func(conn, i int) error {
		tp := tps[i]
		data, stat, err := conns[conn].Get(b.statePath(tp.Topic, tp.Partition))
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		st, err := decodeState(tp, data, stat)
		if err != nil {
			return err
		}
		states[i], found[i], zxids[i] = st, true, stat.Mzxid
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return states, found, zxids, nil
}

// openLoaders opens n loader sessions and returns their connections once
// each has its session, is authenticated, and has synced with the
// ensemble's leader (so it reads nothing older than what the backend's
// own session has read), with release, which closes them. It returns
// none when they cannot all be had within half the session timeout.
func (b *Backend) openLoaders(n int) ([]*zk.Conn, func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil
	}
	var zss []*zsession
	for range n {
		zs, err := b.newZSessionLocked()
		if err != nil {
			break
		}
		zss = append(zss, zs)
	}
	b.mu.Unlock()
	release := func() {
		var wg sync.WaitGroup
		for _, zs := range zss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				zs.end()
				zs.close()
			}()
		}
		wg.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout/2)
	defer cancel()
	if err := b.syncAll(ctx, "load", zss); err != nil || len(zss) < n {
		b.log.Debug("loader sessions not opened; loading on the backend's session", "error", err)
		release()
		return nil, nil
	}
	conns := make([]*zk.Conn, len(zss))
	for i, zs := range zss {
		conns[i] = zs.conn
	}
	return conns, release
}

// syncAll syncs each of zss with the ZooKeeper leader, all at once, once
// each has its session and is authenticated; it returns their errors
// joined.
func (b *Backend) syncAll(ctx context.Context, key string, zss []*zsession) error {
	errs := make([]error, len(zss))
	var wg sync.WaitGroup
	for i, zs := range zss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = zs.call(ctx, key, func(c *zk.Conn) error {
				_, err := c.Sync(b.topicsPath())
				return err
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// zop is one ZooKeeper operation of a Commit, with what its failure means
// in coord's terms.
type zop struct {
	req  any // *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest
	size int
	what string // the coord key: "topic T", "partition T-3"
	// Sentinels for the ZooKeeper errors this op may fail with; nil when
	// the error is unexpected.
	onExists, onNoNode, onBadVersion error
}

// unit is a group of ops that must land in the same chunk.
type unit []zop

// create is an op creating path with the backend's ACL for it.
func (b *Backend) create(path string, data []byte, what string, onExists, onNoNode error) zop {
	acl := b.aclFor(path)
	return zop{req: &zk.CreateRequest{Path: path, Data: data, Acl: acl},
		size: len(path) + len(data) + aclBytes(acl) + opOverhead, what: what, onExists: onExists, onNoNode: onNoNode}
}

func setData(path string, data []byte, version int32, what string, onNoNode, onBadVersion error) zop {
	return zop{req: &zk.SetDataRequest{Path: path, Data: data, Version: version},
		size: len(path) + len(data) + opOverhead, what: what, onNoNode: onNoNode, onBadVersion: onBadVersion}
}

func remove(path, what string, onNoNode error) zop {
	return zop{req: &zk.DeleteRequest{Path: path, Version: -1}, size: len(path) + opOverhead, what: what, onNoNode: onNoNode}
}

// Commit implements coord.MetadataStore. Every chunk is one multi that
// starts with Kafka's fence, a check of /controller_epoch's version (no
// newer controller was elected), a check that /controller still exists
// (this term's session has not ended), and the migration record's guard
// (a chunk that lost the race with a refusing record fails with
// ErrMigrated; one that lost it to another record change is sent again).
func (b *Backend) Commit(ctx context.Context, ct coord.Term, ops ...coord.Op) error {
	t, ok := ct.(*term)
	if !ok || t.b != b {
		return fmt.Errorf("%w: commit with term %T not of this zk backend", coord.ErrFenced, ct)
	}
	if t.ctx.Err() != nil {
		return fmt.Errorf("%w: commit of controller epoch %d: term ended", coord.ErrFenced, t.epoch)
	}
	units, err := b.buildUnits(ctx, t, ops)
	if err != nil {
		return err
	}
	// One op must fit one request: ZooKeeper refuses a request above
	// jute.maxbuffer, and the client's buffer holds 1.5 MB. A topic's
	// znode holds its whole assignment, so a topic of about 55 000
	// partitions of three replicas or more cannot be stored (as with
	// Kafka on ZooKeeper).
	for _, u := range units {
		for _, op := range u {
			if op.size > maxChunkBytes {
				return fmt.Errorf("%w: %s is %d bytes in ZooKeeper, over the %d one request may carry (jute.maxbuffer is 1 MB by default): use fewer partitions per topic",
					coord.ErrTooLarge, op.what, op.size, maxChunkBytes)
			}
		}
	}
	chunks := chunkUnits(units)
	for _, wave := range b.commitWaves(chunks) {
		if t.ctx.Err() != nil {
			return fmt.Errorf("%w: commit of controller epoch %d: term ended before chunk %d of %d", coord.ErrFenced, t.epoch, wave[0]+1, len(chunks))
		}
		err := bounded.FirstError(len(wave), commitParallel, func(i int) error {
			err := b.commitChunk(ctx, t, chunks[wave[i]])
			if err != nil && len(chunks) > 1 {
				return fmt.Errorf("chunk %d of %d: %w", wave[i]+1, len(chunks), err)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// commitParallel is how many multis of a Commit are in flight at once on
// the term's session. ZooKeeper applies a session's requests in the order
// sent, and its transaction log syncs the ones queued together at once,
// so a failover's 10 000 partition states (ten multis) no longer wait
// for ten round trips and ten log syncs one after the other.
const commitParallel = 8

// commitWaves groups the chunks, in order, into waves (indexes into
// chunks) whose chunks may be applied in any order: chunks of partition
// znodes (a partition's directory and its state) that share no partition.
// A chunk that writes a topic's own znodes (its assignment, config or
// partitions directory) or deletes anything is a wave of its own: a new
// topic's partitions are created under the directory its first chunk
// creates, and a deleted topic's znodes go after its partitions'.
func (b *Backend) commitWaves(chunks [][]zop) [][]int {
	var waves [][]int
	var cur []int
	touched := map[string]bool{}
	flush := func() {
		if len(cur) > 0 {
			waves = append(waves, cur)
		}
		cur = nil
		clear(touched)
	}
	for i, chunk := range chunks {
		alone, conflict := false, false
		keys := make([]string, 0, len(chunk))
		for _, op := range chunk {
			key, ok := b.partitionKey(op.req)
			if !ok {
				alone = true
				break
			}
			conflict = conflict || touched[key]
			keys = append(keys, key)
		}
		if alone || conflict {
			flush()
		}
		cur = append(cur, i)
		if alone {
			flush()
			continue
		}
		for _, k := range keys {
			touched[k] = true
		}
	}
	flush()
	return waves
}

// partitionKey names the partition ("topic/3") whose directory or state
// req creates or sets; ok is false for any other operation.
func (b *Backend) partitionKey(req any) (key string, ok bool) {
	var path string
	switch r := req.(type) {
	case *zk.CreateRequest:
		path = r.Path
	case *zk.SetDataRequest:
		path = r.Path
	default:
		return "", false
	}
	rest, ok := strings.CutPrefix(path, b.path("/brokers/topics/"))
	if !ok {
		return "", false
	}
	// topic/partitions/N or topic/partitions/N/state: topic names hold
	// no slash.
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || len(parts) > 4 || parts[1] != "partitions" || (len(parts) == 4 && parts[3] != "state") {
		return "", false
	}
	return parts[0] + "/" + parts[2], true
}

// failedMulti is the error of a multi and the index of its op that
// failed (failedOp).
type failedMulti struct {
	op  int
	err error
}

func (e *failedMulti) Error() string { return e.err.Error() }
func (e *failedMulti) Unwrap() error { return e.err }

func (b *Backend) commitChunk(ctx context.Context, t *term, chunk []zop) error {
	epochPath, ctrlPath := b.path("/controller_epoch"), b.path("/controller")
	const fences = 3 // the controller's two checks and the record's guard
	reqs := make([]any, fences, len(chunk)+fences)
	reqs[0] = &zk.CheckVersionRequest{Path: epochPath, Version: t.epochVersion}
	reqs[1] = &zk.CheckVersionRequest{Path: ctrlPath, Version: 0}
	for _, op := range chunk {
		reqs = append(reqs, op.req)
	}
	err := t.zs.call(ctx, "commit", func(c *zk.Conn) error {
		if c.SessionID() != t.zs.sessionID() {
			return errSessionEnded
		}
		for {
			guard, err := b.guard(c, "commit of controller epoch "+strconv.FormatInt(t.epoch, 10))
			if err != nil {
				return err
			}
			reqs[2] = guard
			res, err := c.Multi(reqs...)
			if failed := failedOp(res, err); failed != 2 {
				if err != nil {
					// The index travels with the error: call may return
					// (ctx ended) while this still runs.
					return &failedMulti{op: failed, err: err}
				}
				return nil
			}
			// The record changed: read it again and decide again.
			if _, err := b.readRecord(c); err != nil {
				return err
			}
		}
	})
	failed := -1
	if fm := (*failedMulti)(nil); errors.As(err, &fm) {
		failed = fm.op
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errSessionEnded):
		return fmt.Errorf("%w: commit of controller epoch %d: zookeeper session ended", coord.ErrFenced, t.epoch)
	case errors.Is(err, coord.ErrMigrated):
		return err
	case failed == 0 || failed == 1:
		return fmt.Errorf("%w: commit of controller epoch %d: a newer controller was elected or the term's session ended", coord.ErrFenced, t.epoch)
	case failed >= fences:
		op := chunk[failed-fences]
		var sentinel error
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			sentinel = op.onExists
		case errors.Is(err, zk.ErrNoNode):
			sentinel = op.onNoNode
		case errors.Is(err, zk.ErrBadVersion):
			sentinel = op.onBadVersion
		}
		if sentinel != nil {
			return fmt.Errorf("%w: %s", sentinel, op.what)
		}
		return fmt.Errorf("commit %s: %w", op.what, convertError(err, opPath(op.req)))
	default:
		return convertError(err, "commit of controller epoch "+strconv.FormatInt(t.epoch, 10))
	}
}

func opPath(req any) string {
	switch r := req.(type) {
	case *zk.CreateRequest:
		return r.Path
	case *zk.SetDataRequest:
		return r.Path
	case *zk.DeleteRequest:
		return r.Path
	}
	return "?"
}

// chunkUnits packs units, in order, into chunks under the op and byte
// limits (a unit bigger than a chunk, of ops each within it, gets a chunk
// of its own).
func chunkUnits(units []unit) [][]zop {
	var chunks [][]zop
	var cur []zop
	size := 0
	for _, u := range units {
		usize := 0
		for _, op := range u {
			usize += op.size
		}
		if len(cur) > 0 && (len(cur)+len(u)+3 > maxChunkOps || size+usize > maxChunkBytes) {
			chunks = append(chunks, cur)
			cur, size = nil, 0
		}
		cur = append(cur, u...)
		size += usize
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// buildUnits translates ops into ZooKeeper operations. DeleteTopic reads
// the topic's partitions to delete them; any op that cannot be built fails
// the Commit before anything is written, and so does a SetPartition whose
// ExpectedEpoch is below the partition base (no state of this backend
// has it: ErrVersionMismatch).
func (b *Backend) buildUnits(ctx context.Context, t *term, ops []coord.Op) ([]unit, error) {
	var units []unit
	base := b.bases().Partition
	for _, op := range ops {
		switch op := op.(type) {
		case coord.CreateTopic:
			name := op.Topic.Name
			if err := validTopicName(name); err != nil {
				return nil, err
			}
			if len(op.States) != op.Topic.Partitions() {
				return nil, fmt.Errorf("create topic %s: %d partition states for %d partitions", name, len(op.States), op.Topic.Partitions())
			}
			what := "topic " + name
			units = append(units, unit{
				b.create(b.topicPath(name), encodeTopic(op.Topic), what, coord.ErrExists, nil),
				b.create(b.configPath(name), encodeConfig(op.Topic.Config), what+" config", coord.ErrExists, nil),
				b.create(b.partitionsPath(name), nil, what, coord.ErrExists, nil),
			})
			for i, st := range op.States {
				p := int32(i)
				pwhat := coord.TopicPartition{Topic: name, Partition: p}.String()
				units = append(units, unit{
					b.create(b.partitionPath(name, p), nil, pwhat, coord.ErrExists, nil),
					b.create(b.statePath(name, p), encodeState(st), pwhat, coord.ErrExists, nil),
				})
			}
		case coord.SetTopic:
			name := op.Topic.Name
			what := "topic " + name
			units = append(units, unit{
				setData(b.topicPath(name), encodeTopic(op.Topic), -1, what, coord.ErrNotFound, nil),
				setData(b.configPath(name), encodeConfig(op.Topic.Config), -1, what+" config", coord.ErrNotFound, nil),
			})
		case coord.DeleteTopic:
			u, err := b.deleteTopicUnits(ctx, t, op.Name)
			if err != nil {
				return nil, err
			}
			units = append(units, u...)
		case coord.SetPartition:
			st := op.State
			what := fmt.Sprintf("partition %s", st.TopicPartition())
			if op.ExpectedEpoch == coord.NewPartition {
				units = append(units, unit{
					b.create(b.partitionPath(st.Topic, st.Partition), nil, what+" (new)", coord.ErrVersionMismatch, coord.ErrNotFound),
					b.create(b.statePath(st.Topic, st.Partition), encodeState(st), what+" (new)", coord.ErrVersionMismatch, coord.ErrNotFound),
				})
				continue
			}
			if op.ExpectedEpoch < 0 {
				return nil, fmt.Errorf("set %s: expected epoch %d: must be >= 0 or NewPartition", what, op.ExpectedEpoch)
			}
			version := op.ExpectedEpoch - base
			if version < 0 {
				return nil, fmt.Errorf("%w: %s at epoch %d: below the partition base %d of %s", coord.ErrVersionMismatch, what, op.ExpectedEpoch, base, b.migrationPath())
			}
			units = append(units, unit{
				setData(b.statePath(st.Topic, st.Partition), encodeState(st), version,
					fmt.Sprintf("%s at epoch %d", what, op.ExpectedEpoch), coord.ErrNotFound, coord.ErrVersionMismatch),
			})
		default:
			return nil, fmt.Errorf("commit: unknown op %T", op)
		}
	}
	return units, nil
}

// deleteTopicUnits deletes the partition states and directories first and
// the topic and its config last.
func (b *Backend) deleteTopicUnits(ctx context.Context, t *term, name string) ([]unit, error) {
	if err := validTopicName(name); err != nil {
		return nil, err
	}
	var parts []string
	var hasParts, hasConfig bool
	err := t.zs.call(ctx, b.topicPath(name), func(c *zk.Conn) error {
		exists, _, err := c.Exists(b.topicPath(name))
		if err != nil {
			return err
		}
		if !exists {
			return zk.ErrNoNode
		}
		parts, _, err = c.Children(b.partitionsPath(name))
		if errors.Is(err, zk.ErrNoNode) {
			parts, err = nil, nil
		} else if err == nil {
			hasParts = true
		}
		if err != nil {
			return err
		}
		hasConfig, _, err = c.Exists(b.configPath(name))
		return err
	})
	if errors.Is(err, errSessionEnded) {
		return nil, fmt.Errorf("%w: delete topic %s: zookeeper session ended", coord.ErrFenced, name)
	}
	if err != nil {
		return nil, convertError(err, "delete topic "+name)
	}
	what := "topic " + name
	sort.Slice(parts, func(i, j int) bool {
		return len(parts[i]) < len(parts[j]) || len(parts[i]) == len(parts[j]) && parts[i] < parts[j]
	})
	var units []unit
	for _, p := range parts {
		dir := b.partitionsPath(name) + "/" + p
		units = append(units, unit{remove(dir+"/state", what, coord.ErrNotFound), remove(dir, what, coord.ErrNotFound)})
	}
	last := unit{}
	if hasParts {
		last = append(last, remove(b.partitionsPath(name), what, coord.ErrNotFound))
	}
	last = append(last, remove(b.topicPath(name), what, coord.ErrNotFound))
	if hasConfig {
		last = append(last, remove(b.configPath(name), what, coord.ErrNotFound))
	}
	return append(units, last), nil
}

// validTopicName refuses names that would escape /brokers/topics.
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("topic name %q: invalid", name)
	}
	for _, r := range name {
		if r == '/' || r == 0 {
			return fmt.Errorf("topic name %q: must not contain '/' or NUL", name)
		}
	}
	return nil
}
