package raft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/testca"
)

// TestConformance runs the coord conformance suite against 3-node embedded
// Raft clusters with fast Raft timeouts and a 2 s session timeout.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.NewRaftHarness(2*time.Second))
}

// TestConformanceMutualTLS runs the suite on 3-node clusters whose Raft
// transport (Raft and forward RPCs) is mutual TLS with one test CA.
func TestConformanceMutualTLS(t *testing.T) {
	ca := testca.New(t, "raft conformance CA")
	conformance.Run(t, conformance.NewRaftHarness(2*time.Second, func(cfg *coord.Config) {
		name := fmt.Sprintf("raft-%d", cfg.BrokerID)
		cfg.RaftServerTLS = ca.ServerConfig(t, name, true)
		cfg.RaftClientTLS = ca.ClientConfig(t, name)
	}))
}

// BenchmarkMetadata100k is conformance.BenchMetadata with 100 topics of
// 1 000 partitions.
func BenchmarkMetadata100k(b *testing.B) {
	conformance.BenchMetadata(b, conformance.NewRaftHarness(6*time.Second), 100, 1000)
}

// BenchmarkControllerFailover100k is conformance.BenchControllerFailover
// with 100 topics of 1 000 partitions.
func BenchmarkControllerFailover100k(b *testing.B) {
	conformance.BenchControllerFailover(b, conformance.NewRaftHarness(6*time.Second), 100, 1000)
}
