package broker

import (
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// acceptChildEnv marks the child process of TestListenerSurvivesEMFILE.
const acceptChildEnv = "TRIPOD_TEST_EMFILE_CHILD"

// TestListenerSurvivesEMFILE runs a broker out of file descriptors: with
// the process's RLIMIT_NOFILE just above what it holds, clients connect
// until the broker's Accept fails with EMFILE; once they hang up, a new
// client is served. The broker runs in a child process of the test
// binary, since the limit is the whole process's.
func TestListenerSurvivesEMFILE(t *testing.T) {
	if os.Getenv(acceptChildEnv) == "1" {
		listenerSurvivesEMFILE(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestListenerSurvivesEMFILE$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), acceptChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child broker out of file descriptors: %v\n%s", err, out)
	}
}

// listenerSurvivesEMFILE is the child's side of TestListenerSurvivesEMFILE.
func listenerSurvivesEMFILE(t *testing.T) {
	b := startBroker(t, testConfig(t))
	addr := b.Addr().String()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count open files: %v", err)
	}
	low := syscall.Rlimit{Cur: uint64(len(fds) + 16), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatalf("setrlimit %d: %v", low.Cur, err)
	}
	var conns []net.Conn
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(b.metrics.acceptErrors) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no accept error after %d connections with RLIMIT_NOFILE %d", len(conns), low.Cur)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conns = append(conns, c)
		} else {
			// Out of descriptors on the dialling side too: pace the
			// retries until the broker's Accept has failed.
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("setrlimit back to %d: %v", old.Cur, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("ApiVersions after the accept errors (%v of them): got %v, want an answer",
			counterValue(b.metrics.acceptErrors), err)
	}
}

// counterValue reads a counter of the broker's metrics.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
