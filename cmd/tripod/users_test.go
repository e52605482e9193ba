package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUsersSetListDelete runs `tripod serve` with a PLAINTEXT listener
// and a SASL_PLAINTEXT one (PLAIN for admin, both SCRAM mechanisms) and
// manages alice's credentials with `tripod users`: set SCRAM-SHA-256 from
// a password file and SCRAM-SHA-512 from a flag; list shows both; the
// CLI itself then authenticates as alice with SCRAM-SHA-512 and as admin
// with PLAIN on the SASL listener, and a wrong password fails; delete
// --mechanism removes one credential, delete without it the rest, and a
// second delete is an error.
func TestUsersSetListDelete(t *testing.T) {
	base := freeBasePort(t)
	plainAddr, saslAddr := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1)
	startServe(t, "--data-dir", t.TempDir(),
		"--set", "listeners=PLAINTEXT://"+plainAddr+",SASL_PLAINTEXT://"+saslAddr,
		"--set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"--set", `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`)
	users := func(args ...string) string {
		t.Helper()
		return runTripod(t, append(append([]string{"users"}, args...), "--bootstrap", plainAddr)...)
	}
	usersFails := func(args ...string) string {
		t.Helper()
		_, stderr := runTripodFails(t, append(append([]string{"users"}, args...), "--bootstrap", plainAddr)...)
		return stderr
	}

	if out := users("list"); out != "" {
		t.Fatalf("list before any credential: got %q, want nothing", out)
	}
	passwordFile := filepath.Join(t.TempDir(), "alice.password")
	if err := os.WriteFile(passwordFile, []byte("alice-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := users("set", "alice", "--password-file", passwordFile); !strings.Contains(out, "set the SCRAM-SHA-256 credential of alice (4096 iterations)") {
		t.Fatalf("set alice SCRAM-SHA-256: got %q", out)
	}
	users("set", "alice", "--mechanism", "scram-sha-512", "--iterations", "8192", "--password", "alice-secret")
	users("set", "bob", "--password", "bob-secret")
	wantRows := [][]string{
		{"USER", "MECHANISM", "ITERATIONS"},
		{"alice", "SCRAM-SHA-256", "4096"}, {"alice", "SCRAM-SHA-512", "8192"}, {"bob", "SCRAM-SHA-256", "4096"},
	}
	if got := table(users("list")); !slices.EqualFunc(got, wantRows, slices.Equal) {
		t.Fatalf("list: got %v, want %v", got, wantRows)
	}
	if got := table(users("list", "bob")); !slices.EqualFunc(got, [][]string{wantRows[0], wantRows[3]}, slices.Equal) {
		t.Fatalf("list bob: got %v", got)
	}
	if stderr := usersFails("list", "carol"); !strings.Contains(stderr, "user carol") || !strings.Contains(stderr, "RESOURCE_NOT_FOUND") {
		t.Fatalf("list carol: stderr %q, want RESOURCE_NOT_FOUND for carol", stderr)
	}

	// The CLI authenticates itself on the SASL listener. Credentials
	// take effect without a restart, but a moment after they are set.
	asAlice := []string{"list", "--bootstrap", saslAddr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice", "--sasl-password", "alice-secret"}
	var out string
	for range 100 {
		cmd := exec.Command(tripodBin, append([]string{"users"}, asAlice...)...)
		if cmdOut, err := cmd.Output(); err == nil {
			out = string(cmdOut)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := table(out); !slices.EqualFunc(got, wantRows, slices.Equal) {
		t.Fatalf("list over SASL as alice: got %v, want %v", got, wantRows)
	}
	runTripod(t, "users", "list", "--bootstrap", saslAddr, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin", "--sasl-password", "admin-secret")
	_, stderr := runTripodFails(t, "users", "list", "--bootstrap", saslAddr, "--timeout", "5s",
		"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "alice", "--sasl-password", "wrong")
	if !strings.Contains(stderr, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("list over SASL with a wrong password: stderr %q, want SASL_AUTHENTICATION_FAILED", stderr)
	}

	if out := users("delete", "alice", "--mechanism", "SCRAM-SHA-256"); !strings.Contains(out, "deleted the SCRAM-SHA-256 credential of alice") {
		t.Fatalf("delete alice SCRAM-SHA-256: got %q", out)
	}
	if got := table(users("list", "alice")); !slices.EqualFunc(got, [][]string{wantRows[0], wantRows[2]}, slices.Equal) {
		t.Fatalf("list alice after deleting SCRAM-SHA-256: got %v", got)
	}
	if stderr := usersFails("delete", "alice", "--mechanism", "SCRAM-SHA-256"); !strings.Contains(stderr, "user alice has no SCRAM-SHA-256 credential") {
		t.Fatalf("delete a deleted credential: stderr %q", stderr)
	}
	users("delete", "alice")
	if stderr := usersFails("delete", "alice"); !strings.Contains(stderr, "user alice has no SCRAM credential") {
		t.Fatalf("delete alice twice: stderr %q", stderr)
	}
	if got := table(users("list")); !slices.EqualFunc(got, [][]string{wantRows[0], wantRows[3]}, slices.Equal) {
		t.Fatalf("list after deleting alice: got %v", got)
	}
}

// TestUsersRefusesBadFlags checks the flags before any broker is asked.
func TestUsersRefusesBadFlags(t *testing.T) {
	addr := closedAddr(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"set", "alice"}, "--password or --password-file"},
		{[]string{"set", "alice", "--password", "x", "--password-file", "f"}, "give one of them"},
		{[]string{"set", "alice", "--password", "x", "--mechanism", "MD5"}, "want SCRAM-SHA-256 or SCRAM-SHA-512"},
		{[]string{"set", "alice", "--password", "x", "--iterations", "1000"}, "between 4096 and 16384"},
		{[]string{"set", "alice", "--password-file", "/nonexistent/file"}, "--password-file"},
		{[]string{"delete", "alice", "--mechanism", "PLAIN"}, "want SCRAM-SHA-256 or SCRAM-SHA-512"},
		{[]string{"list", "--sasl-mechanism", "GSSAPI", "--sasl-username", "u", "--sasl-password", "p"}, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{[]string{"list", "--sasl-mechanism", "PLAIN", "--sasl-password", "p"}, "needs --sasl-username"},
		{[]string{"list", "--sasl-username", "u"}, "need --sasl-mechanism"},
		{[]string{"list", "--tls-ca", "/nonexistent/ca.pem"}, "--tls-ca"},
	}
	for _, c := range cases {
		_, stderr := runTripodFails(t, append(append([]string{"users"}, c.args...), "--bootstrap", addr)...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("tripod users %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, c.want)
		}
	}
}
