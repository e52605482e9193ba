package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// InitProducerID v0..v4 (v3+ may ask to bump an existing producer's epoch).
func init() { registerAPI(22, 0, 4, handleInitProducerID) }

// producerIDWait bounds how long an InitProducerID waits for a block of
// producer ids when the broker has none left; then it is answered
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
const producerIDWait = 5 * time.Second

// handleInitProducerID hands an idempotent producer a fresh producer id
// (epoch 0), signed for the connection's principal (producer_id_check.go),
// or bumps the epoch of the id it already holds (KIP-360) if that id was
// handed to the same principal; an id that was not, and one at epoch
// exhaustion, gets a fresh id. Ids come from blocks the
// coordination backend reserves for this broker; a request that finds no
// id ready waits for the next block off the connection's reader, at most
// producerIDWait. Transactional producers are refused: tripod has no
// transaction coordinator yet.
func handleInitProducerID(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID = -1
	resp.ProducerEpoch = -1
	if r.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil, nil
	}
	if r.Version >= 3 && r.ProducerID >= 0 && r.ProducerEpoch >= 0 && r.ProducerEpoch < math.MaxInt16-1 {
		if b.producerIDs.verify(req.conn, r.ProducerID) == producerIDIssued {
			resp.ProducerID = r.ProducerID
			resp.ProducerEpoch = r.ProducerEpoch + 1
			return resp, nil, nil
		}
		// Another principal's id, or one never handed out (or handed
		// out before ids were signed): a fresh id, as Kafka answers
		// every InitProducerId without a transactional id, so that the
		// id's owner is not fenced and an upgraded client recovers.
		b.producerIDs.refusals.log(b.logger, "InitProducerID asked to bump a producer id not handed to this principal; handing out a fresh one",
			"principal", req.conn.principal().String(), "remote", req.conn.remote, "producer_id", r.ProducerID)
	}
	if counter, ok := b.producerIDs.take(); ok {
		b.answerProducerID(req.conn, resp, counter)
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, producerIDWait)
		defer cancel()
		counter, err := b.producerIDs.generate(ctx)
		if err != nil {
			b.logger.Warn("InitProducerID answered COORDINATOR_LOAD_IN_PROGRESS: no producer id block", "error", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
		b.answerProducerID(req.conn, resp, counter)
		return resp
	}, nil
}

// answerProducerID fills resp with counter, an id of this broker's blocks,
// signed for the principal of connection c, at epoch 0.
func (b *Broker) answerProducerID(c *connState, resp *kmsg.InitProducerIDResponse, counter int64) {
	id, err := b.producerIDs.issue(c, counter)
	if err != nil {
		b.logger.Error("InitProducerID answered UNKNOWN_SERVER_ERROR: cannot sign a producer id", "error", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
}

// producerIDFetchTimeout bounds one reservation of a block through the
// coordination backend.
const producerIDFetchTimeout = 10 * time.Second

// producerIDPrefetch is the share of a block handed out after which the
// next block is reserved in the background (Kafka's
// PRODUCER_ID_BLOCK_PREFETCH_THRESHOLD, 90 %), in tenths.
const producerIDPrefetch = 9

// producerIDManager hands out this broker's producer ids from blocks that
// the coordination backend reserves for it (Kafka's RPCProducerIdManager):
// unique across the cluster and its restarts, since a block is reserved in
// the coordination service and nothing is kept on disk. The first block is
// reserved when the first id is asked for; the next one in the background
// once 90 % of the current one is handed out. At most one reservation is in
// flight; its goroutine is the manager's, and close waits for it. The
// manager also reads the cluster's producer id key, from its start on a
// goroutine of its own (close waits for it too), and signs and verifies
// ids with it (producer_id_check.go); take and generate return the
// counters of the blocks, which issue signs.
type producerIDManager struct {
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
	// read (producer_id_check.go); blocks are reserved only after it is,
	// so an id taken from a block can be signed.
	key atomic.Pointer[producerIDSigner]
	// refusals logs the producer ids refused for a connection's principal.
	refusals rateLimitedLog
}

func newProducerIDManager(backend coord.ProducerIDAllocator, broker coord.BrokerID, logger hclog.Logger) *producerIDManager {
	life, stop := context.WithCancel(context.Background())
	m := &producerIDManager{backend: backend, broker: broker, logger: logger, life: life, stop: stop,
		refusals: rateLimitedLog{interval: producerIDRefusalLogInterval}}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.keepLoadingKey()
	}()
	return m
}

// take returns the next producer id if one is ready, without waiting; when
// none is, it starts reserving a block (if no reservation is in flight) and
// reports false.
func (m *producerIDManager) take() (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.takeLocked()
	if !ok && m.fetching == nil {
		m.fetchLocked()
	}
	return id, ok
}

// generate returns the next producer id, waiting for a block to be
// reserved when none is ready, until ctx ends. It fails with the
// reservation's error when the reservation it waited for failed, with
// ctx's error when ctx ends first, and with coord.ErrClosed after close.
func (m *producerIDManager) generate(ctx context.Context) (int64, error) {
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
func (m *producerIDManager) takeLocked() (int64, bool) {
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
func (m *producerIDManager) fetchLocked() {
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

// close stops reserving blocks and waits for the reservation in flight,
// whose block, if the service granted it, is skipped.
func (m *producerIDManager) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	m.wg.Wait()
}
