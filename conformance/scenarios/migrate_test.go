package scenarios

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/freeport"
)

// migrations numbers the targets the migration scenarios create, so
// each has its own chroot or prefix.
var migrations atomic.Int32

// TestMigrateUnderLoad moves a three-broker cluster, its brokers running
// as processes, from one coordination backend to another in each of the
// six directions with `tripod migrate`, while every partition of a topic
// takes acks=all writes: every broker ends on the target, the cluster
// there answers the same topics and replicas, ACLs, SCRAM users, configs
// and quotas as before (the command compares them), a topic can be
// created on the target, and every acknowledged record is read back at
// its offset. After `tripod migrate --finalize` a broker started with
// the source's properties refuses to start and names the target.
func TestMigrateUnderLoad(t *testing.T) {
	for _, from := range []string{"zk", "etcd", "raft"} {
		for _, to := range []string{"zk", "etcd", "raft"} {
			if from == to {
				continue
			}
			t.Run(from+"-to-"+to, func(t *testing.T) { migrateUnderLoad(t, from, to) })
		}
	}
}

func migrateUnderLoad(t *testing.T, from, to string) {
	c := startCluster(t, from, 3)
	createTopic(t, c, "moving", 3, 3)
	loads := startLoads(t, c, "moving", 3)
	runCLI(t, c, "users", "set", "alice", "--password", "alice-secret")
	runCLI(t, c, "quotas", "alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576")

	args := append([]string{"migrate", "--to", to}, migrationTarget(t, to)...)
	start := time.Now()
	out := runCLI(t, c, args...)
	t.Logf("tripod migrate %s -> %s in %v:\n%s", from, to, time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "every broker is on "+to) || !strings.Contains(out, "the same on both sides") {
		t.Fatalf("tripod migrate printed:\n%s", out)
	}
	status := runCLI(t, c, "migrate", "--status")
	if registeredOn(status, to) != 3 {
		t.Fatalf("tripod migrate --status after the migration:\n%s", status)
	}
	createTopic(t, c, "after-migration", 2, 3)
	for _, l := range loads {
		l.waitAcked(t, l.ackedCount()+5)
	}
	total := checkReadBack(t, c, "moving", loads)
	t.Logf("%d records acknowledged across the migration; every one read back", total)

	// Before finalize, a broker killed and started again with the
	// source's properties (its flags as they were) goes to the target: a
	// Raft source has no quorum left to tell it once the brokers closed
	// it (its Raft ports refuse), its data dir does.
	if from == "raft" {
		err := cluster.WaitFor(context.Background(), settle, func() error {
			for _, b := range c.Brokers() {
				if conn, err := net.DialTimeout("tcp", b.RaftAddr, time.Second); err == nil {
					conn.Close()
					return fmt.Errorf("broker %d still listens for the source's Raft at %s", b.ID, b.RaftAddr)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for the brokers to close the source: %v", err)
		}
	}
	if err := c.Broker(2).Restart(); err != nil {
		t.Fatalf("restart broker 2: %v", err)
	}
	waitStatus(t, c, "broker 2, restarted with the source's flags, registered on "+to, func(status string) bool {
		return registeredOn(status, to) == 3
	})
	waitEvery(t, c, settle, "broker 2 back in every ISR", func(md *cluster.Metadata) error {
		for _, p := range md.Partitions["moving"] {
			if len(p.ISR) != 3 {
				return fmt.Errorf("moving/%d: ISR %v", p.Partition, p.ISR)
			}
		}
		return nil
	}, "moving")

	// Finalize: a broker started again with the source's properties (its
	// flags as they were) refuses to start and names the target.
	runCLI(t, c, "migrate", "--finalize")
	b := c.Broker(3)
	if err := b.Stop(settle); err != nil {
		t.Fatalf("stop broker 3: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("start broker 3: %v", err)
	}
	select {
	case <-b.Exited():
	case <-time.After(settle):
		t.Fatalf("broker 3, started on %s after the migration to %s was finalized, still runs", from, to)
	}
	if exited, err := b.Exit(); !exited || err == nil || !strings.Contains(b.LogTail(4096), "moved from coordination.backend "+from+" to "+to) {
		t.Fatalf("broker 3 on the retired source: exited %v (%v), log:\n%s", exited, err, b.LogTail(4096))
	}
}

// migrationTarget returns the --set flags of a fresh target of backend
// to: a new ZooKeeper chroot, a new etcd prefix, or Raft voters on free
// loopback ports (every broker of the three votes).
func migrationTarget(t *testing.T, to string) []string {
	t.Helper()
	name := fmt.Sprintf("/tripod-migrated-%d", migrations.Add(1))
	switch to {
	case "zk":
		zk, err := env.ZooKeeper()
		if err != nil {
			t.Fatalf("ZooKeeper: %v", err)
		}
		return []string{"--set", "zookeeper.connect=" + zk.Addr() + name}
	case "etcd":
		etcd, err := env.Etcd()
		if err != nil {
			t.Fatalf("etcd: %v", err)
		}
		return []string{"--set", "etcd.endpoints=" + strings.Join(etcd.Endpoints(), ","), "--set", "etcd.prefix=" + name}
	default:
		addrs, err := freeport.Addrs(3)
		if err != nil {
			t.Fatalf("free ports for the raft voters: %v", err)
		}
		voters := make([]string, len(addrs))
		for i, a := range addrs {
			voters[i] = fmt.Sprintf("%d@%s", i+1, a)
		}
		return []string{"--set", "raft.voters=" + strings.Join(voters, ",")}
	}
}

// TestMigrateControllerKilledWhileTargetAway: a three-broker cluster on
// ZooKeeper under acks=all writes starts a migration to an etcd that is
// down. The controller's copy waits for the target; the controller is
// killed with SIGKILL meanwhile. A new controller is elected on the
// source, still in phase copying, and takes the migration up;
// once etcd is back it copies and switches. The killed broker, started
// again with its ZooKeeper flags, finds the source switched and moves to
// etcd by itself. `tripod migrate` completes, every broker is on etcd, a
// topic can be created there, every acknowledged record is read back, and
// the brokers' logs show one controller at a time (controllerTerms).
func TestMigrateControllerKilledWhileTargetAway(t *testing.T) {
	c := startCluster(t, "zk", 3)
	terms := trackControllers(c)
	createTopic(t, c, "moving", 3, 3)
	loads := startLoads(t, c, "moving", 3)
	etcd := startEtcd(t)
	if err := etcd.Stop(); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}

	run := startMigrate(t, c, "etcd", "--set", "etcd.endpoints="+strings.Join(etcd.Endpoints(), ","), "--set", "etcd.prefix=/moved")
	waitStatus(t, c, "the migration begun, the copy waiting for etcd", func(status string) bool {
		// The controller waits for etcd to open, or to take the copy.
		return strings.Contains(status, " copying ") &&
			(strings.Contains(status, "waiting for the target") || strings.Contains(status, "pre-copying"))
	})
	killed := controller(t, c)
	t.Logf("killing the controller, broker %d, while the copy waits for etcd", killed)
	if err := terms.kill(killed); err != nil {
		t.Fatalf("kill broker %d: %v", killed, err)
	}
	next := controller(t, c)
	t.Logf("broker %d is the controller of the source; etcd comes back", next)
	if err := etcd.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	if err := c.Broker(killed).Start(); err != nil {
		t.Fatalf("start broker %d again: %v", killed, err)
	}
	out := run.wait(t, 3*time.Minute)
	t.Logf("tripod migrate:\n%s", out)
	createTopic(t, c, "after-migration", 2, 3)
	for _, l := range loads {
		l.waitAcked(t, l.ackedCount()+5)
	}
	checkReadBack(t, c, "moving", loads)
	terms.check(t)
	checkSteps(t, c)
}

// waitStatus waits until `tripod migrate --status` prints what ok
// accepts.
func waitStatus(t *testing.T, c *cluster.Cluster, what string, ok func(status string) bool) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), settle, func() error {
		cmd := exec.Command(env.Binary, "migrate", "--status", "--bootstrap", strings.Join(c.Bootstrap(), ","), "--timeout", "5s")
		b, err := cmd.CombinedOutput()
		if err != nil || !ok(string(b)) {
			return fmt.Errorf("migrate --status (%v):\n%s", err, b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// registeredOn counts the brokers `tripod migrate --status` shows
// registered on backend.
func registeredOn(status, backend string) int {
	n := 0
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == backend && f[2] != "(registering)" {
			n++
		}
	}
	return n
}
