package scenarios

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestRaiseReplicationFactorUnderLoad: a topic of 6 partitions with one
// replica each, on two brokers (neither the controller), takes acks=all
// writes from a producer that runs throughout. `tripod topics alter
// --replication-factor 3 --wait` raises it to 3 replicas; once every
// broker shows them in sync, the two original replicas, which still lead,
// are killed with SIGKILL. Every partition gets a leader among the new
// replicas, the producer goes on, and every record it had acknowledged,
// before, during and after the move, is read back at its offset.
func TestRaiseReplicationFactorUnderLoad(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, brokersFor(backend, true))
		ctrl := controller(t, c)
		old := others(c, ctrl)[:2]
		createAssigned(t, c, "raise", [][]int32{{old[0]}, {old[1]}, {old[0]}, {old[1]}, {old[0]}, {old[1]}})
		loads := make([]*load, 6)
		for p := range loads {
			loads[p] = startLoad(t, c, "raise", int32(p))
		}
		acked := func() int {
			n := 0
			for _, l := range loads {
				n += l.ackedCount()
			}
			return n
		}
		waitEach := func(more int) {
			t.Helper()
			for _, l := range loads {
				l.waitAcked(t, l.ackedCount()+more)
			}
		}
		waitEach(10)

		t.Logf("step 1: raise the replication factor to 3 under load (%d records acked so far)", acked())
		raised := time.Now()
		out := runCLI(t, c, "topics", "alter", "raise", "--replication-factor", "3", "--wait")
		if !strings.Contains(out, "Reassignment of 6 partitions completed.") {
			t.Fatalf("topics alter printed:\n%s", out)
		}
		waitEvery(t, c, settle, "every partition of raise on 3 replicas, all in sync", func(md *cluster.Metadata) error {
			for _, p := range md.Partitions["raise"] {
				if len(p.Replicas) != 3 || !sameIDs(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] {
					return fmt.Errorf("raise/%d: leader %d replicas %v ISR %v, want 3 replicas in sync, led by the original one", p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
			return nil
		}, "raise")
		t.Logf("%s: replication factor 3 in sync %v after the command started, %d records acked", backend, time.Since(raised).Round(time.Millisecond), acked())

		t.Logf("step 2: SIGKILL the original replicas %v", old)
		waitEach(5)
		for _, id := range old {
			if err := c.Broker(id).Kill(); err != nil {
				t.Fatal(err)
			}
		}
		killed := acked()
		waitEvery(t, c, sessionTimeout+settle, "every partition of raise led by a new replica", func(md *cluster.Metadata) error {
			for _, p := range md.Partitions["raise"] {
				if p.Leader < 0 || slices.Contains(old, p.Leader) {
					return fmt.Errorf("raise/%d: leader %d, want one of the replicas added to %v", p.Partition, p.Leader, old)
				}
			}
			return nil
		}, "raise")
		waitEach(10)

		t.Logf("step 3: read back every acknowledged record")
		total := 0
		for p, l := range loads {
			ackedRecs, _ := l.stop(t)
			total += len(ackedRecs)
			final := readPartition(t, c, "raise", int32(p))
			for _, r := range ackedRecs {
				if !holds(final, r.offset, r.value) {
					t.Errorf("raise/%d: acknowledged record %v is not in the log", p, r)
				}
			}
		}
		t.Logf("%s: %d records acknowledged in all, %d of them after the kill; every one read back", backend, total, total-killed)
	})
}

// TestDrainBroker: on four brokers, a topic of 6 partitions with 3
// replicas each takes acks=all writes on every partition throughout.
// `tripod reassign --drain 4 --wait` moves every replica off broker 4
// (leaderships too); then broker 4 is stopped, and no partition is
// offline or under-replicated: each is led by a live broker, with 3
// replicas, all in sync, none on broker 4. The producers go on, and
// every record they had acknowledged is read back at its offset.
func TestDrainBroker(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 4)
		createTopic(t, c, "drain", 6, 3)
		before := metadata(t, c, 1, "drain")
		held := 0
		for _, p := range before.Partitions["drain"] {
			if slices.Contains(p.Replicas, 4) {
				held++
			}
		}
		loads := make([]*load, 6)
		for p := range loads {
			loads[p] = startLoad(t, c, "drain", int32(p))
		}
		for _, l := range loads {
			l.waitAcked(t, 10)
		}

		t.Logf("step 1: drain broker 4 (%d of 6 partitions have a replica on it)", held)
		drained := time.Now()
		out := runCLI(t, c, "reassign", "--drain", "4", "--wait")
		if !strings.Contains(out, fmt.Sprintf("Reassignment of %d partition", held)) {
			t.Fatalf("reassign --drain 4 printed:\n%s", out)
		}
		healthy := func(md *cluster.Metadata) error {
			for _, p := range md.Partitions["drain"] {
				if len(p.Replicas) != 3 || slices.Contains(p.Replicas, 4) || !sameIDs(p.ISR, p.Replicas) ||
					p.Leader < 0 || p.Leader == 4 || len(p.Offline) > 0 {
					return fmt.Errorf("drain/%d: leader %d replicas %v ISR %v offline %v, want 3 replicas in sync off broker 4",
						p.Partition, p.Leader, p.Replicas, p.ISR, p.Offline)
				}
			}
			return nil
		}
		waitEvery(t, c, settle, "every replica off broker 4", healthy, "drain")
		t.Logf("%s: broker 4 drained of %d replicas in %v", backend, held, time.Since(drained).Round(time.Millisecond))

		t.Logf("step 2: stop broker 4: no partition is offline or under-replicated")
		if err := c.Broker(4).Stop(settle); err != nil {
			t.Fatal(err)
		}
		waitEvery(t, c, sessionTimeout+settle, "a live controller", func(md *cluster.Metadata) error {
			if md.ControllerID < 0 || md.ControllerID == 4 {
				return fmt.Errorf("controller %d, want a live broker", md.ControllerID)
			}
			return nil
		})
		if err := c.EveryLive(context.Background(), healthy, "drain"); err != nil {
			t.Fatalf("with broker 4 stopped: %v", err)
		}
		total := 0
		for p, l := range loads {
			l.waitAcked(t, l.ackedCount()+10)
			acked, _ := l.stop(t)
			total += len(acked)
			final := readPartition(t, c, "drain", int32(p))
			for _, r := range acked {
				if !holds(final, r.offset, r.value) {
					t.Errorf("drain/%d: acknowledged record %v is not in the log", p, r)
				}
			}
		}
		t.Logf("%s: %d records acknowledged while broker 4 was drained and stopped; every one read back", backend, total)
	})
}

// TestControllerFailoverMidReassignment: three partitions on one broker
// (not the controller) are reassigned to it and another broker, which is
// paused (SIGSTOP) just before, so the reassignment cannot complete: the
// controller lists it in progress, and is killed with SIGKILL right after
// it acknowledged the request. The paused broker resumes before its
// session ends. The new controller completes the reassignment: it lists
// none, every broker shows both replicas in sync, and the added broker
// holds every record on its disk.
func TestControllerFailoverMidReassignment(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		c := startCluster(t, backend, 3)
		ctrl := controller(t, c)
		pair := others(c, ctrl)
		from, added := pair[0], pair[1]
		createAssigned(t, c, "midway", [][]int32{{from}, {from}, {from}})
		cl := kafkaClient(t, c, acksAll...)
		want := map[int32][]record{}
		for p := range int32(3) {
			vals := values(fmt.Sprintf("midway-%d", p), 10)
			for i, o := range produceValues(t, cl, "midway", p, vals...) {
				want[p] = append(want[p], record{o, vals[i]})
			}
		}
		// The requests below go to the controller alone (Cluster.Request),
		// never to the paused broker, which would hold them unanswered.

		t.Logf("step 1: pause broker %d; reassign midway to [%d %d] at controller %d", added, from, added, ctrl)
		if err := c.Broker(added).Pause(); err != nil {
			t.Fatal(err)
		}
		paused := true
		defer func() {
			if paused {
				c.Broker(added).Resume()
			}
		}()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = "midway"
		for p := range int32(3) {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = p, []int32{from, added}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := c.Request(context.Background(), ctrl, req)
		if err != nil {
			t.Fatalf("AlterPartitionReassignments at controller %d: %v", ctrl, err)
		}
		alter := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		if err := kerr.ErrorForCode(alter.ErrorCode); err != nil {
			t.Fatalf("AlterPartitionReassignments: %v", err)
		}
		for _, rp := range alter.Topics[0].Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("reassign midway/%d: %v", rp.Partition, err)
			}
		}
		if ongoing := listAt(t, c, ctrl); len(ongoing) != 3 {
			t.Fatalf("controller %d lists %v in progress, want the 3 partitions of midway adding broker %d", ctrl, ongoing, added)
		}

		t.Logf("step 2: SIGKILL controller %d; resume broker %d", ctrl, added)
		if err := c.Broker(ctrl).Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := c.Broker(added).Resume(); err != nil {
			t.Fatal(err)
		}
		paused = false

		t.Logf("step 3: the new controller completes the reassignment")
		successor := controller(t, c)
		if successor == ctrl {
			t.Fatalf("controller %d still named after it was killed", ctrl)
		}
		err = cluster.WaitFor(context.Background(), settle, func() error {
			if ongoing := listAt(t, c, successor); len(ongoing) > 0 {
				return fmt.Errorf("controller %d lists %v in progress", successor, ongoing)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for the new controller to complete the reassignment: %v", err)
		}
		waitEvery(t, c, settle, fmt.Sprintf("midway on [%d %d], both in sync", from, added), func(md *cluster.Metadata) error {
			for _, p := range md.Partitions["midway"] {
				if !slices.Equal(p.Replicas, []int32{from, added}) || !sameIDs(p.ISR, p.Replicas) || p.Leader != from {
					return fmt.Errorf("midway/%d: leader %d replicas %v ISR %v", p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
			return nil
		}, "midway")
		t.Logf("%s: controller %d killed midway; controller %d completed the reassignment %v later", backend, ctrl, successor, time.Since(killed).Round(time.Millisecond))
		for p := range int32(3) {
			waitStored(t, c, added, "midway", p, want[p])
		}
	})
}

// listAt asks broker id for the reassignments in progress, all of them,
// and returns them as "topic/partition adding [...]"; a broker that is
// not (or not yet) the controller answers none.
func listAt(t *testing.T, c *cluster.Cluster, id int32) []string {
	t.Helper()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.Topics = nil
	resp, err := c.Request(context.Background(), id, req)
	if err != nil {
		t.Fatalf("ListPartitionReassignments at broker %d: %v", id, err)
	}
	list := resp.(*kmsg.ListPartitionReassignmentsResponse)
	if err := kerr.ErrorForCode(list.ErrorCode); err != nil {
		return []string{fmt.Sprintf("(broker %d: %v)", id, err)}
	}
	var out []string
	for _, rt := range list.Topics {
		for _, p := range rt.Partitions {
			out = append(out, fmt.Sprintf("%s/%d adding %v", rt.Topic, p.Partition, p.AddingReplicas))
		}
	}
	return out
}

// runCLI runs the tripod binary with args and --bootstrap on every
// broker of c, and returns its output; it fails the test when the
// command fails.
func runCLI(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	args = append(args, "--bootstrap", strings.Join(c.Bootstrap(), ","), "--timeout", settle.String())
	cmd := exec.Command(env.Binary, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tripod %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// sameIDs reports whether a and b hold the same broker ids, in any order.
func sameIDs(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(id int32) bool { return !slices.Contains(b, id) })
}
