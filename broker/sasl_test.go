package broker

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/replica"
)

// plainJAAS is the PLAIN JAAS config of the tests' SASL listeners, as
// Kafka's documentation writes it: the broker's own login (admin) and
// the users admin and alice.
const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";`

// saslConfig is testConfig with a PLAINTEXT listener and a SASL_PLAINTEXT
// one that enables PLAIN (users admin and alice) and both SCRAM
// mechanisms.
func saslConfig(t testing.TB) config.Config {
	t.Helper()
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
	})
	return cfg
}

// saslClient returns a franz-go client of b's SASL_PLAINTEXT listener
// authenticating with m, closed when the test ends.
func saslClient(t *testing.T, b *Broker, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr("SASL_PLAINTEXT").String()), kgo.SASL(m)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new SASL client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// login connects a fresh client with m to b's SASL_PLAINTEXT listener and
// returns the error of its first request, nil once it has authenticated.
func login(ctx context.Context, b *Broker, m sasl.Mechanism) error {
	return loginAt(ctx, b.ListenerAddr("SASL_PLAINTEXT").String(), m)
}

// loginAt is login on the listener at addr.
func loginAt(ctx context.Context, addr string, m sasl.Mechanism) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(rctx, kmsg.NewPtrApiVersionsRequest())
	return err
}

// dialListener opens a raw TCP connection to b's listener of that name.
func dialListener(t *testing.T, b *Broker, name string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.ListenerAddr(name).String(), 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// expectUnanswered fails unless the broker closes nc without sending a
// byte.
func expectUnanswered(t *testing.T, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var buf [1]byte
	n, err := nc.Read(buf[:])
	var ne net.Error
	switch {
	case n > 0:
		t.Fatalf("got an answer, want the connection closed without one")
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("connection still open after the deadline")
	}
}

// handshake sends a SaslHandshake v1 for mechanism on nc and returns its
// answer.
func handshake(t *testing.T, nc net.Conn, mechanism string, corr int32) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, mechanism
	return roundTrip(t, nc, req, corr).(*kmsg.SASLHandshakeResponse)
}

// authenticateToken sends one SaslAuthenticate v2 with token on nc and
// returns its answer.
func authenticateToken(t *testing.T, nc net.Conn, token []byte, corr int32) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, token
	return roundTrip(t, nc, req, corr).(*kmsg.SASLAuthenticateResponse)
}

// errorMessage is a response's error message, or "".
func errorMessage(msg *string) string {
	if msg == nil {
		return ""
	}
	return *msg
}

// TestSASLPlainProducesAndConsumes serves PLAIN on a SASL_PLAINTEXT
// listener: franz-go authenticating as alice creates a topic, produces
// and consumes over it, and the connection's principal is User:alice.
func TestSASLPlainProducesAndConsumes(t *testing.T) {
	b, logs := startLoggedBroker(t, saslConfig(t))
	ctx := testContext(t, time.Minute)
	alice := plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()
	const topic = "over-sasl-plain"
	if resp, err := kadm.NewClient(saslClient(t, b, alice)).CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic over SASL: %v %v", err, resp.Err)
	}
	producer := saslClient(t, b, alice, kgo.DefaultProduceTopic(topic))
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("plain-%d", i))
		if err := producer.ProduceSync(ctx, kgo.StringRecord(want[i])).FirstErr(); err != nil {
			t.Fatalf("produce over SASL: %v", err)
		}
	}
	consumer := saslClient(t, b, alice, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume over SASL: got %v, want %v", got, want)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %v, want %v", got, want)
	}
	if !logged(logs, "SASL authentication succeeded", "mechanism=PLAIN", "principal=User:alice") {
		t.Fatalf("no successful PLAIN authentication of User:alice in the log:\n%s", logs.String())
	}
}

// TestSASLWrongPasswordFailsAndCloses authenticates with a wrong
// password and as an unknown user: franz-go gets
// SASL_AUTHENTICATION_FAILED; on the wire the SaslAuthenticate answer
// says so, the same for both, and the broker then closes the connection.
func TestSASLWrongPasswordFailsAndCloses(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	ctx := testContext(t, time.Minute)
	if err := login(ctx, b, plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("franz-go with a wrong password: got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	for _, token := range []string{"\x00alice\x00wrong", "\x00mallory\x00alice-secret"} {
		nc := dialListener(t, b, "SASL_PLAINTEXT")
		if hs := handshake(t, nc, "PLAIN", 1); hs.ErrorCode != 0 {
			t.Fatalf("handshake: got error %d, want none", hs.ErrorCode)
		}
		resp := authenticateToken(t, nc, []byte(token), 2)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || errorMessage(resp.ErrorMessage) != "Authentication failed: Invalid username or password" {
			t.Fatalf("%q: got error %d %q, want SASL_AUTHENTICATION_FAILED, Invalid username or password", token, resp.ErrorCode, errorMessage(resp.ErrorMessage))
		}
		expectUnanswered(t, nc)
	}
	if err := login(ctx, b, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()); err != nil {
		t.Fatalf("admin with the right password: %v", err)
	}
}

// TestSASLRequestBeforeAuthenticationCloses sends requests on a SASL
// connection that has not authenticated: ApiVersions is answered, as
// clients ask it first; Metadata closes the connection unanswered; a
// frame larger than sasl.server.max.receive.size does too.
func TestSASLRequestBeforeAuthenticationCloses(t *testing.T) {
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"sasl.server.max.receive.size": "1024"})
	b := startBroker(t, cfg)
	nc := dialListener(t, b, "SASL_PLAINTEXT")
	if resp := roundTrip(t, nc, kmsg.NewPtrApiVersionsRequest(), 1).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: got error %d, want none", resp.ErrorCode)
	}
	if _, err := nc.Write(encodeRequest(kmsg.NewPtrMetadataRequest(), 2)); err != nil {
		t.Fatalf("write Metadata: %v", err)
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, strings.Repeat("P", 2000)
	if _, err := nc.Write(encodeRequest(req, 1)); err != nil {
		t.Fatalf("write a large SaslHandshake: %v", err)
	}
	expectUnanswered(t, nc)

	// After authentication the limit is socket.request.max.bytes again.
	alice := saslClient(t, b, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	createTopic(t, b, "large", 1, nil)
	if err := alice.ProduceSync(testContext(t, time.Minute), &kgo.Record{Topic: "large", Value: make([]byte, 4096)}).FirstErr(); err != nil {
		t.Fatalf("produce 4 KiB after authentication: %v", err)
	}
}

// TestSASLHandshakeAnswers covers SaslHandshake's and SaslAuthenticate's
// refusals, as Kafka answers them: an unsupported mechanism is
// UNSUPPORTED_SASL_MECHANISM with the enabled ones listed, then the
// connection closes; SaslAuthenticate before a handshake is
// ILLEGAL_SASL_STATE and closes; on a PLAINTEXT listener, and after an
// authentication when sessions do not expire, both are ILLEGAL_SASL_STATE
// and the connection stays.
func TestSASLHandshakeAnswers(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	enabled := []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

	nc := dialListener(t, b, "SASL_PLAINTEXT")
	hs := handshake(t, nc, "GSSAPI", 1)
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hs.SupportedMechanisms, enabled) {
		t.Fatalf("GSSAPI: got error %d, mechanisms %v, want UNSUPPORTED_SASL_MECHANISM, %v", hs.ErrorCode, hs.SupportedMechanisms, enabled)
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	if resp := authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 1); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate before SaslHandshake: got error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	if hs := handshake(t, nc, "PLAIN", 1); hs.ErrorCode != 0 || !slices.Equal(hs.SupportedMechanisms, enabled) {
		t.Fatalf("PLAIN: got error %d, mechanisms %v, want none, %v", hs.ErrorCode, hs.SupportedMechanisms, enabled)
	}
	if hs := handshake(t, nc, "PLAIN", 2); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("a second SaslHandshake during the exchange: got error %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	handshake(t, nc, "PLAIN", 1)
	if resp := authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 2); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
		t.Fatalf("PLAIN as alice: got error %d %q, lifetime %d, want none, 0", resp.ErrorCode, errorMessage(resp.ErrorMessage), resp.SessionLifetimeMillis)
	}
	if hs := handshake(t, nc, "PLAIN", 3); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake after authentication: got error %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
	}
	if resp := authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 4); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate after authentication: got error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	if md := roundTrip(t, nc, kmsg.NewPtrMetadataRequest(), 5).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
		t.Fatalf("Metadata after authentication: got brokers %v, want 1", md.Brokers)
	}

	nc = dialListener(t, b, "PLAINTEXT")
	if hs := handshake(t, nc, "PLAIN", 1); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: got error %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
	}
	if resp := authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 2); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate on PLAINTEXT: got error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	if resp := roundTrip(t, nc, kmsg.NewPtrApiVersionsRequest(), 3).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions on PLAINTEXT after the refusals: got error %d", resp.ErrorCode)
	}
}

// scramMechanisms are the SCRAM mechanisms with their kadm ids and
// franz-go client mechanisms.
var scramMechanisms = []struct {
	name   string
	kadm   kadm.ScramMechanism
	client func(user, password string) sasl.Mechanism
}{
	{"SCRAM-SHA-256", kadm.ScramSha256, func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }},
	{"SCRAM-SHA-512", kadm.ScramSha512, func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }},
}

// TestSCRAMCredentialsTakeEffectWithoutRestart follows a SCRAM user
// through KIP-554 on one broker, for each mechanism: kadm on the
// PLAINTEXT listener sets bob's credential; DescribeUserScramCredentials
// lists it with its iterations; bob then authenticates on the SASL
// listener (the broker watches the credentials, no restart); a wrong
// password fails with SASL_AUTHENTICATION_FAILED; once the credential is
// deleted, bob's new logins fail and describing him is
// RESOURCE_NOT_FOUND.
func TestSCRAMCredentialsTakeEffectWithoutRestart(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	adm := kadm.NewClient(newClient(t, b))
	for _, m := range scramMechanisms {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t, time.Minute)
			user := "bob-" + strings.ToLower(m.name)
			altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m.kadm, Iterations: 8192, Password: "bob-secret"}})
			if err != nil || altered[user].Err != nil {
				t.Fatalf("set %s's credential: %v %v", user, err, altered[user].Err)
			}
			described, err := adm.DescribeUserSCRAMs(ctx, user)
			if err != nil || described[user].Err != nil {
				t.Fatalf("describe %s: %v %v", user, err, described[user].Err)
			}
			if got, want := described[user].CredInfos, []kadm.CredInfo{{Mechanism: m.kadm, Iterations: 8192}}; !slices.Equal(got, want) {
				t.Fatalf("describe %s: got %v, want %v", user, got, want)
			}
			waitFor(t, ctx, user+" to authenticate", func() bool { return login(ctx, b, m.client(user, "bob-secret")) == nil })
			if err := login(ctx, b, m.client(user, "wrong")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s with a wrong password: got %v, want SASL_AUTHENTICATION_FAILED", user, err)
			}
			if altered, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: m.kadm}}, nil); err != nil || altered[user].Err != nil {
				t.Fatalf("delete %s's credential: %v %v", user, err, altered[user].Err)
			}
			waitFor(t, ctx, user+"'s logins to fail", func() bool {
				return errors.Is(login(ctx, b, m.client(user, "bob-secret")), kerr.SaslAuthenticationFailed)
			})
			if described, err := adm.DescribeUserSCRAMs(ctx, user); err != nil || !errors.Is(described[user].Err, kerr.ResourceNotFound) {
				t.Fatalf("describe %s after the deletion: got %v %v, want RESOURCE_NOT_FOUND", user, err, described[user].Err)
			}
		})
	}
}

// TestSCRAMUnknownUserFailsLikeAWrongPassword runs SCRAM-SHA-256
// exchanges on the wire with xdg-go/scram's client: an unknown user gets
// a server-first message like a known one (a salt that is the same at
// every attempt, 4096 iterations) and fails at the final step with the
// same answer as a wrong password, so the broker does not tell who
// exists; the right password succeeds and its server signature checks.
func TestSCRAMUnknownUserFailsLikeAWrongPassword(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(newClient(t, b))
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-secret"}}); err != nil || altered["carol"].Err != nil {
		t.Fatalf("set carol's credential: %v %v", err, altered["carol"].Err)
	}
	waitFor(t, ctx, "carol to authenticate", func() bool {
		return login(ctx, b, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()) == nil
	})
	// exchange runs one exchange and returns the server-first message
	// and the final answer.
	exchange := func(user, password string) (string, *kmsg.SASLAuthenticateResponse, *xscram.ClientConversation) {
		t.Helper()
		client, err := xscram.SHA256.NewClient(user, password, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := client.NewConversation()
		nc := dialListener(t, b, "SASL_PLAINTEXT")
		if hs := handshake(t, nc, "SCRAM-SHA-256", 1); hs.ErrorCode != 0 {
			t.Fatalf("handshake: error %d", hs.ErrorCode)
		}
		first, _ := conv.Step("")
		resp := authenticateToken(t, nc, []byte(first), 2)
		if resp.ErrorCode != 0 {
			t.Fatalf("%s's client-first message: got error %d %q, want a challenge", user, resp.ErrorCode, errorMessage(resp.ErrorMessage))
		}
		serverFirst := string(resp.SASLAuthBytes)
		final, err := conv.Step(serverFirst)
		if err != nil {
			t.Fatalf("%s: client-final: %v", user, err)
		}
		resp = authenticateToken(t, nc, []byte(final), 3)
		if resp.ErrorCode != 0 {
			expectUnanswered(t, nc)
		}
		return serverFirst, resp, conv
	}
	saltAndIterations := func(serverFirst string) string {
		fields := strings.Split(serverFirst, ",")
		return fields[1] + "," + fields[2]
	}
	unknown1, unknownResp, _ := exchange("nobody", "whatever")
	unknown2, _, _ := exchange("nobody", "other")
	_, wrongResp, _ := exchange("carol", "wrong")
	if saltAndIterations(unknown1) != saltAndIterations(unknown2) || !strings.HasSuffix(unknown1, ",i=4096") {
		t.Fatalf("unknown user's server-first messages %q and %q: want the same salt and i=4096", unknown1, unknown2)
	}
	want := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	for name, resp := range map[string]*kmsg.SASLAuthenticateResponse{"unknown user": unknownResp, "wrong password": wrongResp} {
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || errorMessage(resp.ErrorMessage) != want {
			t.Fatalf("%s: got error %d %q, want SASL_AUTHENTICATION_FAILED %q", name, resp.ErrorCode, errorMessage(resp.ErrorMessage), want)
		}
	}
	_, ok, conv := exchange("carol", "carol-secret")
	if ok.ErrorCode != 0 {
		t.Fatalf("carol: got error %d %q", ok.ErrorCode, errorMessage(ok.ErrorMessage))
	}
	if _, err := conv.Step(string(ok.SASLAuthBytes)); err != nil || !conv.Valid() {
		t.Fatalf("carol: the server-final message %q does not verify: %v", ok.SASLAuthBytes, err)
	}
}

// TestAlterUserScramCredentialsErrors sends AlterUserScramCredentials and
// DescribeUserScramCredentials with every refusal Kafka makes, one user
// each, and checks each user's result.
func TestAlterUserScramCredentialsErrors(t *testing.T) {
	b := startBroker(t, testConfig(t))
	cl := newClient(t, b)
	salt, salted := []byte("0123456789abcdef"), sha256.New().Sum(nil)
	up := func(name string, mechanism int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mechanism, iterations, salt, salted
		return u
	}
	del := func(name string, mechanism int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mechanism
		return d
	}
	noSalt := up("no-salt", 1, 4096)
	noSalt.Salt = nil
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("good", 1, 4096), up("good", 2, 16384), up("few", 1, 4095), up("many", 2, 16385), up("mech", 3, 4096),
		up("", 1, 4096), up("twice", 1, 4096), up("twice", 1, 4096), up("set-and-delete", 2, 4096), noSalt,
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("set-and-delete", 2), del("absent", 1), del("bad-mech", 0)}
	resp := issue[*kmsg.AlterUserSCRAMCredentialsResponse](t, cl, req)
	want := map[string]struct {
		code *kerr.Error
		msg  string
	}{
		"good":           {nil, ""},
		"few":            {kerr.UnacceptableCredential, "Too few iterations"},
		"many":           {kerr.UnacceptableCredential, "Too many iterations"},
		"mech":           {kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"},
		"":               {kerr.UnacceptableCredential, "Username must not be empty"},
		"twice":          {kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"},
		"set-and-delete": {kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"},
		"no-salt":        {kerr.UnacceptableCredential, "Salt must not be empty"},
		"absent":         {kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"},
		"bad-mech":       {kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"},
	}
	got := map[string]bool{}
	for _, r := range resp.Results {
		w, ok := want[r.User]
		if !ok || got[r.User] {
			t.Fatalf("result for %q: unexpected or repeated (results %+v)", r.User, resp.Results)
		}
		got[r.User] = true
		if wantCode := errOrNil(w.code); !errors.Is(kerr.ErrorForCode(r.ErrorCode), wantCode) || errorMessage(r.ErrorMessage) != w.msg {
			t.Errorf("%q: got %v %q, want %v %q", r.User, kerr.ErrorForCode(r.ErrorCode), errorMessage(r.ErrorMessage), wantCode, w.msg)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got results for %v, want one per user of %v", got, want)
	}

	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, name := range []string{"good", "absent", "twice-asked", "twice-asked", ""} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = name
		dreq.Users = append(dreq.Users, u)
	}
	dresp := issue[*kmsg.DescribeUserSCRAMCredentialsResponse](t, cl, dreq)
	var lines []string
	for _, r := range dresp.Results {
		line := fmt.Sprintf("%q %v", r.User, kerr.ErrorForCode(r.ErrorCode))
		for _, c := range r.CredentialInfos {
			line += fmt.Sprintf(" %d:%d", c.Mechanism, c.Iterations)
		}
		lines = append(lines, line)
	}
	wantLines := []string{`"good" <nil> 1:4096 2:16384`, `"absent" ` + kerr.ResourceNotFound.Error(),
		`"twice-asked" ` + kerr.DuplicateResource.Error(), `"" ` + kerr.ResourceNotFound.Error()}
	if !slices.Equal(lines, wantLines) {
		t.Fatalf("describe: got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
	all := issue[*kmsg.DescribeUserSCRAMCredentialsResponse](t, cl, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
	if len(all.Results) != 1 || all.Results[0].User != "good" {
		t.Fatalf("describe all: got %+v, want good only", all.Results)
	}
}

// TestKcatOverSASL proves librdkafka authenticates to tripod: kcat
// produces and consumes with PLAIN and SCRAM-SHA-256 on a SASL_PLAINTEXT
// listener and with SCRAM-SHA-512 on a SASL_SSL one, the SCRAM users set
// through AlterUserScramCredentials without a restart.
func TestKcatOverSASL(t *testing.T) {
	kcat := kcatPath(t)
	ca := newTestCA(t, "kcat SASL CA")
	dir := t.TempDir()
	cfg := saslConfig(t)
	truststore := ca.truststoreFile(t, dir, "ca.pem")
	set(t, &cfg, map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"ssl.keystore.location":                          ca.keystoreFile(t, dir, "broker.pem", pkix.Name{CommonName: "broker"}),
		"ssl.truststore.location":                        truststore,
	})
	b := startBroker(t, cfg)
	ctx := testContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t, b))
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "kcat", Mechanism: kadm.ScramSha256, Password: "kcat-secret"},
		{User: "kcat", Mechanism: kadm.ScramSha512, Password: "kcat-secret"},
	}); err != nil || !altered.Ok() {
		t.Fatalf("set kcat's credentials: %v %v", err, altered.Error())
	}
	waitFor(t, ctx, "kcat's SCRAM credentials to take effect", func() bool {
		return login(ctx, b, scram.Auth{User: "kcat", Pass: "kcat-secret"}.AsSha512Mechanism()) == nil
	})
	cases := []struct {
		listener, mechanism, user, password string
		extra                               []string
	}{
		{"SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", nil},
		{"SASL_PLAINTEXT", "SCRAM-SHA-256", "kcat", "kcat-secret", nil},
		{"SASL_SSL", "SCRAM-SHA-512", "kcat", "kcat-secret", []string{"-X", "ssl.ca.location=" + truststore}},
	}
	for _, c := range cases {
		args := append([]string{"-b", b.ListenerAddr(c.listener).String(), "-X", "security.protocol=" + c.listener,
			"-X", "sasl.mechanisms=" + c.mechanism, "-X", "sasl.username=" + c.user, "-X", "sasl.password=" + c.password}, c.extra...)
		topic := "kcat-" + strings.ToLower(c.mechanism)
		input := "one\ntwo\nthree\n"
		runKcat(t, ctx, kcat, input, append([]string{"-P", "-t", topic}, args...)...)
		if out := runKcat(t, ctx, kcat, "", append([]string{"-C", "-t", topic, "-e", "-o", "beginning", "-q"}, args...)...); out != input {
			t.Fatalf("kcat over %s with %s consumed %q, want %q", c.listener, c.mechanism, out, input)
		}
		wrong := slices.Clone(args)
		wrong[slices.Index(wrong, "sasl.password="+c.password)] = "sasl.password=wrong"
		cmd := runKcatFails(t, ctx, kcat, append([]string{"-L", "-m", "2"}, wrong...)...)
		if !strings.Contains(cmd, "Authentication failed") {
			t.Fatalf("kcat over %s with %s and a wrong password: stderr %q, want an authentication failure", c.listener, c.mechanism, cmd)
		}
	}
}

// TestSCRAMOverSASLSSL serves SCRAM-SHA-512 on a SASL_SSL listener:
// franz-go over TLS, authenticated as a user set through
// AlterUserScramCredentials, produces and consumes, and the TLS
// listener's connections have the SCRAM user as their principal.
func TestSCRAMOverSASLSSL(t *testing.T) {
	ca := newTestCA(t, "SASL_SSL CA")
	dir := t.TempDir()
	cfg := testConfig(t)
	set(t, &cfg, map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"ssl.keystore.location":   ca.keystoreFile(t, dir, "broker.pem", pkix.Name{CommonName: "broker"}),
		"ssl.truststore.location": ca.truststoreFile(t, dir, "ca.pem"),
	})
	b, logs := startLoggedBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	if altered, err := kadm.NewClient(newClient(t, b)).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha512, Password: "erin-secret"}}); err != nil || !altered.Ok() {
		t.Fatalf("set erin's credential: %v %v", err, altered.Error())
	}
	erin := scram.Auth{User: "erin", Pass: "erin-secret"}.AsSha512Mechanism()
	tlsCfg := &tls.Config{RootCAs: ca.pool(), MinVersion: tls.VersionTLS12}
	client := func(opts ...kgo.Opt) *kgo.Client {
		opts = append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr("SASL_SSL").String()), kgo.DialTLSConfig(tlsCfg), kgo.SASL(erin)}, opts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	const topic = "over-sasl-ssl"
	createTopic(t, b, topic, 1, nil)
	waitFor(t, ctx, "erin to produce over SASL_SSL", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return client(kgo.DefaultProduceTopic(topic), kgo.RecordRetries(0)).ProduceSync(rctx, kgo.StringRecord("first")).FirstErr() == nil
	})
	consumer := client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) == 0 {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume over SASL_SSL: nothing")
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "first" {
		t.Fatalf("consumed %v, want [first]", got)
	}
	if !logged(logs, "SASL authentication succeeded", "listener=SASL_SSL", "mechanism=SCRAM-SHA-512", "principal=User:erin") {
		t.Fatalf("no SCRAM-SHA-512 authentication of User:erin on SASL_SSL in the log")
	}
}

// TestSASLReauthentication sets connections.max.reauth.ms: SaslAuthenticate
// tells the client the session's lifetime; franz-go re-authenticates on
// its connection before the session ends and keeps producing; a raw
// connection that does not re-authenticate is closed at its first request
// after the session expired, and one that re-authenticates with another
// mechanism fails.
func TestSASLReauthentication(t *testing.T) {
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"connections.max.reauth.ms": "1500"})
	b, logs := startLoggedBroker(t, cfg)
	ctx := testContext(t, time.Minute)
	createTopic(t, b, "reauth", 1, nil)
	producer := saslClient(t, b, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), kgo.DefaultProduceTopic("reauth"))
	for i := 0; i < 20; i++ {
		if err := producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !logged(logs, "SASL re-authentication succeeded", "principal=User:alice") {
		t.Fatalf("franz-go did not re-authenticate within 4 s of 1.5 s sessions:\n%s", logs.String())
	}

	nc := dialListener(t, b, "SASL_PLAINTEXT")
	handshake(t, nc, "PLAIN", 1)
	resp := authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 2)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1500 {
		t.Fatalf("SaslAuthenticate: got error %d, lifetime %d ms, want none, 1500", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	roundTrip(t, nc, kmsg.NewPtrMetadataRequest(), 3)
	time.Sleep(1600 * time.Millisecond)
	if _, err := nc.Write(encodeRequest(kmsg.NewPtrMetadataRequest(), 4)); err != nil {
		t.Fatalf("write Metadata: %v", err)
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	handshake(t, nc, "PLAIN", 1)
	authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 2)
	if hs := handshake(t, nc, "SCRAM-SHA-256", 3); hs.ErrorCode != 0 {
		t.Fatalf("re-authentication handshake: got error %d, want none", hs.ErrorCode)
	}
	resp = authenticateToken(t, nc, []byte("n,,n=alice,r=abc"), 4)
	if want := "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of mechanism 'PLAIN'"; resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || errorMessage(resp.ErrorMessage) != want {
		t.Fatalf("re-authentication with another mechanism: got %d %q, want SASL_AUTHENTICATION_FAILED %q", resp.ErrorCode, errorMessage(resp.ErrorMessage), want)
	}
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	handshake(t, nc, "PLAIN", 1)
	authenticateToken(t, nc, []byte("\x00alice\x00alice-secret"), 2)
	handshake(t, nc, "PLAIN", 3)
	resp = authenticateToken(t, nc, []byte("\x00admin\x00admin-secret"), 4)
	if want := "Cannot change principals during re-authentication from User.alice: User.admin"; resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || errorMessage(resp.ErrorMessage) != want {
		t.Fatalf("re-authentication as another user: got %d %q, want SASL_AUTHENTICATION_FAILED %q", resp.ErrorCode, errorMessage(resp.ErrorMessage), want)
	}
	expectUnanswered(t, nc)
}

// TestSASLHandshakeV0SendsBareTokens caps franz-go at SaslHandshake v0,
// after which the exchange's tokens are bare size-prefixed frames: PLAIN
// and SCRAM-SHA-512 authenticate and produce; a wrong password closes
// the connection without an answer, as Kafka does in v0.
func TestSASLHandshakeV0SendsBareTokens(t *testing.T) {
	b := startBroker(t, saslConfig(t))
	ctx := testContext(t, time.Minute)
	adm := kadm.NewClient(newClient(t, b))
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha512, Password: "dave-secret"}}); err != nil || !altered.Ok() {
		t.Fatalf("set dave's credential: %v %v", err, altered.Error())
	}
	createTopic(t, b, "v0", 1, nil)
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(saslHandshakeKey, 0)
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha512Mechanism(),
	} {
		waitFor(t, ctx, m.Name()+" over SaslHandshake v0", func() bool {
			cl := saslClient(t, b, m, kgo.MaxVersions(v0), kgo.DefaultProduceTopic("v0"), kgo.RecordRetries(0))
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return cl.ProduceSync(rctx, kgo.StringRecord(m.Name())).FirstErr() == nil
		})
	}

	nc := dialListener(t, b, "SASL_PLAINTEXT")
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 0, "PLAIN"
	if hs := roundTrip(t, nc, req, 1).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatalf("SaslHandshake v0: got error %d", hs.ErrorCode)
	}
	token := []byte("\x00alice\x00wrong")
	if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(token)))); err != nil {
		t.Fatal(err)
	}
	nc.Write(token)
	expectUnanswered(t, nc)

	nc = dialListener(t, b, "SASL_PLAINTEXT")
	roundTrip(t, nc, req, 1)
	token = []byte("\x00alice\x00alice-secret")
	nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
	var size [4]byte
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, size[:]); err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
		t.Fatalf("PLAIN over v0: got answer size %v (%v), want an empty token", size, err)
	}
	if md := roundTrip(t, nc, kmsg.NewPtrMetadataRequest(), 2).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
		t.Fatalf("Metadata after a v0 authentication: got brokers %v", md.Brokers)
	}
}

// TestInterBrokerListenerOverSASL runs two brokers whose controller
// requests and replication go over a SASL_PLAINTEXT listener with PLAIN
// (sasl.mechanism.inter.broker.protocol, the JAAS config's username and
// password), while clients use a PLAINTEXT one: a topic of replication
// factor 2 becomes fully in sync and an acks=all produce succeeds. A
// SCRAM credential set through one broker lets its user log in on the
// other.
func TestInterBrokerListenerOverSASL(t *testing.T) {
	brokers := startSASLInterBrokerCluster(t, nil)
	ctx := testContext(t, 2*time.Minute)
	const topic = "replicated-over-sasl"
	cl := fullyReplicatedTopic(ctx, t, brokers, topic)
	for i := range 5 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d", i))).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	adm := kadm.NewClient(newClient(t, brokers[0]))
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "frank", Mechanism: kadm.ScramSha256, Password: "frank-secret"}}); err != nil || !altered.Ok() {
		t.Fatalf("set frank's credential on broker %d: %v %v", brokers[0].ID(), err, altered.Error())
	}
	other := brokers[1].ListenerAddr("BROKER").String()
	waitFor(t, ctx, "frank to log in on the other broker", func() bool {
		return loginAt(ctx, other, scram.Auth{User: "frank", Pass: "frank-secret"}.AsSha256Mechanism()) == nil
	})
}

// TestSASLConfigErrorsNameTheKey checks that Validate refuses bad SASL
// settings with an error naming the property.
func TestSASLConfigErrorsNameTheKey(t *testing.T) {
	saslListener := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range saslListener {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		props map[string]string
		want  []string
	}{
		{with(nil), []string{"sasl.enabled.mechanisms", "SASL_PLAINTEXT", "GSSAPI"}},
		{with(map[string]string{"sasl.enabled.mechanisms": "PLAIN"}), []string{"listener.name.sasl_plaintext.plain.sasl.jaas.config", "PlainLoginModule"}},
		{with(map[string]string{"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`}),
			[]string{"listener.name.sasl_plaintext.plain.sasl.jaas.config", "not PLAIN's"}},
		{map[string]string{"listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN"}, []string{"listener.name.plaintext.sasl.enabled.mechanisms", "no SASL settings"}},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-256"},
			[]string{"sasl.mechanism.inter.broker.protocol", "inter-broker listener SASL_PLAINTEXT"}},
		{map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
			[]string{"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "username and password"}},
		{map[string]string{"connections.max.reauth.ms": "-1"}, []string{"connections.max.reauth.ms"}},
		{map[string]string{"sasl.server.max.receive.size": "0"}, []string{"sasl.server.max.receive.size"}},
		{map[string]string{"sasl.jaas.config": `com.example.OtherLoginModule required;`}, []string{"sasl.jaas.config", "not supported"}},
	}
	for _, c := range cases {
		cfg := testConfig(t)
		set(t, &cfg, c.props)
		err := cfg.Validate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: Validate: got %v, want an error containing %q", c.props, err, w)
				break
			}
		}
	}
	for key, value := range map[string]string{
		"sasl.enabled.mechanisms": "PLAIN,GSSAPI",
		"sasl.jaas.config":        `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"`,
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule`,
		"listener.name.sasl_plaintext.gssapi.sasl.jaas.config":        `x required;`,
	} {
		cfg := testConfig(t)
		if err := cfg.Set(key, value); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Set %s=%s: got %v, want an error naming the key", key, value, err)
		}
	}
	// SASL settings over DescribeConfigs: the JAAS config is sensitive.
	cfg := saslConfig(t)
	set(t, &cfg, map[string]string{"sasl.jaas.config": plainJAAS})
	b := startBroker(t, cfg)
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeBroker, "1", []string{"sasl.jaas.config", "sasl.enabled.mechanisms"}
	req.Resources = append(req.Resources, res)
	dc := issue[*kmsg.DescribeConfigsResponse](t, newClient(t, b), req)
	for _, c := range dc.Resources[0].Configs {
		switch c.Name {
		case "sasl.jaas.config":
			if c.Value != nil || !c.IsSensitive {
				t.Errorf("DescribeConfigs sasl.jaas.config: got %v sensitive=%v, want hidden", c.Value, c.IsSensitive)
			}
		case "sasl.enabled.mechanisms":
			if c.Value == nil || *c.Value != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
				t.Errorf("DescribeConfigs sasl.enabled.mechanisms: got %v", c.Value)
			}
		}
	}
}

// runKcatFails runs kcat with args, which must fail, and returns its
// stderr.
func runKcatFails(t *testing.T, ctx context.Context, kcat string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcat, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("kcat %s: succeeded, want a failure", strings.Join(args, " "))
	}
	return stderr.String()
}

// TestFollowerConnectionOutlivesSASLSessions runs two brokers whose
// replication goes over a SASL_PLAINTEXT listener with
// connections.max.reauth.ms 1500. A follower fetcher's connection
// (replica.DialPeer, with the broker's own inter-broker settings)
// authenticates, answers requests, and counts itself expired at 90 % of
// the session's lifetime; the broker closes one used past its session,
// which is why a fetcher dials again before then. Replication goes on
// across several sessions: acks=all produces succeed with the ISR whole
// and the follower's log ends where the leader's does.
func TestFollowerConnectionOutlivesSASLSessions(t *testing.T) {
	brokers := startSASLInterBrokerCluster(t, map[string]string{"connections.max.reauth.ms": "1500"})
	ctx := testContext(t, 2*time.Minute)

	start := time.Now()
	conn, err := replica.DialPeer(ctx, brokers[1].ListenerAddr("BROKER").String(), brokers[0].member.PeerDial())
	if err != nil {
		t.Fatalf("dial broker %d's inter-broker listener: %v", brokers[1].ID(), err)
	}
	defer conn.Close()
	// The session began after start and before dialled: the connection
	// counts itself expired 1.35 s after it began.
	dialled := time.Now()
	if early, late := start.Add(1300*time.Millisecond), dialled.Add(1500*time.Millisecond); conn.Expired(early) || !conn.Expired(late) {
		t.Fatalf("a connection of a 1.5 s session: expired 1.3 s after the dial began %v, 1.5 s after it ended %v; want false, true",
			conn.Expired(early), conn.Expired(late))
	}
	kresp, err := conn.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil || len(kresp.(*kmsg.MetadataResponse).Brokers) != 2 {
		t.Fatalf("Metadata on the connection: %v, error %v; want two brokers", kresp, err)
	}
	// The session's lifetime is the behaviour under test: it ended by
	// 1.5 s after the dial.
	time.Sleep(time.Until(dialled.Add(1600 * time.Millisecond)))
	if _, err := conn.Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatalf("a request on a connection past its 1.5 s session was answered; want the broker to close it")
	}

	const topic = "replicated-across-sessions"
	cl := fullyReplicatedTopic(ctx, t, brokers, topic)
	// Three sessions' worth of acks=all writes.
	produced := 0
	for began := time.Now(); time.Since(began) < 4500*time.Millisecond; produced++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d", produced))).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", produced, err)
		}
	}
	_, _, parts := metadataOf(t, brokers[0], topic)
	if len(parts) != 1 || len(parts[0].isr) != 2 {
		t.Fatalf("partition after %d acks=all produces over 4.5 s: %+v, want an ISR of both brokers", produced, parts)
	}
	waitFor(t, ctx, "the follower's log to end where the leader's does", func() bool {
		ends := map[int64]bool{}
		for _, b := range brokers {
			ends[b.replicas.PartitionFor(topic, 0).Log().EndOffset()] = true
		}
		return len(ends) == 1 && ends[int64(produced)]
	})
}

// startSASLInterBrokerCluster starts two brokers whose clients use a
// PLAINTEXT listener and whose controller requests and replication go
// over a SASL_PLAINTEXT one with PLAIN, with the extra properties.
func startSASLInterBrokerCluster(t *testing.T, extra map[string]string) []*Broker {
	t.Helper()
	return startRaftClusterWith(t, 2, func(cfg *config.Config) {
		props := map[string]string{
			"listeners":                                   "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0",
			"listener.security.protocol.map":              "CLIENT:PLAINTEXT,BROKER:SASL_PLAINTEXT",
			"inter.broker.listener.name":                  "BROKER",
			"sasl.enabled.mechanisms":                     "PLAIN,SCRAM-SHA-256",
			"sasl.mechanism.inter.broker.protocol":        "PLAIN",
			"listener.name.broker.plain.sasl.jaas.config": plainJAAS,
		}
		maps.Copy(props, extra)
		set(t, cfg, props)
	})
}

// fullyReplicatedTopic creates topic with one partition on both brokers and
// waits for its ISR to hold both; it returns an acks=all client producing
// to it.
func fullyReplicatedTopic(ctx context.Context, t *testing.T, brokers []*Broker, topic string) *kgo.Client {
	t.Helper()
	cl := newClient(t, brokers[0], kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	waitFor(t, ctx, "the ISR to hold both brokers", func() bool {
		_, _, parts := metadataOf(t, brokers[0], topic)
		return len(parts) == 1 && len(parts[0].isr) == 2
	})
	return cl
}
