package bench

import (
	"testing"

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
