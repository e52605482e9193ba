package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID v0..v4 (v3+ may ask to bump an existing producer's epoch).
func init() { registerAPI(22, 0, 4, handleInitProducerID) }

// handleInitProducerID hands an idempotent producer a fresh producer id
// (epoch 0), or bumps the epoch of the id it already holds. Transactional
// producers are refused: tripod has no transaction coordinator yet.
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
		resp.ProducerID = r.ProducerID
		resp.ProducerEpoch = r.ProducerEpoch + 1
		return resp, nil, nil
	}
	id, err := b.producerIDs.next()
	if err != nil {
		b.logger.Error("allocate producer id failed", "error", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, nil
	}
	resp.ProducerID = id
	resp.ProducerEpoch = 0
	return resp, nil, nil
}

// producerIDBlockSize is how many producer ids are reserved per write of
// the allocator's file.
const producerIDBlockSize = 1000

// producerIDFile holds the first producer id not yet reserved.
const producerIDFile = "producer_ids.json"

// producerIDAllocator hands out producer ids that are never reused, also
// across restarts: it reserves blocks by persisting the end of the current
// block before handing out ids from it.
type producerIDAllocator struct {
	path string

	mu       sync.Mutex
	nextID   int64
	blockEnd int64
}

// openProducerIDAllocator reads the allocator's state in dir.
func openProducerIDAllocator(dir string) (*producerIDAllocator, error) {
	a := &producerIDAllocator{path: filepath.Join(dir, producerIDFile)}
	data, err := os.ReadFile(a.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read producer id state %s: %w", a.path, err)
	default:
		var st struct {
			NextBlock int64 `json:"next_block"`
		}
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, fmt.Errorf("parse producer id state %s: %w", a.path, err)
		}
		a.nextID, a.blockEnd = st.NextBlock, st.NextBlock
	}
	return a, nil
}

// next returns an unused producer id.
func (a *producerIDAllocator) next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nextID >= a.blockEnd {
		end := a.nextID + producerIDBlockSize
		data, _ := json.Marshal(struct {
			NextBlock int64 `json:"next_block"`
		}{end})
		if err := writeFileAtomic(a.path, data); err != nil {
			return 0, err
		}
		a.blockEnd = end
	}
	id := a.nextID
	a.nextID++
	return id, nil
}
