package network

import (
	"net"
	"sync"

	"github.com/tripodmq/tripod/internal/notify"
)

// connLimiter keeps the Kafka listeners within max.connections and
// max.connections.per.ip, as Kafka's ConnectionQuotas: at the broker-wide
// limit the accept loops wait until a connection closes (but a protected
// listener's, see Listener.Protected); a connection over its address's
// limit is closed at once. The accept loops are its only admitters;
// connections release themselves when they end. It is safe for
// concurrent use.
type connLimiter struct {
	max       int
	perIP     int
	overrides map[string]int32

	mu    sync.Mutex
	total int
	byIP  map[string]int
	// freed announces every release of a connection, for an accept loop
	// waiting at max.connections.
	freed notify.Broadcast
}

func newConnLimiter(cfg Config) *connLimiter {
	return &connLimiter{
		max:       int(cfg.MaxConnections),
		perIP:     int(cfg.MaxConnectionsPerIP),
		overrides: cfg.MaxConnectionsPerIPOverrides,
		byIP:      map[string]int{},
	}
}

// full reports whether max.connections are open, with a channel closed
// at the next release.
func (l *connLimiter) full() (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total >= l.max, l.freed.Next()
}

// admit counts a new connection from addr, unless its address already has
// as many as its limit allows: then it reports false and the limit.
func (l *connLimiter) admit(addr net.Addr) (bool, int) {
	ip := hostOf(addr)
	limit := l.perIP
	if n, ok := l.overrides[ip]; ok {
		limit = int(n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip] >= limit {
		return false, limit
	}
	l.byIP[ip]++
	l.total++
	return true, limit
}

// release uncounts a connection admitted from addr.
func (l *connLimiter) release(addr net.Addr) {
	ip := hostOf(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.total--
	l.freed.Notify()
}

// hostOf returns the IP address of a TCP address, in net.IP's canonical
// form, or the address's string for any other kind.
func hostOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return addr.String()
}
