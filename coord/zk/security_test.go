package zk_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// children returns the children of p, failing t when there are none.
func children(t *testing.T, conn *gozk.Conn, p string) []string {
	t.Helper()
	names, _, err := conn.Children(p)
	if err != nil || len(names) == 0 {
		t.Fatalf("children of %s: got %v, %v, want some", p, names, err)
	}
	return names
}

// TestSecurityKafkaLayout checks the security store's znodes as Kafka's
// tools read them: users' SCRAM configs (sanitized names) and their config
// change notifications, literal and prefixed ACL znodes and their change
// notifications; and that what Kafka's tools write (a user config with a
// quota beside the credential, an ACL znode) is loaded and watched, and
// that removing the credential keeps the quota.
func TestSecurityKafkaLayout(t *testing.T) {
	s := server(t)
	root := chroot()
	b := open(t, s.Addr()+root, 6*time.Second, nil)
	conn := raw(t, s.Addr())
	ctx := ctxFor(t, 30*time.Second)

	cred := coord.ScramCredential{Mechanism: coord.ScramSHA256, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32),
		ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 4096}
	if err := b.SetScramCredential(ctx, "alice@example.com", cred); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	user, _ := getJSON(t, conn, root+"/config/users/alice%40example.com")
	want := map[string]any{"version": 1.0, "config": map[string]any{"SCRAM-SHA-256": coord.FormatScramCredential(cred)}}
	if !reflect.DeepEqual(user, want) {
		t.Errorf("/config/users/alice%%40example.com: got %v, want %v", user, want)
	}
	changes := children(t, conn, root+"/config/changes")
	change, _ := getJSON(t, conn, root+"/config/changes/"+changes[0])
	if !strings.HasPrefix(changes[0], "config_change_") || !reflect.DeepEqual(change, map[string]any{"version": 2.0, "entity_path": "users/alice%40example.com"}) {
		t.Errorf("config change %s: got %v, want version 2 and entity_path users/alice%%40example.com", changes[0], change)
	}

	read := coord.ACL{ResourceType: coord.ACLResourceTopic, ResourceName: "orders", PatternType: coord.ACLPatternLiteral,
		Principal: "User:alice", Host: "*", Operation: coord.ACLOperationRead, Permission: coord.ACLPermissionAllow}
	group := coord.ACL{ResourceType: coord.ACLResourceGroup, ResourceName: "app-", PatternType: coord.ACLPatternPrefixed,
		Principal: "User:bob", Host: "10.0.0.1", Operation: coord.ACLOperationDescribeConfigs, Permission: coord.ACLPermissionDeny}
	if err := b.CreateACLs(ctx, []coord.ACL{read, group}); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for p, entry := range map[string]map[string]any{
		root + "/kafka-acl/Topic/orders":                 {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
		root + "/kafka-acl-extended/prefixed/Group/app-": {"principal": "User:bob", "permissionType": "Deny", "operation": "DescribeConfigs", "host": "10.0.0.1"},
	} {
		got, _ := getJSON(t, conn, p)
		if want := map[string]any{"version": 1.0, "acls": []any{entry}}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", p, got, want)
		}
	}
	literal := children(t, conn, root+"/kafka-acl-changes")
	data, _, err := conn.Get(root + "/kafka-acl-changes/" + literal[0])
	if err != nil || !strings.HasPrefix(literal[0], "acl_changes_") || string(data) != "TOPIC:orders" {
		t.Errorf("literal acl change %s: got %q, %v, want TOPIC:orders", literal[0], data, err)
	}
	prefixed := children(t, conn, root+"/kafka-acl-extended-changes")
	extended, _ := getJSON(t, conn, root+"/kafka-acl-extended-changes/"+prefixed[0])
	if want := map[string]any{"version": 1.0, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}; !reflect.DeepEqual(extended, want) {
		t.Errorf("prefixed acl change %s: got %v, want %v", prefixed[0], extended, want)
	}

	// What Kafka's tools write is read and watched.
	watch, err := b.WatchSecurity(ctx)
	if err != nil {
		t.Fatalf("WatchSecurity: %v", err)
	}
	bobCred := cred
	bobCred.Mechanism, bobCred.StoredKey, bobCred.ServerKey = coord.ScramSHA512, bytes.Repeat([]byte{3}, 64), bytes.Repeat([]byte{4}, 64)
	bobConfig, _ := json.Marshal(map[string]any{"version": 1, "config": map[string]string{
		"SCRAM-SHA-512": coord.FormatScramCredential(bobCred), "producer_byte_rate": "1024"}})
	if _, err := conn.Create(root+"/config/users/bob", bobConfig, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatalf("create bob's config as kafka-configs does: %v", err)
	}
	tx := coord.ACL{ResourceType: coord.ACLResourceTransactionalID, ResourceName: "tx-1", PatternType: coord.ACLPatternLiteral,
		Principal: "User:bob", Host: "10.0.0.2", Operation: coord.ACLOperationWrite, Permission: coord.ACLPermissionDeny}
	txNode := `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Deny","operation":"Write","host":"10.0.0.2"}]}`
	if _, err := conn.Create(root+"/kafka-acl/TransactionalId/tx-1", []byte(txNode), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatalf("create an acl znode as kafka-acls does: %v", err)
	}
	waitFor(t, watch, func(st *coord.SecurityState) bool {
		_, ok := st.Credential("bob", coord.ScramSHA512)
		return ok && len(st.MatchingACLs(coord.ACLFilter{ResourceType: coord.ACLResourceTransactionalID,
			PatternType: coord.ACLPatternAny, Operation: coord.ACLOperationAny, Permission: coord.ACLPermissionAny})) == 1
	}, "the watch sending bob's credential and the transactional id ACL")
	st, err := b.LoadSecurity(ctx)
	if err != nil {
		t.Fatalf("LoadSecurity: %v", err)
	}
	if got, ok := st.Credential("bob", coord.ScramSHA512); !ok || !bytes.Equal(got.StoredKey, bobCred.StoredKey) {
		t.Errorf("bob's credential written as Kafka does: got %+v, %v, want it loaded", got, ok)
	}
	if got := st.MatchingACLs(coord.AnyACL); len(got) != 3 || got[len(got)-1] != tx {
		t.Errorf("ACLs with one written as Kafka does: got %v, want read, group and %v", got, tx)
	}

	if err := b.DeleteScramCredential(ctx, "bob", coord.ScramSHA512); err != nil {
		t.Fatalf("DeleteScramCredential(bob): %v", err)
	}
	kept, _ := getJSON(t, conn, root+"/config/users/bob")
	if want := map[string]any{"version": 1.0, "config": map[string]any{"producer_byte_rate": "1024"}}; !reflect.DeepEqual(kept, want) {
		t.Errorf("bob's config after his credential was removed: got %v, want the quota kept: %v", kept, want)
	}
	if err := b.DeleteScramCredential(ctx, "alice@example.com", coord.ScramSHA256); err != nil {
		t.Fatalf("DeleteScramCredential(alice): %v", err)
	}
	if exists, _, err := conn.Exists(root + "/config/users/alice%40example.com"); err != nil || exists {
		t.Errorf("alice's config after her last credential was removed: exists %v, %v, want it gone", exists, err)
	}
	removed, err := b.DeleteACLs(ctx, []coord.ACLFilter{{ResourceType: coord.ACLResourceTopic, PatternType: coord.ACLPatternAny,
		Operation: coord.ACLOperationAny, Permission: coord.ACLPermissionAny}})
	if err != nil || len(removed) != 1 || removed[0] != read {
		t.Fatalf("DeleteACLs(topics): got %v, %v, want [%v]", removed, err, read)
	}
	if exists, _, err := conn.Exists(root + "/kafka-acl/Topic/orders"); err != nil || exists {
		t.Errorf("/kafka-acl/Topic/orders after its last ACL was removed: exists %v, %v, want it gone", exists, err)
	}

	slash := read
	slash.ResourceType, slash.ResourceName = coord.ACLResourceGroup, "team/app"
	if err := b.CreateACLs(ctx, []coord.ACL{slash}); err == nil || !strings.Contains(err.Error(), "resource name") {
		t.Errorf("CreateACLs of a group named team/app: got %v, want an error naming the resource name", err)
	}
}

// TestClientQuotaConvergesWhileUserZNodeIsDeleted: a user's client quota
// is written under the user's znode, which a SCRAM credential delete
// removes when it is empty. With another client deleting the empty user
// znode (and its clients directory) in a loop, setting and removing
// alice's quota for client app still succeeds every time: a write that
// finds its parent gone makes it again.
func TestClientQuotaConvergesWhileUserZNodeIsDeleted(t *testing.T) {
	s := server(t)
	root := chroot()
	b := open(t, s.Addr()+root, 6*time.Second, nil)
	conn := raw(t, s.Addr())
	ctx := ctxFor(t, time.Minute)
	entity := coord.QuotaEntity{User: "alice", ClientID: "app"}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn.Delete(root+"/config/users/alice/clients", -1) // fails unless empty
			conn.Delete(root+"/config/users/alice", -1)
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	for i := range 50 {
		op := coord.ConfigAlteration{Op: coord.ConfigSet, Key: coord.QuotaProducerByteRate, Value: "1024"}
		if i%2 == 1 {
			op = coord.ConfigAlteration{Op: coord.ConfigDelete, Key: coord.QuotaProducerByteRate}
		}
		if _, err := b.AlterClientQuotas(ctx, entity, []coord.ConfigAlteration{op}); err != nil {
			t.Fatalf("alteration %d (%v) of %s: %v", i, op.Op, entity, err)
		}
	}
}
