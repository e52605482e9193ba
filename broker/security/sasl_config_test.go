package security

import (
	"strings"
	"testing"
)

// plainJAAS is a PLAIN JAAS config as Kafka's documentation writes it:
// a broker's own login (admin) and the users admin and alice.
const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";`

// TestParseJAASEntry reads JAAS configs as Kafka's JaasConfig does.
func TestParseJAASEntry(t *testing.T) {
	good := []struct {
		in      string
		module  string
		options map[string]string
	}{
		{plainJAAS, plainLoginModule, map[string]string{"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"}},
		{`org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED;`, scramLoginModule, map[string]string{}},
		{`M optional user_a='single "quoted"' user_b="tab\there \"q\" \101\\" user_c=bare-word_1.2$;`, "M",
			map[string]string{"user_a": `single "quoted"`, "user_b": "tab\there \"q\" A\\", "user_c": "bare-word_1.2$"}},
		{"/* block\n comment */ M sufficient // line comment\n k=\"v;=/ok\" ; // trailing", "M", map[string]string{"k": "v;=/ok"}},
		{`M requisite "quoted key"="v" k2 = v2;`, "M", map[string]string{"quoted key": "v", "k2": "v2"}},
	}
	for _, c := range good {
		e, err := parseJAASEntry("k", c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if e.module != c.module || len(e.options) != len(c.options) {
			t.Errorf("%q: got %s %v, want %s %v", c.in, e.module, e.options, c.module, c.options)
			continue
		}
		for k, v := range c.options {
			if e.options[k] != v {
				t.Errorf("%q: option %s: got %q, want %q", c.in, k, e.options[k], v)
			}
		}
	}
	bad := []struct{ in, want string }{
		{``, "0 login modules"},
		{`M required`, "does not end with ';'"},
		{`M;`, "no control flag"},
		{`M mandatory;`, "control flag"},
		{`M required k;`, "option k has no value"},
		{`M required k=;`, "option k has no value"},
		{`M required; N required;`, "2 login modules"},
		{`/* open`, "not closed"},
		{`= required;`, "login module name expected"},
	}
	for _, c := range bad {
		if _, err := parseJAASEntry("sasl.jaas.config", c.in); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sasl.jaas.config") {
			t.Errorf("%q: got %v, want an error naming sasl.jaas.config with %q", c.in, err, c.want)
		}
	}
}
