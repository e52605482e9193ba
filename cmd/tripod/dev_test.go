package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/freeport"
)

// bootstrapLine, brokerLine, devMetricsLine and partitionLine match what
// `tripod dev` and `tripod topics describe` print that the test reads.
var (
	bootstrapLine  = regexp.MustCompile(`^bootstrap servers: (\S+)$`)
	brokerLine     = regexp.MustCompile(`^broker (\d+): \S+ pid (\d+) `)
	devMetricsLine = regexp.MustCompile(`^broker (\d+): metrics (http://\S+/metrics), profiles (http://\S+/debug/pprof/)$`)
	partitionLine  = regexp.MustCompile(`^\tTopic: demo\tPartition: (\d+)\tLeader: (\d+)\tReplicas: (\d+),(\d+),(\d+)\tIsr: ([\d,]+)$`)
)

// TestDevAndTopics runs `tripod dev --brokers 3` as a process, creates a
// topic of 6 partitions with replication factor 3 with `tripod topics
// create` and checks `tripod topics describe`: one line per partition in
// kafka-topics' form, each broker leading 2, every replica in the ISR;
// `tripod topics delete-records` answers the empty partition's log start;
// the web console dev serves (--console-listen) lists the topic; every
// broker serves the metrics and runtime profiles dev prints (--pprof),
// broker 1 a CPU profile among them. Ctrl-C (SIGINT) then stops the
// brokers and dev exits 0.
func TestDevAndTopics(t *testing.T) {
	base := freeBasePort(t)
	dev := startDev(t, "--brokers", "3", "--coord", "raft", "--console-listen", "127.0.0.1:0", "--pprof",
		"--base-port", strconv.Itoa(base), "--session-timeout", "2s", "--data-dir", t.TempDir())
	var bootstrap string
	pids := map[int]int{}
	metricsURLs, profileURLs := map[int]string{}, map[int]string{}
	dev.waitReady(t, func(line string) {
		if m := devMetricsLine.FindStringSubmatch(line); m != nil {
			id, _ := strconv.Atoi(m[1])
			metricsURLs[id], profileURLs[id] = m[2], m[3]
		}
		if m := bootstrapLine.FindStringSubmatch(line); m != nil {
			bootstrap = m[1]
		}
		if m := brokerLine.FindStringSubmatch(line); m != nil {
			id, _ := strconv.Atoi(m[1])
			pids[id], _ = strconv.Atoi(m[2])
		}
	})
	if want := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+1, base+2); bootstrap != want {
		t.Fatalf("bootstrap servers %q, want %q", bootstrap, want)
	}
	if len(pids) != 3 {
		t.Fatalf("broker pids %v, want 3 brokers", pids)
	}
	addr := strings.Split(bootstrap, ",")[0]
	consoleURL := dev.waitLine(t, "console: ")
	if len(metricsURLs) != 3 {
		t.Fatalf("--pprof: metrics and profile URLs printed for brokers %v, want 1, 2 and 3", slices.Sorted(maps.Keys(metricsURLs)))
	}
	for id := range metricsURLs {
		if body := httpGet(t, metricsURLs[id]); !strings.Contains(body, "tripod_offline_partitions") {
			t.Fatalf("broker %d: %s answered no tripod_offline_partitions:\n%.500s", id, metricsURLs[id], body)
		}
		if cmdline := httpGet(t, profileURLs[id]+"cmdline"); !strings.Contains(cmdline, "serve") || !strings.Contains(cmdline, fmt.Sprintf("--broker-id\x00%d", id)) {
			t.Fatalf("broker %d: %scmdline answered %q, not broker %d's tripod serve", id, profileURLs[id], cmdline, id)
		}
	}
	// A CPU profile is a gzipped protocol buffer.
	cpu := httpGet(t, profileURLs[1]+"profile?seconds=1")
	if zr, err := gzip.NewReader(strings.NewReader(cpu)); err != nil {
		t.Fatalf("broker 1's CPU profile (%d bytes) is not gzipped: %v", len(cpu), err)
	} else if n, err := io.Copy(io.Discard, zr); err != nil || n == 0 {
		t.Fatalf("broker 1's CPU profile: %d bytes unzipped, %v", n, err)
	}

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
	err := cluster.WaitFor(context.Background(), 30*time.Second, func() error {
		described = runTripod(t, "topics", "describe", "demo", "--bootstrap", addr)
		return checkDescribe(described)
	})
	if err != nil {
		t.Fatalf("topics describe demo:\n%s\n%v", described, err)
	}
	if out := runTripod(t, "topics", "delete-records", "demo", "--partition", "2", "--offset", "-1", "--bootstrap", addr); out != "Deleted records of demo-2: the partition now starts at offset 0.\n" {
		t.Fatalf("topics delete-records printed %q, want the new log start 0 of the empty partition", out)
	}

	// The console lists demo with its 6 partitions, replication factor 3.
	err = cluster.WaitFor(context.Background(), 30*time.Second, func() error {
		resp, err := http.Get(consoleURL + "api/topics?q=demo")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(body), `"name":"demo","internal":false,"partitions":6,"replicationFactor":3`) {
			return fmt.Errorf("the console's %sapi/topics?q=demo answered %d %s", consoleURL, resp.StatusCode, body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	dev.interrupt(t)
	for id, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("broker %d (pid %d) still runs after dev exited: kill 0 says %v", id, pid, err)
		}
	}
}

// httpGet returns the body of a GET of url, which must answer 200 OK.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%.500s", url, resp.Status, err, body)
	}
	return string(body)
}

// devProcess is a `tripod dev` process the test started; it is killed
// when the test ends.
type devProcess struct {
	cmd    *exec.Cmd
	lines  chan string // what it prints, closed when it exits
	exited chan error  // its exit, once lines is closed
	// stderr is what dev writes there, read by the test while the
	// process may still be writing (through lockedWriter, dev.go's).
	stderr    *lockedWriter
	stderrBuf strings.Builder
}

// stderrText returns what dev has written to stderr so far.
func (d *devProcess) stderrText() string {
	d.stderr.mu.Lock()
	defer d.stderr.mu.Unlock()
	return d.stderrBuf.String()
}

// startDev starts `tripod dev` with args.
func startDev(t *testing.T, args ...string) *devProcess {
	t.Helper()
	d := &devProcess{cmd: exec.Command(tripodBin, append([]string{"dev"}, args...)...),
		lines: make(chan string, 64), exited: make(chan error, 1)}
	d.stderr = &lockedWriter{w: &d.stderrBuf}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start tripod dev: %v", err)
	}
	go func() {
		// The reader ends when dev exits and its stdout closes.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Log("tripod dev: " + sc.Text())
			d.lines <- sc.Text()
		}
		close(d.lines)
		d.exited <- d.cmd.Wait()
	}()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		for range d.lines {
		}
		<-d.exited
	})
	return d
}

// waitReady passes every line dev prints to each until it prints
// "cluster ready", within 90 s.
func (d *devProcess) waitReady(t *testing.T, each func(line string)) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				stderr, err := d.exit()
				t.Fatalf("tripod dev exited (%v) before the cluster was ready; stderr:\n%s", err, stderr)
			}
			each(line)
			if strings.HasPrefix(line, "cluster ready") {
				return
			}
		case <-deadline:
			t.Fatalf("tripod dev: no \"cluster ready\" within 90s; stderr:\n%s", d.stderrText())
		}
	}
}

// exit returns how dev exited and all it wrote to stderr, once its
// stdout has closed; the exit stays for the cleanup.
func (d *devProcess) exit() (stderr string, err error) {
	err = <-d.exited // Wait has returned: stderr is all written
	d.exited <- err
	return d.stderrText(), err
}

// waitLine returns the rest of the first line dev prints, within 30 s,
// that starts with prefix.
func (d *devProcess) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				stderr, err := d.exit()
				t.Fatalf("tripod dev exited (%v) before printing %q; stderr:\n%s", err, prefix, stderr)
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
		case <-deadline:
			t.Fatalf("tripod dev: no line %q within 30s; stderr:\n%s", prefix, d.stderrText())
		}
	}
}

// interrupt sends dev Ctrl-C (SIGINT) and checks that it exits 0 within
// 60 s.
func (d *devProcess) interrupt(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range d.lines {
	}
	select {
	case err := <-d.exited:
		d.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("tripod dev after Ctrl-C: %v; stderr:\n%s", err, d.stderrText())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("tripod dev did not exit within 60s of Ctrl-C")
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

// freeBasePort returns a port p such that p, p+1, p+2 (Kafka), p+100,
// p+101, p+102 (Raft), p+200, p+201, p+202 (the CLIENT listeners of
// --client-proxy-base-port) and p+300, p+301, p+302 (their proxies, in
// TestDevBehindProxies) are free on 127.0.0.1 when probed. It draws p
// below the kernel's ephemeral range, as freeDevPorts does: a port taken
// from the range would leave its neighbours to the outgoing connections
// of every test running beside it, one of which may take p+100 between
// the probe and dev's bind.
func freeBasePort(t *testing.T) int {
	t.Helper()
	low, high := freeport.BelowEphemeral()
	if high-low < 1000 {
		low, high = 20000, 30000
	}
	for attempt := 0; attempt < 100; attempt++ {
		base := low + rand.IntN(high-low-400)
		free := true
		for _, p := range []int{base, base + 1, base + 2, base + 100, base + 101, base + 102,
			base + 200, base + 201, base + 202, base + 300, base + 301, base + 302} {
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

// TestDevTLS runs `tripod dev --tls` with one broker: the kcat command it
// prints (TLS with the CA and the client certificate it made) lists the
// broker and produces and reads a record, the franz-go settings it names
// (the same files) connect, and a plaintext client gets no answer.
func TestDevTLS(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat is not installed (CI=true): %v", err)
		}
		t.Skipf("kcat is not installed: %v", err)
	}
	base := freeBasePort(t)
	dev := startDev(t, "--tls", "--brokers", "1", "--coord", "raft",
		"--base-port", strconv.Itoa(base), "--session-timeout", "2s", "--data-dir", t.TempDir())
	kcatLine := regexp.MustCompile(`^tls: kcat (.*) -L$`)
	var kcatArgs []string
	dev.waitReady(t, func(line string) {
		if m := kcatLine.FindStringSubmatch(line); m != nil {
			kcatArgs = strings.Fields(m[1])
		}
	})
	if kcatArgs == nil {
		t.Fatal("tripod dev --tls printed no kcat settings")
	}
	// The topic is auto-created by the produce.
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append(slices.Clone(kcatArgs), args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
		}
		return string(out)
	}
	if out := run("", "-L"); !strings.Contains(out, "1 brokers:") {
		t.Fatalf("kcat -L over TLS printed:\n%s\nwant 1 broker", out)
	}
	run("secret\n", "-P", "-t", "tls-demo")
	if out := run("", "-C", "-t", "tls-demo", "-o", "beginning", "-c", "1", "-e"); strings.TrimSpace(out) != "secret" {
		t.Fatalf("kcat -C over TLS printed %q, want \"secret\"", out)
	}
	addr := "127.0.0.1:" + strconv.Itoa(base)
	setting := func(key string) string {
		for i, a := range kcatArgs {
			if v, ok := strings.CutPrefix(a, key+"="); ok && i > 0 && kcatArgs[i-1] == "-X" {
				return v
			}
		}
		t.Fatalf("kcat settings %v lack %s", kcatArgs, key)
		return ""
	}
	pair, err := tls.LoadX509KeyPair(setting("ssl.certificate.location"), setting("ssl.key.location"))
	if err != nil {
		t.Fatalf("load the client certificate dev printed: %v", err)
	}
	caPEM, err := os.ReadFile(setting("ssl.ca.location"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		t.Fatalf("franz-go with dev's TLS settings: %v", err)
	}
	if md, err := cluster.MetadataFrom(context.Background(), addr); err == nil {
		t.Fatalf("a plaintext client got metadata %+v from an SSL listener, want no answer", md)
	}
	dev.interrupt(t)
}

// TestDevBehindProxies runs `tripod dev --brokers 2
// --client-proxy-base-port P` behind two forwarders on P and P+1, as
// toxiproxy stands in front of sarama's test cluster: a client that
// comes through a proxy is told both brokers are at the proxies'
// addresses, one that reaches a broker's first listener is told their
// first listeners (the brokers' own way to each other), and a produce
// with acks=all through the proxies is replicated.
func TestDevBehindProxies(t *testing.T) {
	base := freeBasePort(t)
	proxyBase := base + 300
	dev := startDev(t, "--brokers", "2", "--coord", "raft", "--base-port", strconv.Itoa(base),
		"--client-proxy-base-port", strconv.Itoa(proxyBase), "--session-timeout", "2s", "--data-dir", t.TempDir(),
		"--set", "offsets.topic.replication.factor=2")
	clientLine := regexp.MustCompile(`^broker (\d+): clients at (\S+), a proxy to its CLIENT listener (\S+)$`)
	clients := map[string]string{}
	dev.waitReady(t, func(line string) {
		if m := clientLine.FindStringSubmatch(line); m != nil {
			clients[m[2]] = m[3]
		}
	})
	for i := range 2 {
		proxy, listener := "127.0.0.1:"+strconv.Itoa(proxyBase+i), "127.0.0.1:"+strconv.Itoa(base+200+i)
		if clients[proxy] != listener {
			t.Fatalf("dev printed proxies %v, want %s forwarding to %s", clients, proxy, listener)
		}
		forward(t, proxy, listener)
	}

	brokersAt := func(seed string) []string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("metadata from %s: %v", seed, err)
		}
		var addrs []string
		for _, b := range resp.Brokers {
			addrs = append(addrs, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
		slices.Sort(addrs)
		return addrs
	}
	proxies := []string{"127.0.0.1:" + strconv.Itoa(proxyBase), "127.0.0.1:" + strconv.Itoa(proxyBase+1)}
	if got := brokersAt(proxies[1]); !slices.Equal(got, proxies) {
		t.Fatalf("brokers told to a client through a proxy: got %v, want %v", got, proxies)
	}
	internal := []string{"127.0.0.1:" + strconv.Itoa(base), "127.0.0.1:" + strconv.Itoa(base+1)}
	if got := brokersAt(internal[0]); !slices.Equal(got, internal) {
		t.Fatalf("brokers told to a client on the first listener: got %v, want %v", got, internal)
	}

	runTripod(t, "topics", "create", "proxied", "--partitions", "2", "--replication-factor", "2", "--bootstrap", internal[0])
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxies...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("proxied"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 4 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte("through a proxy")}).FirstErr(); err != nil {
			t.Fatalf("produce with acks=all through the proxies: %v", err)
		}
	}
	dev.interrupt(t)
}

// forward listens on addr and forwards every connection to target until
// the test ends.
func forward(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			// Each copy ends when either side closes: the test's
			// clients and dev's brokers all close by the cleanup.
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(server, client); server.Close(); client.Close() }()
			go func() { defer wg.Done(); io.Copy(client, server); server.Close(); client.Close() }()
		}
	}()
}

// TestDevConsoleOnEtcd runs `tripod dev --coord etcd --console-listen`:
// the console dev serves reads the controller epoch from the cluster's
// etcd, which no Kafka response carries.
func TestDevConsoleOnEtcd(t *testing.T) {
	dev := startDev(t, "--brokers", "1", "--coord", "etcd", "--console-listen", "127.0.0.1:0",
		"--base-port", strconv.Itoa(freeBasePort(t)), "--session-timeout", "2s", "--data-dir", t.TempDir())
	dev.waitReady(t, func(string) {})
	url := dev.waitLine(t, "console: ")
	var last string
	err := cluster.WaitFor(context.Background(), 30*time.Second, func() error {
		status, body := getConsole(t, url+"api/cluster", "", "")
		last = fmt.Sprintf("%d %s", status, body)
		var c struct {
			ControllerEpoch *int64
			Coordination    *struct{ Error string }
		}
		if status != http.StatusOK || json.Unmarshal(body, &c) != nil || c.ControllerEpoch == nil || *c.ControllerEpoch < 1 ||
			c.Coordination == nil || c.Coordination.Error != "" {
			return errors.New("no controller epoch yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the console of a dev cluster on etcd: /api/cluster answered %s, want a controller epoch of at least 1 read from etcd", last)
	}
	dev.interrupt(t)
}
