package network

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// maxInFlight bounds how many requests of one connection are being handled
// or waiting to be answered; the reader stops reading beyond it.
const maxInFlight = 100

// readChunk is the most the reader allocates ahead of the bytes that have
// actually arrived, so a frame that declares a huge size costs memory only
// for what the peer really sends.
const readChunk = 64 << 10

// produceKey is the Produce request's api key, whose frames are read into
// pooled buffers.
const produceKey = 0

// pendingResponse is one request's slot in a connection's response queue:
// the handler sends the encoded frame (nil Bytes for no response) once.
type pendingResponse struct {
	frame chan Frame
	// fetch marks a Fetch's slot (or a Serial one): the reader reads
	// nothing more from the connection until the writer has written it
	// (connFlow).
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
func (f *connFlow) produced(frame Frame) { f.unwrittenBytes.Add(int64(frame.Len())) }

// wrote counts a slot the writer is done with, and wakes the reader.
func (f *connFlow) wrote(frame Frame, fetch bool) {
	f.unwrittenBytes.Add(-int64(frame.Len()))
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
// the peer sends bad input, or the broker closes. The listener's Handler
// opens it first (on an SSL listener the TLS handshake, which gives the
// connection its principal). A reader (this goroutine) reads requests and
// has the Handler handle them in request order; a handler that waits (a
// long-poll fetch) continues on a goroutine of its own while the reader
// goes on. A writer goroutine writes the responses strictly in request
// order. serveConn returns after every goroutine it started has ended.
func (s *Server) serveConn(nc net.Conn, l Listener) {
	log := s.logger.With("remote", nc.RemoteAddr().String(), "listener", l.Name)

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
		case <-s.cfg.Closing:
		case <-ctx.Done():
		}
		cancel()
		nc.Close()
	}()

	conn, cs, err := l.Handler.Open(ctx, nc, log)
	if err != nil {
		return
	}

	queue := make(chan *pendingResponse, maxInFlight)
	// unanswered counts requests read whose response is not written yet.
	var unanswered atomic.Int32
	flow := &connFlow{written: make(chan struct{}, 1), nc: conn}
	writerDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(writerDone)
		writeResponses(ctx, cancel, conn, queue, &unanswered, flow)
	}()

	var handlers sync.WaitGroup
	err = s.readRequests(ctx, conn, l.Handler, queue, &unanswered, flow, &handlers, cs)
	switch {
	case errors.Is(err, ErrAnswerThenClose):
		// Every queued response, the last one saying why, is written
		// before the connection closes (the watcher closes it when the
		// deferred cancel runs).
		log.Debug("closing connection after its answer", "error", err)
		handlers.Wait()
		close(queue)
		<-writerDone
		l.Handler.Closed(ctx, conn, cs, err)
		return
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), ctx.Err() != nil:
		log.Debug("connection closed")
	case errors.Is(err, os.ErrDeadlineExceeded):
		log.Info("closing idle connection", "connections.max.idle.ms", s.cfg.ConnectionsMaxIdle.Milliseconds())
	default:
		log.Warn("closing connection", "error", err)
	}
	cancel()
	nc.Close()
	handlers.Wait()
	close(queue)
}

// readRequests reads frames until an error, has h handle each, and
// queues its response slot in request order; delayed responses are
// produced by goroutines counted in handlers. Before reading a request it
// waits for the connection's flow (connFlow); before reading a body it
// reserves the frame's size in the server's request pool
// (queued.max.request.bytes), released once the handler has run. Before
// the client authenticates, a frame's api key is read first, and any the
// connection does not admit (all but ApiVersions, SaslHandshake and
// SaslAuthenticate) closes the connection without its body being read;
// after, the key is read first too, to read a Produce into a pooled
// buffer.
func (s *Server) readRequests(ctx context.Context, nc net.Conn, h Handler, queue chan<- *pendingResponse, unanswered *atomic.Int32, flow *connFlow, handlers *sync.WaitGroup, cs Conn) error {
	br := bufio.NewReaderSize(nc, 16<<10)
	var sizeBuf [4]byte
	var keyBuf [2]byte
	for {
		if err := flow.wait(ctx, br); err != nil {
			return err
		}
		if err := waitUnmuted(ctx, cs); err != nil {
			return err
		}
		// A whole request must arrive within connections.max.idle.ms
		// of the previous one, unless the client is waiting for an
		// answer (a long poll), which is not idleness.
		if err := nc.SetReadDeadline(time.Now().Add(s.cfg.ConnectionsMaxIdle)); err != nil {
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
		if size > s.cfg.SocketRequestMaxBytes {
			return fmt.Errorf("request frame of %d bytes exceeds socket.request.max.bytes %d", size, s.cfg.SocketRequestMaxBytes)
		}
		raw := cs.RawSASL()
		authenticated := cs.IsAuthenticated()
		if !authenticated && size > s.cfg.SASLServerMaxReceiveSize {
			return fmt.Errorf("request frame of %d bytes before SASL authentication exceeds sasl.server.max.receive.size %d", size, s.cfg.SASLServerMaxReceiveSize)
		}
		var head []byte
		var key int16 = -1
		if !raw && size >= 2 {
			if _, err := io.ReadFull(br, keyBuf[:]); err != nil {
				return fmt.Errorf("read request header: %w", err)
			}
			key = int16(binary.BigEndian.Uint16(keyBuf[:]))
			if !authenticated {
				if err := cs.Admit(key); err != nil {
					return fmt.Errorf("%w (its %d-byte body left unread)", err, size-2)
				}
			}
			head = keyBuf[:]
		}
		// A Produce's frame is read into a pooled buffer and given back
		// once its answer is produced: the handler's deferred part (an
		// acks=all wait, a transaction's verification) still reads the
		// records until then, and nothing keeps them after (the log
		// copies what it appends). Fresh buffers for every produce kept
		// a broker's heap growing into pages the kernel had yet to hand
		// over, at a page fault each: most of a broker's faults in a
		// short produce run.
		pooled := key == produceKey
		reserved, err := s.requests.acquire(ctx, int64(size))
		if err != nil {
			return err
		}
		// release gives the frame's reservation back once its
		// response is produced (or the request failed).
		release := func() { s.requests.release(reserved) }
		body, err := readFrameBody(br, int(size), head, pooled)
		if err != nil {
			release()
			return fmt.Errorf("read request frame of %d bytes: %w", size, err)
		}
		if raw {
			// After a SaslHandshake v0 the client sends bare SASL
			// tokens and gets bare answers (Handler.RawToken).
			answer, err := h.RawToken(ctx, cs, body)
			release()
			if err != nil {
				return err
			}
			slot := &pendingResponse{frame: make(chan Frame, 1)}
			flow.produced(Frame{Bytes: answer})
			slot.frame <- Frame{Bytes: answer}
			unanswered.Add(1)
			select {
			case queue <- slot:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		resp, err := h.Handle(ctx, cs, body, int(size))
		if err != nil && resp.Answer == nil {
			release()
			return err
		}
		slot := &pendingResponse{frame: make(chan Frame, 1), fetch: resp.Fetch || resp.Serial}
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
		if !resp.Later {
			frame := resp.Answer(ctx)
			release()
			if pooled {
				PutFrame(body)
			}
			flow.produced(frame)
			slot.frame <- frame
			if err != nil {
				return err // ErrAnswerThenClose, with the answer queued
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
			frame := resp.Answer(ctx)
			if pooled {
				PutFrame(body)
			}
			flow.produced(frame)
			slot.frame <- frame
		}()
	}
}

// waitUnmuted returns once the connection's client quota throttle has
// passed (Conn.MutedUntil), or when ctx ends: a client over its quota
// is not read from meanwhile, so it slows down while others do not.
func waitUnmuted(ctx context.Context, cs Conn) error {
	for {
		wait := time.Until(cs.MutedUntil())
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// readFrameBody reads a frame of size bytes whose first bytes, head,
// were read already, growing the buffer only as data arrives (at most
// readChunk ahead), so a lying size header allocates little. With pooled
// the buffers come from the frame pools (GetFrame), and those outgrown go
// back to them; the caller gives the last one back (PutFrame) once
// nothing reads the frame any more.
func readFrameBody(r io.Reader, size int, head []byte, pooled bool) ([]byte, error) {
	get := func(n int) []byte { return make([]byte, 0, n) }
	if pooled {
		get = GetFrame
	}
	buf := append(get(min(size, readChunk)), head...)
	for len(buf) < size {
		n := min(size-len(buf), readChunk)
		if cap(buf)-len(buf) < n {
			grown := append(get(min(size, max(2*cap(buf), len(buf)+n))), buf...)
			if pooled {
				PutFrame(buf)
			}
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

// writeResponses writes each queued response once its handler has
// produced it, in queue order, until the queue closes, giving each frame
// written back to its pool (frames.go) and releasing its splices: a
// frame queued belongs to the writer. After a write error it keeps
// draining without writing.
func writeResponses(ctx context.Context, cancel context.CancelFunc, nc net.Conn, queue <-chan *pendingResponse, unanswered *atomic.Int32, flow *connFlow) {
	bw := bufio.NewWriterSize(nc, 32<<10)
	broken := false
	for slot := range queue {
		var frame Frame
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
		if broken || frame.Bytes == nil {
			frame.release()
			flow.wrote(frame, slot.fetch)
			continue
		}
		err := writeFrame(bw, nc, frame)
		frame.release()
		flow.wrote(frame, slot.fetch)
		// The buffered writer copied the frame or wrote it out: nothing
		// refers to it any more.
		PutFrame(frame.Bytes)
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
