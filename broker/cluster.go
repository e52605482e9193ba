package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// propagationWait bounds how long an admin request waits for the other
// brokers to learn of its change.
const propagationWait = 5 * time.Second

// retryBackoff is the wait between attempts to register, campaign or ask
// the controller again.
const retryBackoff = 250 * time.Millisecond

// run is the broker's membership loop, owned by the Broker and ended by
// Close (ctx): register, campaign and run the controller while this broker
// wins, and register again when the session ends. It closes every session
// it opened before it returns.
func (b *Broker) run(ctx context.Context) {
	for {
		sess, err := b.register(ctx)
		if err != nil {
			return
		}
		b.setSession(sess)
		b.campaign(ctx, sess)
		b.endSession(sess)
		if err := sess.Close(); err != nil && !errors.Is(err, coord.ErrClosed) && !errors.Is(err, coord.ErrSessionExpired) {
			b.logger.Warn("close session failed", "error", err)
		}
		if ctx.Err() != nil {
			return
		}
		b.logger.Warn("session ended; registering again", "broker_epoch", sess.Broker().Epoch, "error", sess.Err())
	}
}

// watchMembers keeps the metadata cache's live brokers equal to the
// backend's until ctx ends.
func (b *Broker) watchMembers(ctx context.Context) {
	for {
		members, err := b.backend.WatchMembers(ctx)
		if err == nil {
			for live := range members {
				b.cache.setLive(live)
			}
		} else if ctx.Err() == nil {
			b.logger.Warn("watch live brokers failed; retrying", "error", err)
		}
		if !sleepCtx(ctx, retryBackoff) {
			return
		}
	}
}

// watchController keeps backendCtrl up with the controller the backend
// names, until ctx ends.
func (b *Broker) watchController(ctx context.Context) {
	for {
		infos, err := b.backend.WatchController(ctx)
		if err == nil {
			for info := range infos {
				b.noteBackendController(info)
			}
		} else if ctx.Err() == nil {
			b.logger.Warn("watch controller failed; retrying", "error", err)
		}
		if !sleepCtx(ctx, retryBackoff) {
			return
		}
	}
}

// noteBackendController records info as the controller the backend
// names, unless a newer epoch is known already.
func (b *Broker) noteBackendController(info coord.ControllerInfo) {
	b.backendCtrlMu.Lock()
	defer b.backendCtrlMu.Unlock()
	if info.Epoch < b.backendCtrl.Epoch || info == b.backendCtrl {
		return
	}
	b.backendCtrl = info
	b.backendCtrlChanged.Notify()
}

// backendController returns the controller the backend names, as this
// broker last learnt it.
func (b *Broker) backendController() coord.ControllerInfo {
	b.backendCtrlMu.Lock()
	defer b.backendCtrlMu.Unlock()
	return b.backendCtrl
}

// awaitBackendController lets this broker's view of the backend's
// controller catch up with a controller request of epoch before the
// request is checked (acceptControllerLocked): if the watch has not shown
// that epoch yet, it reads the backend's controller, then waits for the
// watch, for at most the session timeout in all (a ZooKeeper server may
// answer a read from behind). It holds no lock, so a request claiming an
// epoch the backend never names delays only its own connection. It fails
// only when the backend cannot be read: the request is then neither
// accepted nor refused, and the handler closes its connection so that the
// controller's sender retries it.
func (b *Broker) awaitBackendController(ctx context.Context, epoch int64) error {
	// caughtUp: the view names a controller of epoch, or a later epoch.
	caughtUp := func(known coord.ControllerInfo) bool {
		return known.Epoch > epoch || (known.Epoch == epoch && known.ID != coord.NoBroker)
	}
	if caughtUp(b.backendController()) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Coord.SessionTimeout)
	defer cancel()
	info, err := b.backend.Controller(ctx)
	if err != nil {
		return fmt.Errorf("ask the coordination backend for the controller of epoch %d: %w", epoch, err)
	}
	b.noteBackendController(info)
	for {
		b.backendCtrlMu.Lock()
		known, changed := b.backendCtrl, b.backendCtrlChanged.Next()
		b.backendCtrlMu.Unlock()
		if caughtUp(known) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// register registers this broker, retrying while a previous incarnation's
// session has not expired or the service is unreachable. It fails only
// when ctx ends.
//
// It asks the backend to replace the registration of lastEpoch, which the
// log dir locks prove dead (KRaft's incarnation rule), so a broker that
// crashed rejoins at once instead of after a session timeout; after every
// registration it records the new epoch on disk for the next incarnation.
func (b *Broker) register(ctx context.Context) (coord.Session, error) {
	me := b.self()
	me.Replaces = b.lastEpoch
	waiting := false
	for {
		// Each attempt is bounded by the session timeout, so an attempt
		// stuck on an unresponsive coordinator (a paused Raft leader the
		// request was forwarded to) is retried against whoever leads now.
		attemptCtx, cancel := context.WithTimeout(ctx, b.cfg.Coord.SessionTimeout)
		sess, err := b.backend.Register(attemptCtx, me)
		cancel()
		if err == nil {
			epoch := sess.Broker().Epoch
			if old := sess.Replaced(); old != 0 {
				b.logger.Info("replaced the previous registration of this broker", "previous_broker_epoch", old, "broker_epoch", epoch)
			}
			b.logger.Info("registered", "broker_epoch", epoch)
			b.lastEpoch = epoch
			if err := writeRegistrationEpoch(b.cfg.LogDirs[0], epoch); err != nil {
				b.logger.Warn("cannot record the broker epoch: a restart after a crash waits for this registration to expire", "error", err)
			}
			return sess, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, coord.ErrExists) {
			if !waiting {
				b.logger.Info("waiting for the previous registration of this broker to expire", "error", err)
				waiting = true
			}
		} else {
			b.logger.Warn("register failed; retrying", "error", err)
		}
		if !sleepCtx(ctx, retryBackoff) {
			return nil, ctx.Err()
		}
	}
}

// campaign runs for controller while sess lives: each won term runs the
// controller until the term ends, then the broker campaigns again.
func (b *Broker) campaign(ctx context.Context, sess coord.Session) {
	for {
		term, err := b.backend.Campaign(ctx, sess)
		if err != nil {
			if ctx.Err() != nil || sess.Err() != nil {
				return
			}
			b.logger.Warn("campaign failed; retrying", "error", err)
			if !sleepCtx(ctx, retryBackoff) {
				return
			}
			continue
		}
		b.runController(ctx, term)
		if ctx.Err() != nil || sess.Err() != nil {
			return
		}
	}
}

// runController runs the controller for term until the term ends or ctx
// does, then resigns the term and stops the controller's sender.
func (b *Broker) runController(ctx context.Context, term coord.Term) {
	log := b.logger.With("controller_epoch", term.Epoch())
	log.Info("controller elected: this broker is the controller")
	// The term is the backend's word: this broker's own requests, sent
	// in process, need no read to be confirmed.
	b.noteBackendController(coord.ControllerInfo{ID: term.Controller(), Epoch: term.Epoch()})
	snd := newSender(b)
	defer snd.Close()
	cc := b.cfg.controllerConfig(b.logger)
	interval := b.cfg.BrokerProbeInterval
	atStart := &crashedAtStart{b: b, interval: interval}
	if interval > 0 {
		cc.Crashed = atStart.probe
	}
	ctrl, err := controller.Start(term.Context(), cc, b.backend, term, snd)
	if err != nil {
		log.Warn("start controller failed; resigning", "error", err)
		b.resign(term)
		return
	}
	snd.bind(ctrl)
	if interval > 0 {
		probeCtx, stopProbes := context.WithCancel(term.Context())
		probesDone := make(chan struct{})
		go func() {
			defer close(probesDone)
			b.probeBrokers(probeCtx, ctrl, interval, atStart.found)
		}()
		defer func() {
			stopProbes()
			<-probesDone
		}()
	}
	// The controller answers admin requests only once it has taken in
	// the live brokers: its first UpdateMetadata to this broker shows it.
	if b.waitAccepted(ctx, ctrl, term.Epoch()) {
		b.setController(ctrl, snd)
		b.cache.setController(coord.BrokerID(b.cfg.BrokerID))
		select {
		case <-ctrl.Done():
		case <-ctx.Done():
		}
	}
	b.setController(nil, nil)
	b.resign(term)
	<-ctrl.Done()
	log.Info("controller stopped", "reason", ctrl.Err())
}

// waitAccepted waits until this broker has accepted a request of
// controller epoch epoch; it returns false if ctrl stops or ctx ends
// first.
func (b *Broker) waitAccepted(ctx context.Context, ctrl *controller.Controller, epoch int64) bool {
	for {
		_, _, changed := b.cache.view()
		b.stateMu.Lock()
		accepted := b.controllerEpoch >= epoch
		b.stateMu.Unlock()
		if accepted {
			return true
		}
		select {
		case <-changed:
		case <-ctrl.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// resign gives up term, bounded by a second.
func (b *Broker) resign(term coord.Term) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := term.Resign(ctx); err != nil && !errors.Is(err, coord.ErrClosed) {
		b.logger.Debug("resign controller term failed", "error", err)
	}
}

// controller returns the controller this broker runs, or nil.
func (b *Broker) controller() *controller.Controller {
	b.ctrlMu.Lock()
	defer b.ctrlMu.Unlock()
	return b.ctrl
}

func (b *Broker) setController(c *controller.Controller, snd *sender) {
	b.ctrlMu.Lock()
	b.ctrl, b.snd = c, snd
	b.ctrlMu.Unlock()
}

// waitPropagated waits until every broker has answered the controller
// requests queued so far (so each knows what was just committed), or ctx
// ends, or propagationWait passes (a broker that stopped answering must
// not hold up an admin request until its session expires); it reports
// whether they have.
func (b *Broker) waitPropagated(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, propagationWait)
	defer cancel()
	b.ctrlMu.Lock()
	snd := b.snd
	b.ctrlMu.Unlock()
	if snd == nil {
		return false
	}
	return snd.waitDelivered(ctx)
}

// setSession makes sess's broker epoch this incarnation's.
func (b *Broker) setSession(sess coord.Session) {
	b.epochMu.Lock()
	defer b.epochMu.Unlock()
	b.brokerEpoch = sess.Broker().Epoch
	b.epochFloor = b.brokerEpoch
	b.epochChanged.Notify()
}

// endSession stops accepting anything addressed to sess's incarnation.
func (b *Broker) endSession(sess coord.Session) {
	b.epochMu.Lock()
	defer b.epochMu.Unlock()
	b.brokerEpoch = -1
	b.epochFloor = sess.Broker().Epoch + 1
	b.epochChanged.Notify()
}

// currentEpoch returns the live session's broker epoch, or -1.
func (b *Broker) currentEpoch() int64 {
	b.epochMu.Lock()
	defer b.epochMu.Unlock()
	return b.brokerEpoch
}

// checkBrokerEpoch reports whether a controller request addressed to
// broker epoch epoch is for this incarnation. While the broker registers,
// a request may carry the new epoch before Register has returned it: such
// a request waits (until ctx ends) for the registration, then is checked.
func (b *Broker) checkBrokerEpoch(ctx context.Context, epoch int64) bool {
	for {
		b.epochMu.Lock()
		current, floor, changed := b.brokerEpoch, b.epochFloor, b.epochChanged.Next()
		b.epochMu.Unlock()
		if epoch < floor {
			return false
		}
		if current >= 0 {
			return epoch == current
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// controlledShutdown asks the controller to move every leadership off this
// broker, until it answers with none remaining, an answer moves nothing
// more (the partitions left have no other live ISR member), or ctx ends.
// A broker that is the only live one has nobody to hand over to, and one
// without a live session holds no leadership.
func (b *Broker) controlledShutdown(ctx context.Context) {
	start := time.Now()
	if _, live, _ := b.cache.view(); len(live) == 1 && int32(live[0].ID) == b.cfg.BrokerID {
		b.logger.Info("controlled shutdown skipped: no other live broker")
		return
	}
	previous := -1
	for attempt := 1; ; attempt++ {
		epoch := b.currentEpoch()
		if epoch < 0 {
			// Between sessions the controller has already moved every
			// leadership of the ended one.
			b.logger.Info("controlled shutdown skipped: not registered")
			return
		}
		remaining, err := b.askControlledShutdown(ctx, epoch)
		if err == nil && remaining == 0 {
			b.logger.Info("controlled shutdown done", "elapsed", time.Since(start), "attempts", attempt)
			return
		}
		if err == nil && remaining == previous {
			b.logger.Warn("controlled shutdown incomplete: no other live ISR member for some partitions", "remaining", remaining, "elapsed", time.Since(start))
			return
		}
		if err == nil {
			previous = remaining
		}
		b.logger.Info("controlled shutdown not done yet", "remaining", remaining, "error", err)
		if !sleepCtx(ctx, retryBackoff) {
			b.logger.Warn("controlled shutdown incomplete: deadline passed", "elapsed", time.Since(start), "remaining", remaining)
			return
		}
	}
}

// askControlledShutdown sends one ControlledShutdown to the controller (in
// process when it is this broker) and returns how many partitions this
// broker still leads.
func (b *Broker) askControlledShutdown(ctx context.Context, epoch int64) (int, error) {
	if ctrl := b.controller(); ctrl != nil {
		remaining, err := ctrl.ControlledShutdown(ctx, coord.BrokerID(b.cfg.BrokerID), epoch)
		return len(remaining), err
	}
	req := kmsg.NewPtrControlledShutdownRequest()
	req.BrokerID = b.cfg.BrokerID
	req.BrokerEpoch = epoch
	kresp, err := b.askController(ctx, req)
	if err != nil {
		return -1, err
	}
	resp := kresp.(*kmsg.ControlledShutdownResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return len(resp.PartitionsRemaining), nil
}

// sleepCtx waits d; it returns false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// errNoController: the broker knows of no live controller to ask.
var errNoController = errors.New("no live controller known")

// controllerBroker returns the live controller from the metadata cache.
func (b *Broker) controllerBroker() (coord.Broker, error) {
	id, _, _ := b.cache.view()
	if id == coord.NoBroker {
		return coord.Broker{}, errNoController
	}
	cb, ok := b.cache.broker(id)
	if !ok {
		return coord.Broker{}, fmt.Errorf("controller %d: %w", id, errNoController)
	}
	return cb, nil
}

// askController sends req to the controller over a client connection.
func (b *Broker) askController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cb, err := b.controllerBroker()
	if err != nil {
		return nil, err
	}
	return b.requestTo(ctx, b.peerAddr(cb), req)
}

// requestTo sends req to the broker at addr over a new client connection
// and returns its answer.
func (b *Broker) requestTo(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := b.peerClient(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// peerClient returns a franz-go client of one other broker at addr, its
// inter-broker listener's endpoint (peerAddr), for broker-to-broker
// requests: over TLS with that listener's ssl.* settings when it is SSL
// (the truststore as it is now, this broker's certificate as it is at
// each handshake), authenticated by sasl.mechanism.inter.broker.protocol
// when it is SASL.
func (b *Broker) peerClient(addr string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("tripod-broker-%d", b.cfg.BrokerID)),
		kgo.DialTimeout(5 * time.Second)}
	opts = append(opts, extra...)
	if b.interBroker.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(b.interBroker.tls.ClientConfig()))
	}
	if s := b.interBroker.sasl; s != nil {
		opts = append(opts, kgo.SASL(s.Client))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client of broker %s: %w", addr, err)
	}
	return cl, nil
}

// registrationFile is the file in the first log dir holding the broker
// epoch of the broker's latest registration, as one decimal line.
const registrationFile = "broker.epoch"

// readRegistrationEpoch returns the broker epoch recorded in dir, or 0 when
// there is none or it cannot be read: the broker then replaces nothing.
func readRegistrationEpoch(dir string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, registrationFile))
	if err != nil {
		return 0
	}
	epoch, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || epoch < 0 {
		return 0
	}
	return epoch
}

// writeRegistrationEpoch records epoch in dir, atomically.
func writeRegistrationEpoch(dir string, epoch int64) error {
	return replica.WriteFileAtomic(filepath.Join(dir, registrationFile), []byte(strconv.FormatInt(epoch, 10)+"\n"))
}
