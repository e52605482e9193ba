package migration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// fakeBackend is the little of a coord.Backend these tests reach:
// Register, a Campaign that ends with its session, and Close, which ends
// every session with ErrClosed. It keeps no migration record, so a
// Backend over it follows none.
type fakeBackend struct {
	coord.Backend

	mu       sync.Mutex
	sessions []*fakeSession
	closed   bool
}

type fakeSession struct {
	coord.Session
	broker coord.Broker
	done   chan struct{}

	mu  sync.Mutex
	err error
}

func (s *fakeSession) Broker() coord.Broker  { return s.broker }
func (s *fakeSession) Done() <-chan struct{} { return s.done }

func (s *fakeSession) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *fakeSession) Close() error {
	s.end(coord.ErrClosed)
	return nil
}

// end ends s with err, once.
func (s *fakeSession) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

func (b *fakeBackend) Register(_ context.Context, br coord.Broker) (coord.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, coord.ErrClosed
	}
	br.Epoch = int64(len(b.sessions) + 1)
	s := &fakeSession{broker: br, done: make(chan struct{})}
	b.sessions = append(b.sessions, s)
	return s, nil
}

// Campaign returns ErrSessionExpired as soon as s ends, as a backend's
// Campaign does whose session the service expired.
func (b *fakeBackend) Campaign(ctx context.Context, s coord.Session) (coord.Term, error) {
	select {
	case <-s.Done():
		return nil, fmt.Errorf("%w: broker %d", coord.ErrSessionExpired, s.Broker().ID)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *fakeBackend) Close() error {
	b.mu.Lock()
	b.closed = true
	sessions := b.sessions
	b.mu.Unlock()
	for _, s := range sessions {
		s.end(coord.ErrClosed)
	}
	return nil
}

// openFake opens a Backend over a fakeBackend.
func openFake(t *testing.T) (*Backend, *fakeBackend) {
	t.Helper()
	fake := &fakeBackend{}
	b, err := Open(coord.Config{Backend: "fake"}, func(coord.Migration) (coord.Config, error) {
		return coord.Config{}, errors.New("no target")
	}, func(coord.Config) (coord.Backend, error) { return fake, nil }, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b, fake
}

// TestCloseEndsSessionsClosed: once Close returns, every session handed
// out has ended, with ErrClosed: the Backend was closed, the cluster did
// not move to another backend.
func TestCloseEndsSessionsClosed(t *testing.T) {
	b, _ := openFake(t)
	var sessions []coord.Session
	for id := range coord.BrokerID(20) {
		s, err := b.Register(context.Background(), coord.Broker{ID: id + 1})
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		sessions = append(sessions, s)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, s := range sessions {
		select {
		case <-s.Done():
		default:
			t.Fatalf("session of broker %d after Close: live, want ended", s.Broker().ID)
		}
		if err := s.Err(); !errors.Is(err, coord.ErrClosed) {
			t.Fatalf("session of broker %d after Close: Err %v, want ErrClosed", s.Broker().ID, err)
		}
	}
	if _, err := b.Register(context.Background(), coord.Broker{ID: 99}); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Register after Close: got %v, want ErrClosed", err)
	}
}

// TestCampaignEndsWithItsSession: a Campaign that fails because its
// session ended returns once the session's Done is closed, as the
// contract has it (ErrSessionExpired if s ends first).
func TestCampaignEndsWithItsSession(t *testing.T) {
	b, fake := openFake(t)
	for i := range 200 {
		s, err := b.Register(context.Background(), coord.Broker{ID: 1})
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		fake.mu.Lock()
		inner := fake.sessions[len(fake.sessions)-1]
		fake.mu.Unlock()
		inner.end(fmt.Errorf("%w: expired by the service", coord.ErrSessionExpired))
		if _, err := b.Campaign(context.Background(), s); !errors.Is(err, coord.ErrSessionExpired) {
			t.Fatalf("attempt %d: Campaign on an expired session: got %v, want ErrSessionExpired", i, err)
		}
		select {
		case <-s.Done():
		default:
			t.Fatalf("attempt %d: Campaign returned ErrSessionExpired while the session's Done is open", i)
		}
	}
}
