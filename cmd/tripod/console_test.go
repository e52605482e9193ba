package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// startWatching runs the tripod binary with args and returns the first
// submatch of pattern in its output (standard output and error), within
// 60 s; the process is killed, if still running, when the test ends.
// exited is closed when it has exited.
func startWatching(t *testing.T, pattern *regexp.Regexp, args ...string) (match string, cmd *exec.Cmd, exited chan struct{}) {
	t.Helper()
	cmd = exec.Command(tripodBin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tripod %s: %v", args[0], err)
	}
	exited = make(chan struct{})
	go func() {
		cmd.Wait()
		pw.Close()
		close(exited)
	}()
	found := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Log("tripod: " + sc.Text())
			if m := pattern.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		<-scanned
	})
	select {
	case match = <-found:
	case <-exited:
		t.Fatalf("tripod %s exited before printing %s", args[0], pattern)
	case <-time.After(60 * time.Second):
		t.Fatalf("tripod %s did not print %s within 60s", args[0], pattern)
	}
	return match, cmd, exited
}

// getConsole GETs url with the login (none if user is empty) and returns
// the status and body.
func getConsole(t *testing.T, url, user, password string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// waitCluster GETs url's /api/cluster until it describes n live brokers
// on backend, within 30 s.
func waitCluster(t *testing.T, url, user, password string, n int, backend string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := getConsole(t, url+"api/cluster", user, password)
		var c struct {
			Backend string
			Brokers []struct{ State string }
		}
		if status == http.StatusOK && json.Unmarshal(body, &c) == nil && len(c.Brokers) == n && c.Backend == backend && c.Brokers[0].State == "live" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/cluster: got %d %s, want %d live brokers on %s", status, body, n, backend)
		}
		time.Sleep(100 * time.Millisecond) // the polling interval of the check
	}
}

// waitEpoch GETs url's /api/cluster until the coordination service has
// answered without error and named a controller epoch of at least min,
// within 30 s, and returns it.
func waitEpoch(t *testing.T, url, user, password string, min int64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := getConsole(t, url+"api/cluster", user, password)
		var c struct {
			ControllerEpoch *int64
			Coordination    *struct {
				ControllerID int32
				Epoch        int64
				Error        string
			}
		}
		if status == http.StatusOK && json.Unmarshal(body, &c) == nil && c.ControllerEpoch != nil && *c.ControllerEpoch >= min &&
			c.Coordination != nil && c.Coordination.Error == "" && c.Coordination.Epoch == *c.ControllerEpoch && c.Coordination.ControllerID >= 0 {
			return *c.ControllerEpoch
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/cluster: got %d %s, want a controller epoch >= %d read from the coordination service", status, body, min)
		}
		time.Sleep(100 * time.Millisecond) // the polling interval of the check
	}
}

// TestConsoleCommand runs a broker and `tripod console` against it with
// a login: the URL it prints serves nothing without the login (assets and
// API alike), the pages and the cluster's state with it; bad flags are
// refused naming the flag.
func TestConsoleCommand(t *testing.T) {
	broker := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	passwordFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _, _ := startWatching(t, regexp.MustCompile(`serving (http://\S+)`), "console",
		"--bootstrap", broker.addr, "--listen", "127.0.0.1:0", "--login-user", "admin", "--login-password-file", passwordFile)

	for _, path := range []string{"", "app.js", "api/cluster", "api/stream"} {
		if status, _ := getConsole(t, url+path, "", ""); status != http.StatusUnauthorized {
			t.Errorf("GET /%s without the login: got %d, want 401", path, status)
		}
		if status, _ := getConsole(t, url+path, "admin", "wrong"); status != http.StatusUnauthorized {
			t.Errorf("GET /%s with a wrong password: got %d, want 401", path, status)
		}
	}
	if status, body := getConsole(t, url, "admin", "s3cret"); status != http.StatusOK || !strings.Contains(string(body), "tripod console") {
		t.Errorf("GET / with the login: got %d %.80q, want 200 and the page", status, body)
	}
	waitCluster(t, url, "admin", "s3cret", 1, "raft")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "nowhere"}, "--listen"},
		{[]string{"--tls-cert", "cert.pem"}, "--tls-cert and --tls-key"},
		{[]string{"--login-user", "admin"}, "--login-password-file"},
		{[]string{"--login-password-file", passwordFile}, "--login-user"},
		{[]string{"--bootstrap", "nohost"}, "--bootstrap"},
		{[]string{"--refresh", "0s"}, "--refresh"},
		{[]string{"--coord", "raft"}, "tripod serve --console-listen"},
		{[]string{"--coord", "consul"}, "--coord \"consul\": must be zk or etcd"},
		{[]string{"--coord", "zk"}, "--zk-connect: required with --coord zk"},
		{[]string{"--coord", "zk", "--zk-connect", "nohost/tripod"}, "--zk-connect"},
		{[]string{"--zk-connect", "127.0.0.1:2181"}, "--zk-connect: needs --coord zk"},
		{[]string{"--coord", "etcd"}, "--etcd-endpoints: required with --coord etcd"},
		{[]string{"--coord", "etcd", "--etcd-endpoints", "127.0.0.1:2379"}, "--etcd-endpoints"},
		{[]string{"--coord", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--etcd-prefix", "tripod"}, "--etcd-prefix"},
	} {
		out, err := exec.Command(tripodBin, append([]string{"console"}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("tripod console %v: got %v, %q; want a failure naming %s", tc.args, err, out, tc.want)
		}
	}
}

// TestConsoleCoordZK runs two brokers on ZooKeeper and `tripod console
// --coord zk` reading the controller epoch from it; killing the
// controller's process raises the epoch the console shows, and the
// timeline says so. A chroot that holds no cluster is refused, not
// created.
func TestConsoleCoordZK(t *testing.T) {
	zk := zkserver.StartForTest(t, 1)
	connect := zk.Connect() + "/console-test"
	brokers := map[int32]*serveProcess{}
	for id := int32(1); id <= 2; id++ {
		brokers[id] = startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--broker-id", fmt.Sprint(id),
			"--coord", "zk", "--zk-connect", connect, "--session-timeout", "2s")
	}
	url, _, _ := startWatching(t, regexp.MustCompile(`serving (http://\S+)`), "console",
		"--bootstrap", brokers[1].addr+","+brokers[2].addr, "--listen", "127.0.0.1:0", "--coord", "zk", "--zk-connect", connect)
	waitCluster(t, url, "", "", 2, "zk")
	out, err := exec.Command(tripodBin, "console", "--listen", "127.0.0.1:0", "--coord", "zk", "--zk-connect", zk.Connect()+"/no-such-cluster").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no tripod cluster there (no /no-such-cluster/brokers/ids)") {
		t.Errorf("tripod console --zk-connect to a chroot without a cluster: got %v, %q; want it refused", err, out)
	}
	epoch := waitEpoch(t, url, "", "", 1)

	var c struct{ Coordination struct{ ControllerID int32 } }
	if _, body := getConsole(t, url+"api/cluster", "", ""); json.Unmarshal(body, &c) != nil || brokers[c.Coordination.ControllerID] == nil {
		t.Fatalf("GET /api/cluster: %s; want a controller among brokers 1 and 2", body)
	}
	controller := brokers[c.Coordination.ControllerID]
	controller.cmd.Process.Kill()
	<-controller.exited
	after := waitEpoch(t, url, "", "", epoch+1)

	deadline := time.Now().Add(30 * time.Second)
	for {
		var evs struct{ Events []struct{ Text string } }
		_, body := getConsole(t, url+"api/events?kind=controller", "", "")
		if json.Unmarshal(body, &evs) == nil && slices.ContainsFunc(evs.Events, func(e struct{ Text string }) bool {
			return strings.HasPrefix(e.Text, fmt.Sprintf("controller epoch %d → %d", epoch, after))
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/events?kind=controller: %s; want the epoch's rise from %d to %d", body, epoch, after)
		}
		time.Sleep(100 * time.Millisecond) // the polling interval of the check
	}
}

// TestConsoleCoordEtcd runs a broker on etcd under a prefix of its own
// and `tripod console --coord etcd` with that prefix: the console reports
// the controller epoch read from etcd.
func TestConsoleCoordEtcd(t *testing.T) {
	etcd, err := etcdserver.Start(filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { etcd.Close() })
	endpoints := strings.Join(etcd.Endpoints(), ",")
	broker := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--coord", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/console-test")
	url, _, _ := startWatching(t, regexp.MustCompile(`serving (http://\S+)`), "console", "--bootstrap", broker.addr,
		"--listen", "127.0.0.1:0", "--coord", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/console-test")
	waitCluster(t, url, "", "", 1, "etcd")
	waitEpoch(t, url, "", "", 1)
}

// TestServeConsoleListen runs `tripod serve --console-listen`: the broker
// serves the console of its own cluster, with the controller epoch its
// own Raft backend names, and SIGTERM ends the broker
// cleanly while a page follows the console's stream.
func TestServeConsoleListen(t *testing.T) {
	url, cmd, exited := startWatching(t, regexp.MustCompile(`console listening: .*url=(\S+)`), "serve",
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0")
	waitCluster(t, url, "", "", 1, "raft")
	waitEpoch(t, url, "", "", 1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"api/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/stream: %v", err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: cluster\n" {
		t.Fatalf("the stream's first line: got %q, %v; want the cluster event", line, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if !cmd.ProcessState.Success() {
			t.Fatalf("tripod serve after SIGTERM: %v, want a clean exit", cmd.ProcessState)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tripod serve with a console stream open did not exit within 30s of SIGTERM")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--console-listen", "nowhere"}, "--console-listen"},
	} {
		out, err := exec.Command(tripodBin, append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("tripod serve %v: got %v, %q; want a failure naming %s", tc.args, err, out, tc.want)
		}
	}
}
