// Package migration is the coordination backend a broker opens: the one
// its flags name, which it leaves for the target of a migration (`tripod
// migrate`, coord.Migrator) when that backend's record says so, without
// the broker restarting.
//
// Backend follows the migration record of the backend it serves from.
// When the record starts a migration (phase copying, then frozen) and
// names the target's properties, Backend opens the target beside it (the standby: on Raft
// this node joins the target's quorum), so the migration can import
// into it. When the record says switched, Backend serves from the
// target from then on: every session and term it handed out on the
// source ends (Err ErrSessionExpired), every watch channel closes, and
// the broker's loops, which register, campaign and watch again when that
// happens, do so on the target. The source itself is closed a little
// later (retire), its registration and election node kept meanwhile, so
// that no broker that has not switched yet wins a term there. A broker that
// cannot open the target keeps serving from the frozen source, whose
// reads and watches go on, and logs why, until it can.
//
// Within one backend the contract holds as the backend gives it. Across
// the switch the target's epoch bases (coord.EpochBases) keep every
// epoch and version above the source's.
package migration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
)

// TargetConfig returns the Config this broker opens migration m's target
// with: its own settings (logger, TLS files, data dir, broker id), the
// coordination properties replaced by the record's (m.Target).
type TargetConfig func(m coord.Migration) (coord.Config, error)

// openRetry is the wait between attempts to open a target that could
// not be opened.
const openRetry = time.Second

// Backend is a coord.Backend that moves to the target of a migration.
type Backend struct {
	log          hclog.Logger
	targetConfig TargetConfig
	open         func(coord.Config) (coord.Backend, error)
	opts         Options
	// finalized is the last migration OnFinalized was called for (owned
	// by the record follower).
	finalized string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// cur is the backend served from, gen the generation: it ends
	// (genCtx is cancelled) when cur is left.
	cur    coord.Backend
	curCfg string
	gen    *generation
	// standby is the target opened for the migration standbyID, while
	// the source is frozen; nil when none is open.
	standby   coord.Backend
	standbyID string
	// standbyReady announces a change of standby.
	standbyReady chan struct{}
	closed       bool
	// retiring are backends the cluster left, closed after retireAfter
	// (retire).
	retiring    []coord.Backend
	retireAfter time.Duration
}

// generation is one backend's time as the current one.
type generation struct {
	b      coord.Backend
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	// live counts the generation's sessions that have not ended.
	live atomic.Int32
	// left is set once the backend's record says the cluster left it:
	// Register and Campaign wait for the switch.
	left atomic.Bool
	// switched is set when the generation ends at a switch, before ctx
	// is cancelled; a generation that ends without it ended with Close.
	switched atomic.Bool
	// sourceController, on a generation a switch began, is the broker
	// whose term was the source's controller at the switch (NoBroker:
	// none, or not known): Campaign here first waits for it to register
	// (awaitHandover).
	sourceController coord.BrokerID
}

// Open opens the backend cfg names and follows its migration record.
// targetConfig builds the Config of a migration's target; open opens one
// (coord.Open).
//
// A broker that knows its configured backend was left (opts.Switched,
// which it remembers in its data dir) opens the target instead.
func Open(cfg coord.Config, targetConfig TargetConfig, open func(coord.Config) (coord.Backend, error), opts Options) (*Backend, error) {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	name := cfg.Backend
	var cur coord.Backend
	var left bool
	if m := opts.Switched; m != nil && m.From == cfg.Backend {
		tc, err := targetConfig(*m)
		if err != nil {
			return nil, err
		}
		if cur, err = open(tc); err != nil {
			return nil, fmt.Errorf("open %s, where the cluster moved from %s (migration %s): %w", m.To, m.From, m.ID, err)
		}
		name = m.To
		log.Info("the cluster moved from the configured coordination backend: opened the target", "migration", m.ID, "from", m.From, "to", m.To)
	} else {
		var err error
		if cur, err = open(cfg); err != nil {
			return nil, err
		}
		if left, err = leftAtOpen(cur, cfg); err != nil {
			_ = cur.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Backend{log: log, targetConfig: targetConfig, open: open, opts: opts, ctx: ctx, cancel: cancel, standbyReady: make(chan struct{})}
	b.retireAfter = max(2*cfg.SessionTimeout, 2*time.Second)
	b.gen = b.newGeneration(cur, name)
	b.gen.left.Store(left)
	b.cur, b.curCfg = cur, name
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.follow()
	}()
	return b, nil
}

// Options are what a broker adds to Open.
type Options struct {
	// Switched is the last migration the broker saw switch, if any: when
	// it left the configured backend, Open opens its target instead.
	Switched *coord.Migration
	// OnSwitched and OnFinalized, if set, are called once for each
	// migration that moves this Backend to its target, and for each
	// migration the record of the backend in use says was finalized:
	// the broker remembers them in its data dir.
	OnSwitched  func(coord.Migration)
	OnFinalized func(coord.Migration)
}

// ErrFinalized: the backend a broker was started on was migrated to
// another and the migration finalized.
var ErrFinalized = errors.New("the cluster moved to another coordination backend")

// leftAtOpen reads cur's record: it fails, naming the target, when the
// record says the cluster left cur for good, and reports whether it says
// the cluster left cur (switched): the broker then neither registers nor
// campaigns there, and its record follower moves it to the target. When
// the record cannot be read within the time it allows (at most 2 s: a
// service that is down must not hold a broker's start), the follower
// finds it later.
func leftAtOpen(cur coord.Backend, cfg coord.Config) (bool, error) {
	mig, ok := cur.(coord.Migrator)
	if !ok || cfg.Backend == "raft" {
		// A Raft source's record is read through its leader, which a
		// starting node may not have yet; and a cluster that left Raft
		// left no quorum behind to read it from: a broker that left it
		// remembers so in its data dir (Options.Switched).
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(max(cfg.SessionTimeout, 500*time.Millisecond), 2*time.Second))
	defer cancel()
	m, ok, err := mig.Migration(ctx)
	switch {
	case err != nil || !ok:
		return false, nil
	case m.Phase == coord.MigrationFinalized:
		return false, fmt.Errorf("%w: coordination.backend %s was migrated to %s (migration %s, finalized at %s): start the broker with the target's properties: %s",
			ErrFinalized, cfg.Backend, m.To, m.ID, m.Updated.UTC().Format(time.RFC3339), formatProps(m.Target))
	}
	return m.Phase == coord.MigrationSwitched, nil
}

// formatProps formats coordination properties as key=value, sorted.
func formatProps(props map[string]string) string {
	parts := make([]string, 0, len(props))
	for _, k := range slices.Sorted(maps.Keys(props)) {
		v := props[k]
		if strings.Contains(k, "password") {
			v = "[hidden]"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

func (b *Backend) newGeneration(cur coord.Backend, name string) *generation {
	ctx, cancel := context.WithCancel(b.ctx)
	return &generation{b: cur, name: name, ctx: ctx, cancel: cancel, sourceController: coord.NoBroker}
}

// handoverPoll is how often a Campaign on a migration's target looks for
// the source's controller among the target's brokers.
const handoverPoll = 20 * time.Millisecond

// awaitHandover holds a Campaign on g, a generation a switch began, until
// the broker that was the source's controller (g.sourceController) is
// registered on g's backend, or for at most half of retireAfter (the
// session timeout). That broker registers there only after its own
// switch has ended its term on the source; a broker that switched before
// it and won here at once would be a second controller for as long as
// that one has not seen the switch (it cannot commit, the source
// refusing writes, and its epoch is below every one here, but it would
// still act). A source controller that is gone or cut off does not hold
// the election longer than the bound. self is the campaigning broker.
func (b *Backend) awaitHandover(ctx context.Context, g *generation, self coord.BrokerID) error {
	prev := g.sourceController
	if prev == coord.NoBroker || prev == self {
		return nil
	}
	deadline := time.Now().Add(b.retireAfter / 2)
	for {
		members, err := g.b.Members(ctx)
		if err == nil && slices.ContainsFunc(members, func(m coord.Broker) bool { return m.ID == prev }) {
			return nil
		}
		if time.Now().After(deadline) {
			b.log.Info("the source's controller has not registered on the target; campaigning without it", "source_controller", prev, "waited", b.retireAfter/2)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.ctx.Done():
			return nil // Campaign finds the generation ended
		case <-time.After(handoverPoll):
		}
	}
}

// current returns the generation served from.
func (b *Backend) current() *generation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gen
}

// Current returns the backend served from now (coord.Current).
func (b *Backend) Current() coord.Backend { return b.current().b }

// Name returns the name of the backend served from now (zk, etcd, raft).
func (b *Backend) Name() string { return b.current().name }

// Registered reports whether a session on the backend served from now
// is live: after a switch, once the broker has registered on the target.
func (b *Backend) Registered() bool { return b.current().live.Load() > 0 }

// follow follows the current backend's migration record, moving to the
// target when it switches, until Close.
func (b *Backend) follow() {
	for b.ctx.Err() == nil {
		g := b.current()
		mig, ok := g.b.(coord.Migrator)
		if !ok {
			return
		}
		coord.Follow(g.ctx, b.log, "the migration record", mig.WatchMigration, func(r coord.MigrationRecord) {
			b.onRecord(g, r)
		})
	}
}

// onRecord acts on the record r of generation g's backend.
func (b *Backend) onRecord(g *generation, r coord.MigrationRecord) {
	m := r.Migration
	if r.OK && !m.Finalized.IsZero() && b.opts.OnFinalized != nil && b.finalized != m.ID {
		b.finalized = m.ID
		b.opts.OnFinalized(m)
	}
	if r.OK && len(m.Target) > 0 && (m.Phase == coord.MigrationSwitched || m.Phase == coord.MigrationFinalized) {
		// No registration or campaign here from now on.
		g.left.Store(true)
	}
	switch {
	case !r.OK || len(m.Target) == 0:
	case m.Phase == coord.MigrationCopying || m.Phase == coord.MigrationFrozen:
		b.openStandby(g, m)
	case m.Phase == coord.MigrationSwitched || m.Phase == coord.MigrationFinalized:
		if m.Phase == coord.MigrationFinalized {
			b.log.Error("this broker was started on a coordination backend the cluster left for good; moving to the target: start it with the target's properties",
				"migration", m.ID, "to", m.To, "target", formatProps(m.Target))
		}
		if t := b.openStandby(g, m); t != nil && b.confirmImported(g, m, t) {
			b.switchTo(g, m, t)
		}
	case m.Phase == coord.MigrationRolledBack:
		b.closeStandby(m.ID)
	}
}

// openStandby opens migration m's target, once, retrying until it opens
// or g ends, and returns it (nil if g ended first).
func (b *Backend) openStandby(g *generation, m coord.Migration) coord.Backend {
	b.mu.Lock()
	if b.standby != nil && b.standbyID == m.ID {
		t := b.standby
		b.mu.Unlock()
		return t
	}
	b.mu.Unlock()
	b.closeStandby("")
	cfg, err := b.targetConfig(m)
	if err != nil {
		b.log.Error("cannot migrate to the target: its properties are invalid; serving from the source", "migration", m.ID, "to", m.To, "error", err)
		return nil
	}
	for attempt := 1; ; attempt++ {
		t, err := b.open(cfg)
		if err == nil {
			b.mu.Lock()
			if b.closed || g.ctx.Err() != nil {
				b.mu.Unlock()
				_ = t.Close()
				return nil
			}
			b.standby, b.standbyID = t, m.ID
			close(b.standbyReady)
			b.standbyReady = make(chan struct{})
			b.mu.Unlock()
			b.log.Info("opened the migration's target", "migration", m.ID, "to", m.To)
			return t
		}
		b.log.Warn("cannot open the migration's target; serving on the source's last metadata meanwhile", "migration", m.ID, "to", m.To, "attempt", attempt, "error", err)
		select {
		case <-g.ctx.Done():
			return nil
		case <-time.After(openRetry):
		}
	}
}

// confirmImported reads t's record until it shows migration m imported,
// retrying until g ends: a read of the record is what makes the target
// report its epochs raised by the bases from then on, so nothing
// registers on the target before. It reports false if g ended first.
func (b *Backend) confirmImported(g *generation, m coord.Migration, t coord.Backend) bool {
	mig, ok := t.(coord.Migrator)
	if !ok {
		return true
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(g.ctx, openRetry*5)
		rec, ok, err := mig.Migration(ctx)
		cancel()
		switch {
		case err == nil && ok && rec.ID == m.ID && rec.Phase == coord.MigrationImported:
			return true
		case err == nil:
			b.log.Error("the migration's target does not hold its copy; serving from the source", "migration", m.ID, "to", m.To,
				"target_record", fmt.Sprintf("%+v (present %v)", rec, ok))
		default:
			b.log.Warn("cannot read the migration's target; serving on the source's last metadata meanwhile", "migration", m.ID, "to", m.To, "attempt", attempt, "error", err)
		}
		select {
		case <-g.ctx.Done():
			return false
		case <-time.After(openRetry):
		}
	}
}

// closeStandby closes the standby unless it is migration keep's.
func (b *Backend) closeStandby(keep string) {
	b.mu.Lock()
	t := b.standby
	if t == nil || (keep != "" && b.standbyID == keep) {
		b.mu.Unlock()
		return
	}
	b.standby, b.standbyID = nil, ""
	b.mu.Unlock()
	if err := t.Close(); err != nil && !errors.Is(err, coord.ErrClosed) {
		b.log.Warn("close the migration's target", "error", err)
	}
}

// switchTo makes t, migration m's target, the current backend: g ends,
// and with it every session, term and watch of g's backend, which is
// closed.
func (b *Backend) switchTo(g *generation, m coord.Migration, t coord.Backend) {
	// Who held the source's controller term, read while the source is
	// still open: the target's campaigns wait for it (awaitHandover).
	rctx, rcancel := context.WithTimeout(g.ctx, time.Second)
	ctrl, err := g.b.Controller(rctx)
	rcancel()
	if err != nil {
		ctrl.ID = coord.NoBroker
	}
	b.mu.Lock()
	if b.gen != g || b.closed {
		b.mu.Unlock()
		return
	}
	b.gen = b.newGeneration(t, m.To)
	b.gen.sourceController = ctrl.ID
	b.cur, b.curCfg = t, m.To
	b.standby, b.standbyID = nil, ""
	b.mu.Unlock()
	g.switched.Store(true)
	g.cancel()
	b.log.Info("switched the coordination backend", "migration", m.ID, "from", g.name, "to", m.To)
	if b.opts.OnSwitched != nil {
		b.opts.OnSwitched(m)
	}
	b.retire(g)
}

// retire closes g's backend, which the cluster left, after retireAfter:
// until then its sessions and its controller's election node stay, so
// that a broker that has not switched yet cannot win a term on the
// source in the meantime (it could not commit there, the source refusing
// writes, and its epoch is below the target's, but it would be a second
// controller). Close closes it at once.
func (b *Backend) retire(g *generation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.retiring = append(b.retiring, g.b)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		select {
		case <-b.ctx.Done():
		case <-time.After(b.retireAfter):
		}
		b.mu.Lock()
		i := slices.Index(b.retiring, g.b)
		if i >= 0 {
			b.retiring = slices.Delete(b.retiring, i, i+1)
		}
		b.mu.Unlock()
		if i < 0 {
			return
		}
		if err := g.b.Close(); err != nil && !errors.Is(err, coord.ErrClosed) {
			b.log.Warn("close the migration's source", "error", err)
		}
	}()
}

// Standby returns the target of migration id opened beside the source,
// waiting for it until ctx ends. Errors: ctx.Err(), coord.ErrClosed.
func (b *Backend) Standby(ctx context.Context, id string) (coord.Backend, error) {
	for {
		b.mu.Lock()
		t, tid, ready, closed := b.standby, b.standbyID, b.standbyReady, b.closed
		b.mu.Unlock()
		switch {
		case closed:
			return nil, coord.ErrClosed
		case t != nil && tid == id:
			return t, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("the target of migration %s is not open: %w", id, ctx.Err())
		}
	}
}

// Close closes the current backend and the standby, ending every
// session (Err ErrClosed), term and watch, and waits for Backend's
// goroutines.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return coord.ErrClosed
	}
	b.closed = true
	g, t, retiring := b.gen, b.standby, b.retiring
	b.standby, b.retiring = nil, nil
	close(b.standbyReady)
	b.mu.Unlock()
	b.cancel()
	err := g.b.Close()
	for _, o := range append(retiring, t) {
		if o == nil {
			continue
		}
		if cerr := o.Close(); cerr != nil && !errors.Is(cerr, coord.ErrClosed) && err == nil {
			err = cerr
		}
	}
	b.wg.Wait()
	return err
}
