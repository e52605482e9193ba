package replica

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/tripodmq/tripod/broker/network"
)

// A follower's fetcher talks to its leader on a connection of its own
// (PeerConn) rather than through franz-go's client: the client reads
// every answer into a new buffer, and a follower's fetch answers carry
// every byte it replicates, which made more than half of a busy broker's
// allocations and so set how often it collected garbage. A fetcher sends
// one request at a time and is done with an answer before it sends the
// next Fetch, so the connection reads each Fetch answer into one buffer
// it keeps (or into a frame pool's buffer for a large one), and the
// records the answer carries are appended to the log, which copies
// them, before that buffer is read into again.

// PeerDial is how a broker reaches the inter-broker listener of its
// peers: the client id it sends, and the listener's TLS and SASL, if any.
type PeerDial struct {
	ClientID string
	// TLS, when set, is the client side of the inter-broker listener's
	// TLS.
	TLS *tls.Config
	// SASL, when set, authenticates the connection with the
	// inter-broker listener's mechanism.
	SASL sasl.Mechanism
}

const (
	// peerDialTimeout bounds connecting, the TLS handshake, ApiVersions
	// and SASL.
	peerDialTimeout = 5 * time.Second
	// peerRequestOverhead is how long past a request's own wait (a
	// Fetch's MaxWaitMillis) its answer may take before the connection
	// is given up, as franz-go's RequestTimeoutOverhead: a leader that
	// is paused or cut off is noticed.
	peerRequestOverhead = 10 * time.Second
	// peerKeptBuffer is the largest answer buffer a connection keeps
	// between Fetches; a larger one goes back to the frame pools.
	peerKeptBuffer = 1 << 20
	// peerMaxAnswer bounds the size an answer may claim, as franz-go's
	// BrokerMaxReadBytes does (100 MiB): far above a follower's
	// replica.fetch.response.max.bytes.
	peerMaxAnswer = 100 << 20
)

// PeerConn is a connection to a peer broker's inter-broker listener, for
// one goroutine.
type PeerConn struct {
	conn     net.Conn
	clientID string
	// versions holds the peer's highest version of each API key it
	// serves (ApiVersions), -1 for one it does not.
	versions [128]int16
	corr     int32
	// expires is when an authenticated session ends (SASL's
	// SessionLifetimeMillis, KIP-368), zero if never: the connection is
	// not used past it.
	expires time.Time
	// buf holds the last Fetch answer.
	buf []byte
	// out is the request being written.
	out []byte
}

// DialPeer connects to addr as d says: TLS, ApiVersions, then SASL.
func DialPeer(ctx context.Context, addr string, d PeerDial) (*PeerConn, error) {
	ctx, cancel := context.WithTimeout(ctx, peerDialTimeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if d.TLS != nil {
		cfg := d.TLS.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	c := &PeerConn{conn: conn, clientID: d.ClientID}
	for i := range c.versions {
		c.versions[i] = -1
	}
	if err := c.handshake(ctx, addr, d.SASL); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// handshake learns the peer's API versions and authenticates with mech,
// if set.
func (c *PeerConn) handshake(ctx context.Context, addr string, mech sasl.Mechanism) error {
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.Version = 3
	apiVersions.ClientSoftwareName = "tripod"
	apiVersions.ClientSoftwareVersion = "broker"
	c.versions[apiVersions.Key()] = 3
	kresp, err := c.Request(ctx, apiVersions)
	if err != nil {
		return fmt.Errorf("ApiVersions of %s: %w", addr, err)
	}
	c.versions[apiVersions.Key()] = -1
	resp := kresp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ApiVersions of %s: %w", addr, err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey >= 0 && int(k.ApiKey) < len(c.versions) {
			c.versions[k.ApiKey] = k.MaxVersion
		}
	}
	if mech == nil {
		return nil
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	kresp, err = c.Request(ctx, hs)
	if err != nil {
		return fmt.Errorf("SASL handshake with %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(kresp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("SASL handshake with %s (%s): %w", addr, mech.Name(), err)
	}
	if hs.Version < 1 {
		return fmt.Errorf("SASL with %s: it does not serve SaslAuthenticate", addr)
	}
	session, clientWrite, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return fmt.Errorf("SASL %s with %s: %w", mech.Name(), addr, err)
	}
	start := time.Now()
	var lifetime int64
	// As franz-go: write until the challenges are done and nothing is
	// left to write; every SaslAuthenticate has an answer (KIP-152).
	for done := false; !done || len(clientWrite) > 0; {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = clientWrite
		kresp, err := c.Request(ctx, auth)
		if err != nil {
			return fmt.Errorf("SASL %s with %s: %w", mech.Name(), addr, err)
		}
		resp := kresp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SASL %s with %s: %w%s", mech.Name(), addr, err, msg)
		}
		lifetime = resp.SessionLifetimeMillis
		clientWrite = nil
		if !done {
			if done, clientWrite, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return fmt.Errorf("SASL %s with %s: %w", mech.Name(), addr, err)
			}
		}
	}
	if lifetime > 0 {
		// Stop using the connection well before the broker ends the
		// session: at 90 % of it, counted from before the exchange.
		lifetime = min(lifetime, int64(365*24*time.Hour/time.Millisecond))
		c.expires = start.Add(time.Duration(lifetime) * time.Millisecond * 9 / 10)
	}
	return nil
}

// Expired reports whether the connection's authenticated session is
// about to end, so that it is closed and dialled again.
func (c *PeerConn) Expired(now time.Time) bool {
	return !c.expires.IsZero() && !now.Before(c.expires)
}

// Close closes the connection and gives back a buffer from the pools.
func (c *PeerConn) Close() error {
	c.releaseBuffer()
	return c.conn.Close()
}

// releaseBuffer gives a large answer buffer back to the frame pools once
// its answer is done with; a small one is kept for the next.
func (c *PeerConn) releaseBuffer() {
	if cap(c.buf) > peerKeptBuffer {
		network.PutFrame(c.buf)
		c.buf = nil
	}
}

// Request sends req at the highest version both sides serve and reads its
// answer. A Fetch answer's byte fields (the records) alias the
// connection's buffer: they are valid until the next Fetch on it or
// Close. Any error leaves the connection unusable.
func (c *PeerConn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	key := req.Key()
	if int(key) >= len(c.versions) || c.versions[key] < 0 {
		return nil, fmt.Errorf("the peer does not serve API key %d", key)
	}
	version := min(req.MaxVersion(), c.versions[key])
	req.SetVersion(version)
	c.corr++
	corr := c.corr
	// The request header: v2 (with tagged fields) for a flexible
	// request, else v1.
	out := append(c.out[:0], 0, 0, 0, 0)
	out = kbin.AppendInt16(out, key)
	out = kbin.AppendInt16(out, version)
	out = kbin.AppendInt32(out, corr)
	out = kbin.AppendNullableString(out, &c.clientID)
	if req.IsFlexible() {
		out = append(out, 0)
	}
	out = req.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	c.out = out

	wait := time.Duration(0)
	if f, ok := req.(*kmsg.FetchRequest); ok {
		wait = time.Duration(f.MaxWaitMillis) * time.Millisecond
	}
	deadline := time.Now().Add(wait + peerRequestOverhead)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	body, err := c.roundTrip(out, key == kmsg.Fetch.Int16())
	if err != nil {
		if ctx.Err() != nil {
			// The connection may still owe the answer: the caller
			// closes it.
			return nil, fmt.Errorf("request canceled: %w", ctx.Err())
		}
		return nil, err
	}
	r := kbin.Reader{Src: body}
	if got := r.Int32(); got != corr {
		return nil, fmt.Errorf("answer for correlation id %d, want %d", got, corr)
	}
	// The answer header has tagged fields when the request is flexible,
	// except ApiVersions', always v0 (KIP-511).
	if req.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return nil, errors.New("answer shorter than its header")
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if err := resp.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("decode %s answer: %w", kmsg.NameForKey(key), err)
	}
	return resp, nil
}

// roundTrip writes a framed request and reads its answer's frame body,
// into the connection's buffer for a Fetch, else into a new one.
func (c *PeerConn) roundTrip(out []byte, fetch bool) ([]byte, error) {
	if _, err := c.conn.Write(out); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > peerMaxAnswer {
		return nil, fmt.Errorf("answer of %d bytes", n)
	}
	var body []byte
	if fetch {
		if cap(c.buf) < int(n) {
			if c.buf != nil {
				network.PutFrame(c.buf)
			}
			c.buf = network.GetFrame(int(n))
		}
		body = c.buf[:n]
	} else {
		body = make([]byte, n)
	}
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return nil, err
	}
	return body, nil
}
