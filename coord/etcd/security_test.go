package etcd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/faultnet"
)

// TestSecurityKeysAndWatchAcrossCompaction: the store's keys are one per
// credential and per ACL under <prefix>/security/, in Kafka's formats; a
// watcher cut off while etcd compacts the revisions it missed reloads the
// store when it is back, and never sends an older Version.
func TestSecurityKeysAndWatchAcrossCompaction(t *testing.T) {
	// A prefix of its own for every run, as the embedded etcd outlives one.
	prefix := fmt.Sprintf("/sec-%d", time.Now().UnixNano())
	writer := open(t, prefix, 1, nil)
	fn := faultnet.New()
	watching := open(t, prefix, 2, fn)
	ctx := ctxFor(t, 30*time.Second)

	cred := coord.ScramCredential{Mechanism: coord.ScramSHA512, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 64),
		ServerKey: bytes.Repeat([]byte{2}, 64), Iterations: 8192}
	if err := writer.SetScramCredential(ctx, "ops/bot", cred); err != nil {
		t.Fatalf("SetScramCredential: %v", err)
	}
	read := coord.ACL{ResourceType: coord.ACLResourceTransactionalID, ResourceName: "tx/1", PatternType: coord.ACLPatternPrefixed,
		Principal: "User:ops/bot", Host: "*", Operation: coord.ACLOperationDescribe, Permission: coord.ACLPermissionAllow}
	if err := writer.CreateACLs(ctx, []coord.ACL{read}); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	resp, err := writer.Client().Get(ctx, prefix+"/security/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	want := map[string]string{
		prefix + "/security/scram/ops/bot/SCRAM-SHA-512": coord.FormatScramCredential(cred),
		prefix + "/security/acls/prefixed/TransactionalId/tx%2F1/User:ops%2Fbot/%2A/Describe/Allow": `{"version":1,"resourceType":"TransactionalId",` +
			`"name":"tx/1","patternType":"Prefixed","principal":"User:ops/bot","permissionType":"Allow","operation":"Describe","host":"*"}`,
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("keys under %s/security/: got %s, want %s", prefix, g, w)
	}

	ch, err := watching.WatchSecurity(ctx)
	if err != nil {
		t.Fatalf("WatchSecurity: %v", err)
	}
	first := <-ch
	fn.Cut()
	for i := range 5 {
		a := read
		a.ResourceName = fmt.Sprintf("tx-%d", i)
		if err := writer.CreateACLs(ctx, []coord.ACL{a}); err != nil {
			t.Fatalf("CreateACLs %d: %v", i, err)
		}
	}
	if err := writer.DeleteScramCredential(ctx, "ops/bot", coord.ScramSHA512); err != nil {
		t.Fatalf("DeleteScramCredential: %v", err)
	}
	latest, err := writer.LoadSecurity(ctx)
	if err != nil {
		t.Fatalf("LoadSecurity: %v", err)
	}
	if _, err := writer.Client().Compact(ctx, latest.Version); err != nil {
		t.Fatalf("Compact at %d: %v", latest.Version, err)
	}
	fn.Heal()
	last := first
	for !last.SameContent(latest) {
		select {
		case s, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed early after version %d", last.Version)
			}
			if s.Version < last.Version {
				t.Fatalf("watch sent version %d after %d, want never decreasing", s.Version, last.Version)
			}
			last = s
		case <-ctx.Done():
			t.Fatalf("watch after compaction: got %d ACLs and %d users, want %d ACLs and none", len(last.ACLs), len(last.Users), len(latest.ACLs))
		}
	}
}
