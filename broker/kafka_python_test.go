package broker

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// pythonWith returns a Python 3 that imports module, from Debian's package
// pkg (in /usr/bin/python3's path, which another python3 first on PATH
// may not see). None skips the test, except under CI=true where it fails,
// as a missing kcat does.
func pythonWith(t *testing.T, module, pkg string) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, name+": "+err.Error())
			continue
		}
		if out, err := exec.Command(path, "-c", "import "+module).CombinedOutput(); err != nil {
			tried = append(tried, path+": "+strings.TrimSpace(string(out)))
			continue
		}
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("Python's %s is not installed (CI=true; apt-get install %s): %s", module, pkg, strings.Join(tried, "; "))
	}
	t.Skipf("Python's %s is not installed (apt-get install %s): %s", module, pkg, strings.Join(tried, "; "))
	return ""
}

// kafkaPythonPath returns a Python 3 that imports kafka-python.
func kafkaPythonPath(t *testing.T) string { return pythonWith(t, "kafka", "python3-kafka") }

// TestKafkaPythonACLs runs testdata/kafka_python_acls.py, kafka-python's
// KafkaAdminClient logged in as the super user admin over SASL/PLAIN,
// against a broker with an authorizer: its create_acls, describe_acls and
// delete_acls (CreateAcls, DescribeAcls and DeleteAcls v1) create a
// literal and a prefixed ACL, describe both, delete one and describe the
// other.
func TestKafkaPythonACLs(t *testing.T) {
	python := kafkaPythonPath(t)
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin;User:ANONYMOUS"})
	b := startBroker(t, cfg)
	ctx := testContext(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, python, "testdata/kafka_python_acls.py", b.ListenerAddr("SASL_PLAINTEXT").String(), "admin", "admin-secret")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kafka_python_acls.py: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	var steps []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var step map[string]any
		if err := json.Unmarshal([]byte(line), &step); err != nil {
			t.Fatalf("kafka_python_acls.py printed %q: %v", line, err)
		}
		steps = append(steps, step)
	}
	strs := func(v any) []string {
		var s []string
		for _, x := range v.([]any) {
			s = append(s, x.(string))
		}
		return s
	}
	read := "TOPIC:LITERAL:orders User:alice * READ ALLOW"
	write := "TOPIC:PREFIXED:ord User:alice * WRITE ALLOW"
	if len(steps) != 4 {
		t.Fatalf("kafka_python_acls.py: got %d steps, want 4:\n%s", len(steps), out)
	}
	if got := strs(steps[0]["created"]); !slices.Equal(got, []string{read, write}) || len(steps[0]["failed"].([]any)) != 0 {
		t.Fatalf("create_acls: got %v, want %v and %v created", steps[0], read, write)
	}
	if got := strs(steps[1]["described"]); !slices.Equal(got, []string{read, write}) || steps[1]["error"] != "NoError" {
		t.Fatalf("describe_acls: got %v, want both ACLs", steps[1])
	}
	if got := strs(steps[2]["deleted"]); !slices.Equal(got, []string{read}) {
		t.Fatalf("delete_acls: got %v, want %v", got, read)
	}
	if got := strs(steps[3]["described"]); !slices.Equal(got, []string{write}) {
		t.Fatalf("describe_acls after the deletion: got %v, want %v", got, write)
	}
}
