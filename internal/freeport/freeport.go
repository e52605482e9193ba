// Package freeport finds free loopback ports for servers that the tests
// and benchmarks start as other processes, which bind them later.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Addrs returns n distinct free loopback addresses, host:port. Each
// is free when probed; another process may take it before it is used.
// The ports are drawn below the kernel's ephemeral range when there is
// room (net.ipv4.ip_local_port_range), where no outgoing connection and
// no listener on port 0 is given one: a port from the ephemeral range,
// free when probed, was taken by another test's client connection
// before the broker it was meant for bound it.
//
// Nor does it give a port it gave in the last reuseAfter, to any caller
// in this process: the port is free until its server binds it, so a
// second call, for the next broker's metrics say, could draw it again
// and two brokers would be handed one port (seen: a cluster whose second
// broker exited with "address already in use").
func Addrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	low, high := BelowEphemeral()
	addrs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var l net.Listener
		var err error
		// A drawn port may be in use by a listener of this kind: draw
		// again, then fall back to the kernel's choice.
		for try := 0; try < 64 && high > low; try++ {
			port := low + rand.IntN(high-low)
			if given.recent(port) {
				continue
			}
			if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				break
			}
		}
		// The kernel's choice, tried as often: it may repeat a port
		// given lately too.
		for try := 0; l == nil && try < 64; try++ {
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return nil, fmt.Errorf("free loopback port: %w", err)
			}
			if given.recent(l.Addr().(*net.TCPAddr).Port) {
				l.Close()
				l = nil
			}
		}
		if l == nil {
			return nil, fmt.Errorf("free loopback port: every port tried was given in the last %v", reuseAfter)
		}
		given.add(l.Addr().(*net.TCPAddr).Port)
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// reuseAfter is how long Addrs keeps a port it gave from being given
// again: longer than any server takes to bind the port it was handed.
const reuseAfter = 2 * time.Minute

// given is the ports Addrs gave in this process, with when.
var given = &givenPorts{at: map[int]time.Time{}}

type givenPorts struct {
	mu sync.Mutex
	at map[int]time.Time
}

// recent reports whether port was given within reuseAfter.
func (g *givenPorts) recent(port int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.at[port]
	return ok && time.Since(t) < reuseAfter
}

// add records port as given now, and forgets the ports given longer ago
// than reuseAfter.
func (g *givenPorts) add(port int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for p, t := range g.at {
		if now.Sub(t) >= reuseAfter {
			delete(g.at, p)
		}
	}
	g.at[port] = now
}

// BelowEphemeral returns the ports [low, high) Addrs draws from:
// from 10000 up to the start of the kernel's ephemeral range, or an
// empty range when that leaves fewer than 1000 ports or the range cannot
// be read.
func BelowEphemeral() (low, high int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(fields[0])
	if err != nil || first-10000 < 1000 {
		return 0, 0
	}
	return 10000, first
}
