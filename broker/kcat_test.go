package broker

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// kcatPath returns kcat's path. A missing kcat skips the test, except
// under CI=true where it fails.
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat is not installed (CI=true): %v", err)
		}
		t.Skipf("kcat is not installed: %v", err)
	}
	return path
}

// runKcat runs kcat with args and stdin, failing the test on error or
// after the timeout.
func runKcat(t *testing.T, ctx context.Context, kcat string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestKcatProducesConsumesAndLists proves librdkafka's command-line client
// works unmodified: lines produced with kcat -P come back identical from
// kcat -C, and kcat -L lists this broker and the topic.
func TestKcatProducesConsumesAndLists(t *testing.T) {
	kcat := kcatPath(t)
	b := startBroker(t, testConfig(t))
	addr := b.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic = "kcat-lines"
	var lines []string
	for i := range 200 {
		lines = append(lines, "line "+strings.Repeat("x", i%17)+" number "+string(rune('a'+i%26)))
	}
	input := strings.Join(lines, "\n") + "\n"
	runKcat(t, ctx, kcat, input, "-P", "-b", addr, "-t", topic)

	out := runKcat(t, ctx, kcat, "", "-C", "-b", addr, "-t", topic, "-e", "-o", "beginning", "-q")
	if out != input {
		t.Fatalf("kcat consumed:\n%s\nwant:\n%s", out, input)
	}

	list := runKcat(t, ctx, kcat, "", "-L", "-b", addr)
	wantBroker := "broker 1 at " + addr
	if !strings.Contains(list, wantBroker) {
		t.Fatalf("kcat -L output lacks %q:\n%s", wantBroker, list)
	}
	if !strings.Contains(list, `topic "`+topic+`" with 1 partitions`) {
		t.Fatalf("kcat -L output lacks topic %s with 1 partition:\n%s", topic, list)
	}
}

// TestKcatGroupConsumer proves librdkafka's balanced consumer works: kcat
// -G joins a group, consumes every record, and commits where it stopped,
// so a second run of the same group consumes only what came after.
func TestKcatGroupConsumer(t *testing.T) {
	kcat := kcatPath(t)
	b := startBroker(t, groupTestConfig(t))
	addr := b.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "kcat-group"
	createTopic(t, b, topic, 3, nil)

	var first []string
	for i := range 90 {
		first = append(first, fmt.Sprintf("first-%d", i))
	}
	runKcat(t, ctx, kcat, strings.Join(first, "\n")+"\n", "-P", "-b", addr, "-t", topic)
	groupArgs := []string{"-b", addr, "-G", "kcat-readers", "-q", "-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms=3000", "-X", "heartbeat.interval.ms=200", "-X", "topic.metadata.refresh.interval.ms=1000"}
	out := runKcat(t, ctx, kcat, "", append(groupArgs, "-c", "90", topic)...)
	if got := sortedLines(out); strings.Join(got, ",") != strings.Join(sortedLines(strings.Join(first, "\n")), ",") {
		t.Fatalf("kcat -G consumed %d lines: %v; want the 90 produced", len(got), got)
	}

	runKcat(t, ctx, kcat, "second-0\nsecond-1\nsecond-2\n", "-P", "-b", addr, "-t", topic)
	out = runKcat(t, ctx, kcat, "", append(groupArgs, "-c", "3", topic)...)
	if got := sortedLines(out); strings.Join(got, ",") != "second-0,second-1,second-2" {
		t.Fatalf("second kcat -G run consumed %v; want only the 3 records after the first run's commits", got)
	}
}

// sortedLines returns the non-empty lines of s, sorted.
func sortedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// TestKcatOverSSL proves librdkafka's client speaks to the SSL listener
// with client certificates required: kcat produces, consumes and lists
// over TLS, and Metadata over TLS names the SSL listener's port.
func TestKcatOverSSL(t *testing.T) {
	kcat := kcatPath(t)
	ca := newTestCA(t, "kcat CA")
	cfg := sslConfig(t, ca)
	set(t, &cfg, map[string]string{"ssl.client.auth": "required"})
	b := startBroker(t, cfg)
	dir := t.TempDir()
	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "kcat"})
	writeFile(t, dir+"/client.pem", certPEM)
	writeFile(t, dir+"/client.key", keyPEM)
	addr := b.ListenerAddr("SSL").String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tlsArgs := []string{"-b", addr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + cfg.SSL.TruststoreLocation,
		"-X", "ssl.certificate.location=" + dir + "/client.pem", "-X", "ssl.key.location=" + dir + "/client.key"}

	const topic = "kcat-tls"
	input := "one\ntwo\nthree\n"
	runKcat(t, ctx, kcat, input, append([]string{"-P", "-t", topic}, tlsArgs...)...)
	out := runKcat(t, ctx, kcat, "", append([]string{"-C", "-t", topic, "-e", "-o", "beginning", "-q"}, tlsArgs...)...)
	if out != input {
		t.Fatalf("kcat over TLS consumed %q, want %q", out, input)
	}
	list := runKcat(t, ctx, kcat, "", append([]string{"-L"}, tlsArgs...)...)
	if want := "broker 1 at " + addr; !strings.Contains(list, want) {
		t.Fatalf("kcat -L over TLS lacks %q:\n%s", want, list)
	}
}
