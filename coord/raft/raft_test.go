package raft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/testca"
)

// conformanceSession is the session timeout of the Raft suites. The suite
// wants a crashed controller replaced within the session timeout + 1 s; on
// Raft the controller is the Raft leader, and its replacement is a Raft
// election: a follower notices within two heartbeat timeouts (1 s with the
// harness's 500 ms), and a split vote between the two survivors costs up
// to two election timeouts more per round. With a 2 s session the bound
// was 3 s, and two split rounds on a loaded CI machine missed it (one CI
// run; 2.5 s in one of eight local runs). 3 s leaves room for three
// rounds, as a production session of 6 s does for its default timeouts.
const conformanceSession = 3 * time.Second

// TestConformance runs the coord conformance suite against 3-node embedded
// Raft clusters with fast Raft timeouts and a 3 s session timeout.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.NewRaftHarness(conformanceSession))
}

// TestConformanceWithObservers runs the suite on clusters that also run
// two observers, which join the quorum and count toward no majority.
func TestConformanceWithObservers(t *testing.T) {
	conformance.Run(t, conformance.NewRaftHarnessWithObservers(conformanceSession))
}

// TestConformanceMutualTLS runs the suite on 3-node clusters whose Raft
// transport (Raft and forward RPCs) is mutual TLS with one test CA.
func TestConformanceMutualTLS(t *testing.T) {
	ca := testca.New(t, "raft conformance CA")
	conformance.Run(t, conformance.NewRaftHarness(conformanceSession, func(cfg *coord.Config) {
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
