package broker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

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

// producerIDCounterLimit bounds counter+1 in a signed id: it takes the
// upper 31 bits of a positive int64.
const producerIDCounterLimit = 1 << 31

// signedProducerIDMin is the lowest signed producer id: lower ids are
// legacy ones, handed out before ids were signed.
const signedProducerIDMin = 1 << 32

// producerIDSigner signs and verifies producer ids with the cluster's key.
type producerIDSigner struct {
	key []byte
}

// mac is the first 32 bits of HMAC-SHA256(key, counter ‖ principal).
func (s *producerIDSigner) mac(counter int64, principal security.Principal) uint32 {
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
func (s *producerIDSigner) sign(counter int64, principal security.Principal) (int64, error) {
	if counter < 0 || counter+1 >= producerIDCounterLimit {
		return 0, fmt.Errorf("producer id counter %d: exhausted the %d signable producer ids", counter, int64(producerIDCounterLimit-1))
	}
	return (counter+1)<<32 | int64(s.mac(counter, principal)), nil
}

// verify reports whether id was signed for principal.
func (s *producerIDSigner) verify(id int64, principal security.Principal) bool {
	if id < signedProducerIDMin {
		return false
	}
	return subtle.ConstantTimeEq(int32(uint32(id)), int32(s.mac(id>>32-1, principal))) == 1
}

// producerIDCounter returns the counter a signed producer id carries.
func producerIDCounter(id int64) int64 { return id>>32 - 1 }

// producerIDKeyRetryMax bounds the pause between two attempts to read the
// producer id key while the coordination service cannot be reached.
const producerIDKeyRetryMax = 2 * time.Second

// signer returns the signer of the cluster's key, or nil while the broker
// has not read it yet.
func (m *producerIDManager) signer() *producerIDSigner { return m.key.Load() }

// loadKey reads the cluster's producer id key, proposing fresh random
// bytes in case this is the first call of the cluster, unless the
// broker has it already; the key never changes, so it is read once.
func (m *producerIDManager) loadKey(ctx context.Context) (*producerIDSigner, error) {
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
	s := &producerIDSigner{key: key}
	if !m.key.CompareAndSwap(nil, s) {
		return m.key.Load(), nil
	}
	return s, nil
}

// keepLoadingKey reads the producer id key as soon as the coordination
// service answers, so that the broker verifies the producer ids of a
// Produce even if it never hands one out; it retries until it has the key
// or the manager closes. It runs on the manager's goroutine.
func (m *producerIDManager) keepLoadingKey() {
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

// issue signs counter, an id of this broker's blocks, for the principal
// of connection c and remembers on c that the id is c's.
func (m *producerIDManager) issue(c *connState, counter int64) (int64, error) {
	s := m.signer()
	if s == nil {
		return 0, fmt.Errorf("%w: producer id key not read yet", coord.ErrUnavailable)
	}
	principal := c.principal()
	id, err := s.sign(counter, principal)
	if err != nil {
		return 0, err
	}
	c.producerIDs.add(id, principal)
	return id, nil
}

// producerIDVerdict is what checking a producer id for a connection found.
type producerIDVerdict int

const (
	// producerIDIssued: the id was handed to the connection's principal.
	producerIDIssued producerIDVerdict = iota
	// producerIDForeign: it was not (made up, or another principal's).
	producerIDForeign
	// producerIDKeyUnknown: the broker has not read the key yet.
	producerIDKeyUnknown
	// producerIDLegacy: a legacy id, handed out before ids were signed.
	producerIDLegacy
)

// verify checks that id was handed to the principal of connection c,
// from c's cache of verified ids when it can.
func (m *producerIDManager) verify(c *connState, id int64) producerIDVerdict {
	principal := c.principal()
	if c.producerIDs.has(id, principal) {
		return producerIDIssued
	}
	if id < signedProducerIDMin {
		return producerIDLegacy
	}
	s := m.signer()
	if s == nil {
		return producerIDKeyUnknown
	}
	if !s.verify(id, principal) {
		return producerIDForeign
	}
	c.producerIDs.add(id, principal)
	return producerIDIssued
}

// producerIDCacheSize is how many verified producer ids a connection
// remembers: a client normally has one producer id per connection.
const producerIDCacheSize = 4

// verifiedProducerIDs is a connection's cache of the producer ids verified
// for its principal, so that a Produce in steady state pays no HMAC. The
// principal is kept with each id: SASL reauthentication may change it.
type verifiedProducerIDs struct {
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
func (v *verifiedProducerIDs) has(id int64, principal security.Principal) bool {
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
func (v *verifiedProducerIDs) add(id int64, principal security.Principal) {
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

// batchProducerIDOffset is where a v2 record batch holds its producer id,
// and batchHeaderSize how long its header is.
const (
	batchProducerIDOffset = 43
	batchMagicOffset      = 16
	batchHeaderSize       = 61
)

// checkProducerIDs returns 0 when no batch of records, a partition's part
// of a Produce arriving on connection c, names a producer id (one >= 0)
// that was not handed to c's principal (or, a legacy id, that the
// partition does not know), and otherwise the error the partition is
// answered with: UNKNOWN_PRODUCER_ID (Kafka's answer to a producer id a
// partition does not know; franz-go and Kafka's producer bump their epoch
// and resend, and the application sees no error unless the record's
// delivery timeout passes), or COORDINATOR_LOAD_IN_PROGRESS, retriable,
// while the broker has not read the cluster's producer id key yet.
// Batches without a producer id (-1, not idempotent) pass. It reads only
// the batch headers; batches too short to hold one, or not v2, are left
// to the validation of the batch, which refuses them.
func (b *Broker) checkProducerIDs(c *connState, topic string, partition int32, records []byte) int16 {
	for rest := records; len(rest) >= batchHeaderSize && rest[batchMagicOffset] == 2; {
		id := int64(binary.BigEndian.Uint64(rest[batchProducerIDOffset:]))
		if id >= 0 {
			verdict := b.producerIDs.verify(c, id)
			if verdict == producerIDLegacy && b.knowsProducer(topic, partition, id) {
				verdict = producerIDIssued
			}
			switch verdict {
			case producerIDKeyUnknown:
				return kerr.CoordinatorLoadInProgress.Code
			case producerIDForeign, producerIDLegacy:
				b.producerIDs.refusals.log(b.logger, "produce refused: the producer id was not handed to this principal",
					"principal", c.principal().String(), "remote", c.remote, "producer_id", id, "topic", topic, "partition", partition)
				return kerr.UnknownProducerID.Code
			}
		}
		// A batch's length counts what follows the length field.
		next := 12 + int64(int32(binary.BigEndian.Uint32(rest[8:])))
		if next < batchHeaderSize || next > int64(len(rest)) {
			break
		}
		rest = rest[next:]
	}
	return 0
}

// knowsProducer reports whether the producer state of topic's partition,
// led by this broker, holds producer id id.
func (b *Broker) knowsProducer(topic string, partition int32, id int64) bool {
	p := b.replicas.PartitionFor(topic, partition)
	if p == nil {
		return false
	}
	return p.KnowsProducer(id)
}

// producerIDRefusalLogInterval is how often at most a refused producer id
// is logged.
const producerIDRefusalLogInterval = time.Second
