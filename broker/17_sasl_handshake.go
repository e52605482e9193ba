package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake v0..v1: choose a SASL mechanism. After v1 the exchange's
// tokens come in SaslAuthenticate requests (36_sasl_authenticate.go),
// after v0 as bare size-prefixed frames (rawSASLToken).
func init() { registerAPI(saslHandshakeKey, 0, 1, handleSaslHandshake) }

// handleSaslHandshake begins an exchange of the requested mechanism if
// the listener enables it, and lists the listener's mechanisms; the
// refusals are security.Server.Handshake's, and those that close the
// connection answer first, after
// connection.failed.authentication.delay.ms (refuseAuthentication).
func handleSaslHandshake(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if l := req.conn.listener.SASL; l != nil {
		resp.SupportedMechanisms = l.Mechanisms
	}
	refused, closeAfter := b.sasl.Handshake(req.conn.listener.SASL, &req.conn.sasl, r.Version, r.Mechanism)
	if refused != nil {
		resp.ErrorCode = refused.Code
	}
	if closeAfter {
		return b.refuseAuthentication(req, resp, fmt.Sprintf("SaslHandshake for mechanism %q: %s", r.Mechanism, refused.Message))
	}
	return resp, nil, nil
}
