package migration

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// The coord.Backend methods: each goes to the current backend. A
// session, term or watch belongs to the generation it was made in and
// ends with it.

var (
	_ coord.Backend  = (*Backend)(nil)
	_ coord.Migrator = (*Backend)(nil)
)

// errEnded is why generation g's sessions ended with it: the cluster
// left its backend (ErrSessionExpired), or the Backend was closed
// (ErrClosed).
func errEnded(g *generation) error {
	if g.switched.Load() {
		return fmt.Errorf("%w: the cluster left coordination backend %s", coord.ErrSessionExpired, g.name)
	}
	return fmt.Errorf("%w: coordination backend %s", coord.ErrClosed, g.name)
}

// session is a Session of one generation.
type session struct {
	coord.Session
	g    *generation
	done chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	mu sync.Mutex
	// ended: the session ended with its generation (errEnded).
	ended  bool
	closed bool
}

// Register implements coord.Registrar.
func (b *Backend) Register(ctx context.Context, br coord.Broker) (coord.Session, error) {
	g := b.current()
	if g.left.Load() {
		return nil, fmt.Errorf("%w: the cluster left coordination backend %s; registering on its target once it opens", coord.ErrUnavailable, g.name)
	}
	inner, err := g.b.Register(ctx, br)
	if err != nil {
		return nil, err
	}
	s := &session{Session: inner, g: g, done: make(chan struct{}), stop: make(chan struct{})}
	// Close waits for the session to have ended.
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = inner.Close()
		return nil, fmt.Errorf("%w: register broker %d", coord.ErrClosed, br.ID)
	}
	b.wg.Add(1)
	b.mu.Unlock()
	g.live.Add(1)
	s.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer s.wg.Done()
		defer close(s.done)
		defer g.live.Add(-1)
		select {
		case <-inner.Done():
		case <-g.ctx.Done():
			s.mu.Lock()
			s.ended = true
			s.mu.Unlock()
		case <-s.stop:
		}
	}()
	return s, nil
}

// Done implements coord.Session: the session ends with its generation.
func (s *session) Done() <-chan struct{} { return s.done }

// Err implements coord.Session.
func (s *session) Err() error {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended {
		return errEnded(s.g)
	}
	select {
	case <-s.done:
		if err := s.Session.Err(); err != nil {
			return err
		}
		return coord.ErrClosed
	default:
		return nil
	}
}

// Close implements coord.Session.
func (s *session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	if s.g.ctx.Err() != nil {
		// The cluster left this backend: the registration stays until
		// the backend is closed (retire), so that the brokers that have
		// not switched yet cannot elect a controller there meanwhile.
		// Or the Backend was closed, and the backend with it.
		return nil
	}
	return s.Session.Close()
}

// Members implements coord.Registrar.
func (b *Backend) Members(ctx context.Context) ([]coord.Broker, error) {
	return b.Current().Members(ctx)
}

// WatchMembers implements coord.Registrar.
func (b *Backend) WatchMembers(ctx context.Context) (<-chan []coord.Broker, error) {
	return watch(b, ctx, func(g *generation) func(context.Context) (<-chan []coord.Broker, error) { return g.b.WatchMembers })
}

// term is a Term of one generation.
type term struct {
	coord.Term
	g      *generation
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
}

// Campaign implements coord.Elector. s must be a session of this
// Backend's current generation; one of an earlier generation has ended.
func (b *Backend) Campaign(ctx context.Context, s coord.Session) (coord.Term, error) {
	ws, ok := s.(*session)
	if !ok {
		return nil, fmt.Errorf("migration: campaign with a session of another backend (%T)", s)
	}
	g := ws.g
	if g != b.current() {
		<-ws.done // closes as g ends
		return nil, errEnded(g)
	}
	if g.left.Load() {
		// The cluster left this backend: no controller here; the
		// session ends at the switch.
		select {
		case <-ws.done:
			return nil, errEnded(g)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := b.awaitHandover(ctx, g, ws.Broker().ID); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.ctx, cancel)
	inner, err := g.b.Campaign(cctx, ws.Session)
	stop()
	cancel()
	if err != nil {
		if g.ctx.Err() != nil && ctx.Err() == nil {
			<-ws.done // closes as g ended
			return nil, errEnded(g)
		}
		select {
		case <-ws.Session.Done():
			// The session ended: so has s by the time its Campaign
			// says so.
			<-ws.done
		default:
		}
		return nil, err
	}
	if g.ctx.Err() != nil || g.left.Load() {
		// Won on a backend the cluster has left: give it up at once.
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		_ = inner.Resign(rctx)
		rcancel()
		select {
		case <-ws.done:
			return nil, errEnded(g)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	tctx, tcancel := context.WithCancel(inner.Context())
	t := &term{Term: inner, g: g, ctx: tctx, cancel: tcancel}
	t.stop = context.AfterFunc(g.ctx, tcancel)
	return t, nil
}

// Context implements coord.Term: the term ends with its generation.
func (t *term) Context() context.Context { return t.ctx }

// Done implements coord.Term.
func (t *term) Done() <-chan struct{} { return t.ctx.Done() }

// Resign implements coord.Term.
func (t *term) Resign(ctx context.Context) error {
	defer t.cancel()
	t.stop()
	if t.g.ctx.Err() != nil {
		return nil
	}
	return t.Term.Resign(ctx)
}

// Controller implements coord.Elector.
func (b *Backend) Controller(ctx context.Context) (coord.ControllerInfo, error) {
	return b.Current().Controller(ctx)
}

// WatchController implements coord.Elector.
func (b *Backend) WatchController(ctx context.Context) (<-chan coord.ControllerInfo, error) {
	return watch(b, ctx, func(g *generation) func(context.Context) (<-chan coord.ControllerInfo, error) {
		return g.b.WatchController
	})
}

// EvictController implements coord.ControllerEvictor when the current
// backend does, and does nothing otherwise.
func (b *Backend) EvictController(ctx context.Context, info coord.ControllerInfo) error {
	if e, ok := b.Current().(coord.ControllerEvictor); ok {
		return e.EvictController(ctx, info)
	}
	return nil
}

// Load implements coord.MetadataStore.
func (b *Backend) Load(ctx context.Context) (*coord.Metadata, error) { return b.Current().Load(ctx) }

// Commit implements coord.MetadataStore: a term of an earlier generation
// is fenced.
func (b *Backend) Commit(ctx context.Context, t coord.Term, ops ...coord.Op) error {
	wt, ok := t.(*term)
	if !ok {
		return fmt.Errorf("migration: commit with a term of another backend (%T)", t)
	}
	if wt.g != b.current() {
		return fmt.Errorf("%w: the term was on coordination backend %s, which the cluster left", coord.ErrFenced, wt.g.name)
	}
	return wt.g.b.Commit(ctx, wt.Term, ops...)
}

// WatchMetadata implements coord.MetadataStore.
func (b *Backend) WatchMetadata(ctx context.Context) (<-chan *coord.Metadata, error) {
	return watch(b, ctx, func(g *generation) func(context.Context) (<-chan *coord.Metadata, error) { return g.b.WatchMetadata })
}

// AllocateProducerIDs implements coord.ProducerIDAllocator.
func (b *Backend) AllocateProducerIDs(ctx context.Context, broker coord.BrokerID) (coord.ProducerIDBlock, error) {
	return b.Current().AllocateProducerIDs(ctx, broker)
}

// ProducerIDKey implements coord.ProducerIDAllocator.
func (b *Backend) ProducerIDKey(ctx context.Context, proposed []byte) ([]byte, error) {
	return b.Current().ProducerIDKey(ctx, proposed)
}

// LoadSecurity implements coord.SecurityStore.
func (b *Backend) LoadSecurity(ctx context.Context) (*coord.SecurityState, error) {
	return b.Current().LoadSecurity(ctx)
}

// WatchSecurity implements coord.SecurityStore.
func (b *Backend) WatchSecurity(ctx context.Context) (<-chan *coord.SecurityState, error) {
	return watch(b, ctx, func(g *generation) func(context.Context) (<-chan *coord.SecurityState, error) {
		return g.b.WatchSecurity
	})
}

// SetScramCredential implements coord.SecurityStore.
func (b *Backend) SetScramCredential(ctx context.Context, user string, cred coord.ScramCredential) error {
	return b.Current().SetScramCredential(ctx, user, cred)
}

// DeleteScramCredential implements coord.SecurityStore.
func (b *Backend) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	return b.Current().DeleteScramCredential(ctx, user, mechanism)
}

// CreateACLs implements coord.SecurityStore.
func (b *Backend) CreateACLs(ctx context.Context, acls []coord.ACL) error {
	return b.Current().CreateACLs(ctx, acls)
}

// DeleteACLs implements coord.SecurityStore.
func (b *Backend) DeleteACLs(ctx context.Context, filters []coord.ACLFilter) ([]coord.ACL, error) {
	return b.Current().DeleteACLs(ctx, filters)
}

// LoadConfigs implements coord.ConfigStore.
func (b *Backend) LoadConfigs(ctx context.Context) (*coord.ConfigState, error) {
	return b.Current().LoadConfigs(ctx)
}

// WatchConfigs implements coord.ConfigStore.
func (b *Backend) WatchConfigs(ctx context.Context) (<-chan *coord.ConfigState, error) {
	return watch(b, ctx, func(g *generation) func(context.Context) (<-chan *coord.ConfigState, error) { return g.b.WatchConfigs })
}

// AlterBrokerConfigs implements coord.ConfigStore.
func (b *Backend) AlterBrokerConfigs(ctx context.Context, entity string, replace bool, alterations []coord.ConfigAlteration) (map[string]string, error) {
	return b.Current().AlterBrokerConfigs(ctx, entity, replace, alterations)
}

// AlterClientQuotas implements coord.ConfigStore.
func (b *Backend) AlterClientQuotas(ctx context.Context, entity coord.QuotaEntity, alterations []coord.ConfigAlteration) (map[string]string, error) {
	return b.Current().AlterClientQuotas(ctx, entity, alterations)
}

// migrator returns the current backend as a Migrator.
func (b *Backend) migrator() (coord.Migrator, error) {
	g := b.current()
	m, ok := g.b.(coord.Migrator)
	if !ok {
		return nil, fmt.Errorf("coordination backend %s cannot migrate", g.name)
	}
	return m, nil
}

// Migration implements coord.Migrator.
func (b *Backend) Migration(ctx context.Context) (coord.Migration, bool, error) {
	m, err := b.migrator()
	if err != nil {
		return coord.Migration{}, false, err
	}
	return m.Migration(ctx)
}

// SetMigration implements coord.Migrator.
func (b *Backend) SetMigration(ctx context.Context, prev *coord.Migration, rec coord.Migration) (int64, error) {
	m, err := b.migrator()
	if err != nil {
		return 0, err
	}
	return m.SetMigration(ctx, prev, rec)
}

// NextProducerID implements coord.Migrator.
func (b *Backend) NextProducerID(ctx context.Context) (int64, error) {
	m, err := b.migrator()
	if err != nil {
		return 0, err
	}
	return m.NextProducerID(ctx)
}

// WatchMigration implements coord.Migrator.
func (b *Backend) WatchMigration(ctx context.Context) (<-chan coord.MigrationRecord, error) {
	if _, err := b.migrator(); err != nil {
		return nil, err
	}
	return watch(b, ctx, func(g *generation) func(context.Context) (<-chan coord.MigrationRecord, error) {
		return g.b.(coord.Migrator).WatchMigration
	})
}

// Import implements coord.Migrator.
func (b *Backend) Import(ctx context.Context, snap *coord.Snapshot, rec coord.Migration) error {
	m, err := b.migrator()
	if err != nil {
		return err
	}
	return m.Import(ctx, snap, rec)
}

// PreCopy implements coord.Migrator.
func (b *Backend) PreCopy(ctx context.Context, snap *coord.Snapshot, rec coord.Migration) error {
	m, err := b.migrator()
	if err != nil {
		return err
	}
	return m.PreCopy(ctx, snap, rec)
}

// ImportChanges implements coord.Migrator.
func (b *Backend) ImportChanges(ctx context.Context, base, snap *coord.Snapshot, rec coord.Migration) error {
	m, err := b.migrator()
	if err != nil {
		return err
	}
	return m.ImportChanges(ctx, base, snap, rec)
}

// watch starts the current generation's watch (method picks it) with a
// context that also ends with the generation, so its channel closes at
// a switch and the caller watches again, on the target. A goroutine
// owned by b forwards the values and releases the context when the
// watch ends.
func watch[S any](b *Backend, ctx context.Context, method func(*generation) func(context.Context) (<-chan S, error)) (<-chan S, error) {
	g := b.current()
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.ctx, cancel)
	in, err := method(g)(wctx)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	out := make(chan S)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		stop()
		cancel()
		return nil, coord.ErrClosed
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		defer close(out)
		defer cancel()
		defer stop()
		for v := range in {
			select {
			case out <- v:
			case <-wctx.Done():
				// The receiver may be gone; the inner channel closes
				// soon, as wctx ended.
			}
		}
	}()
	return out, nil
}
