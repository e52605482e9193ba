package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// securedServe starts `tripod serve` with one SASL_PLAINTEXT listener
// (PLAIN for admin, the broker's own login and its super user, and
// alice) and an authorizer, and returns the listener's address.
func securedServe(t *testing.T) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeBasePort(t))
	startServe(t, "--data-dir", t.TempDir(),
		"--set", "listeners=SASL_PLAINTEXT://"+addr,
		"--set", "inter.broker.listener.name=SASL_PLAINTEXT",
		"--set", "sasl.enabled.mechanisms=PLAIN",
		"--set", "sasl.mechanism.inter.broker.protocol=PLAIN",
		"--set", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
		"--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"--set", "super.users=User:admin")
	return addr
}

// login is the flags that make a CLI command log in as user.
func login(addr, user string) []string {
	return []string{"--bootstrap", addr, "--sasl-mechanism", "PLAIN", "--sasl-username", user, "--sasl-password", user + "-secret"}
}

// eventually runs tripod with args until it succeeds and its output
// satisfies ok, or 30 s pass: ACL changes reach the broker's authorizer
// through its watch, a moment after the answer.
func eventually(t *testing.T, ok func(string) bool, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := exec.Command(tripodBin, args...).Output()
		if err == nil && ok(string(out)) {
			return string(out)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("tripod %s: last output %q, error %v", strings.Join(args, " "), out, err)
		case <-tick.C:
		}
	}
}

// TestACLsAddListRemove runs `tripod serve` with an authorizer and
// manages alice's ACLs with `tripod acls` as admin, the super user:
// alice sees no topic until admin grants her Read on it, then lists it
// with `tripod topics` over SASL; she may not list ACLs
// (CLUSTER_AUTHORIZATION_FAILED); remove takes her ACLs away and she
// sees no topic again.
func TestACLsAddListRemove(t *testing.T) {
	addr := securedServe(t)
	admin, alice := login(addr, "admin"), login(addr, "alice")
	run := func(cmd string, args []string, more ...string) string {
		t.Helper()
		return runTripod(t, append(append([]string{cmd}, more...), args...)...)
	}

	run("topics", admin, "create", "orders", "--partitions", "2")
	if out := run("topics", admin, "list"); !strings.Contains(out, "orders") {
		t.Fatalf("admin lists topics: got %q, want orders", out)
	}
	if out := run("topics", alice, "list"); out != "" {
		t.Fatalf("alice lists topics without ACLs: got %q, want nothing", out)
	}
	if out := run("acls", admin, "list"); out != "" {
		t.Fatalf("acls list before any ACL: got %q, want nothing", out)
	}
	header := []string{"RESOURCE-TYPE", "PATTERN-TYPE", "RESOURCE", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"}
	wantRows := [][]string{header,
		{"GROUP", "PREFIXED", "orders-", "User:alice", "*", "READ", "ALLOW"},
		{"TOPIC", "LITERAL", "orders", "User:alice", "*", "DESCRIBE", "ALLOW"},
		{"TOPIC", "LITERAL", "orders", "User:alice", "*", "READ", "ALLOW"},
	}
	out := run("acls", admin, "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "describe", "--topic", "orders")
	if got := table(out); len(got) != 4 || !slices.Equal(got[1], header) {
		t.Fatalf("acls add: got %q, want two ACLs added", out)
	}
	run("acls", admin, "add", "--allow-principal", "User:alice", "--operation", "READ", "--group", "orders-", "--resource-pattern-type", "prefixed")
	if got := table(run("acls", admin, "list")); !slices.EqualFunc(got, wantRows, slices.Equal) {
		t.Fatalf("acls list: got %v, want %v", got, wantRows)
	}
	if got := table(run("acls", admin, "list", "--group", "orders-app", "--resource-pattern-type", "match")); !slices.EqualFunc(got, [][]string{header, wantRows[1]}, slices.Equal) {
		t.Fatalf("acls list --group orders-app --resource-pattern-type match: got %v", got)
	}
	eventually(t, func(out string) bool { return strings.TrimSpace(out) == "orders" }, append([]string{"topics", "list"}, alice...)...)
	if _, stderr := runTripodFails(t, append([]string{"acls", "list"}, alice...)...); !strings.Contains(stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice lists ACLs: stderr %q, want CLUSTER_AUTHORIZATION_FAILED", stderr)
	}
	if _, stderr := runTripodFails(t, append([]string{"acls", "add", "--allow-principal", "User:alice", "--topic", "x"}, alice...)...); !strings.Contains(stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice adds an ACL: stderr %q, want CLUSTER_AUTHORIZATION_FAILED", stderr)
	}

	out = run("acls", admin, "remove", "--topic", "orders", "--allow-principal", "User:alice")
	if got := table(out); len(got) != 4 || !slices.EqualFunc(got[2:], wantRows[2:], slices.Equal) {
		t.Fatalf("acls remove: got %q, want alice's two topic ACLs removed", out)
	}
	if out := run("acls", admin, "remove", "--topic", "orders"); !strings.Contains(out, "no ACL matched") {
		t.Fatalf("acls remove again: got %q, want no ACL matched", out)
	}
	if got := table(run("acls", admin, "list")); !slices.EqualFunc(got, wantRows[:2], slices.Equal) {
		t.Fatalf("acls list after remove: got %v, want %v", got, wantRows[:2])
	}
	eventually(t, func(out string) bool { return out == "" }, append([]string{"topics", "list"}, alice...)...)
	run("groups", admin, "list")
}

// TestACLsRefusesBadFlags checks the flags before any broker is asked.
func TestACLsRefusesBadFlags(t *testing.T) {
	addr := closedAddr(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"add", "--topic", "t"}, "--allow-principal or --deny-principal"},
		{[]string{"add", "--allow-principal", "alice", "--topic", "t"}, "want Type:name"},
		{[]string{"add", "--allow-principal", "User:alice"}, "name the resources"},
		{[]string{"add", "--allow-principal", "User:alice", "--topic", "t", "--operation", "Fly"}, "--operation \"Fly\""},
		{[]string{"add", "--allow-principal", "User:alice", "--topic", "t", "--resource-pattern-type", "any"}, "want literal or prefixed"},
		{[]string{"add", "--allow-principal", "User:alice", "--consumer", "--topic", "t"}, "--consumer needs --group"},
		{[]string{"remove", "--allow-principal", "User:alice"}, "name the resources"},
		{[]string{"list", "--resource-pattern-type", "regex"}, "want literal, prefixed, any or match"},
		{[]string{"list", "--principal", "alice"}, "want Type:name"},
	}
	for _, c := range cases {
		_, stderr := runTripodFails(t, append(append([]string{"acls"}, c.args...), "--bootstrap", addr)...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("tripod acls %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, c.want)
		}
	}
}
