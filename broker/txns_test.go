package broker

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/producerid"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/group"
	"github.com/tripodmq/tripod/txn"
)

// txnConfig is testConfig with a small __transaction_state.
func txnConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.TransactionStateLogNumPartitions = 3
	return cfg
}

// txnTestConfig is txnConfig with quick groups (fastGroups), for the
// tests of transactional clients that consume in groups too.
func txnTestConfig(t *testing.T) config.Config {
	cfg := txnConfig(t)
	fastGroups(&cfg)
	return cfg
}

// rawConn is one connection to a broker on which requests are sent at
// the version they name, without a client's routing or retries.
type rawConn struct {
	nc   net.Conn
	corr int32
}

func newRawConn(t *testing.T, b *Broker) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{nc: nc}
}

// txnRequest sends req to b on cl and returns the answer.
func txnRequest[R kmsg.Response](t *testing.T, _ context.Context, cl *rawConn, _ *Broker, req kmsg.Request) R {
	t.Helper()
	cl.corr++
	return roundTrip(t, cl.nc, req, cl.corr).(R)
}

// findTxnCoordinator asks b for id's coordinator (FindCoordinator v3,
// key type 1) until it answers.
func findTxnCoordinator(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, id string) *kmsg.FindCoordinatorResponse {
	t.Helper()
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorType = 3, id, 1
		resp := txnRequest[*kmsg.FindCoordinatorResponse](t, ctx, cl, b, req)
		if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			return resp
		}
		select {
		case <-ctx.Done():
			t.Fatalf("FindCoordinator(%q): still COORDINATOR_NOT_AVAILABLE", id)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// initTxnProducer sends InitProducerId (v4) for id until the coordinator
// has loaded, and returns the answer.
func initTxnProducer(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &id, timeoutMs
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp := txnRequest[*kmsg.InitProducerIDResponse](t, ctx, cl, b, req)
		if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code && resp.ErrorCode != kerr.NotCoordinator.Code {
			return resp
		}
		select {
		case <-ctx.Done():
			t.Fatalf("InitProducerId(%q): coordinator not loaded: %v", id, kerr.ErrorForCode(resp.ErrorCode))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func addPartitionsToTxn(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, version int16, id string, pid int64, epoch int16, topic string, partitions ...int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = version, id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp := txnRequest[*kmsg.AddPartitionsToTxnResponse](t, ctx, cl, b, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(partitions) {
		t.Fatalf("AddPartitionsToTxn: got %+v, want one topic with %d partitions", resp.Topics, len(partitions))
	}
	code := resp.Topics[0].Partitions[0].ErrorCode
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != code {
			t.Fatalf("AddPartitionsToTxn: got codes %+v, want one code", resp.Topics[0].Partitions)
		}
	}
	return code
}

func endTxn(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, version int16, id string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = version, id, pid, epoch, commit
	return txnRequest[*kmsg.EndTxnResponse](t, ctx, cl, b, req).ErrorCode
}

func describeTxn(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp := txnRequest[*kmsg.DescribeTransactionsResponse](t, ctx, cl, b, req)
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("DescribeTransactions: got %d states, want 1", len(resp.TransactionStates))
	}
	return resp.TransactionStates[0]
}

func listTxns(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, version int16, states []string, pids []int64, durationMs int64) *kmsg.ListTransactionsResponse {
	t.Helper()
	req := kmsg.NewPtrListTransactionsRequest()
	req.Version, req.StateFilters, req.ProducerIDFilters, req.DurationFilterMillis = version, states, pids, durationMs
	return txnRequest[*kmsg.ListTransactionsResponse](t, ctx, cl, b, req)
}

// waitTxnState waits until DescribeTransactions shows id in state.
func waitTxnState(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, id string, state txn.State) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	for {
		st := describeTxn(t, ctx, cl, b, id)
		if st.ErrorCode == 0 && st.State == state.String() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("transaction %q: got %+v, want state %v", id, st, state)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteTopic deletes topic through kadm.
func deleteTopic(t *testing.T, ctx context.Context, b *Broker, topic string) {
	t.Helper()
	resp, err := kadm.NewClient(newClient(t, b)).DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
	if err := resp[topic].Err; err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
}

// TestTxnFindCoordinatorAndInitProducerID: FindCoordinator for a
// transactional id creates __transaction_state and names this broker;
// InitProducerId hands out a producer id at epoch 0 and bumps the epoch
// of the same id the next time; timeouts past transaction.max.timeout.ms
// and an empty id are refused as Kafka refuses them.
func TestTxnFindCoordinatorAndInitProducerID(t *testing.T) {
	cfg := txnConfig(t)
	cfg.TransactionMaxTimeout = time.Minute
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	cl := newRawConn(t, b)

	fc := findTxnCoordinator(t, ctx, cl, b, "tx-a")
	if fc.ErrorCode != 0 || fc.NodeID != b.ID() {
		t.Fatalf("FindCoordinator: got node %d (%v), want %d", fc.NodeID, kerr.ErrorForCode(fc.ErrorCode), b.ID())
	}
	if topic, ok := b.cache.Topic(txn.StateTopic); !ok || len(topic.Partitions) != 3 {
		t.Fatalf("%s: got %+v (exists %v), want 3 partitions", txn.StateTopic, topic, ok)
	}
	if configs := b.replicas.TopicConfigs(ctx, []string{txn.StateTopic})[txn.StateTopic]; configs["cleanup.policy"] != "compact" || configs["min.insync.replicas"] != "1" {
		t.Errorf("%s configs: got %v, want cleanup.policy=compact and min.insync.replicas=1 (the min ISR capped by the replication factor)", txn.StateTopic, configs)
	}

	first := initTxnProducer(t, ctx, cl, b, "tx-a", 10000, -1, -1)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("first InitProducerId: got id %d epoch %d (%v), want a producer id at epoch 0", first.ProducerID, first.ProducerEpoch, kerr.ErrorForCode(first.ErrorCode))
	}
	second := initTxnProducer(t, ctx, cl, b, "tx-a", 10000, -1, -1)
	if second.ErrorCode != 0 || second.ProducerID != first.ProducerID || second.ProducerEpoch != 1 {
		t.Fatalf("second InitProducerId: got id %d epoch %d (%v), want id %d at epoch 1", second.ProducerID, second.ProducerEpoch, kerr.ErrorForCode(second.ErrorCode), first.ProducerID)
	}
	// KIP-360: a producer naming its id and current epoch is bumped; one
	// naming an epoch it never held is fenced.
	third := initTxnProducer(t, ctx, cl, b, "tx-a", 10000, first.ProducerID, 1)
	if third.ErrorCode != 0 || third.ProducerID != first.ProducerID || third.ProducerEpoch != 2 {
		t.Fatalf("InitProducerId naming epoch 1: got id %d epoch %d (%v), want id %d at epoch 2", third.ProducerID, third.ProducerEpoch, kerr.ErrorForCode(third.ErrorCode), first.ProducerID)
	}
	if got := initTxnProducer(t, ctx, cl, b, "tx-a", 10000, first.ProducerID, 0); got.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("InitProducerId naming an old epoch: got %v, want PRODUCER_FENCED", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := initTxnProducer(t, ctx, cl, b, "tx-a", 61000, -1, -1); got.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("InitProducerId with a timeout past transaction.max.timeout.ms: got %v, want INVALID_TRANSACTION_TIMEOUT", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := initTxnProducer(t, ctx, cl, b, "", 10000, -1, -1); got.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("InitProducerId with an empty transactional id: got %v, want INVALID_REQUEST", kerr.ErrorForCode(got.ErrorCode))
	}

	// franz-go's admin client finds the coordinator and reads it, as
	// kafka-transactions.sh list and describe do.
	adm := kadm.NewClient(newClient(t, b))
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || len(listed) != 1 || listed["tx-a"].ProducerID != first.ProducerID || listed["tx-a"].State != "Empty" {
		t.Errorf("kadm ListTransactions: got %+v (%v), want tx-a Empty with producer id %d", listed, err, first.ProducerID)
	}
	described, err := adm.DescribeTransactions(ctx, "tx-a")
	if d := described["tx-a"]; err != nil || d.Err != nil || d.Coordinator != b.ID() || d.ProducerEpoch != 2 || d.TimeoutMillis != 10000 {
		t.Errorf("kadm DescribeTransactions: got %+v (%v), want tx-a at epoch 2 coordinated by %d", d, err, b.ID())
	}
}

// TestTxnOldEpochIsFenced: once a newer InitProducerId bumped the epoch,
// the old epoch's AddPartitionsToTxn and EndTxn are refused, with
// INVALID_PRODUCER_EPOCH before KIP-588's versions and PRODUCER_FENCED
// from them on; another producer id is INVALID_PRODUCER_ID_MAPPING.
func TestTxnOldEpochIsFenced(t *testing.T) {
	b := startBroker(t, txnConfig(t))
	ctx := testContext(t, time.Minute)
	cl := newRawConn(t, b)
	createTopic(t, b, "fenced", 2, nil)
	findTxnCoordinator(t, ctx, cl, b, "tx-f")
	old := initTxnProducer(t, ctx, cl, b, "tx-f", 10000, -1, -1)
	cur := initTxnProducer(t, ctx, cl, b, "tx-f", 10000, -1, -1)
	if old.ErrorCode != 0 || cur.ErrorCode != 0 || cur.ProducerEpoch != old.ProducerEpoch+1 {
		t.Fatalf("InitProducerId twice: got epochs %d, %d (%v, %v)", old.ProducerEpoch, cur.ProducerEpoch, kerr.ErrorForCode(old.ErrorCode), kerr.ErrorForCode(cur.ErrorCode))
	}
	pid := cur.ProducerID
	for _, tc := range []struct {
		version int16
		want    *kerr.Error
	}{{1, kerr.InvalidProducerEpoch}, {2, kerr.ProducerFenced}, {3, kerr.ProducerFenced}} {
		if got := addPartitionsToTxn(t, ctx, cl, b, tc.version, "tx-f", pid, old.ProducerEpoch, "fenced", 0); got != tc.want.Code {
			t.Errorf("AddPartitionsToTxn v%d at the old epoch: got %v, want %v", tc.version, kerr.ErrorForCode(got), tc.want)
		}
		if got := endTxn(t, ctx, cl, b, tc.version, "tx-f", pid, old.ProducerEpoch, true); got != tc.want.Code {
			t.Errorf("EndTxn v%d at the old epoch: got %v, want %v", tc.version, kerr.ErrorForCode(got), tc.want)
		}
	}
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-f", pid+1, cur.ProducerEpoch, "fenced", 0); got != kerr.InvalidProducerIDMapping.Code {
		t.Errorf("AddPartitionsToTxn of another producer id: got %v, want INVALID_PRODUCER_ID_MAPPING", kerr.ErrorForCode(got))
	}
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-f", pid, cur.ProducerEpoch, "no-such-topic", 0); got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("AddPartitionsToTxn of an unknown topic: got %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(got))
	}
	// An EndTxn with no transaction open is INVALID_TXN_STATE.
	if got := endTxn(t, ctx, cl, b, 3, "tx-f", pid, cur.ProducerEpoch, true); got != kerr.InvalidTxnState.Code {
		t.Errorf("EndTxn with no open transaction: got %v, want INVALID_TXN_STATE", kerr.ErrorForCode(got))
	}
	if st := describeTxn(t, ctx, cl, b, "tx-f"); st.State != txn.Empty.String() || len(st.Topics) != 0 {
		t.Errorf("after the refused requests: got %+v, want Empty with no partitions", st)
	}
}

// TestTxnCommitCompletesAndSurvivesRestart adds partitions to a
// transaction (DescribeTransactions and ListTransactions show it Ongoing
// with them, a leader's KIP-890 verification finds them), commits it,
// and restarts the broker on the same directory: the new broker reloads
// the state from __transaction_state and resumes the commit, which
// reaches CompleteCommit: the markers go to the partitions' leader, and
// if it cannot write them yet the topic's deletion leaves none to write,
// as Kafka's coordinator skips a deleted partition.
func TestTxnCommitCompletesAndSurvivesRestart(t *testing.T) {
	cfg := txnConfig(t)
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	waitServing(t, b)
	ctx := testContext(t, 2*time.Minute)
	cl := newRawConn(t, b)
	createTopic(t, b, "committed", 3, nil)
	findTxnCoordinator(t, ctx, cl, b, "tx-c")
	ip := initTxnProducer(t, ctx, cl, b, "tx-c", 60000, -1, -1)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid, epoch := ip.ProducerID, ip.ProducerEpoch
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-c", pid, epoch, "committed", 0, 2); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	// Adding a partition already added is answered at once.
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-c", pid, epoch, "committed", 2); got != 0 {
		t.Fatalf("AddPartitionsToTxn again: %v", kerr.ErrorForCode(got))
	}
	st := describeTxn(t, ctx, cl, b, "tx-c")
	if st.ErrorCode != 0 || st.State != "Ongoing" || st.ProducerID != pid || st.ProducerEpoch != epoch || st.TimeoutMillis != 60000 ||
		st.StartTimestamp <= 0 || len(st.Topics) != 1 || st.Topics[0].Topic != "committed" || len(st.Topics[0].Partitions) != 2 {
		t.Fatalf("DescribeTransactions: got %+v, want Ongoing with committed-0 and committed-2", st)
	}
	if got := describeTxn(t, ctx, cl, b, "tx-unknown"); got.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Errorf("DescribeTransactions of an unknown id: got %v, want TRANSACTIONAL_ID_NOT_FOUND", kerr.ErrorForCode(got.ErrorCode))
	}

	initTxnProducer(t, ctx, cl, b, "tx-idle", 60000, -1, -1)
	ids := func(resp *kmsg.ListTransactionsResponse) []string {
		var out []string
		for _, s := range resp.TransactionStates {
			out = append(out, s.TransactionalID+"="+s.TransactionState)
		}
		return out
	}
	time.Sleep(5 * time.Millisecond) // so that tx-c has run longer than 0 ms
	for _, tc := range []struct {
		name       string
		version    int16
		states     []string
		pids       []int64
		durationMs int64
		want       []string
		unknown    int
	}{
		{"all", 0, nil, nil, -1, []string{"tx-c=Ongoing", "tx-idle=Empty"}, 0},
		{"by state", 0, []string{"Ongoing"}, nil, -1, []string{"tx-c=Ongoing"}, 0},
		{"by producer id", 0, nil, []int64{pid}, -1, []string{"tx-c=Ongoing"}, 0},
		{"unknown state only", 0, []string{"Bogus"}, nil, -1, nil, 1},
		{"running longer than an hour", 1, []string{"Ongoing"}, nil, 3600000, nil, 0},
		{"running longer than nothing", 1, []string{"Ongoing"}, nil, 0, []string{"tx-c=Ongoing"}, 0},
	} {
		resp := listTxns(t, ctx, cl, b, tc.version, tc.states, tc.pids, tc.durationMs)
		if got := ids(resp); resp.ErrorCode != 0 || len(resp.UnknownStateFilters) != tc.unknown || !equalStrings(got, tc.want) {
			t.Errorf("ListTransactions %s: got %v, unknown %v (%v), want %v", tc.name, got, resp.UnknownStateFilters, kerr.ErrorForCode(resp.ErrorCode), tc.want)
		}
	}

	// KIP-890 part 1: a leader verifies that a partition is in the open
	// transaction before it appends the producer's transactional batch.
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	verify.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "tx-c", ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: true,
		Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "committed", Partitions: []int32{0, 1}}}}}
	vresp := txnRequest[*kmsg.AddPartitionsToTxnResponse](t, ctx, cl, b, verify)
	if len(vresp.Transactions) != 1 || len(vresp.Transactions[0].Topics) != 1 || len(vresp.Transactions[0].Topics[0].Partitions) != 2 ||
		vresp.Transactions[0].Topics[0].Partitions[0].ErrorCode != 0 || vresp.Transactions[0].Topics[0].Partitions[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("AddPartitionsToTxn v4 VerifyOnly: got %+v, want committed-0 verified and committed-1 INVALID_TXN_STATE", vresp.Transactions)
	}
	if st := describeTxn(t, ctx, cl, b, "tx-c"); len(st.Topics) != 1 || len(st.Topics[0].Partitions) != 2 {
		t.Errorf("after a verification: got %+v, want the same two partitions", st)
	}

	if got := endTxn(t, ctx, cl, b, 3, "tx-c", pid, epoch, true); got != 0 {
		t.Fatalf("EndTxn(commit): %v", kerr.ErrorForCode(got))
	}
	if st := describeTxn(t, ctx, cl, b, "tx-c"); st.State != "PrepareCommit" && st.State != "CompleteCommit" {
		t.Fatalf("after EndTxn: got %+v, want PrepareCommit or CompleteCommit", st)
	}
	// A retried EndTxn while the markers are written is
	// CONCURRENT_TRANSACTIONS, once they are a success; an abort is
	// INVALID_TXN_STATE once the commit completed.
	if got := endTxn(t, ctx, cl, b, 3, "tx-c", pid, epoch, true); got != 0 && got != kerr.ConcurrentTransactions.Code {
		t.Errorf("EndTxn(commit) again: got %v, want none or CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(got))
	}

	// A new broker on the same directory reloads the state; a commit
	// whose markers were not all written is resumed.
	cl.nc.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b = startBroker(t, cfg)
	cl = newRawConn(t, b)
	waitFor(t, ctx, "the coordinator to load", func() bool { return describeTxn(t, ctx, cl, b, "tx-c").ErrorCode == 0 })
	if st := describeTxn(t, ctx, cl, b, "tx-c"); st.State != "PrepareCommit" && st.State != "CompleteCommit" {
		t.Fatalf("after restart: got %+v, want PrepareCommit or CompleteCommit", st)
	}
	if st := describeTxn(t, ctx, cl, b, "tx-idle"); st.ErrorCode != 0 || st.State != "Empty" {
		t.Errorf("tx-idle after restart: got %+v, want Empty", st)
	}
	deleteTopic(t, ctx, b, "committed")
	done := waitTxnState(t, ctx, cl, b, "tx-c", txn.CompleteCommit)
	if len(done.Topics) != 0 || done.ProducerEpoch != epoch {
		t.Errorf("CompleteCommit: got %+v, want no partitions at epoch %d", done, epoch)
	}
	if got := endTxn(t, ctx, cl, b, 3, "tx-c", pid, epoch, true); got != 0 {
		t.Errorf("EndTxn(commit) retried after completion: got %v, want none", kerr.ErrorForCode(got))
	}
	if got := endTxn(t, ctx, cl, b, 3, "tx-c", pid, epoch, false); got != kerr.InvalidTxnState.Code {
		t.Errorf("EndTxn(abort) after the commit: got %v, want INVALID_TXN_STATE", kerr.ErrorForCode(got))
	}
	after := initTxnProducer(t, ctx, cl, b, "tx-c", 60000, -1, -1)
	if after.ErrorCode != 0 || after.ProducerID != pid || after.ProducerEpoch != epoch+1 {
		t.Errorf("InitProducerId after restart: got id %d epoch %d (%v), want id %d at epoch %d", after.ProducerID, after.ProducerEpoch, kerr.ErrorForCode(after.ErrorCode), pid, epoch+1)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTxnFenceAndTimeoutAbort: an InitProducerId while the id's
// transaction is open fences its producer and aborts it (the client is
// answered CONCURRENT_TRANSACTIONS and retries), and a transaction past
// its timeout is aborted by the coordinator's timer, its epoch bumped.
func TestTxnFenceAndTimeoutAbort(t *testing.T) {
	cfg := txnConfig(t)
	cfg.TransactionAbortTimedOutCleanupInterval = 50 * time.Millisecond
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	cl := newRawConn(t, b)
	createTopic(t, b, "fence", 1, nil)
	createTopic(t, b, "slow", 1, nil)
	findTxnCoordinator(t, ctx, cl, b, "tx-fence")

	first := initTxnProducer(t, ctx, cl, b, "tx-fence", 60000, -1, -1)
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-fence", first.ProducerID, first.ProducerEpoch, "fence", 0); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	if got := initTxnProducer(t, ctx, cl, b, "tx-fence", 60000, -1, -1); got.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducerId with a transaction open: got %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(got.ErrorCode))
	}
	if st := describeTxn(t, ctx, cl, b, "tx-fence"); (st.State != "PrepareAbort" && st.State != "CompleteAbort") || st.ProducerEpoch != first.ProducerEpoch+1 {
		t.Fatalf("after the fence: got %+v, want PrepareAbort or CompleteAbort at epoch %d", st, first.ProducerEpoch+1)
	}
	if got := endTxn(t, ctx, cl, b, 3, "tx-fence", first.ProducerID, first.ProducerEpoch, true); got != kerr.ProducerFenced.Code {
		t.Errorf("the fenced producer's EndTxn: got %v, want PRODUCER_FENCED", kerr.ErrorForCode(got))
	}
	deleteTopic(t, ctx, b, "fence")
	waitTxnState(t, ctx, cl, b, "tx-fence", txn.CompleteAbort)
	if got := initTxnProducer(t, ctx, cl, b, "tx-fence", 60000, -1, -1); got.ErrorCode != 0 || got.ProducerEpoch != first.ProducerEpoch+2 {
		t.Errorf("InitProducerId retried after the abort: got epoch %d (%v), want %d", got.ProducerEpoch, kerr.ErrorForCode(got.ErrorCode), first.ProducerEpoch+2)
	}

	slow := initTxnProducer(t, ctx, cl, b, "tx-slow", 200, -1, -1)
	if got := addPartitionsToTxn(t, ctx, cl, b, 3, "tx-slow", slow.ProducerID, slow.ProducerEpoch, "slow", 0); got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	for {
		st := describeTxn(t, ctx, cl, b, "tx-slow")
		if st.State == "PrepareAbort" || st.State == "CompleteAbort" {
			if st.ProducerEpoch != slow.ProducerEpoch+1 {
				t.Errorf("timed-out transaction: got epoch %d, want %d (fenced)", st.ProducerEpoch, slow.ProducerEpoch+1)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed-out transaction: got %+v, want it aborted", st)
		case <-time.After(50 * time.Millisecond):
		}
	}
	deleteTopic(t, ctx, b, "slow")
	waitTxnState(t, ctx, cl, b, "tx-slow", txn.CompleteAbort)
}

// TestTxnOffsetsAndExpiry: AddOffsetsToTxn adds the group's
// __consumer_offsets partition to the transaction, an abort then
// completes (no marker is owed to a partition of a topic that does not
// exist), and an id unchanged for transactional.id.expiration.ms is
// removed.
func TestTxnOffsetsAndExpiry(t *testing.T) {
	cfg := txnConfig(t)
	cfg.TransactionalIDExpiration = 500 * time.Millisecond
	cfg.TransactionRemoveExpiredCleanupInterval = 50 * time.Millisecond
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	cl := newRawConn(t, b)
	findTxnCoordinator(t, ctx, cl, b, "tx-o")
	ip := initTxnProducer(t, ctx, cl, b, "tx-o", 60000, -1, -1)
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = 3, "tx-o", ip.ProducerID, ip.ProducerEpoch, "grp"
	if got := txnRequest[*kmsg.AddOffsetsToTxnResponse](t, ctx, cl, b, req); got.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	want := group.PartitionFor("grp", int(cfg.OffsetsTopicNumPartitions))
	if st := describeTxn(t, ctx, cl, b, "tx-o"); st.State != "Ongoing" || len(st.Topics) != 1 || st.Topics[0].Topic != group.OffsetsTopic ||
		len(st.Topics[0].Partitions) != 1 || st.Topics[0].Partitions[0] != want {
		t.Fatalf("after AddOffsetsToTxn: got %+v, want Ongoing with %s-%d", st, group.OffsetsTopic, want)
	}
	req.ProducerEpoch--
	if got := txnRequest[*kmsg.AddOffsetsToTxnResponse](t, ctx, cl, b, req); got.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("AddOffsetsToTxn v3 at an old epoch: got %v, want PRODUCER_FENCED", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := endTxn(t, ctx, cl, b, 3, "tx-o", ip.ProducerID, ip.ProducerEpoch, false); got != 0 {
		t.Fatalf("EndTxn(abort): %v", kerr.ErrorForCode(got))
	}
	waitFor(t, ctx, "the expired id to be removed", func() bool {
		return describeTxn(t, ctx, cl, b, "tx-o").ErrorCode == kerr.TransactionalIDNotFound.Code
	})
}

// TestTxnCoordinatorFailover runs three brokers with __transaction_state
// replicated on all: FindCoordinator names the leader of the id's
// partition from any broker, the others answer NOT_COORDINATOR, and when
// the coordinator stops, the partition's new leader loads the id and
// bumps the same producer id's epoch.
func TestTxnCoordinatorFailover(t *testing.T) {
	brokers := startRaftClusterWith(t, 3, func(cfg *config.Config) { cfg.TransactionStateLogNumPartitions = 1 })
	ctx := testContext(t, 2*time.Minute)
	conns := map[int32]*rawConn{}
	for _, b := range brokers {
		conns[b.ID()] = newRawConn(t, b)
	}
	byID := func(id int32) *Broker {
		for _, b := range brokers {
			if b.ID() == id {
				return b
			}
		}
		t.Fatalf("no broker %d", id)
		return nil
	}
	fc := findTxnCoordinator(t, ctx, conns[brokers[0].ID()], brokers[0], "tx-fo")
	if fc.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v", kerr.ErrorForCode(fc.ErrorCode))
	}
	coordinator := byID(fc.NodeID)
	waitFor(t, ctx, "__transaction_state's ISR to hold the three brokers", func() bool {
		topic, ok := coordinator.cache.Topic(txn.StateTopic)
		return ok && len(topic.Partitions) == 1 && len(topic.Partitions[0].ISR) == 3
	})
	for _, b := range brokers {
		if b == coordinator {
			continue
		}
		if got := initTxnProducerOnce(t, ctx, conns[b.ID()], b, "tx-fo"); got.ErrorCode != kerr.NotCoordinator.Code {
			t.Errorf("InitProducerId at broker %d, not the coordinator: got %v, want NOT_COORDINATOR", b.ID(), kerr.ErrorForCode(got.ErrorCode))
		}
	}
	first := initTxnProducer(t, ctx, conns[coordinator.ID()], coordinator, "tx-fo", 60000, -1, -1)
	second := initTxnProducer(t, ctx, conns[coordinator.ID()], coordinator, "tx-fo", 60000, -1, -1)
	if first.ErrorCode != 0 || second.ErrorCode != 0 || second.ProducerEpoch != 1 || second.ProducerID != first.ProducerID {
		t.Fatalf("InitProducerId twice: got %+v then %+v", first, second)
	}

	if err := coordinator.Close(); err != nil {
		t.Fatalf("close the coordinator: %v", err)
	}
	var survivor *Broker
	for _, b := range brokers {
		if b != coordinator {
			survivor = b
			break
		}
	}
	var next *Broker
	waitFor(t, ctx, "a new transaction coordinator", func() bool {
		fc := findTxnCoordinator(t, ctx, conns[survivor.ID()], survivor, "tx-fo")
		if fc.ErrorCode != 0 || fc.NodeID == coordinator.ID() {
			return false
		}
		next = byID(fc.NodeID)
		return true
	})
	var got *kmsg.InitProducerIDResponse
	waitFor(t, ctx, "the new coordinator to answer", func() bool {
		got = initTxnProducerOnce(t, ctx, conns[next.ID()], next, "tx-fo")
		return got.ErrorCode != kerr.NotCoordinator.Code && got.ErrorCode != kerr.CoordinatorLoadInProgress.Code
	})
	if got.ErrorCode != 0 || got.ProducerID != first.ProducerID || got.ProducerEpoch != 2 {
		t.Errorf("InitProducerId at the new coordinator, broker %d: got id %d epoch %d (%v), want id %d at epoch 2",
			next.ID(), got.ProducerID, got.ProducerEpoch, kerr.ErrorForCode(got.ErrorCode), first.ProducerID)
	}
}

// initTxnProducerOnce sends one InitProducerId (v4) for id to b.
func initTxnProducerOnce(t *testing.T, ctx context.Context, cl *rawConn, b *Broker, id string) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &id, 60000
	return txnRequest[*kmsg.InitProducerIDResponse](t, ctx, cl, b, req)
}

// TestTxnProducerIDFollowsPrincipal: a transactional id's producer id is
// issued to the principal that asked, as idempotent producers' are; when
// another principal initializes the id with no transaction open it gets
// a new producer id, one its Produce requests pass the producer id check
// with, instead of the other principal's.
func TestTxnProducerIDFollowsPrincipal(t *testing.T) {
	cfg := saslConfig(t)
	cfg.TransactionStateLogNumPartitions = 1
	b := startBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	findTxnCoordinator(t, ctx, newRawConn(t, b), b, "tx-p")
	admin := saslClient(t, b, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	alice := saslClient(t, b, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	initPID := func(cl *kgo.Client) *kmsg.InitProducerIDResponse {
		t.Helper()
		for {
			req := kmsg.NewPtrInitProducerIDRequest()
			id := "tx-p"
			req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
			resp, err := cl.Broker(int(b.ID())).Request(ctx, req)
			if err != nil {
				t.Fatalf("InitProducerId: %v", err)
			}
			r := resp.(*kmsg.InitProducerIDResponse)
			if r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first, again := initPID(admin), initPID(admin)
	if first.ErrorCode != 0 || again.ErrorCode != 0 || again.ProducerID != first.ProducerID || again.ProducerEpoch != first.ProducerEpoch+1 {
		t.Fatalf("admin's InitProducerId twice: got %+v then %+v, want the same producer id, epoch bumped", first, again)
	}
	other := initPID(alice)
	if other.ErrorCode != 0 || other.ProducerID == first.ProducerID || other.ProducerEpoch != 0 {
		t.Fatalf("alice's InitProducerId: got id %d epoch %d (%v), want a new producer id at epoch 0", other.ProducerID, other.ProducerEpoch, kerr.ErrorForCode(other.ErrorCode))
	}
	if v := b.producerIDs.Verify(security.Principal{Type: "User", Name: "alice"}, &producerid.Verified{}, other.ProducerID); v != producerid.Issued {
		t.Errorf("alice's producer id: got verdict %v for alice, want Issued", v)
	}
	back := initPID(admin)
	if back.ErrorCode != 0 || back.ProducerID == other.ProducerID || back.ProducerID == first.ProducerID {
		t.Errorf("admin's InitProducerId after alice's: got id %d (%v), want a third producer id", back.ProducerID, kerr.ErrorForCode(back.ErrorCode))
	}
}
