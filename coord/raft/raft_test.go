package raft_test

import (
	"testing"
	"time"

	"github.com/tripodmq/tripod/conformance"
)

// TestConformance runs the coord conformance suite against 3-node embedded
// Raft clusters with fast Raft timeouts and a 2 s session timeout.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.NewRaftHarness(2*time.Second))
}
