// Package coord is the coordination contract of tripod: the Backend
// interfaces that ZooKeeper (coord/zk), etcd (coord/etcd) and embedded Raft
// (coord/raft) implement, the types they share, and the sentinel errors
// they return. It is a spec and nothing else: the controller that uses it
// lives in package controller.
//
// coord owns who is alive (sessions), who is the controller (election), the
// cluster metadata (topics and partition states), the cluster's producer id
// counter, its security store (SCRAM credentials and ACLs, security.go)
// and its dynamic broker configs (configs.go).
// It imports nothing of tripod (the backends and the controller import it),
// takes no leadership decision and performs no Kafka protocol I/O.
//
// This file is the spec. Every method says what it returns, whether it blocks
// and what its context does. All methods are safe for concurrent use.
package coord

import (
	"context"
)

// Registrar keeps broker sessions: a registered broker is live until its
// session ends.
type Registrar interface {
	// Register makes b live until the returned Session ends. The Session's
	// Broker carries a fresh broker epoch, greater than the epoch of every
	// earlier registration of any broker, so a restarted broker is told apart
	// from its old self. Register blocks until the registration is durable
	// in the coordination service or ctx ends.
	//
	// Replacing a dead incarnation (KRaft's incarnation rule): when a live
	// registration of b.ID exists and its broker epoch is b.Replaces (not
	// 0), Register removes it, conditionally on its still being that very
	// registration, together with whatever else of its session lingers
	// (its election key or lease), and makes the new one at once, with a
	// new, greater epoch, instead of waiting for the old one to expire.
	// Watchers see the old registration leave and the new one arrive, or
	// directly the new epoch. The caller vouches that the old incarnation
	// is dead; Session.Replaced reports the epoch that was replaced.
	//
	// Errors: ErrExists if a live session already holds b.ID and its epoch
	// is not b.Replaces (a broker still registered by another process, the
	// same broker.id on another data dir, or a previous incarnation that
	// has not expired yet: callers retry until it expires); ErrUnavailable
	// when the service cannot be reached before ctx ends; ctx.Err() when
	// ctx ends first.
	Register(ctx context.Context, b Broker) (Session, error)

	// Members returns the live brokers, ordered by ID. It does not block
	// beyond one read of the service. Errors: ErrUnavailable, ctx.Err().
	Members(ctx context.Context) ([]Broker, error)

	// WatchMembers sends the whole set of live brokers (ordered by ID) on the
	// returned channel: first the current set, then a new set after every
	// change. Sets may be coalesced (a watcher may miss an intermediate set)
	// but are never older than one already sent. The channel is closed when
	// ctx ends or the backend is closed; a watcher that falls behind sees only
	// the latest set. Errors (from the call itself): ErrUnavailable,
	// ctx.Err().
	WatchMembers(ctx context.Context) (<-chan []Broker, error)
}

// Elector elects the cluster's one controller.
type Elector interface {
	// Campaign blocks until the broker holding s is the controller, then
	// returns its Term. Leadership is bound to s: when s ends, the Term ends.
	// On ZooKeeper and etcd a campaigner competes with the other registered
	// brokers; on Raft the controller is the Raft leader and Campaign waits
	// for this node to lead.
	//
	// Errors: ErrSessionExpired or ErrClosed if s ends first; ctx.Err() if
	// ctx ends first (the campaign is withdrawn); ErrUnavailable is not
	// returned: an unreachable service makes Campaign wait.
	Campaign(ctx context.Context, s Session) (Term, error)

	// Controller returns the current controller, or ControllerInfo{ID:
	// NoBroker} when there is none. It does not block beyond one read.
	// Errors: ErrUnavailable, ctx.Err().
	Controller(ctx context.Context) (ControllerInfo, error)

	// WatchController sends the current controller on the returned channel,
	// then every change (ID NoBroker while there is none). Values may be
	// coalesced but their Epoch never decreases. The channel is closed when
	// ctx ends or the backend is closed. Errors: ErrUnavailable, ctx.Err().
	WatchController(ctx context.Context) (<-chan ControllerInfo, error)
}

// MetadataStore holds the cluster metadata: topics and partition states.
type MetadataStore interface {
	// Load reads the whole metadata. It does not block beyond the reads it
	// needs. Errors: ErrUnavailable, ctx.Err().
	Load(ctx context.Context) (*Metadata, error)

	// Commit applies ops on behalf of the controller holding term.
	//
	// Fencing: if term is no longer the current controller term (a newer
	// controller has been elected, or term's session ended), Commit fails
	// with ErrFenced and changes nothing.
	//
	// Atomicity: the backend splits large commits into chunks that its
	// service accepts (etcd: ≤ 128 ops a txn; ZooKeeper: ≤ ~1 MB a request;
	// Raft: one log entry per chunk). Each chunk is applied atomically and
	// fenced. A chunk that writes or compares a key an earlier chunk
	// writes is applied after it; chunks that share no key may be applied
	// concurrently (etcd does, a transaction being a round trip each;
	// Raft, for a commit of distinct partitions' states).
	// Commit returns the error of the first chunk that failed, in op
	// order: the chunks it waited for are applied, the chunks that ran
	// beside it are applied or not (Load tells), and no later one is
	// tried. Ops in one call must not depend on each other except that a
	// CreateTopic comes before SetPartitions of that topic.
	//
	// Errors: ErrFenced; ErrVersionMismatch if a SetPartition's
	// ExpectedEpoch is not the stored partition epoch (nothing of its chunk
	// is applied); ErrExists for CreateTopic of an existing topic; ErrNotFound
	// for SetTopic, DeleteTopic or SetPartition of a missing topic or
	// partition; ErrTooLarge, before anything is written, for a value the
	// backend cannot store; ErrUnavailable; ctx.Err(). Commit blocks until
	// the chunks are durable or ctx ends; when ctx ends mid-commit the
	// outcome of the chunk in flight is unknown.
	Commit(ctx context.Context, term Term, ops ...Op) error

	// WatchMetadata sends the whole metadata on the returned channel: first
	// the current state, then a newer state after changes. States may be
	// coalesced but their Version never decreases, and every committed
	// change is contained in some later state. The channel is closed when
	// ctx ends or the backend is closed. Errors: ErrUnavailable, ctx.Err().
	WatchMetadata(ctx context.Context) (<-chan *Metadata, error)
}

// ProducerIDAllocator hands out blocks of Kafka producer ids, unique across
// the cluster and its restarts, and the key brokers sign them with. The
// blocks are Kafka's ZooKeeper-mode /latest_producer_id_block: a
// compare-and-set on one counter, which needs no session and no controller
// Term; the key is a create-if-absent of one value.
type ProducerIDAllocator interface {
	// AllocateProducerIDs reserves the next block of ProducerIDBlockSize ids
	// for broker and returns it. The block's First is above the Last of
	// every block reserved before it, by any broker of the cluster, in this
	// run or an earlier one. It blocks until the reservation is durable in
	// the coordination service (concurrent reservations are retried on
	// conflict) or ctx ends.
	//
	// A block is never handed out twice, even when the caller or the
	// service fails mid-allocation: a block whose allocation outcome is
	// unknown (ctx ended or the connection dropped after the write was
	// sent) is skipped, never reused, so ids may be lost but never repeat.
	//
	// Errors: ErrUnavailable when the service cannot be reached before ctx
	// ends (on Raft: no leader), or when conflicting reservations keep
	// winning; ctx.Err() when ctx ends first (some backends wrap it together
	// with ErrUnavailable: test with errors.Is); ErrClosed once the backend
	// is closed; an error naming the key when the stored block cannot be
	// read or the ids are exhausted.
	AllocateProducerIDs(ctx context.Context, broker BrokerID) (ProducerIDBlock, error)

	// ProducerIDKey returns the cluster's producer id key: ProducerIDKeySize
	// secret bytes with which brokers sign the producer ids they hand out,
	// so that any broker can tell an id the cluster issued, and to whom,
	// from one a client made up. The first call in the life of the
	// cluster stores proposed (which must be ProducerIDKeySize bytes,
	// from a cryptographic random source) if no key is stored yet,
	// atomically: every call, by any broker, concurrent with the first or
	// after it, in this run or a later one, returns the same bytes, the
	// ones the first successful store wrote, whatever it proposes. The key
	// never changes. The backend keeps it from clients of the coordination
	// service that are not brokers where it can (ZooKeeper: the brokers'
	// ACL, as for the SCRAM credentials).
	//
	// It blocks until the key is read, or stored and durable, or ctx ends.
	// Errors: ErrUnavailable when the service cannot be reached before ctx
	// ends (on Raft: no leader); ctx.Err() when ctx ends first; ErrClosed
	// once the backend is closed; an error naming the key when proposed
	// or the stored key is not ProducerIDKeySize bytes.
	ProducerIDKey(ctx context.Context, proposed []byte) ([]byte, error)
}

// ControllerEvictor is implemented by the backends whose election node
// outlives a crashed controller's process until its session expires
// (ZooKeeper's /controller, etcd's election key); on Raft the Raft
// election follows the crash at once and there is nothing to evict. A
// broker that finds the controller's listener refusing connections (its
// process is gone) evicts it so that the next election starts at once;
// the controller epoch fences anything an evicted controller that is in
// fact alive may still write, and it loses its term.
type ControllerEvictor interface {
	// EvictController removes the election node if it still names info's
	// controller at info's epoch, atomically (a newer term is never
	// touched); when it names another, or none, it does nothing and
	// returns nil. Errors: ErrUnavailable, ctx.Err(), ErrClosed.
	EvictController(ctx context.Context, info ControllerInfo) error
}

// Backend is everything the controller and the brokers need from a
// coordination service. One Backend is opened per broker process.
type Backend interface {
	Registrar
	Elector
	MetadataStore
	ProducerIDAllocator
	SecurityStore
	ConfigStore

	// Close ends every session and term opened through this backend (as
	// Session.Close does: at once, not by expiry), stops its watches, and
	// waits for every goroutine it started. Further calls fail with
	// ErrClosed.
	Close() error
}

// Session is a broker's registration. It ends when closed or when the
// coordination service expires it because the process stopped renewing it
// (crashed, paused, or cut off for longer than the session timeout).
type Session interface {
	// Broker returns the registered broker with its broker epoch (and a
	// zero Replaces).
	Broker() Broker

	// Replaced returns the broker epoch of the live registration that
	// Register removed to make this one (see Broker.Replaces), or 0 when
	// there was none: Register then registered as it does without
	// Replaces.
	Replaced() int64

	// Done is closed when the session has ended.
	Done() <-chan struct{}

	// Err returns nil while the session is live, then ErrSessionExpired
	// (expired by the service) or ErrClosed (closed by Close).
	Err() error

	// Close removes the registration at once, so watchers see the broker
	// leave without waiting for the timeout, and ends any Term bound to it.
	// It waits for the session's goroutines. Closing twice is a no-op.
	Close() error
}

// Term is one controller's tenure.
type Term interface {
	// Controller returns the broker that holds this term.
	Controller() BrokerID

	// Epoch returns the controller epoch: greater than every earlier term's
	// epoch in this cluster. Controller requests carry it so brokers can
	// refuse a deposed (zombie) controller.
	Epoch() int64

	// Context returns a context that is cancelled when the term is lost:
	// the session ended, another controller was elected, or Resign.
	Context() context.Context

	// Done is Context().Done().
	Done() <-chan struct{}

	// Resign gives up the controllership at once so another campaigner can
	// win, and cancels Context. Resigning a lost term is a no-op.
	Resign(ctx context.Context) error
}
