package zk_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/zk"
	"github.com/tripodmq/tripod/internal/faultnet"
	"github.com/tripodmq/tripod/internal/scale"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// chroot returns a fresh chroot for one test.
func chroot() string {
	var raw [6]byte
	rand.Read(raw[:])
	return "/tripod-test/" + hex.EncodeToString(raw[:])
}

// openBench opens a backend for a benchmark, closed by the caller.
func openBench(b *testing.B, connect string) *zk.Backend {
	b.Helper()
	cfg := coord.DefaultConfig()
	cfg.Backend = "zk"
	cfg.ZKConnect = connect
	be, err := zk.Open(cfg)
	if err != nil {
		b.Fatalf("open %s: %v", connect, err)
	}
	return be
}

// open opens a backend on connect (with its chroot) and closes it when the
// test ends.
func open(t *testing.T, connect string, timeout time.Duration, net *faultnet.Net) *zk.Backend {
	t.Helper()
	return openWith(t, connect, timeout, net, false)
}

// openWith is open, for a backend that keeps a standby metadata view while
// it campaigns (as a broker's does) when standby is set.
func openWith(t *testing.T, connect string, timeout time.Duration, net *faultnet.Net, standby bool) *zk.Backend {
	t.Helper()
	cfg := coord.DefaultConfig()
	cfg.MetadataStandby = standby
	cfg.Backend = "zk"
	cfg.ZKConnect = connect
	cfg.SessionTimeout = timeout
	level := hclog.Warn
	if l := os.Getenv("TRIPOD_TEST_LOG"); l != "" {
		level = hclog.LevelFromString(l)
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: level})
	if net != nil {
		cfg.Dialer = net.Dial
	}
	b, err := zk.Open(cfg)
	if err != nil {
		t.Fatalf("open %s: %v", connect, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// raw returns a plain go-zookeeper connection, as zkCli would look.
func raw(t *testing.T, addr string) *gozk.Conn {
	t.Helper()
	conn, _, err := gozk.Connect([]string{addr}, 10*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	return conn
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// getJSON reads path and decodes it into a map.
func getJSON(t *testing.T, conn *gozk.Conn, path string) (map[string]any, *gozk.Stat) {
	t.Helper()
	data, stat, err := conn.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s %q: %v", path, data, err)
	}
	return m, stat
}

func TestKafkaLayoutUnderChroot(t *testing.T) {
	s := server(t)
	root := chroot()
	b := open(t, s.Addr()+root, 6*time.Second, nil)
	conn := raw(t, s.Addr())
	ctx := ctxFor(t, 30*time.Second)

	sess, err := b.Register(ctx, coord.Broker{ID: 7, Host: "127.0.0.1", Port: 9099, Rack: "r1"})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	term, err := b.Campaign(ctx, sess)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	topic := coord.Topic{Name: "orders", ID: [16]byte{1, 2, 3}, Assignment: [][]coord.BrokerID{{7}, {7}},
		Config: map[string]string{"retention.ms": "1000"}}
	states := []coord.PartitionState{
		{Topic: "orders", Partition: 0, Leader: 7, LeaderEpoch: 3, ISR: []coord.BrokerID{7}, ControllerEpoch: term.Epoch()},
		{Topic: "orders", Partition: 1, Leader: coord.NoBroker, ISR: nil, ControllerEpoch: term.Epoch()},
	}
	if err := b.Commit(ctx, term, coord.CreateTopic{Topic: topic, States: states}); err != nil {
		t.Fatalf("commit: %v", err)
	}

	broker, stat := getJSON(t, conn, root+"/brokers/ids/7")
	if broker["version"] != 5.0 || broker["host"] != "127.0.0.1" || broker["port"] != 9099.0 || broker["rack"] != "r1" ||
		broker["jmx_port"] != -1.0 || !slices.Equal(anySlice(broker["endpoints"]), []any{"PLAINTEXT://127.0.0.1:9099"}) {
		t.Fatalf("/brokers/ids/7: got %v, want Kafka's version 5 registration", broker)
	}
	if stat.EphemeralOwner == 0 || stat.Czxid != sess.Broker().Epoch {
		t.Fatalf("/brokers/ids/7: ephemeral owner %d, czxid %d; want ephemeral with czxid = broker epoch %d", stat.EphemeralOwner, stat.Czxid, sess.Broker().Epoch)
	}
	ctrl, stat := getJSON(t, conn, root+"/controller")
	if ctrl["version"] != 2.0 || ctrl["brokerid"] != 7.0 || stat.EphemeralOwner == 0 {
		t.Fatalf("/controller: got %v (owner %d), want ephemeral {version:2, brokerid:7}", ctrl, stat.EphemeralOwner)
	}
	data, _, err := conn.Get(root + "/controller_epoch")
	if err != nil || string(data) != strconv.FormatInt(term.Epoch(), 10) {
		t.Fatalf("/controller_epoch: got %q, %v; want %d", data, err, term.Epoch())
	}
	tz, _ := getJSON(t, conn, root+"/brokers/topics/orders")
	parts, _ := tz["partitions"].(map[string]any)
	if tz["version"] != 3.0 || tz["topic_id"] != "AQIDAAAAAAAAAAAAAAAAAA" || len(parts) != 2 || !slices.Equal(anySlice(parts["1"]), []any{7.0}) {
		t.Fatalf("/brokers/topics/orders: got %v, want version 3 with topic_id and partitions", tz)
	}
	cz, _ := getJSON(t, conn, root+"/config/topics/orders")
	if cfg, _ := cz["config"].(map[string]any); cz["version"] != 1.0 || cfg["retention.ms"] != "1000" {
		t.Fatalf("/config/topics/orders: got %v, want {version:1, config:{retention.ms:1000}}", cz)
	}
	st, stat := getJSON(t, conn, root+"/brokers/topics/orders/partitions/0/state")
	if st["leader"] != 7.0 || st["leader_epoch"] != 3.0 || st["controller_epoch"] != float64(term.Epoch()) ||
		st["version"] != 1.0 || !slices.Equal(anySlice(st["isr"]), []any{7.0}) || stat.Version != 0 {
		t.Fatalf("partition 0 state: got %v (znode version %d), want Kafka's state at version 0", st, stat.Version)
	}
	if names, _, _ := conn.Children("/"); slices.Contains(names, "brokers") || slices.Contains(names, "controller") {
		t.Fatalf("root znodes %v: want nothing of tripod's outside the chroot", names)
	}

	// The partition epoch is the state znode's version.
	moved := states[0]
	moved.LeaderEpoch = 4
	if err := b.Commit(ctx, term, coord.SetPartition{State: moved, ExpectedEpoch: 0}); err != nil {
		t.Fatalf("set partition: %v", err)
	}
	if _, stat, _ := conn.Get(root + "/brokers/topics/orders/partitions/0/state"); stat.Version != 1 {
		t.Fatalf("state znode version after one write: got %d, want 1", stat.Version)
	}
	md, err := b.Load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := md.Partitions[coord.TopicPartition{Topic: "orders", Partition: 0}]; got.PartitionEpoch != 1 || got.LeaderEpoch != 4 {
		t.Fatalf("loaded orders-0: got %+v, want partition epoch 1, leader epoch 4", got)
	}

	// Resign deletes /controller; Close deletes the registration.
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("resign: %v", err)
	}
	if ok, _, _ := conn.Exists(root + "/controller"); ok {
		t.Fatalf("/controller after Resign: exists, want deleted")
	}
	if err := sess.Close(); err != nil {
		t.Fatalf("close session: %v", err)
	}
	if ok, _, _ := conn.Exists(root + "/brokers/ids/7"); ok {
		t.Fatalf("/brokers/ids/7 after Session.Close: exists, want deleted")
	}
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func TestServerRestartKeepsSession(t *testing.T) {
	s := server(t)
	b := open(t, s.Addr()+chroot(), 10*time.Second, nil)
	ctx := ctxFor(t, 60*time.Second)
	sess, err := b.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart zookeeper: %v", err)
	}
	members, err := b.Members(ctx)
	if err != nil {
		t.Fatalf("members after restart: %v", err)
	}
	if len(members) != 1 || !members[0].Equal(sess.Broker()) {
		t.Fatalf("members after restart: got %+v, want the same registration %+v", members, sess.Broker())
	}
	if sess.Err() != nil {
		t.Fatalf("session after a restart shorter than its timeout: got %v, want live", sess.Err())
	}
}

func TestCutOffSessionExpiresAndBackendRecovers(t *testing.T) {
	s := server(t)
	const timeout = 2 * time.Second
	root := chroot()
	fn := faultnet.New()
	b := open(t, s.Addr()+root, timeout, fn)
	watcher := open(t, s.Addr()+root, timeout, nil)
	ctx := ctxFor(t, 60*time.Second)
	broker := coord.Broker{ID: 3, Host: "127.0.0.1", Port: 9095}
	sess, err := b.Register(ctx, broker)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	cut := time.Now()
	fn.Cut()
	select {
	case <-sess.Done():
	case <-time.After(timeout + time.Second):
		t.Fatalf("session of a cut-off backend: still live %v after the cut, want ended within the session timeout", timeout+time.Second)
	}
	t.Logf("session of the cut-off backend ended %v after the cut (session timeout %v)", time.Since(cut).Round(time.Millisecond), timeout)
	if !errors.Is(sess.Err(), coord.ErrSessionExpired) {
		t.Fatalf("session Err: got %v, want ErrSessionExpired", sess.Err())
	}
	// The service expires the registration too.
	deadline := time.Now().Add(timeout + 2*time.Second)
	for {
		members, err := watcher.Members(ctx)
		if err == nil && len(members) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members after the cut: got %v, %v; want none within %v", members, err, timeout+2*time.Second)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	fn.Heal()
	again, err := b.Register(ctx, broker)
	if err != nil {
		t.Fatalf("register after heal, without reopening: %v", err)
	}
	if again.Broker().Epoch <= sess.Broker().Epoch {
		t.Fatalf("epoch after re-registration: got %d, want > %d", again.Broker().Epoch, sess.Broker().Epoch)
	}
}

func TestWatchesFollowChangesAndCloseWithContext(t *testing.T) {
	s := server(t)
	root := chroot()
	b := open(t, s.Addr()+root, 6*time.Second, nil)
	ctx := ctxFor(t, 60*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	members, err := b.WatchMembers(wctx)
	if err != nil {
		t.Fatalf("watch members: %v", err)
	}
	controller, err := b.WatchController(wctx)
	if err != nil {
		t.Fatalf("watch controller: %v", err)
	}
	metadata, err := b.WatchMetadata(wctx)
	if err != nil {
		t.Fatalf("watch metadata: %v", err)
	}
	if got := <-members; len(got) != 0 {
		t.Fatalf("first members: got %v, want none", got)
	}
	if got := <-controller; got.ID != coord.NoBroker {
		t.Fatalf("first controller: got %+v, want none", got)
	}
	if got := <-metadata; len(got.Topics) != 0 {
		t.Fatalf("first metadata: got %v, want empty", got.TopicNames())
	}

	sess, err := b.Register(ctx, coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9094})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	waitFor(t, members, func(m []coord.Broker) bool { return len(m) == 1 && m[0].Equal(sess.Broker()) }, "members with broker 2")
	term, err := b.Campaign(ctx, sess)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	waitFor(t, controller, func(c coord.ControllerInfo) bool { return c.ID == 2 && c.Epoch == term.Epoch() }, "controller 2")

	var last int64
	for i := 0; i < 3; i++ {
		name := "t" + strconv.Itoa(i)
		op := coord.CreateTopic{Topic: coord.Topic{Name: name, Assignment: [][]coord.BrokerID{{2}}},
			States: []coord.PartitionState{{Topic: name, Leader: 2, ISR: []coord.BrokerID{2}}}}
		if err := b.Commit(ctx, term, op); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	st := coord.PartitionState{Topic: "t1", Leader: coord.NoBroker, LeaderEpoch: 1}
	if err := b.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: 0}, coord.DeleteTopic{Name: "t0"}); err != nil {
		t.Fatalf("commit set and delete: %v", err)
	}
	waitFor(t, metadata, func(md *coord.Metadata) bool {
		if md.Version < last {
			t.Fatalf("metadata version went back from %d to %d", last, md.Version)
		}
		last = md.Version
		p := md.Partitions[coord.TopicPartition{Topic: "t1"}]
		_, t0 := md.Topics["t0"]
		return len(md.Topics) == 2 && !t0 && p.PartitionEpoch == 1 && p.Leader == coord.NoBroker
	}, "metadata with t1 and t2, t1-0 leaderless")

	if err := term.Resign(ctx); err != nil {
		t.Fatalf("resign: %v", err)
	}
	waitFor(t, controller, func(c coord.ControllerInfo) bool { return c.ID == coord.NoBroker && c.Epoch == term.Epoch() }, "no controller")
	sess.Close()
	waitFor(t, members, func(m []coord.Broker) bool { return len(m) == 0 }, "no members")

	cancel()
	for name, closed := range map[string]func() bool{
		"members":    func() bool { _, ok := <-members; return !ok },
		"controller": func() bool { _, ok := <-controller; return !ok },
		"metadata":   func() bool { _, ok := <-metadata; return !ok },
	} {
		done := make(chan bool, 1)
		go func() { done <- drained(closed) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s watch: channel open 10s after its context ended, want closed", name)
		}
	}
}

// drained calls closed until it reports the channel closed.
func drained(closed func() bool) bool {
	for !closed() {
	}
	return true
}

// waitFor receives from ch until ok accepts a value, failing t after 10 s.
func waitFor[V any](t *testing.T, ch <-chan V, ok func(V) bool, what string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	var last V
	for {
		select {
		case v, open := <-ch:
			if !open {
				t.Fatalf("%s: channel closed, last value %+v", what, last)
			}
			if ok(v) {
				return
			}
			last = v
		case <-timer.C:
			t.Fatalf("%s: not within 10s, last value %+v", what, last)
		}
	}
}

func TestOpenRejectsBadConnectStrings(t *testing.T) {
	for _, connect := range []string{"/only-chroot", "nohostport", "127.0.0.1:2181/a//b"} {
		cfg := coord.DefaultConfig()
		cfg.Backend = "zk"
		cfg.ZKConnect = connect
		if b, err := zk.Open(cfg); err == nil {
			b.Close()
			t.Errorf("open %q: got nil error, want one naming zookeeper.connect", connect)
		} else if !strings.Contains(err.Error(), "zookeeper.connect") {
			t.Errorf("open %q: got %v, want an error naming zookeeper.connect", connect, err)
		}
	}
}

func TestCloseWaitsForEveryGoroutine(t *testing.T) {
	s := server(t)
	cfg := coord.DefaultConfig()
	cfg.Backend = "zk"
	cfg.ZKConnect = s.Addr() + chroot()
	cfg.SessionTimeout = 2 * time.Second
	b, err := zk.Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ctx := ctxFor(t, 30*time.Second)
	sess, term := controllerTerm(t, ctx, b, 1)
	for _, watch := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := b.WatchMembers(ctx); return err },
		func(ctx context.Context) error { _, err := b.WatchController(ctx); return err },
		func(ctx context.Context) error { _, err := b.WatchMetadata(ctx); return err },
	} {
		if err := watch(ctx); err != nil {
			t.Fatalf("watch: %v", err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !errors.Is(sess.Err(), coord.ErrClosed) || term.Context().Err() == nil {
		t.Fatalf("after Close: session Err %v, term context %v; want ErrClosed and cancelled", sess.Err(), term.Context().Err())
	}
	if _, err := b.Members(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Members after Close: got %v, want ErrClosed", err)
	}
	// Close has returned: nothing of the backend may still run. Only
	// go-zookeeper's goroutines of other tests' connections may linger
	// briefly, and this test's are all waited for by Close.
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "tripod/coord/zk.") && !strings.Contains(g, "TestCloseWaitsForEveryGoroutine") {
			t.Fatalf("goroutine of the backend still running after Close:\n%s", g)
		}
	}
}

func TestEnsembleSessionMovesBetweenServers(t *testing.T) {
	server(t) // skips or fails like the rest when ZooKeeper is missing
	ensemble := zkserver.StartForTest(t, 3)
	b := open(t, ensemble.Connect()+chroot(), 10*time.Second, nil)
	ctx := ctxFor(t, 90*time.Second)
	sess, err := b.Register(ctx, coord.Broker{ID: 4, Host: "127.0.0.1", Port: 9096})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	term, err := b.Campaign(ctx, sess)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	for i := 0; i < ensemble.Size(); i++ {
		if err := ensemble.StopNode(i); err != nil {
			t.Fatalf("stop server %d: %v", i+1, err)
		}
		members, err := b.Members(ctx)
		if err != nil || len(members) != 1 || !members[0].Equal(sess.Broker()) {
			t.Fatalf("members with server %d stopped: got %v, %v; want the same registration %+v", i+1, members, err, sess.Broker())
		}
		if err := ensemble.StartNode(i); err != nil {
			t.Fatalf("start server %d: %v", i+1, err)
		}
	}
	if sess.Err() != nil {
		t.Fatalf("session after each server of the ensemble stopped in turn: got %v, want live", sess.Err())
	}
	// The controller term may have ended while its connection moved (no
	// word from ZooKeeper for 2/3 of the session timeout); a live one
	// commits.
	if term.Context().Err() != nil {
		if term, err = b.Campaign(ctx, sess); err != nil {
			t.Fatalf("campaign again: %v", err)
		}
	}
	op := coord.CreateTopic{Topic: coord.Topic{Name: "ha", Assignment: [][]coord.BrokerID{{4}}},
		States: []coord.PartitionState{{Topic: "ha", Leader: 4, ISR: []coord.BrokerID{4}}}}
	if err := b.Commit(ctx, term, op); err != nil {
		t.Fatalf("commit after the rolling restart: %v", err)
	}
}

// TestLoadOverLoaderSessions: a Load of more partition states than one
// connection reads quickly (3 000) reads them over sessions of its own
// and returns exactly what was committed.
func TestLoadOverLoaderSessions(t *testing.T) {
	s := server(t)
	connect := s.Addr() + chroot()
	writer := open(t, connect, 6*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := writer.Register(ctx, coord.Broker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	term, err := writer.Campaign(ctx, sess)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	want := scale.Metadata(3, 1000, []coord.BrokerID{1, 2, 3})
	if err := writer.Commit(ctx, term, scale.Ops(3, 1000, []coord.BrokerID{1, 2, 3})...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	md, err := open(t, connect, 6*time.Second, nil).Load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(md.Topics) != len(want.Topics) || len(md.Partitions) != len(want.Partitions) {
		t.Fatalf("load: got %d topics and %d partitions, want %d and %d", len(md.Topics), len(md.Partitions), len(want.Topics), len(want.Partitions))
	}
	for name, wt := range want.Topics {
		if got := md.Topics[name]; got.ID != wt.ID || !slices.EqualFunc(got.Assignment, wt.Assignment, slices.Equal) {
			t.Errorf("topic %s: got %+v, want %+v", name, got, wt)
		}
	}
	for tp, ws := range want.Partitions {
		got := md.Partitions[tp]
		if got.Leader != ws.Leader || !slices.Equal(got.ISR, ws.ISR) || got.LeaderEpoch != 0 || got.PartitionEpoch != 0 {
			t.Errorf("partition %s: got %+v, want %+v", tp, got, ws)
		}
	}
}

// TestCommitRefusesTopicTooLargeForZooKeeper: a topic whose znode (its
// whole assignment) is over what one ZooKeeper request may carry fails
// its Commit with ErrTooLarge, naming the topic, and writes nothing; a
// topic of 10 000 partitions commits.
func TestCommitRefusesTopicTooLargeForZooKeeper(t *testing.T) {
	s := server(t)
	root := chroot()
	b := open(t, s.Addr()+root, 6*time.Second, nil)
	conn := raw(t, s.Addr())
	ctx := ctxFor(t, 60*time.Second)
	_, term := controllerTerm(t, ctx, b, 1)
	create := func(name string, partitions int) coord.CreateTopic {
		topic := coord.Topic{Name: name, ID: [16]byte{byte(partitions)}}
		var states []coord.PartitionState
		for p := range partitions {
			topic.Assignment = append(topic.Assignment, []coord.BrokerID{1, 2, 3})
			states = append(states, coord.PartitionState{Topic: name, Partition: int32(p), Leader: 1, ISR: []coord.BrokerID{1, 2, 3}, ControllerEpoch: term.Epoch()})
		}
		return coord.CreateTopic{Topic: topic, States: states}
	}
	err := b.Commit(ctx, term, create("huge", 100000))
	if !errors.Is(err, coord.ErrTooLarge) || !strings.Contains(err.Error(), "huge") {
		t.Fatalf("commit of a 100 000-partition topic: got %v, want ErrTooLarge naming the topic", err)
	}
	if ok, _, err := conn.Exists(root + "/brokers/topics/huge"); err != nil || ok {
		t.Fatalf("/brokers/topics/huge after the refused commit: exists %v, %v; want nothing written", ok, err)
	}
	if err := b.Commit(ctx, term, create("wide", 10000)); err != nil {
		t.Fatalf("commit of a 10 000-partition topic: %v", err)
	}
	// A failover's worth of partition states, ten multis in flight
	// together: every one lands.
	var moves []coord.Op
	for p := range int32(10000) {
		moves = append(moves, coord.SetPartition{ExpectedEpoch: 0, State: coord.PartitionState{Topic: "wide", Partition: p,
			Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []coord.BrokerID{2, 3}, ControllerEpoch: term.Epoch()}})
	}
	if err := b.Commit(ctx, term, moves...); err != nil {
		t.Fatalf("commit of 10 000 partition states: %v", err)
	}
	md, err := open(t, s.Addr()+root, 6*time.Second, nil).Load(ctx)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	for p := range int32(10000) {
		if st := md.Partitions[coord.TopicPartition{Topic: "wide", Partition: p}]; st.Leader != 2 || st.PartitionEpoch != 1 {
			t.Fatalf("wide-%d after the commit: %+v, want leader 2 at partition epoch 1", p, st)
		}
	}
}

// TestCommitWavesKeepZooKeepersOrder: a Commit's multis go out together
// only where their order cannot matter. A new topic's first chunk (its
// znode, config and partitions directory) goes alone, before the chunks
// of its partitions, which go together; a topic's config change goes
// alone, after the states before it; a chunk touching a partition an
// earlier chunk of its wave touches starts the next wave.
func TestCommitWavesKeepZooKeepersOrder(t *testing.T) {
	s := server(t)
	b := open(t, s.Addr()+chroot(), 6*time.Second, nil)
	topic := coord.Topic{Name: "t", ID: [16]byte{1}}
	var states []coord.PartitionState
	var moves []coord.Op
	for p := range int32(3000) {
		topic.Assignment = append(topic.Assignment, []coord.BrokerID{1, 2, 3})
		st := coord.PartitionState{Topic: "t", Partition: p, Leader: 1, ISR: []coord.BrokerID{1, 2, 3}}
		states = append(states, st)
		moves = append(moves, coord.SetPartition{ExpectedEpoch: 0, State: st})
	}
	for _, c := range []struct {
		name string
		ops  []coord.Op
		want [][]int
	}{
		{"create topic", []coord.Op{coord.CreateTopic{Topic: topic, States: states}}, [][]int{{0}, {1, 2, 3, 4, 5, 6}}},
		{"partition states", moves, [][]int{{0, 1, 2, 3}}},
		{"a partition twice", append(slices.Clone(moves[:1996]), moves[0]), [][]int{{0, 1}, {2}}},
		{"topic config after states", append(slices.Clone(moves[:1996]), append([]coord.Op{coord.SetTopic{Topic: topic}}, moves[1996:2500]...)...), [][]int{{0, 1}, {2}}},
	} {
		waves, chunks, err := zk.CommitWaves(b, c.ops...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.EqualFunc(waves, c.want, slices.Equal) {
			t.Errorf("%s: %d chunks in waves %v, want %v", c.name, chunks, waves, c.want)
		}
	}
}

// controllerTerm registers broker id (127.0.0.1:9092) on b and wins the
// controller term with it.
func controllerTerm(t *testing.T, ctx context.Context, b *zk.Backend, id coord.BrokerID) (coord.Session, coord.Term) {
	t.Helper()
	sess, err := b.Register(ctx, coord.Broker{ID: id, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	term, err := b.Campaign(ctx, sess)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	return sess, term
}

// TestStandbyLoadIsCurrent: a campaigning broker's Load comes from its
// standby view and holds every commit made before it, however recent: a
// topic created, a partition state changed, a topic deleted; and after
// its ZooKeeper session expired while it was cut off (commits made
// meanwhile), the view reads everything again on the next session and
// serves Loads again.
func TestStandbyLoadIsCurrent(t *testing.T) {
	s := server(t)
	connect := s.Addr() + chroot()
	const timeout = 2 * time.Second
	ctl := open(t, connect, 6*time.Second, nil)
	fn := faultnet.New()
	standby := openWith(t, connect, timeout, fn, true)
	ctx := ctxFor(t, 90*time.Second)
	_, term := controllerTerm(t, ctx, ctl, 1)
	s2, err := standby.Register(ctx, coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9093})
	if err != nil {
		t.Fatalf("register broker 2: %v", err)
	}
	campaignCtx, stopCampaign := context.WithCancel(ctx)
	campaigned := make(chan error, 1)
	go func() {
		_, err := standby.Campaign(campaignCtx, s2)
		campaigned <- err
	}()
	t.Cleanup(func() {
		stopCampaign()
		<-campaigned
	})
	create := func(name string, partitions int) {
		t.Helper()
		op := coord.CreateTopic{Topic: coord.Topic{Name: name}}
		for p := range partitions {
			op.Topic.Assignment = append(op.Topic.Assignment, []coord.BrokerID{1, 2})
			op.States = append(op.States, coord.PartitionState{Topic: name, Partition: int32(p), Leader: 1, ISR: []coord.BrokerID{1, 2}, ControllerEpoch: term.Epoch()})
		}
		if err := ctl.Commit(ctx, term, op); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	load := func(what string) *coord.Metadata {
		t.Helper()
		md, err := standby.Load(ctx)
		if err != nil {
			t.Fatalf("Load %s: %v", what, err)
		}
		return md
	}
	// The view is read once the campaign starts: wait for the first Load
	// it serves.
	for zk.StandbyLoads(standby) == 0 {
		load("before any commit")
		if ctx.Err() != nil {
			t.Fatal("the standby view never served a Load")
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("t%d", i)
		create(name, 2)
		served := zk.StandbyLoads(standby)
		md := load("after creating " + name)
		if _, ok := md.Topics[name]; !ok || len(md.Partitions) != 2*(i+1) {
			t.Fatalf("Load right after creating %s: topics %v, %d partitions; want it and %d", name, md.TopicNames(), len(md.Partitions), 2*(i+1))
		}
		if got := zk.StandbyLoads(standby); got != served+1 {
			t.Fatalf("Load after creating %s: standby served %d Loads, want %d", name, got, served+1)
		}
	}
	st := coord.PartitionState{Topic: "t1", Partition: 1, Leader: 2, LeaderEpoch: 7, ISR: []coord.BrokerID{2}, ControllerEpoch: term.Epoch()}
	if err := ctl.Commit(ctx, term, coord.SetPartition{State: st, ExpectedEpoch: 0}); err != nil {
		t.Fatalf("commit SetPartition: %v", err)
	}
	if got := load("after a SetPartition").Partitions[st.TopicPartition()]; got.LeaderEpoch != 7 || got.Leader != 2 || got.PartitionEpoch != 1 {
		t.Fatalf("Load after SetPartition: got %+v, want leader 2, leader epoch 7 at partition epoch 1", got)
	}
	if err := ctl.Commit(ctx, term, coord.DeleteTopic{Name: "t0"}); err != nil {
		t.Fatalf("commit DeleteTopic: %v", err)
	}
	if md := load("after a DeleteTopic"); len(md.Topics) != 2 || len(md.Partitions) != 4 {
		t.Fatalf("Load after deleting t0: topics %v, %d partitions; want t1 t2 and 4", md.TopicNames(), len(md.Partitions))
	}

	// Cut off past its session timeout, the view loses its session and
	// its watches while topics are created; on the next session it reads
	// everything again and serves the Loads again.
	fn.Cut()
	select {
	case <-s2.Done():
	case <-ctx.Done():
		t.Fatal("broker 2's session outlived the cut")
	}
	for i := 3; i < 6; i++ {
		create(fmt.Sprintf("t%d", i), 1)
	}
	fn.Heal()
	served := zk.StandbyLoads(standby)
	for zk.StandbyLoads(standby) == served {
		if md := load("after the session expired"); len(md.Topics) != 5 || len(md.Partitions) != 7 {
			t.Fatalf("Load after the session expired: topics %v, %d partitions; want t1 to t5 and 7", md.TopicNames(), len(md.Partitions))
		}
		if ctx.Err() != nil {
			t.Fatal("the standby view never served a Load on the new session")
		}
	}
}

// TestWarmMetadata: a backend that has not campaigned warms its standby
// view on request, as the broker driving a migration does with its
// target; WarmMetadata returns once the view holds what was committed
// before, and the next Load, right after more commits, is the view's.
func TestWarmMetadata(t *testing.T) {
	s := server(t)
	connect := s.Addr() + chroot()
	ctl := open(t, connect, 6*time.Second, nil)
	warm := openWith(t, connect, 2*time.Second, nil, true)
	ctx := ctxFor(t, 60*time.Second)
	_, term := controllerTerm(t, ctx, ctl, 1)
	create := func(name string) {
		t.Helper()
		op := coord.CreateTopic{Topic: coord.Topic{Name: name, Assignment: [][]coord.BrokerID{{1, 2}}},
			States: []coord.PartitionState{{Topic: name, Leader: 1, ISR: []coord.BrokerID{1, 2}, ControllerEpoch: term.Epoch()}}}
		if err := ctl.Commit(ctx, term, op); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	create("before")
	if err := warm.WarmMetadata(ctx); err != nil {
		t.Fatalf("WarmMetadata: %v", err)
	}
	create("after")
	md, err := warm.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(md.Topics) != 2 || len(md.Partitions) != 2 {
		t.Fatalf("Load after warming: topics %v, %d partitions; want before and after, 2", md.TopicNames(), len(md.Partitions))
	}
	if got := zk.StandbyLoads(warm); got != 1 {
		t.Fatalf("the standby view served %d Loads, want the one after warming", got)
	}
}
