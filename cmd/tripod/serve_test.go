package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/broker/config"
)

// tripodBin is the tripod binary TestMain builds for the process tests.
var tripodBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tripod-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		os.Exit(1)
	}
	tripodBin = filepath.Join(dir, "tripod")
	build := exec.Command("go", "build", "-o", tripodBin, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build tripod:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serveProcess is a running `tripod serve`.
type serveProcess struct {
	cmd  *exec.Cmd
	addr string
	// exited is closed when the process has been waited for.
	exited chan struct{}
	err    error
}

// listeningLine matches the broker's "broker listening" log line.
var listeningLine = regexp.MustCompile(`broker listening: addr=(\S+)`)

// startServe runs `tripod serve` with args and waits until it listens.
// The process is killed, if still running, when the test ends.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(tripodBin, append([]string{"serve"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("stderr pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tripod serve: %v", err)
	}
	p := &serveProcess{cmd: cmd, exited: make(chan struct{})}
	addrC := make(chan string, 1)
	go func() {
		// The scanner ends when the process exits and the pipe closes.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log("tripod: " + line)
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				select {
				case addrC <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	select {
	case p.addr = <-addrC:
	case <-p.exited:
		t.Fatalf("tripod serve exited before listening: %v", p.err)
	case <-time.After(60 * time.Second):
		t.Fatalf("tripod serve did not report its address within 60s")
	}
	return p
}

// TestServeSurvivesSIGKILL runs `tripod serve` as a process, produces
// 10 000 records with acks=1, kills the process with SIGKILL and restarts
// it on the same data directory: every record is served again and new
// records continue at offset 10 000.
func TestServeSurvivesSIGKILL(t *testing.T) {
	const (
		topic = "survivor"
		total = 10_000
	)
	dataDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := startServe(t, "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(first.addr),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	var records []*kgo.Record
	for i := range total {
		records = append(records, &kgo.Record{Value: []byte("record-" + strconv.Itoa(i))})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	producer.Close()

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-first.exited

	second := startServe(t, "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(second.addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	defer consumer.Close()
	seen := 0
	for seen < total {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records after the restart", seen, total)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			want := "record-" + strconv.Itoa(int(r.Offset))
			if r.Offset != int64(seen) || string(r.Value) != want {
				t.Fatalf("got offset %d value %q, want offset %d value %q", r.Offset, r.Value, seen, want)
			}
			seen++
		})
	}

	producer, err = kgo.NewClient(
		kgo.SeedBrokers(second.addr),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
	)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer producer.Close()
	res, err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("after restart")}).First()
	if err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
	if res.Offset != total {
		t.Fatalf("produce after restart: got offset %d, want %d", res.Offset, total)
	}
	fetches := consumer.PollRecords(ctx, 1)
	if recs := fetches.Records(); len(recs) != 1 || recs[0].Offset != total || string(recs[0].Value) != "after restart" {
		t.Fatalf("fetch after restart: got %d records %v, want %q at %d", len(recs), recs, "after restart", total)
	}

	// SIGTERM closes the broker cleanly: exit status 0.
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sigterm: %v", err)
	}
	select {
	case <-second.exited:
		if second.err != nil {
			t.Fatalf("tripod serve after SIGTERM: %v, want a clean exit", second.err)
		}
	case <-ctx.Done():
		t.Fatalf("tripod serve did not exit after SIGTERM")
	}
}

// TestServeRefusesBadSettings runs `tripod serve` with bad settings: it
// exits non-zero and its message names the key.
func TestServeRefusesBadSettings(t *testing.T) {
	propsFile := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(propsFile, []byte("# a comment\nnum.partitions = 0\n"), 0o644); err != nil {
		t.Fatalf("write properties: %v", err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"segment bytes not a number", []string{"--set", "log.segment.bytes=abc"}, "log.segment.bytes"},
		{"negative request size", []string{"--set", "socket.request.max.bytes=-5"}, "socket.request.max.bytes"},
		{"unknown key", []string{"--set", "log.segmnet.bytes=1"}, "log.segmnet.bytes"},
		{"not key=value", []string{"--set", "num.partitions"}, "num.partitions"},
		{"bad value in the file", []string{"--config", propsFile}, "num.partitions"},
		{"bad boolean", []string{"--set", "auto.create.topics.enable=maybe"}, "auto.create.topics.enable"},
		{"unknown backend", []string{"--coord", "consul"}, "coordination.backend"},
		{"zk without connect string", []string{"--coord", "zk"}, "zookeeper.connect"},
		{"etcd without endpoints", []string{"--coord", "etcd"}, "etcd.endpoints"},
		{"not among the raft voters", []string{"--raft-voters", "2@127.0.0.1:1,3@127.0.0.1:2"}, "raft.voters"},
		{"bad raft voters", []string{"--raft-voters", "one@here"}, "raft.voters"},
		{"session timeout too short", []string{"--session-timeout", "10ms"}, "session timeout"},
		{"bad imbalance percentage", []string{"--set", "leader.imbalance.per.broker.percentage=101"}, "leader.imbalance.per.broker.percentage"},
		{"unknown security protocol", []string{"--set", "listener.security.protocol.map=PLAINTEXT:TLS"}, "listener.security.protocol.map"},
		{"negative heap floor", []string{"--heap-floor", "-1"}, "--heap-floor"},
		{"SASL listener without mechanisms", []string{"--set", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT"}, "sasl.enabled.mechanisms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, tripodBin, args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("tripod %s kept running: want a refusal", strings.Join(args, " "))
			}
			if err == nil {
				t.Fatalf("tripod %s exited 0, want non-zero", strings.Join(args, " "))
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("got message %q, want one naming %s", stderr.String(), c.want)
			}
		})
	}
}

// TestServeSettingsPrecedence checks that flags beat --set, which beats
// the --config file, which beats the defaults.
func TestServeSettingsPrecedence(t *testing.T) {
	propsFile := filepath.Join(t.TempDir(), "server.properties")
	props := "broker.id=5\nnum.partitions=3\nlog.retention.ms=1000\nlog.roll.ms : 2000\n"
	if err := os.WriteFile(propsFile, []byte(props), 0o644); err != nil {
		t.Fatalf("write properties: %v", err)
	}
	var opts serveOptions
	cmd := newServeCmdWith(&opts)
	if err := cmd.ParseFlags([]string{
		"--config", propsFile,
		"--set", "broker.id=6", "--set", "num.partitions=4",
		"--broker-id", "9",
	}); err != nil {
		t.Fatalf("parse flags: %v", err)
	}
	cfg, err := opts.config(cmd)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if cfg.BrokerID != 9 {
		t.Errorf("broker.id: got %d, want 9 from --broker-id", cfg.BrokerID)
	}
	if cfg.NumPartitions != 4 {
		t.Errorf("num.partitions: got %d, want 4 from --set", cfg.NumPartitions)
	}
	if cfg.LogRetention != time.Second || cfg.LogRoll != 2*time.Second {
		t.Errorf("log.retention.ms, log.roll.ms: got %v, %v, want 1s, 2s from the file", cfg.LogRetention, cfg.LogRoll)
	}
	if cfg.LogDirs[0] != "./data" || cfg.Listeners != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("defaults: got log.dirs %v listeners %s", cfg.LogDirs, cfg.Listeners)
	}
}

// TestServeHelpConfigListsEveryProperty: `tripod serve --help-config`
// lists every property Set accepts, with its default and documentation
// from the broker's property table.
func TestServeHelpConfigListsEveryProperty(t *testing.T) {
	cmd := newServeCmdWith(&serveOptions{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help-config"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("serve --help-config: got %v, want nil", err)
	}
	text := out.String()
	for _, p := range config.PropertyDocs() {
		if !strings.Contains(text, "\n"+p.Name+"=") && !strings.HasPrefix(text, p.Name+"=") {
			t.Errorf("serve --help-config: got no line for %s, want one", p.Name)
		}
	}
	for _, want := range []string{
		"log.segment.bytes=1073741824 (dynamic)\n    bytes of a segment before it rolls; allowed: 14 .. 2147483647\n",
		"ssl.keystore.location=\n    explained in Listeners and TLS (docs/security.md#listeners-and-tls)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("serve --help-config: got no %q, want it", want)
		}
	}
}
