package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
)

// maxInFlight bounds how many requests of one connection are being handled
// or waiting to be answered; the reader stops reading beyond it.
const maxInFlight = 100

// readChunk is the most the reader allocates ahead of the bytes that have
// actually arrived, so a frame that declares a huge size costs memory only
// for what the peer really sends.
const readChunk = 64 << 10

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
}

// pendingResponse is one request's slot in a connection's response queue:
// the handler sends the encoded frame (or nil for no response) once.
type pendingResponse struct {
	frame chan []byte
	// fetch marks a Fetch's slot: the reader reads nothing more from the
	// connection until the writer has written it (connFlow).
	fetch bool
}

// connResponseBudget is how many bytes of one connection's responses may
// be produced and not yet written before its reader stops reading
// requests: a client that does not read its answers holds about one
// response, as Kafka's broker mutes a connection until its response is
// sent, while small pipelined produce answers still flow.
const connResponseBudget = 1 << 20

// connFlow is what one connection's reader waits on before reading its
// next request: the bytes of responses produced and not written, and the
// Fetch responses not written. The writer updates it and wakes the
// reader.
type connFlow struct {
	unwrittenBytes   atomic.Int64
	unwrittenFetches atomic.Int32
	// written has a token after the writer wrote a response.
	written chan struct{}
	// nc is the connection, whose read deadline the writer moves to
	// wake a reader that waits in a read (waitingInRead, under mu).
	nc            net.Conn
	mu            sync.Mutex
	waitingInRead bool
}

// produced counts a response frame handed to the writer.
func (f *connFlow) produced(frame []byte) { f.unwrittenBytes.Add(int64(len(frame))) }

// wrote counts a slot the writer is done with, and wakes the reader.
func (f *connFlow) wrote(frame []byte, fetch bool) {
	f.unwrittenBytes.Add(-int64(len(frame)))
	if fetch {
		f.unwrittenFetches.Add(-1)
	}
	select {
	case f.written <- struct{}{}:
	default:
	}
	f.mu.Lock()
	if f.waitingInRead {
		f.nc.SetReadDeadline(time.Now())
	}
	f.mu.Unlock()
}

// blocked reports whether the reader must wait.
func (f *connFlow) blocked() bool {
	return f.unwrittenFetches.Load() > 0 || f.unwrittenBytes.Load() > connResponseBudget
}

// wait returns once the connection may read another request: no Fetch
// response is unwritten and the unwritten responses are within
// connResponseBudget; or with an error that closes the connection. While
// it waits, it reads ahead into br, as far as br's buffer holds, so that
// a client closing the connection ends it (and a long poll it left)
// without waiting for the answer; ctx ends the wait too.
func (f *connFlow) wait(ctx context.Context, br *bufio.Reader) error {
	for f.blocked() {
		if br.Buffered() >= br.Size() {
			select {
			case <-f.written:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		f.mu.Lock()
		f.waitingInRead = true
		f.mu.Unlock()
		// The deadline is cleared before blocked is checked again, and
		// the writer moves it after updating the counts: a write
		// between the two ends the read below at once.
		err := f.nc.SetReadDeadline(time.Time{})
		if err == nil && f.blocked() {
			_, err = br.Peek(br.Buffered() + 1)
		}
		f.mu.Lock()
		f.waitingInRead = false
		f.mu.Unlock()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// serveConn serves one client connection accepted on l until it closes,
// the peer sends bad input, or the broker closes. On an SSL listener the
// TLS handshake comes first, and gives the connection its principal
// (connState). A reader (this goroutine) decodes requests and runs their
// handlers in request order; a handler that waits (a long-poll fetch)
// continues on a goroutine of its own while the reader goes on. A writer
// goroutine writes the responses strictly in request order. serveConn
// returns after every goroutine it started has ended.
func (b *Broker) serveConn(nc net.Conn, l *listener) {
	log := b.logger.With("remote", nc.RemoteAddr().String(), "listener", l.name)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// The watcher closes the socket when the broker closes, which ends
	// the handshake or the reader's blocking read.
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-b.closing:
		case <-ctx.Done():
		}
		cancel()
		nc.Close()
	}()

	conn, cs := b.establish(ctx, nc, l, log)
	if cs == nil {
		return
	}
	log.Debug("connection opened", "security_protocol", l.protocol, "principal", cs.principal().String())

	queue := make(chan *pendingResponse, maxInFlight)
	// unanswered counts requests read whose response is not written yet.
	var unanswered atomic.Int32
	flow := &connFlow{written: make(chan struct{}, 1), nc: conn}
	writerDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(writerDone)
		b.writeResponses(ctx, cancel, conn, queue, &unanswered, flow)
	}()

	var handlers sync.WaitGroup
	err := b.readRequests(ctx, conn, queue, &unanswered, flow, &handlers, cs)
	switch {
	case errors.Is(err, errAnswerThenClose):
		// Every queued response, the last one saying why, is written
		// before the connection closes (the watcher closes it when the
		// deferred cancel runs).
		log.Debug("closing connection after its answer", "error", err)
		handlers.Wait()
		close(queue)
		<-writerDone
		if errors.Is(err, errAuthenticationFailed) {
			b.answerFailedAuthentication(ctx, conn, cs)
		}
		return
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), ctx.Err() != nil:
		log.Debug("connection closed")
	case errors.Is(err, os.ErrDeadlineExceeded):
		log.Info("closing idle connection", "connections.max.idle.ms", b.cfg.ConnectionsMaxIdle.Milliseconds())
	default:
		log.Warn("closing connection", "error", err)
	}
	cancel()
	nc.Close()
	handlers.Wait()
	close(queue)
}

// establish makes a connection accepted on l ready for requests: on an
// SSL listener it runs the TLS handshake and returns the TLS connection
// (whose Close closes nc at once); it returns the connection's security
// state, or nil (having closed nc) when the handshake fails or the
// client's certificate maps to no principal.
func (b *Broker) establish(ctx context.Context, nc net.Conn, l *listener, log hclog.Logger) (net.Conn, *connState) {
	conn := nc
	var ts *tls.ConnectionState
	if l.tls != nil {
		tc := tls.Server(nc, l.tls.ServerConfig())
		st, err := b.handshake(ctx, tc)
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
			return nil, nil
		}
		conn, ts = closeRaw{Conn: tc, raw: nc}, st
	}
	cs, err := newConnState(l, nc.RemoteAddr(), ts)
	if err != nil {
		log.Info("client certificate refused", "error", err)
		nc.Close()
		return nil, nil
	}
	return conn, cs
}

// readRequests reads frames until an error, dispatches each, and queues
// its response slot in request order; delayed responses are produced by
// goroutines counted in handlers. Before reading a request it waits for
// the connection's flow (connFlow); before reading a body it reserves the
// frame's size in the broker's request pool (queued.max.request.bytes),
// released once the handler has run. Before the client
// authenticates, a frame's api key is read first, and any but
// ApiVersions, SaslHandshake and SaslAuthenticate closes the connection
// without its body being read.
func (b *Broker) readRequests(ctx context.Context, nc net.Conn, queue chan<- *pendingResponse, unanswered *atomic.Int32, flow *connFlow, handlers *sync.WaitGroup, cs *connState) error {
	br := bufio.NewReaderSize(nc, 16<<10)
	var sizeBuf [4]byte
	var keyBuf [2]byte
	for {
		if err := flow.wait(ctx, br); err != nil {
			return err
		}
		// A whole request must arrive within connections.max.idle.ms
		// of the previous one, unless the client is waiting for an
		// answer (a long poll), which is not idleness.
		if err := nc.SetReadDeadline(time.Now().Add(b.cfg.ConnectionsMaxIdle)); err != nil {
			return err
		}
		if n, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && unanswered.Load() > 0 {
				continue
			}
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 0 {
			return fmt.Errorf("request frame declares negative size %d", size)
		}
		if size > b.cfg.SocketRequestMaxBytes {
			return fmt.Errorf("request frame of %d bytes exceeds socket.request.max.bytes %d", size, b.cfg.SocketRequestMaxBytes)
		}
		raw := cs.rawSASL()
		var head []byte
		if !cs.isAuthenticated() {
			if size > b.cfg.SASL.ServerMaxReceiveSize {
				return fmt.Errorf("request frame of %d bytes before SASL authentication exceeds sasl.server.max.receive.size %d", size, b.cfg.SASL.ServerMaxReceiveSize)
			}
			if !raw && size >= 2 {
				if _, err := io.ReadFull(br, keyBuf[:]); err != nil {
					return fmt.Errorf("read request header: %w", err)
				}
				key := int16(binary.BigEndian.Uint16(keyBuf[:]))
				if err := cs.admit(key); err != nil {
					return fmt.Errorf("%w (its %d-byte body left unread)", err, size-2)
				}
				head = keyBuf[:]
			}
		}
		reserved, err := b.requests.acquire(ctx, int64(size))
		if err != nil {
			return err
		}
		// release gives the frame's reservation back once its
		// response is produced (or the request failed).
		release := func() { b.requests.release(reserved) }
		body, err := readFrameBody(br, int(size), head)
		if err != nil {
			release()
			return fmt.Errorf("read request frame of %d bytes: %w", size, err)
		}
		if raw {
			// After a SaslHandshake v0 the client sends bare SASL
			// tokens and gets bare answers (rawSASLToken).
			answer, err := rawSASLToken(ctx, b.sasl, cs, body)
			release()
			if err != nil {
				return err
			}
			slot := &pendingResponse{frame: make(chan []byte, 1)}
			flow.produced(answer)
			slot.frame <- answer
			unanswered.Add(1)
			select {
			case queue <- slot:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		req, reply, err := b.decodeRequest(body, cs)
		if err != nil {
			release()
			return err
		}
		start := time.Now()
		resp, later, err := b.dispatch(ctx, req, reply)
		if err != nil && resp == nil {
			release()
			return err
		}
		slot := &pendingResponse{frame: make(chan []byte, 1), fetch: req != nil && req.header.key == fetchKey}
		if slot.fetch {
			flow.unwrittenFetches.Add(1)
		}
		unanswered.Add(1)
		select {
		case queue <- slot:
		case <-ctx.Done():
			release()
			return ctx.Err()
		}
		if later == nil {
			frame := b.metrics.requestAnswered(req, start, int(size), resp)
			release()
			flow.produced(frame)
			slot.frame <- frame
			if err != nil {
				return err // errAnswerThenClose, with the answer queued
			}
			continue
		}
		// A handler that answers later (an acks=all produce waiting
		// for its followers, a long-poll fetch) has done its work on
		// the frame: its reservation is released now, as Kafka's
		// broker releases a request's buffer once its handler
		// returns. Held until the answer, acks=all produces could fill
		// the pool and keep out the followers' fetches that complete
		// them.
		release()
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			frame := b.metrics.requestAnswered(req, start, int(size), b.encode(req, later(ctx)))
			flow.produced(frame)
			slot.frame <- frame
		}()
	}
}

// errAnswerThenClose, wrapped in a handler's error, asks for the
// handler's response to be sent before the connection closes, as Kafka
// answers a failed SASL exchange before closing.
var errAnswerThenClose = errors.New("closing the connection after the answer")

// dispatch runs the request's handler, once the connection admits it
// and, with an authorizer, its authorization rule (security/rules.go) lets it. It
// returns the encoded response
// (nil: none), or a function producing it later, or an error that closes
// the connection, with the encoded response to send first when it wraps
// errAnswerThenClose. A ready reply (from decodeRequest) is passed
// through.
func (b *Broker) dispatch(ctx context.Context, req *request, reply []byte) ([]byte, laterFunc, error) {
	if reply != nil {
		return reply, nil, nil
	}
	if err := req.conn.admit(req.header.key); err != nil {
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
	api := apis[req.header.key]
	resp, later, err := api.handle(ctx, b, req)
	if err != nil {
		err = fmt.Errorf("%s request failed: %w", kmsg.NameForKey(req.header.key), err)
		if errors.Is(err, errAnswerThenClose) && resp != nil {
			return b.encode(req, resp), nil, err
		}
		return nil, nil, err
	}
	if later != nil {
		if amend != nil {
			handle := later
			later = func(ctx context.Context) kmsg.Response {
				resp := handle(ctx)
				if resp != nil {
					amend(resp)
				}
				return resp
			}
		}
		return nil, later, nil
	}
	if amend != nil && resp != nil {
		amend(resp)
	}
	return b.encode(req, resp), nil, nil
}

// readFrameBody reads a frame of size bytes whose first bytes, head,
// were read already, growing the buffer only as data arrives (at most
// readChunk ahead), so a lying size header allocates little.
func readFrameBody(r io.Reader, size int, head []byte) ([]byte, error) {
	buf := make([]byte, 0, min(size, readChunk))
	buf = append(buf, head...)
	for len(buf) < size {
		n := min(size-len(buf), readChunk)
		if cap(buf)-len(buf) < n {
			grown := make([]byte, len(buf), min(size, max(2*cap(buf), len(buf)+n)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+n])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
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
	api, ok := apis[h.key]
	if !ok {
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
	// (request_cost.go).
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
	return &request{header: h, kreq: kreq, conn: cs}, nil, nil
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
// produce benchmark went to that).
func responseSizeHint(resp kmsg.Response) int {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 64
	}
	n := 64
	for _, t := range fr.Topics {
		n += len(t.Topic) + 16
		for _, p := range t.Partitions {
			n += len(p.RecordBatches) + 64 + 24*len(p.AbortedTransactions)
		}
	}
	return n
}

// writeResponses writes each queued response once its handler has
// produced it, in queue order, until the queue closes, giving each frame
// written back to its pool (frames.go): a frame queued belongs to the
// writer. After a write error it keeps draining without writing.
func (b *Broker) writeResponses(ctx context.Context, cancel context.CancelFunc, nc net.Conn, queue <-chan *pendingResponse, unanswered *atomic.Int32, flow *connFlow) {
	bw := bufio.NewWriterSize(nc, 32<<10)
	broken := false
	for slot := range queue {
		var frame []byte
		select {
		case frame = <-slot.frame:
		default:
			// The next response is not ready: send what is buffered
			// before waiting for it.
			if !broken && bw.Buffered() > 0 {
				if err := bw.Flush(); err != nil {
					broken = true
					cancel()
					nc.Close()
				}
			}
			select {
			case frame = <-slot.frame:
			case <-ctx.Done():
				// Handlers watch ctx too; wait for this one so
				// the queue drains in order, but write nothing.
				frame = <-slot.frame
				broken = true
			}
		}
		unanswered.Add(-1)
		if broken || frame == nil {
			flow.wrote(frame, slot.fetch)
			continue
		}
		_, err := bw.Write(frame)
		flow.wrote(frame, slot.fetch)
		// The buffered writer copied the frame or wrote it out: nothing
		// refers to it any more.
		network.PutFrame(frame)
		if err != nil {
			broken = true
			cancel()
			nc.Close()
			continue
		}
		// Flush when nothing else is ready, batching pipelined responses.
		if len(queue) == 0 {
			if err := bw.Flush(); err != nil {
				broken = true
				cancel()
				nc.Close()
			}
		}
	}
}
