package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
	"github.com/tripodmq/tripod/broker/producerid"
	"github.com/tripodmq/tripod/broker/security"
)

// connState is the security state of one client connection: the
// listener it arrived on, the client's address, the TLS handshake's
// outcome and who the client is. connHandler.Open makes it once the connection
// is established (after the TLS handshake on an SSL listener) and every
// request of the connection carries it (request.conn), so a handler, the
// admission check before dispatch (Admit) and an authorizer see:
//
//   - the listener's name and security protocol (listener.name,
//     listener.protocol);
//   - the client's host, an IP address as ACLs name hosts (clientHost),
//     and its address for logs (remote);
//   - the principal (principal()): User:ANONYMOUS on PLAINTEXT, on SSL
//     "User:" and the client certificate's subject in RFC 2253 form
//     mapped by ssl.principal.mapping.rules (User:ANONYMOUS without a
//     certificate);
//   - whether the client has authenticated (IsAuthenticated): always on
//     PLAINTEXT and SSL, whose principal is fixed by the handshake; on a
//     SASL listener not until SaslAuthenticate succeeds.
//
// SASL authentication changes the principal and the authenticated flag
// on the connection's reader goroutine while delayed handlers of the same
// connection read them, hence mu.
type connState struct {
	// listener is the listener the connection was accepted on.
	listener *listener
	// remote is the client's address, host:port; clientHost is its IP
	// address.
	remote     string
	clientHost string
	// tls is the TLS connection state after the handshake; nil unless the
	// listener is SSL or SASL_SSL.
	tls *tls.ConnectionState

	mu            sync.Mutex
	principalID   security.Principal
	authenticated bool

	// sasl is the connection's SASL exchange (security.Session); only
	// the connection's reader goroutine touches it.
	sasl security.Session
	// saslFailureAnswer is the encoded answer to the request that failed
	// the exchange, sent only after
	// connection.failed.authentication.delay.ms
	// (answerFailedAuthentication); nil when there is none to send (a
	// bare token of SaslHandshake v0). Only the reader goroutine sets it.
	saslFailureAnswer []byte

	// producerIDs caches the producer ids verified for the connection's
	// principal (broker/producerid).
	producerIDs producerid.Verified

	// txnAppends is closed once the appends of the connection's latest
	// produce that deferred them (to wait for a transaction verification)
	// are done (handleProduce): every produce read while it is open
	// appends after it, so that verifying keeps the order of a producer's
	// pipelined batches.
	txnAppends atomic.Pointer[chan struct{}]

	// mutedUntil is when a client quota's throttle of the connection ends
	// (Unix nanoseconds, 0: none): it reads no request before (KIP-219).
	mutedUntil atomic.Int64
}

// MutedUntil implements network.Conn: the end of the connection's
// throttle (zero: none).
func (c *connState) MutedUntil() time.Time {
	if n := c.mutedUntil.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// mute keeps the connection from reading requests until at least until.
func (c *connState) mute(until time.Time) {
	n := until.UnixNano()
	for {
		old := c.mutedUntil.Load()
		if old >= n || c.mutedUntil.CompareAndSwap(old, n) {
			return
		}
	}
}

// newConnState makes the state of a connection from remote accepted on
// l, with the TLS handshake's state (nil without TLS): its principal is
// the client certificate's (security.Anonymous without one).
func newConnState(l *listener, remote net.Addr, ts *tls.ConnectionState) (*connState, error) {
	c := &connState{listener: l, remote: remote.String(), clientHost: network.HostOf(remote), tls: ts, principalID: security.Anonymous}
	switch l.Protocol {
	case protocolPlaintext, protocolSSL:
		c.authenticated = true
	}
	if ts != nil && len(ts.PeerCertificates) > 0 {
		p, err := security.PrincipalOf(l.mapper, ts.PeerCertificates[0].RawSubject)
		if err != nil {
			return nil, err
		}
		c.principalID = p
	}
	return c, nil
}

// principal returns who the client is.
func (c *connState) principal() security.Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principalID
}

// IsAuthenticated reports whether the client has authenticated (see
// connState).
func (c *connState) IsAuthenticated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authenticated
}

// saslHandshakeKey and saslAuthenticateKey are the SASL APIs' keys.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// Admit is the check every request of the connection passes before its
// handler runs (dispatch): a connection that has not authenticated (a
// SASL one before SaslAuthenticate) may send only ApiVersions,
// SaslHandshake and SaslAuthenticate, as in Kafka; any other request is
// an error that closes it. So is any but those two once an authenticated
// SASL session has expired (connections.max.reauth.ms, checkSession). An
// authorizer checks ACLs after Admit, with the connection's principal,
// listener and clientHost.
func (c *connState) Admit(key int16) error {
	if c.IsAuthenticated() {
		return c.checkSession(key)
	}
	switch key {
	case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return nil
	}
	return fmt.Errorf("%s request before SASL authentication on listener %s", kmsg.NameForKey(key), c.listener.Name)
}

// tlsHandshakeTimeout bounds a TLS handshake (and connections.max.idle.ms
// does too, when shorter).
const tlsHandshakeTimeout = 10 * time.Second

// handshake runs the TLS handshake of a connection accepted on an SSL
// listener, bounded by tlsHandshakeTimeout and ended by ctx.
func (h connHandler) handshake(ctx context.Context, tc *tls.Conn) (*tls.ConnectionState, error) {
	hctx, cancel := context.WithTimeout(ctx, min(tlsHandshakeTimeout, h.b.cfg.ConnectionsMaxIdle))
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, err
	}
	cs := tc.ConnectionState()
	return &cs, nil
}

// closeRaw is a connection whose Close closes the socket under it at
// once: closing a tls.Conn first sends close_notify, which waits for a
// write in progress to a peer that may not be reading.
type closeRaw struct {
	net.Conn
	raw net.Conn
}

func (c closeRaw) Close() error { return c.raw.Close() }

// appendsPending reports whether the appends of the connection's latest
// deferred produce are not done yet (txnAppends).
func (c *connState) appendsPending() bool {
	p := c.txnAppends.Load()
	if p == nil {
		return false
	}
	select {
	case <-*p:
		return false
	default:
		return true
	}
}
