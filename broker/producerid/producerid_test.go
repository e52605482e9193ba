package producerid

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
	_ "github.com/tripodmq/tripod/coord/raft" // coordination.backend=raft
)

// openBackend opens a one-node embedded Raft coordination backend, as a
// broker with the default configuration does, closed when the test ends.
func openBackend(t *testing.T) coord.Backend {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Listeners = "PLAINTEXT://127.0.0.1:0"
	cfg.LogDirs = []string{t.TempDir()}
	cfg.Coord.RaftHeartbeatTimeout = 100 * time.Millisecond
	cfg.Coord.RaftElectionTimeout = 100 * time.Millisecond
	cfg.Coord.RaftLeaderLeaseTimeout = 50 * time.Millisecond
	backend, err := coord.Open(cfg.CoordConfig())
	if err != nil {
		t.Fatalf("open the coordination backend: %v", err)
	}
	t.Cleanup(func() { backend.Close() })
	return backend
}

// TestProducerIDsPrefetchNextBlock: the first id asked for reserves a
// block, from a real coordination backend (embedded Raft); once 90 % of it is handed out the next block is reserved in the
// background, so the id after the block's last is ready without waiting
// and comes from the next block.
func TestProducerIDsPrefetchNextBlock(t *testing.T) {
	m := NewManager(openBackend(t), 1, hclog.NewNullLogger())
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := m.Generate(ctx)
	if err != nil {
		t.Fatalf("first producer id: %v", err)
	}
	m.mu.Lock()
	block := m.current
	m.mu.Unlock()
	for id := first + 1; id < block.First+block.Size*producerIDPrefetch/10; id++ {
		if got, ok := m.Take(); !ok || got != id {
			t.Fatalf("take: got %d, %v, want %d, true", got, ok, id)
		}
	}
	for {
		m.mu.Lock()
		fetched := m.prefetched != nil
		m.mu.Unlock()
		if fetched {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the next block not reserved after 90 % of the first was handed out")
		case <-time.After(10 * time.Millisecond):
		}
	}
	var last int64
	for id := block.First + block.Size*producerIDPrefetch/10; id <= block.Last()+1; id++ {
		got, ok := m.Take()
		if !ok || (id <= block.Last() && got != id) {
			t.Fatalf("take: got %d, %v, want %d, true", got, ok, id)
		}
		last = got
	}
	if last <= block.Last() {
		t.Fatalf("the id after %v: got %d, want one of the next block", block, last)
	}
}

// TestProducerIDSignature: a signed id verifies for the principal it was
// signed for and for no other, nor with its mac or its counter changed,
// nor under another key; every signed id is at least signedProducerIDMin,
// carries its counter, and counters past producerIDCounterLimit are
// refused.
func TestProducerIDSignature(t *testing.T) {
	s := &idSigner{key: make([]byte, 32)}
	other := &idSigner{key: append(make([]byte, 31), 1)}
	alice, bob := security.Principal{Type: "User", Name: "alice"}, security.Principal{Type: "User", Name: "bob"}
	for _, counter := range []int64{0, 1, 999, 1000, producerIDCounterLimit - 2} {
		id, err := s.sign(counter, alice)
		if err != nil {
			t.Fatalf("sign counter %d: %v", counter, err)
		}
		if id < signedProducerIDMin || Counter(id) != counter {
			t.Fatalf("sign counter %d: got id %d (counter %d), want an id >= %d carrying the counter", counter, id, Counter(id), int64(signedProducerIDMin))
		}
		for what, ok := range map[string]bool{
			"its principal":   s.verify(id, alice),
			"another":         !s.verify(id, bob),
			"mac changed":     !s.verify(id^1, alice),
			"counter changed": !s.verify(id+1<<32, alice),
			"another key":     !other.verify(id, alice),
		} {
			if !ok {
				t.Errorf("id %d of counter %d verified for %s: got the wrong answer", id, counter, what)
			}
		}
	}
	if id, err := s.sign(producerIDCounterLimit-1, alice); err == nil {
		t.Errorf("sign counter %d: got id %d, want an error (exhausted)", int64(producerIDCounterLimit-1), id)
	}
}
