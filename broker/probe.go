package broker

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// Crash probes (broker.crash.probe.interval.ms). A broker's session
// expires only after the session timeout, whatever the failure. But when
// a broker's process is gone, the kernel of its host refuses a connection
// to its listener at once (a TCP reset), which it does not for a process
// that is paused, overloaded or cut off (the connection is accepted, or
// times out). So the broker that runs the controller connects to every
// registered broker's listener each interval, and a refusal fences that
// incarnation at once (controller.State.Unreachable); a broker that
// answers again is live again. Only ECONNREFUSED counts: a timeout or an
// unreachable network proves nothing, and a whole host lost (no kernel
// left to answer) still waits for its session to expire. The probes only
// connect and close: they send nothing, so the brokers log them at debug
// level at most.

// probeOutcome is what one probe of a listener found.
type probeOutcome int

const (
	probeAnswered probeOutcome = iota // the connection was accepted
	probeRefused                      // the host refused it: no process listens
	probeUnknown                      // anything else (timeout, network)
)

// probeListener connects to addr within timeout and closes the
// connection at once.
func probeListener(ctx context.Context, addr string, timeout time.Duration) probeOutcome {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
		conn.Close()
		return probeAnswered
	case errors.Is(err, syscall.ECONNREFUSED):
		return probeRefused
	}
	return probeUnknown
}

// probeAll probes the listener of every broker of bs but self, in
// parallel, each within timeout, and returns their outcomes in order.
func probeAll(ctx context.Context, self coord.BrokerID, bs []coord.Broker, timeout time.Duration) []probeOutcome {
	outcomes := make([]probeOutcome, len(bs))
	var wg sync.WaitGroup
	for i, br := range bs {
		if br.ID == self {
			outcomes[i] = probeAnswered
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i] = probeListener(ctx, br.Addr(), timeout)
		}()
	}
	wg.Wait()
	return outcomes
}

// crashedAtStart is controller.Config.Crashed for one controller term: the
// brokers whose listeners refuse connections as the controller starts,
// probed within interval. found keeps them, so the term's probes
// (probeBrokers) do not report them again.
type crashedAtStart struct {
	m        *membership
	interval time.Duration
	found    []coord.Broker
}

func (c *crashedAtStart) probe(ctx context.Context, bs []coord.Broker) []coord.Broker {
	for i, out := range probeAll(ctx, coord.BrokerID(c.m.cfg.BrokerID), bs, c.interval) {
		if out == probeRefused {
			c.m.logger.Warn("broker's listener refuses connections: its process is gone", "broker", bs[i].ID, "addr", bs[i].Addr())
			c.found = append(c.found, bs[i])
		}
	}
	return c.found
}

// probeBrokers runs on the controller's broker for one controller term,
// until ctx ends: as soon as it knows the registered brokers, and then
// every interval, it probes the listener of every registered broker but
// this one, in parallel, and reports a refusal to ctrl
// (BrokerUnreachable) once per incarnation, and an answer from an
// incarnation it reported (BrokerReachable). The first probe does not
// wait an interval: a term that starts because the previous controller
// crashed has that broker's partitions to move. Those already found as
// the controller started (fenced) count as reported.
func (m *membership) probeBrokers(ctx context.Context, ctrl *controller.Controller, interval time.Duration, atStart []coord.Broker) {
	members, err := m.backend.WatchMembers(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.Warn("crash probes off for this controller term: watch members failed", "error", err)
		}
		return
	}
	self := coord.BrokerID(m.cfg.BrokerID)
	var registered []coord.Broker
	// fenced holds the broker epoch of each broker reported unreachable.
	fenced := map[coord.BrokerID]int64{}
	for _, br := range atStart {
		fenced[br.ID] = br.Epoch
	}
	probe := func() error {
		outcomes := probeAll(ctx, self, registered, interval)
		for i, br := range registered {
			epoch, wasFenced := fenced[br.ID]
			switch {
			case outcomes[i] == probeRefused && (!wasFenced || epoch != br.Epoch):
				m.logger.Warn("broker's listener refuses connections: its process is gone", "broker", br.ID, "addr", br.Addr())
				if err := ctrl.BrokerUnreachable(ctx, br); err != nil {
					return err
				}
				fenced[br.ID] = br.Epoch
			case outcomes[i] == probeAnswered && wasFenced && epoch == br.Epoch:
				if err := ctrl.BrokerReachable(ctx, br); err != nil {
					return err
				}
				delete(fenced, br.ID)
			}
		}
		return nil
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case bs, ok := <-members:
			if !ok {
				return
			}
			registered = bs
			epochs := map[coord.BrokerID]int64{}
			for _, br := range bs {
				epochs[br.ID] = br.Epoch
			}
			for id, epoch := range fenced {
				if epochs[id] != epoch {
					delete(fenced, id)
				}
			}
			if first {
				first = false
				if probe() != nil {
					return
				}
			}
		case <-tick.C:
			if probe() != nil {
				return
			}
		}
	}
}

// probeController runs on every broker until ctx ends; while the backend
// in use can evict a controller (coord.ControllerEvictor: ZooKeeper, etcd),
// every interval it probes the listener of the controller the backend
// names, and when the controller's host refuses the connection (its
// process is gone, its session not yet expired) it evicts that
// controller's term, once, so that the next election starts at once
// rather than at the session's expiry. Every broker does so; the first
// eviction wins and the others find a newer term or none. On Raft the
// Raft election already follows a crashed leader.
func (m *membership) probeController(ctx context.Context, interval time.Duration) {
	self := coord.BrokerID(m.cfg.BrokerID)
	var evicted coord.ControllerInfo
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// The backend in use may change with a migration (coord/migration).
		evictor, ok := coord.Current(m.backend).(coord.ControllerEvictor)
		info := m.BackendController()
		if !ok || info.ID == coord.NoBroker || info.ID == self || info == evicted {
			continue
		}
		_, live, _ := m.cache.View()
		var addr string
		for _, br := range live {
			if br.ID == info.ID {
				addr = br.Addr()
			}
		}
		if addr == "" || probeListener(ctx, addr, interval) != probeRefused {
			continue
		}
		m.logger.Warn("the controller's listener refuses connections: its process is gone; evicting its term",
			"controller", info.ID, "controller_epoch", info.Epoch, "addr", addr)
		ectx, cancel := context.WithTimeout(ctx, m.cfg.Coord.SessionTimeout)
		err := evictor.EvictController(ectx, info)
		cancel()
		if err != nil {
			m.logger.Warn("evict the crashed controller failed; its session's expiry will", "error", err)
			continue
		}
		evicted = info
	}
}
