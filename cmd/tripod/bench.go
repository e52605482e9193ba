package main

import "github.com/spf13/cobra"

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
