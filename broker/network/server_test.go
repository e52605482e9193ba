package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// testConn is a Handler's connection state in these tests: authenticated
// unless admit is set, which then admits keys before authentication.
type testConn struct {
	admit func(key int16) error
}

func (c *testConn) IsAuthenticated() bool { return c.admit == nil }
func (c *testConn) RawSASL() bool         { return false }
func (c *testConn) MutedUntil() time.Time { return time.Time{} }

func (c *testConn) Admit(key int16) error {
	if c.admit == nil {
		return nil
	}
	return c.admit(key)
}

// echoHandler answers each frame with the frame itself; a frame that
// starts with "later" is answered once release is closed, on the
// connection's goroutine for delayed answers.
type echoHandler struct {
	conn    *testConn
	release chan struct{}
	handled chan string
}

func (h *echoHandler) Open(ctx context.Context, nc net.Conn, log hclog.Logger) (net.Conn, Conn, error) {
	return nc, h.conn, nil
}

func (h *echoHandler) Handle(ctx context.Context, c Conn, frame []byte, size int) (Response, error) {
	if len(frame) != size {
		return Response{}, fmt.Errorf("frame of %d bytes handed with size %d", len(frame), size)
	}
	h.handled <- string(frame)
	answer := func(context.Context) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(frame))) // size prefix
	}
	echo := func(ctx context.Context) []byte { return append(answer(ctx), frame...) }
	if strings.HasPrefix(string(frame), "later") {
		return Response{Later: true, Answer: func(ctx context.Context) Frame {
			<-h.release
			return Frame{Bytes: echo(ctx)}
		}}, nil
	}
	return Response{Answer: func(ctx context.Context) Frame { return Frame{Bytes: echo(ctx)} }}, nil
}

func (h *echoHandler) RawToken(ctx context.Context, c Conn, token []byte) ([]byte, error) {
	return nil, errors.New("no SASL")
}

func (h *echoHandler) Closed(ctx context.Context, conn net.Conn, c Conn, err error) {}

// startServer serves h on a listener on 127.0.0.1 until the test ends.
func startServer(t *testing.T, h Handler) (*Server, string) {
	t.Helper()
	return startServerWith(t, h, func(*Config) {})
}

// startServerWith is startServer with the config as edit leaves it.
func startServerWith(t *testing.T, h Handler, edit func(*Config)) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	closing := make(chan struct{})
	cfg := Config{
		ConnectionsMaxIdle:       time.Minute,
		SocketRequestMaxBytes:    1 << 20,
		SASLServerMaxReceiveSize: 1 << 10,
		QueuedMaxRequestBytes:    1 << 20,
		MaxConnections:           10,
		MaxConnectionsPerIP:      10,
		Closing:                  closing,
		AcceptErrors:             prometheus.NewCounter(prometheus.CounterOpts{Name: "accept_errors"}),
		ConnectionsRefused:       prometheus.NewCounter(prometheus.CounterOpts{Name: "connections_refused"}),
		ConnectionsThrottled:     prometheus.NewCounter(prometheus.CounterOpts{Name: "connections_throttled"}),
	}
	edit(&cfg)
	s := NewServer(cfg, hclog.NewNullLogger())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Serve(Listener{Name: "TEST", Listener: ln, Handler: h})
	}()
	t.Cleanup(func() {
		close(closing)
		ln.Close()
		wg.Wait()
	})
	return s, ln.Addr().String()
}

// frame returns body with its size prefix.
func frame(body string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// readAnswer reads one size-prefixed answer from nc.
func readAnswer(t *testing.T, nc net.Conn) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("read answer size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return string(body)
}

// TestServeAnswersInRequestOrder pipelines a request answered later and
// one answered at once: the second is handled while the first waits, and
// the answers leave in request order.
func TestServeAnswersInRequestOrder(t *testing.T) {
	h := &echoHandler{conn: &testConn{}, release: make(chan struct{}), handled: make(chan string, 2)}
	_, addr := startServer(t, h)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Write(append(frame("later-one"), frame("now-two")...)); err != nil {
		t.Fatalf("write: %v", err)
	}
	for _, want := range []string{"later-one", "now-two"} {
		if got := <-h.handled; got != want {
			t.Fatalf("handled: got %q, want %q", got, want)
		}
	}
	close(h.release)
	for _, want := range []string{"later-one", "now-two"} {
		if got := readAnswer(t, nc); got != want {
			t.Errorf("answer: got %q, want %q", got, want)
		}
	}
}

// TestServeAdmitsBeforeReadingBody sends, before authentication, a frame
// whose api key the connection does not admit: the connection closes
// without the handler seeing the frame.
func TestServeAdmitsBeforeReadingBody(t *testing.T) {
	refused := errors.New("refused")
	h := &echoHandler{conn: &testConn{admit: func(key int16) error {
		if key == 18 {
			return nil
		}
		return refused
	}}, handled: make(chan string, 1)}
	_, addr := startServer(t, h)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer nc.Close()
	body := string([]byte{0, 3}) + strings.Repeat("x", 100)
	if _, err := nc.Write(frame(body)[:8]); err != nil { // size, key and 2 bytes of its body
		t.Fatalf("write: %v", err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read after a refused key: got %d bytes, want the connection closed", n)
	}
	select {
	case got := <-h.handled:
		t.Errorf("handled %q, want nothing handled", got)
	default:
	}
}

// TestConnLimiter admits connections up to max.connections.per.ip (or
// the address's override), reports full at max.connections, and wakes a
// waiter at a release.
func TestConnLimiter(t *testing.T) {
	l := newConnLimiter(Config{MaxConnections: 3, MaxConnectionsPerIP: 2, MaxConnectionsPerIPOverrides: map[string]int32{"10.0.0.2": 1}})
	a := &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}
	b := &net.TCPAddr{IP: net.ParseIP("10.0.0.2"), Port: 1}
	for i := range 2 {
		if ok, _ := l.admit(a); !ok {
			t.Fatalf("connection %d from %s: got refused, want admitted", i, a)
		}
	}
	if ok, limit := l.admit(a); ok || limit != 2 {
		t.Errorf("third connection from %s: got admitted %v limit %d, want refused at 2", a, ok, limit)
	}
	if ok, _ := l.admit(b); !ok {
		t.Fatalf("connection from %s: got refused, want admitted", b)
	}
	if ok, limit := l.admit(b); ok || limit != 1 {
		t.Errorf("second connection from %s: got admitted %v limit %d, want refused at its override 1", b, ok, limit)
	}
	full, freed := l.full()
	if !full {
		t.Fatalf("full with 3 of max.connections 3: got false, want true")
	}
	l.release(a)
	select {
	case <-freed:
	default:
		t.Errorf("freed after a release: got open, want closed")
	}
	if full, _ := l.full(); full {
		t.Errorf("full after a release: got true, want false")
	}
}

// TestRequestPool reserves at most the pool's capacity, makes a reader
// wait while the pool is full, and ends the wait at a release or when the
// reader's context ends.
func TestRequestPool(t *testing.T) {
	p := newRequestPool(100, hclog.NewNullLogger())
	ctx := context.Background()
	got, err := p.acquire(ctx, 1000)
	if err != nil || got != 100 {
		t.Fatalf("acquire 1000 of 100: got %d, %v, want 100, nil", got, err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.acquire(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire from a full pool: got %v, want %v", err, context.DeadlineExceeded)
	}
	done := make(chan int64)
	go func() {
		n, _ := p.acquire(ctx, 10)
		done <- n
	}()
	p.release(got)
	if n := <-done; n != 10 {
		t.Errorf("acquire after a release: got %d, want 10", n)
	}
	if n := p.inUse(); n != 10 {
		t.Errorf("in use: got %d, want 10", n)
	}
}

// TestReadFrameBody reads a frame whose first bytes were read already,
// and fails a frame that declares more than arrives without allocating
// what it declares, with and without pooled buffers (a Produce's frame);
// a pooled frame ends in a buffer of a pool's size class, which PutFrame
// takes back.
func TestReadFrameBody(t *testing.T) {
	body, err := readFrameBody(strings.NewReader("cdef"), 6, []byte("ab"), false)
	if err != nil || string(body) != "abcdef" {
		t.Fatalf("readFrameBody: got %q, %v, want %q, nil", body, err, "abcdef")
	}
	want := make([]byte, 300<<10)
	for i := range want {
		want[i] = byte(i * 7)
	}
	body, err = readFrameBody(bytes.NewReader(want[2:]), len(want), want[:2], true)
	if err != nil || !bytes.Equal(body, want) {
		t.Fatalf("pooled readFrameBody of %d bytes: got %d bytes equal %v, %v; want them all, nil", len(want), len(body), bytes.Equal(body, want), err)
	}
	if c := frameClass(cap(body)); c < 0 || cap(body) != 1<<(c+minPooledFrameShift) {
		t.Errorf("pooled readFrameBody: buffer of cap %d, want a pool's size class", cap(body))
	}
	PutFrame(body)
	for _, pooled := range []bool{false, true} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = readFrameBody(bytes.NewReader(make([]byte, 10)), 1<<30, nil, pooled)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("readFrameBody (pooled %v) of a lying size: got %v, want %v", pooled, err, io.ErrUnexpectedEOF)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
			t.Errorf("readFrameBody (pooled %v) of a frame declaring 1 GiB: got %d bytes allocated, want at most %d", pooled, allocated, 1<<20)
		}
	}
}
