package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/kafkatest"
)

// TestTransactionsCommands runs `tripod serve` as a one-broker cluster
// and follows two transactions through `tripod transactions`: a franz-go
// producer's, open on payments-0, which list, describe and
// describe-producers show and find-hanging does not report (its
// coordinator holds it open); and a hanging one, a transactional batch
// whose producer no coordinator knows, which find-hanging reports and
// abort ends by its start offset, after which find-hanging is clean and
// the partition's last stable offset moves past it.
func TestTransactionsCommands(t *testing.T) {
	const topic = "payments"
	// Without the KIP-890 verification, as on a broker before it, a
	// partition can be left a hanging transaction.
	srv := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--set", "transaction.state.log.num.partitions=3",
		"--set", "transaction.partition.verification.enable=false")
	addr := srv.addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	txns := func(args ...string) string {
		t.Helper()
		return runTripod(t, append(append([]string{"transactions"}, args...), "--bootstrap", addr)...)
	}
	runTripod(t, "topics", "create", topic, "--partitions", "1", "--replication-factor", "1", "--bootstrap", addr)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("pay-1"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("pay-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if commit {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
	}

	out := txns("list")
	if !strings.HasPrefix(out, "TransactionalId") || !strings.Contains(out, "ProducerId") || !rowWith(out, "pay-1", "Ongoing") {
		t.Errorf("transactions list:\n%s\nwant kafka-transactions' columns and pay-1 Ongoing", out)
	}
	if out := txns("list", "--state", "CompleteCommit"); rowWith(out, "pay-1") {
		t.Errorf("transactions list --state CompleteCommit:\n%s\nwant pay-1 left out", out)
	}
	out = txns("describe", "--transactional-id", "pay-1")
	if !strings.Contains(out, "TransactionTimeoutMs") || !rowWith(out, "pay-1", "Ongoing", topic+"-0") {
		t.Errorf("transactions describe:\n%s\nwant pay-1 Ongoing on %s-0", out, topic)
	}
	out = txns("describe-producers", "--topic", topic, "--partition", "0")
	if !strings.Contains(out, "CurrentTransactionStartOffset") || !rowWith(out, "2") {
		t.Errorf("transactions describe-producers:\n%s\nwant the open transaction starting at offset 2", out)
	}

	// A transaction no coordinator knows: an idempotent producer id's
	// batch with the transactional bit, written straight to the
	// partition.
	br, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, br)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %v", err, kerr.ErrorForCode(initResp.ErrorCode))
	}
	produce := kmsg.NewPtrProduceRequest()
	ghost := "ghost"
	produce.TransactionID, produce.Acks, produce.TimeoutMillis = &ghost, -1, 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = kafkatest.EncodeTransactionalBatch(time.Now().Add(-time.Minute).UnixMilli(), initResp.ProducerID, initResp.ProducerEpoch, 0, []byte("ghost-0"))
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	presp, err := produce.RequestWith(ctx, br)
	if err != nil {
		t.Fatalf("produce the ghost's batch: %v", err)
	}
	p := presp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("produce the ghost's batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	start := strconv.FormatInt(p.BaseOffset, 10)
	ghostID := strconv.FormatInt(initResp.ProducerID, 10)

	// Any open transaction is old enough with a 1 ms bound; only the
	// ghost's is hanging.
	out = txns("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "1ms")
	if !strings.HasPrefix(out, "Topic") || !rowWith(out, topic, ghostID, start) || strings.Count(out, "\n") != 2 {
		t.Errorf("transactions find-hanging:\n%s\nwant the header and the ghost's transaction (producer %s at %s) only", out, ghostID, start)
	}
	out = txns("abort", "--topic", topic, "--partition", "0", "--start-offset", start)
	if !strings.Contains(out, "Aborted the transaction of producer "+ghostID) {
		t.Errorf("transactions abort:\n%s", out)
	}
	if out := txns("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "1ms"); strings.Count(out, "\n") != 1 {
		t.Errorf("transactions find-hanging after the abort:\n%s\nwant the header only", out)
	}
	stdout, stderr := runTripodFails(t, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", start, "--bootstrap", addr)
	if !strings.Contains(stderr, "no producer of "+topic+"-0 has a transaction open at offset "+start) {
		t.Errorf("a second abort: stdout %q stderr %q, want the offset named", stdout, stderr)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit pay-1: %v", err)
	}
}

// rowWith reports whether a line of out holds every one of fields as a
// whole column.
func rowWith(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		cols := strings.Fields(line)
		ok := true
		for _, f := range fields {
			found := false
			for _, c := range cols {
				if c == f {
					found = true
				}
			}
			ok = ok && found
		}
		if ok && len(cols) > 0 {
			return true
		}
	}
	return false
}
