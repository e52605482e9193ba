package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
)

// env holds the tripod binary TestMain builds, whose `tripod bench` the
// process tests run and whose `serve` their clusters run.
var env *cluster.Env

// tripodBin is env's tripod binary.
var tripodBin string

func TestMain(m *testing.M) {
	cluster.RunTests(m, "tripod-bench-test", func(e *cluster.Env) { env, tripodBin = e, e.Binary })
}

// runBench runs `tripod ARGS...` (a bench command) within timeout, logs
// what it printed, fails the test with its standard error if it fails,
// and returns its standard output and standard error.
func runBench(t *testing.T, timeout time.Duration, args ...string) (stdout []byte, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tripodBin, args...)
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	stdout, err := cmd.Output()
	t.Logf("tripod %s:\n%s", strings.Join(args, " "), stdout)
	if err != nil {
		t.Fatalf("tripod %s: %v; stderr:\n%s", strings.Join(args[:min(2, len(args))], " "), err, errBuf.String())
	}
	return stdout, errBuf.String()
}
