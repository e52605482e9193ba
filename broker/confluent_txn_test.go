package broker

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestConfluentKafkaTransactions runs testdata/confluent_txn.py,
// confluent-kafka's (librdkafka's) transactional producer, against a
// broker: a committed transaction, an aborted one, a producer fenced by a
// new instance with its transactional.id whose open transaction the
// coordinator aborts, and the replacement's commit. A read_committed
// consumer must read exactly the committed records, a read_uncommitted
// one every record written.
func TestConfluentKafkaTransactions(t *testing.T) {
	python := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
	cfg := txnTestConfig(t)
	b := startBroker(t, cfg)
	const topic = "confluent-txn"
	createTopic(t, b, topic, 3, nil)
	ctx := testContext(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, python, "testdata/confluent_txn.py", b.Addr().String(), topic)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent_txn.py: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	steps := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var step map[string]any
		if err := json.Unmarshal([]byte(line), &step); err != nil {
			t.Fatalf("confluent_txn.py printed %q: %v", line, err)
		}
		steps[step["step"].(string)] = step
	}
	if f := steps["fenced"]; f == nil || f["fenced"] != true || f["fatal"] != true {
		t.Errorf("the zombie producer after its replacement started: %v, want a fatal fenced error", f)
	}
	values := func(step string) []string {
		s := steps[step]
		if s == nil {
			t.Fatalf("confluent_txn.py did not report %s:\n%s", step, out)
		}
		var v []string
		for _, x := range s["values"].([]any) {
			v = append(v, x.(string))
		}
		return v
	}
	series := func(prefix string, n int) []string {
		var v []string
		for i := range n {
			v = append(v, fmt.Sprintf("%s-%d", prefix, i))
		}
		return v
	}
	committed := slices.Concat(series("committed", 10), series("replacement", 4))
	slices.Sort(committed)
	if got := values("read_committed"); !slices.Equal(got, committed) {
		t.Errorf("read_committed consumer read %v, want exactly the committed %v", got, committed)
	}
	all := slices.Concat(committed, series("aborted", 5), series("zombie", 3))
	slices.Sort(all)
	got := values("read_uncommitted")
	// The zombie's late record may or may not have been written before
	// it learnt it was fenced.
	got = slices.DeleteFunc(got, func(v string) bool { return v == "zombie-late-0" })
	if !slices.Equal(got, all) {
		t.Errorf("read_uncommitted consumer read %v, want every record written %v", got, all)
	}
}
