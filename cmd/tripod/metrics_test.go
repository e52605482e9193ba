package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// metricsLine matches the "metrics listening" log line of `tripod serve`.
var metricsLine = regexp.MustCompile(`metrics listening: addr=(\S+)`)

// startServeWithMetrics runs `tripod serve` with args and waits until it
// logs both its Kafka and its metrics address, which it returns with the
// process and a channel closed once the process has been waited for
// (its exit error in *exitErr). The process is killed, if still running,
// when the test ends.
func startServeWithMetrics(t *testing.T, args ...string) (cmd *exec.Cmd, kafkaAddr, metricsAddr string, exited <-chan struct{}, exitErr *error) {
	t.Helper()
	cmd = exec.Command(tripodBin, append([]string{"serve"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("stderr pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tripod serve: %v", err)
	}
	done := make(chan struct{})
	var waitErr error
	kafkaC, metricsC := make(chan string, 1), make(chan string, 1)
	go func() {
		// The scanner ends when the process exits and the pipe closes.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log("tripod: " + line)
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				select {
				case kafkaC <- m[1]:
				default:
				}
			}
			if m := metricsLine.FindStringSubmatch(line); m != nil {
				select {
				case metricsC <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		waitErr = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	timeout := time.After(60 * time.Second)
	for kafkaAddr == "" || metricsAddr == "" {
		select {
		case kafkaAddr = <-kafkaC:
		case metricsAddr = <-metricsC:
		case <-done:
			t.Fatalf("tripod serve exited before logging its addresses: %v", waitErr)
		case <-timeout:
			t.Fatalf("tripod serve did not log its Kafka and metrics addresses within 60s")
		}
	}
	return cmd, kafkaAddr, metricsAddr, done, &waitErr
}

// scrapeURL GETs a metrics page and returns its body.
func scrapeURL(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("GET " + url + ": status " + resp.Status)
	}
	return string(body), nil
}

// pageValue returns the value of series (a name with its labels, as
// printed) in a metrics page.
func pageValue(page, series string) (float64, bool) {
	for _, line := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestServeMetricsListen runs `tripod serve --metrics-listen 127.0.0.1:0`
// as a process, produces a record with franz-go and scrapes /metrics over
// HTTP: the produce is counted, the broker holds the topic's partition
// and is the active controller. SIGTERM stops the broker and the metrics
// server with it.
func TestServeMetricsListen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, kafkaAddr, metricsAddr, exited, exitErr := startServeWithMetrics(t,
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")

	producer, err := kgo.NewClient(
		kgo.SeedBrokers(kafkaAddr),
		kgo.DefaultProduceTopic("scraped"),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("counted")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	url := "http://" + metricsAddr + "/metrics"
	page, err := scrapeURL(ctx, url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	for _, want := range []struct {
		series string
		min    float64
	}{
		{`tripod_requests_total{api="Produce"}`, 1},
		{`tripod_request_duration_seconds_count{api="Produce"}`, 1},
		{`tripod_partitions`, 1},
		{`tripod_leader_partitions`, 1},
		{`tripod_active_controller`, 1},
		{`tripod_controller_epoch`, 1},
		{`process_resident_memory_bytes`, 1},
	} {
		v, ok := pageValue(page, want.series)
		if !ok || v < want.min {
			t.Errorf("%s: got %v (present %v), want >= %v", want.series, v, ok, want.min)
		}
	}
	if v, ok := pageValue(page, "tripod_offline_partitions"); !ok || v != 0 {
		t.Errorf("tripod_offline_partitions: got %v (present %v), want 0", v, ok)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sigterm: %v", err)
	}
	select {
	case <-exited:
		if *exitErr != nil {
			t.Fatalf("tripod serve after SIGTERM: %v, want a clean exit", *exitErr)
		}
	case <-ctx.Done():
		t.Fatalf("tripod serve did not exit after SIGTERM")
	}
	if _, err := scrapeURL(ctx, url); err == nil {
		t.Fatalf("scrape after exit: got a page, want the metrics server gone")
	}
}

// TestServeRefusesBadMetricsListen checks that a malformed
// --metrics-listen, or one whose port is taken, is refused with a message
// naming the flag.
func TestServeRefusesBadMetricsListen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("take a port: %v", err)
	}
	defer taken.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	serve := exec.CommandContext(ctx, tripodBin, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--metrics-listen", taken.Addr().String())
	serve.Stderr = &stderr
	if err := serve.Run(); err == nil || ctx.Err() != nil {
		t.Fatalf("tripod serve with --metrics-listen on a taken port: got %v, want a non-zero exit", err)
	}
	if !strings.Contains(stderr.String(), "--metrics-listen") {
		t.Fatalf("got message %q, want one naming --metrics-listen", stderr.String())
	}

	for _, bad := range []string{"9100", "127.0.0.1:port", "127.0.0.1:70000", "[::1"} {
		var opts serveOptions
		cmd := newServeCmdWith(&opts)
		if err := cmd.ParseFlags([]string{"--metrics-listen", bad}); err != nil {
			t.Fatalf("parse flags: %v", err)
		}
		_, err := opts.config(cmd)
		if err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
			t.Errorf("--metrics-listen %q: got error %v, want one naming --metrics-listen", bad, err)
		}
	}
}

// TestServePprof checks that --pprof serves the runtime profiles on the
// metrics listener, that without it they are not served, and that --pprof
// without --metrics-listen is refused naming both flags.
func TestServePprof(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, withAddr, _, _ := startServeWithMetrics(t,
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--pprof")
	page, err := scrapeURL(ctx, "http://"+withAddr+"/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatalf("goroutine profile with --pprof: %v", err)
	}
	if !strings.Contains(page, "goroutine profile:") {
		t.Errorf("goroutine profile with --pprof: got %.200q, want a goroutine profile", page)
	}
	if _, err := scrapeURL(ctx, "http://"+withAddr+"/metrics"); err != nil {
		t.Errorf("metrics with --pprof: %v", err)
	}

	_, _, withoutAddr, _, _ := startServeWithMetrics(t,
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	if _, err := scrapeURL(ctx, "http://"+withoutAddr+"/debug/pprof/goroutine?debug=1"); err == nil {
		t.Errorf("goroutine profile without --pprof: got a page, want none")
	}

	var opts serveOptions
	cmd := newServeCmdWith(&opts)
	if err := cmd.ParseFlags([]string{"--pprof"}); err != nil {
		t.Fatalf("parse flags: %v", err)
	}
	if _, err := opts.config(cmd); err == nil || !strings.Contains(err.Error(), "--pprof") || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("--pprof without --metrics-listen: got error %v, want one naming --pprof and --metrics-listen", err)
	}
}

// TestServeHeapFloor checks, through the go_gc_gogc_percent metric, that
// a broker raises GOGC above Go's 100 for its default 64 MiB heap floor
// while its live heap is a few MiB, and that --heap-floor 0 or GOGC in
// the environment leave it at 100.
func TestServeHeapFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The brokers inherit the test's environment: GOGC is set only
	// where a case asks for it.
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	for _, tc := range []struct {
		args   []string
		gogc   string
		raised bool
	}{
		{nil, "", true},
		{[]string{"--heap-floor", "0"}, "", false},
		{nil, "100", false},
	} {
		if tc.gogc != "" {
			os.Setenv("GOGC", tc.gogc)
		}
		args := append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, tc.args...)
		_, _, metricsAddr, _, _ := startServeWithMetrics(t, args...)
		os.Unsetenv("GOGC")
		page, err := scrapeURL(ctx, "http://"+metricsAddr+"/metrics")
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		gogc, ok := pageValue(page, "go_gc_gogc_percent")
		if !ok {
			t.Fatalf("no go_gc_gogc_percent in the metrics")
		}
		if raised := gogc > 100; raised != tc.raised {
			t.Errorf("tripod serve %v with GOGC=%q in the environment: GOGC %v, want it raised above 100: %v", tc.args, tc.gogc, gogc, tc.raised)
		}
	}
}
