package broker

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/producerid"
)

// InitProducerID v0..v4 (v3+ may ask to bump an existing producer's epoch).
func init() { registerAPI(22, 0, 4, handleInitProducerID) }

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
