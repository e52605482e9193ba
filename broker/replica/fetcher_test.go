package replica

import (
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
	// check puts one partition aside once per wanted delay and checks that
	// each retryAt lies that delay after the call, read from the clock
	// before and after it.
	check := func(what string, refused bool, want []time.Duration) {
		t.Helper()
		fp := &fetchPartition{}
		for i, w := range want {
			before := time.Now()
			f.delay(fp, refused)
			after := time.Now()
			if fp.retryAt.Before(before.Add(w)) || fp.retryAt.After(after.Add(w)) {
				t.Errorf("delay %d after %s is %v to %v, want %v", i+1, what, fp.retryAt.Sub(after), fp.retryAt.Sub(before), w)
			}
		}
	}
	ms := time.Millisecond
	want := []time.Duration{10 * ms, 20 * ms}
	for len(want) < refusedRetries {
		want = append(want, refusedRetry)
	}
	want = append(want, 200*ms, 200*ms, 200*ms)
	check("refusals", true, want)
	check("other errors", false, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 200 * ms})
}
