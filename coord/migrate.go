package coord

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
)

// Moving a cluster between coordination backends (`tripod migrate`,
// docs/architecture.md "Changing the coordination backend"): freeze the
// source, copy everything the contract stores into the target, switch
// the brokers over. Every backend is a Migrator: it keeps a migration
// record (Migration), refuses writes while its record freezes it, and
// imports a Snapshot that Export took of another backend.

// MigrationPhase is where a migration stands, as the backend that keeps
// the record sees it.
type MigrationPhase string

// The phases. On the source: Copying (a first copy is being taken while
// the source still takes writes: the pre-copy), Frozen (the copy is
// being taken, or what changed since the pre-copy: writes are refused), Switched (the copy is in the target and brokers move to it:
// writes stay refused), Finalized (every live broker moved: the source
// is retired for good), RolledBack (the migration was undone before
// finalize: the source takes writes again, as before it began). On the
// target: Importing (the copy is being written: writes are refused),
// Imported (it holds the copy; it takes writes).
const (
	MigrationCopying    MigrationPhase = "copying"
	MigrationFrozen     MigrationPhase = "frozen"
	MigrationSwitched   MigrationPhase = "switched"
	MigrationFinalized  MigrationPhase = "finalized"
	MigrationRolledBack MigrationPhase = "rolled-back"
	MigrationImporting  MigrationPhase = "importing"
	MigrationImported   MigrationPhase = "imported"
)

// Refuses reports whether a backend whose record is in phase p refuses
// writes: a source frozen, switched or finalized, a target being
// imported into. Import's own writes are not refused.
func (p MigrationPhase) Refuses() bool {
	return p == MigrationFrozen || p == MigrationSwitched || p == MigrationFinalized || p == MigrationImporting
}

// Migration is a backend's migration record: one per backend, the last
// migration it took part in.
type Migration struct {
	// ID names the migration; the source and the target hold the same.
	ID string `json:"id"`
	// From and To are the backends' names (zk, etcd, raft).
	From string `json:"from"`
	To   string `json:"to"`
	// Target holds the coordination properties a broker opens the target
	// with (coordination.backend, zookeeper.connect, etcd.endpoints,
	// raft.voters, ...), as the source's record gives them to the
	// brokers; the target's record keeps them too, to tell a broker
	// started on the source after finalize where the cluster went.
	Target map[string]string `json:"target,omitempty"`
	// Source holds the coordination properties of the source, as the
	// brokers opened it: on the target, where finalize and a rollback
	// reach it. On the source, set by the controller that froze it, or
	// empty.
	Source map[string]string `json:"source,omitempty"`
	// RollsBack names the migration this one undoes, after its switch
	// and before its finalize: this one goes from that migration's
	// target back to its source, whose record says that migration
	// switched; Import into that source replaces what it holds.
	RollsBack string `json:"rolls_back,omitempty"`
	// Brokers, on the target, are the brokers that were live on the
	// source when it was copied: finalize waits for each to switch.
	Brokers []BrokerID `json:"brokers,omitempty"`
	// Finalized, on the target, is when the migration was finalized
	// (zero before): the source is retired for good.
	Finalized time.Time `json:"finalized,omitzero"`
	// Phase is where the migration stands in this backend.
	Phase MigrationPhase `json:"phase"`
	// Bases, on the target, are what it adds to every epoch and version
	// it reports (EpochBases); zero on the source.
	Bases EpochBases `json:"bases"`
	// Updated is when the record was last written.
	Updated time.Time `json:"updated"`
}

// EpochBases carry the source's epochs and versions over to the target,
// so that none goes backwards across a migration and every fencing rule
// holds across it: a backend whose record has Bases reports each broker
// epoch, controller epoch, partition epoch and Version as its own plus
// the base, and takes them back (Broker.Replaces, SetPartition's
// ExpectedEpoch, EvictController's epoch) minus the base. Export sets
// each base to one more than the highest value the source reported.
type EpochBases struct {
	Broker     int64 `json:"broker"`
	Controller int64 `json:"controller"`
	Partition  int32 `json:"partition"`
	Version    int64 `json:"version"`
}

// Snapshot is everything a cluster keeps in its coordination backend, as
// Export reads it from one for another to Import.
type Snapshot struct {
	// Metadata holds every topic (assignment, configs, reassignments in
	// progress) and partition state (leader, leader epoch, ISR,
	// controller epoch; the partition epoch is the source's).
	Metadata *Metadata
	// Security holds the SCRAM credentials and ACLs.
	Security *SecurityState
	// Configs holds the dynamic broker configs and client quotas (topic
	// configs travel in Metadata).
	Configs *ConfigState
	// NextProducerID is above every producer id the source handed out:
	// the target's first block starts there.
	NextProducerID int64
	// ProducerIDKey is the cluster's producer id key, so that ids issued
	// before the migration still verify after it.
	ProducerIDKey []byte
	// Bases are the target's EpochBases.
	Bases EpochBases
	// Brokers are the brokers live on the source when it was read.
	Brokers []BrokerID
}

// Migrator is implemented by every backend. While its record's phase
// Refuses writes, these fail with ErrMigrated and change nothing:
// Commit, AllocateProducerIDs, the SecurityStore's and ConfigStore's
// writes, and ProducerIDKey when it would store a key. Sessions,
// elections and reads go on.
type Migrator interface {
	// Migration returns this backend's record; ok is false when it has
	// none. Errors: ErrUnavailable, ctx.Err(), ErrClosed.
	Migration(ctx context.Context) (m Migration, ok bool, err error)

	// SetMigration replaces the record with m if the stored one has
	// prev's ID and Phase (prev nil: if none is stored), atomically with
	// respect to every write the record refuses: once SetMigration of a
	// refusing phase returns, no write that began before it lands. It
	// returns the version the record was written at (the backend's own
	// unit: zxid, revision, log index, raised by its own Bases), above
	// every broker epoch and Version this backend reported before. It
	// blocks until m is durable or ctx ends. Errors: ErrVersionMismatch
	// when the stored record is not prev; ErrUnavailable; ctx.Err();
	// ErrClosed.
	SetMigration(ctx context.Context, prev *Migration, m Migration) (version int64, err error)

	// NextProducerID returns where the next producer id block would
	// start: above every id AllocateProducerIDs handed out. Errors:
	// ErrUnavailable, ctx.Err(), ErrClosed.
	NextProducerID(ctx context.Context) (int64, error)

	// WatchMigration sends the record on the returned channel (ok false
	// while there is none): first the current one, then every change;
	// values may be coalesced. The channel is closed when ctx ends or the
	// backend is closed. Errors: ErrUnavailable, ctx.Err(), ErrClosed.
	WatchMigration(ctx context.Context) (<-chan MigrationRecord, error)

	// Import writes snap into this backend, with m as its record: first
	// the record in phase Importing, then the topics and partition
	// states, the security and config states, the producer id counter
	// (the next block starts at snap.NextProducerID) and key, in chunks,
	// then the record in phase Imported. From then on the backend reports
	// its epochs and versions raised by m.Bases (snap.Bases). The backend
	// must hold no topic, no SCRAM credential, ACL, dynamic config or
	// quota, and no record, or a record of m.ID in phase Importing: an
	// Import that failed midway is retried with the same m, and replaces
	// what the failed one wrote. Errors: ErrExists when the backend holds
	// any of those; ErrTooLarge; ErrUnavailable; ctx.Err(); ErrClosed.
	Import(ctx context.Context, snap *Snapshot, m Migration) error

	// PreCopy is Import but for its end: the record stays in phase
	// Importing (the backend refuses writes, and no broker switches to
	// it). It takes the copy of a source that still takes writes (phase
	// Copying), so that the source refuses writes only while
	// ImportChanges writes what changed since. Errors: as Import's.
	PreCopy(ctx context.Context, snap *Snapshot, m Migration) error

	// ImportChanges ends a pre-copy: the backend holds base, which
	// PreCopy of migration m.ID wrote (its record is m.ID's in phase
	// Importing); ImportChanges writes what snap, taken of the frozen
	// source, changes from base (what was created, changed or deleted
	// since, the producer id counter and key), then the record in phase
	// Imported with snap.Bases, which may be above base's. Errors:
	// ErrExists when the record is not m.ID's in phase Importing (the
	// caller imports snap whole instead); as Import's.
	ImportChanges(ctx context.Context, base, snap *Snapshot, m Migration) error
}

// MetadataWarmer is a backend that keeps a copy of the metadata for
// the Load of the controller it elects (Config.MetadataStandby: ZooKeeper
// and etcd; Raft's state machine holds it anyway). A campaign starts the
// copy; WarmMetadata starts it without one and returns once the copy
// holds every commit made before the call. The broker driving a
// migration warms its target after the pre-copy, before it freezes the
// source: its Load on the target, the first controller there, then reads
// only what changed since, from memory, instead of every partition state
// while metadata writes are refused. Errors: ctx.Err(), ErrClosed.
type MetadataWarmer interface {
	WarmMetadata(ctx context.Context) error
}

// DescribeRecord names a backend's migration record in messages; ok
// false: the backend has none.
func DescribeRecord(m Migration, ok bool) string {
	if !ok {
		return "absent"
	}
	return fmt.Sprintf("migration %s from %s to %s in phase %s", m.ID, m.From, m.To, m.Phase)
}

// MigrationRecord is a value WatchMigration sends.
type MigrationRecord struct {
	Migration Migration
	OK        bool
}

// ErrMigrated: a write to a backend whose migration record refuses
// writes (a frozen, switched or finalized source). It is retriable while
// the migration goes on: the write belongs on the target once the
// brokers switch, or on the source again after a rollback.
var ErrMigrated = errors.New("coord: the cluster is migrating to another coordination backend")

// Export reads a Snapshot of b, which its record freezes, and computes
// the target's EpochBases from what b reported: one above frozenAt (the
// version SetMigration froze b at) and its highest live broker epoch,
// above its controller epoch and every partition's, its highest
// partition epoch and its versions.
func Export(ctx context.Context, b Backend, frozenAt int64) (*Snapshot, error) {
	md, err := b.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("export metadata: %w", err)
	}
	sec, err := b.LoadSecurity(ctx)
	if err != nil {
		return nil, fmt.Errorf("export security state: %w", err)
	}
	cfgs, err := b.LoadConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("export configs: %w", err)
	}
	members, err := b.Members(ctx)
	if err != nil {
		return nil, fmt.Errorf("export live brokers: %w", err)
	}
	ctrl, err := b.Controller(ctx)
	if err != nil {
		return nil, fmt.Errorf("export controller epoch: %w", err)
	}
	mig, ok := b.(Migrator)
	if !ok {
		return nil, fmt.Errorf("export: backend %T cannot migrate", b)
	}
	next, err := mig.NextProducerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("export producer id counter: %w", err)
	}
	proposed := make([]byte, ProducerIDKeySize)
	if _, err := rand.Read(proposed); err != nil {
		return nil, fmt.Errorf("export producer id key: %w", err)
	}
	key, err := b.ProducerIDKey(ctx, proposed)
	if err != nil {
		return nil, fmt.Errorf("export producer id key: %w", err)
	}
	snap := &Snapshot{Metadata: md, Security: sec, Configs: cfgs, NextProducerID: next, ProducerIDKey: key}
	snap.Bases = snapshotBases(snap, frozenAt, members, ctrl)
	for _, m := range members {
		snap.Brokers = append(snap.Brokers, m.ID)
	}
	return snap, nil
}

// snapshotBases returns the EpochBases a target of snap starts from.
func snapshotBases(snap *Snapshot, frozenAt int64, members []Broker, ctrl ControllerInfo) EpochBases {
	bases := EpochBases{Broker: frozenAt}
	for _, m := range members {
		bases.Broker = max(bases.Broker, m.Epoch)
	}
	bases.Controller = ctrl.Epoch
	for _, st := range snap.Metadata.Partitions {
		bases.Partition = max(bases.Partition, st.PartitionEpoch)
		bases.Controller = max(bases.Controller, st.ControllerEpoch)
	}
	bases.Version = max(frozenAt, snap.Metadata.Version, snap.Security.Version, snap.Configs.Version)
	bases.Broker += 1 + EpochMargin
	bases.Controller += 1 + EpochMargin
	bases.Partition++
	bases.Version += 1 + EpochMargin
	return bases
}

// EpochMargin is how far above the source's epochs and versions at the
// copy the target's start (but the partition epochs, which a frozen
// source never writes). Between the copy and the moment every broker has
// left the source, the source still elects and registers: a broker whose
// session ended there registers again, and when the controller leaves at
// the switch another broker may win a term before it learns of the
// switch (its term ends at once). Each of those takes an epoch above the
// copy's, a few apiece; the margin keeps every epoch on the target above
// them, so that brokers refuse the requests of a controller of the source
// whatever it won.
const EpochMargin = 1 << 16

// Current returns the backend b serves from: b itself, or the one a
// backend that moves between backends (coord/migration) uses now. Tell
// what the backend can do (Quorum, ControllerEvictor) from it.
func Current(b Backend) Backend {
	if c, ok := b.(interface{ Current() Backend }); ok {
		return c.Current()
	}
	return b
}
