package bench

import (
	"fmt"
	"os"
	"testing"

	"github.com/tripodmq/tripod/internal/cluster"
)

// env holds the tripod binary TestMain builds, whose `tripod bench` the
// process tests run and whose `serve` their clusters run.
var env *cluster.Env

// tripodBin is env's tripod binary.
var tripodBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tripod-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		os.Exit(1)
	}
	env, err = cluster.NewEnv(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	tripodBin = env.Binary
	code := m.Run()
	env.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}
