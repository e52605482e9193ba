package replica

import "testing"

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
