package main

// The kafka-javascript suite: npm's @confluentinc/kafka-javascript
// (librdkafka's Node.js binding) in a KIP-848 consumer group against a
// `tripod dev` cluster. Unlike the Go suites it is not the client's own
// test suite, which needs a docker Kafka: it is tripod's program
// (scripts/compat/kafkajs848/consumer848.js) of what a user of such a
// group relies on, each check reported as a go test -json event. It is
// given the brokers' PIDs and kills the group's coordinator (SIGKILL)
// halfway: the broker stays down for the rest of the run.
//
// The package is installed at the version its package.json pins (with
// package-lock.json) into the work directory. The npm registry serves
// no prebuilt binary that this machine may download (node-pre-gyp
// fetches them from the project's release pages), so it builds from
// source: librdkafka (bundled in the package) with the system's
// OpenSSL and zlib, linked dynamically, and the binding against the
// installed Node's headers. That takes about 6 minutes on 2 cores; a
// work directory given with -work keeps the build for the next run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

const kafkaJSPackage = "@confluentinc/kafka-javascript"

// runNodeSuite installs the suite's npm package, starts its cluster and
// runs its Node program.
func runNodeSuite(ctx context.Context, s suite, repo, work string) (*result, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is needed for the %s suite (or leave it out with -suites)", tool, s.name)
		}
	}
	src := filepath.Join(repo, s.node)
	pinned, err := pinnedVersion(filepath.Join(src, "package.json"))
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(work, s.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, f := range []string{"package.json", "package-lock.json", s.pkg} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(work, s.name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()

	installed := filepath.Join(dir, "node_modules", filepath.FromSlash(kafkaJSPackage))
	if v, _ := installedVersion(installed); v == pinned && exists(filepath.Join(installed, "build", "Release", "confluent-kafka-javascript.node")) {
		log.Printf("%s: %s %s already built in %s", s.name, kafkaJSPackage, pinned, dir)
	} else {
		log.Printf("%s: installing %s %s, built from source (about 6 minutes; log %s)", s.name, kafkaJSPackage, pinned, logPath)
		start := time.Now()
		cmd := command(ctx, dir, append(os.Environ(), nodeBuildEnv()...), "npm", "ci", "--foreground-scripts", "--no-audit", "--no-fund")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("npm ci of %s %s: %w (log %s)", kafkaJSPackage, pinned, err, logPath)
		}
		log.Printf("%s: built in %s", s.name, time.Since(start).Round(time.Second))
	}
	version := pinned
	if lib, _ := librdkafkaVersion(installed); lib != "" {
		version += " (librdkafka " + lib + ")"
	}

	data := filepath.Join(work, s.name+"-data")
	cl, err := startCluster(ctx, s, work, data)
	defer cl.stop()
	if err != nil {
		return nil, err
	}
	var bootstrap []string
	for i := range s.brokers {
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", s.port+i))
	}
	env := append(os.Environ(), "BOOTSTRAP="+strings.Join(bootstrap, ","), "TRIPOD="+filepath.Join(work, "tripod"))
	// The program kills the group's coordinator (its failover checks).
	if pids := brokerPIDs(filepath.Join(work, s.name+"-cluster.log")); pids != "" {
		env = append(env, "BROKER_PIDS="+pids)
	}
	env = append(env, s.env...)
	jsonPath := filepath.Join(work, s.name+".json")
	log.Printf("%s %s: node %s (log %s)", s.name, version, s.pkg, logPath)
	f, err := os.Create(jsonPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	start := time.Now()
	cmd := command(ctx, dir, env, "node", s.pkg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var tail tailWriter
	cmd.Stderr = io.MultiWriter(logFile, &tail)
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
	if waitErr != nil && r.count("fail") == 0 {
		// It ended (crashed, timed out) without saying which check
		// failed: that is a failure of its own, unexplained.
		r.tests["Run"] = &test{name: "Run", status: "fail", output: []string{fmt.Sprintf("node %s: %v; last output: %s", s.pkg, waitErr, tail.last())}}
		r.order = append(r.order, "Run")
	}
	log.Printf("%s: %d passed, %d failed, %d skipped in %s", s.name, r.count("pass"), r.count("fail"), r.count("skip"), r.elapsed.Round(time.Second))
	return r, nil
}

var brokerLine = regexp.MustCompile(`^broker (\d+): \S+ pid (\d+)`)

// brokerPIDs returns the brokers' ids and PIDs as id:pid,... from the
// lines `tripod dev` printed (startCluster copies them to its log).
func brokerPIDs(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if m := brokerLine.FindStringSubmatch(line); m != nil {
			out = append(out, m[1]+":"+m[2])
		}
	}
	return strings.Join(out, ",")
}

// nodeBuildEnv is the environment of the package's build from source:
// skip the prebuilt binary's download, link the bundled librdkafka
// dynamically against the system's libraries (the static build
// downloads its dependencies' sources), and use the installed Node's
// headers when they are there (node-gyp would download them).
func nodeBuildEnv() []string {
	env := []string{"npm_config_build_from_source=true", "CKJS_LINKING=dynamic"}
	if node, err := exec.LookPath("node"); err == nil {
		if real, err := filepath.EvalSymlinks(node); err == nil {
			prefix := filepath.Dir(filepath.Dir(real))
			if exists(filepath.Join(prefix, "include", "node", "common.gypi")) {
				env = append(env, "npm_config_nodedir="+prefix)
			}
		}
	}
	return env
}

// pinnedVersion reads the version of the package that package.json pins.
func pinnedVersion(path string) (string, error) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	v := pkg.Dependencies[kafkaJSPackage]
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		return "", fmt.Errorf("%s: %s must be pinned to one version, not %q", path, kafkaJSPackage, v)
	}
	return v, nil
}

func installedVersion(dir string) (string, error) {
	var pkg struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	return pkg.Version, json.Unmarshal(b, &pkg)
}

// librdkafkaVersion is the librdkafka version the package bundles (its
// package.json's "librdkafka").
func librdkafkaVersion(dir string) (string, error) {
	var pkg struct {
		Librdkafka string `json:"librdkafka"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	return pkg.Librdkafka, json.Unmarshal(b, &pkg)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// tailWriter keeps the last few lines written to it.
type tailWriter struct {
	lines []string
	part  string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	lines := strings.Split(t.part+string(p), "\n")
	t.part = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if strings.TrimSpace(l) != "" {
			t.lines = append(t.lines, l)
		}
	}
	if len(t.lines) > 5 {
		t.lines = t.lines[len(t.lines)-5:]
	}
	return len(p), nil
}

func (t *tailWriter) last() string {
	return strings.Join(append(t.lines, t.part), " / ")
}
