package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/migration"
	"github.com/tripodmq/tripod/coord/raft"
)

// A broker opens its coordination backend through coord/migration, which
// moves it to the target of a migration (`tripod migrate`) while it runs:
// this file gives it the target's Config.

// coordinationKeyPrefixes are the prefixes of the properties that choose
// and reach a coordination backend: the only ones a migration's target
// may set.
var coordinationKeyPrefixes = []string{"coordination.", "zookeeper.", "etcd.", "raft."}

// IsCoordinationKey reports whether key is a coordination property.
func IsCoordinationKey(key string) bool {
	for _, p := range coordinationKeyPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// openCoord opens the backend cc names, to follow migrations with
// migrationTarget. The first log dir remembers the last migration that
// moved this broker (migratedFile): when it left cc's backend, the
// broker opens the target instead (a Raft source has no quorum left to
// tell it), or, once that migration was finalized, refuses to start and
// names the target.
func openCoord(cfg *config.Config, cc coord.Config, logger hclog.Logger) (*migration.Backend, error) {
	marker := filepath.Join(cfg.LogDirs[0], migratedFile)
	var opts migration.Options
	if data, err := os.ReadFile(marker); err == nil {
		var m coord.Migration
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("read %s: %w", marker, err)
		}
		if m.From == cc.Backend && !m.Finalized.IsZero() {
			return nil, fmt.Errorf("%w: this broker's cluster moved from coordination.backend %s to %s (migration %s, finalized %s): start it with the target's coordination properties: %s",
				migration.ErrFinalized, m.From, m.To, m.ID, m.Finalized.UTC().Format(time.RFC3339), formatTarget(m.Target))
		}
		opts.Switched = &m
	}
	remember := func(what string) func(coord.Migration) {
		return func(m coord.Migration) {
			if err := writeMigrated(marker, m); err != nil {
				logger.Error("cannot remember the migration in the data dir", "migration", m.ID, "error", err)
				return
			}
			logger.Info("migration "+what+": remembered in the data dir", "migration", m.ID, "from", m.From, "to", m.To)
		}
	}
	opts.OnSwitched, opts.OnFinalized = remember("switched"), remember("finalized")
	return migration.Open(cc, func(m coord.Migration) (coord.Config, error) { return migrationTarget(cfg, cc, m) }, coord.Open, opts)
}

// migratedFile, in the first log dir, remembers the last migration that
// moved this broker to its target, and whether it was finalized.
const migratedFile = "coordination-migrated.json"

// writeMigrated writes m, a migration that moved this broker (the
// source's record at the switch, or the target's when finalized), to
// path, atomically, with the target's properties but without the
// source's.
func writeMigrated(path string, m coord.Migration) error {
	m.Source = nil
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// formatTarget formats coordination properties as key=value, sorted.
func formatTarget(props map[string]string) string {
	parts := make([]string, 0, len(props))
	for _, k := range slices.Sorted(maps.Keys(props)) {
		parts = append(parts, k+"="+props[k])
	}
	if len(parts) == 0 {
		return "(see tripod migrate --status)"
	}
	return strings.Join(parts, " ")
}

// migrationTarget returns the Config with which the broker of cfg, which
// opened its backend with cc, opens migration m's target: its own
// configuration with m's coordination properties set over it (a
// rollback to the backend the broker was started on: its configuration
// as it is). A Raft
// target keeps its state under the first log dir's raft directory, as a
// broker started on Raft does; one found there from an earlier time on
// Raft is moved aside first (raft.replaced-<time>), since the target is
// imported into an empty store. A broker that is not among the target's
// voters listens for Raft on its inter-broker listener's port + 100
// unless m names raft.listen.
func migrationTarget(cfg *config.Config, cc coord.Config, m coord.Migration) (coord.Config, error) {
	tc := *cfg
	target := m.Target
	if m.RollsBack != "" && cfg.Coord.Backend == m.To {
		// A rollback to the backend this broker was started on: its own
		// properties reach it, with its passwords, which the record's
		// leave out.
		target = nil
	}
	for k, v := range target {
		if !IsCoordinationKey(k) {
			return coord.Config{}, fmt.Errorf("migration %s: %s is not a coordination property", m.ID, k)
		}
		if err := tc.Set(k, v); err != nil {
			return coord.Config{}, fmt.Errorf("migration %s: %w", m.ID, err)
		}
	}
	out := tc.CoordConfig()
	out.Logger = cc.Logger
	if out.Backend == "raft" {
		if _, voter := out.RaftVoters[out.BrokerID]; !voter && out.RaftListen == "" {
			specs, inter, err := tc.ListenerSpecs()
			if err != nil {
				return coord.Config{}, err
			}
			out.RaftListen = net.JoinHostPort(specs[inter].Host, strconv.Itoa(int(specs[inter].Port)+100))
		}
		if err := prepareRaftDir(out.RaftDir, m.ID); err != nil {
			return coord.Config{}, err
		}
	}
	if err := tc.OpenCoordTLS(&out, cc.Logger.Named("coord-tls")); err != nil {
		return coord.Config{}, err
	}
	return out, nil
}

// prepareRaftDir makes dir ready to hold migration id's Raft state, its
// quorum named by id (raft.QuorumFile): a directory of that migration is
// kept (an earlier attempt of this process or of a restart of it); any
// other one is renamed aside.
func prepareRaftDir(dir, id string) error {
	if got, err := os.ReadFile(filepath.Join(dir, raft.QuorumFile)); err == nil && string(got) == id {
		return nil
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		aside := dir + ".replaced-" + time.Now().UTC().Format("20060102T150405")
		if err := os.Rename(dir, aside); err != nil {
			return fmt.Errorf("move the raft directory of an earlier time on raft aside: %w", err)
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, raft.QuorumFile), []byte(id), 0o644)
}

// migrationStatus is what this broker, as the controller, last did for
// a migration: DescribeConfigs shows it (coordination.migration.*).
type migrationStatus struct {
	mu     sync.Mutex
	id     string
	step   string
	err    error
	topics int
	parts  int
	at     time.Time
}

// set records the step of migration id (err: how it failed).
func (s *migrationStatus) set(id, step string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.step, s.err, s.at = id, step, err, time.Now()
}

// copied records the size of migration id's copy.
func (s *migrationStatus) copied(topics, parts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics, s.parts = topics, parts
}

// importRetry is the wait between attempts to import into a target that
// is not reachable yet (a Raft target without its quorum); importAttempt
// bounds one attempt (a 10 000-partition copy takes a few seconds).
const (
	importRetry   = time.Second
	importAttempt = 30 * time.Second
)

// driveMigrations runs on the controller for its term: it follows the
// migration record of the backend in use and, while it says a migration
// is copying or frozen, copies the source into the target and switches
// the cluster over (copyAndSwitch). A controller elected while a
// migration is under way (the one that drove it died) takes it up where
// the record says: copying, it takes the pre-copy again; frozen, the
// copy again whole. Import replaces what an earlier attempt wrote.
func (b *Broker) driveMigrations(ctx context.Context) {
	log := b.logger.Named("migration")
	coord.Follow(ctx, log, "the migration record", b.coordMigration.WatchMigration, func(r coord.MigrationRecord) {
		for r.OK && (r.Migration.Phase == coord.MigrationCopying || r.Migration.Phase == coord.MigrationFrozen) && len(r.Migration.Target) > 0 {
			if !b.copyAndSwitch(ctx, log, r.Migration) {
				return
			}
			// A step failed for a reason that passes (the source or
			// the target unreachable a while): again, from the record
			// as it is then.
			select {
			case <-ctx.Done():
				return
			case <-time.After(importRetry):
			}
			rctx, cancel := context.WithTimeout(ctx, importAttempt)
			m, ok, err := b.coordMigration.Migration(rctx)
			cancel()
			if err != nil {
				continue
			}
			r = coord.MigrationRecord{Migration: m, OK: ok}
		}
	})
}

// copyAndSwitch copies the frozen source of migration m into its target
// and switches the cluster to it, until done or ctx ends (the term did:
// the next controller takes it up). It reports whether to try again: a
// step failed for a reason that may pass. A step cut short by the end of
// the term did not fail: it is neither logged nor shown as the step, so
// that neither an operator is told to roll back a migration the next
// controller carries on, nor the step "switched" replaced by a record
// this driver sees after the switch ended its term.
//
// In phase copying it first takes a pre-copy: the source, still taking
// writes, is exported and written into the target (PreCopy), then frozen;
// the frozen source is exported again and only what changed since is
// written (ImportChanges). Writes are refused for that second pass only,
// which at 10 000 partitions is what keeps the refusal under a second.
func (b *Broker) copyAndSwitch(ctx context.Context, log hclog.Logger, m coord.Migration) (again bool) {
	mb, st := b.coordMigration, &b.migration
	log = log.With("migration", m.ID, "from", m.From, "to", m.To)
	// The watch may send a record this driver wrote itself (frozen)
	// after it already switched, as the term ends with the switch: the
	// stored one says where it stands, and a read that fails leaves the
	// step alone (the last one may be "switched").
	cur, ok, err := mb.Migration(ctx)
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		log.Debug("read the migration record before copying failed; trying again", "error", err)
		return true
	case !ok || cur.ID != m.ID || cur.Phase != m.Phase:
		return false
	}
	st.set(m.ID, "waiting for the target to open", nil)
	target, err := mb.Standby(ctx, m.ID)
	if err != nil {
		return false
	}
	var base *coord.Snapshot
	if m.Phase == coord.MigrationCopying {
		if base, again = b.preCopy(ctx, log, target, m); base == nil {
			return again
		}
		warmTarget(ctx, log, target)
	}
	// Freezing (or stamping the frozen record again) gives a version
	// above everything the source reported, whoever froze it.
	stamped := m
	stamped.Phase, stamped.Updated = coord.MigrationFrozen, time.Now()
	frozenAt, err := mb.SetMigration(ctx, &m, stamped)
	if errors.Is(err, coord.ErrVersionMismatch) {
		log.Info("the migration record changed; not copying", "error", err)
		return false
	}
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		st.set(m.ID, "freezing", err)
		return true
	}
	m = stamped
	start := time.Now()
	st.set(m.ID, "copying", nil)
	snap, err := coord.Export(ctx, mb, frozenAt)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		st.set(m.ID, "copying", err)
		log.Warn("export the source failed; trying again", "error", err)
		return true
	}
	st.copied(len(snap.Metadata.Topics), len(snap.Metadata.Partitions))
	rec := importRecord(b.cfg, m, snap)
	switch {
	case base != nil:
		actx, cancel := context.WithTimeout(ctx, importAttempt)
		err = target.(coord.Migrator).ImportChanges(actx, base, snap, rec)
		cancel()
		if err != nil && ctx.Err() == nil {
			// The target does not hold the pre-copy as written (an
			// attempt failed midway, or it was unreachable): the copy
			// goes whole, replacing what is there.
			log.Warn("import the changes since the pre-copy failed; importing the copy whole", "error", err)
			err = b.importCopy(ctx, log, target, snap, rec)
		}
	case imported(ctx, target, m.ID):
		// An earlier attempt imported the copy and failed to mark the
		// source switched: the frozen source has not changed since.
		err = nil
	default:
		err = b.importCopy(ctx, log, target, snap, rec)
	}
	if err != nil {
		if ctx.Err() == nil {
			st.set(m.ID, "copying", err)
			log.Error("import into the target failed: roll back with tripod migrate --rollback", "error", err)
		}
		return false
	}
	switched := m
	switched.Phase, switched.Updated = coord.MigrationSwitched, time.Now()
	if _, err := mb.SetMigration(ctx, &m, switched); err != nil {
		if ctx.Err() != nil {
			return false
		}
		st.set(m.ID, "switching", err)
		log.Warn("mark the source switched failed; trying again", "error", err)
		return !errors.Is(err, coord.ErrVersionMismatch)
	}
	st.set(m.ID, "switched", nil)
	log.Info("metadata copied; brokers switch to the target", "topics", len(snap.Metadata.Topics), "partitions", len(snap.Metadata.Partitions),
		"frozen_for", time.Since(start).Round(time.Millisecond))
	return false
}

// preCopy takes migration m's pre-copy: the source, which takes writes
// still, exported and written into target with its record left in phase
// Importing. It returns the snapshot written, or nil and whether to try
// again.
func (b *Broker) preCopy(ctx context.Context, log hclog.Logger, target coord.Backend, m coord.Migration) (*coord.Snapshot, bool) {
	st := &b.migration
	st.set(m.ID, "pre-copying", nil)
	snap, err := coord.Export(ctx, b.coordMigration, 0)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false
		}
		st.set(m.ID, "pre-copying", err)
		log.Warn("export the source for the pre-copy failed; trying again", "error", err)
		return nil, true
	}
	st.copied(len(snap.Metadata.Topics), len(snap.Metadata.Partitions))
	rec := importRecord(b.cfg, m, snap)
	start := time.Now()
	err = b.retryUnavailable(ctx, log, rec.ID, "pre-copying", func(actx context.Context) error {
		return target.(coord.Migrator).PreCopy(actx, snap, rec)
	})
	if err != nil {
		if ctx.Err() == nil {
			st.set(m.ID, "pre-copying", err)
			log.Error("the pre-copy into the target failed: roll back with tripod migrate --rollback", "error", err)
		}
		return nil, false
	}
	log.Info("pre-copied the metadata into the target; freezing the source for the changes since", "topics", len(snap.Metadata.Topics),
		"partitions", len(snap.Metadata.Partitions), "took", time.Since(start).Round(time.Millisecond))
	return snap, false
}

// warmTarget has target keep the copy of the metadata its first
// controller's Load reads (coord.MetadataWarmer), before the source is
// frozen: this broker, the source's controller, is the first to campaign
// on the target, and its Load then reads what changed since from memory.
// Read from ZooKeeper inside the refusal, 10 000 partition states took
// 0.7 s on an idle machine and 5 s on a saturated one. Only the driver
// warms: every broker's view reading the whole copy at once slowed the
// freeze itself. A warming that fails or takes longer than an import
// attempt costs only that Load's speed.
func warmTarget(ctx context.Context, log hclog.Logger, target coord.Backend) {
	w, ok := target.(coord.MetadataWarmer)
	if !ok {
		return
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, importAttempt)
	err := w.WarmMetadata(wctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			log.Info("the target's copy of the metadata is not warm; its first controller reads it instead", "error", err)
		}
		return
	}
	log.Info("the target's copy of the metadata is warm", "took", time.Since(start).Round(time.Millisecond))
}

// importRecord is the target's record of migration m, whose copy is
// snap.
func importRecord(cfg config.Config, m coord.Migration, snap *coord.Snapshot) coord.Migration {
	rec := m
	rec.Phase, rec.Bases, rec.Updated = coord.MigrationImported, snap.Bases, time.Now()
	rec.Source, rec.Brokers = m.Source, snap.Brokers
	if len(rec.Source) == 0 {
		rec.Source = coordinationProps(cfg)
	}
	return rec
}

// imported reports whether target's record shows migration id imported.
func imported(ctx context.Context, target coord.Backend, id string) bool {
	mig, ok := target.(coord.Migrator)
	if !ok {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, importAttempt)
	defer cancel()
	rec, ok, err := mig.Migration(rctx)
	return err == nil && ok && rec.ID == id && rec.Phase == coord.MigrationImported
}

// importCopy imports snap into target with the record rec, again while
// the target is unavailable, until ctx ends.
func (b *Broker) importCopy(ctx context.Context, log hclog.Logger, target coord.Backend, snap *coord.Snapshot, rec coord.Migration) error {
	err := b.retryUnavailable(ctx, log, rec.ID, "copying", func(actx context.Context) error {
		return target.(coord.Migrator).Import(actx, snap, rec)
	})
	if errors.Is(err, coord.ErrExists) && imported(ctx, target, rec.ID) {
		// An attempt whose answer was lost imported it.
		return nil
	}
	return err
}

// retryUnavailable runs write (a step of migration id into its target)
// again while the target is unavailable, until ctx ends.
func (b *Broker) retryUnavailable(ctx context.Context, log hclog.Logger, id, step string, write func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		// An attempt is bounded: a target that does not answer (its
		// client waiting for a server that is down) is asked again, and
		// the step says so.
		actx, cancel := context.WithTimeout(ctx, importAttempt)
		err := write(actx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", coord.ErrUnavailable, err)
		}
		if err == nil || ctx.Err() != nil || !errors.Is(err, coord.ErrUnavailable) {
			return err
		}
		b.migration.set(id, step+": the target is unavailable, retrying", err)
		log.Info("writing into the target failed; retrying", "step", step, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(importRetry):
		}
	}
}

// coordinationProps returns cfg's coordination properties as set, but
// its passwords and its own Raft address: what every broker opens its
// backend with.
func coordinationProps(cfg config.Config) map[string]string {
	props := map[string]string{}
	for _, k := range config.BrokerKeys() {
		if !IsCoordinationKey(k) || config.Sensitive(k) || k == "raft.listen" {
			// Passwords stay out of the coordination store, and each
			// broker has its own Raft address.
			continue
		}
		if v, ok := cfg.Get(k); ok && v != "" {
			props[k] = v
		}
	}
	return props
}

// inUseProps returns the coordination properties of mb's backend, whose
// record is rec when ok: this broker's own when it was started on it,
// else those the migration that brought the cluster there gave its
// brokers.
func (b *Broker) inUseProps(mb *migration.Backend, rec coord.Migration, ok bool) map[string]string {
	if b.cfg.Coord.Backend == mb.Name() || !ok || rec.To != mb.Name() || len(rec.Target) == 0 {
		return coordinationProps(b.cfg)
	}
	return maps.Clone(rec.Target)
}

// Migration actions are broker configs of the controller, set with
// IncrementalAlterConfigs (SET) on its BROKER resource, as `tripod
// migrate` does; they are acted on, never stored. DescribeConfigs of any
// broker shows where a migration stands (describeMigration).
const (
	// MigrationActionKey starts a migration (start), rolls back one whose
	// brokers have not switched yet (rollback), or retires the source of
	// the one that brought the cluster here (finalize).
	MigrationActionKey = "coordination.migration.action"
	// MigrationIDKey, in a start, names the migration, so that a start
	// asked again is the same migration.
	MigrationIDKey = "coordination.migration.id"
	// MigrationTargetPrefix prefixes each coordination property of the
	// target, in a start: coordination.migration.target.coordination.backend=etcd.
	MigrationTargetPrefix = "coordination.migration.target."
	// migrationKeyPrefix is the prefix of every migration key.
	migrationKeyPrefix = "coordination.migration."
)

// Keys DescribeConfigs answers for a broker when asked for them by name,
// read-only: the backend it uses now, the last migration of that
// backend's record, and this broker's last step in one as the
// controller.
const (
	migrationBackendKey = "coordination.migration.backend"
	migrationIDKey      = MigrationIDKey
	migrationPhaseKey   = "coordination.migration.phase"
	migrationFromKey    = "coordination.migration.from"
	migrationToKey      = "coordination.migration.to"
	migrationStepKey    = "coordination.migration.step"
)

// isMigrationAction reports whether alts are a migration action.
func isMigrationAction(alts []coord.ConfigAlteration) bool {
	for _, a := range alts {
		if strings.HasPrefix(a.Key, migrationKeyPrefix) {
			return true
		}
	}
	return false
}

// migrationAction acts on a migration action (alts) sent to this broker,
// which must be the controller.
func (b *Broker) migrationAction(ctx context.Context, alts []coord.ConfigAlteration, validateOnly bool) configOutcome {
	action, id, target := "", "", map[string]string{}
	for _, a := range alts {
		switch {
		case a.Op != coord.ConfigSet:
			return configOutcome{kerr.InvalidRequest, fmt.Errorf("%s: a migration action is SET, not %v", a.Key, a.Op)}
		case a.Key == MigrationActionKey:
			action = a.Value
		case a.Key == MigrationIDKey:
			id = a.Value
		case strings.HasPrefix(a.Key, MigrationTargetPrefix):
			target[strings.TrimPrefix(a.Key, MigrationTargetPrefix)] = a.Value
		default:
			return configOutcome{kerr.InvalidConfig, fmt.Errorf("%s: not a migration key (%s, %s<coordination property>)", a.Key, MigrationActionKey, MigrationTargetPrefix)}
		}
	}
	if b.member.Controller() == nil {
		if ctrl := b.member.BackendController().ID; ctrl != coord.NoBroker && ctrl != coord.BrokerID(b.cfg.BrokerID) {
			return configOutcome{kerr.NotController, fmt.Errorf("broker %d is not the controller: send migration actions to the controller (broker %d)", b.cfg.BrokerID, ctrl)}
		}
		return configOutcome{kerr.NotController, fmt.Errorf("broker %d is not the controller, and no other is known now: ask again", b.cfg.BrokerID)}
	}
	mb := b.coordMigration
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, ok, err := mb.Migration(lctx)
	if err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("read the migration record: %w", err)}
	}
	switch action {
	case "start":
		return b.startMigration(lctx, mb, rec, ok, id, target, validateOnly)
	case "rollback":
		if len(target) > 0 {
			return configOutcome{kerr.InvalidConfig, fmt.Errorf("%s=rollback takes no target", MigrationActionKey)}
		}
		if ok && rec.Phase == coord.MigrationImported && rec.To == mb.Name() {
			return b.rollbackSwitched(lctx, mb, rec, validateOnly)
		}
		if !ok || (rec.Phase != coord.MigrationCopying && rec.Phase != coord.MigrationFrozen) {
			return configOutcome{kerr.InvalidRequest, fmt.Errorf("no migration to roll back: the record of %s is %s", mb.Name(), coord.DescribeRecord(rec, ok))}
		}
		if validateOnly {
			return configOutcome{}
		}
		back := rec
		back.Phase, back.Updated = coord.MigrationRolledBack, time.Now()
		if _, err := mb.SetMigration(lctx, &rec, back); err != nil {
			return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("roll back migration %s: %w", rec.ID, err)}
		}
		b.migration.set(rec.ID, "rolled back", nil)
		b.logger.Info("migration rolled back: the source takes writes again", "migration", rec.ID, "from", rec.From, "to", rec.To)
		return configOutcome{}
	case "finalize":
		if len(target) > 0 {
			return configOutcome{kerr.InvalidConfig, fmt.Errorf("%s=finalize takes no target", MigrationActionKey)}
		}
		return b.finalizeMigration(lctx, mb, rec, ok, validateOnly)
	default:
		return configOutcome{kerr.InvalidConfig, fmt.Errorf("%s %q: must be start, finalize or rollback", MigrationActionKey, action)}
	}
}

// rollbackSuffix ends the id of the migration that rolls back another.
const rollbackSuffix = "-rollback"

// rollbackSwitched rolls back the migration that brought the cluster to
// mb (whose record is rec), after its switch and before its finalize: a
// migration back to its source (rec.Source), which the controller's
// driver copies and switches as any other. The source's state is
// replaced by the target's, so nothing written since the switch is lost;
// on Raft, whose quorum the brokers left, the brokers form it again at
// the same addresses, the old Raft directory moved aside.
func (b *Broker) rollbackSwitched(ctx context.Context, mb *migration.Backend, rec coord.Migration, validateOnly bool) configOutcome {
	switch {
	case !rec.Finalized.IsZero():
		return configOutcome{kerr.InvalidRequest, fmt.Errorf("migration %s was finalized at %s: there is no way back to %s; migrate to it again instead (tripod migrate --to %s)",
			rec.ID, rec.Finalized.UTC().Format(time.RFC3339), rec.From, rec.From)}
	case len(rec.Source) == 0:
		return configOutcome{kerr.InvalidRequest, fmt.Errorf("migration %s does not say how its source %s is reached: migrate to it again instead (tripod migrate --to %s)", rec.ID, rec.From, rec.From)}
	}
	back := coord.Migration{ID: rec.ID + rollbackSuffix, From: rec.To, To: rec.From, Target: maps.Clone(rec.Source), Source: b.inUseProps(mb, rec, true),
		RollsBack: rec.ID, Phase: coord.MigrationCopying, Bases: rec.Bases, Updated: time.Now()}
	if err := validateTarget(b.cfg, back.Target); err != nil {
		return configOutcome{kerr.InvalidConfig, fmt.Errorf("roll back migration %s: %w", rec.ID, err)}
	}
	if validateOnly {
		return configOutcome{}
	}
	if _, err := mb.SetMigration(ctx, &rec, back); err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("roll back migration %s: freeze %s: %w", rec.ID, mb.Name(), err)}
	}
	b.migration.set(back.ID, "started", nil)
	b.logger.Info("rolling back a switched migration: the target is copied back into the source, then frozen for what changed", "migration", rec.ID, "from", rec.To, "to", rec.From)
	return configOutcome{}
}

// finalizeMigration retires the source of the migration that brought the
// cluster to mb (whose record is rec when ok), once every broker that
// was live on the source is registered here: the source's record says
// finalized (a broker started on it refuses to start and names the
// target; a Raft source has no quorum left to write to, and its brokers
// remember it in their data dirs instead), and the target's record says
// when, which every broker remembers in its data dir.
func (b *Broker) finalizeMigration(ctx context.Context, mb *migration.Backend, rec coord.Migration, ok, validateOnly bool) configOutcome {
	switch {
	case !ok || rec.Phase != coord.MigrationImported || rec.To != mb.Name():
		return configOutcome{kerr.InvalidRequest, fmt.Errorf("no migration to finalize: the record of %s is %s", mb.Name(), coord.DescribeRecord(rec, ok))}
	case !rec.Finalized.IsZero():
		return configOutcome{kerr.InvalidRequest, fmt.Errorf("migration %s was finalized at %s", rec.ID, rec.Finalized.UTC().Format(time.RFC3339))}
	}
	live, err := mb.Members(ctx)
	if err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("read the live brokers: %w", err)}
	}
	var missing []coord.BrokerID
	for _, id := range rec.Brokers {
		if !slices.ContainsFunc(live, func(br coord.Broker) bool { return br.ID == id }) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return configOutcome{kerr.InvalidRequest, fmt.Errorf("brokers %v were live on %s and are not registered on %s: finalizing would leave them on the source; start them (they move to %s) or wait for them",
			missing, rec.From, rec.To, rec.To)}
	}
	if validateOnly {
		return configOutcome{}
	}
	if rec.From != "raft" {
		if err := b.finalizeSource(ctx, rec); err != nil {
			return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("mark the source %s finalized: %w", rec.From, err)}
		}
	}
	final := rec
	final.Finalized, final.Updated = time.Now(), time.Now()
	if _, err := mb.SetMigration(ctx, &rec, final); err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("finalize migration %s: %w", rec.ID, err)}
	}
	b.migration.set(rec.ID, "finalized", nil)
	b.logger.Info("migration finalized: the source is retired", "migration", rec.ID, "from", rec.From, "to", rec.To)
	return configOutcome{}
}

// finalizeSource marks the source of migration rec (ZooKeeper or etcd)
// finalized, opening it with rec.Source over this broker's configuration
// (the broker's own properties when it was started on the source: they
// hold the passwords rec.Source leaves out).
func (b *Broker) finalizeSource(ctx context.Context, rec coord.Migration) error {
	cfg := b.cfg
	if cfg.Coord.Backend != rec.From {
		for k, v := range rec.Source {
			if err := cfg.Set(k, v); err != nil {
				return fmt.Errorf("the source's property %s: %w", k, err)
			}
		}
	}
	cc := cfg.CoordConfig()
	cc.Logger = b.logger.Named("coord-source")
	if err := cfg.OpenCoordTLS(&cc, cc.Logger); err != nil {
		return err
	}
	src, err := coord.Open(cc)
	if err != nil {
		return err
	}
	defer src.Close()
	mig, ok := src.(coord.Migrator)
	if !ok {
		return fmt.Errorf("backend %s cannot migrate", rec.From)
	}
	cur, ok, err := mig.Migration(ctx)
	if err != nil {
		return err
	}
	if !ok || cur.ID != rec.ID || cur.Phase != coord.MigrationSwitched {
		return fmt.Errorf("the source's record is %s, want migration %s switched", coord.DescribeRecord(cur, ok), rec.ID)
	}
	next := cur
	next.Phase, next.Updated = coord.MigrationFinalized, time.Now()
	_, err = mig.SetMigration(ctx, &cur, next)
	return err
}

// startMigration freezes the backend in use (mb, whose record is rec
// when ok) for a migration to target; the controller's driver
// (driveMigrations) copies and switches.
func (b *Broker) startMigration(ctx context.Context, mb *migration.Backend, rec coord.Migration, ok bool, id string, target map[string]string, validateOnly bool) configOutcome {
	to := target["coordination.backend"]
	from := mb.Name()
	switch {
	case id != "" && ok && rec.ID == id:
		// Asked again (the answer to the first was lost): it started.
		return configOutcome{}
	case to == "":
		return configOutcome{kerr.InvalidConfig, fmt.Errorf("%scoordination.backend: name the target backend (zk, etcd or raft)", MigrationTargetPrefix)}
	case to == from:
		return configOutcome{kerr.InvalidConfig, fmt.Errorf("%scoordination.backend %s: the cluster is on %s already", MigrationTargetPrefix, to, from)}
	case ok && rec.Phase != coord.MigrationRolledBack && rec.Phase != coord.MigrationImported:
		return configOutcome{kerr.InvalidRequest, fmt.Errorf("migration %s is in progress (%s): roll it back or let it finish first", rec.ID, rec.Phase)}
	}
	if err := validateTarget(b.cfg, target); err != nil {
		return configOutcome{kerr.InvalidConfig, err}
	}
	if validateOnly {
		return configOutcome{}
	}
	if id == "" {
		id = fmt.Sprintf("%s-to-%s-%d", from, to, time.Now().UnixMilli())
	}
	m := coord.Migration{ID: id, From: from, To: to, Target: target, Source: b.inUseProps(mb, rec, ok), Phase: coord.MigrationCopying, Updated: time.Now()}
	var prev *coord.Migration
	if ok {
		// The backend's epoch bases stay with it in every record.
		prev, m.Bases = &rec, rec.Bases
	}
	if _, err := mb.SetMigration(ctx, prev, m); err != nil {
		return configOutcome{kafkaerr.Controller.Error(err), fmt.Errorf("freeze %s for the migration: %w", from, err)}
	}
	b.migration.set(m.ID, "started", nil)
	b.logger.Info("migration started: the source is copied, then frozen for what changed", "migration", m.ID, "from", from, "to", to, "target", target)
	return configOutcome{}
}

// validateTarget checks that target names a backend and that its
// properties, set over cfg, open a valid coordination config.
func validateTarget(cfg config.Config, target map[string]string) error {
	for k, v := range target {
		if !IsCoordinationKey(k) || strings.HasPrefix(k, migrationKeyPrefix) {
			return fmt.Errorf("%s%s: not a coordination property", MigrationTargetPrefix, k)
		}
		if err := cfg.Set(k, v); err != nil {
			return fmt.Errorf("%s%s: %w", MigrationTargetPrefix, k, err)
		}
	}
	cc := cfg.CoordConfig()
	if err := cc.Validate(); err != nil {
		return fmt.Errorf("the target's coordination properties: %w", err)
	}
	return nil
}

// migrationConfigs returns the read-only migration keys DescribeConfigs
// answers for this broker: the backend it uses, and the record's
// migration and phase, and this broker's last step as the controller.
func (b *Broker) migrationConfigs(ctx context.Context) map[string]string {
	mb := b.coordMigration
	backend := mb.Name()
	if !mb.Registered() {
		// Switched, not registered there yet.
		backend += " (registering)"
	}
	out := map[string]string{migrationBackendKey: backend}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if rec, ok, err := mb.Migration(lctx); err == nil && ok {
		out[migrationIDKey], out[migrationPhaseKey] = rec.ID, string(rec.Phase)
		out[migrationFromKey], out[migrationToKey] = rec.From, rec.To
	}
	st := &b.migration
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.id != "" {
		step := st.step
		if st.err != nil {
			step += ": " + st.err.Error()
		}
		if st.parts > 0 {
			step += fmt.Sprintf(" (%d topics, %d partitions)", st.topics, st.parts)
		}
		out[migrationStepKey] = st.id + " " + step
	}
	return out
}

// migrationKeysNamed returns the migration keys names asks for by name.
func migrationKeysNamed(names []string) []string {
	var out []string
	for _, n := range names {
		switch n {
		case migrationBackendKey, migrationIDKey, migrationPhaseKey, migrationStepKey, migrationFromKey, migrationToKey:
			out = append(out, n)
		}
	}
	return out
}
