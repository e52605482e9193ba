package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// startRaftCluster runs n `tripod serve` processes on embedded Raft with
// a session timeout long enough that a broker the test kills stays live
// for the controller a while (crash probes off, so that a killed broker
// is not fenced at once), and waits until they serve. With racks, the
// brokers are in those racks, round robin (cluster.Config.Racks). They
// are killed when the test ends.
func startRaftCluster(t *testing.T, n int, racks ...string) *cluster.Cluster {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.Binary, cfg.Dir, cfg.Brokers, cfg.SessionTimeout = tripodBin, t.TempDir(), n, 20*time.Second
	cfg.Racks = racks
	cfg.Sets = []string{"broker.crash.probe.interval.ms=0"}
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatalf("start a cluster of %d brokers: %v", n, err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, b := range c.Brokers() {
				t.Logf("--- log of %v ---\n%s", b, b.LogTail(16<<10))
			}
		}
	})
	if err := c.WaitServing(context.Background(), cluster.ServeTimeout); err != nil {
		t.Fatalf("cluster of %d brokers does not serve: %v", n, err)
	}
	return c
}

// assignmentOf returns topic's replicas by partition, as broker 1's
// Metadata has them.
func assignmentOf(t *testing.T, c *cluster.Cluster, topic string) [][]int32 {
	t.Helper()
	md, err := c.Metadata(context.Background(), 1, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int32
	for _, p := range md.Partitions[topic] {
		out = append(out, p.Replicas)
	}
	return out
}

// parseMoves parses one line of Kafka's reassignment JSON into the
// replicas of topic's partitions, by partition.
func parseMoves(t *testing.T, line, topic string) [][]int32 {
	t.Helper()
	var doc reassignmentJSON
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		t.Fatalf("parse %q: %v", line, err)
	}
	var out [][]int32
	for i, p := range doc.Partitions {
		if p.Topic != topic || p.Partition != int32(i) || len(p.LogDirs) != len(p.Replicas) {
			t.Fatalf("partitions[%d] of %s: got %+v, want %s-%d with a log dir per replica", i, line, p, topic, i)
		}
		out = append(out, p.Replicas)
	}
	return out
}

// TestReassignAndAlterReplicationFactor follows topic moves (4
// partitions of replication factor 1 on brokers 1 and 2, records in each)
// through the CLI on four Raft brokers run as processes: reassign --plan
// proposes an even spread that keeps every replica it can; --execute
// starts it and prints the rollback JSON; --verify says it is completed;
// topics alter raises the replication factor to 3 and lowers it to 2
// (never dropping a leader) with --wait; --drain 4 --dry-run changes
// nothing and --drain 4 --wait moves every replica off broker 4. With
// a broker killed (its session still alive), a reassignment onto it
// stays in progress: --list shows it, --verify exits non-zero, --cancel
// moves it back. Every record
// produced at the start is read back at the end. Bad input (an unknown
// broker, a replication factor out of range, an unknown topic) changes
// nothing.
func TestReassignAndAlterReplicationFactor(t *testing.T) {
	c := startRaftCluster(t, 4)
	addr := strings.Join(c.Bootstrap(), ",")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tripod := func(args ...string) string {
		t.Helper()
		return runTripod(t, append(args, "--bootstrap", addr)...)
	}
	fails := func(args ...string) string {
		t.Helper()
		_, stderr := runTripodFails(t, append(args, "--bootstrap", addr)...)
		return stderr
	}
	writeFile := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	tripod("topics", "create", "moves", "--replica-assignment", "1,1,2,2")
	cl := testClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const records = 100
	for i := range records {
		r := &kgo.Record{Topic: "moves", Partition: int32(i % 4), Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	// --plan: the current assignment, then one replica on each broker,
	// moving only what must move.
	topicsFile := writeFile("topics.json", `{"topics":[{"topic":"moves"}],"version":1}`)
	out := tripod("reassign", "--plan", "--topics-to-move-json-file", topicsFile, "--broker-list", "1,2,3,4")
	lines := strings.Split(out, "\n")
	if len(lines) != 6 || lines[0] != "Current partition replica assignment" || lines[2] != "" || lines[3] != "Proposed partition reassignment configuration" {
		t.Fatalf("reassign --plan printed:\n%s\nwant Kafka's two titled JSON lines", out)
	}
	wantCurrent := `{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1],"log_dirs":["any"]},` +
		`{"topic":"moves","partition":1,"replicas":[1],"log_dirs":["any"]},{"topic":"moves","partition":2,"replicas":[2],"log_dirs":["any"]},` +
		`{"topic":"moves","partition":3,"replicas":[2],"log_dirs":["any"]}]}`
	if lines[1] != wantCurrent {
		t.Fatalf("current assignment:\n got %s\nwant %s", lines[1], wantCurrent)
	}
	if got, want := parseMoves(t, lines[4], "moves"), [][]int32{{1}, {3}, {2}, {4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("proposed assignment %v, want %v", got, want)
	}

	// --execute with a throttle, then --verify until it is completed,
	// which clears the throttle.
	plan := writeFile("plan.json", lines[4])
	out = tripod("reassign", "--execute", plan, "--throttle", "50000000")
	wantOut := "Current partition replica assignment\n\n" + wantCurrent + "\n\nSave this to use as the --reassignment-json-file option during rollback\n" +
		"Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n" +
		"The inter-broker throttle limit was set to 50000000 B/s\n" +
		"Successfully started partition reassignments for moves-0,moves-1,moves-2,moves-3\n"
	if out != wantOut {
		t.Fatalf("reassign --execute printed:\n%s\nwant:\n%s", out, wantOut)
	}
	adm := kadm.NewClient(testClient(t, c))
	throttles := func() (topic map[string]string, rate string) {
		t.Helper()
		topic = map[string]string{}
		tc, err := adm.DescribeTopicConfigs(ctx, "moves")
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range tc[0].Configs {
			if (cfg.Key == "leader.replication.throttled.replicas" || cfg.Key == "follower.replication.throttled.replicas") && cfg.Value != nil && *cfg.Value != "" {
				topic[cfg.Key] = *cfg.Value
			}
		}
		bc, err := adm.DescribeBrokerConfigs(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range bc[0].Configs {
			if cfg.Key == "leader.replication.throttled.rate" && cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig && cfg.Value != nil {
				rate = *cfg.Value
			}
		}
		return topic, rate
	}
	topicThrottles, rate := throttles()
	if want := map[string]string{"leader.replication.throttled.replicas": "1:1,3:2", "follower.replication.throttled.replicas": "1:3,3:4"}; !maps.Equal(topicThrottles, want) || rate != "50000000" {
		t.Errorf("while moving: topic throttles %v and broker 3's rate %q, want %v and 50000000", topicThrottles, rate, want)
	}
	waitVerified(t, addr, plan)
	// Every broker applies configs as it learns them; the one asked may
	// still be catching up.
	if err := cluster.WaitFor(ctx, 30*time.Second, func() error {
		if topicThrottles, rate := throttles(); len(topicThrottles) != 0 || rate != "" {
			return fmt.Errorf("topic throttles %v, broker 3's rate %q", topicThrottles, rate)
		}
		return nil
	}); err != nil {
		t.Errorf("after --verify saw it completed: %v; want both cleared", err)
	}
	if got, want := assignmentOf(t, c, "moves"), [][]int32{{1}, {3}, {2}, {4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after --execute: replicas %v, want %v", got, want)
	}

	// topics alter: up to 3 replicas, then down to 2 keeping each leader.
	out = tripod("topics", "alter", "moves", "--replication-factor", "3", "--wait")
	if !strings.Contains(out, "Changing the replication factor of topic moves to 3: 4 partitions to reassign.") ||
		!strings.HasSuffix(out, "Reassignment of 4 partitions completed.\n") {
		t.Fatalf("topics alter --replication-factor 3 printed:\n%s", out)
	}
	checkAssignment(t, c, "moves", 3)
	leaders := map[int32]int32{}
	md, err := c.Metadata(ctx, 1, "moves")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Partitions["moves"] {
		leaders[p.Partition] = p.Leader
	}
	if out := tripod("topics", "alter", "moves", "--replication-factor", "3"); out != "Topic moves already has replication factor 3.\n" {
		t.Fatalf("topics alter to the same replication factor printed %q", out)
	}
	tripod("topics", "alter", "moves", "--replication-factor", "2", "--wait")
	checkAssignment(t, c, "moves", 2)
	md, err = c.Metadata(ctx, 1, "moves")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Partitions["moves"] {
		if p.Leader != leaders[p.Partition] || !slices.Contains(p.Replicas, leaders[p.Partition]) {
			t.Errorf("moves-%d after lowering to 2: leader %d replicas %v, want leader %d kept", p.Partition, p.Leader, p.Replicas, leaders[p.Partition])
		}
	}

	// Bad input changes nothing.
	before := assignmentOf(t, c, "moves")
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "alter", "moves", "--replication-factor", "5"}, "--replication-factor 5: must be between 1 and 4, the number of live brokers (1,2,3,4)"},
		{[]string{"topics", "alter", "moves", "--replication-factor", "0"}, "--replication-factor 0: must be between 1 and 4"},
		{[]string{"topics", "alter", "nope", "--replication-factor", "2"}, "topic nope: UNKNOWN_TOPIC_OR_PARTITION"},
		{[]string{"reassign", "--execute", writeFile("unknown-broker.json", `{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1,9]}]}`)},
			"partition moves-0: broker 9 is not a live broker (live: 1,2,3,4)"},
		{[]string{"reassign", "--execute", writeFile("unknown-partition.json", `{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1,2]},{"topic":"moves","partition":7,"replicas":[1]}]}`)},
			"partition moves-7: UNKNOWN_TOPIC_OR_PARTITION"},
		{[]string{"reassign", "--plan", "--topics-to-move-json-file", topicsFile, "--broker-list", "1,9"}, "--broker-list: broker 9 is not a live broker (live: 1,2,3,4)"},
		{[]string{"reassign", "--plan", "--topics-to-move-json-file", topicsFile, "--broker-list", "1"}, "partition moves-0 has 2 replicas and --broker-list only 1 brokers"},
		{[]string{"reassign", "--drain", "9"}, "--drain 9: no such broker"},
	} {
		if stderr := fails(bad.args...); !strings.Contains(stderr, bad.want) {
			t.Errorf("tripod %s: stderr %q, want %q", strings.Join(bad.args, " "), stderr, bad.want)
		}
	}
	if after := assignmentOf(t, c, "moves"); !slices.EqualFunc(after, before, slices.Equal) {
		t.Fatalf("after refused commands: replicas %v, want %v unchanged", after, before)
	}

	// --drain 4: --dry-run prints the plan only; then every replica
	// leaves broker 4 and each partition keeps 2 replicas.
	if out := tripod("reassign", "--drain", "4", "--dry-run"); !strings.HasPrefix(out, "Proposed partition reassignment configuration to drain broker 4") {
		t.Fatalf("reassign --drain 4 --dry-run printed:\n%s", out)
	}
	if after := assignmentOf(t, c, "moves"); !slices.EqualFunc(after, before, slices.Equal) {
		t.Fatalf("after --dry-run: replicas %v, want %v unchanged", after, before)
	}
	out = tripod("reassign", "--drain", "4", "--wait")
	if !strings.HasSuffix(out, "partitions completed.\n") && !strings.HasSuffix(out, "partition completed.\n") {
		t.Fatalf("reassign --drain 4 --wait printed:\n%s", out)
	}
	for p, replicas := range checkAssignment(t, c, "moves", 2) {
		if slices.Contains(replicas, 4) {
			t.Errorf("moves-%d after --drain 4: replicas %v", p, replicas)
		}
	}
	if out := tripod("reassign", "--drain", "4"); out != "Broker 4 holds no replica: nothing to move.\n" {
		t.Fatalf("a second --drain 4 printed %q", out)
	}
	if out := tripod("reassign", "--list"); out != "No partition reassignments found.\n" {
		t.Fatalf("reassign --list printed %q", out)
	}

	// A reassignment onto a broker that was killed stays in progress
	// until it is cancelled: for the controller the broker is live until
	// its session times out, so the target is accepted, but its replica
	// never catches up. (Killed rather than paused: a paused broker
	// accepts connections and answers nothing, and would hold up the
	// CLI's requests that go to it.)
	// The killed broker is neither a replica nor the controller.
	stuck := assignmentOf(t, c, "moves")[0]
	md, err = c.Metadata(ctx, 1, "moves")
	if err != nil {
		t.Fatal(err)
	}
	down := int32(-1)
	for _, id := range []int32{1, 2, 3, 4} {
		if !slices.Contains(stuck, id) && id != md.ControllerID {
			down = id
		}
	}
	target := append(slices.Clone(stuck), down)
	stuckFile := writeFile("stuck.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":%s}]}`, jsonIDs(target)))
	if err := c.Broker(down).Kill(); err != nil {
		t.Fatal(err)
	}
	tripod("reassign", "--execute", "--reassignment-json-file", stuckFile)
	if stderr := fails("reassign", "--execute", stuckFile); !strings.Contains(stderr, "reassignments are in progress for 1 partition") {
		t.Errorf("a second --execute while one is in progress: stderr %q, want a refusal", stderr)
	}
	wantList := fmt.Sprintf("Current partition reassignments:\nmoves-0: replicas: %s. adding: %d.\n", joinIDs(target), down)
	if out := tripod("reassign", "--list"); out != wantList {
		t.Errorf("reassign --list printed %q, want %q", out, wantList)
	}
	stdout, _ := runTripodFails(t, "reassign", "--verify", stuckFile, "--bootstrap", addr)
	if want := "Status of partition reassignment:\nReassignment of partition moves-0 is still in progress.\n"; stdout != want {
		t.Errorf("reassign --verify in progress printed %q, want %q", stdout, want)
	}
	if out := tripod("reassign", "--cancel", stuckFile); out != "Successfully cancelled partition reassignment for: moves-0\n" {
		t.Errorf("reassign --cancel printed %q", out)
	}
	if out := tripod("reassign", "--cancel", stuckFile); out != "None of the specified partition reassignments are active.\n" {
		t.Errorf("a second --cancel printed %q", out)
	}
	stdout, _ = runTripodFails(t, "reassign", "--verify", stuckFile, "--bootstrap", addr)
	if want := fmt.Sprintf("There is no active reassignment of partition moves-0, but replica set is %s rather than %s.", joinIDs(stuck), joinIDs(target)); !strings.Contains(stdout, want) {
		t.Errorf("reassign --verify after --cancel printed %q, want %q", stdout, want)
	}
	if err := c.Broker(down).Start(); err != nil {
		t.Fatal(err)
	}
	checkAssignment(t, c, "moves", 2)

	// Every record is still there.
	got := map[string]bool{}
	consumer := testClient(t, c, kgo.ConsumeTopics("moves"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for len(got) < records {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records", len(got), records)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for i := range records {
		if !got[fmt.Sprintf("v%d", i)] {
			t.Errorf("record v%d lost", i)
		}
	}
}

// waitVerified runs reassign --verify of file until it exits 0 and
// checks what it printed then.
func waitVerified(t *testing.T, addr, file string) {
	t.Helper()
	var out []byte
	err := cluster.WaitFor(context.Background(), time.Minute, func() error {
		cmd := exec.Command(tripodBin, "reassign", "--verify", file, "--bootstrap", addr)
		var err error
		out, err = cmd.Output()
		return err
	})
	if err != nil {
		t.Fatalf("reassign --verify %s: %v; last output:\n%s", file, err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		if strings.HasPrefix(line, "Clearing ") {
			continue // the throttles, which --verify removes once completed
		}
		if !strings.HasPrefix(line, "Reassignment of partition ") || !strings.HasSuffix(line, " is completed.") {
			t.Fatalf("reassign --verify printed %q, want every partition completed", out)
		}
	}
}

// checkAssignment waits until every live broker shows every partition of
// topic with rf replicas, all in sync, led by one of them, and returns the
// replicas by partition.
func checkAssignment(t *testing.T, c *cluster.Cluster, topic string, rf int) [][]int32 {
	t.Helper()
	ctx := context.Background()
	err := cluster.WaitFor(ctx, time.Minute, func() error {
		return c.EveryLive(ctx, func(md *cluster.Metadata) error {
			for _, p := range md.Partitions[topic] {
				if len(p.Replicas) != rf || !sameSet(p.ISR, p.Replicas) || !slices.Contains(p.Replicas, p.Leader) {
					return fmt.Errorf("%s-%d: leader %d replicas %v ISR %v, want %d replicas in sync", topic, p.Partition, p.Leader, p.Replicas, p.ISR, rf)
				}
			}
			return nil
		}, topic)
	})
	if err != nil {
		t.Fatal(err)
	}
	return assignmentOf(t, c, topic)
}

// testClient returns a kgo client on every broker of c, closed with the
// test.
func testClient(t *testing.T, c *cluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// jsonIDs formats ids as a JSON array.
func jsonIDs(ids []int32) string {
	out, _ := json.Marshal(ids)
	return string(out)
}

// TestReassignPlanRacks plans a move of a topic whose replicas all sit
// in one rack (6 partitions of 2 replicas on brokers 1 and 3, rack a)
// over four Raft brokers in racks a and b (1, 3 in a; 2, 4 in b): the
// plan, as kafka-reassign-partitions --generate's, gives every partition
// one replica in each rack and keeps its replication factor; with
// --disable-rack-aware it is the plan without racks (planSpread), which
// keeps partition 0 on brokers 1 and 3, both in rack a.
func TestReassignPlanRacks(t *testing.T) {
	c := startRaftCluster(t, 4, "a", "b")
	addr := strings.Join(c.Bootstrap(), ",")
	racks := map[int32]string{1: "a", 2: "b", 3: "a", 4: "b"}
	runTripod(t, "topics", "create", "racked", "--replica-assignment", "1:3,1:3,1:3,1:3,3:1,3:1", "--bootstrap", addr)
	topicsFile := filepath.Join(t.TempDir(), "topics.json")
	if err := os.WriteFile(topicsFile, []byte(`{"topics":[{"topic":"racked"}],"version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(flags ...string) (current, proposed [][]int32) {
		t.Helper()
		out := runTripod(t, append([]string{"reassign", "--plan", "--topics-to-move-json-file", topicsFile, "--broker-list", "1,2,3,4", "--bootstrap", addr}, flags...)...)
		lines := strings.Split(out, "\n")
		if len(lines) != 6 || lines[0] != "Current partition replica assignment" || lines[3] != "Proposed partition reassignment configuration" {
			t.Fatalf("reassign --plan %s printed:\n%s\nwant Kafka's two titled JSON lines", strings.Join(flags, " "), out)
		}
		return parseMoves(t, lines[1], "racked"), parseMoves(t, lines[4], "racked")
	}

	current, proposed := plan()
	if want := [][]int32{{1, 3}, {1, 3}, {1, 3}, {1, 3}, {3, 1}, {3, 1}}; !slices.EqualFunc(current, want, slices.Equal) {
		t.Fatalf("current assignment %v, want %v", current, want)
	}
	if len(proposed) != len(current) {
		t.Fatalf("proposed assignment %v: %d partitions, want %d", proposed, len(proposed), len(current))
	}
	leaders := map[string]int{}
	for p, replicas := range proposed {
		if len(replicas) != 2 || racks[replicas[0]] == racks[replicas[1]] {
			t.Errorf("proposed replicas of racked-%d: %v in racks %s and %s, want 2 replicas in distinct racks",
				p, replicas, racks[replicas[0]], racks[replicas[len(replicas)-1]])
		}
		leaders[racks[replicas[0]]]++
	}
	if leaders["a"] != 3 || leaders["b"] != 3 {
		t.Errorf("proposed assignment %v: preferred leaders by rack %v, want 3 in each", proposed, leaders)
	}

	current, proposed = plan("--disable-rack-aware")
	var moves []move
	for p, replicas := range current {
		moves = append(moves, move{topicPartition{"racked", int32(p)}, replicas})
	}
	spread, err := planSpread(moves, []int32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	for p, m := range spread {
		if !slices.Equal(proposed[p], m.replicas) {
			t.Fatalf("--disable-rack-aware: proposed assignment %v, want the plan without racks %v", proposed, spread)
		}
	}
	if !slices.Equal(proposed[0], []int32{1, 3}) {
		t.Fatalf("--disable-rack-aware: racked-0 proposed on %v, want [1 3] kept, both in rack a", proposed[0])
	}
}

// TestReassignRefusesBadInput checks the flags and files before any
// broker is asked: each refusal names what is wrong.
func TestReassignRefusesBadInput(t *testing.T) {
	addr := closedAddr(t)
	dir := t.TempDir()
	file := func(content string) string {
		f, err := os.CreateTemp(dir, "*.json")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(content)
		f.Close()
		return f.Name()
	}
	good := file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"reassign"}, "give one of --plan, --execute, --verify, --cancel, --list and --drain (got 0"},
		{[]string{"reassign", "--list", "--drain", "1"}, "(got 2: --list --drain)"},
		{[]string{"reassign", "--execute"}, "--execute: needs the reassignment FILE"},
		{[]string{"reassign", "--execute", good, "--reassignment-json-file", good}, "give the file once"},
		{[]string{"reassign", "--list", "--wait"}, "--wait: only with --execute or --drain, not with --list"},
		{[]string{"reassign", "--list", "--disable-rack-aware"}, "--disable-rack-aware: only with --plan, not with --list"},
		{[]string{"reassign", "--plan", "--broker-list", "1,2"}, "--plan: needs --topics-to-move-json-file and --broker-list"},
		{[]string{"reassign", "--plan", "--topics-to-move-json-file", file(`{"topics":[{"topic":"t"}],"version":1}`), "--broker-list", "1,x"}, `--broker-list "1,x": "x" is not a broker id`},
		{[]string{"reassign", "--plan", "--topics-to-move-json-file", file(`{"topics":[]}`), "--broker-list", "1"}, `"topics" is empty or missing`},
		{[]string{"reassign", "--drain", "-2"}, "--drain -2: want a broker id"},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}`)}, "not JSON"},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":"1,2"}]}`)}, `"partitions.replicas" is a JSON string, want []int32`},
		{[]string{"reassign", "--execute", file(`{"version":2,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`)}, `want "version": 1`},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[]}`)}, `"partitions" is empty or missing`},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}`)}, `partitions[0]: needs "topic" and "partition"`},
		{[]string{"reassign", "--verify", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`)}, "partition t-0: broker 1 named twice in its replicas"},
		{[]string{"reassign", "--cancel", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`)}, "partition t-0 named twice"},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`)}, `partition t-0: "replicas" is empty or missing`},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`)}, `1 "log_dirs" for 2 replicas`},
		{[]string{"reassign", "--execute", file(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data"]}]}`)}, `log dir "/data": only "any" is supported`},
		{[]string{"reassign", "--execute", filepath.Join(dir, "missing.json")}, "reassignment file: open"},
		{[]string{"topics", "alter", "t"}, "--replication-factor N is needed"},
	}
	for _, c := range cases {
		_, stderr := runTripodFails(t, append(c.args, "--bootstrap", addr, "--timeout", "5s")...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("tripod %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, c.want)
		}
	}
}

// TestPlans checks the plans the commands compute, without a cluster.
func TestPlans(t *testing.T) {
	parts := func(topic string, replicas ...[]int32) []kadm.PartitionDetail {
		var out []kadm.PartitionDetail
		for p, r := range replicas {
			out = append(out, kadm.PartitionDetail{Topic: topic, Partition: int32(p), Leader: r[0], Replicas: r, ISR: r})
		}
		return out
	}
	t.Run("spread keeps what can stay", func(t *testing.T) {
		current := []move{
			{topicPartition{"t", 0}, []int32{1, 2}}, {topicPartition{"t", 1}, []int32{1, 2}},
			{topicPartition{"t", 2}, []int32{1, 2}}, {topicPartition{"t", 3}, []int32{1, 2}},
		}
		got, err := planSpread(current, []int32{1, 2, 3, 4})
		if err != nil {
			t.Fatal(err)
		}
		replicas, leaders := map[int32]int{}, map[int32]int{}
		moved := 0
		for i, m := range got {
			for j, id := range m.replicas {
				replicas[id]++
				if !slices.Contains(current[i].replicas, id) {
					moved++
				}
				if j == 0 {
					leaders[id]++
				}
			}
		}
		for _, id := range []int32{1, 2, 3, 4} {
			if replicas[id] != 2 || leaders[id] != 1 {
				t.Fatalf("plan %v: broker %d holds %d replicas and leads %d, want 2 and 1", got, id, replicas[id], leaders[id])
			}
		}
		if moved != 4 {
			t.Fatalf("plan %v moves %d replicas, want 4 (the least to spread 8 over 4 brokers)", got, moved)
		}
	})
	t.Run("drain", func(t *testing.T) {
		v := clusterView{brokers: []int32{1, 2, 3, 4}, topics: map[string][]kadm.PartitionDetail{
			"t": parts("t", []int32{4, 1}, []int32{2, 4}, []int32{3, 4}, []int32{1, 2}),
		}}
		got, err := planDrain(v, 4)
		if err != nil {
			t.Fatal(err)
		}
		// Loads before: 1:2, 2:2, 3:1 replicas; leaders 1:1, 2:1, 3:1.
		want := []move{{topicPartition{"t", 0}, []int32{3, 1}}, {topicPartition{"t", 1}, []int32{2, 1}}, {topicPartition{"t", 2}, []int32{3, 2}}}
		if !slices.EqualFunc(got, want, func(a, b move) bool {
			return a.topicPartition == b.topicPartition && slices.Equal(a.replicas, b.replicas)
		}) {
			t.Fatalf("drain 4: got %+v, want %+v", got, want)
		}
		// Broker 4 led t-0, and broker 2, its only replacement, leads a
		// partition already: broker 1, which leads none, leads instead.
		v.topics["t"] = parts("t", []int32{4, 3, 1}, []int32{3, 1, 2}, []int32{2, 1, 3})
		got, err = planDrain(v, 4)
		if err != nil || len(got) != 1 || !slices.Equal(got[0].replicas, []int32{1, 2, 3}) {
			t.Fatalf("drain 4 of [4 3 1]: got %+v %v, want [1 2 3]", got, err)
		}
		v.topics["t"] = parts("t", []int32{1, 2, 3, 4})
		if _, err := planDrain(v, 4); err == nil || !strings.Contains(err.Error(), "partition t-0 has replication factor 4 and there are only 3 other live brokers (1,2,3)") {
			t.Fatalf("drain 4 with a partition of 4 replicas: got %v", err)
		}
	})
	t.Run("replication factor", func(t *testing.T) {
		v := clusterView{brokers: []int32{1, 2, 3, 4}, topics: map[string][]kadm.PartitionDetail{
			"t":     parts("t", []int32{1}, []int32{2}, []int32{3}, []int32{4}, []int32{1}, []int32{2}),
			"other": parts("other", []int32{1, 2}),
		}}
		up, err := planReplicationFactor(v, "t", 3)
		if err != nil {
			t.Fatal(err)
		}
		count := map[int32]int{}
		for _, m := range up {
			if len(m.replicas) != 3 || m.replicas[0] != v.topics["t"][m.partition].Replicas[0] {
				t.Fatalf("rf 3: partition %d gets %v, want 3 replicas led by the current one", m.partition, m.replicas)
			}
			for i, id := range m.replicas {
				if slices.Contains(m.replicas[:i], id) {
					t.Fatalf("rf 3: partition %d gets %v: broker %d twice", m.partition, m.replicas, id)
				}
				count[id]++
			}
		}
		for id, n := range count {
			if n < 4 || n > 5 {
				t.Fatalf("rf 3: replicas per broker %v, want 18 spread within one", count)
			}
			_ = id
		}
		v.topics["t"] = []kadm.PartitionDetail{{Topic: "t", Partition: 0, Leader: 3, Replicas: []int32{1, 2, 3}}}
		down, err := planReplicationFactor(v, "t", 1)
		if err != nil || len(down) != 1 || !slices.Equal(down[0].replicas, []int32{3}) {
			t.Fatalf("rf 1 of [1 2 3] led by 3: got %v %v, want [3]", down, err)
		}
		down, _ = planReplicationFactor(v, "t", 2)
		if !slices.Equal(down[0].replicas, []int32{1, 3}) {
			t.Fatalf("rf 2 of [1 2 3] led by 3: got %v, want [1 3]", down)
		}
	})
	t.Run("replication factor with racks", func(t *testing.T) {
		racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
		v := clusterView{brokers: []int32{1, 2, 3, 4, 5, 6}, racks: racks, topics: map[string][]kadm.PartitionDetail{
			"t": parts("t", []int32{1}, []int32{2}, []int32{3}, []int32{4}, []int32{5}, []int32{6}, []int32{1, 2}),
		}}
		up, err := planReplicationFactor(v, "t", 3)
		if err != nil || len(up) != 7 {
			t.Fatalf("rf 3: got %v %v, want 7 partitions moved", up, err)
		}
		for _, m := range up {
			spanned := map[string]bool{}
			for _, id := range m.replicas {
				spanned[racks[id]] = true
			}
			// [1 2] is in rack a twice already: it gains b or c.
			if want := 3 - btoi(m.partition == 6); len(m.replicas) != 3 || len(spanned) != want {
				t.Errorf("rf 3: partition %d gets %v, spanning racks %v, want %d racks", m.partition, m.replicas, spanned, want)
			}
		}
		// Going down, the replica sharing a rack goes first: 2, not 3.
		v.topics["t"] = []kadm.PartitionDetail{{Topic: "t", Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}}}
		down, err := planReplicationFactor(v, "t", 2)
		if err != nil || len(down) != 1 || !slices.Equal(down[0].replicas, []int32{1, 3}) {
			t.Fatalf("rf 2 of [1 2 3] with 1, 2 in rack a: got %v %v, want [1 3]", down, err)
		}
		// A broker without a rack: placed without racks, the last
		// replica dropped.
		delete(v.racks, 6)
		if down, _ = planReplicationFactor(v, "t", 2); !slices.Equal(down[0].replicas, []int32{1, 2}) {
			t.Fatalf("rf 2 of [1 2 3] without every rack: got %v, want [1 2], the last dropped", down)
		}
	})
	t.Run("plan with racks", func(t *testing.T) {
		racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
		// t has partitions of three replicas and one of two (its
		// replication factor altered), u one partition of one.
		current := []move{
			{topicPartition{"t", 0}, []int32{1, 2, 3}}, {topicPartition{"t", 1}, []int32{1, 2, 3}},
			{topicPartition{"t", 2}, []int32{1, 2}}, {topicPartition{"t", 3}, []int32{1, 2, 3}},
			{topicPartition{"u", 0}, []int32{5}},
		}
		got, err := planRackAware(current, racks, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range got {
			spanned := map[string]bool{}
			for _, id := range m.replicas {
				spanned[racks[id]] = true
			}
			if m.topicPartition != current[i].topicPartition || len(m.replicas) != len(current[i].replicas) || len(spanned) != len(m.replicas) {
				t.Errorf("plan of %s %v: got %s %v, want %d replicas in distinct racks", current[i].topicPartition, current[i].replicas, m.topicPartition, m.replicas, len(current[i].replicas))
			}
		}
		if _, err := planRackAware(current, map[int32]string{1: "a", 2: "b"}, rand.New(rand.NewPCG(1, 2))); err == nil || !strings.Contains(err.Error(), "partition t-0 has 3 replicas and --broker-list only 2 brokers") {
			t.Errorf("plan of 3 replicas over 2 brokers: got %v", err)
		}
	})
	t.Run("racks of the brokers listed", func(t *testing.T) {
		v := clusterView{brokers: []int32{1, 2, 3, 4}, racks: map[int32]string{1: "a", 2: "b", 3: "a"}}
		if racks, err := v.racksOf([]int32{1, 2, 3}, true); err != nil || len(racks) != 3 {
			t.Errorf("racks of 1, 2, 3: got %v %v, want each one's", racks, err)
		}
		if _, err := v.racksOf([]int32{1, 4}, true); err == nil || !strings.Contains(err.Error(), "not all brokers have rack information (broker.rack), none for 4; give --disable-rack-aware") {
			t.Errorf("racks of 1 (rack a) and 4 (none): got %v, want a refusal naming 4 and --disable-rack-aware", err)
		}
		if racks, err := v.racksOf([]int32{1, 4}, false); err != nil || racks != nil {
			t.Errorf("racks of 1 and 4 with --disable-rack-aware: got %v %v, want none", racks, err)
		}
		v.racks = nil
		if racks, err := v.racksOf([]int32{1, 4}, true); err != nil || racks != nil {
			t.Errorf("racks of 1 and 4, neither with a rack: got %v %v, want none", racks, err)
		}
	})
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
