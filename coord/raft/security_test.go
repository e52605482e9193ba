package raft

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/tripodmq/tripod/coord"
)

func testCredential(mechanism string, salt byte) coord.ScramCredential {
	size := 32
	if mechanism == coord.ScramSHA512 {
		size = 64
	}
	return coord.ScramCredential{Mechanism: mechanism, Salt: []byte{salt}, StoredKey: make([]byte, size), ServerKey: make([]byte, size), Iterations: 4096}
}

func testACL(name string, op coord.ACLOperation) coord.ACL {
	return coord.ACL{ResourceType: coord.ACLResourceTopic, ResourceName: name, PatternType: coord.ACLPatternLiteral,
		Principal: "User:alice", Host: "*", Operation: op, Permission: coord.ACLPermissionAllow}
}

// TestFSMSecuritySurvivesSnapshots: security entries change the store and
// its version (an entry that changes nothing leaves the version), delete
// entries return what they removed, a snapshot restores the store and a
// snapshot taken earlier is not changed by later entries, and a snapshot
// written before the store existed restores it empty.
func TestFSMSecuritySurvivesSnapshots(t *testing.T) {
	f := newFSM()
	read, write := testACL("orders", coord.ACLOperationRead), testACL("orders", coord.ACLOperationWrite)
	if res := fsmLog(t, f, 3, 2, command{Type: cmdSetScramCredential, Security: &securityCommand{User: "alice", Credential: new(testCredential(coord.ScramSHA256, 1))}}); res.Err != nil {
		t.Fatalf("set_scram_credential: %v", res.Err)
	}
	if res := fsmLog(t, f, 4, 2, command{Type: cmdCreateACLs, Security: &securityCommand{ACLs: []coord.ACL{read, write, read}}}); res.Err != nil {
		t.Fatalf("create_acls: %v", res.Err)
	}
	if res := fsmLog(t, f, 5, 2, command{Type: cmdCreateACLs, Security: &securityCommand{ACLs: []coord.ACL{write}}}); res.Err != nil || f.securityVersion() != 4 {
		t.Fatalf("create_acls of a stored ACL: got %v and version %d, want nil and version 4 (unchanged)", res.Err, f.securityVersion())
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	readOnly := coord.AnyACL
	readOnly.Operation = coord.ACLOperationRead
	res := fsmLog(t, f, 6, 2, command{Type: cmdDeleteACLs, Security: &securityCommand{Filters: []coord.ACLFilter{readOnly}}})
	if res.Err != nil || !slices.Equal(res.ACLs, []coord.ACL{read}) {
		t.Fatalf("delete_acls of Read: got %v, %v, want [%v]", res.ACLs, res.Err, read)
	}
	res = fsmLog(t, f, 7, 2, command{Type: cmdDeleteScramCredential, Security: &securityCommand{User: "alice", Mechanism: coord.ScramSHA512}})
	if !errors.Is(res.Err, coord.ErrNotFound) {
		t.Fatalf("delete_scram_credential of a mechanism not stored: got %v, want ErrNotFound", res.Err)
	}
	res = fsmLog(t, f, 8, 2, command{Type: cmdCreateACLs, Security: &securityCommand{ACLs: []coord.ACL{{ResourceType: coord.ACLResourceTopic}}}})
	if res.Err == nil || f.securityVersion() != 6 {
		t.Fatalf("create_acls of an invalid ACL: got %v and version %d, want an error and version 6", res.Err, f.securityVersion())
	}

	restored := restoreSnapshot(t, snap)
	got := restored.security()
	if got.Version != 4 || !slices.Equal(got.ACLs, coord.SortACLs([]coord.ACL{read, write})) {
		t.Fatalf("restored from the snapshot before delete_acls: got version %d, ACLs %v, want version 4 and both ACLs", got.Version, got.ACLs)
	}
	if c, ok := got.Credential("alice", coord.ScramSHA256); !ok || c.Salt[0] != 1 {
		t.Fatalf("restored credential of alice: got %+v, %v, want the one set", c, ok)
	}
	res = fsmLog(t, restored, 6, 2, command{Type: cmdDeleteScramCredential, Security: &securityCommand{User: "alice", Mechanism: coord.ScramSHA256}})
	if s := restored.security(); res.Err != nil || len(s.Users) != 0 || s.Version != 6 {
		t.Fatalf("delete of alice's last credential after restore: got %v, users %v, version %d, want no users at version 6", res.Err, s.Users, s.Version)
	}

	old := newFSM()
	if err := old.Restore(io.NopCloser(bytes.NewReader([]byte(`{"topics":{},"brokers":{},"controller_id":-1,"applied":7,"next_producer_id":1000}`)))); err != nil {
		t.Fatalf("Restore of a snapshot without the security store: %v", err)
	}
	if s := old.security(); s.Version != 0 || len(s.Users) != 0 || len(s.ACLs) != 0 {
		t.Fatalf("security store after an old snapshot: got %+v, want empty", s)
	}
	if res := fsmLog(t, old, 8, 2, command{Type: cmdCreateACLs, Security: &securityCommand{ACLs: []coord.ACL{read}}}); res.Err != nil || old.securityVersion() != 8 {
		t.Fatalf("create_acls after an old snapshot: got %v, version %d, want nil and version 8", res.Err, old.securityVersion())
	}
}
