package scenarios

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tripodmq/tripod/internal/cluster"
)

// TestMigrateRollbackAfterSwitch moves a three-broker cluster, its
// brokers running as processes under acks=all writes on every partition,
// to another backend with `tripod migrate`, changes it there (a topic
// created, a SCRAM user added), and rolls the migration back with
// `tripod migrate --rollback` after the switch: every broker returns to
// the source, which answers what the target held (the command compares
// both sides, the new topic and user included), takes writes again (a
// topic is created), and every acknowledged record is read back at its
// offset. A broker restarted with its own (the source's) properties
// stays on the source. The brokers' logs show one controller at a time,
// its epoch rising across both switches. From Raft, whose quorum the brokers left at the
// switch, the brokers form the quorum again at the same addresses. The
// three directions import the rollback into each kind of source.
func TestMigrateRollbackAfterSwitch(t *testing.T) {
	for _, dir := range [][2]string{{"zk", "etcd"}, {"etcd", "raft"}, {"raft", "zk"}} {
		t.Run(dir[0]+"-to-"+dir[1]+"-and-back", func(t *testing.T) { migrateRollbackAfterSwitch(t, dir[0], dir[1]) })
	}
}

func migrateRollbackAfterSwitch(t *testing.T, from, to string) {
	c := startCluster(t, from, 3)
	terms := trackControllers(c)
	createTopic(t, c, "moving", 3, 3)
	loads := startLoads(t, c, "moving", 3)
	runCLI(t, c, "users", "set", "alice", "--password", "alice-secret")

	out := runCLI(t, c, append([]string{"migrate", "--to", to}, migrationTarget(t, to)...)...)
	if !strings.Contains(out, "every broker is on "+to) {
		t.Fatalf("tripod migrate printed:\n%s", out)
	}
	createTopic(t, c, "made-on-target", 2, 3)
	runCLI(t, c, "users", "set", "bob", "--password", "bob-secret")
	for _, l := range loads {
		l.waitAcked(t, l.ackedCount()+5)
	}

	out = runCLI(t, c, "migrate", "--rollback")
	t.Logf("tripod migrate --rollback:\n%s", out)
	if !strings.Contains(out, "every broker is on "+from) || !strings.Contains(out, "2 SCRAM credentials") || !strings.Contains(out, "the same on both sides") {
		t.Fatalf("tripod migrate --rollback printed:\n%s", out)
	}
	if status := runCLI(t, c, "migrate", "--status"); registeredOn(status, from) != 3 {
		t.Fatalf("tripod migrate --status after the rollback:\n%s", status)
	}
	waitEvery(t, c, settle, "the topic made on the target, on the source", func(md *cluster.Metadata) error {
		if n := len(md.Partitions["made-on-target"]); n != 2 {
			return fmt.Errorf("made-on-target has %d partitions", n)
		}
		return nil
	}, "made-on-target")
	createTopic(t, c, "after-rollback", 2, 3)
	for _, l := range loads {
		l.waitAcked(t, l.ackedCount()+5)
	}

	if err := c.Broker(2).Restart(); err != nil {
		t.Fatalf("restart broker 2: %v", err)
	}
	waitStatus(t, c, "broker 2, restarted with its own properties, registered on "+from, func(status string) bool {
		return registeredOn(status, from) == 3
	})
	settleMigration(t, c, loads, terms, "the migration and its rollback")
}
