package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/security"
)

// SaslAuthenticate v0..v2: one token of a SASL exchange (KIP-152); v1
// adds the session's lifetime (KIP-368), v2 is flexible.
func init() { registerAPI(saslAuthenticateKey, 0, 2, handleSaslAuthenticate) }

// handleSaslAuthenticate takes the next token of the exchange that
// SaslHandshake began and answers the mechanism's reply; the last one
// carries the session's lifetime (connections.max.reauth.ms, 0: no
// limit). A failed exchange is SASL_AUTHENTICATION_FAILED, answered
// after connection.failed.authentication.delay.ms, and closes the
// connection after the answer, as Kafka does. Out of an exchange the
// answer is ILLEGAL_SASL_STATE: after an authentication (or on a
// PLAINTEXT or SSL listener) the connection stays, before a handshake
// it closes.
func handleSaslAuthenticate(ctx context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	ss := &req.conn.sasl
	if !ss.Exchanging() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		if req.conn.IsAuthenticated() && ss.Idle() {
			msg := "SaslAuthenticate request received after successful authentication"
			resp.ErrorMessage = &msg
			return resp, nil, nil
		}
		msg := "Unexpected SaslAuthenticate request during SASL handshake"
		resp.ErrorMessage = &msg
		ss.Fail()
		return b.refuseAuthentication(req, resp, msg)
	}
	answer, lifetime, err := b.sasl.Authenticate(ctx, req.conn, r.SASLAuthBytes)
	if err != nil {
		msg := security.ClientMessage(ss, err)
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		return b.refuseAuthentication(req, resp, fmt.Sprintf("SASL %s failed: %s", ss.What(), msg))
	}
	resp.SASLAuthBytes = answer
	resp.SessionLifetimeMillis = lifetime.Milliseconds()
	return resp, nil, nil
}
