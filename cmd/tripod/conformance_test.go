package main

import (
	"bytes"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// TestConformanceTableAndSummary checks what `tripod conformance` prints:
// an aligned table of case, result and duration, the failures' messages,
// and the summary line.
func TestConformanceTableAndSummary(t *testing.T) {
	results := []conformance.Result{
		{Case: "Sessions/ExpiryWithinBounds", Outcome: conformance.OutcomePass, Duration: 2590 * time.Millisecond, Message: "expired after 2.077s"},
		{Case: "Election/DeposedCommitFenced", Outcome: conformance.OutcomeFail, Duration: time.Second, Message: "FAIL: Commit by deposed broker 1 epoch 3: got <nil>, want ErrFenced"},
		{Case: "Availability/ServiceRestartRecovers", Outcome: conformance.OutcomeNotApplicable, Message: "raft clusters are not a ServiceRestarter"},
	}
	var out bytes.Buffer
	counts := writeResults(&out, results, false)
	got := out.String()
	for _, want := range []string{
		"CASE                                 RESULT  DURATION\n",
		"Sessions/ExpiryWithinBounds          pass    2.59s\n",
		"Election/DeposedCommitFenced         fail    1s\n",
		"Availability/ServiceRestartRecovers  n/a     0s\n",
		"Election/DeposedCommitFenced (fail):\n    FAIL: Commit by deposed broker 1 epoch 3: got <nil>, want ErrFenced\n",
		"\n1 passed, 1 failed, 1 n/a\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output:\n%s\nwant it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "expired after") {
		t.Errorf("output:\n%s\nwant a passing case's log only with --verbose", got)
	}
	if counts[conformance.OutcomeFail] != 1 || counts[conformance.OutcomePass] != 1 || counts[conformance.OutcomeNotApplicable] != 1 {
		t.Errorf("counts: got %v, want one of each outcome", counts)
	}
}

// TestConformanceFlagsRefused checks that bad flags, and a service nobody
// can reach, are refused before any case runs, naming the flag.
func TestConformanceFlagsRefused(t *testing.T) {
	closed := closedAddr(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--coord", "zk"}, "--zk-connect: required with --coord zk"},
		{[]string{"--coord", "etcd"}, "--etcd-endpoints: required with --coord etcd"},
		{[]string{"--coord", "consul"}, `--coord "consul": must be one of zk, etcd, raft`},
		{[]string{"--coord", "raft", "--session-timeout", "100ms"}, "--session-timeout 100ms: must be between 1s and 5m"},
		{[]string{"--coord", "etcd", "--etcd-endpoints", "127.0.0.1:2379"}, `--etcd-endpoints: endpoint "127.0.0.1:2379": want a URL`},
		{[]string{"--coord", "zk", "--zk-connect", closed + "/chroot"}, "--zk-connect " + closed + "/chroot: no server reachable"},
		{[]string{"--coord", "etcd", "--etcd-endpoints", "http://" + closed}, "--etcd-endpoints http://" + closed + ": no server reachable"},
		{[]string{"--coord", "etcd", "--etcd-endpoints", "http://" + closed, "--migrate-from", "consul"}, `--migrate-from "consul": must be one of zk, etcd, raft other than --coord etcd`},
		{[]string{"--coord", "raft", "--migrate-from", "raft"}, `--migrate-from "raft": must be one of zk, etcd, raft other than --coord raft`},
		{[]string{"--coord", "etcd", "--etcd-endpoints", "http://" + closed, "--migrate-from", "zk"}, "--zk-connect: required with --migrate-from zk"},
		{[]string{"--coord", "zk", "--zk-connect", closed, "--migrate-from", "etcd"}, "--etcd-endpoints: required with --migrate-from etcd"},
		{[]string{"--coord", "raft", "--migrate-from", "zk", "--zk-connect", closed}, "--zk-connect " + closed + ": no server reachable"},
		{[]string{"--coord", "raft", "--run", "Controller/("}, `--run "Controller/(": error parsing regexp`},
	} {
		cmd := newConformanceCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tripod conformance %s: got error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// closedAddr returns a loopback address nothing listens on (a port just
// freed).
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestConformanceMigrateFrom runs `tripod conformance --coord zk
// --migrate-from etcd` against a ZooKeeper and an embedded etcd, limited
// by --run to three controller cases (a topic's leaders spread, a
// controlled shutdown, which writes the states of a topic created on the
// target, and a crashed broker's leaderships moved): they run on
// clusters migrated from etcd to ZooKeeper, named so in the table, and
// pass.
func TestConformanceMigrateFrom(t *testing.T) {
	zk := zkserver.StartForTest(t, 1)
	etcd, err := etcdserver.Start(filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { etcd.Close() })
	cases := []string{"TopicLeadersSpreadEvenly", "ControlledShutdownMovesLeadership", "BrokerCrashMovesLeadershipWithinISR"}
	cmd := newConformanceCmd()
	cmd.SetArgs([]string{"--coord", "zk", "--zk-connect", zk.Connect(), "--migrate-from", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","),
		"--run", "Controller/(" + strings.Join(cases, "|") + ")$"})
	var out, progress bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&progress)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("tripod conformance --coord zk --migrate-from etcd: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, c := range cases {
		if !regexp.MustCompile(`(?m)^etcd-to-zk/Controller/` + c + ` +pass `).MatchString(got) {
			t.Errorf("output:\n%s\nwant a passing row etcd-to-zk/Controller/%s", got, c)
		}
	}
	if !strings.Contains(got, "\n3 passed, 0 failed, 0 n/a\n") {
		t.Errorf("output:\n%s\nwant 3 cases run, all passed", got)
	}
	if want := "the controller's cases run on clusters that started on etcd and were migrated to zk"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress:\n%s\nwant it to say %q", progress.String(), want)
	}
}
