package replica

import (
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/broker/config"
)

// TestFetcherIDIsKafkas checks the partition-to-fetcher hash against
// values a Kafka broker computes: "hello".hashCode() is 99162322 in Java,
// and Utils.abs(31*h + partition) % 3 gives 0, 2, 1, 0.
func TestFetcherIDIsKafkas(t *testing.T) {
	for partition, want := range []int32{0, 2, 1, 0} {
		if got := FetcherID("hello", int32(partition), 3); got != want {
			t.Errorf("FetcherID(hello, %d, 3) = %d, want %d", partition, got, want)
		}
	}
	if got := FetcherID("hello", 7, 1); got != 0 {
		t.Errorf("FetcherID(hello, 7, 1) = %d, want 0", got)
	}
}

// TestDelayAfterRefusals checks the delays a partition is put aside for:
// a leader's refusals are retried within refusedRetry for about a second
// (a new leader refuses until it has applied its LeaderAndIsr), then the
// delay doubles up to replica.fetch.backoff.ms as after any other error.
func TestDelayAfterRefusals(t *testing.T) {
	cfg := &config.Config{ReplicaFetchBackoff: 200 * time.Millisecond}
	f := &fetcher{m: &fetcherManager{rm: &Manager{cfg: cfg}}}
	delays := func(refused bool, n int) []time.Duration {
		fp := &fetchPartition{}
		var out []time.Duration
		for range n {
			before := time.Now()
			f.delay(fp, refused)
			// retryAt is set from the clock after before: round to the ms.
			out = append(out, fp.retryAt.Sub(before).Truncate(time.Millisecond))
		}
		return out
	}
	ms := time.Millisecond
	refused := delays(true, refusedRetries+3)
	want := []time.Duration{10 * ms, 20 * ms}
	for len(want) < refusedRetries {
		want = append(want, refusedRetry)
	}
	want = append(want, 200*ms, 200*ms, 200*ms)
	if !slices.Equal(refused, want) {
		t.Errorf("delays after refusals = %v, want %v", refused, want)
	}
	other := delays(false, 6)
	if want := []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 200 * ms}; !slices.Equal(other, want) {
		t.Errorf("delays after other errors = %v, want %v", other, want)
	}
}
