// Package kafkatest holds what tripod's tests use to speak the Kafka
// protocol without a client: a fake peer that answers one API with a set
// body, and record batches built by hand. It holds no broker code and
// nothing in tripod's serving path imports it.
package kafkatest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersions is ApiVersions' key.
const apiVersions = 18

// Peer is a TCP server standing in for another broker or the
// controller: it answers ApiVersions advertising one API up to one
// version, answers that API's requests with a set body, and closes the
// connection on any other request. Close (a cleanup of the test) waits
// for its goroutines.
type Peer struct {
	ln net.Listener
	wg sync.WaitGroup

	mu           sync.Mutex
	key, version int16
	body         []byte
	conns        map[net.Conn]struct{}
	closed       bool
}

// Start starts a Peer on a loopback port, closed when the
// test ends.
func Start(tb testing.TB) *Peer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	p := &Peer{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.accept()
	}()
	tb.Cleanup(p.close)
	return p
}

// HostPort returns the peer's address.
func (p *Peer) HostPort() (string, int32) {
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), int32(a.Port)
}

// Set makes the peer answer requests of key with body, advertising
// versions up to version.
func (p *Peer) Set(key, version int16, body []byte) {
	p.mu.Lock()
	p.key, p.version, p.body = key, version, body
	p.mu.Unlock()
}

// close stops accepting, closes every connection and waits for the
// peer's goroutines.
func (p *Peer) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for nc := range p.conns {
		nc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// accept serves connections until the listener closes.
func (p *Peer) accept() {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.conns[nc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, nc)
				p.mu.Unlock()
				nc.Close()
			}()
			_ = p.serve(nc)
		}()
	}
}

// serve answers one connection's requests until it closes or sends a
// request the peer does not answer.
func (p *Peer) serve(nc net.Conn) error {
	br := bufio.NewReader(nc)
	for {
		var sizeBuf [4]byte
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(sizeBuf[:])
		if size < 8 || size > 64<<20 {
			return fmt.Errorf("request frame of %d bytes", size)
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			return err
		}
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := binary.BigEndian.Uint32(frame[4:])
		p.mu.Lock()
		wantKey, maxVersion, body := p.key, p.version, p.body
		p.mu.Unlock()
		var resp kmsg.Response
		switch key {
		case apiVersions:
			av := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []struct{ key, max int16 }{{apiVersions, 3}, {wantKey, maxVersion}} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MaxVersion = k.key, k.max
				av.ApiKeys = append(av.ApiKeys, ak)
			}
			av.SetVersion(version)
			body = av.AppendTo(nil)
			resp = av
		case wantKey:
			resp = kmsg.ResponseForKey(key)
			resp.SetVersion(version)
		default:
			return errors.New("request for another api")
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 4, 9+len(body)), corr)
		if resp.IsFlexible() && key != apiVersions {
			out = append(out, 0)
		}
		out = append(out, body...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := nc.Write(out); err != nil {
			return err
		}
	}
}

// Addr returns the peer's address as host:port.
func (p *Peer) Addr() string { return p.ln.Addr().String() }
