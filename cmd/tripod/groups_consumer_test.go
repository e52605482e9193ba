package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsDescribeConsumerProtocol: a franz-go consumer of the
// consumer group protocol (KIP-848, kgo.ServerSideBalancer) reads topic
// "events" (2 partitions of 5 records) and commits, 3 more records
// arrive on partition 0; `tripod groups describe` shows its offsets and
// lag 3 and 0 with the member as consumer, --state its assignor, state
// and epochs, --members --verbose the member's epoch and its current and
// target assignments.
func TestGroupsDescribeConsumerProtocol(t *testing.T) {
	const (
		topic    = "events"
		group    = "kip848"
		clientID = "groups-848-consumer"
	)
	srv := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--set", "offsets.topic.replication.factor=1",
		"--set", "offsets.topic.num.partitions=3")
	addr := srv.addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runTripod(t, "topics", "create", topic, "--partitions", "2", "--replication-factor", "1", "--bootstrap", addr)
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer producer.Close()
	produce := func(partition int32, n int) {
		t.Helper()
		var records []*kgo.Record
		for i := range n {
			records = append(records, &kgo.Record{Partition: partition, Value: []byte(strconv.Itoa(i))})
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce to %s[%d]: %v", topic, partition, err)
		}
	}
	produce(0, 5)
	produce(1, 5)

	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
		kgo.ClientID(clientID), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	defer consumer.Close()
	for seen := 0; seen < 10; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s consumed %d of 10 records", group, seen)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("group %s fetch: %v", group, err)
		}
		seen += fetches.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s commit: %v", group, err)
	}
	produce(0, 3)
	memberID, _ := consumer.GroupMetadata()

	// The member may still be reconciling its first assignment: wait
	// until describe shows both partitions consumed by it.
	var rows [][]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows = table(runTripod(t, "groups", "describe", group, "--bootstrap", addr))
		if len(rows) == 3 && rows[1][6] == memberID && rows[2][6] == memberID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe: got %v, want both partitions consumed by member %s", rows, memberID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantHeader := "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID"
	if got := strings.Join(rows[0], " "); got != wantHeader {
		t.Fatalf("describe header: got %q, want %q", got, wantHeader)
	}
	for i, want := range [][]string{{group, topic, "0", "5", "8", "3"}, {group, topic, "1", "5", "5", "0"}} {
		if got := rows[i+1][:6]; strings.Join(got, " ") != strings.Join(want, " ") || rows[i+1][8] != clientID {
			t.Errorf("describe row %d: got %v, want %v ... %s", i+1, rows[i+1], want, clientID)
		}
	}

	state := table(runTripod(t, "groups", "describe", group, "--state", "--bootstrap", addr))
	if len(state) != 2 || strings.Join(state[0], " ") != "GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS" {
		t.Fatalf("describe --state: got %v", state)
	}
	// "COORDINATOR (ID)" is two columns in the header and in the row.
	if r := state[1]; r[0] != group || r[3] != "uniform" || r[4] != "Stable" || r[5] == "0" || r[5] != r[6] || r[7] != "1" {
		t.Errorf("describe --state row: got %v, want %s, assignor uniform, Stable, group epoch = assignment epoch > 0, 1 member", r, group)
	}

	members := table(runTripod(t, "groups", "describe", group, "--members", "--verbose", "--bootstrap", addr))
	wantMembers := "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT UPGRADED"
	if len(members) != 2 || strings.Join(members[0], " ") != wantMembers {
		t.Fatalf("describe --members --verbose: got %v", members)
	}
	if r := members[1]; r[1] != memberID || r[3] != clientID || r[4] != "2" || r[5] == "0" || r[6] != topic+"(0,1)" || r[8] != topic+"(0,1)" || r[9] != "true" {
		t.Errorf("describe --members --verbose row: got %v, want member %s with 2 partitions, epoch > 0, current and target %s(0,1), upgraded", r, memberID, topic)
	}
}

// TestGroupsDescribeMixedGroup: a classic franz-go consumer reads topic
// "mixed" in group "rolling"; a consumer of the consumer protocol joins,
// which upgrades the group (KIP-848's online migration). `tripod groups
// describe --members --verbose` shows both members, the classic one with
// UPGRADED false and its share of the partitions, which the coordinator
// assigned it through SyncGroup.
func TestGroupsDescribeMixedGroup(t *testing.T) {
	const topic, group = "mixed", "rolling"
	srv := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--set", "offsets.topic.replication.factor=1",
		"--set", "offsets.topic.num.partitions=3",
		"--set", "group.initial.rebalance.delay.ms=0",
		"--set", "group.consumer.min.heartbeat.interval.ms=100",
		"--set", "group.consumer.heartbeat.interval.ms=200")
	addr := srv.addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runTripod(t, "topics", "create", topic, "--partitions", "4", "--replication-factor", "1", "--bootstrap", addr)
	consume := func(clientID string, opts ...kgo.Opt) (*kgo.Client, string) {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ClientID(clientID), kgo.HeartbeatInterval(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatalf("new consumer: %v", err)
		}
		t.Cleanup(cl.Close)
		done := make(chan struct{})
		pollCtx, stop := context.WithCancel(ctx)
		go func() {
			defer close(done)
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx)
			}
		}()
		t.Cleanup(func() { stop(); <-done })
		for {
			if id, _ := cl.GroupMetadata(); id != "" {
				return cl, id
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never joined group %s", clientID, group)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	_, classicID := consume("classic-consumer")
	_, modernID := consume("modern-consumer", kgo.ServerSideBalancer())

	want := "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT UPGRADED"
	var rows [][]string
	deadline := time.Now().Add(time.Minute)
	for {
		rows = table(runTripod(t, "groups", "describe", group, "--members", "--verbose", "--bootstrap", addr))
		byID := map[string][]string{}
		for _, r := range rows[1:] {
			byID[r[1]] = r
		}
		c, m := byID[classicID], byID[modernID]
		if len(rows) == 3 && strings.Join(rows[0], " ") == want && c != nil && m != nil &&
			c[4] == "2" && m[4] == "2" && c[9] == "false" && m[9] == "true" && c[3] == "classic-consumer" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe --members --verbose of the mixed group: got %v, want %s with classic member %s (UPGRADED false) and %s (true), 2 partitions each",
				rows, want, classicID, modernID)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
