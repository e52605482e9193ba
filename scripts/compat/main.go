// Command compat runs Kafka client libraries' own integration suites
// against `tripod dev` clusters and writes docs/compat.md: franz-go's
// pkg/kgo tests and sarama's functional tests, each at the version in
// tripod's go.mod, from a writable copy of the module cache, unmodified.
// Every test that does not pass needs a reason in the known file
// (scripts/compat/known.txt); one without is "unexplained" and makes the
// command exit 1. `make compat` runs it; docs/clients.md explains the
// suites, the toxiproxy in front of sarama's cluster and the stand-in for
// docker (scripts/sarama-docker).
//
// It stops every process it started (the clusters, toxiproxy, the brokers
// the docker stand-in restarted, the test binaries) when it ends, fails
// or is interrupted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// suite is one client's test suite and the cluster it needs.
type suite struct {
	name    string // as in the known file
	module  string // module path in go.mod
	pkg     string // package to test, relative to the module
	brokers int
	port    int      // Kafka port of broker 1
	tags    string   // build tags
	env     []string // the suite's environment, besides GOFLAGS
	// set are broker properties besides tripod dev's, as the suite's own
	// cluster has them.
	set []string
	// proxyPort, when not zero, puts the cluster behind toxiproxy, as the
	// suite's own cluster is: toxiproxy's proxy kafkaN listens on
	// 127.0.0.1:proxyPort+N-1, where broker N is advertised to clients
	// (tripod dev --client-proxy-base-port), and forwards to the broker's
	// CLIENT listener; the API is at toxiproxyAPI. It also puts the docker
	// stand-in (scripts/sarama-docker) first in the suite's PATH.
	proxyPort int
}

// toxiproxyPkg is the toxiproxy server that compat installs with go
// install into its work directory: the newest version the Go module proxy
// serves (sarama's docker-compose.yml runs 2.12.0, published only as an
// image). toxiproxyAPI is where it serves its HTTP API.
const (
	toxiproxyPkg = "github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0"
	toxiproxyAPI = "127.0.0.1:8474"
)

var suites = []suite{
	{
		name: "franz-go", module: "github.com/twmb/franz-go", pkg: "./pkg/kgo", brokers: 3, port: 39092,
		env: []string{"KGO_SEEDS=127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094", "KGO_LOG_LEVEL=none"},
	},
	{
		// The tests reach the brokers at 127.0.0.1:29091..29095, the
		// proxies kafka1..kafka5 (functional_test.go,
		// setupToxiProxies), which find them on 23292..23296.
		name: "sarama", module: "github.com/IBM/sarama", pkg: ".", brokers: 5, port: 23092, tags: "functional",
		env: []string{"TOXIPROXY_ADDR=http://" + toxiproxyAPI, "KAFKA_VERSION=4.0.0"},
		// sarama's docker-compose.yml disables auto creation;
		// TestFuncClientMetadata expects it off.
		set:       []string{"auto.create.topics.enable=false"},
		proxyPort: 29091,
	},
}

func main() {
	out := flag.String("out", "docs/compat.md", "page to write")
	known := flag.String("known", "scripts/compat/known.txt", "known reasons of the tests that do not pass")
	only := flag.String("suites", "", "comma-separated suites to run (default all): franz-go, sarama")
	run := flag.String("run", "", "go test -run of every suite (default all tests)")
	timeout := flag.Duration("timeout", 40*time.Minute, "go test -timeout of each suite")
	work := flag.String("work", "", "work directory (default a temporary one, removed at the end)")
	flag.Parse()
	log.SetFlags(log.Ltime)
	log.SetPrefix("compat: ")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := runAll(ctx, *out, *known, *only, *run, *timeout, *work)
	if err != nil {
		log.Print(err)
		code = 2
	}
	os.Exit(code)
}

func runAll(ctx context.Context, out, knownPath, only, run string, timeout time.Duration, work string) (int, error) {
	known, err := readKnown(knownPath)
	if err != nil {
		return 0, err
	}
	if work == "" {
		if work, err = os.MkdirTemp("", "tripod-compat-"); err != nil {
			return 0, err
		}
		defer os.RemoveAll(work)
	}
	work, _ = filepath.Abs(work)
	repo, _ := os.Getwd()
	commit := strings.TrimSpace(output(ctx, "git", "rev-parse", "--short", "HEAD"))
	if output(ctx, "git", "status", "--porcelain", "--untracked-files=no") != "" {
		commit += " (with uncommitted changes)"
	}
	log.Printf("building tripod in %s", work)
	if err := runCmd(ctx, "", nil, "go", "build", "-o", filepath.Join(work, "tripod"), "./cmd/tripod"); err != nil {
		return 0, err
	}
	var selected []suite
	for _, s := range suites {
		if only == "" || slices.Contains(strings.Split(only, ","), s.name) {
			selected = append(selected, s)
		}
	}
	if len(selected) == 0 {
		return 0, fmt.Errorf("-suites %q: no such suite", only)
	}
	if slices.ContainsFunc(selected, func(s suite) bool { return s.proxyPort != 0 }) {
		log.Printf("installing %s in %s", toxiproxyPkg, work)
		// Outside tripod's module: go install pkg@version builds the
		// toxiproxy module with its own go.mod.
		env := append(os.Environ(), "GOBIN="+filepath.Join(work, "toxiproxy"), "GOFLAGS=")
		if err := runCmd(ctx, work, env, "go", "install", toxiproxyPkg); err != nil {
			return 0, err
		}
	}
	var results []*result
	for _, s := range selected {
		r, err := runSuite(ctx, s, repo, work, run, timeout)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s.name, err)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("interrupted")
		}
		r.explain(known)
		results = append(results, r)
	}
	old, err := os.ReadFile(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	page := render(results, commit, run, string(old))
	if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
		return 0, err
	}
	log.Printf("wrote %s", out)
	unexplained := 0
	for _, r := range results {
		for _, t := range r.nonPass {
			if t.reason == "" {
				unexplained++
				log.Printf("unexplained: %s %s (%s)", r.suite.name, t.name, t.status)
			}
		}
	}
	if unexplained > 0 {
		return 1, nil
	}
	return 0, nil
}

// runSuite starts the suite's cluster, runs its tests and stops the
// cluster.
func runSuite(ctx context.Context, s suite, repo, work, run string, timeout time.Duration) (*result, error) {
	version := strings.TrimSpace(output(ctx, "go", "list", "-m", "-f", "{{.Version}}", s.module))
	dir := strings.TrimSpace(output(ctx, "go", "list", "-m", "-f", "{{.Dir}}", s.module))
	if version == "" || dir == "" {
		return nil, fmt.Errorf("module %s is not in go.mod or not downloaded (go mod download %s)", s.module, s.module)
	}
	src := filepath.Join(work, s.name)
	if err := copyTree(dir, src); err != nil {
		return nil, err
	}
	data := filepath.Join(work, s.name+"-data")
	cl, err := startCluster(ctx, s, work, data)
	defer cl.stop()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod")
	env = append(env, s.env...)
	if s.proxyPort != 0 {
		env = append(env, "PATH="+filepath.Join(repo, "scripts", "sarama-docker")+":"+os.Getenv("PATH"),
			"TRIPOD_DOCKER_SHIM_DIR="+filepath.Join(work, s.name+"-docker"),
			"TRIPOD_DOCKER_SHIM_BASE_PORT="+strconv.Itoa(s.port))
	}
	args := []string{"test", "-json", "-count=1", "-timeout", timeout.String()}
	if s.tags != "" {
		args = append(args, "-tags", s.tags)
	}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, s.pkg)
	jsonPath := filepath.Join(work, s.name+".json")
	log.Printf("%s %s: go %s (log %s)", s.name, version, strings.Join(args, " "), jsonPath)
	start := time.Now()
	f, err := os.Create(jsonPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := command(ctx, src, env, "go", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := newResult(s, version)
	parseErr := r.parse(io.TeeReader(stdout, f))
	waitErr := cmd.Wait()
	r.elapsed = time.Since(start)
	if parseErr != nil {
		return nil, parseErr
	}
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		return nil, waitErr
	}
	if waitErr != nil && stderr.Len() > 0 {
		r.stderr = strings.TrimSpace(stderr.String())
	}
	log.Printf("%s: %d passed, %d failed, %d skipped in %s", s.name, r.count("pass"), r.count("fail"), r.count("skip"), r.elapsed.Round(time.Second))
	return r, nil
}

// cluster is a running `tripod dev` and what runs beside it.
type cluster struct {
	data  string // the brokers' data directory: in every broker's command line
	procs []*exec.Cmd
}

func startCluster(ctx context.Context, s suite, work, data string) (*cluster, error) {
	cl := &cluster{data: data}
	logPath := filepath.Join(work, s.name+"-cluster.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return cl, err
	}
	defer logFile.Close()
	args := []string{"dev", "--brokers", strconv.Itoa(s.brokers), "--base-port", strconv.Itoa(s.port), "--data-dir", data,
		"--log-level", "warn", "--set", "group.initial.rebalance.delay.ms=0"}
	if s.proxyPort != 0 {
		args = append(args, "--client-proxy-base-port", strconv.Itoa(s.proxyPort))
	}
	for _, kv := range s.set {
		args = append(args, "--set", kv)
	}
	cmd := command(context.WithoutCancel(ctx), "", nil, filepath.Join(work, "tripod"), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return cl, err
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return cl, err
	}
	cl.procs = append(cl.procs, cmd)
	// ready gets the proxies tripod dev asks for (broker N's: the
	// address it is advertised at, and its CLIENT listener) when the
	// cluster is ready, nil if tripod dev exits first.
	ready := make(chan []proxy, 1)
	go func() {
		var proxies []proxy
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if m := proxyLine.FindStringSubmatch(sc.Text()); m != nil {
				proxies = append(proxies, proxy{Name: "kafka" + m[1], Listen: m[2], Upstream: m[3]})
			}
			if strings.HasPrefix(sc.Text(), "cluster ready") {
				ready <- proxies
			}
		}
		ready <- nil
	}()
	var proxies []proxy
	select {
	case proxies = <-ready:
		if proxies == nil && s.proxyPort != 0 {
			return cl, fmt.Errorf("tripod dev exited before the cluster was ready, or named no proxies (log %s)", logPath)
		}
	case <-time.After(2 * time.Minute):
		return cl, fmt.Errorf("cluster not ready after 2m (log %s)", logPath)
	case <-ctx.Done():
		return cl, ctx.Err()
	}
	log.Printf("%s: %d brokers on 127.0.0.1:%d.. (log %s)", s.name, s.brokers, s.port, logPath)
	if s.proxyPort != 0 {
		if err := cl.startToxiproxy(ctx, work, s.name, proxies); err != nil {
			return cl, err
		}
	}
	return cl, nil
}

// proxyLine is the line with which tripod dev --client-proxy-base-port
// asks for broker N's proxy.
var proxyLine = regexp.MustCompile(`^broker (\d+): clients at (\S+), a proxy to its CLIENT listener (\S+)$`)

// proxy is a toxiproxy proxy as its API describes it.
type proxy struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
}

// startToxiproxy runs the toxiproxy server that compat installed in work,
// its API on toxiproxyAPI, and creates the proxies through its API. The
// suite's harness finds them by name and only changes them (toxics,
// disabling, resets): it would create missing ones forwarding to its
// docker containers' names.
func (cl *cluster) startToxiproxy(ctx context.Context, work, name string, proxies []proxy) error {
	logPath := filepath.Join(work, name+"-toxiproxy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	host, port, _ := strings.Cut(toxiproxyAPI, ":")
	// Info: its API calls and the proxies' changes, without a line for
	// every connection's every write.
	env := append(os.Environ(), "LOG_LEVEL=info")
	p := command(context.WithoutCancel(ctx), "", env, filepath.Join(work, "toxiproxy", "server"), "-host", host, "-port", port)
	p.Stdout, p.Stderr = logFile, logFile
	if err := p.Start(); err != nil {
		return err
	}
	cl.procs = append(cl.procs, p)
	api := "http://" + toxiproxyAPI
	body, _ := json.Marshal(proxies)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(api+"/populate", "application/json", bytes.NewReader(body))
		if err == nil {
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("toxiproxy: creating proxies %s: %s %s (log %s)", body, resp.Status, bytes.TrimSpace(msg), logPath)
			}
			log.Printf("%s: toxiproxy on %s: %s", name, toxiproxyAPI, body)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("toxiproxy: API not up on %s after 30s: %w (log %s)", toxiproxyAPI, err, logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends what the cluster started: tripod dev (which stops its
// brokers), toxiproxy, and any broker the docker stand-in started
// again, found by the data directory in its command line.
func (cl *cluster) stop() {
	for _, p := range cl.procs {
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
	}
	for _, pid := range cl.strays() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range cl.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Until(deadline)):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	for time.Now().Before(deadline) && len(cl.strays()) > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	for _, pid := range cl.strays() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.RemoveAll(cl.data)
}

// strays returns the processes whose command line names the cluster's
// data directory: brokers not (or no longer) children of tripod dev.
func (cl *cluster) strays() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if a := string(arg); a == cl.data || strings.HasPrefix(a, cl.data+"/") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// command returns a command in its own process group, ended with it when
// ctx ends and sent SIGTERM if this program dies first.
func command(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd
}

func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := command(ctx, dir, env, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func output(ctx context.Context, name string, args ...string) string {
	b, _ := exec.CommandContext(ctx, name, args...).Output()
	return string(b)
}

// copyTree copies the module src to dst, writable (the module cache is
// read-only).
func copyTree(src, dst string) error {
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm()|0o200)
	})
}

// test is one test's (or subtest's) outcome.
type test struct {
	name     string
	status   string // pass, fail, skip; "fail" too when it never ended
	elapsed  float64
	output   []string
	children int
	// reason explains a non-pass: from the known file, or the suite's own
	// skip message; empty when unexplained.
	reason string
}

type result struct {
	suite   suite
	version string
	tests   map[string]*test
	order   []string
	nonPass []*test
	elapsed time.Duration
	pkgFail bool
	stderr  string
}

func newResult(s suite, version string) *result {
	return &result{suite: s, version: version, tests: map[string]*test{}}
}

// event is a line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

func (r *result) parse(rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line go test printed that is not an event
		}
		if e.Test == "" {
			if e.Action == "fail" {
				r.pkgFail = true
			}
			continue
		}
		t := r.tests[e.Test]
		if t == nil {
			t = &test{name: e.Test}
			r.tests[e.Test] = t
			r.order = append(r.order, e.Test)
			if i := strings.LastIndex(e.Test, "/"); i > 0 {
				if parent := r.tests[e.Test[:i]]; parent != nil {
					parent.children++
				}
			}
		}
		switch e.Action {
		case "output":
			t.output = append(t.output, strings.TrimRight(e.Output, "\n"))
		case "pass", "fail", "skip":
			t.status, t.elapsed = e.Action, e.Elapsed
		}
	}
	for _, t := range r.tests {
		if t.status == "" {
			t.status = "fail"
			t.output = append(t.output, "(did not finish: the test binary timed out or crashed)")
		}
	}
	return sc.Err()
}

// count returns how many tests without subtests ended with status.
func (r *result) count(status string) int {
	n := 0
	for _, t := range r.tests {
		if t.children == 0 && t.status == status {
			n++
		}
	}
	return n
}

// explain lists the tests that did not pass with their reasons. A test
// that failed or was skipped only through its subtests is not listed.
func (r *result) explain(known []knownEntry) {
	for _, name := range r.order {
		t := r.tests[name]
		if t.status == "pass" || r.sameInChild(t) {
			continue
		}
		for _, k := range known {
			if k.suite == r.suite.name && k.matches(t.name) {
				t.reason = k.reason
				break
			}
		}
		if t.reason == "" && t.status == "skip" {
			if msg := skipMessage(t); msg != "" {
				t.reason = "skipped by the suite: " + msg
			}
		}
		r.nonPass = append(r.nonPass, t)
	}
}

func (r *result) sameInChild(t *test) bool {
	for _, name := range r.order {
		if c := r.tests[name]; strings.HasPrefix(name, t.name+"/") && c.status == t.status {
			return true
		}
	}
	return false
}

var fileLine = regexp.MustCompile(`^\s+\S+\.go:\d+:(?: (.*))?$`)

// skipMessage is the message the test logged at its skip.
func skipMessage(t *test) string {
	for i := len(t.output) - 1; i >= 0; i-- {
		if m := fileLine.FindStringSubmatch(t.output[i]); m != nil {
			return strings.TrimSpace(m[1])
		}
	}
	return ""
}

// failMessage is the first message the test logged from its own file,
// the usual shape of a t.Error or t.Fatal, or of a testify assertion's
// report on the lines that follow its file and line.
func failMessage(t *test) string {
	for i, line := range t.output {
		if m := fileLine.FindStringSubmatch(line); m != nil {
			msg := strings.TrimSpace(m[1])
			if msg == "" {
				msg = testifyMessage(t.output[i+1:])
			}
			if len(msg) > 240 {
				msg = strings.ToValidUTF8(msg[:240], "") + "…"
			}
			return msg
		}
	}
	if len(t.output) > 0 {
		return strings.TrimSpace(t.output[len(t.output)-1])
	}
	return ""
}

// testifyMessage is the Error and Messages of a testify report, lines
// such as "\tError Trace:\t...", "\tError:\t...", "\tMessages:\t..."
// and their continuations, up to the report's end.
func testifyMessage(lines []string) string {
	var parts []string
	keep := false
	for _, line := range lines {
		text := strings.TrimSpace(line)
		if text == "" || text == line || fileLine.MatchString(line) || strings.HasPrefix(text, "---") || strings.HasPrefix(text, "===") {
			break
		}
		label, rest, ok := strings.Cut(text, ":")
		switch {
		case ok && (label == "Error" || label == "Messages"):
			keep = true
			parts = append(parts, strings.TrimSpace(rest))
		case ok && (label == "Error Trace" || label == "Test"):
			keep = false
		case keep:
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, " ")
}

// knownEntry is a line of the known file: suite, test name (a trailing *
// matches any name with that prefix), reason.
type knownEntry struct {
	suite, test, reason string
}

func (k knownEntry) matches(name string) bool {
	if p, ok := strings.CutSuffix(k.test, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return name == k.test
}

var knownLine = regexp.MustCompile(`^(\S+)\s+(\S+)\s+(.*\S)$`)

func readKnown(path string) ([]knownEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []knownEntry
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := knownLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s:%d: want: suite test reason", path, i+1)
		}
		out = append(out, knownEntry{suite: m[1], test: m[2], reason: m[3]})
	}
	return out, nil
}

// render writes the page: the rows and sections of the suites that ran
// and, for those that did not (-suites), their rows and sections from the
// page as it was (old), each section saying when its suite ran.
func render(results []*result, commit, run, old string) string {
	ran := map[string]*result{}
	for _, r := range results {
		ran[r.suite.name] = r
	}
	var b strings.Builder
	b.WriteString("# Client suites against tripod\n\n")
	b.WriteString("Generated by `make compat` (`go run ./scripts/compat`): it runs Kafka client libraries' own\n" +
		"integration tests, unmodified, at the versions in tripod's `go.mod`, against `tripod dev`\n" +
		"clusters (see [clients.md](clients.md) for the suites, the toxiproxy in front of sarama's\n" +
		"cluster and the stand-in for docker). Every test that does not pass is listed with its\n" +
		"reason, from `scripts/compat/known.txt` or, for a skip, the suite's own message; one\n" +
		"without is **unexplained** and makes `make compat` fail. Counts are of tests without\n" +
		"subtests, and a test that fails only through its subtests is not listed itself.\n\n")
	b.WriteString("Each suite's section says when it ran and on which tripod commit (`-suites` runs some\n" +
		"of them and keeps the others' rows and sections as they were), on a 2-core machine\n" +
		"shared with other builds: the suites' timing-sensitive tests can fail from load.\n")
	b.WriteString("\n| suite | version | cluster | passed | failed | skipped | time |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range suites {
		r := ran[s.name]
		if r == nil {
			if row := oldRow(old, s.name); row != "" {
				b.WriteString(row + "\n")
			}
			continue
		}
		cluster := fmt.Sprintf("%d brokers", s.brokers)
		if s.proxyPort != 0 {
			cluster += " behind toxiproxy"
		}
		fmt.Fprintf(&b, "| %s (`%s`) | %s | %s | %d | %d | %d | %s |\n", s.name, s.pkg, r.version,
			cluster, r.count("pass"), r.count("fail"), r.count("skip"), r.elapsed.Round(time.Second))
	}
	for _, s := range suites {
		r := ran[s.name]
		if r == nil {
			if sec := oldSection(old, s.name); sec != "" {
				b.WriteString("\n" + sec)
			}
			continue
		}
		fmt.Fprintf(&b, "\n## %s %s\n\n", s.name, r.version)
		fmt.Fprintf(&b, "Run %s, tripod %s.", time.Now().UTC().Format("2006-01-02"), commit)
		if run != "" {
			fmt.Fprintf(&b, " Only the tests matching `-run '%s'` ran.", run)
		}
		b.WriteString("\n\n")
		if r.pkgFail && r.count("fail") == 0 {
			fmt.Fprintf(&b, "The package failed without a failing test: %s\n\n", firstLine(r.stderr))
		}
		if len(r.nonPass) == 0 {
			b.WriteString("Every test passed.\n")
			continue
		}
		b.WriteString("| test | result | reason | message |\n| --- | --- | --- | --- |\n")
		for _, t := range r.nonPass {
			reason := t.reason
			if reason == "" {
				reason = "**unexplained**"
			}
			msg := ""
			if t.status == "fail" {
				msg = failMessage(t)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", t.name, t.status, cell(reason), cell(msg))
		}
	}
	return b.String()
}

// oldRow is the suite's row of the summary table in page, "" if none.
func oldRow(page, name string) string {
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "| "+name+" (`") {
			return line
		}
	}
	return ""
}

// oldSection is the suite's section in page, from its heading to the
// next heading, "" if none.
func oldSection(page, name string) string {
	var sec []string
	for _, line := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(line, "## "+name+" "):
			sec = []string{line}
		case sec != nil && strings.HasPrefix(line, "## "):
			return strings.TrimRight(strings.Join(sec, "\n"), "\n") + "\n"
		case sec != nil:
			sec = append(sec, line)
		}
	}
	if sec == nil {
		return ""
	}
	return strings.TrimRight(strings.Join(sec, "\n"), "\n") + "\n"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "`", "'").Replace(s)
}
