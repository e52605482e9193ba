package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// Sizes of the concurrent producer id allocations.
const (
	producerIDBackends   = 3
	producerIDGoroutines = 20
	producerIDRounds     = 3
)

// allocateProducerIDs reserves a block through be for broker, retrying while
// the service is not ready (ErrUnavailable, a call deadline), and fails t
// when d passes first or the block is malformed.
func allocateProducerIDs(t T, be coord.Backend, broker coord.BrokerID, d time.Duration) coord.ProducerIDBlock {
	t.Helper()
	var block coord.ProducerIDBlock
	waitUntil(t, d, fmt.Sprintf("AllocateProducerIDs for broker %d", broker), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		var err error
		block, err = be.AllocateProducerIDs(ctx, broker)
		if err == nil {
			return true, ""
		}
		if errors.Is(err, coord.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return false, "last error: " + err.Error()
		}
		t.Fatalf("AllocateProducerIDs for broker %d: got error %v, want nil (or ErrUnavailable while the service starts)", broker, err)
		return false, ""
	})
	if why := malformed(block, broker); why != "" {
		t.Fatalf("AllocateProducerIDs for broker %d: %s", broker, why)
	}
	return block
}

// malformed says what is wrong with a block reserved for broker, "" when
// nothing is.
func malformed(block coord.ProducerIDBlock, broker coord.BrokerID) string {
	switch {
	case block.Size != coord.ProducerIDBlockSize:
		return fmt.Sprintf("got %v of size %d, want size %d", block, block.Size, coord.ProducerIDBlockSize)
	case block.Broker != broker:
		return fmt.Sprintf("got %v, want a block of broker %d", block, broker)
	case block.First < 0:
		return fmt.Sprintf("got %v, want ids >= 0", block)
	}
	return ""
}

// checkDisjoint fails t when two of blocks share a producer id.
func checkDisjoint(t T, blocks []coord.ProducerIDBlock, what string) {
	t.Helper()
	sorted := slices.Clone(blocks)
	slices.SortFunc(sorted, func(a, b coord.ProducerIDBlock) int { return cmp.Compare(a.First, b.First) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Overlaps(sorted[i-1]) {
			t.Fatalf("%s: %v and %v overlap, want every block handed out once", what, sorted[i-1], sorted[i])
		}
	}
}

// checkAbove fails t unless block starts above the last id of every block
// of earlier.
func checkAbove(t T, block coord.ProducerIDBlock, earlier []coord.ProducerIDBlock, what string) {
	t.Helper()
	for _, e := range earlier {
		if block.First <= e.Last() {
			t.Fatalf("%s: got %v, want a block above %v, reserved before", what, block, e)
		}
	}
}

// testConcurrentBlocksNeverOverlap: every backend of a cluster reserves
// producer id blocks from many goroutines at once; every block has
// ProducerIDBlockSize ids, names the broker it was reserved for, and no two
// share an id.
func testConcurrentBlocksNeverOverlap(t T, h Harness) {
	c := h.NewCluster(t, producerIDBackends)
	for i := range producerIDBackends {
		allocateProducerIDs(t, c.Backend(i), brokerFor(i).ID, startupBound(h))
	}
	var (
		mu     sync.Mutex
		blocks []coord.ProducerIDBlock
		v      violations
		wg     sync.WaitGroup
	)
	start := time.Now()
	for i := range producerIDBackends {
		be, broker := c.Backend(i), brokerFor(i).ID
		for range producerIDGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range producerIDRounds {
					ctx, cancel := context.WithTimeout(context.Background(), callBound)
					block, err := be.AllocateProducerIDs(ctx, broker)
					cancel()
					if err != nil {
						v.addf("AllocateProducerIDs for broker %d: got error %v, want nil", broker, err)
						return
					}
					if why := malformed(block, broker); why != "" {
						v.addf("AllocateProducerIDs for broker %d: %s", broker, why)
					}
					mu.Lock()
					blocks = append(blocks, block)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	v.report(t)
	if t.Failed() {
		return
	}
	if want := producerIDBackends * producerIDGoroutines * producerIDRounds; len(blocks) != want {
		t.Fatalf("got %d blocks, want %d", len(blocks), want)
	}
	checkDisjoint(t, blocks, "concurrent allocations")
	t.Logf("%d concurrent allocations from %d backends in %v", len(blocks), producerIDBackends, time.Since(start).Round(time.Millisecond))
}

// testRestartedBrokerContinuesAbove: each backend in turn is closed and
// opened again, as a restarted broker's is; the closed backend's calls fail
// with ErrClosed, and blocks reserved through the new one, and through the
// others, start above every block reserved before.
func testRestartedBrokerContinuesAbove(t T, h Harness) {
	c := h.NewCluster(t, producerIDBackends)
	var earlier []coord.ProducerIDBlock
	for i := range producerIDBackends {
		for range 2 {
			block := allocateProducerIDs(t, c.Backend(i), brokerFor(i).ID, startupBound(h))
			checkAbove(t, block, earlier, fmt.Sprintf("allocation by broker %d", i+1))
			earlier = append(earlier, block)
		}
	}
	for i := range producerIDBackends {
		closed := c.Backend(i)
		c.Restart(t, i)
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		_, err := closed.AllocateProducerIDs(ctx, brokerFor(i).ID)
		cancel()
		if !errors.Is(err, coord.ErrClosed) {
			t.Fatalf("AllocateProducerIDs on the closed backend %d: got %v, want ErrClosed", i+1, err)
		}
		for j := range producerIDBackends {
			be, broker := c.Backend((i+j)%producerIDBackends), brokerFor((i+j)%producerIDBackends).ID
			block := allocateProducerIDs(t, be, broker, startupBound(h))
			checkAbove(t, block, earlier, fmt.Sprintf("allocation by broker %d after broker %d restarted", broker, i+1))
			earlier = append(earlier, block)
		}
	}
}

// testCancelledAllocationNeverReused: allocations whose contexts end at
// random points around a typical allocation's duration, many at once,
// either return a
// block or fail with their context's error (or ErrUnavailable); blocks
// reserved afterwards, through every backend, are above every block
// returned before, and none overlaps another: a reservation whose outcome
// the caller never learned is skipped, not handed out again.
func testCancelledAllocationNeverReused(t T, h Harness) {
	c := h.NewCluster(t, producerIDBackends)
	var blocks []coord.ProducerIDBlock
	for i := range producerIDBackends {
		blocks = append(blocks, allocateProducerIDs(t, c.Backend(i), brokerFor(i).ID, startupBound(h)))
	}
	// typical is the median of a few uncontended allocations; the
	// deadlines below spread log-uniformly from a quarter of it to 64
	// times it, so that under contention some allocations end before
	// their write, some during it and some after.
	var took []time.Duration
	for range 5 {
		began := time.Now()
		blocks = append(blocks, allocateProducerIDs(t, c.Backend(0), brokerFor(0).ID, callBound))
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	typical := max(took[len(took)/2], 100*time.Microsecond)
	deadline := func() time.Duration {
		return time.Duration(float64(typical) / 4 * math.Exp2(8*rand.Float64()))
	}

	var (
		mu        sync.Mutex
		v         violations
		wg        sync.WaitGroup
		cancelled int
	)
	for i := range producerIDBackends {
		be, broker := c.Backend(i), brokerFor(i).ID
		for range producerIDGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range producerIDRounds {
					ctx, cancel := context.WithTimeout(context.Background(), deadline())
					block, err := be.AllocateProducerIDs(ctx, broker)
					cancel()
					mu.Lock()
					switch {
					case err == nil:
						if why := malformed(block, broker); why != "" {
							v.addf("AllocateProducerIDs for broker %d: %s", broker, why)
						}
						blocks = append(blocks, block)
					case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, coord.ErrUnavailable):
						cancelled++
					default:
						v.addf("AllocateProducerIDs for broker %d with a short deadline: got error %v, want nil, the context's error or ErrUnavailable", broker, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	v.report(t)
	if t.Failed() {
		return
	}
	checkDisjoint(t, blocks, "allocations with short deadlines")
	for i := range producerIDBackends {
		block := allocateProducerIDs(t, c.Backend(i), brokerFor(i).ID, callBound)
		checkAbove(t, block, blocks, fmt.Sprintf("allocation by broker %d after the cancelled ones", i+1))
		blocks = append(blocks, block)
	}
	t.Logf("%d allocations cut short by their deadlines (typical allocation %v), %d blocks reserved",
		cancelled, typical.Round(time.Microsecond), len(blocks))
}

// producerIDKey asks be for the producer id key, proposing proposed,
// retrying while the service is not ready (ErrUnavailable, a call
// deadline), and fails t when d passes first or the key is malformed.
func producerIDKey(t T, be coord.Backend, proposed []byte, d time.Duration) []byte {
	t.Helper()
	var key []byte
	waitUntil(t, d, "ProducerIDKey", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		var err error
		key, err = be.ProducerIDKey(ctx, proposed)
		if err == nil {
			return true, ""
		}
		if errors.Is(err, coord.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return false, "last error: " + err.Error()
		}
		t.Fatalf("ProducerIDKey: got error %v, want nil (or ErrUnavailable while the service starts)", err)
		return false, ""
	})
	if len(key) != coord.ProducerIDKeySize {
		t.Fatalf("ProducerIDKey: got %d bytes, want %d", len(key), coord.ProducerIDKeySize)
	}
	return key
}

// proposedKey returns a producer id key that tells proposal i apart.
func proposedKey(i int) []byte {
	key := make([]byte, coord.ProducerIDKeySize)
	for j := range key {
		key[j] = byte(i*31 + j + 1)
	}
	return key
}

// testProducerIDKeyAgreedOnce: every backend of a cluster asks for the
// producer id key from many goroutines at once, each proposing a key of
// its own; all get the same bytes, one of the proposals. Each backend is
// then closed and opened again, as a restarted broker's is, and a call
// proposing yet another key still gets the first one, through every
// backend; a malformed proposal is refused.
func testProducerIDKeyAgreedOnce(t T, h Harness) {
	c := h.NewCluster(t, producerIDBackends)
	for i := range producerIDBackends {
		allocateProducerIDs(t, c.Backend(i), brokerFor(i).ID, startupBound(h))
	}
	var (
		mu   sync.Mutex
		keys [][]byte
		v    violations
		wg   sync.WaitGroup
	)
	for i := range producerIDBackends {
		be := c.Backend(i)
		for g := range producerIDGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), callBound)
				defer cancel()
				key, err := be.ProducerIDKey(ctx, proposedKey(i*producerIDGoroutines+g))
				if err != nil {
					v.addf("ProducerIDKey through backend %d: got error %v, want nil", i+1, err)
					return
				}
				mu.Lock()
				keys = append(keys, key)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	v.report(t)
	if t.Failed() {
		return
	}
	first := keys[0]
	proposed := false
	for i := range producerIDBackends * producerIDGoroutines {
		proposed = proposed || slices.Equal(first, proposedKey(i))
	}
	if !proposed {
		t.Fatalf("ProducerIDKey: got %x, want one of the proposed keys", first)
	}
	for _, key := range keys {
		if !slices.Equal(key, first) {
			t.Fatalf("concurrent first ProducerIDKey calls: got %x and %x, want one key", first, key)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	_, err := c.Backend(0).ProducerIDKey(ctx, []byte("short"))
	cancel()
	if err == nil {
		t.Fatalf("ProducerIDKey proposing 5 bytes: got nil error, want one naming the key's size")
	}
	for i := range producerIDBackends {
		c.Restart(t, i)
		for j := range producerIDBackends {
			if key := producerIDKey(t, c.Backend(j), proposedKey(1000+i), startupBound(h)); !slices.Equal(key, first) {
				t.Fatalf("ProducerIDKey through backend %d after backend %d restarted: got %x, want %x", j+1, i+1, key, first)
			}
		}
	}
}
