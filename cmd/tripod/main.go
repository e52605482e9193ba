// Command tripod is the one tripod binary: serve, dev, topics, conformance
// and bench.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "tripod",
		Short:         "tripod: a Kafka-compatible replicated log broker on ZooKeeper, etcd or embedded Raft",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newConformanceCmd(), newDevCmd(), newTopicsCmd(), newBenchCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tripod:", err)
		os.Exit(1)
	}
}
