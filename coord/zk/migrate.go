package zk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
	bounded "github.com/tripodmq/tripod/internal/parallel"
)

// The migration record (coord.Migrator) is the JSON of coord.Migration in
// /tripod_migration, empty while the backend has none. Every write the
// record refuses (Commit, AllocateProducerIDs, ProducerIDKey's store, the
// security and config stores' writes) puts a check of the record's
// version in its multi (guard): a write that raced SetMigration either
// landed before it or fails, and is tried again after the record is read
// again, unless the record now refuses it (coord.ErrMigrated). That is
// why the znode always exists (ensureBase creates it): a check of a
// missing znode fails every multi.
//
// Its bases (coord.EpochBases) are read once, when the backend first
// reaches ZooKeeper (ensureBase), and then followed by a watch
// (followRecord), never read per call: the epochs and versions the backend
// reports are its own plus them (raiseMetadata, readMembers,
// readController, Register, tryElect, and the security and config
// states' Versions), and those it is given back are taken back minus them
// (Register's Replaces, buildUnits' ExpectedEpoch; EvictController
// compares raised epochs).

// migrationPath is the record's znode under the chroot.
func (b *Backend) migrationPath() string { return b.path("/tripod_migration") }

// recordState is what the backend last read of its record.
type recordState struct {
	m  coord.Migration
	ok bool // a record is stored
	// version is the znode's version, which the refused writes check;
	// mzxid orders what was read.
	version int32
	mzxid   int64
}

func (r *recordState) refuses() bool { return r != nil && r.ok && r.m.Phase.Refuses() }

// record returns the last record read, nil before the first read.
func (b *Backend) record() *recordState { return b.rec.Load() }

// bases returns the EpochBases of the record last read.
func (b *Backend) bases() coord.EpochBases {
	if r := b.rec.Load(); r != nil && r.ok {
		return r.m.Bases
	}
	return coord.EpochBases{}
}

// noteRecord keeps r as the record read unless a later one was read.
func (b *Backend) noteRecord(r *recordState) {
	for {
		old := b.rec.Load()
		if old != nil && old.mzxid > r.mzxid {
			return
		}
		if b.rec.CompareAndSwap(old, r) {
			return
		}
	}
}

// decodeRecord reads the record znode's data; empty data is no record.
func decodeRecord(p string, data []byte, stat *zk.Stat) (*recordState, error) {
	r := &recordState{version: stat.Version, mzxid: stat.Mzxid}
	if len(data) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(data, &r.m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", p, err)
	}
	r.ok = true
	return r, nil
}

// readRecord reads the record, creating its znode empty when it is
// missing, and notes it.
func (b *Backend) readRecord(c *zk.Conn) (*recordState, error) {
	p := b.migrationPath()
	for {
		data, stat, err := c.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			if _, err := c.Create(p, nil, 0, b.aclFor(p)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		r, err := decodeRecord(p, data, stat)
		if err != nil {
			return nil, err
		}
		b.noteRecord(r)
		return r, nil
	}
}

// migrated is the error of a write the record refuses.
func (b *Backend) migrated(what string, r *recordState) error {
	return fmt.Errorf("%w: %s: migration %s is %s (%s)", coord.ErrMigrated, what, r.m.ID, r.m.Phase, b.migrationPath())
}

// refusing fails with ErrMigrated when the record last read refuses
// writes: a refused write's first step, before it creates anything.
func (b *Backend) refusing(what string) error {
	if r := b.record(); r.refuses() {
		return b.migrated(what, r)
	}
	return nil
}

// guard returns the check of the record's version that a refused write
// puts first in its multi, or ErrMigrated when the record last read
// refuses the write. A record not read yet is read on c.
func (b *Backend) guard(c *zk.Conn, what string) (*zk.CheckVersionRequest, error) {
	r := b.record()
	if r == nil {
		var err error
		if r, err = b.readRecord(c); err != nil {
			return nil, err
		}
	}
	if r.refuses() {
		return nil, b.migrated(what, r)
	}
	return &zk.CheckVersionRequest{Path: b.migrationPath(), Version: r.version}, nil
}

// guardedMulti runs ops in one multi behind the record's guard; when the
// guard fails (the record changed, or its znode went), it reads the
// record again and tries again, unless the record now refuses the write.
// Its responses are ops' own.
func (b *Backend) guardedMulti(c *zk.Conn, what string, ops ...any) ([]zk.MultiResponse, error) {
	for {
		g, err := b.guard(c, what)
		if err != nil {
			return nil, err
		}
		res, err := c.Multi(append([]any{g}, ops...)...)
		if err != nil && len(res) > 0 && res[0].Error != nil {
			if _, err := b.readRecord(c); err != nil {
				return nil, err
			}
			continue
		}
		if len(res) > 0 {
			res = res[1:]
		}
		return res, err
	}
}

// Migration implements coord.Migrator. It reads the record from ZooKeeper.
func (b *Backend) Migration(ctx context.Context) (coord.Migration, bool, error) {
	if err := b.ensureBase(ctx); err != nil {
		return coord.Migration{}, false, err
	}
	var r *recordState
	err := b.do(ctx, b.migrationPath(), func(c *zk.Conn) error {
		var err error
		r, err = b.readRecord(c)
		return err
	})
	if err != nil {
		return coord.Migration{}, false, convertError(err, "read migration record "+b.migrationPath())
	}
	return r.m, r.ok, nil
}

// SetMigration implements coord.Migrator: a compare-and-set of the record
// znode's version, after comparing the stored record with prev. Every
// refused write checks that version in its own multi, so none lands
// after a refusing record. The record keeps the greater of each of its
// stored Bases and m's: a target that later becomes the source of another
// migration (whose record carries no Bases) goes on reporting its epochs
// raised, and none goes backwards. The version returned is the write's
// zxid raised by the greater of the Broker and Version bases, so that it
// is above every broker epoch and Version the backend reported.
func (b *Backend) SetMigration(ctx context.Context, prev *coord.Migration, m coord.Migration) (int64, error) {
	if m.ID == "" || m.Phase == "" {
		return 0, fmt.Errorf("set migration record: id %q, phase %q: want both", m.ID, m.Phase)
	}
	if err := b.ensureBase(ctx); err != nil {
		return 0, err
	}
	written, err := b.setMigration(ctx, prev, m)
	if err != nil {
		return 0, err
	}
	return written.mzxid + max(written.m.Bases.Version, written.m.Bases.Broker), nil
}

// setMigration is SetMigration, returning the record as written. A
// record without an Updated time gets the time of the call.
func (b *Backend) setMigration(ctx context.Context, prev *coord.Migration, m coord.Migration) (*recordState, error) {
	if m.Updated.IsZero() {
		m.Updated = time.Now().UTC()
	}
	p := b.migrationPath()
	var written *recordState
	err := b.do(ctx, p, func(c *zk.Conn) error {
		var err error
		written, err = b.setRecord(c, prev, m)
		return err
	})
	if err != nil {
		return nil, convertError(err, "set migration record "+p)
	}
	return written, nil
}

// setRecord is SetMigration on c. A write whose answer was lost, tried
// again, finds the record it wrote and succeeds.
func (b *Backend) setRecord(c *zk.Conn, prev *coord.Migration, m coord.Migration) (*recordState, error) {
	p := b.migrationPath()
	for {
		stored, err := b.readRecord(c)
		if err != nil {
			return nil, err
		}
		next := m
		if stored.ok {
			next.Bases = maxBases(stored.m.Bases, m.Bases)
		}
		data, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", p, err)
		}
		if stored.ok {
			if old, _ := json.Marshal(stored.m); bytes.Equal(old, data) {
				return stored, nil
			}
		}
		switch {
		case prev == nil && stored.ok:
			return nil, fmt.Errorf("%w: migration record %s: want none, stored %s in phase %s", coord.ErrVersionMismatch, p, stored.m.ID, stored.m.Phase)
		case prev != nil && !stored.ok:
			return nil, fmt.Errorf("%w: migration record %s: want %s in phase %s, none stored", coord.ErrVersionMismatch, p, prev.ID, prev.Phase)
		case prev != nil && (stored.m.ID != prev.ID || stored.m.Phase != prev.Phase):
			return nil, fmt.Errorf("%w: migration record %s: want %s in phase %s, stored %s in phase %s",
				coord.ErrVersionMismatch, p, prev.ID, prev.Phase, stored.m.ID, stored.m.Phase)
		}
		stat, err := c.Set(p, data, stored.version)
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			continue // changed since the read: compare again
		}
		if err != nil {
			return nil, err
		}
		r := &recordState{m: next, ok: true, version: stat.Version, mzxid: stat.Mzxid}
		b.noteRecord(r)
		return r, nil
	}
}

// maxBases returns the greater of a's and b's bases, each.
func maxBases(a, b coord.EpochBases) coord.EpochBases {
	return coord.EpochBases{Broker: max(a.Broker, b.Broker), Controller: max(a.Controller, b.Controller),
		Partition: max(a.Partition, b.Partition), Version: max(a.Version, b.Version)}
}

// NextProducerID implements coord.Migrator: the block after the one
// /latest_producer_id_block holds, 0 when none was reserved.
func (b *Backend) NextProducerID(ctx context.Context) (int64, error) {
	if err := b.ensureBase(ctx); err != nil {
		return 0, err
	}
	p := b.producerIDBlockPath()
	var next int64
	err := b.do(ctx, p, func(c *zk.Conn) error {
		var err error
		next, _, err = b.readNextProducerID(c)
		return err
	})
	if err != nil {
		return 0, convertError(err, "read next producer id at "+p)
	}
	return next, nil
}

// readNextProducerID returns where the next producer id block starts, and
// the block znode's version (-1 when it does not exist).
func (b *Backend) readNextProducerID(c *zk.Conn) (int64, int32, error) {
	p := b.producerIDBlockPath()
	data, stat, err := c.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, -1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	end, err := decodeProducerIDBlock(p, data)
	if err != nil {
		return 0, 0, err
	}
	return end + 1, stat.Version, nil
}

// WatchMigration implements coord.Migrator, with a watch of the record
// znode.
func (b *Backend) WatchMigration(ctx context.Context) (<-chan coord.MigrationRecord, error) {
	w := &recordWatcher{b: b, out: make(chan coord.MigrationRecord, 1)}
	if err := b.startWatch(ctx, "watch "+b.migrationPath(), w); err != nil {
		return nil, err
	}
	return w.out, nil
}

// followRecord keeps the backend's copy of its record (and so its bases)
// up to date until the backend closes. It runs from Open on.
func (b *Backend) followRecord() {
	zs := b.current()
	if zs == nil {
		return
	}
	// An ended subscriber makes runWatch subscribe to the current session
	// and read the record first.
	sub := &subscriber{notify: make(chan struct{}, 1), ended: true}
	b.runWatch(context.Background(), "follow "+b.migrationPath(), zs, sub, &recordWatcher{b: b})
}

// recordWatcher follows the record znode: it notes every record read in
// the backend and, with out set, sends it there.
type recordWatcher struct {
	b       *Backend
	out     chan coord.MigrationRecord // nil: only note
	stale   bool
	current *recordState
	last    *recordState
}

func (w *recordWatcher) reset() { w.stale = true }

func (w *recordWatcher) note(ev zk.Event) {
	if ev.Path == w.b.migrationPath() {
		w.stale = true
	}
}

func (w *recordWatcher) dirty() bool { return w.stale }

func (w *recordWatcher) refresh(c *zk.Conn) error {
	p := w.b.migrationPath()
	data, stat, _, err := c.GetW(p)
	if errors.Is(err, zk.ErrNoNode) {
		// Not created yet (the chroot may not be there either): watch for
		// it to appear.
		var exists bool
		exists, _, _, err = c.ExistsW(p)
		if err == nil && exists {
			return w.refresh(c)
		}
		if err == nil {
			w.current, w.stale = &recordState{}, false
		}
		return err
	}
	if err != nil {
		return err
	}
	r, err := decodeRecord(p, data, stat)
	if err != nil {
		return err
	}
	w.b.noteRecord(r)
	w.current, w.stale = r, false
	return nil
}

func (w *recordWatcher) publish() {
	if w.stale || w.out == nil || w.current == nil {
		return
	}
	if w.last != nil && w.last.ok == w.current.ok && w.last.mzxid == w.current.mzxid {
		return
	}
	w.last = w.current
	offer(w.out, coord.MigrationRecord{Migration: w.current.m, OK: w.current.ok})
}

func (w *recordWatcher) close() {
	if w.out != nil {
		close(w.out)
	}
}

// Import implements coord.Migrator. It checks that the backend is empty
// (or holds a record of m.ID in phase Importing, whose Import failed
// midway, or the record of the migration m rolls back in phase Switched:
// then it deletes what that one wrote, or what the source held), writes
// the record in
// phase Importing, then snap in multis of at most maxChunkOps ops and
// maxChunkBytes bytes, each behind a check that the record is still the
// one it wrote, then the record in phase Imported. It writes no change
// notification: no broker follows the backend yet, and tripod's watches
// read the znodes themselves.
func (b *Backend) Import(ctx context.Context, snap *coord.Snapshot, m coord.Migration) error {
	return b.importSnapshot(ctx, snap, m, true)
}

// PreCopy implements coord.Migrator: Import, but the record stays in
// phase Importing.
func (b *Backend) PreCopy(ctx context.Context, snap *coord.Snapshot, m coord.Migration) error {
	return b.importSnapshot(ctx, snap, m, false)
}

// importSnapshot is Import, which ends with the record in phase Imported
// when final, and in phase Importing (a pre-copy) when not.
func (b *Backend) importSnapshot(ctx context.Context, snap *coord.Snapshot, m coord.Migration, final bool) error {
	if m.ID == "" {
		return fmt.Errorf("import: migration record without an id")
	}
	units, err := b.importPlan(ctx, snap)
	if err != nil {
		return err
	}

	// The record, in phase Importing, after checking what the backend holds.
	m.Phase, m.Bases = coord.MigrationImporting, snap.Bases
	p := b.migrationPath()
	stored, ok, err := b.Migration(ctx)
	if err != nil {
		return err
	}
	var prev *coord.Migration
	switch {
	case ok && m.RollsBack != "" && stored.ID == m.RollsBack && stored.Phase == coord.MigrationSwitched:
		// The source of the migration m rolls back: what it holds is
		// replaced by the copy of the target.
		prev = &stored
	case ok && (stored.ID != m.ID || stored.Phase != coord.MigrationImporting):
		return fmt.Errorf("%w: import %s: %s holds migration %s in phase %s", coord.ErrExists, m.ID, p, stored.ID, stored.Phase)
	case ok:
		prev = &stored
	default:
		if err := b.checkEmpty(ctx, m.ID); err != nil {
			return err
		}
	}
	r, err := b.setMigration(ctx, prev, m)
	if err != nil {
		if errors.Is(err, coord.ErrVersionMismatch) {
			return fmt.Errorf("%w: import %s: %w", coord.ErrExists, m.ID, err)
		}
		return err
	}
	check := &zk.CheckVersionRequest{Path: p, Version: r.version}
	if prev != nil {
		if err := b.clearImported(ctx, check); err != nil {
			return err
		}
	}

	if err := b.commitChunks(ctx, check, chunkUnits(units)); err != nil {
		return err
	}
	if !final {
		return nil
	}
	return b.endImport(ctx, check, snap, m)
}

// importPlan checks snap as Import does before writing anything, makes
// the directories an import writes under, and returns the creates that
// store snap.
func (b *Backend) importPlan(ctx context.Context, snap *coord.Snapshot) ([]unit, error) {
	if snap == nil || snap.Metadata == nil || snap.Security == nil || snap.Configs == nil {
		return nil, fmt.Errorf("import: snapshot without metadata, security or config state")
	}
	units, err := b.importUnits(snap)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		for _, op := range u {
			if op.size > maxChunkBytes {
				return nil, fmt.Errorf("%w: import %s: %d bytes in ZooKeeper, over the %d one request may carry", coord.ErrTooLarge, op.what, op.size, maxChunkBytes)
			}
		}
	}
	if snap.NextProducerID < 0 {
		return nil, fmt.Errorf("import: next producer id %d: negative", snap.NextProducerID)
	}
	if len(snap.ProducerIDKey) > 0 {
		if err := coord.CheckProducerIDKey("import", snap.ProducerIDKey); err != nil {
			return nil, err
		}
	}
	if err := b.ensureSecurityBase(ctx); err != nil {
		return nil, err
	}
	if err := b.do(ctx, "import", func(c *zk.Conn) error { return createDirs(c, b, b.quotaDirs()) }); err != nil {
		return nil, convertError(err, "import: create the client quota directories")
	}
	return units, nil
}

// commitChunks applies chunks behind check, in commitWaves.
func (b *Backend) commitChunks(ctx context.Context, check *zk.CheckVersionRequest, chunks [][]zop) error {
	for _, wave := range b.commitWaves(chunks) {
		err := bounded.FirstError(len(wave), commitParallel, func(i int) error {
			n := wave[i]
			err := b.importChunk(ctx, check, chunks[n])
			if err != nil && len(chunks) > 1 {
				return fmt.Errorf("import chunk %d of %d: %w", n+1, len(chunks), err)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// endImport writes the producer id counter and key of snap and then m as
// the record in phase Imported, behind check (m in phase Importing).
func (b *Backend) endImport(ctx context.Context, check *zk.CheckVersionRequest, snap *coord.Snapshot, m coord.Migration) error {
	if err := b.importProducerIDs(ctx, check, snap); err != nil {
		return err
	}
	done := m
	done.Phase = coord.MigrationImported
	if _, err := b.setMigration(ctx, &m, done); err != nil {
		if errors.Is(err, coord.ErrVersionMismatch) {
			return fmt.Errorf("%w: import %s: %w", coord.ErrExists, m.ID, err)
		}
		return err
	}
	return nil
}

// ImportChanges implements coord.Migrator. It writes the record of m
// again in phase Importing with snap's bases (behind the one PreCopy
// wrote), then, behind it, what turns base's znodes into snap's: creates
// of the new, sets of the changed, deletes of the gone (deepest first),
// and ends as Import does.
func (b *Backend) ImportChanges(ctx context.Context, base, snap *coord.Snapshot, m coord.Migration) error {
	if m.ID == "" {
		return fmt.Errorf("import: migration record without an id")
	}
	if base == nil || base.Metadata == nil || base.Security == nil || base.Configs == nil {
		return fmt.Errorf("import the changes of migration %s: base snapshot without metadata, security or config state", m.ID)
	}
	baseUnits, err := b.importUnits(base)
	if err != nil {
		return fmt.Errorf("import the changes of migration %s: its base: %w", m.ID, err)
	}
	units, err := b.importPlan(ctx, snap)
	if err != nil {
		return err
	}
	stored, ok, err := b.Migration(ctx)
	if err != nil {
		return err
	}
	if !ok || stored.ID != m.ID || stored.Phase != coord.MigrationImporting {
		return fmt.Errorf("%w: import the changes of migration %s: %s holds %s", coord.ErrExists, m.ID, b.migrationPath(), coord.DescribeRecord(stored, ok))
	}
	m.Phase, m.Bases = coord.MigrationImporting, snap.Bases
	r, err := b.setMigration(ctx, &stored, m)
	if err != nil {
		if errors.Is(err, coord.ErrVersionMismatch) {
			return fmt.Errorf("%w: import the changes of migration %s: %w", coord.ErrExists, m.ID, err)
		}
		return err
	}
	check := &zk.CheckVersionRequest{Path: b.migrationPath(), Version: r.version}
	if err := b.commitChunks(ctx, check, chunkUnits(changedUnits(baseUnits, units))); err != nil {
		return err
	}
	return b.endImport(ctx, check, snap, m)
}

// changedUnits returns what turns the znodes units from creates into
// those of next: deletes of what next lacks, deepest first, then next's
// creates of what from lacks and sets of what it holds with other data,
// in next's order (parents first).
func changedUnits(from, next []unit) []unit {
	held := map[string][]byte{}
	for _, u := range from {
		for _, op := range u {
			cr := op.req.(*zk.CreateRequest)
			held[cr.Path] = cr.Data
		}
	}
	var changes []unit
	for _, u := range next {
		var cu unit
		for _, op := range u {
			cr := op.req.(*zk.CreateRequest)
			data, ok := held[cr.Path]
			delete(held, cr.Path)
			switch {
			case !ok:
				cu = append(cu, op)
			case !bytes.Equal(data, cr.Data):
				cu = append(cu, setData(cr.Path, cr.Data, -1, op.what, nil, nil))
			}
		}
		if len(cu) > 0 {
			changes = append(changes, cu)
		}
	}
	gone := slices.Collect(maps.Keys(held))
	sort.Slice(gone, func(i, j int) bool {
		di, dj := strings.Count(gone[i], "/"), strings.Count(gone[j], "/")
		return di > dj || di == dj && gone[i] < gone[j]
	})
	deletes := make([]unit, 0, len(gone)+len(changes))
	for _, p := range gone {
		deletes = append(deletes, unit{remove(p, "delete "+p, nil)})
	}
	return append(deletes, changes...)
}

// checkEmpty fails with ErrExists unless the backend holds no topic, SCRAM
// credential, ACL, dynamic broker config or client quota.
func (b *Backend) checkEmpty(ctx context.Context, id string) error {
	var topics []string
	err := b.do(ctx, b.topicsPath(), func(c *zk.Conn) error {
		var err error
		topics, _, err = c.Children(b.topicsPath())
		return err
	})
	if err != nil {
		return convertError(err, "import: list "+b.topicsPath())
	}
	sec, err := b.LoadSecurity(ctx)
	if err != nil {
		return err
	}
	cfgs, err := b.LoadConfigs(ctx)
	if err != nil {
		return err
	}
	if len(topics) > 0 || len(sec.Users) > 0 || len(sec.ACLs) > 0 || len(cfgs.Brokers) > 0 || len(cfgs.Quotas) > 0 {
		return fmt.Errorf("%w: import %s: the backend under %q is not empty (%d topics, %d scram users, %d acls, %d broker config entities, %d quota entities)",
			coord.ErrExists, id, b.path("/"), len(topics), len(sec.Users), len(sec.ACLs), len(cfgs.Brokers), len(cfgs.Quotas))
	}
	return nil
}

// importDirs are the directories whose descendants Import writes.
func (b *Backend) importDirs() []string {
	dirs := []string{b.topicsPath(), b.path("/config/topics"), b.brokerConfigsPath()}
	dirs = append(dirs, b.quotaDirs()...)
	return append(dirs, slices.Sorted(maps.Keys(b.aclDirs()))...)
}

// clearImported deletes what a failed Import wrote: every descendant of
// importDirs (the backend was empty before it, and its record refused
// every other write since), deepest first, in multis behind check.
func (b *Backend) clearImported(ctx context.Context, check *zk.CheckVersionRequest) error {
	var doomed []string
	err := b.do(ctx, "import: list what a failed import wrote", func(c *zk.Conn) error {
		doomed = doomed[:0]
		var walk func(p string) error
		walk = func(p string) error {
			names, _, err := c.Children(p)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, n := range names {
				child := p + "/" + n
				if err := walk(child); err != nil {
					return err
				}
				doomed = append(doomed, child)
			}
			return nil
		}
		for _, dir := range b.importDirs() {
			if err := walk(dir); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return convertError(err, "import: list what a failed import wrote")
	}
	var units []unit
	for _, p := range doomed {
		units = append(units, unit{remove(p, p, nil)})
	}
	for _, chunk := range chunkUnits(units) {
		if err := b.importChunk(ctx, check, chunk); err != nil {
			return fmt.Errorf("import: delete what a failed import wrote: %w", err)
		}
	}
	return nil
}

// importChunk applies one chunk of Import behind check.
func (b *Backend) importChunk(ctx context.Context, check *zk.CheckVersionRequest, chunk []zop) error {
	reqs := make([]any, 0, len(chunk)+1)
	reqs = append(reqs, check)
	for _, op := range chunk {
		reqs = append(reqs, op.req)
	}
	err := b.do(ctx, "import", func(c *zk.Conn) error {
		res, err := c.Multi(reqs...)
		if err != nil {
			return &failedMulti{op: failedOp(res, err), err: err}
		}
		return nil
	})
	failed := -1
	if fm := (*failedMulti)(nil); errors.As(err, &fm) {
		failed = fm.op
	}
	switch {
	case err == nil:
		return nil
	case failed == 0:
		return fmt.Errorf("%w: import: migration record %s changed under the import", coord.ErrExists, b.migrationPath())
	case failed > 0:
		// Not ErrExists, which says the backend was not empty: a create
		// that finds its znode is one whose answer was lost, or one of an
		// Import running beside this one. Import again with the same
		// migration.
		op := chunk[failed-1]
		return fmt.Errorf("import %s: zookeeper %s: %v", op.what, opPath(op.req), err)
	default:
		return convertError(err, "import")
	}
}

// failedOp returns the index of the op of a multi that failed, or -1.
func failedOp(res []zk.MultiResponse, err error) int {
	if err == nil {
		return -1
	}
	for i, r := range res {
		if r.Error != nil {
			return i
		}
	}
	return -1
}

// importUnits translates snap's metadata, security and config states into
// creates, parents before children.
func (b *Backend) importUnits(snap *coord.Snapshot) ([]unit, error) {
	var units []unit
	md := snap.Metadata
	for tp := range md.Partitions {
		if _, ok := md.Topics[tp.Topic]; !ok {
			return nil, fmt.Errorf("import: state of partition %s without its topic", tp)
		}
	}
	for _, name := range md.TopicNames() {
		t := md.Topics[name]
		if err := validTopicName(name); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		what := "topic " + name
		units = append(units, unit{
			b.create(b.topicPath(name), encodeTopic(t), what, nil, nil),
			b.create(b.configPath(name), encodeConfig(t.Config), what+" config", nil, nil),
			b.create(b.partitionsPath(name), nil, what, nil, nil),
		})
		for p := range int32(t.Partitions()) {
			tp := coord.TopicPartition{Topic: name, Partition: p}
			st, ok := md.Partitions[tp]
			if !ok {
				continue
			}
			units = append(units, unit{
				b.create(b.partitionPath(name, p), nil, "partition "+tp.String(), nil, nil),
				b.create(b.statePath(name, p), encodeState(st), "partition "+tp.String(), nil, nil),
			})
		}
	}

	// Config znodes by path: users' SCRAM credentials and quotas share a
	// user's znode; a user's client's quotas need the user's znode and
	// its clients directory.
	configs := map[string]map[string]string{}
	dirs := map[string]bool{}
	for user, creds := range snap.Security.Users {
		if err := coord.ValidateScramUser(user); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		p := b.userPath(user)
		if configs[p] == nil {
			configs[p] = map[string]string{}
		}
		for _, cred := range creds {
			if err := cred.Validate(); err != nil {
				return nil, fmt.Errorf("import: user %q: %w", user, err)
			}
			configs[p][cred.Mechanism] = coord.FormatScramCredential(cred)
		}
	}
	for entity, quotas := range snap.Configs.Quotas {
		if err := entity.Validate(); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		p := b.path("/config/" + entity.String())
		if configs[p] == nil {
			configs[p] = map[string]string{}
		}
		maps.Copy(configs[p], quotas)
		if entity.User != "" && entity.ClientID != "" {
			user := path.Dir(path.Dir(p))
			if configs[user] == nil {
				configs[user] = map[string]string{}
			}
			dirs[user+"/clients"] = true
		}
	}
	for entity, cfg := range snap.Configs.Brokers {
		if err := coord.ValidateBrokerEntity(entity); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		configs[b.brokerConfigPath(entity)] = cfg
	}
	paths := slices.Collect(maps.Keys(configs))
	for dir := range dirs {
		paths = append(paths, dir)
	}
	sort.Slice(paths, func(i, j int) bool {
		di, dj := strings.Count(paths[i], "/"), strings.Count(paths[j], "/")
		return di < dj || di == dj && paths[i] < paths[j]
	})
	for _, p := range paths {
		var data []byte
		if !dirs[p] {
			data = encodeConfig(configs[p])
		}
		units = append(units, unit{b.create(p, data, "config "+p, nil, nil)})
	}

	if err := coord.ValidateACLs(snap.Security.ACLs); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	for _, a := range snap.Security.ACLs {
		if err := validResourceName(a); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	order, byResource := groupByResource(snap.Security.ACLs)
	for _, r := range order {
		p := b.aclPath(r)
		units = append(units, unit{b.create(p, encodeACLs(byResource[r]), "acls "+p, nil, nil)})
	}
	return units, nil
}

// importProducerIDs writes the producer id counter, so that the next block
// starts at snap.NextProducerID (or where the backend's own counter is,
// if above), and the producer id key, behind check.
func (b *Backend) importProducerIDs(ctx context.Context, check *zk.CheckVersionRequest, snap *coord.Snapshot) error {
	blockPath, keyPath := b.producerIDBlockPath(), b.producerIDKeyPath()
	err := b.do(ctx, blockPath, func(c *zk.Conn) error {
		next, version, err := b.readNextProducerID(c)
		if err != nil {
			return err
		}
		reqs := []any{check}
		if snap.NextProducerID > next {
			block := coord.ProducerIDBlock{Broker: coord.NoBroker, First: max(0, snap.NextProducerID-coord.ProducerIDBlockSize), Size: coord.ProducerIDBlockSize}
			block.Size = snap.NextProducerID - block.First
			if version < 0 {
				reqs = append(reqs, &zk.CreateRequest{Path: blockPath, Data: encodeProducerIDBlock(block), Acl: b.aclFor(blockPath)})
			} else {
				reqs = append(reqs, &zk.SetDataRequest{Path: blockPath, Data: encodeProducerIDBlock(block), Version: version})
			}
		}
		if len(snap.ProducerIDKey) > 0 {
			exists, _, err := c.Exists(keyPath)
			if err != nil {
				return err
			}
			if exists {
				reqs = append(reqs, &zk.SetDataRequest{Path: keyPath, Data: snap.ProducerIDKey, Version: -1})
			} else {
				reqs = append(reqs, &zk.CreateRequest{Path: keyPath, Data: snap.ProducerIDKey, Acl: b.aclFor(keyPath)})
			}
		}
		_, err = c.Multi(reqs...)
		return err
	})
	if err != nil {
		return convertError(err, "import the producer id counter and key at "+blockPath+", "+keyPath)
	}
	return nil
}

// raiseMetadata adds bases to what md reports: its Version and every
// partition epoch, and the epoch of a state created now (PartitionBase).
func raiseMetadata(md *coord.Metadata, bases coord.EpochBases) *coord.Metadata {
	if bases == (coord.EpochBases{}) {
		return md
	}
	md.Version += bases.Version
	md.PartitionBase = bases.Partition
	for tp, st := range md.Partitions {
		st.PartitionEpoch += bases.Partition
		md.Partitions[tp] = st
	}
	return md
}
