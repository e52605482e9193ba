package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestGroupsDescribeResetDelete runs `tripod serve` as a one-broker
// cluster and follows a consumer group through `tripod groups`: a
// franz-go group consumer reads topic "orders" (3 partitions of 10
// records) and commits, 5 more records arrive on partition 0; list,
// describe, describe --members and describe --state show the group
// Stable with lag 5, 0, 0; while it has a member the broker refuses
// reset-offsets --execute, delete-offsets and delete. The consumer
// leaves; describe shows the committed offsets without members;
// reset-offsets without --execute changes nothing, with it each scenario
// commits its offsets; delete-offsets removes partition 0's offset;
// delete removes the group, which list no longer shows.
func TestGroupsDescribeResetDelete(t *testing.T) {
	const (
		topic    = "orders"
		group    = "billing"
		clientID = "groups-test-consumer"
	)
	srv := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--set", "group.initial.rebalance.delay.ms=0",
		"--set", "group.min.session.timeout.ms=1000",
		"--set", "offsets.topic.replication.factor=1",
		"--set", "offsets.topic.num.partitions=3")
	addr := srv.addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	groups := func(args ...string) string {
		t.Helper()
		return runTripod(t, append(append([]string{"groups"}, args...), "--bootstrap", addr)...)
	}
	groupsFails := func(args ...string) (stdout, stderr string) {
		t.Helper()
		return runTripodFails(t, append(append([]string{"groups"}, args...), "--bootstrap", addr)...)
	}

	// A topic of 3 partitions with 10 records each; record i of each
	// partition is stamped base + i seconds, all in one batch, so
	// --to-datetime needs the broker to find the record, not the batch.
	runTripod(t, "topics", "create", topic, "--partitions", "3", "--replication-factor", "1", "--bootstrap", addr)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer producer.Close()
	produce := func(partition int32, from, to int) {
		t.Helper()
		var records []*kgo.Record
		for i := from; i < to; i++ {
			records = append(records, &kgo.Record{Partition: partition, Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce to %s[%d]: %v", topic, partition, err)
		}
	}
	for p := range int32(3) {
		produce(p, 0, 10)
	}

	// A group consumer reads the 30 records and commits, then 5 more
	// records arrive on partition 0.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ClientID(clientID), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	consumerOpen := true
	defer func() {
		if consumerOpen {
			consumer.Close()
		}
	}()
	for seen := 0; seen < 30; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s consumed %d of 30 records", group, seen)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("group %s fetch: %v", group, err)
		}
		seen += fetches.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s commit: %v", group, err)
	}
	memberID, _ := consumer.GroupMetadata()
	produce(0, 10, 15)

	// list shows the group; with --state, in columns GROUP STATE.
	if out := runTripod(t, "groups", "list", "--bootstrap-server", addr); out != group+"\n" {
		t.Fatalf("groups list: got %q, want %q", out, group+"\n")
	}
	if got, want := table(groups("list", "--state", "stable")), [][]string{{"GROUP", "STATE"}, {group, "Stable"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("groups list --state stable: got %q, want %q", got, want)
	}
	if got, want := table(groups("list", "--state", "Empty,Dead")), [][]string{{"GROUP", "STATE"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("groups list --state Empty,Dead: got %q, want %q", got, want)
	}

	// describe: a row per partition, with the member consuming it.
	rows := describeRows(t, groups("describe", group))
	for p, want := range map[int32]struct{ current, end, lag string }{0: {"10", "15", "5"}, 1: {"10", "10", "0"}, 2: {"10", "10", "0"}} {
		row := rows[p]
		got := []string{row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"], row["CONSUMER-ID"], row["CLIENT-ID"]}
		if w := []string{want.current, want.end, want.lag, memberID, clientID}; !slices.Equal(got, w) {
			t.Errorf("groups describe %s, partition %d: got CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID CLIENT-ID %q, want %q", group, p, got, w)
		}
		if row["GROUP"] != group || row["TOPIC"] != topic || row["HOST"] == "-" || row["HOST"] == "" {
			t.Errorf("groups describe %s, partition %d: got GROUP %q TOPIC %q HOST %q, want %s, %s and a host", group, p, row["GROUP"], row["TOPIC"], row["HOST"], group, topic)
		}
	}

	// describe --members: the one member and its 3 partitions.
	members := table(groups("describe", group, "--members", "--verbose"))
	if len(members) != 2 || !slices.Equal(members[0], []string{"GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"}) {
		t.Fatalf("groups describe --members --verbose: got %q, want a header and one member", members)
	}
	if m := members[1]; m[0] != group || m[1] != memberID || m[3] != clientID || m[4] != "3" || m[5] != topic+"(0,1,2)" {
		t.Errorf("groups describe --members --verbose: got %q, want %s %s HOST %s 3 %s(0,1,2)", m, group, memberID, clientID, topic)
	}

	// describe --state: the coordinator, the consumer's strategy, Stable
	// with 1 member.
	wantState := [][]string{
		{"GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"},
		{group, addr, "(1)", "cooperative-sticky", "Stable", "1"},
	}
	if got := table(groups("describe", group, "--state")); !slices.EqualFunc(got, wantState, slices.Equal) {
		t.Errorf("groups describe --state: got %q, want %q", got, wantState)
	}
	if got := table(groups("describe", "--all-groups", "--state")); !slices.EqualFunc(got, wantState, slices.Equal) {
		t.Errorf("groups describe --all-groups --state: got %q, want %q", got, wantState)
	}

	// While the group has a member: reset-offsets --execute is refused,
	// as is a commit of generation -1 by the broker; delete-offsets of
	// the subscribed topic and delete are refused by the broker.
	if _, stderr := groupsFails("reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"); !strings.Contains(stderr, "inactive") || !strings.Contains(stderr, "Stable") {
		t.Errorf("groups reset-offsets --execute of an active group: got stderr %q, want it to say the group must be inactive and is Stable", stderr)
	}
	adm := kadm.NewClient(producer)
	var reset kadm.Offsets
	reset.AddOffset(topic, 0, 0, -1)
	resps, err := adm.CommitOffsets(ctx, group, reset)
	if err != nil {
		t.Fatalf("commit offsets of active group %s: %v", group, err)
	}
	if err := resps.Error(); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("commit offsets with generation -1 to a Stable group: got %v, want UNKNOWN_MEMBER_ID", err)
	}
	if stdout, _ := groupsFails("delete-offsets", group, "--topic", topic+":0"); !strings.Contains(stdout, "GROUP_SUBSCRIBED_TO_TOPIC") {
		t.Errorf("groups delete-offsets of a subscribed topic: got stdout %q, want GROUP_SUBSCRIBED_TO_TOPIC", stdout)
	}
	if stdout, _ := groupsFails("delete", group); !strings.Contains(stdout, "Group '"+group+"' could not be deleted due to: NON_EMPTY_GROUP") {
		t.Errorf("groups delete of an active group: got stdout %q, want NON_EMPTY_GROUP", stdout)
	}
	if got := committed(ctx, t, adm, group, topic); !maps.Equal(got, map[int32]int64{0: 10, 1: 10, 2: 10}) {
		t.Fatalf("committed offsets after the refusals: got %v, want 10 each", got)
	}

	// The consumer leaves: the group is Empty and keeps its offsets.
	consumer.Close()
	consumerOpen = false
	err = cluster.WaitFor(ctx, 30*time.Second, func() error {
		if got := table(groups("describe", group, "--state")); len(got) != 2 || got[1][4] != "Empty" || got[1][5] != "0" {
			return fmt.Errorf("describe --state: got %q, want %s Empty with 0 members", got, group)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the consumer left: %v", err)
	}
	stdout, stderr := runTripodBoth(t, "groups", "describe", group, "--bootstrap", addr)
	if want := "Consumer group '" + group + "' has no active members.\n"; stderr != want {
		t.Errorf("groups describe of an empty group: got stderr %q, want %q", stderr, want)
	}
	rows = describeRows(t, stdout)
	for p, lag := range map[int32]string{0: "5", 1: "0", 2: "0"} {
		row := rows[p]
		got := []string{row["CURRENT-OFFSET"], row["LAG"], row["CONSUMER-ID"], row["HOST"], row["CLIENT-ID"]}
		if want := []string{"10", lag, "-", "-", "-"}; !slices.Equal(got, want) {
			t.Errorf("groups describe of an empty group, partition %d: got CURRENT-OFFSET LAG CONSUMER-ID HOST CLIENT-ID %q, want %q", p, got, want)
		}
	}

	// reset-offsets without --execute prints the plan and changes
	// nothing.
	wantPlan := [][]string{{"GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"}, {group, topic, "0", "0"}, {group, topic, "1", "0"}, {group, topic, "2", "0"}}
	if got := table(groups("reset-offsets", group, "--topic", topic, "--to-earliest")); !slices.EqualFunc(got, wantPlan, slices.Equal) {
		t.Errorf("groups reset-offsets --to-earliest (dry run): got %q, want %q", got, wantPlan)
	}
	if got := committed(ctx, t, adm, group, topic); !maps.Equal(got, map[int32]int64{0: 10, 1: 10, 2: 10}) {
		t.Fatalf("committed offsets after a dry run: got %v, want 10 each, unchanged", got)
	}

	// With --execute each scenario commits its offsets.
	// An offset past the log's end is moved to the end, with Kafka's
	// note.
	for _, step := range []struct {
		args []string
		want map[int32]int64
		note string
	}{
		{[]string{"--topic", topic, "--to-earliest"}, map[int32]int64{0: 0, 1: 0, 2: 0}, ""},
		{[]string{"--topic", topic + ":0", "--to-latest"}, map[int32]int64{0: 15, 1: 0, 2: 0}, ""},
		{[]string{"--topic", topic + ":1,2", "--to-offset", "7"}, map[int32]int64{0: 15, 1: 7, 2: 7}, ""},
		{[]string{"--topic", topic + ":1", "--shift-by", "-2"}, map[int32]int64{0: 15, 1: 5, 2: 7}, ""},
		{[]string{"--topic", topic + ":2", "--to-offset", "100"}, map[int32]int64{0: 15, 1: 5, 2: 10},
			"New offset (100) is higher than latest offset for topic partition " + topic + "-2. Value will be set to 10\n"},
		{[]string{"--topic", topic + ":0", "--to-datetime", base.Add(3 * time.Second).UTC().Format(time.RFC3339)}, map[int32]int64{0: 3, 1: 5, 2: 10}, ""},
		{[]string{"--all-topics", "--shift-by", "1"}, map[int32]int64{0: 4, 1: 6, 2: 10},
			"New offset (11) is higher than latest offset for topic partition " + topic + "-2. Value will be set to 10\n"},
	} {
		args := append(append([]string{"groups", "reset-offsets", group}, step.args...), "--execute", "--bootstrap", addr)
		stdout, stderr := runTripodBoth(t, args...)
		if plan := table(stdout); len(plan) < 2 || !slices.Equal(plan[0], wantPlan[0]) {
			t.Fatalf("tripod %s: got %q, want the plan's table", strings.Join(args, " "), plan)
		}
		if stderr != step.note {
			t.Errorf("tripod %s: got stderr %q, want %q", strings.Join(args, " "), stderr, step.note)
		}
		if got := committed(ctx, t, adm, group, topic); !maps.Equal(got, step.want) {
			t.Fatalf("tripod %s: got committed offsets %v, want %v", strings.Join(args, " "), got, step.want)
		}
	}

	// delete-offsets removes partition 0's offset only.
	out := groups("delete-offsets", group, "--topic", topic+":0")
	if want := "Request succeeded for deleting offsets with topic " + topic + " group " + group + "\n"; !strings.HasPrefix(out, want) {
		t.Errorf("groups delete-offsets: got %q, want it to start %q", out, want)
	}
	if got, want := table(out)[1:], [][]string{{"TOPIC", "PARTITION", "STATUS"}, {topic, "0", "Successful"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("groups delete-offsets: got table %q, want %q", got, want)
	}
	if got := committed(ctx, t, adm, group, topic); !maps.Equal(got, map[int32]int64{1: 6, 2: 10}) {
		t.Fatalf("committed offsets after delete-offsets of partition 0: got %v, want 1: 6, 2: 10", got)
	}

	// delete removes the group: list no longer shows it, describe says it
	// does not exist.
	if out, want := groups("delete", group), "Deletion of requested consumer groups ('"+group+"') was successful.\n"; out != want {
		t.Errorf("groups delete: got %q, want %q", out, want)
	}
	if out := groups("list"); out != "" {
		t.Errorf("groups list after delete: got %q, want nothing", out)
	}
	if _, stderr := groupsFails("describe", group); !strings.Contains(stderr, "consumer group does not exist") {
		t.Errorf("groups describe of a deleted group: got stderr %q, want it to say the group does not exist", stderr)
	}
}

// TestGroupsRefusesBadFlags runs `tripod groups` with flag combinations
// that cannot work: it exits non-zero before connecting, naming the
// flags.
func TestGroupsRefusesBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"list", "--state", "Sleeping"}, []string{"--state", "Sleeping"}},
		{[]string{"describe"}, []string{"--all-groups"}},
		{[]string{"describe", "g", "--all-groups"}, []string{"--all-groups"}},
		{[]string{"describe", "g", "--members", "--state"}, []string{"--members", "--state"}},
		{[]string{"describe", "g", "--verbose"}, []string{"--verbose", "--members"}},
		{[]string{"delete"}, []string{"requires at least 1 arg"}},
		{[]string{"reset-offsets", "g", "--topic", "t"}, []string{"--to-earliest", "--to-latest", "--to-offset", "--shift-by", "--to-datetime"}},
		{[]string{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"}, []string{"--to-earliest, --to-latest", "only one"}},
		{[]string{"reset-offsets", "g", "--to-earliest"}, []string{"--topic", "--all-topics"}},
		{[]string{"reset-offsets", "g", "--topic", "t", "--all-topics", "--to-earliest"}, []string{"--topic and --all-topics"}},
		{[]string{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", "--dry-run"}, []string{"--execute and --dry-run"}},
		{[]string{"reset-offsets", "g", "--topic", "t:one", "--to-earliest"}, []string{"--topic", "t:one"}},
		{[]string{"reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"}, []string{"--to-datetime", "RFC 3339"}},
		{[]string{"reset-offsets", "g", "--topic", "t", "--to-offset", "-1"}, []string{"--to-offset"}},
		{[]string{"delete-offsets", "g"}, []string{"--topic"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			// Nothing listens on port 1: a command that connected would
			// fail differently, after its timeout.
			_, stderr := runTripodFails(t, append(append([]string{"groups"}, c.args...), "--bootstrap", "127.0.0.1:1", "--timeout", "5s")...)
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("got message %q, want one naming %s", stderr, w)
				}
			}
		})
	}
}

// runTripodBoth runs the tripod binary with args and returns its stdout
// and stderr, failing the test when it fails.
func runTripodBoth(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(tripodBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("tripod %s: %v; stderr:\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}

// runTripodFails runs the tripod binary with args, which must exit
// non-zero, and returns its stdout and stderr.
func runTripodFails(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(tripodBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("tripod %s: got %v, want a non-zero exit; stdout:\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), errOut.String()
}

// table splits a command's output into lines of whitespace-separated
// fields, leaving out blank lines.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 {
			rows = append(rows, fields)
		}
	}
	return rows
}

// describeColumns are the columns of `tripod groups describe`, as
// kafka-consumer-groups --describe prints them.
var describeColumns = []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"}

// describeRows parses the output of describe for one group: its rows by
// partition, each a map from column to value.
func describeRows(t *testing.T, out string) map[int32]map[string]string {
	t.Helper()
	lines := table(out)
	if len(lines) == 0 || !slices.Equal(lines[0], describeColumns) {
		t.Fatalf("groups describe: got %q, want a table with columns %q", out, describeColumns)
	}
	rows := map[int32]map[string]string{}
	for _, fields := range lines[1:] {
		if len(fields) != len(describeColumns) {
			t.Fatalf("groups describe: row %q has %d columns, want %d", fields, len(fields), len(describeColumns))
		}
		row := map[string]string{}
		for i, c := range describeColumns {
			row[c] = fields[i]
		}
		p, err := strconv.Atoi(row["PARTITION"])
		if err != nil {
			t.Fatalf("groups describe: row %q: PARTITION is not a number", fields)
		}
		rows[int32(p)] = row
	}
	return rows
}

// committed returns the offsets group has committed on topic, by
// partition, as the broker answers OffsetFetch.
func committed(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	offsets := map[int32]int64{}
	for _, r := range fetched.Sorted() {
		if r.Err != nil {
			t.Fatalf("fetch offsets of group %s: %s[%d]: %v", group, r.Topic, r.Partition, r.Err)
		}
		if r.Topic == topic && r.At >= 0 {
			offsets[r.Partition] = r.At
		}
	}
	return offsets
}
