package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// startTest starts a controller on a fake store with brokers live and a
// 1 ms retry backoff, and stops it when the test ends.
func startTest(t *testing.T, store *fakeStore, live ...coord.BrokerID) (*Controller, *recordingSender) {
	t.Helper()
	brokers := make([]coord.Broker, len(live))
	for i, id := range live {
		brokers[i] = testBroker(id)
	}
	store.members <- brokers
	term := newFakeTerm()
	sender := &recordingSender{}
	cfg := DefaultConfig()
	cfg.RetryBackoff = time.Millisecond
	c, err := Start(context.Background(), cfg, store, term, sender)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		term.cancel()
		c.Wait()
	})
	return c, sender
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitStore polls the store until cond holds, for at most 5 s.
func waitStore(t *testing.T, store *fakeStore, what string, cond func(*coord.Metadata) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond(store.metadata()) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s: not reached", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCreateTopicCommitFailsAfterFirstChunk: a CreateTopics of 1 000
// partitions whose commit fails after its first chunk (100 states) is
// answered with a retriable error, and the controller sees the partial
// topic at once (it reloaded). The client's retry completes the topic,
// electing the 900 partitions the first attempt left without a state,
// and answers with the topic first stored; only then does another
// CreateTopics get TOPIC_ALREADY_EXISTS.
func TestCreateTopicCommitFailsAfterFirstChunk(t *testing.T) {
	store := newFakeStore()
	c, sender := startTest(t, store, 1, 2, 3)
	ctx := testCtx(t)
	spec := TopicSpec{Name: "wide", Partitions: 1000, ReplicationFactor: 3}

	store.failNextCommitAt(2)
	_, err := c.CreateTopic(ctx, spec)
	if !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("first attempt: got %v, want an error wrapping %v", err, coord.ErrUnavailable)
	}
	stored := store.metadata()
	if _, ok := stored.Topics["wide"]; !ok || len(stored.Partitions) != 100 {
		t.Fatalf("store after the failure: topic present %v with %d states, want the topic with the first chunk's 100", ok, len(stored.Partitions))
	}
	seen, _, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen.Partitions) != 100 || seen.Topics["wide"].ID != stored.Topics["wide"].ID {
		t.Errorf("controller after the failure: %d states, want the store's 100 (reloaded)", len(seen.Partitions))
	}

	topic, err := c.CreateTopic(ctx, spec)
	if err != nil {
		t.Fatalf("retry: got %v, want the topic completed", err)
	}
	if topic.ID != stored.Topics["wide"].ID || topic.Partitions() != 1000 {
		t.Errorf("retry: got topic id %x with %d partitions, want the stored one's id with 1000", topic.ID, topic.Partitions())
	}
	final := store.metadata()
	if len(final.Partitions) != 1000 {
		t.Fatalf("store after the retry: %d states, want 1000", len(final.Partitions))
	}
	told := sender.leaderAndIsr()
	for tp, st := range final.Partitions {
		if st.Leader == coord.NoBroker || len(st.ISR) != 3 {
			t.Fatalf("partition %s: got leader %d ISR %v, want a leader and a full ISR", tp, st.Leader, st.ISR)
		}
		if info, ok := told[tp]; !ok || info.Leader != st.Leader {
			t.Fatalf("partition %s: its leader %d was not sent a LeaderAndIsr (got %+v)", tp, st.Leader, info)
		}
	}
	if _, err := c.CreateTopic(ctx, spec); !errors.Is(err, coord.ErrExists) {
		t.Errorf("once complete: got %v, want %v", err, coord.ErrExists)
	}
}

// TestFailedCommitReconcilesAfterBackoff: the election that follows a
// broker's death fails to commit; after the backoff the controller
// reloads and commits it.
func TestFailedCommitReconcilesAfterBackoff(t *testing.T) {
	store := newFakeStore()
	c, _ := startTest(t, store, 1, 2, 3)
	ctx := testCtx(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{2, 3}}}); err != nil {
		t.Fatal(err)
	}
	store.failNextCommitAt(1)
	store.members <- []coord.Broker{testBroker(1), testBroker(3)}
	waitStore(t, store, "broker 3 elected in place of 2", func(md *coord.Metadata) bool {
		st := md.Partitions[coord.TopicPartition{Topic: "t"}]
		return st.Leader == 3 && st.LeaderEpoch == 1
	})
}

// TestStaleMetadataFailsRequests: after a failed commit whose reload
// failed too, requests fail with coord.ErrUnavailable rather than being
// decided on metadata the controller knows may be behind; once the store
// can be read again they are served.
func TestStaleMetadataFailsRequests(t *testing.T) {
	store := newFakeStore()
	c, _ := startTest(t, store, 1, 2)
	ctx := testCtx(t)
	store.failNextCommitAt(1)
	store.setLoadErr(coord.ErrUnavailable)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("failed commit: got %v, want %v", err, coord.ErrUnavailable)
	}
	_, err := c.CreateTopic(ctx, TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, coord.ErrUnavailable) || !strings.Contains(err.Error(), "not reloaded") {
		t.Fatalf("while the store cannot be read: got %v, want %v naming the reload", err, coord.ErrUnavailable)
	}
	store.setLoadErr(nil)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("once readable: got %v, want nil", err)
	}
}

// TestFencedCommitStops: a fenced commit stops the controller with
// coord.ErrFenced, and the request gets it.
func TestFencedCommitStops(t *testing.T) {
	store := newFakeStore()
	c, _ := startTest(t, store, 1)
	store.setFenced()
	_, err := c.CreateTopic(testCtx(t), TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("got %v, want %v", err, coord.ErrFenced)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("controller still running 5 s after a fenced commit")
	}
	if !errors.Is(c.Err(), coord.ErrFenced) {
		t.Errorf("got controller error %v, want %v", c.Err(), coord.ErrFenced)
	}
	if _, err := c.CreateTopic(testCtx(t), TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrNotController) {
		t.Errorf("after stopping: got %v, want %v", err, ErrNotController)
	}
}

// TestAlterPartitionsCommitFails: when the commit of valid ISR changes
// fails, each of them answers the commit's error with the partition's
// state as reloaded, and a refused one keeps its refusal.
func TestAlterPartitionsCommitFails(t *testing.T) {
	store := newFakeStore()
	c, _ := startTest(t, store, 1, 2)
	ctx := testCtx(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	tp := coord.TopicPartition{Topic: "t"}
	store.failNextCommitAt(1)
	res, err := c.AlterPartitions(ctx, []AlterPartitionRequest{
		{BrokerID: 1, BrokerEpoch: brokerEpoch(1), Partition: tp, LeaderEpoch: 0, PartitionEpoch: 0, ISR: ids(1)},
		{BrokerID: 1, BrokerEpoch: brokerEpoch(1), Partition: coord.TopicPartition{Topic: "u"}, ISR: ids(1)},
	})
	if err != nil {
		t.Fatalf("got %v, want per-partition results", err)
	}
	if !errors.Is(res[0].Err, coord.ErrUnavailable) || res[0].State.PartitionEpoch != 0 || len(res[0].State.ISR) != 2 {
		t.Errorf("valid change: got %v with state %s, want %v and the stored state", res[0].Err, renderState(res[0].State), coord.ErrUnavailable)
	}
	if !errors.Is(res[1].Err, coord.ErrNotFound) {
		t.Errorf("refused change: got %v, want %v", res[1].Err, coord.ErrNotFound)
	}
	st, err := c.AlterPartition(ctx, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: brokerEpoch(1), Partition: tp, ISR: ids(1)})
	if err != nil || st.PartitionEpoch != 1 {
		t.Errorf("retried: got %s partition epoch %d, %v; want it committed at 1", renderState(st), st.PartitionEpoch, err)
	}
}

// TestControlledShutdownRemaining: the actor answers with what the
// broker still leads after the plan is committed.
func TestControlledShutdownRemaining(t *testing.T) {
	store := newFakeStore()
	c, _ := startTest(t, store, 1, 2)
	ctx := testCtx(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]coord.BrokerID{{2, 1}, {2}}}); err != nil {
		t.Fatal(err)
	}
	remaining, err := c.ControlledShutdown(ctx, 2, brokerEpoch(2))
	if err != nil || len(remaining) != 1 || remaining[0] != (coord.TopicPartition{Topic: "t", Partition: 1}) {
		t.Errorf("got %v, %v; want [t-1] (its only replica)", remaining, err)
	}
	if st := store.metadata().Partitions[coord.TopicPartition{Topic: "t"}]; st.Leader != 1 {
		t.Errorf("t-0: got leader %d, want 1", st.Leader)
	}
}

// TestStartRefusesBadConfig: Start validates the settings and names the
// key.
func TestStartRefusesBadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LeaderImbalancePerBrokerPercentage = 101
	_, err := Start(context.Background(), cfg, newFakeStore(), newFakeTerm(), &recordingSender{})
	if err == nil || !strings.Contains(err.Error(), "leader.imbalance.per.broker.percentage") {
		t.Errorf("got %v, want an error naming leader.imbalance.per.broker.percentage", err)
	}
	if _, err := Start(context.Background(), DefaultConfig(), nil, newFakeTerm(), &recordingSender{}); err == nil {
		t.Errorf("no store: got nil, want an error")
	}
}
