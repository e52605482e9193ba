package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"strings"
	"testing"
	"time"
)

// certificateOf makes a self-signed certificate whose subject is
// subject, encoded as a CA encodes the certificates it issues.
func certificateOf(t *testing.T, subject pkix.Name) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return cert
}

// TestPrincipalMappingRules runs Kafka's SslPrincipalMapperTest cases:
// rules that parse, rules that do not, and what a rule set makes of
// subjects.
func TestPrincipalMappingRules(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
		",,RULE://,,,DEFAULT,,",
		"",
	} {
		if _, err := ParsePrincipalMappingRules(rules); err != nil {
			t.Errorf("rules %q: got %v, want them parsed", rules, err)
		}
	}
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		"RULE:^CN=(?=x)/$1/",
	} {
		if _, err := ParsePrincipalMappingRules(rules); err == nil {
			t.Errorf("rules %q: got them parsed, want an error", rules)
		}
	}
	mapper, err := ParsePrincipalMappingRules(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := mapper.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q): got %q, %v, want %q", dn, got, err, want)
		}
	}
	// A comma escaped inside a name (Kafka's testCommaWithWhitespace).
	mapper, err = ParsePrincipalMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	if got, err := mapper.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Errorf(`Name(CN=Tkac\, Adam,...): got %q, %v, want "Tkac\, Adam"`, got, err)
	}
	// Without DEFAULT a subject no rule matches is refused.
	mapper, _ = ParsePrincipalMappingRules("RULE:^CN=(.*)$/$1/")
	if got, err := mapper.Name("OU=x"); err == nil {
		t.Errorf("Name(OU=x) with no DEFAULT rule: got %q, want an error", got)
	}
	// A group reference past the last group is literal, and $1x is
	// group 1 then x.
	mapper, _ = ParsePrincipalMappingRules(`RULE:^CN=(.*)$/$1x$2\/y/`)
	if got, _ := mapper.Name("CN=a"); got != "ax$2/y" {
		t.Errorf(`Name(CN=a) by RULE:^CN=(.*)$/$1x$2\/y/: got %q, want "ax$2/y"`, got)
	}
}

// TestSubjectDNIsJavasRFC2253 prints certificate subjects as Java's
// X500Principal.getName() does: last RDN first, Java's keywords, the
// escapes, multi-valued RDNs and types without a keyword as OID=#hex.
func TestSubjectDNIsJavasRFC2253(t *testing.T) {
	oidEmail := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidDC := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	cases := []struct {
		name pkix.Name
		want string
	}{
		{pkix.Name{CommonName: "admin", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}, Country: []string{"US"}},
			"CN=admin,OU=eng,O=acme,C=US"},
		{pkix.Name{CommonName: ` a+b,c="d";<e>\f#g `}, `CN=\ a\+b\,c\=\"d\"\;\<e\>\\f\#g\ `},
		{pkix.Name{CommonName: "x", Locality: []string{"Paris"}, Province: []string{"IDF"}, StreetAddress: []string{"1 rue"}},
			"CN=x,STREET=1 rue,L=Paris,ST=IDF"},
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{{Type: oidDC, Value: "com"}, {Type: oidDC, Value: "example"},
			{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "svc"}}}, "CN=svc,DC=example,DC=com"},
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "svc"},
			{Type: oidEmail, Value: "a@b"}}}, "1.2.840.113549.1.9.1=#0c03614062,CN=svc"},
	}
	for _, c := range cases {
		cert := certificateOf(t, c.name)
		if got, err := SubjectDN(cert.RawSubject); err != nil || got != c.want {
			t.Errorf("subject %v: got %q, %v, want %q", c.name, got, err, c.want)
		}
	}
	// A multi-valued RDN: CN=a+UID=b.
	rdn := pkix.RDNSequence{{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "a"}, {Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, Value: "b"}}}
	raw, err := asn1.Marshal(rdn)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if got, err := SubjectDN(raw); err != nil || got != "CN=a+UID=b" {
		t.Errorf("multi-valued RDN: got %q, %v, want CN=a+UID=b", got, err)
	}
}
