// Package bench is `tripod bench`: produce, which measures throughput and
// latency as kafka-producer-perf-test does; failover, which fails a
// broker again and again and measures how fast each coordination backend
// recovers; txn and migrate; and omb, which runs OpenMessaging Benchmark
// workloads (omb/workloads) and reports publish and end-to-end latency
// as OMB does. It starts clusters of the tripod binary's `serve`
// processes, or uses the user's; cmd/tripod parses the flags and calls
// Produce, Failover, Txn, Migrate or OMB. The server's code must not
// import it.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/tripodmq/tripod/lab"
)

// validateBrokerGoMaxProcs checks --broker-gomaxprocs.
func validateBrokerGoMaxProcs(n int) error {
	if n < 0 || n > 1024 {
		return fmt.Errorf("--broker-gomaxprocs %d: must be between 0 and 1024", n)
	}
	return nil
}

// brokerGoMaxProcs is the GOMAXPROCS the brokers started on this machine
// run with for --broker-gomaxprocs n: n, or for 0 the default they
// inherit, this process's own.
func brokerGoMaxProcs(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// workspace is what a benchmark that starts clusters runs in: the tripod
// binary its brokers run, a temporary directory for their data and logs,
// and the coordination servers its clusters share.
type workspace struct {
	self    string
	root    string
	servers *lab.CoordServers
	// keep keeps root at close; set it when a run fails or loses records.
	keep bool
}

// newWorkspace finds binary (empty: this process), creates out (where
// the results go) and a temporary directory named after prefix.
func newWorkspace(binary, out, prefix string, keep bool) (*workspace, error) {
	self, err := lab.Binary(binary)
	if err != nil {
		return nil, fmt.Errorf("find this binary to run brokers: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("--out %s: %w", out, err)
	}
	root, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("temporary data dir: %w", err)
	}
	return &workspace{self: self, root: root, servers: &lab.CoordServers{Dir: root}, keep: keep}, nil
}

// close stops the servers and removes the data, or says where it is kept.
func (w *workspace) close(errOut io.Writer) {
	w.servers.Close()
	if w.keep {
		fmt.Fprintf(errOut, "brokers' data and logs kept in %s\n", w.root)
		return
	}
	os.RemoveAll(w.root)
}

// writeJSONFlag writes v, indented, to path, the file a benchmark's
// --json names; an empty path writes nothing.
func writeJSONFlag(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--json %s: %w", path, err)
	}
	return nil
}
