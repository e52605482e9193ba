// Command tripod is the one tripod binary: serve, dev, topics, reassign, groups,
// quorum, conformance, bench and verify.
package main

import (
	"errors"
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
	root.AddCommand(newServeCmd(), newConformanceCmd(), newDevCmd(), newTopicsCmd(), newReassignCmd(), newGroupsCmd(), newUsersCmd(), newQuotasCmd(), newACLsCmd(), newTransactionsCmd(), newQuorumCmd(), newMigrateCmd(), newBenchCmd(), newVerifyCmd(), newConsoleCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tripod:", err)
		code := 1
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			code = coded.ExitCode()
		}
		os.Exit(code)
	}
}

// exitCodeError is an error that ends the process with its own exit code
// rather than 1 (`tripod verify`: 1 for an anomaly, 2 for a failed run).
type exitCodeError struct {
	code int
	err  error
}

// Error implements error.
func (e *exitCodeError) Error() string { return e.err.Error() }

// Unwrap returns the error it carries.
func (e *exitCodeError) Unwrap() error { return e.err }

// ExitCode returns the process's exit code.
func (e *exitCodeError) ExitCode() int { return e.code }
