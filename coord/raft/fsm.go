package raft

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// cmdType names the kind of a Raft log entry written by this backend.
type cmdType string

const (
	cmdRegister   cmdType = "register"
	cmdDeregister cmdType = "deregister"
	cmdExpire     cmdType = "expire"
	cmdClaim      cmdType = "claim"
	cmdRelease    cmdType = "release"
	cmdCommit     cmdType = "commit"
	// cmdAllocateProducerIDs reserves the next block of producer ids.
	cmdAllocateProducerIDs cmdType = "allocate_producer_ids"
	// cmdProducerIDKey stores the cluster's producer id key, unless one
	// is stored.
	cmdProducerIDKey cmdType = "producer_id_key"
)

// command is one Raft log entry, JSON encoded.
type command struct {
	Type cmdType `json:"type"`
	// Broker is the broker of register; ID and Epoch of deregister and
	// expire (a stale entry for an older registration changes nothing);
	// ID of allocate_producer_ids (the broker the block is for).
	Broker coord.Broker `json:"broker,omitzero"`
	// Epoch is the controller epoch of commit and release.
	Epoch int64 `json:"epoch,omitempty"`
	// Replaces is the broker epoch of the dead registration a register
	// replaces (coord.Broker.Replaces, which Broker does not encode); 0
	// in entries written before it existed.
	Replaces int64 `json:"replaces,omitempty"`
	// Ops are the metadata changes of one commit chunk.
	Ops []wireOp `json:"ops,omitempty"`
	// Security holds the fields of the security commands (security.go).
	Security *securityCommand `json:"security,omitempty"`
	// Configs holds the fields of alter_broker_configs (configs.go).
	Configs *configsCommand `json:"configs,omitempty"`
	// Migration holds the fields of the migration commands (migrate.go).
	Migration *migrationCommand `json:"migration,omitempty"`
	// Key is the producer id key that producer_id_key proposes.
	Key []byte `json:"key,omitempty"`
}

// wireOp is a coord.Op in JSON: exactly one field is set.
type wireOp struct {
	CreateTopic  *coord.CreateTopic  `json:"create_topic,omitempty"`
	SetTopic     *coord.SetTopic     `json:"set_topic,omitempty"`
	DeleteTopic  *coord.DeleteTopic  `json:"delete_topic,omitempty"`
	SetPartition *coord.SetPartition `json:"set_partition,omitempty"`
	// Partial marks a CreateTopic holding only the first states of a
	// topic too large for one entry; SetPartitions with NewPartition in
	// the following entries create the rest.
	Partial bool `json:"partial,omitempty"`
}

func toWireOp(op coord.Op) (wireOp, error) {
	switch o := op.(type) {
	case coord.CreateTopic:
		return wireOp{CreateTopic: &o}, nil
	case *coord.CreateTopic:
		return wireOp{CreateTopic: o}, nil
	case coord.SetTopic:
		return wireOp{SetTopic: &o}, nil
	case *coord.SetTopic:
		return wireOp{SetTopic: o}, nil
	case coord.DeleteTopic:
		return wireOp{DeleteTopic: &o}, nil
	case *coord.DeleteTopic:
		return wireOp{DeleteTopic: o}, nil
	case coord.SetPartition:
		return wireOp{SetPartition: &o}, nil
	case *coord.SetPartition:
		return wireOp{SetPartition: o}, nil
	}
	return wireOp{}, fmt.Errorf("commit: unknown op type %T", op)
}

// weight is how much an op counts towards a chunk's size.
func (o wireOp) weight() int {
	if o.CreateTopic != nil {
		return 1 + len(o.CreateTopic.States)
	}
	return 1
}

// applyResult is what fsm.Apply returns through ApplyFuture.Response.
type applyResult struct {
	// Err is nil or wraps a coord sentinel.
	Err error
	// Broker is the registered broker of register.
	Broker coord.Broker
	// Replaced is the broker epoch of the registration a register
	// replaced, or 0.
	Replaced int64
	// Epoch is the controller epoch of claim.
	Epoch int64
	// ProducerIDs is the block reserved by allocate_producer_ids.
	ProducerIDs coord.ProducerIDBlock
	// ProducerIDKey is the stored key, after producer_id_key.
	ProducerIDKey []byte
	// ACLs are the ACLs removed by delete_acls.
	ACLs []coord.ACL
	// Configs are the entity's configs written by alter_broker_configs.
	Configs map[string]string
	// Bases are the epoch bases in force once the entry is applied: the
	// applier raises the epochs above with them (they are the state
	// machine's own, as stored).
	Bases epochBases
	// Index is the entry's log index (set by the applier, not the FSM).
	Index uint64
}

// topicState is one topic and its partition states. Apply changes it in
// place (under the fsm's lock); snapshots copy it.
type topicState struct {
	Topic coord.Topic                    `json:"topic"`
	Parts map[int32]coord.PartitionState `json:"parts"`
}

// fsmData is the replicated state; it is also the snapshot format.
type fsmData struct {
	Topics  map[string]*topicState          `json:"topics"`
	Brokers map[coord.BrokerID]coord.Broker `json:"brokers"`
	// ControllerID is the broker holding the current controller term, or
	// coord.NoBroker.
	ControllerID coord.BrokerID `json:"controller_id"`
	// ControllerEpoch is the epoch of the latest claim.
	ControllerEpoch int64 `json:"controller_epoch"`
	// ControllerBroker is the broker epoch of the controller's session.
	ControllerBroker int64 `json:"controller_broker"`
	// Applied is the index of the last applied entry; MembersVersion,
	// ControllerVersion and MetaVersion the index of the last entry that
	// changed the members, the controller and the metadata.
	Applied           uint64 `json:"applied"`
	MembersVersion    uint64 `json:"members_version"`
	ControllerVersion uint64 `json:"controller_version"`
	MetaVersion       uint64 `json:"meta_version"`
	// NextProducerID is the first producer id not yet reserved by
	// allocate_producer_ids; snapshots written before it existed restore
	// it as 0, when no block had been reserved.
	NextProducerID int64 `json:"next_producer_id,omitempty"`
	// ProducerIDKey is the cluster's producer id key, set once by the
	// first producer_id_key entry and never changed; empty before.
	ProducerIDKey []byte `json:"producer_id_key,omitempty"`
	// Security is the security store (security.go).
	Security securityData `json:"security,omitzero"`
	// Configs is the config store (configs.go).
	Configs configsData `json:"configs,omitzero"`
	// Migration is the migration record and the epoch bases (migrate.go);
	// snapshots written before it existed restore none.
	Migration migrationData `json:"migration,omitzero"`
}

// fsm is the backend's Raft state machine: registrations, the controller
// and the metadata, applied deterministically from the log. Readers get
// copies; every change is announced on changed so watches wake up.
type fsm struct {
	mu      sync.RWMutex
	data    fsmData
	changed notify.Broadcast
	// configIndex is the log index of the last Raft configuration entry
	// applied (StoreConfiguration); not part of the replicated state,
	// since hashicorp/raft keeps the configuration itself.
	configIndex atomic.Uint64
}

func newFSM() *fsm {
	return &fsm{
		data: fsmData{
			Topics:       map[string]*topicState{},
			Brokers:      map[coord.BrokerID]coord.Broker{},
			ControllerID: coord.NoBroker,
		},
	}
}

// Apply implements hraft.FSM.
func (f *fsm) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand {
		return nil
	}
	var cmd command
	if err := decodeCommand(l.Data, &cmd); err != nil {
		return applyResult{Err: fmt.Errorf("decode raft log entry %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	res := f.applyLocked(l.Index, l.Term, &cmd)
	res.Bases = f.data.Migration.Bases
	f.data.Applied = l.Index
	f.changed.Notify()
	f.mu.Unlock()
	return res
}

// StoreConfiguration implements hraft.ConfigurationStore: it records the
// index of each Raft configuration entry as it is committed, which is
// the configuration index quorum changes are conditioned on (hashicorp/raft
// v1.7 does not say it: GetConfiguration's Index is 0).
func (f *fsm) StoreConfiguration(index uint64, _ hraft.Configuration) {
	f.noteConfigIndex(index)
}

// noteConfigIndex records index as the committed configuration's, unless
// a later one is recorded: StoreConfiguration, or the leader whose change
// was committed at index, which need not wait for its state machine.
func (f *fsm) noteConfigIndex(index uint64) {
	for {
		old := f.configIndex.Load()
		if index <= old || f.configIndex.CompareAndSwap(old, index) {
			return
		}
	}
}

func (f *fsm) applyLocked(index, term uint64, cmd *command) applyResult {
	d := &f.data
	switch cmd.Type {
	case cmdRegister:
		b := cmd.Broker
		var replaced int64
		// Replaces is a broker epoch as reported: raised by the bases.
		replaces := d.Migration.Bases.rawBroker(cmd.Replaces)
		if old, ok := d.Brokers[b.ID]; ok {
			if replaces == 0 || old.Epoch != replaces {
				return applyResult{Err: fmt.Errorf("%w: broker %d is registered with epoch %d", coord.ErrExists, b.ID, d.Migration.Bases.broker(old.Epoch))}
			}
			// The caller's previous incarnation, dead: its registration
			// and its controller claim go, as its expiry would remove
			// them.
			replaced = old.Epoch
			if d.ControllerID == old.ID && d.ControllerBroker == old.Epoch {
				d.ControllerID = coord.NoBroker
				d.ControllerVersion = index
			}
		}
		b.Epoch, b.Replaces = int64(index), 0
		d.Brokers[b.ID] = b
		d.MembersVersion = index
		return applyResult{Broker: b, Replaced: replaced}
	case cmdDeregister, cmdExpire:
		b := cmd.Broker
		old, ok := d.Brokers[b.ID]
		if !ok || old.Epoch != b.Epoch {
			return applyResult{Err: fmt.Errorf("%w: broker %d epoch %d is not registered", coord.ErrSessionExpired, b.ID, b.Epoch)}
		}
		delete(d.Brokers, b.ID)
		d.MembersVersion = index
		if d.ControllerID == b.ID && d.ControllerBroker == b.Epoch {
			d.ControllerID = coord.NoBroker
			d.ControllerVersion = index
		}
		return applyResult{}
	case cmdClaim:
		b := cmd.Broker
		if old, ok := d.Brokers[b.ID]; !ok || old.Epoch != b.Epoch {
			return applyResult{Err: fmt.Errorf("%w: controller claim of broker %d epoch %d: not registered", coord.ErrSessionExpired, b.ID, b.Epoch)}
		}
		epoch := max(int64(term), d.ControllerEpoch+1)
		d.ControllerID, d.ControllerEpoch, d.ControllerBroker = b.ID, epoch, b.Epoch
		d.ControllerVersion = index
		return applyResult{Epoch: epoch}
	case cmdRelease:
		if d.ControllerID != coord.NoBroker && (cmd.Epoch == 0 || cmd.Epoch == d.ControllerEpoch) {
			d.ControllerID = coord.NoBroker
			d.ControllerVersion = index
		}
		return applyResult{}
	case cmdCommit:
		if d.ControllerID == coord.NoBroker || cmd.Epoch != d.ControllerEpoch {
			bases := d.Migration.Bases
			return applyResult{Err: fmt.Errorf("%w: commit with controller epoch %d, current %d (controller %d)",
				coord.ErrFenced, bases.controller(cmd.Epoch), bases.controller(d.ControllerEpoch), d.ControllerID)}
		}
		if err := f.refusal(cmd); err != nil {
			return applyResult{Err: err}
		}
		if len(cmd.Ops) == 0 {
			// An empty commit only checks the fence and the record.
			return applyResult{}
		}
		view, err := applyOps(d.Topics, cmd.Ops, d.Migration.Bases.Partition)
		if err != nil {
			return applyResult{Err: err}
		}
		view.merge()
		d.MetaVersion = index
		return applyResult{}
	case cmdAllocateProducerIDs:
		if err := f.refusal(cmd); err != nil {
			return applyResult{Err: err}
		}
		block, err := coord.NewProducerIDBlock(cmd.Broker.ID, d.NextProducerID)
		if err != nil {
			return applyResult{Err: fmt.Errorf("allocate producer ids for broker %d: %w", cmd.Broker.ID, err)}
		}
		d.NextProducerID = block.Last() + 1
		return applyResult{ProducerIDs: block}
	case cmdProducerIDKey:
		if len(d.ProducerIDKey) == 0 {
			if err := f.refusal(cmd); err != nil {
				return applyResult{Err: err}
			}
			if err := coord.CheckProducerIDKey(fmt.Sprintf("raft log entry %d", index), cmd.Key); err != nil {
				return applyResult{Err: err}
			}
			d.ProducerIDKey = slices.Clone(cmd.Key)
		}
		return applyResult{ProducerIDKey: d.ProducerIDKey}
	case cmdSetScramCredential, cmdDeleteScramCredential, cmdCreateACLs, cmdDeleteACLs:
		if err := f.refusal(cmd); err != nil {
			return applyResult{Err: err}
		}
		return f.applySecurityLocked(index, cmd)
	case cmdAlterBrokerConfigs, cmdAlterClientQuotas:
		if err := f.refusal(cmd); err != nil {
			return applyResult{Err: err}
		}
		return f.applyConfigsLocked(index, cmd)
	case cmdSetMigration, cmdImportBegin, cmdImportChunk, cmdImportEnd:
		return f.applyMigrationLocked(index, cmd)
	}
	return applyResult{Err: fmt.Errorf("raft log entry %d: unknown command type %q", index, cmd.Type)}
}

// chunkView is a chunk's pending changes over the stored topics, so that a
// chunk is applied all or nothing without copying what it does not touch.
type chunkView struct {
	base map[string]*topicState
	// topics holds the changed topics, nil for a deleted one.
	topics map[string]*coord.Topic
	// parts holds the changed partition states, nil for a deleted one.
	parts map[coord.TopicPartition]*coord.PartitionState
	// reset names the topics whose stored partition states are gone
	// (deleted, perhaps created again).
	reset map[string]bool
}

func (v *chunkView) topic(name string) *coord.Topic {
	if t, ok := v.topics[name]; ok {
		return t
	}
	if ts := v.base[name]; ts != nil {
		return &ts.Topic
	}
	return nil
}

func (v *chunkView) part(tp coord.TopicPartition) (coord.PartitionState, bool) {
	if p, ok := v.parts[tp]; ok {
		if p == nil {
			return coord.PartitionState{}, false
		}
		return *p, true
	}
	if v.reset[tp.Topic] {
		return coord.PartitionState{}, false
	}
	if ts := v.base[tp.Topic]; ts != nil {
		p, ok := ts.Parts[tp.Partition]
		return p, ok
	}
	return coord.PartitionState{}, false
}

// dropParts deletes the partitions of topic name from index from on.
func (v *chunkView) dropParts(name string, from int32) {
	for tp := range v.parts {
		if tp.Topic == name && tp.Partition >= from {
			v.parts[tp] = nil
		}
	}
	if ts := v.base[name]; ts != nil && !v.reset[name] {
		for p := range ts.Parts {
			if p >= from {
				v.parts[coord.TopicPartition{Topic: name, Partition: p}] = nil
			}
		}
	}
}

// merge writes the view's changes into the stored topics.
func (v *chunkView) merge() {
	for name, t := range v.topics {
		if t == nil {
			delete(v.base, name)
			continue
		}
		ts := v.base[name]
		if ts == nil || v.reset[name] {
			ts = &topicState{Parts: map[int32]coord.PartitionState{}}
			v.base[name] = ts
		}
		ts.Topic = *t
	}
	for tp, p := range v.parts {
		ts := v.base[tp.Topic]
		switch {
		case ts == nil:
		case p == nil:
			delete(ts.Parts, tp.Partition)
		default:
			ts.Parts[tp.Partition] = *p
		}
	}
}

// applyOps validates ops against topics and returns their changes as a
// view to merge, or the first op's error: all or nothing. A
// SetPartition's ExpectedEpoch is a partition epoch as reported, raised
// by partitionBase; stored epochs are not.
func applyOps(topics map[string]*topicState, ops []wireOp, partitionBase int32) (*chunkView, error) {
	v := &chunkView{
		base:   topics,
		topics: map[string]*coord.Topic{},
		parts:  map[coord.TopicPartition]*coord.PartitionState{},
		reset:  map[string]bool{},
	}
	for _, op := range ops {
		switch {
		case op.CreateTopic != nil:
			t := op.CreateTopic.Topic
			if v.topic(t.Name) != nil {
				return nil, fmt.Errorf("%w: topic %q", coord.ErrExists, t.Name)
			}
			if n := len(op.CreateTopic.States); n != len(t.Assignment) && !(op.Partial && n < len(t.Assignment)) {
				return nil, fmt.Errorf("create topic %q: %d partition states for %d partitions",
					t.Name, len(op.CreateTopic.States), len(t.Assignment))
			}
			t = t.Clone()
			v.topics[t.Name] = &t
			v.reset[t.Name] = true
			for i, st := range op.CreateTopic.States {
				st = st.Clone()
				st.Topic, st.Partition, st.PartitionEpoch = t.Name, int32(i), 0
				v.parts[st.TopicPartition()] = &st
			}
		case op.SetTopic != nil:
			t := op.SetTopic.Topic.Clone()
			if v.topic(t.Name) == nil {
				return nil, fmt.Errorf("%w: topic %q", coord.ErrNotFound, t.Name)
			}
			v.topics[t.Name] = &t
			v.dropParts(t.Name, int32(len(t.Assignment)))
		case op.DeleteTopic != nil:
			name := op.DeleteTopic.Name
			if v.topic(name) == nil {
				return nil, fmt.Errorf("%w: topic %q", coord.ErrNotFound, name)
			}
			v.topics[name] = nil
			v.reset[name] = true
			for tp := range v.parts {
				if tp.Topic == name {
					delete(v.parts, tp)
				}
			}
		case op.SetPartition != nil:
			st, want := op.SetPartition.State.Clone(), op.SetPartition.ExpectedEpoch
			t := v.topic(st.Topic)
			if t == nil {
				return nil, fmt.Errorf("%w: topic %q of partition %d", coord.ErrNotFound, st.Topic, st.Partition)
			}
			if st.Partition < 0 || int(st.Partition) >= len(t.Assignment) {
				return nil, fmt.Errorf("%w: partition %s", coord.ErrNotFound, st.TopicPartition())
			}
			old, ok := v.part(st.TopicPartition())
			isNew := want == coord.NewPartition
			if !isNew {
				// Below the base, want is no epoch of this backend: it
				// matches none (and is never taken for NewPartition).
				want -= partitionBase
			}
			switch {
			case isNew && ok:
				return nil, fmt.Errorf("%w: partition %s exists with epoch %d, want new", coord.ErrVersionMismatch, st.TopicPartition(), old.PartitionEpoch+partitionBase)
			case isNew:
				st.PartitionEpoch = 0
			case !ok:
				return nil, fmt.Errorf("%w: partition %s has no state", coord.ErrNotFound, st.TopicPartition())
			case old.PartitionEpoch != want:
				return nil, fmt.Errorf("%w: partition %s has epoch %d, want %d", coord.ErrVersionMismatch, st.TopicPartition(),
					old.PartitionEpoch+partitionBase, want+partitionBase)
			default:
				st.PartitionEpoch = want + 1
			}
			v.parts[st.TopicPartition()] = &st
		default:
			return nil, fmt.Errorf("commit: empty op")
		}
	}
	return v, nil
}

// changes returns a channel closed at the next applied entry or restore.
func (f *fsm) changes() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed.Next()
}

// applied returns the index of the last applied entry.
func (f *fsm) applied() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.data.Applied
}

// members returns the registered brokers ordered by ID, and the index of
// the last change to them.
func (f *fsm) members() ([]coord.Broker, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.membersLocked(), f.data.MembersVersion
}

// membersLocked returns the registered brokers ordered by ID; f.mu is
// held.
func (f *fsm) membersLocked() []coord.Broker {
	out := make([]coord.Broker, 0, len(f.data.Brokers))
	for _, b := range f.data.Brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b coord.Broker) int { return int(a.ID) - int(b.ID) })
	return out
}

// reportedMembers returns the registered brokers ordered by ID with their
// epochs as reported (raised by the bases), and the index of the last
// change to them or to the bases.
func (f *fsm) reportedMembers() ([]coord.Broker, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	members := f.membersLocked()
	for i := range members {
		members[i].Epoch = f.data.Migration.Bases.broker(members[i].Epoch)
	}
	return members, max(f.data.MembersVersion, f.data.Migration.BasesVersion)
}

// registration returns the registration of id, and the applied index.
func (f *fsm) registration(id coord.BrokerID) (coord.Broker, bool, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, ok := f.data.Brokers[id]
	return b, ok, f.data.Applied
}

// producerIDKey returns the stored producer id key, nil before the first
// producer_id_key entry. The key never changes once stored.
func (f *fsm) producerIDKey() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.data.ProducerIDKey
}

// controller returns the controller and the index of its last change.
func (f *fsm) controller() (coord.ControllerInfo, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return coord.ControllerInfo{ID: f.data.ControllerID, Epoch: f.data.ControllerEpoch}, f.data.ControllerVersion
}

// reportedController returns the controller with its epoch as reported
// (raised by the bases), and the index of the last change to it or to
// the bases.
func (f *fsm) reportedController() (coord.ControllerInfo, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	bases := f.data.Migration.Bases
	return coord.ControllerInfo{ID: f.data.ControllerID, Epoch: bases.controller(f.data.ControllerEpoch)},
		max(f.data.ControllerVersion, f.data.Migration.BasesVersion)
}

// versions holds the indexes of the last change to each part of the state.
type versions struct {
	members, controller, meta uint64
}

// versions returns the indexes of the last changes; a change of the
// bases (which raise what every part reports) counts for each.
func (f *fsm) versions() versions {
	f.mu.RLock()
	defer f.mu.RUnlock()
	bv := f.data.Migration.BasesVersion
	return versions{members: max(f.data.MembersVersion, bv), controller: max(f.data.ControllerVersion, bv), meta: max(f.data.MetaVersion, bv)}
}

// metadata returns a deep copy of the metadata as reported: its Version
// and partition epochs raised by the bases.
func (f *fsm) metadata() *coord.Metadata {
	md, _ := f.metadataAt()
	return md
}

// metadataAt returns metadata and the index of the last change to the
// metadata or the bases, read together.
func (f *fsm) metadataAt() (*coord.Metadata, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	bases := f.data.Migration.Bases
	md := coord.NewMetadata()
	md.Version = bases.version(f.data.MetaVersion)
	md.PartitionBase = bases.partition(0)
	for _, ts := range f.data.Topics {
		md.Topics[ts.Topic.Name] = ts.Topic.Clone()
		for _, p := range ts.Parts {
			p = p.Clone()
			p.PartitionEpoch = bases.partition(p.PartitionEpoch)
			md.Partitions[p.TopicPartition()] = p
		}
	}
	return md, max(f.data.MetaVersion, f.data.Migration.BasesVersion)
}

// Snapshot implements hraft.FSM. Stored topics and states are replaced,
// never changed inside, so copying the maps suffices.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.data
	d.Topics = make(map[string]*topicState, len(f.data.Topics))
	for name, ts := range f.data.Topics {
		d.Topics[name] = &topicState{Topic: ts.Topic, Parts: maps.Clone(ts.Parts)}
	}
	d.Brokers = maps.Clone(d.Brokers)
	return &fsmSnapshot{data: d}, nil
}

// Restore implements hraft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var d fsmData
	if err := json.NewDecoder(rc).Decode(&d); err != nil {
		return fmt.Errorf("restore raft snapshot: %w", err)
	}
	if d.Topics == nil {
		d.Topics = map[string]*topicState{}
	}
	if d.Brokers == nil {
		d.Brokers = map[coord.BrokerID]coord.Broker{}
	}
	for _, ts := range d.Topics {
		if ts.Parts == nil {
			ts.Parts = map[int32]coord.PartitionState{}
		}
	}
	f.mu.Lock()
	f.data = d
	f.changed.Notify()
	f.mu.Unlock()
	return nil
}

// fsmSnapshot is a point-in-time copy of the state.
type fsmSnapshot struct {
	data fsmData
}

// Persist implements hraft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(&s.data); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist raft snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements hraft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}
