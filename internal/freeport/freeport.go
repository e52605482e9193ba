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
)

// Addrs returns n distinct free loopback addresses, host:port. Each
// is free when probed; another process may take it before it is used.
// The ports are drawn below the kernel's ephemeral range when there is
// room (net.ipv4.ip_local_port_range), where no outgoing connection and
// no listener on port 0 is given one: a port from the ephemeral range,
// free when probed, was taken by another test's client connection
// before the broker it was meant for bound it.
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
			if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(low+rand.IntN(high-low))); err == nil {
				break
			}
		}
		if l == nil {
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return nil, fmt.Errorf("free loopback port: %w", err)
			}
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
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
