package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestQuotasAlterDescribe runs `tripod serve` and manages quotas with
// `tripod quotas` as with kafka-configs: a user's, a user's client's,
// the default client's and an ip's are set, described as kafka-configs
// prints them, one is deleted, and a bad key is Kafka's INVALID_REQUEST.
func TestQuotasAlterDescribe(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freeBasePort(t))
	startServe(t, "--data-dir", t.TempDir(), "--set", "listeners=PLAINTEXT://"+addr)
	quotas := func(args ...string) string {
		t.Helper()
		return runTripod(t, append(append([]string{"quotas"}, args...), "--bootstrap-server", addr)...)
	}
	if out := quotas("alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"); out != "Completed updating config for user alice.\n" {
		t.Fatalf("alter alice: got %q", out)
	}
	quotas("alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app", "--add-config", "request_percentage=50.5")
	if out := quotas("alter", "--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=1024"); out != "Completed updating default config for clients in the cluster.\n" {
		t.Fatalf("alter the default client: got %q", out)
	}
	quotas("alter", "--ip", "10.0.0.1", "--add-config", "connection_creation_rate=5")
	want := strings.Join([]string{
		"Quota configs for ip '10.0.0.1' are connection_creation_rate=5.0",
		"Quota configs for the default client-id are producer_byte_rate=1024.0",
		"Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
		"Quota configs for user-principal 'alice', client-id 'app' are request_percentage=50.5",
	}, "\n") + "\n"
	if out := quotas("describe"); out != want {
		t.Fatalf("describe: got\n%s\nwant\n%s", out, want)
	}
	if out := quotas("describe", "--entity-type", "users", "--entity-name", "alice"); out != "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n" {
		t.Fatalf("describe alice: got %q", out)
	}
	quotas("alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate")
	if out := quotas("describe", "--user", "alice"); out != "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n" {
		t.Fatalf("describe alice after the delete: got %q", out)
	}
	_, stderr := runTripodFails(t, "quotas", "alter", "--user", "alice", "--add-config", "producer.byte.rate=1", "--bootstrap", addr)
	if !strings.Contains(stderr, "INVALID_REQUEST") || !strings.Contains(stderr, "Invalid configuration key producer.byte.rate") {
		t.Fatalf("a bad key: stderr %q, want INVALID_REQUEST: Invalid configuration key producer.byte.rate", stderr)
	}
}

// TestQuotasRefusesBadFlags checks the flags before any broker is asked.
func TestQuotasRefusesBadFlags(t *testing.T) {
	addr := closedAddr(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"alter", "--add-config", "producer_byte_rate=1"}, "no entity"},
		{[]string{"alter", "--entity-type", "groups", "--entity-name", "g", "--add-config", "a=1"}, "want users, clients or ips"},
		{[]string{"alter", "--entity-type", "users", "--add-config", "a=1"}, "want --entity-name or --entity-default"},
		{[]string{"alter", "--user", "alice"}, "want --add-config or --delete-config"},
		{[]string{"alter", "--user", "alice", "--add-config", "producer_byte_rate"}, "want KEY=NUMBER"},
		{[]string{"alter", "--ip", "10.0.0.1", "--user", "alice", "--add-config", "a=1"}, "not combined"},
	} {
		_, stderr := runTripodFails(t, append(append([]string{"quotas"}, c.args...), "--bootstrap", addr)...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("tripod quotas %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, c.want)
		}
	}
}
