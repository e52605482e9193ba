package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// spliceHandler answers each frame, a request for n bytes of its file
// from byte pos (two uint32), with a frame whose body is "<" + the bytes
// + ">", the bytes spliced in from the file. wrap, if set, wraps the
// connection (one that is not a socket: the copy path).
type spliceHandler struct {
	file     *os.File
	wrap     func(net.Conn) net.Conn
	released atomic.Int32
}

func (h *spliceHandler) Open(ctx context.Context, nc net.Conn, log hclog.Logger) (net.Conn, Conn, error) {
	if h.wrap != nil {
		nc = h.wrap(nc)
	}
	return nc, &testConn{}, nil
}

func (h *spliceHandler) Handle(ctx context.Context, c Conn, frame []byte, size int) (Response, error) {
	pos, n := binary.BigEndian.Uint32(frame), binary.BigEndian.Uint32(frame[4:])
	return Response{Answer: func(context.Context) Frame {
		b := binary.BigEndian.AppendUint32(nil, n+2)
		b = append(b, '<', '>')
		return Frame{Bytes: b, Splices: []Splice{{At: 5, File: h.file, Pos: int64(pos), Len: int(n), Release: func() { h.released.Add(1) }}}}
	}}, nil
}

func (h *spliceHandler) RawToken(context.Context, Conn, []byte) ([]byte, error) { return nil, nil }
func (h *spliceHandler) Closed(context.Context, net.Conn, Conn, error)          {}

// notSocket hides a connection's file descriptor.
type notSocket struct{ net.Conn }

// TestSplicedFrames: a frame's splices reach the client in place, over a
// socket (sendfile) and over a connection that is not one (copied), for
// ranges from a byte to several megabytes (more than a socket buffer, so
// sendfile waits for the socket); every splice is released; a splice
// beyond the file's end closes the connection.
func TestSplicedFrames(t *testing.T) {
	content := make([]byte, 8<<20)
	rand.NewChaCha8([32]byte{3, 4}).Read(content)
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"sendfile", nil},
		{"copied", func(nc net.Conn) net.Conn { return notSocket{nc} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &spliceHandler{file: f, wrap: tc.wrap}
			_, addr := startServerWith(t, h, func(c *Config) {})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ranges := [][2]uint32{{0, 1}, {100, 4096}, {7, 6 << 20}, {uint32(len(content)) - 10, 10}}
			for _, r := range ranges {
				req := binary.BigEndian.AppendUint32(nil, 8)
				req = binary.BigEndian.AppendUint32(req, r[0])
				req = binary.BigEndian.AppendUint32(req, r[1])
				if _, err := nc.Write(req); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range ranges {
				got := readAnswer(t, nc)
				want := "<" + string(content[r[0]:r[0]+r[1]]) + ">"
				if !bytes.Equal([]byte(got), []byte(want)) {
					t.Fatalf("answer for %d bytes at %d: %d bytes, not the file's", r[1], r[0], len(got))
				}
			}
			if got := h.released.Load(); got != int32(len(ranges)) {
				t.Fatalf("%d splices released, want %d", got, len(ranges))
			}
			// A range past the end of the file (a log truncated under
			// a response): the connection closes.
			req := binary.BigEndian.AppendUint32(nil, 8)
			req = binary.BigEndian.AppendUint32(req, uint32(len(content))-5)
			req = binary.BigEndian.AppendUint32(req, 10)
			if _, err := nc.Write(req); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			total := 0
			for {
				n, err := nc.Read(buf)
				total += n
				if err != nil {
					break
				}
			}
			if total >= 4+12 {
				t.Fatalf("read %d bytes of an answer whose splice ran past the file, want the connection closed short of it", total)
			}
		})
	}
}
