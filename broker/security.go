package broker

// This file is the broker's side of package security: the connection's
// part of a SASL exchange, and the authorizer's view of the broker's
// metadata. The security properties are in package config's table.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// Session implements security.Conn: the connection's SASL session.
func (c *connState) Session() *security.Session { return &c.sasl }

// Principal implements security.Conn.
func (c *connState) Principal() security.Principal { return c.principal() }

// Authenticated implements security.Conn: it records that the
// connection's client is p.
func (c *connState) Authenticated(p security.Principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.principalID, c.authenticated = p, true
}

// Describe implements security.Conn.
func (c *connState) Describe() (remote, listener string) { return c.remote, c.listener.Name }

// checkSession is Admit's check of an authenticated connection
// (KIP-368): once its SASL session has expired, only SaslHandshake and
// SaslAuthenticate, which re-authenticate it, are admitted; any other
// request closes the connection.
func (c *connState) checkSession(key int16) error {
	if !c.sasl.Expired() {
		return nil
	}
	switch key {
	case saslHandshakeKey, saslAuthenticateKey:
		return nil
	}
	return fmt.Errorf("%s request after the SASL session expired (connections.max.reauth.ms) on listener %s", kmsg.NameForKey(key), c.listener.Name)
}

// RawSASL reports whether the connection's next frame is a bare SASL
// token (after a SaslHandshake v0) rather than a request.
func (c *connState) RawSASL() bool {
	return c.sasl.RawToken()
}

// rawSASLToken answers a bare token of a SaslHandshake v0 exchange (the
// connection reads one when cs.RawSASL()): the size-prefixed answer, or
// an error that closes the connection once the answers before are
// written, with none of its own, as Kafka does.
func rawSASLToken(ctx context.Context, s *security.Server, cs *connState, token []byte) ([]byte, error) {
	answer, _, err := s.Authenticate(ctx, cs, token)
	if err != nil {
		return nil, fmt.Errorf("%w: SASL %s failed: %s", errAuthenticationFailed, cs.sasl.What(), security.ClientMessage(&cs.sasl, err))
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(answer)), uint32(len(answer)))
	return append(frame, answer...), nil
}

// errAuthenticationFailed ends a connection whose SASL exchange failed:
// its reader stops, the answers before are written, and
// answerFailedAuthentication sends the failure's answer after the delay
// before the connection closes.
var errAuthenticationFailed = fmt.Errorf("%w of a failed SASL authentication, after connection.failed.authentication.delay.ms", network.ErrAnswerThenClose)

// refuseAuthentication is how a SASL handler fails the exchange: resp,
// the answer saying why, waits in the session for
// answerFailedAuthentication, and the error (wrapping
// errAuthenticationFailed, with why) ends the connection.
func (b *Broker) refuseAuthentication(req *request, resp kmsg.Response, why string) (kmsg.Response, laterFunc, error) {
	req.conn.saslFailureAnswer = b.encode(req, resp)
	return nil, nil, fmt.Errorf("%w: %s", errAuthenticationFailed, why)
}

// answerFailedAuthentication ends a connection that failed its SASL
// exchange (errAuthenticationFailed) once the answers before the failure
// are written, as Kafka's broker delays the answer of a failed
// authentication and the close after it (KIP-306): it waits
// connection.failed.authentication.delay.ms, writes the failure's answer,
// and returns, after which the connection closes. A client guessing
// passwords so learns of each failure only after the delay, while the
// connection reads nothing more and other connections go on. The
// broker's closing (ctx) ends the wait at once, without the answer.
func (h connHandler) answerFailedAuthentication(ctx context.Context, conn net.Conn, cs *connState) {
	if d := h.b.cfg.SASL.FailedAuthenticationDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
	answer := cs.saslFailureAnswer
	if answer == nil {
		return
	}
	cs.saslFailureAnswer = nil
	// The connection closes next whether or not the answer got out; the
	// deadline bounds a peer that reads nothing.
	if err := conn.SetWriteDeadline(time.Now().Add(h.b.cfg.ConnectionsMaxIdle)); err == nil {
		_, _ = conn.Write(answer)
	}
	network.PutFrame(answer)
}

// watchSecurity keeps s's security state (SCRAM credentials and ACLs)
// up to date from store until ctx ends or the backend closes; it
// returns at once when neither SCRAM nor an authorizer needs it
// (s.Watching). A failed watch is retried with backoff.
func watchSecurity(ctx context.Context, s *security.Server, store coord.SecurityStore, logger hclog.Logger) {
	if !s.Watching() {
		return
	}
	coord.Follow(ctx, logger, "the security state", store.WatchSecurity, s.SetState)
}

// authzMetadata is the broker's metadata as the authorizer's rules read
// it (security.Metadata).
type authzMetadata struct{ b *Broker }

// TopicName implements security.Metadata.
func (m authzMetadata) TopicName(id [16]byte) (string, bool) {
	t, ok := m.b.cache.TopicByID(id)
	if !ok {
		return "", false
	}
	return t.Name, true
}

// TopicExists implements security.Metadata.
func (m authzMetadata) TopicExists(name string) bool { return m.b.cache.HasTopic(name) }

// AutoCreateTopics implements security.Metadata.
func (m authzMetadata) AutoCreateTopics() bool { return m.b.cfg.AutoCreateTopics }

// CheckTopicName implements security.Metadata.
func (m authzMetadata) CheckTopicName(name string) error { return config.ValidateTopicName(name) }

// TopicNames implements security.Metadata.
func (m authzMetadata) TopicNames() []string {
	topics := m.b.cache.AllTopics()
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	return names
}
