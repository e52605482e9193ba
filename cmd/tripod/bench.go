package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// newBenchCmd builds `tripod bench`, the parent of the benchmarks that
// measure a tripod cluster the way its users would.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark a tripod cluster (produce throughput and latency)",
	}
	cmd.AddCommand(newBenchProduceCmd(), newBenchFailoverCmd())
	return cmd
}

// brokerGoMaxProcsUsage is the help of the benchmarks' --broker-gomaxprocs.
const brokerGoMaxProcsUsage = "GOMAXPROCS of each broker the benchmark starts, as a container's CPU limit would set it; 0: Go's default, every CPU this process may use"

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
