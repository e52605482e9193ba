package security

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/xdg-go/scram"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/notify"
)

// Server is the broker's side of SASL (SaslHandshake,
// SaslAuthenticate): PLAIN checks the listener's JAAS users, SCRAM the
// credentials of the coordination backend's security store. The broker
// watches the store and hands each state to SetState, so that
// credentials altered through AlterUserScramCredentials (on any broker)
// take effect without a restart; the same state gives the authorizer its
// ACLs (State). It is safe for concurrent use.
type Server struct {
	store  coord.SecurityStore
	logger hclog.Logger
	// reauth is connections.max.reauth.ms: how long an authentication
	// lasts, 0 for ever.
	reauth time.Duration
	// watch is set when some listener enables a SCRAM mechanism or an
	// authorizer is configured: only then is the security state watched
	// (Watching).
	watch bool
	// decoyKey makes the salts of decoy credentials (decoyCredential).
	decoyKey []byte

	// jwks are the JWKS of the listeners validating signed OAUTHBEARER
	// tokens, kept fresh by Run.
	jwks []*jwks

	// mu guards credentials, the latest security state the watch
	// delivered (nil until the first), and changed, announcing every new
	// state.
	mu          sync.Mutex
	credentials *coord.SecurityState
	changed     notify.Broadcast
}

// NewServer makes the SASL server of a broker whose SASL listeners are
// listeners (nil entries, for PLAINTEXT and SSL listeners, are skipped);
// authorizer says whether an authorizer wants the ACLs watched. It reads
// the security store until the watch hands it a first state.
func NewServer(listeners []*SASLListener, cfg SASLConfig, authorizer bool, store coord.SecurityStore, logger hclog.Logger) *Server {
	s := &Server{store: store, logger: logger, reauth: cfg.ConnectionsMaxReauth, decoyKey: make([]byte, 32), watch: authorizer}
	rand.Read(s.decoyKey)
	for _, l := range listeners {
		if l == nil {
			continue
		}
		if l.Enables(coord.ScramSHA256) || l.Enables(coord.ScramSHA512) {
			s.watch = true
		}
		if l.oauthJWKS != nil {
			l.oauthJWKS.logger = logger.With("listener", l.name)
			s.jwks = append(s.jwks, l.oauthJWKS)
		}
		if l.Enables(MechanismOAuthBearer) && l.OAuthUnsecured() {
			logger.Warn("listener accepts unsecured OAUTHBEARER tokens, which anyone can make: for development only; set sasl.oauthbearer.jwks.endpoint.url to validate signed tokens",
				"listener", l.name)
		}
	}
	return s
}

// Run fetches the JWKS of the listeners validating signed OAUTHBEARER
// tokens, and keeps them fresh, until ctx ends; it returns once every
// goroutine it started has.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, j := range s.jwks {
		wg.Go(func() { j.Run(ctx) })
	}
	wg.Wait()
}

// Watching reports whether the security state (SCRAM credentials and
// ACLs) must be watched: some listener enables SCRAM or an authorizer is
// configured.
func (s *Server) Watching() bool { return s.watch }

// SetState records st, a state the security store's watch delivered,
// unless a newer state is recorded.
func (s *Server) SetState(st *coord.SecurityState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.credentials == nil || st.Version >= s.credentials.Version {
		s.credentials = st
		s.changed.Notify()
	}
}

// State returns the latest security state and a channel closed when a
// newer one is recorded. Before the watch has delivered a state it reads
// the store itself, for at most 10 s.
func (s *Server) State(ctx context.Context) (*coord.SecurityState, <-chan struct{}, error) {
	s.mu.Lock()
	st, changed := s.credentials, s.changed.Next()
	s.mu.Unlock()
	if st != nil {
		return st, changed, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	loaded, err := s.store.LoadSecurity(lctx)
	if err != nil {
		return nil, nil, err
	}
	s.SetState(loaded)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.credentials, s.changed.Next(), nil
}

// credential returns user's credential of mechanism (see State).
func (s *Server) credential(ctx context.Context, user, mechanism string) (coord.ScramCredential, bool, error) {
	st, _, err := s.State(ctx)
	if err != nil {
		return coord.ScramCredential{}, false, err
	}
	c, ok := st.Credential(user, mechanism)
	return c, ok, nil
}

// decoyCredential is the credential an unknown user is challenged with,
// so that the exchange fails at its last step, as a wrong password does,
// and does not tell who exists (RFC 5802 section 5.1): its salt is the
// same at every attempt (an HMAC of the name under a key of this
// process) and its keys match no proof.
func (s *Server) decoyCredential(user, mechanism string) scram.StoredCredentials {
	mac := hmac.New(sha256.New, s.decoyKey)
	mac.Write([]byte(mechanism + "\x00" + user))
	sum := mac.Sum(nil)
	key := make([]byte, scramHashes[mechanism]().Size())
	rand.Read(key)
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(sum[:24]), Iters: ScramMinIterations}, StoredKey: key, ServerKey: key}
}

// saslStep is where a connection is in a SASL exchange.
type saslStep int

const (
	// saslIdle: no exchange in progress: before SaslHandshake, or after
	// an authentication.
	saslIdle saslStep = iota
	// saslExchanging: after a successful SaslHandshake; the exchange's
	// tokens come in SaslAuthenticate requests (handshake v1) or bare
	// (v0, raw).
	saslExchanging
	// saslFailed: the exchange failed; the connection is closing.
	saslFailed
)

// Session is one connection's SASL state; its zero value is a connection
// before any SaslHandshake. Only the connection's reader goroutine
// touches it: SaslHandshake, SaslAuthenticate and bare tokens are handled
// there (they return no later function), and so is the broker's
// admission check.
type Session struct {
	step saslStep
	// raw is set by a SaslHandshake v0: the exchange's tokens are bare
	// size-prefixed frames, not SaslAuthenticate requests.
	raw bool
	// mechanism is the handshake's and exchange the exchange in
	// progress.
	mechanism string
	exchange  saslExchange
	// authMechanism is the mechanism the connection authenticated with,
	// empty before; a later exchange re-authenticates (KIP-368) and must
	// use it again. expires is when the authentication ends (zero:
	// never).
	authMechanism string
	expires       time.Time
}

// What names the exchange in messages, as Kafka does.
func (s *Session) What() string {
	if s.authMechanism != "" {
		return "re-authentication"
	}
	return "authentication"
}

// Exchanging reports whether an exchange begun by a SaslHandshake v1
// waits for its next token in a SaslAuthenticate request.
func (s *Session) Exchanging() bool { return s.step == saslExchanging && !s.raw }

// RawToken reports whether the connection's next frame is a bare SASL
// token (after a SaslHandshake v0) rather than a request.
func (s *Session) RawToken() bool { return s.step == saslExchanging && s.raw }

// Idle reports whether no exchange is in progress and none failed.
func (s *Session) Idle() bool { return s.step == saslIdle }

// Fail fails the exchange: the connection is closing.
func (s *Session) Fail() { s.step = saslFailed }

// Expired reports whether the connection authenticated and its session
// has expired (connections.max.reauth.ms, KIP-368): only SaslHandshake
// and SaslAuthenticate, which re-authenticate it, may then be admitted.
func (s *Session) Expired() bool {
	return !s.expires.IsZero() && !time.Now().Before(s.expires)
}

// Conn is the connection an exchange runs on, as the broker holds it.
// Only the connection's reader goroutine calls Authenticate with it.
type Conn interface {
	// Session returns the connection's SASL session.
	Session() *Session
	// Principal returns who the client is now.
	Principal() Principal
	// Authenticated records that the client authenticated as p.
	Authenticated(p Principal)
	// Describe returns the client's address and the listener's name,
	// for logs.
	Describe() (remote, listener string)
}

// saslExchange is one mechanism's server side of an exchange.
type saslExchange interface {
	// step takes the client's next token and returns the answer and
	// whether the exchange is done, with the client's principal when it
	// succeeded. An *authError's message may be told to the client;
	// other errors are logged only.
	step(ctx context.Context, token []byte) (answer []byte, done bool, principal Principal, err error)
}

// expiringExchange is an exchange whose credential expires (an
// OAUTHBEARER token): the session ends then at the latest.
type expiringExchange interface {
	// expires is when the credential the exchange validated expires,
	// zero for never; valid once the exchange succeeded.
	expires() time.Time
}

// authError is a failed exchange whose reason may be told to the client.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// newExchange starts an exchange of mechanism for a client of l.
func (s *Server) newExchange(l *SASLListener, mechanism string) saslExchange {
	switch mechanism {
	case mechanismPlain:
		return &plainExchange{users: l.plainUsers}
	case MechanismOAuthBearer:
		return &oauthExchange{server: s, validator: l.oauth}
	}
	return &scramExchange{server: s, mechanism: mechanism}
}

// plainExchange is PLAIN's one-step exchange (RFC 4616), checked as
// Kafka's PlainSaslServer does: "[authzid] NUL authcid NUL passwd", the
// authorization id empty or the user's, the password the user's in the
// listener's JAAS config.
type plainExchange struct {
	users map[string]string
}

func (e *plainExchange) step(_ context.Context, token []byte) ([]byte, bool, Principal, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, true, Principal{}, &authError{fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))}
	}
	authzID, user, password := string(parts[0]), string(parts[1]), parts[2]
	switch {
	case user == "":
		return nil, true, Principal{}, &authError{"Authentication failed: username not specified"}
	case len(password) == 0:
		return nil, true, Principal{}, &authError{"Authentication failed: password not specified"}
	case authzID != "" && authzID != user:
		return nil, true, Principal{}, &authError{"Authentication failed: Client requested an authorization id that is different from username"}
	}
	// Hashes of one size compare in constant time whatever the
	// passwords' lengths, and an unknown user costs the same comparison.
	want, known := e.users[user]
	wantSum, gotSum := sha256.Sum256([]byte(want)), sha256.Sum256(password)
	if subtle.ConstantTimeCompare(wantSum[:], gotSum[:]) != 1 || !known {
		return nil, true, Principal{}, &authError{"Authentication failed: Invalid username or password"}
	}
	return []byte{}, true, Principal{Type: "User", Name: user}, nil
}

// scramExchange is a SCRAM exchange (RFC 5802) run by xdg-go/scram in two
// steps: client-first to server-first, client-final to server-final.
type scramExchange struct {
	server    *Server
	mechanism string
	conv      *scram.ServerConversation
	// clientFirst and serverFirst are the first step's messages and
	// credential the credential it challenged with, for
	// repeatedNonceFinal.
	clientFirst, serverFirst string
	credential               scram.StoredCredentials
}

func (e *scramExchange) step(ctx context.Context, token []byte) ([]byte, bool, Principal, error) {
	if e.conv != nil {
		final := string(token)
		answer, ok := e.repeatedNonceFinal(final)
		if !ok {
			var err error
			if answer, err = e.conv.Step(final); err != nil || !e.conv.Valid() {
				return nil, true, Principal{}, fmt.Errorf("%s client-final message of %q: %v", e.mechanism, e.conv.Username(), err)
			}
		} else if answer == "" {
			return nil, true, Principal{}, fmt.Errorf("%s client-final message of %q: invalid proof", e.mechanism, e.conv.Username())
		}
		return []byte(answer), true, Principal{Type: "User", Name: e.conv.Username()}, nil
	}
	// The lookup runs within Step; it keeps a store failure apart from
	// an unknown user, who gets a decoy and fails at the last step.
	var lookupErr error
	srv, err := scramHashes[e.mechanism].NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok, err := e.server.credential(ctx, user, e.mechanism)
		switch {
		case err != nil:
			lookupErr = fmt.Errorf("look up the %s credential of %q: %w", e.mechanism, user, err)
			return scram.StoredCredentials{}, lookupErr
		case !ok || c.Iterations < ScramMinIterations:
			// As Kafka, a credential of too few iterations is refused.
			e.credential = e.server.decoyCredential(user, e.mechanism)
		default:
			e.credential = scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations}, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
		}
		return e.credential, nil
	})
	if err != nil {
		return nil, true, Principal{}, err
	}
	e.conv = srv.NewConversation()
	answer, err := e.conv.Step(string(token))
	switch {
	case lookupErr != nil:
		return nil, true, Principal{}, lookupErr
	case err != nil:
		return nil, true, Principal{}, fmt.Errorf("%s client-first message: %v", e.mechanism, err)
	case e.conv.AuthzID() != "" && e.conv.AuthzID() != e.conv.Username():
		return nil, true, Principal{}, &authError{"Authentication failed: Client requested an authorization id that is different from username"}
	}
	e.clientFirst, e.serverFirst = string(token), answer
	return []byte(answer), false, Principal{}, nil
}

// repeatedNonceFinal checks a client-final message written as librdkafka
// (and so kcat and the Confluent clients) writes it: its nonce is the
// client's nonce followed by the whole nonce of the server-first message,
// which repeats the client's. Kafka accepts that, as it only checks that
// the nonce ends with the server-first one; xdg-go/scram, as RFC 5802,
// wants the nonce itself. ok is false for a message whose nonce is not of
// that form, which the conversation checks. Otherwise the proof is
// verified here as the conversation does (RFC 5802 section 3, the auth
// message made of the messages as sent) and answer is the server-final
// message, or "" for a proof that does not verify.
func (e *scramExchange) repeatedNonceFinal(final string) (answer string, ok bool) {
	gs2, firstBare, cut := cutGS2Header(e.clientFirst)
	clientNonce, serverNonce := scramField(firstBare, "r"), scramField(e.serverFirst, "r")
	fields := strings.Split(final, ",")
	if !cut || len(fields) < 3 || clientNonce == "" || fields[1] != "r="+clientNonce+serverNonce {
		return "", false
	}
	cbind, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(fields[0], "c="))
	if err != nil || !strings.HasPrefix(fields[0], "c=") || string(cbind) != gs2 {
		return "", true
	}
	last := fields[len(fields)-1]
	proof, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(last, "p="))
	if err != nil || !strings.HasPrefix(last, "p=") {
		return "", true
	}
	h := scramHashes[e.mechanism]
	authMessage := firstBare + "," + e.serverFirst + "," + final[:len(final)-len(last)-1]
	clientSignature := hmacOf(h, e.credential.StoredKey, authMessage)
	if len(proof) != len(clientSignature) {
		return "", true
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSignature[i]
	}
	storedKey := h()
	storedKey.Write(clientKey)
	if !hmac.Equal(storedKey.Sum(nil), e.credential.StoredKey) {
		return "", true
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacOf(h, e.credential.ServerKey, authMessage)), true
}

// cutGS2Header splits a client-first message into its GS2 header (flag,
// authorization id and the two commas) and the bare message after it.
func cutGS2Header(clientFirst string) (header, bare string, ok bool) {
	flag, rest, ok1 := strings.Cut(clientFirst, ",")
	authz, bare, ok2 := strings.Cut(rest, ",")
	return flag + "," + authz + ",", bare, ok1 && ok2
}

// scramField returns the value of the attribute key ("r", "s", ...) of a
// SCRAM message, or "".
func scramField(msg, key string) string {
	for field := range strings.SplitSeq(msg, ",") {
		if v, ok := strings.CutPrefix(field, key+"="); ok {
			return v
		}
	}
	return ""
}

// Handshake begins an exchange of mechanism on ss, the session of a
// connection to l (nil on a PLAINTEXT or SSL listener), for a
// SaslHandshake of version v. It returns the answer's error (nil: the
// exchange begins) and whether the connection closes after the answer,
// as Kafka's
// SaslServerAuthenticator and KafkaApis answer:
//   - on a PLAINTEXT or SSL listener, or after an authentication whose
//     session does not expire, ILLEGAL_SASL_STATE, and the connection
//     stays;
//   - during an exchange, ILLEGAL_SASL_STATE, and it closes;
//   - for a mechanism the listener does not enable,
//     UNSUPPORTED_SASL_MECHANISM, and it closes.
//
// After an authentication whose session expires, a handshake begins a
// re-authentication, which must use the same mechanism.
func (s *Server) Handshake(l *SASLListener, ss *Session, v int16, mechanism string) (*kerr.Error, bool) {
	switch {
	case l == nil:
		return kerr.IllegalSaslState, false
	case ss.step != saslIdle:
		ss.step = saslFailed
		return kerr.IllegalSaslState, true
	case ss.authMechanism != "" && ss.expires.IsZero():
		return kerr.IllegalSaslState, false
	case !l.Enables(mechanism):
		ss.step = saslFailed
		return kerr.UnsupportedSaslMechanism, true
	}
	ss.step, ss.raw, ss.mechanism, ss.exchange = saslExchanging, v == 0, mechanism, s.newExchange(l, mechanism)
	return nil, false
}

// Authenticate takes the exchange's next token on cs. It returns the
// answer and, once the exchange succeeded, the session's lifetime (0:
// no limit): connections.max.reauth.ms, shortened to the credential's
// own lifetime when it expires (an OAUTHBEARER token), as Kafka's
// SaslServerAuthenticator does. An error fails the exchange; its message for the client is
// ClientMessage's. SCRAM's first step may read the security store
// (State).
func (s *Server) Authenticate(ctx context.Context, cs Conn, token []byte) (answer []byte, lifetime time.Duration, err error) {
	ss := cs.Session()
	remote, listener := cs.Describe()
	what := ss.What()
	if ss.authMechanism != "" && ss.mechanism != ss.authMechanism {
		ss.step = saslFailed
		return nil, 0, &authError{fmt.Sprintf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", ss.mechanism, ss.authMechanism)}
	}
	exchange := ss.exchange
	answer, done, p, err := exchange.step(ctx, token)
	if err == nil && done && ss.authMechanism != "" && p != cs.Principal() {
		was := cs.Principal()
		err = &authError{fmt.Sprintf("Cannot change principals during re-authentication from %s.%s: %s.%s", was.Type, was.Name, p.Type, p.Name)}
	}
	if err != nil {
		ss.step, ss.exchange = saslFailed, nil
		s.logger.Info("SASL "+what+" failed", "remote", remote, "listener", listener, "mechanism", ss.mechanism, "error", err)
		return nil, 0, err
	}
	if !done {
		return answer, 0, nil
	}
	ss.step, ss.raw, ss.exchange, ss.authMechanism = saslIdle, false, nil, ss.mechanism
	lifetime = s.reauth
	if ee, ok := exchange.(expiringExchange); ok && !ee.expires().IsZero() {
		// A token within the clock skew of its expiry still gets a
		// session, of 1 ms: 0 would tell the client it never ends.
		left := max(time.Until(ee.expires()), time.Millisecond)
		if lifetime == 0 || left < lifetime {
			lifetime = left
		}
	}
	ss.expires = time.Time{}
	if lifetime > 0 {
		ss.expires = time.Now().Add(lifetime)
	}
	cs.Authenticated(p)
	s.logger.Debug("SASL "+what+" succeeded", "remote", remote, "listener", listener, "mechanism", ss.mechanism, "principal", p.String(), "session_lifetime", lifetime)
	return answer, lifetime, nil
}

// ClientMessage is what a failed exchange of ss, failed with err, tells
// the client: the error's own message when it may be told, else Kafka's
// generic one.
func ClientMessage(ss *Session, err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.msg
	}
	// As Kafka: a SCRAM failure's own message could tell whether the
	// user exists, so the client hears only this.
	return fmt.Sprintf("Authentication failed during %s due to invalid credentials with SASL mechanism %s", ss.What(), ss.mechanism)
}
