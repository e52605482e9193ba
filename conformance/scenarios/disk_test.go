package scenarios

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestFullDiskTakesLogDirOffline is "A full disk" in docs/operations.md, with
// brokers as processes, on every backend: a broker X that is not the
// controller runs with a second log dir on a real 2 MiB tmpfs. The tmpfs
// is filled, and X's next append there fails with ENOSPC: that dir goes
// offline on X, not X. X reports it to the controller, another process,
// with a BrokerHeartbeat; the controller moves the leaderships and ISR
// places of X's replicas in that dir to the other brokers, while X stays
// registered and in the ISRs of its partitions in its first dir. Every
// record acknowledged with acks=all is read back.
func TestFullDiskTakesLogDirOffline(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		start := time.Now()
		// Mounted before the cluster starts, so that it is unmounted after
		// the cluster's processes (which hold files in it) are gone.
		fullDir := filepath.Join(t.TempDir(), "tmpfs")
		cluster.MountTmpfs(t, fullDir, "2m")
		c := startCluster(t, backend, 3)

		// X: broker 2, or 3 when 2 is the controller. It restarts with its
		// own dir first (the Raft state and broker.epoch stay there) and
		// the tmpfs second.
		ctrl := controller(t, c)
		x := int32(2)
		if ctrl == x {
			x = 3
		}
		bx := c.Broker(x)
		if err := bx.Stop(settle); err != nil {
			t.Fatalf("stop %v: %v", bx, err)
		}
		bx.SetArgs(withLogDirs(bx.Args(), bx.DataDir, fullDir))
		if err := bx.Start(); err != nil {
			t.Fatalf("start %v with log.dirs %s,%s: %v", bx, bx.DataDir, fullDir, err)
		}
		if err := c.WaitServing(context.Background(), settle); err != nil {
			t.Fatalf("cluster after %v restarted with two log dirs: %v", bx, err)
		}
		if got := controller(t, c); got == x {
			t.Fatalf("controller after broker %d restarted: got %d, want another broker", x, got)
		}
		ctrl = controller(t, c)
		err := cluster.WaitFor(context.Background(), settle, func() error {
			md, err := c.Metadata(context.Background(), ctrl)
			if err != nil {
				return err
			}
			if !slices.Contains(md.Brokers, x) {
				return fmt.Errorf("controller %d lists brokers %v, want %d among them", ctrl, md.Brokers, x)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for restarted broker %d to register: %v", x, err)
		}

		const topic, partitions = "disk", 6
		createTopic(t, c, topic, partitions, 3)
		var inFull, inFirst []int32
		err = cluster.WaitFor(context.Background(), settle, func() error {
			inFull, inFirst = nil, nil
			for p := range int32(partitions) {
				name := topic + "-" + strconv.Itoa(int(p))
				switch {
				case exists(filepath.Join(fullDir, name)):
					inFull = append(inFull, p)
				case exists(filepath.Join(bx.DataDir, name)):
					inFirst = append(inFirst, p)
				default:
					return fmt.Errorf("broker %d holds no log of partition %d yet", x, p)
				}
			}
			return c.EveryLive(context.Background(), func(md *cluster.Metadata) error {
				for _, p := range md.Partitions[topic] {
					if len(p.ISR) != 3 {
						return fmt.Errorf("partition %d: got ISR %v, want 3 replicas", p.Partition, p.ISR)
					}
				}
				return nil
			}, topic)
		})
		if err != nil {
			t.Fatalf("waiting for broker %d to hold every partition with a full ISR: %v", x, err)
		}
		if len(inFull) == 0 || len(inFirst) == 0 {
			t.Fatalf("broker %d's placement: got partitions %v in %s and %v in %s, want some in each",
				x, inFull, fullDir, inFirst, bx.DataDir)
		}
		md := metadata(t, c, ctrl, topic)
		t.Logf("broker %d (controller %d): partitions %v on the tmpfs, %v in its first dir; leads %v",
			x, ctrl, inFull, inFirst, md.LedBy(topic, x))

		cl := kafkaClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent
		acked := map[int32][]record{}
		// produceRound produces one record to every partition, and
		// remembers those acknowledged. An error is a record not
		// acknowledged.
		produceRound := func(prefix string, size int) []error {
			ctx, cancel := context.WithTimeout(context.Background(), settle)
			defer cancel()
			recs := make([]*kgo.Record, partitions)
			for p := range recs {
				v := fmt.Sprintf("%s-%d-%s", prefix, p, strings.Repeat("x", size))
				recs[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}
			}
			var errs []error
			for _, r := range cl.ProduceSync(ctx, recs...) {
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("%s/%d: %w", topic, r.Record.Partition, r.Err))
					continue
				}
				acked[r.Record.Partition] = append(acked[r.Record.Partition], record{r.Record.Offset, string(r.Record.Value)})
			}
			return errs
		}
		for i := range 3 {
			if errs := produceRound("before-"+strconv.Itoa(i), 0); len(errs) > 0 {
				t.Fatalf("produce before the disk fills: got %v, want no error", errs)
			}
		}

		cluster.FillFileSystem(t, filepath.Join(fullDir, "filler"))
		offline := regexp.MustCompile(`log dir offline.*\bdir=` + regexp.QuoteMeta(fullDir) + `\b`)
		rounds, unacked := 0, 0
		err = cluster.WaitFor(context.Background(), settle, func() error {
			if offline.MatchString(bx.LogTail(4 << 20)) {
				return nil
			}
			rounds++
			unacked += len(produceRound("full-"+strconv.Itoa(rounds), 8<<10))
			return fmt.Errorf("broker %d's log has no %q after %d rounds of produce to a full disk", x, offline, rounds)
		})
		if err != nil {
			t.Fatalf("waiting for the tmpfs to go offline: %v", err)
		}
		t.Logf("log dir %s offline on broker %d after %d produce rounds (%d records not acknowledged)", fullDir, x, rounds, unacked)

		// The controller moves leaderships and ISR places, as every other
		// broker sees it; X stays a live broker in the ISRs of its first
		// dir's partitions.
		check := func(md *cluster.Metadata) error {
			if !slices.Contains(md.Brokers, x) {
				return fmt.Errorf("live brokers: got %v, want %d among them", md.Brokers, x)
			}
			for _, p := range inFull {
				st, ok := md.Partition(topic, p)
				if !ok {
					return fmt.Errorf("partition %d missing", p)
				}
				if st.Leader < 0 || st.Leader == x || slices.Contains(st.ISR, x) {
					return fmt.Errorf("partition %d (offline on broker %d): got leader %d ISR %v, want another leader and %d out of the ISR",
						p, x, st.Leader, st.ISR, x)
				}
			}
			for _, p := range inFirst {
				st, ok := md.Partition(topic, p)
				if !ok {
					return fmt.Errorf("partition %d missing", p)
				}
				if st.Leader < 0 || !slices.Contains(st.ISR, x) {
					return fmt.Errorf("partition %d (online on broker %d): got leader %d ISR %v, want a leader and %d in the ISR",
						p, x, st.Leader, st.ISR, x)
				}
			}
			return nil
		}
		err = cluster.WaitFor(context.Background(), settle, func() error {
			for _, id := range others(c, x) {
				md, err := c.Metadata(context.Background(), id, topic)
				if err != nil {
					return err
				}
				if err := check(md); err != nil {
					return fmt.Errorf("metadata from broker %d: %w", id, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for the controller to move broker %d's offline replicas: %v", x, err)
		}
		if exited, err := bx.Exit(); exited {
			t.Fatalf("broker %d: got exited (%v), want it running with one dir offline", x, err)
		}

		// The report went over the network: the controller's process took
		// X's BrokerHeartbeat (63_broker_heartbeat.go) and its controller
		// handled the failure (controller.State.LogDirFailure).
		id := strconv.Itoa(int(x))
		reported := []*regexp.Regexp{
			regexp.MustCompile(`tripod: log dir failure reported: broker=` + id + `\b`),
			regexp.MustCompile(`tripod\.controller: log dir failure reported: asking the broker.*\bbroker=` + id + `\b`),
		}
		cb := c.Broker(ctrl)
		err = cluster.WaitFor(context.Background(), 5*time.Second, func() error {
			log := cb.LogTail(4 << 20)
			for _, re := range reported {
				if !re.MatchString(log) {
					return fmt.Errorf("controller %d's log: got no %q, want it", ctrl, re)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		for i := range 3 {
			if errs := produceRound("after-"+strconv.Itoa(i), 0); len(errs) > 0 {
				t.Fatalf("produce after the dir went offline: got %v, want no error", errs)
			}
		}
		for p := range int32(partitions) {
			got := readPartition(t, c, topic, p)
			for _, want := range acked[p] {
				if !holds(got, want.offset, want.value) {
					t.Errorf("%s/%d: acknowledged record at offset %d: got %d records %.200v, want %.60q there",
						topic, p, want.offset, len(got), got, want.value)
				}
			}
		}
		t.Logf("%s: %d rounds to a full disk, done in %v", backend, rounds, time.Since(start).Round(time.Millisecond))
	})
}

// withLogDirs returns args (a `tripod serve` command line) with
// log.dirs set to dirs in place of --data-dir, which would override it.
func withLogDirs(args []string, dirs ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--data-dir" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return append(out, "--set", "log.dirs="+strings.Join(dirs, ","))
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
