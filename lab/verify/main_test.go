package verify

import (
	"testing"

	"github.com/tripodmq/tripod/internal/cluster"
)

// env holds the tripod binary TestMain builds, whose `tripod verify` the
// process test runs, and whose `serve` its clusters run.
var env *cluster.Env

// tripodBin is env's tripod binary.
var tripodBin string

func TestMain(m *testing.M) {
	cluster.RunTests(m, "tripod-verify-test", func(e *cluster.Env) { env, tripodBin = e, e.Binary })
}
