package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionMetrics follows a transaction through the broker's
// metrics: open, it is one ongoing transaction and its partition's last
// stable offset lags its high watermark by the records written; committed,
// both return to 0; a transaction left open past its timeout is aborted
// and counted.
func TestTransactionMetrics(t *testing.T) {
	cfg := txnConfig(t)
	cfg.TransactionAbortTimedOutCleanupInterval = 100 * time.Millisecond
	b := startBroker(t, cfg)
	const topic = "ledger"
	createTopic(t, b, topic, 1, nil)
	ctx := testContext(t, time.Minute)
	metric := func(name string) float64 {
		v, ok := metricValue(scrape(t, b), name)
		if !ok {
			t.Fatalf("no %s in the scrape", name)
		}
		return v
	}
	waitMetric := func(name string, want float64) {
		t.Helper()
		waitFor(t, ctx, name, func() bool { return metric(name) == want })
	}

	cl := newClient(t, b, kgo.TransactionalID("ledger-writer"), kgo.DefaultProduceTopic(topic))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	waitMetric("tripod_transactions_ongoing", 1)
	waitMetric("tripod_unstable_partitions", 1)
	waitMetric("tripod_last_stable_offset_lag_max", 3)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	waitMetric("tripod_transactions_ongoing", 0)
	waitMetric("tripod_unstable_partitions", 0)
	waitMetric("tripod_last_stable_offset_lag_max", 0)
	if got := metric("tripod_transactions_aborted_on_timeout_total"); got != 0 {
		t.Fatalf("tripod_transactions_aborted_on_timeout_total = %v before any timeout, want 0", got)
	}

	// A producer that goes away with its transaction open.
	gone := newClient(t, b, kgo.TransactionalID("ledger-gone"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(time.Second))
	if err := gone.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := gone.ProduceSync(ctx, &kgo.Record{Value: []byte("d")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitMetric("tripod_transactions_aborted_on_timeout_total", 1)
	waitMetric("tripod_transactions_ongoing", 0)
	waitMetric("tripod_unstable_partitions", 0)
}
