// Package bench is `tripod bench`: produce, which measures throughput and
// latency as kafka-producer-perf-test does, and failover, which fails a
// broker again and again and measures how fast each coordination backend
// recovers. It starts clusters of the tripod binary's `serve` processes,
// or uses the user's; cmd/tripod parses the flags and calls Produce or
// Failover. The server's code must not import it.
package bench

import (
	"fmt"
	"runtime"
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
