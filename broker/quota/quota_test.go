package quota

import (
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

func TestResolveFollowsKafkasPrecedence(t *testing.T) {
	def := coord.DefaultQuotaEntity
	key := coord.QuotaProducerByteRate
	entities := []coord.QuotaEntity{
		{User: "alice", ClientID: "app"},
		{User: "alice", ClientID: def},
		{User: "alice"},
		{User: def, ClientID: "app"},
		{User: def, ClientID: def},
		{User: def},
		{ClientID: "app"},
		{ClientID: def},
	}
	wantShared := []coord.QuotaEntity{
		{User: "alice", ClientID: "app"},
		{User: "alice", ClientID: "app"},
		{User: "alice"},
		{User: "alice", ClientID: "app"},
		{User: "alice", ClientID: "app"},
		{User: "alice"},
		{ClientID: "app"},
		{ClientID: "app"},
	}
	// With the entities from i on set, the i-th applies.
	for i := range entities {
		q := Quotas{}
		for j := i; j < len(entities); j++ {
			q[entities[j]] = map[string]float64{key: float64(j + 1)}
		}
		bound, shared, ok := q.Resolve(key, "alice", "app")
		if !ok || bound != float64(i+1) || shared != wantShared[i] {
			t.Errorf("entities from %s on: got %v %v %v, want %v %v true", entities[i], bound, shared, ok, i+1, wantShared[i])
		}
	}
	if _, _, ok := (Quotas{{User: "bob"}: {key: 1}}).Resolve(key, "alice", "app"); ok {
		t.Errorf("another user's quota: got a quota for alice, want none")
	}
	if _, _, ok := (Quotas{{User: "alice"}: {coord.QuotaConsumerByteRate: 1}}).Resolve(key, "alice", "app"); ok {
		t.Errorf("another key's quota: got a quota, want none")
	}
}

func TestThrottleTimeIsKafkas(t *testing.T) {
	for _, c := range []struct {
		measured, bound float64
		window          time.Duration
		want            time.Duration
	}{
		{100, 100, 10 * time.Second, 0},
		{50, 100, 10 * time.Second, 0},
		{150, 100, 10 * time.Second, 5 * time.Second},
		{200, 100, 11 * time.Second, 11 * time.Second},
	} {
		if got := ThrottleTime(c.measured, c.bound, c.window); got != c.want {
			t.Errorf("ThrottleTime(%v, %v, %v): got %v, want %v", c.measured, c.bound, c.window, got, c.want)
		}
	}
}

func TestRecordThrottlesOnlyTheEntityOverItsQuota(t *testing.T) {
	m := NewManager(Config{Samples: 11, Window: time.Second})
	m.SetQuotas(Quotas{{ClientID: "slow"}: {coord.QuotaProducerByteRate: 1000}})
	now := time.Unix(1000, 0)
	// 10 000 bytes is the most the first 10 s window takes at 1000 B/s.
	if d := m.Record(Produce, "ANONYMOUS", "slow", 10000, now); d != 0 {
		t.Fatalf("10 000 bytes at once: got throttle %v, want 0", d)
	}
	if d := m.Record(Produce, "ANONYMOUS", "slow", 5000, now); d != 5*time.Second {
		t.Fatalf("5000 bytes more: got throttle %v, want 5s ((15000/10 - 1000)/1000 × 10 s)", d)
	}
	if d := m.Record(Produce, "ANONYMOUS", "fast", 1e9, now); d != 0 {
		t.Fatalf("a client without a quota: got throttle %v, want 0", d)
	}
	if d := m.Record(Fetch, "ANONYMOUS", "slow", 1e9, now); d != 0 {
		t.Fatalf("a fetch by a client with only a produce quota: got throttle %v, want 0", d)
	}
}

// TestGreedyClientConvergesToItsQuota: a client that sends as fast as it
// may (whenever its throttle has passed) gets its quota, measured over a
// long span after the first windows, as the two-producer test measures
// it against a broker.
func TestGreedyClientConvergesToItsQuota(t *testing.T) {
	const bound = 1 << 20
	m := NewManager(Config{Samples: 11, Window: time.Second})
	m.SetQuotas(Quotas{{ClientID: "greedy"}: {coord.QuotaProducerByteRate: bound}})
	start := time.Unix(1000, 0)
	now := start
	var sentAfterWarmup float64
	const warmup, end = 20 * time.Second, 120 * time.Second
	for now.Sub(start) < end {
		const size = 64 << 10
		if now.Sub(start) >= warmup {
			sentAfterWarmup += size
		}
		throttle := m.Record(Produce, "ANONYMOUS", "greedy", size, now)
		now = now.Add(time.Millisecond + throttle) // 64 MB/s unthrottled
	}
	got := sentAfterWarmup / (end - warmup).Seconds()
	if got < 0.9*bound || got > 1.1*bound {
		t.Fatalf("a greedy client's rate after %v: got %.0f B/s, want within 10%% of %d", warmup, got, bound)
	}
}

// TestMutationQuotaStrictAndPermissive: a controller_mutation_rate of 2
// with a burst of 2 × 2 samples × 1 s takes 4 partitions at once; a
// strict quota lets the topic that takes the bucket below zero through
// and refuses the next while it is below, with the time to earn the
// credits back; a permissive one refuses nothing and only throttles.
func TestMutationQuotaStrictAndPermissive(t *testing.T) {
	m := NewManager(Config{Samples: 11, Window: time.Second, MutationSamples: 2, MutationWindow: time.Second})
	m.SetQuotas(Quotas{{ClientID: "admin"}: {coord.QuotaControllerMutationRate: 2}})
	now := time.Unix(1000, 0)

	strict := m.MutationQuota("ANONYMOUS", "admin", true)
	for i, c := range []struct {
		partitions int
		want       error
	}{{3, nil}, {3, nil}, {1, ErrThrottlingQuotaExceeded}} {
		if err := strict.Record(c.partitions, now); err != c.want {
			t.Fatalf("strict record %d of %d partitions: got %v, want %v", i, c.partitions, err, c.want)
		}
	}
	// 4 - 3 - 3 = -2 credits at 2 per second: a second to wait.
	if got := strict.ThrottleTime(now); got != time.Second {
		t.Fatalf("strict throttle: got %v, want 1s", got)
	}
	if got := strict.ThrottleTime(now.Add(300 * time.Millisecond)); got != 700*time.Millisecond {
		t.Fatalf("strict throttle 300 ms later: got %v, want 700ms", got)
	}
	later := now.Add(time.Second)
	if err := m.MutationQuota("ANONYMOUS", "admin", true).Record(1, later); err != nil {
		t.Fatalf("strict record after the throttle: got %v, want nil", err)
	}

	permissive := m.MutationQuota("ANONYMOUS", "admin", false)
	if err := permissive.Record(5, later); err != nil {
		t.Fatalf("permissive record: got %v, want nil", err)
	}
	// -1 - 5 = -6 credits: three seconds.
	if got := permissive.ThrottleTime(later); got != 3*time.Second {
		t.Fatalf("permissive throttle: got %v, want 3s", got)
	}
	if err := m.MutationQuota("ANONYMOUS", "other", true).Record(100, later); err != nil {
		t.Fatalf("a client without a quota: got %v, want nil", err)
	}
}
