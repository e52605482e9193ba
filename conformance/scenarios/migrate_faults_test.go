package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// The scenarios of this file inject one fault each into a migration
// between coordination backends (`tripod migrate`), its brokers running
// as processes under acks=all writes on every partition of a topic. In
// each the migration completes, every acknowledged record is read back
// at its offset, and the brokers' logs show one controller at a time
// (controllerTerms): each controller epoch held by one broker, epochs
// rising, no term won while another broker's term was still on, and no
// broker following a controller that did not hold the epoch it claimed.

// TestMigrateControllerKilledDuringSwitch: a three-broker cluster on etcd
// migrates to ZooKeeper. The test watches the source's migration record
// in etcd and SIGKILLs the controller, the broker that copied the
// source and wrote the record, as soon as the record says switched: the
// watch event comes within a few milliseconds of that write, while the
// brokers are still switching (each reads the target's record, ends its
// sessions on the source, registers on ZooKeeper, and one is elected
// controller there, which takes a hundred milliseconds or more), so the
// kill lands in the middle of the switch; the test logs how far the
// others had got. The other two brokers finish the switch without it and
// elect a controller on ZooKeeper; acknowledged writes go on. The killed
// broker, started again with its etcd flags, finds the source switched
// and moves to ZooKeeper by itself and back into every ISR. `tripod
// migrate` completes, a topic can be created on the target, and every
// acknowledged record is read back.
func TestMigrateControllerKilledDuringSwitch(t *testing.T) {
	c := startCluster(t, "etcd", 3)
	terms := trackControllers(c)
	createTopic(t, c, "moving", 3, 3)
	loads := startLoads(t, c, "moving", 3)
	killed := controller(t, c)

	cfg := c.Config()
	switched := onRecord(t, etcdClient(t, cfg.EtcdEndpoints), cfg.EtcdPrefix+"/migration",
		func(m coord.Migration) bool { return m.Phase == coord.MigrationSwitched },
		func() error { return terms.kill(killed) })
	run := startMigrate(t, c, "zk", migrationTarget(t, "zk")...)
	ev := switched.wait(t, settle)
	killedAt := terms.lastKill(killed)
	t.Logf("broker %d, the controller, sent SIGKILL %v after the source's record said switched (%s)",
		killed, killedAt.Sub(ev.seen).Round(time.Microsecond), ev.m.ID)

	waitStatus(t, c, "the two other brokers on ZooKeeper", func(status string) bool { return registeredOn(status, "zk") == 2 })
	next := controller(t, c)
	progress(t, loads, 5)
	t.Logf("broker %d is the controller on ZooKeeper; writes go on", next)
	if err := c.Broker(killed).Start(); err != nil {
		t.Fatalf("start broker %d again: %v", killed, err)
	}
	out := run.wait(t, 2*time.Minute)
	t.Logf("tripod migrate:\n%s", out)
	waitStatus(t, c, "every broker on ZooKeeper", func(status string) bool { return registeredOn(status, "zk") == 3 })
	waitFullISR(t, c, "moving", 3, 3)
	createTopic(t, c, "after-migration", 2, 3)
	ts := settleMigration(t, c, loads, terms, "the migration")
	for _, id := range others(c, killed) {
		if at, ok := switchedAt(c.Broker(id), 1); ok {
			t.Logf("broker %d left etcd %v after the kill", id, at.Sub(killedAt).Round(time.Millisecond))
		}
	}
	if at, ok := switchedAt(c.Broker(killed), 1); ok {
		t.Logf("broker %d had left etcd itself %v before its kill", killed, killedAt.Sub(at).Round(time.Millisecond))
	}
	for _, tm := range ts {
		if tm.won.After(killedAt) {
			t.Logf("first controller term after the kill: %v, won %v after it", tm, tm.won.Sub(killedAt).Round(time.Millisecond))
			break
		}
	}
}

// TestMigrateTargetUnreachableHalfway: a three-broker cluster on
// ZooKeeper with a topic of 2000 partitions, whose copy into etcd takes
// several transactions, migrates to an etcd of its own. The test watches
// the target and stops it as soon as the pre-copy has begun there (its
// record says importing), within a few milliseconds: the copy breaks
// off. The target stays away for three seconds, during which the source
// stays in phase copying and takes metadata writes (a topic is created
// on it), no broker leaves it, and every partition's producer and
// consumer go on, records acknowledged and read. Once etcd is back the
// controller copies again and the migration completes (no rollback):
// the target's record says the copy was finished after etcd came back,
// `tripod migrate` finds the 2005 partitions (the topic created while
// etcd was away among them) and their replicas the same on both sides, a
// topic can be created on the target, and every acknowledged record is
// read back.
func TestMigrateTargetUnreachableHalfway(t *testing.T) {
	c := startCluster(t, "zk", 3)
	terms := trackControllers(c)
	createTopic(t, c, "moving", 3, 3)
	createTopic(t, c, "bulk", 2000, 1)
	loads := startLoads(t, c, "moving", 3)
	target := startEtcd(t)
	const prefix = "/moved"
	cli := etcdClient(t, target.Endpoints())
	away := onRecord(t, cli, prefix+"/migration",
		func(m coord.Migration) bool { return m.Phase == coord.MigrationImporting },
		target.Stop)
	run := startMigrate(t, c, "etcd", "--set", "etcd.endpoints="+strings.Join(target.Endpoints(), ","), "--set", "etcd.prefix="+prefix)
	ev := away.wait(t, settle)
	t.Logf("etcd stopped %v after its record said importing", ev.acted.Sub(ev.seen).Round(time.Microsecond))

	// While etcd is away, for some seconds: the source is not frozen
	// (the pre-copy broke off), every broker stays on it, metadata
	// writes, produce and fetch go on.
	createTopic(t, c, "while-away", 2, 3)
	progress(t, loads, 20)
	for time.Since(ev.acted) < 3*time.Second {
		progress(t, loads, 1)
	}
	waitStatus(t, c, "every broker on the source, still copying", func(status string) bool {
		return registeredOn(status, "zk") == 3 && strings.Count(status, " copying ") == 3
	})
	t.Logf("etcd away for %v: every broker on the source, which takes metadata writes; writes and reads go on", time.Since(ev.acted).Round(time.Millisecond))
	back := time.Now()
	if err := target.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	out := run.wait(t, 2*time.Minute)
	t.Logf("tripod migrate:\n%s", out)
	compared := 0
	if m := comparedLine.FindStringSubmatch(out); m != nil {
		compared, _ = strconv.Atoi(m[1])
	}
	if compared < 2005 || !strings.Contains(out, "the same on both sides") {
		t.Fatalf("tripod migrate compared, want the 2005 partitions of moving, bulk and while-away the same on both sides:\n%s", out)
	}
	rec := etcdRecord(t, cli, prefix+"/migration")
	if rec.Phase != coord.MigrationImported || !rec.Updated.After(back) {
		t.Fatalf("the target's record: %s updated %s, want imported after etcd came back at %s",
			rec.Phase, rec.Updated.Format(time.StampMilli), back.Format(time.StampMilli))
	}
	createTopic(t, c, "after-migration", 2, 3)
	settleMigration(t, c, loads, terms, "the migration")
}

// TestMigrateBrokerPausedAcrossSwitch: a three-broker cluster on
// ZooKeeper migrates to an etcd of its own that is down, so the copy
// waits for it; a broker that is not the controller is then stopped with
// SIGSTOP, and only then does etcd come back: the stop lands after the
// migration began and before the switch for certain. The
// switch happens while the broker is stopped: the other two move to
// etcd, the stopped broker's session on ZooKeeper expires, and the
// controller on etcd takes it out of every ISR, so acknowledged writes
// go on without it. After SIGCONT the broker finds the source switched
// and moves to etcd by itself (its log says it left ZooKeeper after it
// was continued), and back into every ISR. `tripod migrate` completes
// and every acknowledged record is read back.
func TestMigrateBrokerPausedAcrossSwitch(t *testing.T) {
	c := startCluster(t, "zk", 3)
	terms := trackControllers(c)
	// The broker to stop is a follower of every partition, so that the
	// clients never wait on it, only the leaders do.
	paused := others(c, controller(t, c))[0]
	a, b := others(c, paused)[0], others(c, paused)[1]
	createAssigned(t, c, "moving", [][]int32{{a, b, paused}, {b, a, paused}, {a, paused, b}})
	loads := startLoads(t, c, "moving", 3)
	target := startEtcd(t)
	if err := target.Stop(); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}
	run := startMigrate(t, c, "etcd", "--set", "etcd.endpoints="+strings.Join(target.Endpoints(), ","), "--set", "etcd.prefix=/moved")
	waitStatus(t, c, "the migration begun, the copy waiting for etcd", func(status string) bool {
		return strings.Count(status, " copying ") == 3 && (strings.Contains(status, "waiting for the target") || strings.Contains(status, "pre-copying"))
	})
	if ctrl := controller(t, c); ctrl == paused {
		t.Fatalf("broker %d, to be stopped, became the controller", paused)
	}
	if err := c.Broker(paused).Pause(); err != nil {
		t.Fatalf("pause broker %d: %v", paused, err)
	}
	pausedAt := time.Now()
	if err := target.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	for _, id := range others(c, paused) {
		waitBackend(t, c, id, "etcd")
	}
	waitGone(t, c, paused)
	waitEvery(t, c, settle, fmt.Sprintf("the controller on etcd to take broker %d out of every ISR", paused), func(md *cluster.Metadata) error {
		for _, p := range md.Partitions["moving"] {
			if slices.Contains(p.ISR, paused) {
				return fmt.Errorf("moving/%d: ISR %v", p.Partition, p.ISR)
			}
		}
		return nil
	}, "moving")
	progress(t, loads, 5)
	t.Logf("broker %d stopped for %v: the others on etcd, its session on ZooKeeper gone, writes go on without it",
		paused, time.Since(pausedAt).Round(time.Millisecond))

	if err := c.Broker(paused).Resume(); err != nil {
		t.Fatalf("resume broker %d: %v", paused, err)
	}
	resumedAt := time.Now()
	waitBackend(t, c, paused, "etcd")
	if at, ok := switchedAt(c.Broker(paused), 1); !ok || at.Before(resumedAt.Truncate(time.Millisecond)) {
		t.Fatalf("broker %d left ZooKeeper at %s (logged: %v), want after it was resumed at %s",
			paused, at.Format(time.StampMilli), ok, resumedAt.Format(time.StampMilli))
	}
	out := run.wait(t, 2*time.Minute)
	t.Logf("tripod migrate:\n%s", out)
	waitFullISR(t, c, "moving", 3, 3)
	settleMigration(t, c, loads, terms, "the migration")
}

// TestMigrateSourceRestartedDuringCopy: a three-broker cluster on a
// ZooKeeper of its own migrates to an etcd of its own that is down, so
// the copy waits for it. ZooKeeper is stopped and
// started again meanwhile, down for twice the session timeout: the
// controller's term ends while it is down (its log says so), produce and
// fetch go on without any backend, and once ZooKeeper is back every
// broker registers again on the source, still in phase copying, and a
// controller is elected there, which takes the migration up. Once etcd
// is back the migration completes, a topic can be created on the
// target, and every acknowledged record is read back.
func TestMigrateSourceRestartedDuringCopy(t *testing.T) {
	zkserver.Require(t)
	zcfg := zkserver.DefaultConfig()
	zcfg.TickTime, zcfg.MinSessionTimeout = 100*time.Millisecond, time.Second
	source, err := zkserver.Start(t.TempDir(), zcfg)
	if err != nil {
		t.Fatalf("start ZooKeeper: %v", err)
	}
	t.Cleanup(func() { source.Close() })
	c := startClusterWith(t, "zk", 3, func(cfg *cluster.Config) { cfg.ZKConnect = source.Addr() + "/tripod" })
	terms := trackControllers(c)
	createTopic(t, c, "moving", 3, 3)
	loads := startLoads(t, c, "moving", 3)
	target := startEtcd(t)
	if err := target.Stop(); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}
	run := startMigrate(t, c, "etcd", "--set", "etcd.endpoints="+strings.Join(target.Endpoints(), ","), "--set", "etcd.prefix=/moved")
	waitStatus(t, c, "the migration begun, the copy waiting for etcd", func(status string) bool {
		return strings.Count(status, " copying ") == 3 && (strings.Contains(status, "waiting for the target") || strings.Contains(status, "pre-copying"))
	})
	before := controller(t, c)

	if err := source.Stop(); err != nil {
		t.Fatalf("stop ZooKeeper: %v", err)
	}
	stoppedAt := time.Now()
	// Down for twice the session timeout, so that the sessions and the
	// term end: writes and reads go on meanwhile.
	progress(t, loads, 20)
	for time.Since(stoppedAt) < 2*sessionTimeout {
		progress(t, loads, 1)
	}
	t.Logf("ZooKeeper down for %v, writes and reads going on; starting it again", time.Since(stoppedAt).Round(time.Millisecond))
	startedAt := time.Now()
	if err := source.Start(); err != nil {
		t.Fatalf("start ZooKeeper again: %v", err)
	}
	waitStatus(t, c, "every broker registered again on the source, still copying", func(status string) bool {
		return registeredOn(status, "zk") == 3 && strings.Count(status, " copying ") == 3
	})
	after := controller(t, c)
	t.Logf("controller before the restart: broker %d; after: broker %d", before, after)
	if err := target.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	out := run.wait(t, 2*time.Minute)
	t.Logf("tripod migrate:\n%s", out)
	createTopic(t, c, "after-migration", 2, 3)
	ts := settleMigration(t, c, loads, terms, "the migration")
	// The controller's term ended while ZooKeeper was down.
	for _, tm := range ts {
		if tm.broker == before && tm.won.Before(stoppedAt) && (tm.ended.IsZero() || tm.ended.After(stoppedAt)) {
			if tm.ended.IsZero() || !tm.ended.Before(startedAt) {
				t.Errorf("the controller's term %v did not end while ZooKeeper was down (%s to %s)",
					tm, stoppedAt.Format("15:04:05.000"), startedAt.Format("15:04:05.000"))
			}
		}
	}
}

// settleMigration ends a migration scenario: writes and reads go on (5
// more of each on every partition), every acknowledged record is read
// back at its offset, the brokers' logs show one controller at a time
// (terms) and no broker advised a rollback. It returns the terms.
func settleMigration(t *testing.T, c *cluster.Cluster, loads []*load, terms *controllerTerms, what string) []term {
	t.Helper()
	progress(t, loads, 5)
	total := checkReadBack(t, c, "moving", loads)
	ts := terms.check(t)
	checkSteps(t, c)
	t.Logf("%d records acknowledged across %s; every one read back", total, what)
	return ts
}

// checkSteps fails the test if a broker advised rolling the migration
// back, or if the broker that switched the cluster (and runs since)
// does not say so as its last step: neither a term that ends nor a record
// seen late is a failed migration.
func checkSteps(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, b := range c.Brokers() {
		data, err := os.ReadFile(b.LogPath)
		if err != nil {
			t.Fatalf("read the log of broker %d: %v", b.ID, err)
		}
		log := string(data)
		if i := strings.Index(log, "roll back with tripod migrate --rollback"); i >= 0 {
			line := log[strings.LastIndex(log[:i], "\n")+1:]
			line, _, _ = strings.Cut(line, "\n")
			t.Errorf("broker %d advised a rollback: %s", b.ID, line)
		}
		if i := strings.LastIndex(log, "=== tripod cluster: start"); !strings.Contains(log[max(i, 0):], "metadata copied; brokers switch to the target") {
			continue
		}
		step, err := describeBroker(c, b.ID, "coordination.migration.step")
		if err != nil || !strings.Contains(step, " switched") {
			t.Errorf("broker %d switched the cluster, and says its last step was %q (%v)", b.ID, step, err)
		}
	}
}

// migrateRun is a `tripod migrate --to` running in the background while
// a scenario injects its fault.
type migrateRun struct {
	to     string
	cmd    *exec.Cmd
	out    strings.Builder // written by the command until exited
	exited chan struct{}
	err    error
}

// startMigrate starts `tripod migrate --to to` with the target's flags
// sets on c.
func startMigrate(t *testing.T, c *cluster.Cluster, to string, sets ...string) *migrateRun {
	t.Helper()
	args := append([]string{"migrate", "--to", to}, sets...)
	args = append(args, "--bootstrap", strings.Join(c.Bootstrap(), ","), "--timeout", "3m")
	cmd := exec.Command(env.Binary, args...)
	r := &migrateRun{to: to, cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.out, &r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tripod migrate: %v", err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// wait waits up to timeout for the command to end, and fails the test
// unless it succeeded and printed that every broker is on the target; it
// returns what the command printed.
func (r *migrateRun) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(timeout):
		r.cmd.Process.Kill()
		<-r.exited
		t.Fatalf("tripod migrate did not finish within %v:\n%s", timeout, r.out.String())
	}
	out := r.out.String()
	if r.err != nil || !strings.Contains(out, "every broker is on "+r.to) {
		t.Fatalf("tripod migrate: %v\n%s", r.err, out)
	}
	return out
}

// startEtcd starts an etcd of the test's own, closed with the test: a
// target it can stop and start again without disturbing other tests.
func startEtcd(t *testing.T) *etcdserver.Server {
	t.Helper()
	s, err := etcdserver.Start(t.TempDir())
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// etcdClient returns a client of the etcd at endpoints, closed with the
// test.
func etcdClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// etcdRecord reads the migration record at key.
func etcdRecord(t *testing.T, cli *clientv3.Client, key string) coord.Migration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	var m coord.Migration
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return m
}

// recordEvent is a migration record as a watch saw it, and what was done
// on seeing it.
type recordEvent struct {
	m     coord.Migration
	seen  time.Time // when the watch delivered it
	acted time.Time // when the action returned
	err   error     // the watch's or the action's
}

// recordWatch is a watch of a migration record in etcd.
type recordWatch struct {
	what string
	done chan recordEvent
}

// onRecord watches the migration record at key and, in the watching
// goroutine, as soon as the record says what ok accepts, calls act: a
// fault lands within a few milliseconds of the write that made the
// record so.
func onRecord(t *testing.T, cli *clientv3.Client, key string, ok func(coord.Migration) bool, act func() error) *recordWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &recordWatch{what: key, done: make(chan recordEvent, 1)}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		cancel()
		t.Fatalf("read %s: %v", key, err)
	}
	watch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	stopped := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	go func() {
		defer close(stopped)
		ev := recordEvent{err: fmt.Errorf("the watch of %s ended", key)}
		for wr := range watch {
			if err := wr.Err(); err != nil {
				ev.err = err
				break
			}
			for _, e := range wr.Events {
				var m coord.Migration
				if e.Type != clientv3.EventTypePut || json.Unmarshal(e.Kv.Value, &m) != nil || !ok(m) {
					continue
				}
				ev = recordEvent{m: m, seen: time.Now()}
				ev.err = act()
				ev.acted = time.Now()
				w.done <- ev
				return
			}
		}
		w.done <- ev
	}()
	return w
}

// wait waits for the record and the action, failing the test if either
// failed or timeout passed first.
func (w *recordWatch) wait(t *testing.T, timeout time.Duration) recordEvent {
	t.Helper()
	select {
	case ev := <-w.done:
		if ev.err != nil {
			t.Fatalf("watching %s: %v", w.what, ev.err)
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("%s did not change as awaited within %v", w.what, timeout)
		return recordEvent{}
	}
}

// progress waits until every load has had n more records acknowledged,
// and its consumer has read n more, than when called.
func progress(t *testing.T, loads []*load, n int) {
	t.Helper()
	for p, l := range loads {
		l.mu.Lock()
		acked, read := len(l.acked), len(l.read)
		l.mu.Unlock()
		err := cluster.WaitFor(context.Background(), settle, func() error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.acked) < acked+n || len(l.read) < read+n {
				return fmt.Errorf("partition %d: %d records acknowledged and %d read since, want %d of each (last error %v)",
					p, len(l.acked)-acked, len(l.read)-read, n, l.lastErr)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for writes and reads to go on: %v", err)
		}
	}
}

// describeBroker returns the broker config key of broker id, asking that
// broker only: coordination.migration.backend is the backend it uses as
// `tripod migrate --status` shows it ("etcd", "etcd (registering)").
func describeBroker(c *cluster.Cluster, id int32, key string) (string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id))
	res.ConfigNames = []string{key}
	req.Resources = append(req.Resources, res)
	resp, err := c.Request(context.Background(), id, req)
	if err != nil {
		return "", err
	}
	for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		for _, cfg := range r.Configs {
			if cfg.Name == key && cfg.Value != nil {
				return *cfg.Value, nil
			}
		}
	}
	return "", fmt.Errorf("broker %d does not answer %s", id, key)
}

// waitBackend waits until broker id says it is registered on backend.
func waitBackend(t *testing.T, c *cluster.Cluster, id int32, backend string) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), settle, func() error {
		got, err := describeBroker(c, id, "coordination.migration.backend")
		if err == nil && got != backend {
			err = fmt.Errorf("on %q", got)
		}
		return err
	})
	if err != nil {
		t.Fatalf("waiting for broker %d to be registered on %s: %v", id, backend, err)
	}
}

// waitGone waits until broker id's registration is gone from c's
// ZooKeeper: its session there expired.
func waitGone(t *testing.T, c *cluster.Cluster, id int32) {
	t.Helper()
	connect := c.Config().ZKConnect
	addr, chroot, _ := strings.Cut(connect, "/")
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect to ZooKeeper: %v", err)
	}
	defer conn.Close()
	path := "/" + chroot + "/brokers/ids/" + strconv.Itoa(int(id))
	err = cluster.WaitFor(context.Background(), settle, func() error {
		exists, _, err := conn.Exists(path)
		if err == nil && exists {
			err = fmt.Errorf("%s exists", path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("waiting for broker %d's session on ZooKeeper to expire: %v", id, err)
	}
}

// switchedAt returns when broker b's incarnation n (1: the first) left a
// backend for a migration's target, from its log.
func switchedAt(b *cluster.Broker, n int) (time.Time, bool) {
	data, err := os.ReadFile(b.LogPath)
	if err != nil {
		return time.Time{}, false
	}
	incarnation := 0
	for _, line := range strings.Split(string(data), "\n") {
		if startLine.MatchString(line) {
			incarnation++
			continue
		}
		if incarnation == n && strings.Contains(line, "switched the coordination backend") {
			return lineTime(line)
		}
	}
	return time.Time{}, false
}

// controllerTerms follows who was controller when, from the brokers'
// logs (every incarnation's), which record every term won and every
// broker taking a new controller in, as sampling would only in part. A
// broker the test kills goes through kill, which notes when.
type controllerTerms struct {
	c     *cluster.Cluster
	mu    sync.Mutex
	kills map[int32][]time.Time
}

// term is one controller term as a broker's log shows it.
type term struct {
	broker      int32
	incarnation int
	epoch       int64
	won         time.Time
	// ended is the first sign of its end: the controller stopping,
	// the broker leaving the backend for a migration's target, its
	// kill, or its next start. Zero: it is on.
	ended time.Time
}

func (tm term) String() string {
	end := "on"
	if !tm.ended.IsZero() {
		end = tm.ended.Format("15:04:05.000")
	}
	return fmt.Sprintf("broker %d epoch %d [%s, %s]", tm.broker, tm.epoch, tm.won.Format("15:04:05.000"), end)
}

// takenIn is a broker taking in a new controller's metadata: from then
// on it follows that controller and epoch.
type takenIn struct {
	broker      int32
	incarnation int
	controller  int32
	epoch       int64
	at          time.Time
}

// trackControllers starts following c's controllers.
func trackControllers(c *cluster.Cluster) *controllerTerms {
	return &controllerTerms{c: c, kills: map[int32][]time.Time{}}
}

// kill kills broker id with SIGKILL and notes when: a term it held ended
// then. (The signal goes first; reaping the process may take a while on a
// loaded machine.)
func (ct *controllerTerms) kill(id int32) error {
	at := time.Now()
	if err := ct.c.Broker(id).Kill(); err != nil {
		return err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.kills[id] = append(ct.kills[id], at)
	return nil
}

// lastKill returns when broker id was last killed through kill.
func (ct *controllerTerms) lastKill(id int32) time.Time {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ks := ct.kills[id]; len(ks) > 0 {
		return ks[len(ks)-1]
	}
	return time.Time{}
}

var (
	startLine       = regexp.MustCompile(`^=== tripod cluster: start \d+ of broker \d+ at (\S+): `)
	electedLine     = regexp.MustCompile(`controller elected: this broker is the controller: controller_epoch=(\d+)`)
	stoppedLine     = regexp.MustCompile(`controller stopped\b.*?\b(?:controller_)?epoch=(\d+)`)
	startFailedLine = regexp.MustCompile(`start controller failed; resigning`)
	takenInLine     = regexp.MustCompile(`metadata of a new controller applied: controller=(-?\d+) controller_epoch=(\d+)`)
	switchedLine    = regexp.MustCompile(`switched the coordination backend`)
	comparedLine    = regexp.MustCompile(`compared: (\d+) partitions`)
)

// lineTime returns the time a broker's log line starts with.
func lineTime(line string) (time.Time, bool) {
	f, _, _ := strings.Cut(line, " ")
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", f)
	return at, err == nil
}

// read returns the terms and take-ins of every broker's log, terms in
// the order they were won.
func (ct *controllerTerms) read(t *testing.T) ([]term, []takenIn) {
	t.Helper()
	var terms []term
	var ins []takenIn
	for _, b := range ct.c.Brokers() {
		data, err := os.ReadFile(b.LogPath)
		if err != nil {
			t.Fatalf("read the log of broker %d: %v", b.ID, err)
		}
		ct.mu.Lock()
		kills := slices.Clone(ct.kills[b.ID])
		ct.mu.Unlock()
		var open []int // indexes into terms of this incarnation's terms on
		// endOpen ends the open terms at the first kill after each was
		// won, or else at before (zero: not at all).
		endOpen := func(before time.Time) {
			for _, i := range open {
				terms[i].ended = before
				for _, k := range kills {
					if k.After(terms[i].won) && (before.IsZero() || k.Before(before)) {
						terms[i].ended = k
						break
					}
				}
			}
			open = nil
		}
		incarnation := 0
		for _, line := range strings.Split(string(data), "\n") {
			if m := startLine.FindStringSubmatch(line); m != nil {
				at, err := time.Parse(time.RFC3339Nano, m[1])
				if err != nil {
					t.Fatalf("broker %d: start line %q: %v", b.ID, line, err)
				}
				endOpen(at)
				incarnation++
				continue
			}
			at, ok := lineTime(line)
			if !ok {
				continue
			}
			if m := electedLine.FindStringSubmatch(line); m != nil {
				epoch, _ := strconv.ParseInt(m[1], 10, 64)
				terms = append(terms, term{broker: b.ID, incarnation: incarnation, epoch: epoch, won: at})
				open = append(open, len(terms)-1)
			} else if m := stoppedLine.FindStringSubmatch(line); m != nil {
				epoch, _ := strconv.ParseInt(m[1], 10, 64)
				open = slices.DeleteFunc(open, func(i int) bool {
					if terms[i].epoch == epoch {
						terms[i].ended = at
						return true
					}
					return false
				})
			} else if startFailedLine.MatchString(line) || switchedLine.MatchString(line) {
				// A controller that could not start, or the broker
				// leaving the backend for the target, ends the term.
				for _, i := range open {
					terms[i].ended = at
				}
				open = nil
			} else if m := takenInLine.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseInt(m[1], 10, 32)
				epoch, _ := strconv.ParseInt(m[2], 10, 64)
				ins = append(ins, takenIn{broker: b.ID, incarnation: incarnation, controller: int32(id), epoch: epoch, at: at})
			}
		}
		endOpen(time.Time{})
	}
	slices.SortStableFunc(terms, func(a, b term) int { return a.won.Compare(b.won) })
	return terms, ins
}

// check fails the test unless the brokers' logs show one controller at
// a time: each controller epoch won by one broker; a term won later
// than another has a higher epoch (none goes backwards, across the
// switch to the target either, where epochs start above the source's);
// no term won while another broker's was still on (at the resolution of
// the logs, a millisecond); and every controller a broker took in held
// the epoch it claimed, each broker taking in ever higher epochs. It
// returns the terms, in the order they were won.
func (ct *controllerTerms) check(t *testing.T) []term {
	t.Helper()
	terms, ins := ct.read(t)
	t.Logf("controller terms: %v", terms)
	holder := map[int64]int32{}
	for _, tm := range terms {
		if id, ok := holder[tm.epoch]; ok && id != tm.broker {
			t.Errorf("controller epoch %d was won by brokers %d and %d", tm.epoch, id, tm.broker)
		}
		holder[tm.epoch] = tm.broker
	}
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			if !a.won.Before(b.won) {
				continue // the same millisecond: no order to check
			}
			if b.epoch <= a.epoch {
				t.Errorf("controller epoch went backwards: %v won after %v", b, a)
			}
			if a.broker != b.broker && (a.ended.IsZero() || a.ended.After(b.won)) {
				t.Errorf("two controllers at once: %v won while %v was on", b, a)
			}
		}
	}
	type key struct {
		broker      int32
		incarnation int
	}
	last := map[key]takenIn{}
	for _, in := range ins {
		if id, ok := holder[in.epoch]; !ok || id != in.controller {
			t.Errorf("broker %d took in controller %d with epoch %d at %s, which that broker did not win (won by %d: %v)",
				in.broker, in.controller, in.epoch, in.at.Format("15:04:05.000"), id, ok)
		}
		k := key{in.broker, in.incarnation}
		if prev, ok := last[k]; ok && in.epoch <= prev.epoch {
			t.Errorf("broker %d took in controller epoch %d at %s after epoch %d", in.broker, in.epoch, in.at.Format("15:04:05.000"), prev.epoch)
		}
		last[k] = in
	}
	return terms
}
