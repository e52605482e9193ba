package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
)

// requestHeader is a Kafka request header (v1, or v2 for flexible
// requests).
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// request is a decoded request handed to an API handler.
type request struct {
	header requestHeader
	// kreq is the decoded body; its version is set.
	kreq kmsg.Request
	// conn is the security state of the connection the request came on:
	// listener, client host, principal (see connState).
	conn *connState
	// received is when the request was read off its connection.
	received time.Time
	// reads holds what a fetch's records are read into until its answer
	// is encoded (fetch_frame.go); nil for other requests.
	reads *fetchReads
}

// connHandler serves the connections of one listener for the connection
// layer (network.Handler): it opens them (the TLS handshake and the
// principal, connState) and decodes, admits, authorizes and dispatches
// their requests to the API handlers.
type connHandler struct {
	b *Broker
	l *listener
}

// Open makes a connection accepted on h's listener ready for requests:
// on an SSL listener it runs the TLS handshake and returns the TLS
// connection (whose Close closes nc at once), with the connection's
// security state; it closes nc and returns an error when the handshake
// fails or the client's certificate maps to no principal.
func (h connHandler) Open(ctx context.Context, nc net.Conn, log hclog.Logger) (net.Conn, network.Conn, error) {
	conn := nc
	var ts *tls.ConnectionState
	if h.l.tls != nil {
		tc := tls.Server(nc, h.l.tls.ServerConfig())
		st, err := h.handshake(ctx, tc)
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, io.EOF):
				// Closed before its hello: a crash probe
				// (broker.crash.probe.interval.ms) or a port check.
				log.Debug("connection closed before the TLS handshake")
			default:
				log.Info("TLS handshake failed", "error", err)
			}
			nc.Close()
			return nil, nil, err
		}
		conn, ts = closeRaw{Conn: tc, raw: nc}, st
	}
	cs, err := newConnState(h.l, nc.RemoteAddr(), ts)
	if err != nil {
		log.Info("client certificate refused", "error", err)
		nc.Close()
		return nil, nil, err
	}
	log.Debug("connection opened", "security_protocol", h.l.Protocol, "principal", cs.principal().String())
	return conn, cs, nil
}

// Handle decodes a request frame of the connection c (a *connState) and
// dispatches it; its Answer records the request's metrics with the
// encoded response.
func (h connHandler) Handle(ctx context.Context, c network.Conn, frame []byte, size int) (network.Response, error) {
	b := h.b
	req, reply, err := b.decodeRequest(frame, c.(*connState))
	if err != nil {
		return network.Response{}, err
	}
	start := time.Now()
	resp, later, err := b.dispatch(ctx, req, reply, size, start)
	if err != nil && resp == nil {
		return network.Response{}, err
	}
	r := network.Response{Fetch: req != nil && req.header.key == fetchKey, Serial: b.underQuota(req)}
	if later == nil {
		r.Answer = func(context.Context) network.Frame {
			return b.metrics.requestAnswered(req, start, size, network.Frame{Bytes: resp})
		}
		return r, err
	}
	r.Later = true
	r.Answer = func(ctx context.Context) network.Frame {
		return b.metrics.requestAnswered(req, start, size, b.encodeFrame(req, later(ctx)))
	}
	return r, nil
}

// RawToken answers a bare SASL token of the connection c (rawSASLToken).
func (h connHandler) RawToken(ctx context.Context, c network.Conn, token []byte) ([]byte, error) {
	return rawSASLToken(ctx, h.b.sasl, c.(*connState), token)
}

// Closed ends a connection whose SASL exchange failed with the
// failure's delayed answer (answerFailedAuthentication).
func (h connHandler) Closed(ctx context.Context, conn net.Conn, c network.Conn, err error) {
	if errors.Is(err, errAuthenticationFailed) {
		h.answerFailedAuthentication(ctx, conn, c.(*connState))
	}
}

// dispatch runs the request's handler, once the connection admits it
// and, with an authorizer, its authorization rule (security/rules.go) lets it. It
// returns the encoded response
// (nil: none), or a function producing it later, or an error that closes
// the connection, with the encoded response to send first when it wraps
// network.ErrAnswerThenClose. A ready reply (from decodeRequest) is passed
// through.
func (b *Broker) dispatch(ctx context.Context, req *request, reply []byte, size int, start time.Time) ([]byte, laterFunc, error) {
	if reply != nil {
		return reply, nil, nil
	}
	if err := req.conn.Admit(req.header.key); err != nil {
		return nil, nil, err
	}
	if b.logger.IsTrace() {
		clientID := ""
		if req.header.clientID != nil {
			clientID = *req.header.clientID
		}
		b.logger.Trace("request", "api", kmsg.NameForKey(req.header.key), "version", req.header.version,
			"correlation_id", req.header.correlationID, "client_id", clientID, "remote", req.conn.remote, "principal", req.conn.principal().String())
	}
	var amend func(kmsg.Response)
	if b.authz != nil {
		deny, am := b.authz.Authorize(ctx, req.header.key, req.kreq, req.conn.principal().String(), req.conn.clientHost, authzMetadata{b})
		if deny != nil {
			return b.encode(req, deny), nil, nil
		}
		amend = am
	}
	api, _ := b.api(req.header.key) // decodeRequest admitted the key
	resp, later, err := api.handle(ctx, b, req)
	handled := time.Since(start)
	if err != nil {
		err = fmt.Errorf("%s request failed: %w", kmsg.NameForKey(req.header.key), err)
		if errors.Is(err, network.ErrAnswerThenClose) && resp != nil {
			return b.encode(req, resp), nil, err
		}
		return nil, nil, err
	}
	if later != nil {
		handle := later
		later = func(ctx context.Context) kmsg.Response {
			resp := handle(ctx)
			if amend != nil && resp != nil {
				amend(resp)
			}
			b.applyQuotas(req, resp, size, handled)
			return resp
		}
		return nil, later, nil
	}
	if amend != nil && resp != nil {
		amend(resp)
	}
	b.applyQuotas(req, resp, size, handled)
	return b.encode(req, resp), nil, nil
}

// decodeRequest parses a frame's header and body. It returns either a
// request to handle, or a ready reply frame (ApiVersions with a version too
// new), or an error that closes the connection (unknown key, unsupported
// version, unparseable header or body).
func (b *Broker) decodeRequest(frame []byte, cs *connState) (*request, []byte, error) {
	if len(frame) < 8 {
		return nil, nil, fmt.Errorf("request frame of %d bytes is shorter than a request header", len(frame))
	}
	h := requestHeader{
		key:           int16(binary.BigEndian.Uint16(frame[0:])),
		version:       int16(binary.BigEndian.Uint16(frame[2:])),
		correlationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	api, ok := b.api(h.key)
	if !ok {
		if _, registered := apis[h.key]; registered {
			return nil, nil, fmt.Errorf("%s request (api key %d, correlation id %d): not served with coordination.backend=%s",
				kmsg.NameForKey(h.key), h.key, h.correlationID, b.cfg.Coord.Backend)
		}
		return nil, nil, fmt.Errorf("request with unknown api key %d (correlation id %d)", h.key, h.correlationID)
	}
	if h.version < api.minVersion || h.version > api.maxVersion {
		if h.key == apiVersionsKey && h.version > api.maxVersion {
			return nil, b.unsupportedApiVersions(h.correlationID), nil
		}
		return nil, nil, fmt.Errorf("%s request version %d is not supported (supported %d..%d)",
			kmsg.NameForKey(h.key), h.version, api.minVersion, api.maxVersion)
	}
	kreq := kmsg.RequestForKey(h.key)
	kreq.SetVersion(h.version)
	rest := frame[8:]
	if len(rest) < 2 {
		return nil, nil, fmt.Errorf("%s request header is truncated", kmsg.NameForKey(h.key))
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen >= 0 {
		if int(idLen) > len(rest) {
			return nil, nil, fmt.Errorf("%s request header client id is truncated", kmsg.NameForKey(h.key))
		}
		id := string(rest[:idLen])
		h.clientID = &id
		rest = rest[idLen:]
	}
	if kreq.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil, nil, fmt.Errorf("%s request header tagged fields: %w", kmsg.NameForKey(h.key), err)
		}
	}
	// Nothing is decoded that would cost more than its frame allows
	// (network/request_cost.go).
	cost, err := network.DecodeCost(h.key, h.version, rest)
	if err != nil {
		return nil, nil, err
	}
	if limit := network.MaxDecodeExpansion*len(frame) + network.DecodeCostSlack; cost > limit {
		return nil, nil, fmt.Errorf("refusing %s v%d request of %d bytes: decoding it would allocate %d bytes, more than %d times its size plus %d",
			kmsg.NameForKey(h.key), h.version, len(frame), cost, network.MaxDecodeExpansion, network.DecodeCostSlack)
	}
	if err := kreq.ReadFrom(rest); err != nil {
		return nil, nil, fmt.Errorf("parse %s v%d request: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return &request{header: h, kreq: kreq, conn: cs, received: time.Now()}, nil, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, rest, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < n; i++ {
		if _, rest, err = readUvarint(rest); err != nil {
			return nil, err
		}
		var size uint64
		if size, rest, err = readUvarint(rest); err != nil {
			return nil, err
		}
		if size > uint64(len(rest)) {
			return nil, fmt.Errorf("tagged field of %d bytes is truncated", size)
		}
		rest = rest[size:]
	}
	return rest, nil
}

func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("bad uvarint")
	}
	return v, b[n:], nil
}

// encode frames resp as the answer to req; a nil resp stays nil (no
// answer).
func (b *Broker) encode(req *request, resp kmsg.Response) []byte {
	if resp == nil {
		return nil
	}
	resp.SetVersion(req.header.version)
	return encodeResponse(req.header.key, req.header.correlationID, resp)
}

// encodeFrame is encode for an answer given later: a fetch's records
// held as file slices go as splices of the frame, sent from their files;
// every slice is released once framed (or read into the response, when
// the frame cannot carry it), and the buffers of its reads go back to
// their pools.
func (b *Broker) encodeFrame(req *request, resp kmsg.Response) network.Frame {
	if req.reads == nil {
		return network.Frame{Bytes: b.encode(req, resp)}
	}
	defer req.reads.release()
	if fr, ok := resp.(*kmsg.FetchResponse); ok && len(req.reads.slices) > 0 {
		fr.SetVersion(req.header.version)
		if f, ok := encodeFetchFrame(req.header.correlationID, fr, req.reads.slices); ok {
			return f
		}
		b.readSlices(fr, req.reads)
	}
	return network.Frame{Bytes: b.encode(req, resp)}
}

// encodeResponse frames resp: size, correlation id, the header's tagged
// fields for flexible responses (header v1; ApiVersions always uses
// header v0), then the body.
func encodeResponse(key int16, correlationID int32, resp kmsg.Response) []byte {
	buf := network.GetFrame(responseSizeHint(resp))[:8]
	binary.BigEndian.PutUint32(buf[4:], uint32(correlationID))
	if resp.IsFlexible() && key != apiVersionsKey {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// responseSizeHint is the buffer to encode resp into: a fetch response is
// mostly its record batches, which would otherwise be copied again at
// every doubling of a small buffer (a tenth of the CPU of a replicated
// produce benchmark went to that), and a Metadata response of a topic of
// 10 000 partitions is some 400 KB.
func responseSizeHint(resp kmsg.Response) int {
	n := 64
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		for _, t := range r.Topics {
			n += len(t.Topic) + 16
			for _, p := range t.Partitions {
				n += len(p.RecordBatches) + 64 + 24*len(p.AbortedTransactions)
			}
		}
	case *kmsg.MetadataResponse:
		n += 64
		for _, b := range r.Brokers {
			n += 32 + len(b.Host)
			if b.Rack != nil {
				n += len(*b.Rack)
			}
		}
		for _, t := range r.Topics {
			n += 64
			if t.Topic != nil {
				n += len(*t.Topic)
			}
			for _, p := range t.Partitions {
				n += 32 + 4*(len(p.Replicas)+len(p.ISR)+len(p.OfflineReplicas))
			}
		}
	}
	return n
}
