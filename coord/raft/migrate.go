package raft

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tripodmq/tripod/coord"
)

var _ coord.Migrator = (*Backend)(nil)

// The migration record (coord.Migrator) is part of the state machine,
// with the epoch bases it brings (fsmData.Migration, "migration" in
// snapshots): a set_migration entry replaces it, compared with the
// stored one at apply, and the state machine refuses the writes a
// refusing record forbids when it applies them, so a write either comes
// before the record in the log (and Export sees it) or fails. Import is
// an import_begin entry, import_chunk entries and an import_end entry,
// applied through the leader as every write.
const (
	// cmdSetMigration replaces the record if the stored one is the
	// command's Prev.
	cmdSetMigration cmdType = "set_migration"
	// cmdImportBegin writes the record of an import in phase Importing,
	// on a backend that holds nothing an import would overwrite, or whose
	// record is the same import's in phase Importing: then it drops what
	// that import wrote.
	cmdImportBegin cmdType = "import_begin"
	// cmdImportChunk writes part of an imported snapshot.
	cmdImportChunk cmdType = "import_chunk"
	// cmdImportEnd sets the producer id counter and key of an import and
	// its record in phase Imported.
	cmdImportEnd cmdType = "import_end"
)

// migrationCommand holds the fields of the migration commands.
type migrationCommand struct {
	// Record is the record that set_migration, import_begin and
	// import_end write.
	Record *coord.Migration `json:"record,omitempty"`
	// Prev is the stored record set_migration expects (nil: none).
	Prev *migrationKey `json:"prev,omitempty"`
	// ID is the migration an import_chunk belongs to.
	ID string `json:"id,omitempty"`
	// Ops create topics and partition states (import_chunk).
	Ops []wireOp `json:"ops,omitempty"`
	// Users, ACLs, Brokers and Quotas are security and config entries
	// (import_chunk): Quotas by entity path (coord.QuotaEntity.String).
	Users   map[string][]coord.ScramCredential `json:"users,omitempty"`
	ACLs    []coord.ACL                        `json:"acls,omitempty"`
	Brokers map[string]map[string]string       `json:"brokers,omitempty"`
	Quotas  map[string]map[string]string       `json:"quotas,omitempty"`
	// NextProducerID and ProducerIDKey are the imported producer id
	// counter and key (import_end).
	NextProducerID int64  `json:"next_producer_id,omitempty"`
	ProducerIDKey  []byte `json:"producer_id_key,omitempty"`
}

// migrationKey names a stored record for set_migration's compare.
type migrationKey struct {
	ID    string               `json:"id"`
	Phase coord.MigrationPhase `json:"phase"`
}

// migrationData is the record and the epoch bases in the state machine
// and its snapshots. Apply replaces Record rather than changing it
// inside, so that Snapshot's shallow copy of fsmData stays a
// point-in-time copy.
type migrationData struct {
	// Record is the migration record, nil while there is none; Version
	// is the index of the entry that last wrote it.
	Record  *coord.Migration `json:"record,omitempty"`
	Version uint64           `json:"version,omitempty"`
	// Bases are what this backend adds to the epochs and versions it
	// reports: the highest Bases of every record it stored, so they never
	// go down, not even when a later record (this backend a migration's
	// source) has none. BasesVersion is the index of the entry that last
	// raised them.
	Bases        epochBases `json:"bases,omitzero"`
	BasesVersion uint64     `json:"bases_version,omitempty"`
}

// epochBases are coord.EpochBases as the state machine applies them: the
// epochs and versions it stores are its own (log indexes, Raft terms,
// partition epochs from 0); what it reports is raised by the bases, and
// what it is given back is lowered by them.
type epochBases coord.EpochBases

// broker returns a stored broker epoch as reported.
func (e epochBases) broker(epoch int64) int64 { return epoch + e.Broker }

// replaced returns a stored broker epoch that a registration replaced as
// reported: 0 stays 0 (nothing replaced).
func (e epochBases) replaced(epoch int64) int64 {
	if epoch == 0 {
		return 0
	}
	return e.broker(epoch)
}

// rawBroker returns a reported broker epoch as stored: 0 for one at or
// below the base (an epoch of the backend the cluster migrated from, or
// 0), which names no registration here.
func (e epochBases) rawBroker(epoch int64) int64 { return max(epoch-e.Broker, 0) }

// controller returns a stored controller epoch as reported.
func (e epochBases) controller(epoch int64) int64 { return epoch + e.Controller }

// partition returns a stored partition epoch as reported.
func (e epochBases) partition(epoch int32) int32 { return epoch + e.Partition }

// version returns a log index (a stored Version) as reported.
func (e epochBases) version(index uint64) int64 { return int64(index) + e.Version }

// migrationVersion returns the log index of SetMigration's record as
// reported: raised by the greater of the version and broker bases, so
// that it is above every broker epoch and Version reported before.
func (e epochBases) migrationVersion(index uint64) int64 {
	return int64(index) + max(e.Version, e.Broker)
}

// raise returns e with each base raised to o's where o's is greater.
func (e epochBases) raise(o coord.EpochBases) epochBases {
	return epochBases{Broker: max(e.Broker, o.Broker), Controller: max(e.Controller, o.Controller),
		Partition: max(e.Partition, o.Partition), Version: max(e.Version, o.Version)}
}

// refusal returns ErrMigrated for cmd, a write the record refuses, when
// the stored record's phase refuses writes; f.mu is held.
func (f *fsm) refusal(cmd *command) error {
	rec := f.data.Migration.Record
	if rec == nil || !rec.Phase.Refuses() {
		return nil
	}
	return fmt.Errorf("%w: %s refused: migration %s is %s", coord.ErrMigrated, cmd.Type, rec.ID, rec.Phase)
}

// setRecordLocked stores rec as the record written at index and raises
// the bases by its Bases; f.mu is held.
func (f *fsm) setRecordLocked(index uint64, rec coord.Migration) {
	d := &f.data.Migration
	rec.Target = maps.Clone(rec.Target)
	d.Record, d.Version = &rec, index
	if bases := d.Bases.raise(rec.Bases); bases != d.Bases {
		d.Bases, d.BasesVersion = bases, index
	}
}

// holdingLocked names what the state machine holds that an import would
// overwrite, "" when it holds none of it; f.mu is held.
func (f *fsm) holdingLocked() string {
	d := &f.data
	switch {
	case len(d.Topics) > 0:
		return fmt.Sprintf("%d topics", len(d.Topics))
	case len(d.Security.Users) > 0:
		return fmt.Sprintf("scram credentials of %d users", len(d.Security.Users))
	case len(d.Security.ACLs) > 0:
		return fmt.Sprintf("%d acls", len(d.Security.ACLs))
	case len(d.Configs.Brokers) > 0:
		return fmt.Sprintf("dynamic configs of %d broker entities", len(d.Configs.Brokers))
	case len(d.Configs.Quotas) > 0:
		return fmt.Sprintf("client quotas of %d entities", len(d.Configs.Quotas))
	}
	return ""
}

// importingLocked fails unless the stored record is migration id's in
// phase Importing: an import entry of a migration that was replaced, or
// that ended, changes nothing. f.mu is held.
func (f *fsm) importingLocked(id string) error {
	rec := f.data.Migration.Record
	if rec == nil || rec.ID != id || rec.Phase != coord.MigrationImporting {
		return fmt.Errorf("%w: import of migration %s: the migration record is %s", coord.ErrVersionMismatch, id, describeRecord(rec))
	}
	return nil
}

// describeRecord names rec (nil: none) in errors.
func describeRecord(rec *coord.Migration) string {
	if rec == nil {
		return coord.DescribeRecord(coord.Migration{}, false)
	}
	return coord.DescribeRecord(*rec, true)
}

// applyMigrationLocked applies a migration command at index; f.mu is
// held. It validates what it writes again (a forwarded entry comes from
// another node), so the outcome depends on the log alone.
func (f *fsm) applyMigrationLocked(index uint64, cmd *command) applyResult {
	mc := cmd.Migration
	if mc == nil || (mc.Record == nil && cmd.Type != cmdImportChunk) {
		return applyResult{Err: fmt.Errorf("raft log entry %d: %s command without its fields", index, cmd.Type)}
	}
	d := &f.data
	stored := d.Migration.Record
	switch cmd.Type {
	case cmdSetMigration:
		var want *migrationKey
		if stored != nil {
			want = &migrationKey{ID: stored.ID, Phase: stored.Phase}
		}
		if (want == nil) != (mc.Prev == nil) || (want != nil && *want != *mc.Prev) {
			return applyResult{Err: fmt.Errorf("%w: migration record is %s, want %s", coord.ErrVersionMismatch, describeRecord(stored), describeKey(mc.Prev))}
		}
		f.setRecordLocked(index, *mc.Record)
	case cmdImportBegin:
		retry := stored != nil && stored.ID == mc.Record.ID && stored.Phase == coord.MigrationImporting
		if stored != nil && !retry {
			return applyResult{Err: fmt.Errorf("%w: import of migration %s: the backend holds the record of %s", coord.ErrExists, mc.Record.ID, describeRecord(stored))}
		}
		if held := f.holdingLocked(); held != "" && !retry {
			return applyResult{Err: fmt.Errorf("%w: import of migration %s: the backend holds %s", coord.ErrExists, mc.Record.ID, held)}
		}
		if retry {
			// Everything of the kinds an import writes was written by
			// the import that stopped midway: the record refused every
			// other writer since.
			d.Topics, d.MetaVersion = map[string]*topicState{}, index
			d.Security = securityData{Version: index}
			d.Configs = configsData{Version: index}
		}
		rec := *mc.Record
		rec.Phase = coord.MigrationImporting
		f.setRecordLocked(index, rec)
	case cmdImportChunk:
		if err := f.importingLocked(mc.ID); err != nil {
			return applyResult{Err: err}
		}
		return f.applyImportChunkLocked(index, mc)
	case cmdImportEnd:
		if err := f.importingLocked(mc.Record.ID); err != nil {
			return applyResult{Err: err}
		}
		if len(mc.ProducerIDKey) > 0 {
			if err := coord.CheckProducerIDKey(fmt.Sprintf("raft log entry %d", index), mc.ProducerIDKey); err != nil {
				return applyResult{Err: err}
			}
			d.ProducerIDKey = slices.Clone(mc.ProducerIDKey)
		}
		d.NextProducerID = max(d.NextProducerID, mc.NextProducerID)
		rec := *mc.Record
		rec.Phase = coord.MigrationImported
		f.setRecordLocked(index, rec)
	default:
		return applyResult{Err: fmt.Errorf("raft log entry %d: %q is not a migration command", index, cmd.Type)}
	}
	return applyResult{}
}

// describeKey names a set_migration's Prev in errors.
func describeKey(k *migrationKey) string {
	if k == nil {
		return "absent"
	}
	return fmt.Sprintf("migration %s in phase %s", k.ID, k.Phase)
}

// applyImportChunkLocked writes an import_chunk at index, all or
// nothing; f.mu is held.
func (f *fsm) applyImportChunkLocked(index uint64, mc *migrationCommand) applyResult {
	d := &f.data
	for user, creds := range mc.Users {
		for _, c := range creds {
			if err := validateScram(user, c); err != nil {
				return applyResult{Err: err}
			}
		}
	}
	if err := coord.ValidateACLs(mc.ACLs); err != nil {
		return applyResult{Err: err}
	}
	for entity, configs := range mc.Brokers {
		if err := coord.ValidateConfigAlterations(entity, setAlterations(configs)); err != nil {
			return applyResult{Err: err}
		}
	}
	for p, quotas := range mc.Quotas {
		entity, err := coord.ParseQuotaEntity(p)
		if err == nil {
			err = coord.ValidateQuotaAlterations(entity, setAlterations(quotas))
		}
		if err != nil {
			return applyResult{Err: err}
		}
	}
	var view *chunkView
	if len(mc.Ops) > 0 {
		var err error
		if view, err = applyOps(d.Topics, mc.Ops, d.Migration.Bases.Partition); err != nil {
			return applyResult{Err: err}
		}
	}
	// Nothing fails from here on.
	if view != nil {
		view.merge()
		d.MetaVersion = index
	}
	if len(mc.Users) > 0 {
		users := maps.Clone(d.Security.Users)
		if users == nil {
			users = map[string][]coord.ScramCredential{}
		}
		for user, creds := range mc.Users {
			for _, c := range creds {
				users[user] = coord.SetCredential(users[user], c)
			}
		}
		d.Security.Users, d.Security.Version = users, index
	}
	if len(mc.ACLs) > 0 {
		d.Security.ACLs = coord.SortACLs(append(slices.Clone(d.Security.ACLs), mc.ACLs...))
		d.Security.Version = index
	}
	if len(mc.Brokers) > 0 {
		d.Configs.Brokers = mergeEntities(d.Configs.Brokers, mc.Brokers)
		d.Configs.Version = index
	}
	if len(mc.Quotas) > 0 {
		d.Configs.Quotas = mergeEntities(d.Configs.Quotas, mc.Quotas)
		d.Configs.Version = index
	}
	return applyResult{}
}

// setAlterations returns configs as SET alterations, to validate them as
// AlterBrokerConfigs and AlterClientQuotas would.
func setAlterations(configs map[string]string) []coord.ConfigAlteration {
	out := make([]coord.ConfigAlteration, 0, len(configs))
	for k, v := range configs {
		out = append(out, coord.ConfigAlteration{Op: coord.ConfigSet, Key: k, Value: v})
	}
	return out
}

// mergeEntities returns stored with added's entities set (an entity
// without configs is not kept); stored is not changed.
func mergeEntities(stored, added map[string]map[string]string) map[string]map[string]string {
	out := maps.Clone(stored)
	if out == nil {
		out = map[string]map[string]string{}
	}
	for entity, configs := range added {
		if len(configs) > 0 {
			out[entity] = maps.Clone(configs)
		}
	}
	return out
}

// migration returns the stored record, ok false while there is none, and
// the index of the entry that last wrote it.
func (f *fsm) migration() (coord.MigrationRecord, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.data.Migration
	if d.Record == nil {
		return coord.MigrationRecord{}, d.Version
	}
	rec := *d.Record
	rec.Target = maps.Clone(rec.Target)
	return coord.MigrationRecord{Migration: rec, OK: true}, d.Version
}

// migrationVersion returns the index of the entry that last wrote the
// record.
func (f *fsm) migrationVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.data.Migration.Version
}

// nextProducerID returns the first producer id not yet reserved.
func (f *fsm) nextProducerID() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.data.NextProducerID
}

// Migration implements coord.Migrator. It is linearizable, as Load.
func (b *Backend) Migration(ctx context.Context) (coord.Migration, bool, error) {
	if err := b.readable(ctx, "migration record"); err != nil {
		return coord.Migration{}, false, err
	}
	rec, _ := b.fsm.migration()
	return rec.Migration, rec.OK, nil
}

// SetMigration implements coord.Migrator: one set_migration entry, which
// the state machine compares with the stored record when it applies it.
// Every write the record refuses is an entry too, refused at apply when
// it comes after a refusing record in the log. m.Updated is set to now.
// The version is the entry's log index raised by the bases.
func (b *Backend) SetMigration(ctx context.Context, prev *coord.Migration, m coord.Migration) (int64, error) {
	var key *migrationKey
	if prev != nil {
		key = &migrationKey{ID: prev.ID, Phase: prev.Phase}
	}
	m.Updated = time.Now().UTC()
	what := fmt.Sprintf("set migration record %s to phase %s", m.ID, m.Phase)
	res, err := b.apply(ctx, what, &command{Type: cmdSetMigration, Migration: &migrationCommand{Record: &m, Prev: key}})
	if err != nil {
		return 0, err
	}
	return res.Bases.migrationVersion(res.Index), nil
}

// NextProducerID implements coord.Migrator. It is linearizable, as Load.
func (b *Backend) NextProducerID(ctx context.Context) (int64, error) {
	if err := b.readable(ctx, "next producer id"); err != nil {
		return 0, err
	}
	return b.fsm.nextProducerID(), nil
}

// WatchMigration implements coord.Migrator.
func (b *Backend) WatchMigration(ctx context.Context) (<-chan coord.MigrationRecord, error) {
	return watch(ctx, b, "watch migration record", b.fsm.migrationVersion, b.fsm.migration,
		func(x, y coord.MigrationRecord) bool { return false })
}

// Import implements coord.Migrator: an import_begin entry (the record in
// phase Importing), import_chunk entries of at most importEntryBytes
// each, and an import_end entry (the producer id counter and key, the
// record in phase Imported), applied through the leader one after the
// other. m.Bases, when zero, are snap.Bases.
func (b *Backend) Import(ctx context.Context, snap *coord.Snapshot, m coord.Migration) error {
	return b.importSnapshot(ctx, snap, m, true)
}

// PreCopy implements coord.Migrator: Import without its import_end, so
// the record stays in phase Importing.
func (b *Backend) PreCopy(ctx context.Context, snap *coord.Snapshot, m coord.Migration) error {
	return b.importSnapshot(ctx, snap, m, false)
}

// ImportChanges implements coord.Migrator. The state machine has no
// command that deletes what an import wrote, so ImportChanges writes
// snap whole again, as an Import retried: import_begin drops what the
// pre-copy wrote, in the same log entry. That costs one pass over the
// log with the quorum formed and its leader known, which the pre-copy
// waited for; base only says what PreCopy wrote.
func (b *Backend) ImportChanges(ctx context.Context, base, snap *coord.Snapshot, m coord.Migration) error {
	if base == nil {
		return fmt.Errorf("import the changes of migration %s: no base snapshot", m.ID)
	}
	stored, ok, err := b.Migration(ctx)
	if err != nil {
		return err
	}
	if !ok || stored.ID != m.ID || stored.Phase != coord.MigrationImporting {
		return fmt.Errorf("%w: import the changes of migration %s: the backend holds the record of %s", coord.ErrExists, m.ID, coord.DescribeRecord(stored, ok))
	}
	m.Bases = snap.Bases
	return b.importSnapshot(ctx, snap, m, true)
}

// importSnapshot is Import, ending with import_end when final.
func (b *Backend) importSnapshot(ctx context.Context, snap *coord.Snapshot, m coord.Migration, final bool) error {
	if m.ID == "" {
		return fmt.Errorf("import: migration record without an id")
	}
	if m.Bases == (coord.EpochBases{}) {
		m.Bases = snap.Bases
	} else if m.Bases != snap.Bases {
		return fmt.Errorf("import of migration %s: record bases %+v differ from the snapshot's %+v", m.ID, m.Bases, snap.Bases)
	}
	chunks, err := importChunks(snap, m.ID)
	if err != nil {
		return fmt.Errorf("import of migration %s: %w", m.ID, err)
	}
	if key := snap.ProducerIDKey; len(key) > 0 {
		if err := coord.CheckProducerIDKey("the imported snapshot", key); err != nil {
			return err
		}
	}
	begin := m
	begin.Phase, begin.Updated = coord.MigrationImporting, time.Now().UTC()
	what := fmt.Sprintf("import of migration %s", m.ID)
	if _, err := b.apply(ctx, what+": begin", &command{Type: cmdImportBegin, Migration: &migrationCommand{Record: &begin}}); err != nil {
		return err
	}
	for i, chunk := range chunks {
		if _, err := b.apply(ctx, fmt.Sprintf("%s: chunk %d/%d", what, i+1, len(chunks)), &command{Type: cmdImportChunk, Migration: chunk}); err != nil {
			return err
		}
	}
	if !final {
		return nil
	}
	end := m
	end.Phase, end.Updated = coord.MigrationImported, time.Now().UTC()
	_, err = b.apply(ctx, what+": end", &command{Type: cmdImportEnd, Migration: &migrationCommand{Record: &end,
		NextProducerID: snap.NextProducerID, ProducerIDKey: snap.ProducerIDKey}})
	return err
}

// importEntryBytes is how large an import_chunk's fields grow at most
// (one item larger than it, a topic's definition, is an entry of its
// own), well under the ~1 MB a log entry should stay below.
const importEntryBytes = 512 << 10

// maxImportItem is the largest item an import writes: what a forward
// request carries, with room to spare.
const maxImportItem = maxFrame / 4

// importItem is one thing an import writes (a topic, partition states,
// a user's credentials, an ACL, an entity's configs) with its encoded
// size.
type importItem struct {
	size int
	add  func(*migrationCommand)
}

// importChunks splits snap into import_chunk commands of migration id,
// in order: the topics and their partition states, the SCRAM
// credentials, the ACLs, the broker configs and the client quotas. It
// fails with ErrTooLarge for an item no entry can carry, and for a
// snapshot that does not hold together (a partition state of no topic),
// before anything is written.
func importChunks(snap *coord.Snapshot, id string) ([]*migrationCommand, error) {
	var items []importItem
	addItem := func(what string, v any, add func(*migrationCommand)) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", what, err)
		}
		if len(data) > maxImportItem {
			return fmt.Errorf("%w: %s is %d bytes encoded, over %d", coord.ErrTooLarge, what, len(data), maxImportItem)
		}
		items = append(items, importItem{size: len(data), add: add})
		return nil
	}
	md := snap.Metadata
	if md == nil {
		md = coord.NewMetadata()
	}
	for tp := range md.Partitions {
		if t, ok := md.Topics[tp.Topic]; !ok || tp.Partition < 0 || int(tp.Partition) >= t.Partitions() {
			return nil, fmt.Errorf("partition state %s: no such partition in the snapshot's topics", tp)
		}
	}
	for _, name := range md.TopicNames() {
		for _, op := range topicOps(md.Topics[name], md) {
			if err := addItem("topic "+name, op, func(c *migrationCommand) { c.Ops = append(c.Ops, op) }); err != nil {
				return nil, err
			}
		}
	}
	sec := snap.Security
	if sec == nil {
		sec = coord.NewSecurityState()
	}
	for _, user := range slices.Sorted(maps.Keys(sec.Users)) {
		creds := sec.Users[user]
		err := addItem(fmt.Sprintf("scram credentials of user %q", user), creds, func(c *migrationCommand) {
			if c.Users == nil {
				c.Users = map[string][]coord.ScramCredential{}
			}
			c.Users[user] = creds
		})
		if err != nil {
			return nil, err
		}
	}
	for _, acl := range sec.ACLs {
		if err := addItem("acl "+acl.String(), acl, func(c *migrationCommand) { c.ACLs = append(c.ACLs, acl) }); err != nil {
			return nil, err
		}
	}
	cfgs := snap.Configs
	if cfgs == nil {
		cfgs = coord.NewConfigState()
	}
	for _, entity := range slices.Sorted(maps.Keys(cfgs.Brokers)) {
		configs := cfgs.Brokers[entity]
		err := addItem("dynamic configs of broker entity "+entity, configs, func(c *migrationCommand) {
			if c.Brokers == nil {
				c.Brokers = map[string]map[string]string{}
			}
			c.Brokers[entity] = configs
		})
		if err != nil {
			return nil, err
		}
	}
	quotaPaths := make(map[string]map[string]string, len(cfgs.Quotas))
	for entity, quotas := range cfgs.Quotas {
		quotaPaths[entity.String()] = quotas
	}
	for _, path := range slices.Sorted(maps.Keys(quotaPaths)) {
		quotas := quotaPaths[path]
		err := addItem("client quotas of "+path, quotas, func(c *migrationCommand) {
			if c.Quotas == nil {
				c.Quotas = map[string]map[string]string{}
			}
			c.Quotas[path] = quotas
		})
		if err != nil {
			return nil, err
		}
	}

	var chunks []*migrationCommand
	cur, size := &migrationCommand{ID: id}, 0
	for _, it := range items {
		if size > 0 && size+it.size > importEntryBytes {
			chunks = append(chunks, cur)
			cur, size = &migrationCommand{ID: id}, 0
		}
		it.add(cur)
		size += it.size
	}
	if size > 0 {
		chunks = append(chunks, cur)
	}
	return chunks, nil
}

// topicOps returns the ops that create topic t and its partition states
// of md, each state as given but its partition epoch (this backend's
// own, from 0): a CreateTopic, split as a Commit splits one, or, when md
// lacks a state of t, a CreateTopic without states and a SetPartition
// for each state md has.
func topicOps(t coord.Topic, md *coord.Metadata) []wireOp {
	states := make([]coord.PartitionState, 0, t.Partitions())
	for p := range t.Partitions() {
		st, ok := md.Partitions[coord.TopicPartition{Topic: t.Name, Partition: int32(p)}]
		if !ok {
			break
		}
		st.PartitionEpoch = 0
		states = append(states, st)
	}
	if len(states) == t.Partitions() {
		return splitOp(wireOp{CreateTopic: &coord.CreateTopic{Topic: t, States: states}})
	}
	ops := []wireOp{{CreateTopic: &coord.CreateTopic{Topic: t}, Partial: true}}
	for p := range t.Partitions() {
		st, ok := md.Partitions[coord.TopicPartition{Topic: t.Name, Partition: int32(p)}]
		if !ok {
			continue
		}
		st.PartitionEpoch = 0
		ops = append(ops, wireOp{SetPartition: &coord.SetPartition{State: st, ExpectedEpoch: coord.NewPartition}})
	}
	return ops
}
