package network

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// answerHandler answers every frame with an empty frame at once.
type answerHandler struct{}

func (answerHandler) Open(_ context.Context, nc net.Conn, _ hclog.Logger) (net.Conn, Conn, error) {
	return nc, &testConn{}, nil
}

func (answerHandler) Handle(context.Context, Conn, []byte, int) (Response, error) {
	return Response{Answer: func(context.Context) Frame { return Frame{Bytes: binary.BigEndian.AppendUint32(nil, 0)} }}, nil
}

func (answerHandler) RawToken(context.Context, Conn, []byte) ([]byte, error) {
	return nil, errors.New("no SASL")
}

func (answerHandler) Closed(context.Context, net.Conn, Conn, error) {}

// connectOnce connects to addr from the address from, sends a request and
// reports whether it was answered (the connection served) rather than
// closed unread (throttled).
func connectOnce(t *testing.T, from, addr string) bool {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Errorf("dial from %s: %v", from, err)
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(frame("hello")); err != nil {
		return false // closed already
	}
	var size [4]byte
	_, err = io.ReadFull(nc, size[:])
	switch {
	case err == nil:
		return true
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
		return false
	default:
		var op *net.OpError
		if errors.As(err, &op) && !op.Timeout() {
			return false // reset
		}
		t.Errorf("read from a connection of %s: %v", from, err)
		return false
	}
}

// TestConnectionCreationRate: a client at 127.0.0.1 whose address has a
// connection_creation_rate of 10/s connects in a loop for 3 s, as fast as
// its connections are answered or closed; it is served no more than the
// rate allows (counted per second), its other connections are closed
// unserved after a delay, and a client at 127.0.0.2, without a quota,
// connecting in a loop beside it has every connection served.
func TestConnectionCreationRate(t *testing.T) {
	const quota = 10
	_, addr := startServerWith(t, answerHandler{}, func(c *Config) {
		c.MaxConnections, c.MaxConnectionsPerIP = 1000, 1000
		c.QuotaWindowNum, c.QuotaWindowSize = 2, time.Second
		c.ConnectionCreationRate = func(ip string) (float64, bool) { return quota, ip == "127.0.0.1" }
	})
	const span = 3 * time.Second
	start := time.Now()
	var limitedServed []time.Duration
	var limitedRefused, otherServed, otherRefused int
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for time.Since(start) < span {
			if connectOnce(t, "127.0.0.1", addr) {
				limitedServed = append(limitedServed, time.Since(start))
			} else {
				limitedRefused++
			}
		}
	}()
	go func() {
		defer wg.Done()
		for time.Since(start) < span {
			if connectOnce(t, "127.0.0.2", addr) {
				otherServed++
			} else {
				otherRefused++
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("in %v: 127.0.0.1 served %d, throttled %d; 127.0.0.2 served %d, throttled %d",
		elapsed, len(limitedServed), limitedRefused, otherServed, otherRefused)

	// The rate is measured over at most two samples of a second, at
	// least one: no second serves more than twice the quota, and the
	// whole run no more than the quota over its length and a sample.
	perSecond := make([]int, int(elapsed/time.Second)+1)
	for _, at := range limitedServed {
		perSecond[at/time.Second]++
	}
	for i, n := range perSecond {
		if n > 2*quota {
			t.Errorf("127.0.0.1 served %d connections in second %d: want at most %d", n, i, 2*quota)
		}
	}
	if most := quota * (elapsed.Seconds() + 1); float64(len(limitedServed)) > most {
		t.Errorf("127.0.0.1 served %d connections in %v: want at most %.0f", len(limitedServed), elapsed, most)
	}
	if len(limitedServed) < quota || limitedRefused == 0 {
		t.Errorf("127.0.0.1: got %d served and %d throttled, want at least %d served and some throttled", len(limitedServed), limitedRefused, quota)
	}
	if otherRefused != 0 || otherServed <= 4*len(limitedServed) {
		t.Errorf("127.0.0.2: got %d served and %d throttled, want none throttled and many more served than 127.0.0.1's %d", otherServed, otherRefused, len(limitedServed))
	}
}

// TestMaxConnectionCreationRate: with max.connection.creation.rate 20/s,
// 60 connections made as fast as they are served take at least the two
// seconds beyond the first sample's burst that the rate implies.
func TestMaxConnectionCreationRate(t *testing.T) {
	const rate, conns = 20, 60
	_, addr := startServerWith(t, answerHandler{}, func(c *Config) {
		c.MaxConnections, c.MaxConnectionsPerIP = 1000, 1000
		c.QuotaWindowNum, c.QuotaWindowSize = 2, time.Second
		c.MaxConnectionCreationRate = rate
	})
	start := time.Now()
	for i := range conns {
		if !connectOnce(t, "127.0.0.1", addr) {
			t.Fatalf("connection %d: closed unserved, want served after a wait", i)
		}
	}
	// The first sample takes rate connections at once; the rest come at
	// rate per second.
	if elapsed, least := time.Since(start), time.Duration(conns-2*rate)*time.Second/rate; elapsed < least {
		t.Errorf("%d connections at max.connection.creation.rate=%d: took %v, want at least %v", conns, rate, elapsed, least)
	} else {
		t.Logf("%d connections at max.connection.creation.rate=%d: took %v", conns, rate, elapsed)
	}
}
