// Package producerid hands out a broker's producer ids and verifies the
// ones clients name.
//
// Producer ids are signed, so that a broker can tell an id the cluster
// handed out, and to whom, from one a client made up. Kafka trusts any
// producer id a Produce names: a client that writes under an id no broker
// has handed out yet, with sequences 0, 1, ..., makes the idempotent
// producer later given that id lose its first acknowledged records (the
// leader answers them as duplicates), and a client that writes under a
// live producer's id, epoch and next sequences swallows that producer's
// next records, or fences it with a higher epoch.
//
// A producer id is (counter+1)<<32 | mac: counter is the id the broker's
// block gave (coord.ProducerIDAllocator; counter+1 below
// producerIDCounterLimit) and mac the first 32 bits of
// HMAC-SHA256(key, counter as 8 big-endian bytes ‖ principal), with the
// cluster's producer id key (coord's ProducerIDKey) and the principal of
// the connection the id was handed to, as Kafka writes it ("User:alice").
// Every broker reads the same key, so any of them verifies an id for a
// connection's principal without asking anyone: a Produce whose batch
// names a producer id that does not verify is refused with
// UNKNOWN_PRODUCER_ID, and an InitProducerId that asks to bump such an
// id's epoch gets a fresh id instead. On a listener without
// authentication every client is User:ANONYMOUS, and the check only
// proves that the id was handed out.
//
// Ids below signedProducerIDMin were handed out before ids were signed
// (the raw counters). Clients do not give such an id up when it is
// refused: franz-go, like Kafka's own producer (KIP-360), bumps its epoch
// locally and resends, again and again, and asks InitProducerId for a new
// id only at the last epoch. So that the producers running when a cluster
// is upgraded keep writing, such a legacy id is accepted on a partition
// whose producer state already holds it, where it wrote before, and
// refused on any other.
package producerid

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// producerIDCounterLimit bounds counter+1 in a signed id: it takes the
// upper 31 bits of a positive int64.
const producerIDCounterLimit = 1 << 31

// signedProducerIDMin is the lowest signed producer id: lower ids are
// legacy ones, handed out before ids were signed.
const signedProducerIDMin = 1 << 32

// idSigner signs and verifies producer ids with the cluster's key.
type idSigner struct {
	key []byte
}

// mac is the first 32 bits of HMAC-SHA256(key, counter ‖ principal).
func (s *idSigner) mac(counter int64, principal security.Principal) uint32 {
	h := hmac.New(sha256.New, s.key)
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(counter))
	h.Write(buf[:])
	h.Write([]byte(principal.String()))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint32(h.Sum(sum[:0]))
}

// sign returns the producer id of counter handed to principal. It fails
// when counter is negative or not below producerIDCounterLimit.
func (s *idSigner) sign(counter int64, principal security.Principal) (int64, error) {
	if counter < 0 || counter+1 >= producerIDCounterLimit {
		return 0, fmt.Errorf("producer id counter %d: exhausted the %d signable producer ids", counter, int64(producerIDCounterLimit-1))
	}
	return (counter+1)<<32 | int64(s.mac(counter, principal)), nil
}

// verify reports whether id was signed for principal.
func (s *idSigner) verify(id int64, principal security.Principal) bool {
	if id < signedProducerIDMin {
		return false
	}
	return subtle.ConstantTimeEq(int32(uint32(id)), int32(s.mac(id>>32-1, principal))) == 1
}

// Counter returns the counter a signed producer id carries.
func Counter(id int64) int64 { return id>>32 - 1 }

// producerIDKeyRetryMax bounds the pause between two attempts to read the
// producer id key while the coordination service cannot be reached.
const producerIDKeyRetryMax = 2 * time.Second

// signer returns the signer of the cluster's key, or nil while the broker
// has not read it yet.
func (m *Manager) signer() *idSigner { return m.key.Load() }

// loadKey reads the cluster's producer id key, proposing fresh random
// bytes in case this is the first call of the cluster, unless the
// broker has it already; the key never changes, so it is read once.
func (m *Manager) loadKey(ctx context.Context) (*idSigner, error) {
	if s := m.key.Load(); s != nil {
		return s, nil
	}
	proposed := make([]byte, coord.ProducerIDKeySize)
	if _, err := rand.Read(proposed); err != nil {
		return nil, fmt.Errorf("producer id key: %w", err)
	}
	key, err := m.backend.ProducerIDKey(ctx, proposed)
	if err != nil {
		return nil, err
	}
	s := &idSigner{key: key}
	if !m.key.CompareAndSwap(nil, s) {
		return m.key.Load(), nil
	}
	return s, nil
}

// keepLoadingKey reads the producer id key as soon as the coordination
// service answers, so that the broker verifies the producer ids of a
// Produce even if it never hands one out; it retries until it has the key
// or the manager closes. It runs on the manager's goroutine.
func (m *Manager) keepLoadingKey() {
	pause := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(m.life, producerIDFetchTimeout)
		_, err := m.loadKey(ctx)
		cancel()
		if err == nil || m.life.Err() != nil {
			return
		}
		m.logger.Debug("reading the producer id key failed; retrying", "error", err)
		select {
		case <-m.life.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, producerIDKeyRetryMax)
	}
}

// Issue signs counter, an id of this broker's blocks, for principal and
// remembers in verified, the cache of the connection it is handed to,
// that the id is principal's.
func (m *Manager) Issue(principal security.Principal, verified *Verified, counter int64) (int64, error) {
	s := m.signer()
	if s == nil {
		return 0, fmt.Errorf("%w: producer id key not read yet", coord.ErrUnavailable)
	}
	id, err := s.sign(counter, principal)
	if err != nil {
		return 0, err
	}
	verified.add(id, principal)
	return id, nil
}

// Verdict is what checking a producer id for a connection found.
type Verdict int

const (
	// Issued: the id was handed to the connection's principal.
	Issued Verdict = iota
	// Foreign: it was not (made up, or another principal's).
	Foreign
	// KeyUnknown: the broker has not read the key yet.
	KeyUnknown
	// Legacy: a legacy id, handed out before ids were signed.
	Legacy
)

// Verify checks that id was handed to principal, from verified, the
// cache of the connection that names it, when it can.
func (m *Manager) Verify(principal security.Principal, verified *Verified, id int64) Verdict {
	if verified.has(id, principal) {
		return Issued
	}
	if id < signedProducerIDMin {
		return Legacy
	}
	s := m.signer()
	if s == nil {
		return KeyUnknown
	}
	if !s.verify(id, principal) {
		return Foreign
	}
	verified.add(id, principal)
	return Issued
}

// producerIDCacheSize is how many verified producer ids a connection
// remembers: a client normally has one producer id per connection.
const producerIDCacheSize = 4

// Verified is a connection's cache of the producer ids verified
// for its principal, so that a Produce in steady state pays no HMAC. The
// principal is kept with each id: SASL reauthentication may change it.
type Verified struct {
	mu      sync.Mutex
	entries [producerIDCacheSize]verifiedProducerID
	// used is how many entries hold an id; next the one replaced next once
	// all do.
	used, next int
}

// verifiedProducerID is one entry of verifiedProducerIDs.
type verifiedProducerID struct {
	id        int64
	principal security.Principal
}

// has reports whether id was verified for principal.
func (v *Verified) has(id int64, principal security.Principal) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.entries[:v.used] {
		if e.id == id && e.principal == principal {
			return true
		}
	}
	return false
}

// add remembers that id was verified for principal, in place of the
// oldest entry when the cache is full.
func (v *Verified) add(id int64, principal security.Principal) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := verifiedProducerID{id: id, principal: principal}
	if v.used < len(v.entries) {
		v.entries[v.used] = e
		v.used++
		return
	}
	v.entries[v.next] = e
	v.next = (v.next + 1) % len(v.entries)
}

// producerIDFetchTimeout bounds one reservation of a block through the
// coordination backend.
const producerIDFetchTimeout = 10 * time.Second

// producerIDPrefetch is the share of a block handed out after which the
// next block is reserved in the background (Kafka's
// PRODUCER_ID_BLOCK_PREFETCH_THRESHOLD, 90 %), in tenths.
const producerIDPrefetch = 9

// Manager hands out this broker's producer ids from blocks that
// the coordination backend reserves for it (Kafka's RPCProducerIdManager):
// unique across the cluster and its restarts, since a block is reserved in
// the coordination service and nothing is kept on disk. The first block is
// reserved when the first id is asked for; the next one in the background
// once 90 % of the current one is handed out. At most one reservation is in
// flight; its goroutine is the manager's, and Close waits for it. The
// manager also reads the cluster's producer id key, from its start on a
// goroutine of its own (Close waits for it too), and signs and verifies
// ids with it (the top of this file); Take and Generate return the
// counters of the blocks, which Issue signs.
type Manager struct {
	backend coord.ProducerIDAllocator
	broker  coord.BrokerID
	logger  hclog.Logger
	// life ends when close begins; reservations run under it.
	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// current is the block ids are handed out from (Size 0 before the
	// first) and nextID its next id to hand out.
	current coord.ProducerIDBlock
	nextID  int64
	// prefetched is the block that follows current, once reserved.
	prefetched *coord.ProducerIDBlock
	// fetching is closed when the reservation in flight ends; nil while
	// none is.
	fetching chan struct{}
	// fetchErr is why the last reservation failed; nil after a success.
	fetchErr error

	// key is the signer of the cluster's producer id key, nil until it is
	// read; blocks are reserved only after it is,
	// so an id taken from a block can be signed.
	key atomic.Pointer[idSigner]
}

func NewManager(backend coord.ProducerIDAllocator, broker coord.BrokerID, logger hclog.Logger) *Manager {
	life, stop := context.WithCancel(context.Background())
	m := &Manager{backend: backend, broker: broker, logger: logger, life: life, stop: stop}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.keepLoadingKey()
	}()
	return m
}

// Take returns the next producer id if one is ready, without waiting; when
// none is, it starts reserving a block (if no reservation is in flight) and
// reports false.
func (m *Manager) Take() (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.takeLocked()
	if !ok && m.fetching == nil {
		m.fetchLocked()
	}
	return id, ok
}

// Generate returns the next producer id, waiting for a block to be
// reserved when none is ready, until ctx ends. It fails with the
// reservation's error when the reservation it waited for failed, with
// ctx's error when ctx ends first, and with coord.ErrClosed after close.
func (m *Manager) Generate(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if id, ok := m.takeLocked(); ok {
			return id, nil
		}
		if m.closed {
			return 0, fmt.Errorf("%w: producer ids of broker %d", coord.ErrClosed, m.broker)
		}
		if m.fetching == nil {
			m.fetchLocked()
		}
		done := m.fetching
		m.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			m.mu.Lock()
			return 0, ctx.Err()
		}
		m.mu.Lock()
		if m.prefetched == nil && m.fetchErr != nil {
			return 0, m.fetchErr
		}
	}
}

// takeLocked hands out the next id of the current block, moving to the
// prefetched block when the current one is used up, and starts the
// prefetch of the next block when 90 % of the current one is handed out.
func (m *Manager) takeLocked() (int64, bool) {
	if m.current.Size == 0 || m.nextID > m.current.Last() {
		if m.prefetched == nil {
			return 0, false
		}
		m.current, m.nextID, m.prefetched = *m.prefetched, m.prefetched.First, nil
	}
	id := m.nextID
	m.nextID++
	used := m.nextID - m.current.First
	if used*10 >= m.current.Size*producerIDPrefetch && m.prefetched == nil && m.fetching == nil {
		m.fetchLocked()
	}
	return id, true
}

// fetchLocked starts reserving a block in the background, unless the
// manager is closed.
func (m *Manager) fetchLocked() {
	if m.closed {
		return
	}
	done := make(chan struct{})
	m.fetching = done
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.life, producerIDFetchTimeout)
		var block coord.ProducerIDBlock
		_, err := m.loadKey(ctx)
		if err == nil {
			block, err = m.backend.AllocateProducerIDs(ctx, m.broker)
		}
		cancel()
		if err == nil && block.Size <= 0 {
			err = fmt.Errorf("producer id block of broker %d: got %v, want %d ids", m.broker, block, coord.ProducerIDBlockSize)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if err != nil {
			if !errors.Is(err, coord.ErrClosed) && m.life.Err() == nil {
				m.logger.Warn("reserving a block of producer ids failed", "error", err)
			}
			m.fetchErr = err
		} else {
			m.logger.Debug("reserved a block of producer ids", "first", block.First, "last", block.Last())
			m.prefetched, m.fetchErr = &block, nil
		}
		m.fetching = nil
		close(done)
	}()
}

// Close stops reserving blocks and waits for the reservation in flight,
// whose block, if the service granted it, is skipped.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	m.wg.Wait()
}
