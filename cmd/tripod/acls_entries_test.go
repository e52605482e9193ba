package main

import (
	"testing"

	"github.com/tripodmq/tripod/coord"
)

// TestACLsProducerWithTransactionalID checks that `tripod acls add
// --producer --transactional-id` grants, as kafka-acls does, WRITE and
// DESCRIBE on the transactional id beside the topic's producer
// operations, and that a transactional id without --producer is refused
// with --consumer.
func TestACLsProducerWithTransactionalID(t *testing.T) {
	f := &aclFlags{producer: true, topics: []string{"orders"}, transactionalIDs: []string{"billing-tx"}, allowPrincipals: []string{"User:alice"}}
	acls, err := f.entries(coord.ACLPatternLiteral)
	if err != nil {
		t.Fatalf("entries: %v", err)
	}
	got := map[coord.ACLOperation]bool{}
	for _, a := range acls {
		if a.ResourceType == coord.ACLResourceTransactionalID && a.ResourceName == "billing-tx" {
			got[a.Operation] = true
		}
	}
	if len(got) != 2 || !got[coord.ACLOperationWrite] || !got[coord.ACLOperationDescribe] {
		t.Errorf("ACLs on the transactional id: got %v, want Write and Describe", got)
	}
	f = &aclFlags{consumer: true, topics: []string{"orders"}, groups: []string{"g"}, transactionalIDs: []string{"billing-tx"}, allowPrincipals: []string{"User:alice"}}
	if _, err := f.entries(coord.ACLPatternLiteral); err == nil {
		t.Errorf("--consumer with --transactional-id: got no error, want one")
	}
}
