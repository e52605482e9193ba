// Command compat runs Kafka client libraries' own integration suites
// against `tripod dev` clusters and writes docs/compat.md: franz-go's
// pkg/kgo tests and sarama's functional tests, each at the version in
// tripod's go.mod, from a writable copy of the module cache, unmodified.
// Every test that does not pass needs a reason in the known file
// (scripts/compat/known.txt); one without is "unexplained" and makes the
// command exit 1. `make compat` runs it; docs/clients.md explains the
// suites and the stand-ins (scripts/faketoxiproxy, scripts/sarama-docker).
//
// It stops every process it started (the clusters, the brokers the docker
// stand-in restarted, the test binaries) when it ends, fails or is
// interrupted.
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
	// toxiproxy: run scripts/faketoxiproxy and the docker stand-in.
	toxiproxy bool
	// node is the directory (from the repository's root) of a Node.js
	// program to run instead of a Go suite, pkg its file (node.go).
	node string
}

var suites = []suite{
	{
		name: "franz-go", module: "github.com/twmb/franz-go", pkg: "./pkg/kgo", brokers: 3, port: 39092,
		env: []string{"KGO_SEEDS=127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094", "KGO_LOG_LEVEL=none"},
	},
	{
		name: "sarama", module: "github.com/IBM/sarama", pkg: ".", brokers: 5, port: 29091, tags: "functional",
		env: []string{"TOXIPROXY_ADDR=http://127.0.0.1:8474", "KAFKA_VERSION=4.0.0"},
		// sarama's docker-compose.yml disables auto creation;
		// TestFuncClientMetadata expects it off.
		set:       []string{"auto.create.topics.enable=false"},
		toxiproxy: true,
	},
	{
		// npm's librdkafka binding in a KIP-848 consumer group (node.go).
		name: "kafka-javascript", node: "scripts/compat/kafkajs848", pkg: "consumer848.js", brokers: 3, port: 27092,
	},
}

func main() {
	out := flag.String("out", "docs/compat.md", "page to write")
	known := flag.String("known", "scripts/compat/known.txt", "known reasons of the tests that do not pass")
	only := flag.String("suites", "", "comma-separated suites to run (default all): franz-go, sarama, kafka-javascript")
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
	for _, b := range [][]string{{"-o", filepath.Join(work, "tripod"), "./cmd/tripod"}, {"-o", filepath.Join(work, "faketoxiproxy"), "./scripts/faketoxiproxy"}} {
		if err := runCmd(ctx, "", nil, "go", append([]string{"build"}, b...)...); err != nil {
			return 0, err
		}
	}
	var results []*result
	for _, s := range suites {
		if only != "" && !slices.Contains(strings.Split(only, ","), s.name) {
			continue
		}
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
	page := render(results, commit, run)
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
	if s.node != "" {
		return runNodeSuite(ctx, s, repo, work)
	}
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
	if s.toxiproxy {
		env = append(env, "PATH="+filepath.Join(repo, "scripts", "sarama-docker")+":"+os.Getenv("PATH"),
			"TRIPOD_DOCKER_SHIM_DIR="+filepath.Join(work, s.name+"-docker"))
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
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if strings.HasPrefix(sc.Text(), "cluster ready") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			return cl, fmt.Errorf("tripod dev exited before the cluster was ready (log %s)", logPath)
		}
	case <-time.After(2 * time.Minute):
		return cl, fmt.Errorf("cluster not ready after 2m (log %s)", logPath)
	case <-ctx.Done():
		return cl, ctx.Err()
	}
	log.Printf("%s: %d brokers on 127.0.0.1:%d.. (log %s)", s.name, s.brokers, s.port, logPath)
	if s.toxiproxy {
		p := command(context.WithoutCancel(ctx), "", nil, filepath.Join(work, "faketoxiproxy"),
			"--proxies", strconv.Itoa(s.brokers), "--base-port", strconv.Itoa(s.port))
		p.Stderr = logFile
		if err := p.Start(); err != nil {
			return cl, err
		}
		cl.procs = append(cl.procs, p)
	}
	return cl, nil
}

// stop ends what the cluster started: tripod dev (which stops its
// brokers), faketoxiproxy, and any broker the docker stand-in started
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

var fileLine = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)

// skipMessage is the message the test logged at its skip.
func skipMessage(t *test) string {
	for i := len(t.output) - 1; i >= 0; i-- {
		if m := fileLine.FindStringSubmatch(t.output[i]); m != nil {
			return m[1]
		}
	}
	return ""
}

// failMessage is the first message the test logged from its own file,
// the usual shape of a t.Error or t.Fatal.
func failMessage(t *test) string {
	for _, line := range t.output {
		if m := fileLine.FindStringSubmatch(line); m != nil {
			msg := m[1]
			if len(msg) > 240 {
				msg = msg[:240] + "…"
			}
			return msg
		}
	}
	if len(t.output) > 0 {
		return strings.TrimSpace(t.output[len(t.output)-1])
	}
	return ""
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

func render(results []*result, commit, run string) string {
	var b strings.Builder
	b.WriteString("# Client suites against tripod\n\n")
	b.WriteString("Generated by `make compat` (`go run ./scripts/compat`): it runs Kafka client libraries' own\n" +
		"integration tests, unmodified, at the versions in tripod's `go.mod`, against `tripod dev`\n" +
		"clusters (see [clients.md](clients.md) for the suites and the stand-ins for toxiproxy and\n" +
		"docker). Every test that does not pass is listed with its reason, from\n" +
		"`scripts/compat/known.txt` or, for a skip, the suite's own message; one without is\n" +
		"**unexplained** and makes `make compat` fail. Counts are of tests without subtests, and\n" +
		"a test that fails only through its subtests is not listed itself.\n\n")
	fmt.Fprintf(&b, "Run %s, tripod %s, on a 2-core machine shared with other builds: the suites'\n"+
		"timing-sensitive tests can fail from load.\n", time.Now().UTC().Format("2006-01-02"), commit)
	if run != "" {
		fmt.Fprintf(&b, "Only the tests matching `-run '%s'` ran.\n", run)
	}
	b.WriteString("\n| suite | version | cluster | passed | failed | skipped | time |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s (`%s`) | %s | %d brokers | %d | %d | %d | %s |\n", r.suite.name, r.suite.pkg, r.version,
			r.suite.brokers, r.count("pass"), r.count("fail"), r.count("skip"), r.elapsed.Round(time.Second))
	}
	for _, r := range results {
		fmt.Fprintf(&b, "\n## %s %s\n\n", r.suite.name, r.version)
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

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "`", "'").Replace(s)
}
