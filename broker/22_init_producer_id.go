package broker

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/producerid"
	"github.com/tripodmq/tripod/broker/txncoord"
)

// InitProducerID v0..v5 (v3+ may ask to bump an existing producer's
// epoch; v5 is KIP-890's, answered as v4).
func init() { registerAPI(22, 0, 5, handleInitProducerID) }

// producerIDWait bounds how long an InitProducerID waits for a block of
// producer ids when the broker has none left; then it is answered
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
const producerIDWait = 5 * time.Second

// handleInitProducerID hands an idempotent producer a fresh producer id
// (epoch 0), signed for the connection's principal (broker/producerid),
// or bumps the epoch of the id it already holds (KIP-360) if that id was
// handed to the same principal; an id that was not, and one at epoch
// exhaustion, gets a fresh id. Ids come from blocks the
// coordination backend reserves for this broker; a request that finds no
// id ready waits for the next block off the connection's reader, at most
// producerIDWait. A transactional producer is answered by the
// transaction coordinator (initTransactionalProducerID).
func handleInitProducerID(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID = -1
	resp.ProducerEpoch = -1
	if r.TransactionalID != nil {
		return initTransactionalProducerID(b, req, r, resp)
	}
	if r.Version >= 3 && r.ProducerID >= 0 && r.ProducerEpoch >= 0 && r.ProducerEpoch < math.MaxInt16-1 {
		if b.producerIDs.Verify(req.conn.principal(), &req.conn.producerIDs, r.ProducerID) == producerid.Issued {
			resp.ProducerID = r.ProducerID
			resp.ProducerEpoch = r.ProducerEpoch + 1
			return resp, nil, nil
		}
		// Another principal's id, or one never handed out (or handed
		// out before ids were signed): a fresh id, as Kafka answers
		// every InitProducerId without a transactional id, so that the
		// id's owner is not fenced and an upgraded client recovers.
		b.refusedProducerIDs.log(b.logger, "InitProducerID asked to bump a producer id not handed to this principal; handing out a fresh one",
			"principal", req.conn.principal().String(), "remote", req.conn.remote, "producer_id", r.ProducerID)
	}
	if counter, ok := b.producerIDs.Take(); ok {
		b.answerProducerID(req.conn, resp, counter)
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, producerIDWait)
		defer cancel()
		counter, err := b.producerIDs.Generate(ctx)
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
	id, err := b.producerIDs.Issue(c.principal(), &c.producerIDs, counter)
	if err != nil {
		b.logger.Error("InitProducerID answered UNKNOWN_SERVER_ERROR: cannot sign a producer id", "error", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
}

// initTransactionalProducerID answers an InitProducerId with a
// transactional id through the transaction coordinator, once its state
// is stored: the producer ids it hands out are this broker's, issued to
// the connection's principal so that its Produce requests pass the
// producer id check, and an id held by another principal is replaced
// when no transaction is open. An empty transactional id is
// INVALID_REQUEST, as in Kafka.
func initTransactionalProducerID(b *Broker, req *request, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) (kmsg.Response, laterFunc, error) {
	if *r.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil, nil
	}
	c := req.conn
	principal := c.principal()
	ir := txncoord.InitRequest{
		TransactionalID: *r.TransactionalID,
		TimeoutMs:       r.TransactionTimeoutMillis,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		NewProducerID: func(ctx context.Context) (int64, error) {
			counter, ok := b.producerIDs.Take()
			if !ok {
				ctx, cancel := context.WithTimeout(ctx, producerIDWait)
				defer cancel()
				var err error
				if counter, err = b.producerIDs.Generate(ctx); err != nil {
					return 0, err
				}
			}
			return b.producerIDs.Issue(principal, &c.producerIDs, counter)
		},
		Owns: func(id int64) bool {
			v := b.producerIDs.Verify(principal, &c.producerIDs, id)
			return v == producerid.Issued || v == producerid.KeyUnknown
		},
	}
	if r.Version >= 3 {
		ir.ProducerID, ir.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	}
	return nil, func(ctx context.Context) kmsg.Response {
		res := b.txns.InitProducerID(ctx, ir)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = fencedBefore(r.Version, 4, res.Code), res.ProducerID, res.ProducerEpoch
		return resp
	}, nil
}

// fencedBefore is code as a request of version answers it: before
// version since (KIP-588), PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
func fencedBefore(version, since, code int16) int16 {
	if version < since && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
