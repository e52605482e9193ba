package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
)

// bootstrapLine, brokerLine and partitionLine match what `tripod dev` and
// `tripod topics describe` print that the test reads.
var (
	bootstrapLine = regexp.MustCompile(`^bootstrap servers: (\S+)$`)
	brokerLine    = regexp.MustCompile(`^broker (\d+): \S+ pid (\d+) `)
	partitionLine = regexp.MustCompile(`^\tTopic: demo\tPartition: (\d+)\tLeader: (\d+)\tReplicas: (\d+),(\d+),(\d+)\tIsr: ([\d,]+)$`)
)

// TestDevAndTopics runs `tripod dev --brokers 3` as a process, creates a
// topic of 6 partitions with replication factor 3 with `tripod topics
// create` and checks `tripod topics describe`: one line per partition in
// kafka-topics' form, each broker leading 2, every replica in the ISR;
// `tripod topics delete-records` answers the empty partition's log start.
// Ctrl-C (SIGINT) then stops the brokers and dev exits 0.
func TestDevAndTopics(t *testing.T) {
	base := freeBasePort(t)
	dev := exec.Command(tripodBin, "dev", "--brokers", "3", "--coord", "raft",
		"--base-port", strconv.Itoa(base), "--session-timeout", "2s", "--data-dir", t.TempDir())
	stdout, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	dev.Stderr = &stderr
	if err := dev.Start(); err != nil {
		t.Fatalf("start tripod dev: %v", err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		// The reader ends when dev exits and its stdout closes.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Log("tripod dev: " + sc.Text())
			lines <- sc.Text()
		}
		close(lines)
		exited <- dev.Wait()
	}()
	t.Cleanup(func() {
		dev.Process.Kill()
		for range lines {
		}
		<-exited
	})

	var bootstrap string
	pids := map[int]int{}
	deadline := time.After(90 * time.Second)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("tripod dev exited before the cluster was ready; stderr:\n%s", stderr.String())
			}
			if m := bootstrapLine.FindStringSubmatch(line); m != nil {
				bootstrap = m[1]
			}
			if m := brokerLine.FindStringSubmatch(line); m != nil {
				id, _ := strconv.Atoi(m[1])
				pids[id], _ = strconv.Atoi(m[2])
			}
			ready = strings.HasPrefix(line, "cluster ready")
		case <-deadline:
			t.Fatalf("tripod dev: no \"cluster ready\" within 90s; stderr:\n%s", stderr.String())
		}
	}
	if want := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+1, base+2); bootstrap != want {
		t.Fatalf("bootstrap servers %q, want %q", bootstrap, want)
	}
	if len(pids) != 3 {
		t.Fatalf("broker pids %v, want 3 brokers", pids)
	}
	addr := strings.Split(bootstrap, ",")[0]

	out := runTripod(t, "topics", "create", "demo", "--partitions", "6", "--replication-factor", "3", "--bootstrap", addr)
	if out != "Created topic demo.\n" {
		t.Fatalf("topics create printed %q, want \"Created topic demo.\\n\"", out)
	}
	if out := runTripod(t, "topics", "list", "--bootstrap", addr); out != "demo\n" {
		t.Fatalf("topics list printed %q, want \"demo\\n\"", out)
	}
	// Leaders are elected as the topic is created; describe until every
	// partition line shows one.
	var described string
	err = cluster.WaitFor(context.Background(), 30*time.Second, func() error {
		described = runTripod(t, "topics", "describe", "demo", "--bootstrap", addr)
		return checkDescribe(described)
	})
	if err != nil {
		t.Fatalf("topics describe demo:\n%s\n%v", described, err)
	}
	if out := runTripod(t, "topics", "delete-records", "demo", "--partition", "2", "--offset", "-1", "--bootstrap", addr); out != "Deleted records of demo-2: the partition now starts at offset 0.\n" {
		t.Fatalf("topics delete-records printed %q, want the new log start 0 of the empty partition", out)
	}

	if err := dev.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("tripod dev after Ctrl-C: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("tripod dev did not exit within 60s of Ctrl-C")
	}
	for id, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("broker %d (pid %d) still runs after dev exited: kill 0 says %v", id, pid, err)
		}
	}
}

// checkDescribe checks describe's output for topic demo: a topic line,
// then 6 partition lines each led by its first replica with every replica
// in the ISR, 2 led by each broker.
func checkDescribe(out string) error {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 7 {
		return fmt.Errorf("got %d lines, want a topic line and 6 partition lines", len(lines))
	}
	if want := "Topic: demo\tPartitionCount: 6\tReplicationFactor: 3\tConfigs: "; lines[0] != want {
		return fmt.Errorf("topic line %q, want %q", lines[0], want)
	}
	led := map[string]int{}
	for i, line := range lines[1:] {
		m := partitionLine.FindStringSubmatch(line)
		if m == nil {
			return fmt.Errorf("partition line %q, want \\tTopic: demo\\tPartition: N\\tLeader: L\\tReplicas: a,b,c\\tIsr: ...", line)
		}
		if m[1] != strconv.Itoa(i) {
			return fmt.Errorf("line %q: partition %s, want %d", line, m[1], i)
		}
		if m[2] != m[3] {
			return fmt.Errorf("line %q: leader %s, want the preferred replica %s", line, m[2], m[3])
		}
		if replicas := m[3] + "," + m[4] + "," + m[5]; m[6] != replicas {
			return fmt.Errorf("line %q: ISR %s, want every replica %s", line, m[6], replicas)
		}
		led[m[2]]++
	}
	for _, id := range []string{"1", "2", "3"} {
		if led[id] != 2 {
			return fmt.Errorf("partitions led per broker %v, want 2 each", led)
		}
	}
	return nil
}

// runTripod runs the tripod binary with args and returns its stdout,
// failing the test when it fails.
func runTripod(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(tripodBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tripod %s: %v; stderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// freeBasePort returns a port p such that p, p+1, p+2 (Kafka) and p+100,
// p+101, p+102 (Raft) are free on 127.0.0.1 when probed.
func freeBasePort(t *testing.T) int {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+102 > 65535 {
			continue
		}
		free := true
		for _, p := range []int{base, base + 1, base + 2, base + 100, base + 101, base + 102} {
			pl, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				break
			}
			pl.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free run of ports for tripod dev")
	return 0
}
