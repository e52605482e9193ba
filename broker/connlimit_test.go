package broker

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMaxConnectionsPerIP opens connections from 127.0.0.1 up to
// max.connections.per.ip: one more is closed at once and counted, the
// ones open keep being served, and once one closes a new one is served.
// An override for the address replaces the limit.
func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sets  map[string]string
		limit int
	}{
		{"per ip", map[string]string{"max.connections.per.ip": "2"}, 2},
		{"override", map[string]string{"max.connections.per.ip": "100", "max.connections.per.ip.overrides": "127.0.0.1:1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			for k, v := range tc.sets {
				if err := cfg.Set(k, v); err != nil {
					t.Fatalf("set %s: %v", k, err)
				}
			}
			b := startBroker(t, cfg)
			var open []net.Conn
			for i := range tc.limit {
				nc := dialBroker(t, b)
				roundTrip(t, nc, kmsg.NewPtrApiVersionsRequest(), int32(i))
				open = append(open, nc)
			}
			over := dialBroker(t, b)
			expectClosed(t, over)
			if got := counterValue(b.metrics.connectionsRefused); got != 1 {
				t.Fatalf("tripod_connections_refused_total: got %v, want 1", got)
			}
			roundTrip(t, open[0], kmsg.NewPtrApiVersionsRequest(), 100)
			open[0].Close()
			// The closed connection is released once the broker sees it
			// end; until then a new one may still be refused.
			deadline := time.Now().Add(10 * time.Second)
			for {
				nc := dialBroker(t, b)
				if answered(nc) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no connection served within 10s of one of the %d closing", tc.limit)
				}
			}
		})
	}
}

// TestMaxConnections holds max.connections open: the broker stops
// accepting, so a further connection is not answered while they stay
// open, and is served once one of them closes.
func TestMaxConnections(t *testing.T) {
	cfg := testConfig(t)
	if err := cfg.Set("max.connections", "2"); err != nil {
		t.Fatalf("set max.connections: %v", err)
	}
	b := startBroker(t, cfg)
	first, second := dialBroker(t, b), dialBroker(t, b)
	roundTrip(t, first, kmsg.NewPtrApiVersionsRequest(), 1)
	roundTrip(t, second, kmsg.NewPtrApiVersionsRequest(), 2)
	third := dialBroker(t, b) // In the kernel's backlog, not accepted.
	if _, err := third.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 3)); err != nil {
		t.Fatalf("write: %v", err)
	}
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var size [4]byte
	if _, err := third.Read(size[:]); err == nil {
		t.Fatalf("third connection answered with max.connections=2 open, want it left waiting")
	} else if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("third connection: got %v, want no answer yet", err)
	}
	first.Close()
	frame := readFrame(t, third)
	decodeResponse(t, kmsg.NewPtrApiVersionsRequest(), frame, 3)
}

// answered reports whether an ApiVersions on nc is answered before the
// connection closes.
func answered(nc net.Conn) bool {
	if _, err := nc.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 7)); err != nil {
		return false
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	_, err := nc.Read(size[:])
	return err == nil
}
