package network

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// Frame is an encoded response frame: Bytes, into which Splices insert
// byte ranges of files. The writer sends a splice's bytes from the file
// to the socket (sendfile: from the page cache, never through the
// broker's memory), as Kafka's broker sends the records of a fetch; on a
// connection that cannot (TLS), it reads them and writes them. The frame's
// size prefix counts the spliced bytes. A Frame of nil Bytes is no
// answer.
type Frame struct {
	Bytes   []byte
	Splices []Splice
}

// Splice is a range of a file that goes into a frame's bytes at At,
// before Bytes[At]; a frame's splices are in order of At. Release ends
// the hold on the file; the writer calls it once the splice is written
// or dropped.
type Splice struct {
	At      int
	File    *os.File
	Pos     int64
	Len     int
	Release func()
}

// Len is the frame's length on the wire.
func (f Frame) Len() int {
	n := len(f.Bytes)
	for _, s := range f.Splices {
		n += s.Len
	}
	return n
}

// release releases every splice of f.
func (f Frame) release() {
	for _, s := range f.Splices {
		if s.Release != nil {
			s.Release()
		}
	}
}

// errShortFile is a splice whose file ended before its range did: the
// log was truncated since the response was built. The frame's size is
// already on the wire, so the connection closes, as Kafka's broker closes
// one whose FileRecords were truncated during the write.
var errShortFile = errors.New("the file of a response's records was truncated while it was sent")

// writeFrame writes f to bw, whose underlying connection is nc: the byte
// runs through bw, each splice from its file straight to nc once bw is
// flushed.
func writeFrame(bw *bufio.Writer, nc net.Conn, f Frame) error {
	at := 0
	for _, s := range f.Splices {
		if _, err := bw.Write(f.Bytes[at:s.At]); err != nil {
			return err
		}
		at = s.At
		if err := writeSplice(bw, nc, s); err != nil {
			return err
		}
	}
	_, err := bw.Write(f.Bytes[at:])
	return err
}

// writeSplice writes s's file range: with sendfile when nc is a socket
// (a plaintext connection), else read through bw.
func writeSplice(bw *bufio.Writer, nc net.Conn, s Splice) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		n, err := io.Copy(bw, io.NewSectionReader(s.File, s.Pos, int64(s.Len)))
		if err == nil && n < int64(s.Len) {
			err = errShortFile
		}
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	fc, err := s.File.SyscallConn()
	if err != nil {
		return err
	}
	off, left := s.Pos, s.Len
	var serr error
	werr := rc.Write(func(sock uintptr) bool {
		for left > 0 {
			var n int
			if cerr := fc.Control(func(file uintptr) {
				n, serr = syscall.Sendfile(int(sock), int(file), &off, left)
			}); cerr != nil {
				serr = cerr
				return true
			}
			switch {
			case errors.Is(serr, syscall.EAGAIN):
				// The socket's buffer is full: wait until it is
				// writable (and within the connection's deadline).
				serr = nil
				if n > 0 {
					left -= n
				}
				return false
			case errors.Is(serr, syscall.EINTR):
				serr = nil
				continue
			case serr != nil:
				return true
			case n == 0:
				serr = errShortFile
				return true
			}
			left -= n
		}
		return true
	})
	if werr != nil {
		return werr
	}
	if serr != nil {
		return fmt.Errorf("sendfile: %w", serr)
	}
	return nil
}
