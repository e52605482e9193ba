package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/broker/metadata"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/createtopics"
	"github.com/tripodmq/tripod/internal/notify"
)

// propagationWait bounds how long an admin request waits for the other
// brokers to learn of its change.
const propagationWait = 5 * time.Second

// retryBackoff is the wait between attempts to register, campaign or ask
// the controller again.
const retryBackoff = 250 * time.Millisecond

// membership is this broker's part in the cluster: its registration with
// the coordination backend and the broker epoch of each session, its view
// of the controller the backend names, the campaign and the controller it
// runs while it wins, the probes that find crashed brokers, controlled
// shutdown, and the clients through which it reaches the other brokers.
// The Broker owns one and starts its loops; handlers ask it for the
// controller, the broker epoch and a client of a peer. It does not apply
// controller requests: it reads the epoch they reached through
// acceptedControllerEpoch, and the controller's sender (newSender)
// applies this broker's own in process.
type membership struct {
	// cfg is the broker's configuration (the Broker's own, never
	// changed after New).
	cfg     *config.Config
	logger  hclog.Logger
	backend coord.Backend
	cache   *metadata.Cache
	// interBroker is the listener brokers reach each other on
	// (inter.broker.listener.name): its name picks a peer's endpoint,
	// its TLS and SASL settings the client's.
	interBroker *listener
	// closing is closed when the broker starts to close.
	closing <-chan struct{}

	// self returns this broker as it registers: id and advertised
	// endpoints.
	self func() coord.Broker
	// acceptedControllerEpoch returns the highest controller epoch of a
	// request this broker has accepted.
	acceptedControllerEpoch func() int64
	// newSender returns the sender of a controller term's requests.
	newSender func() *sender
	// duringTerm, if set, runs while this broker is the controller, with
	// a context that ends with the term (before the term is resigned).
	duringTerm func(ctx context.Context)

	// lastEpoch is the broker epoch of this broker's latest registration
	// on its log dirs (registrationFile), 0 if unknown. Holding the dir
	// locks proves that its process is dead, so Register may replace it.
	// Read by New, then owned by the membership loop (run).
	lastEpoch int64

	// epochMu guards the broker epoch state (see CheckBrokerEpoch).
	epochMu sync.Mutex
	// brokerEpoch is the live session's broker epoch, -1 between
	// sessions; epochFloor is the lowest epoch that may still be this
	// process's; epochChanged announces every change.
	brokerEpoch  int64
	epochFloor   int64
	epochChanged notify.Broadcast

	// backendCtrlMu guards backendCtrl, the controller the coordination
	// backend names as this broker last learnt it (watchController, a
	// read, or its own election), and backendCtrlChanged, announcing
	// every change: a controller epoch above the accepted one is taken
	// only if the backend names it (acceptControllerLocked).
	backendCtrlMu      sync.Mutex
	backendCtrl        coord.ControllerInfo
	backendCtrlChanged notify.Broadcast

	// ctrlMu guards ctrl, the controller this broker runs, if any, and
	// its sender.
	ctrlMu sync.Mutex
	ctrl   *controller.Controller
	snd    *sender
}

// PeerAddr is where this broker reaches another: that broker's endpoint
// on the inter-broker listener, or its registered address (the
// inter-broker listener's) when it has none of that name.
func (m *membership) PeerAddr(cb coord.Broker) string {
	if ep, ok := cb.ListenerEndpoint(m.interBroker.Name); ok {
		return ep.Addr()
	}
	return cb.Addr()
}

// run is the broker's membership loop, owned by the Broker and ended by
// Close (ctx): register, campaign and run the controller while this broker
// wins, and register again when the session ends. It closes every session
// it opened before it returns.
func (m *membership) run(ctx context.Context) {
	for {
		sess, err := m.register(ctx)
		if err != nil {
			return
		}
		m.setSession(sess)
		m.campaign(ctx, sess)
		m.endSession(sess)
		if err := sess.Close(); err != nil && !errors.Is(err, coord.ErrClosed) && !errors.Is(err, coord.ErrSessionExpired) {
			m.logger.Warn("close session failed", "error", err)
		}
		if ctx.Err() != nil {
			return
		}
		m.logger.Warn("session ended; registering again", "broker_epoch", sess.Broker().Epoch, "error", sess.Err())
	}
}

// watchMembers keeps the metadata cache's live brokers equal to the
// backend's until ctx ends.
func (m *membership) watchMembers(ctx context.Context) {
	for {
		members, err := m.backend.WatchMembers(ctx)
		if err == nil {
			for live := range members {
				m.cache.SetLive(live)
			}
		} else if ctx.Err() == nil {
			m.logger.Warn("watch live brokers failed; retrying", "error", err)
		}
		if !sleepCtx(ctx, retryBackoff) {
			return
		}
	}
}

// watchController keeps backendCtrl up with the controller the backend
// names, until ctx ends.
func (m *membership) watchController(ctx context.Context) {
	for {
		infos, err := m.backend.WatchController(ctx)
		if err == nil {
			for info := range infos {
				m.noteBackendController(info)
			}
		} else if ctx.Err() == nil {
			m.logger.Warn("watch controller failed; retrying", "error", err)
		}
		if !sleepCtx(ctx, retryBackoff) {
			return
		}
	}
}

// noteBackendController records info as the controller the backend
// names, unless a newer epoch is known already.
func (m *membership) noteBackendController(info coord.ControllerInfo) {
	m.backendCtrlMu.Lock()
	defer m.backendCtrlMu.Unlock()
	if info.Epoch < m.backendCtrl.Epoch || info == m.backendCtrl {
		return
	}
	m.backendCtrl = info
	m.backendCtrlChanged.Notify()
}

// BackendController returns the controller the backend names, as this
// broker last learnt it.
func (m *membership) BackendController() coord.ControllerInfo {
	m.backendCtrlMu.Lock()
	defer m.backendCtrlMu.Unlock()
	return m.backendCtrl
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
func (m *membership) awaitBackendController(ctx context.Context, epoch int64) error {
	// caughtUp: the view names a controller of epoch, or a later epoch.
	caughtUp := func(known coord.ControllerInfo) bool {
		return known.Epoch > epoch || (known.Epoch == epoch && known.ID != coord.NoBroker)
	}
	if caughtUp(m.BackendController()) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Coord.SessionTimeout)
	defer cancel()
	info, err := m.backend.Controller(ctx)
	if err != nil {
		return fmt.Errorf("ask the coordination backend for the controller of epoch %d: %w", epoch, err)
	}
	m.noteBackendController(info)
	for {
		m.backendCtrlMu.Lock()
		known, changed := m.backendCtrl, m.backendCtrlChanged.Next()
		m.backendCtrlMu.Unlock()
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
func (m *membership) register(ctx context.Context) (coord.Session, error) {
	me := m.self()
	me.Replaces = m.lastEpoch
	waiting := false
	for {
		// Each attempt is bounded by the session timeout, so an attempt
		// stuck on an unresponsive coordinator (a paused Raft leader the
		// request was forwarded to) is retried against whoever leads now.
		attemptCtx, cancel := context.WithTimeout(ctx, m.cfg.Coord.SessionTimeout)
		sess, err := m.backend.Register(attemptCtx, me)
		cancel()
		if err == nil {
			epoch := sess.Broker().Epoch
			if old := sess.Replaced(); old != 0 {
				m.logger.Info("replaced the previous registration of this broker", "previous_broker_epoch", old, "broker_epoch", epoch)
			}
			m.logger.Info("registered", "broker_epoch", epoch)
			m.lastEpoch = epoch
			if err := writeRegistrationEpoch(m.cfg.LogDirs[0], epoch); err != nil {
				m.logger.Warn("cannot record the broker epoch: a restart after a crash waits for this registration to expire", "error", err)
			}
			return sess, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, coord.ErrExists) {
			if !waiting {
				m.logger.Info("waiting for the previous registration of this broker to expire", "error", err)
				waiting = true
			}
		} else {
			m.logger.Warn("register failed; retrying", "error", err)
		}
		if !sleepCtx(ctx, retryBackoff) {
			return nil, ctx.Err()
		}
	}
}

// campaign runs for controller while sess lives: each won term runs the
// controller until the term ends, then the broker campaigns again.
func (m *membership) campaign(ctx context.Context, sess coord.Session) {
	for {
		term, err := m.backend.Campaign(ctx, sess)
		if err != nil {
			if ctx.Err() != nil || sess.Err() != nil {
				return
			}
			m.logger.Warn("campaign failed; retrying", "error", err)
			if !sleepCtx(ctx, retryBackoff) {
				return
			}
			continue
		}
		m.runController(ctx, term)
		if ctx.Err() != nil || sess.Err() != nil {
			return
		}
	}
}

// runController runs the controller for term until the term ends or ctx
// does, then resigns the term and stops the controller's sender.
func (m *membership) runController(ctx context.Context, term coord.Term) {
	log := m.logger.With("controller_epoch", term.Epoch())
	log.Info("controller elected: this broker is the controller")
	// The term is the backend's word: this broker's own requests, sent
	// in process, need no read to be confirmed.
	m.noteBackendController(coord.ControllerInfo{ID: term.Controller(), Epoch: term.Epoch()})
	snd := m.newSender()
	defer snd.Close()
	cc := m.cfg.ControllerConfig(m.logger)
	interval := m.cfg.BrokerProbeInterval
	atStart := &crashedAtStart{m: m, interval: interval}
	if interval > 0 {
		cc.Crashed = atStart.probe
	}
	ctrl, err := controller.Start(term.Context(), cc, m.backend, term, snd)
	if err != nil {
		log.Warn("start controller failed; resigning", "error", err)
		m.resign(term)
		return
	}
	snd.bind(ctrl)
	if interval > 0 {
		probeCtx, stopProbes := context.WithCancel(term.Context())
		probesDone := make(chan struct{})
		go func() {
			defer close(probesDone)
			m.probeBrokers(probeCtx, ctrl, interval, atStart.found)
		}()
		defer func() {
			stopProbes()
			<-probesDone
		}()
	}
	// The controller answers admin requests only once it has taken in
	// the live brokers: its first UpdateMetadata to this broker shows it.
	if m.waitAccepted(ctx, ctrl, term.Epoch()) {
		m.setController(ctrl, snd)
		m.cache.SetController(coord.BrokerID(m.cfg.BrokerID))
		if m.duringTerm != nil {
			tctx, stop := context.WithCancel(term.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				m.duringTerm(tctx)
			}()
			defer func() {
				stop()
				<-done
			}()
		}
		select {
		case <-ctrl.Done():
		case <-ctx.Done():
		}
	}
	m.setController(nil, nil)
	m.resign(term)
	<-ctrl.Done()
	log.Info("controller stopped", "reason", ctrl.Err())
}

// waitAccepted waits until this broker has accepted a request of
// controller epoch epoch; it returns false if ctrl stops or ctx ends
// first.
func (m *membership) waitAccepted(ctx context.Context, ctrl *controller.Controller, epoch int64) bool {
	for {
		_, _, changed := m.cache.View()
		if m.acceptedControllerEpoch() >= epoch {
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
func (m *membership) resign(term coord.Term) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := term.Resign(ctx); err != nil && !errors.Is(err, coord.ErrClosed) {
		m.logger.Debug("resign controller term failed", "error", err)
	}
}

// Controller returns the Controller this broker runs, or nil.
func (m *membership) Controller() *controller.Controller {
	m.ctrlMu.Lock()
	defer m.ctrlMu.Unlock()
	return m.ctrl
}

// setController records c as the controller this broker runs and snd as
// its sender, or none when both are nil.
func (m *membership) setController(c *controller.Controller, snd *sender) {
	m.ctrlMu.Lock()
	m.ctrl, m.snd = c, snd
	m.ctrlMu.Unlock()
}

// waitPropagated waits until every broker has answered the controller
// requests queued so far (so each knows what was just committed), or ctx
// ends, or propagationWait passes (a broker that stopped answering must
// not hold up an admin request until its session expires); it reports
// whether they have.
func (m *membership) waitPropagated(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, propagationWait)
	defer cancel()
	m.ctrlMu.Lock()
	snd := m.snd
	m.ctrlMu.Unlock()
	if snd == nil {
		return false
	}
	return snd.waitDelivered(ctx)
}

// setSession makes sess's broker epoch this incarnation's.
func (m *membership) setSession(sess coord.Session) {
	m.epochMu.Lock()
	defer m.epochMu.Unlock()
	m.brokerEpoch = sess.Broker().Epoch
	m.epochFloor = m.brokerEpoch
	m.epochChanged.Notify()
}

// endSession stops accepting anything addressed to sess's incarnation.
func (m *membership) endSession(sess coord.Session) {
	m.epochMu.Lock()
	defer m.epochMu.Unlock()
	m.brokerEpoch = -1
	m.epochFloor = sess.Broker().Epoch + 1
	m.epochChanged.Notify()
}

// CurrentEpoch returns the live session's broker epoch, or -1.
func (m *membership) CurrentEpoch() int64 {
	m.epochMu.Lock()
	defer m.epochMu.Unlock()
	return m.brokerEpoch
}

// CheckBrokerEpoch reports whether a controller request addressed to
// broker epoch epoch is for this incarnation. While the broker registers,
// a request may carry the new epoch before Register has returned it: such
// a request waits (until ctx ends) for the registration, then is checked.
func (m *membership) CheckBrokerEpoch(ctx context.Context, epoch int64) bool {
	for {
		m.epochMu.Lock()
		current, floor, changed := m.brokerEpoch, m.epochFloor, m.epochChanged.Next()
		m.epochMu.Unlock()
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
func (m *membership) controlledShutdown(ctx context.Context) {
	start := time.Now()
	if _, live, _ := m.cache.View(); len(live) == 1 && int32(live[0].ID) == m.cfg.BrokerID {
		m.logger.Info("controlled shutdown skipped: no other live broker")
		return
	}
	previous := -1
	for attempt := 1; ; attempt++ {
		epoch := m.CurrentEpoch()
		if epoch < 0 {
			// Between sessions the controller has already moved every
			// leadership of the ended one.
			m.logger.Info("controlled shutdown skipped: not registered")
			return
		}
		remaining, err := m.askControlledShutdown(ctx, epoch)
		if err == nil && remaining == 0 {
			m.logger.Info("controlled shutdown done", "elapsed", time.Since(start), "attempts", attempt)
			return
		}
		if err == nil && remaining == previous {
			m.logger.Warn("controlled shutdown incomplete: no other live ISR member for some partitions", "remaining", remaining, "elapsed", time.Since(start))
			return
		}
		if err == nil {
			previous = remaining
		}
		m.logger.Info("controlled shutdown not done yet", "remaining", remaining, "error", err)
		if !sleepCtx(ctx, retryBackoff) {
			m.logger.Warn("controlled shutdown incomplete: deadline passed", "elapsed", time.Since(start), "remaining", remaining)
			return
		}
	}
}

// askControlledShutdown sends one ControlledShutdown to the controller (in
// process when it is this broker) and returns how many partitions this
// broker still leads.
func (m *membership) askControlledShutdown(ctx context.Context, epoch int64) (int, error) {
	if ctrl := m.Controller(); ctrl != nil {
		remaining, err := ctrl.ControlledShutdown(ctx, coord.BrokerID(m.cfg.BrokerID), epoch)
		return len(remaining), err
	}
	req := kmsg.NewPtrControlledShutdownRequest()
	req.BrokerID = m.cfg.BrokerID
	req.BrokerEpoch = epoch
	kresp, err := m.AskController(ctx, req)
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
func (m *membership) controllerBroker() (coord.Broker, error) {
	id, _, _ := m.cache.View()
	if id == coord.NoBroker {
		return coord.Broker{}, errNoController
	}
	cb, ok := m.cache.Broker(id)
	if !ok {
		return coord.Broker{}, fmt.Errorf("controller %d: %w", id, errNoController)
	}
	return cb, nil
}

// AskController sends req to the controller over a client connection.
func (m *membership) AskController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cb, err := m.controllerBroker()
	if err != nil {
		return nil, err
	}
	return m.requestTo(ctx, m.PeerAddr(cb), req)
}

// requestTo sends req to the broker at addr over a new client connection
// and returns its answer.
func (m *membership) requestTo(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := m.PeerClient(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// PeerClient returns a franz-go client of one other broker at addr, its
// inter-broker listener's endpoint (PeerAddr), for broker-to-broker
// requests: over TLS with that listener's ssl.* settings when it is SSL
// (the truststore as it is now, this broker's certificate as it is at
// each handshake), authenticated by sasl.mechanism.inter.broker.protocol
// when it is SASL.
func (m *membership) PeerClient(addr string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("tripod-broker-%d", m.cfg.BrokerID)),
		kgo.DialTimeout(5 * time.Second)}
	opts = append(opts, extra...)
	if m.interBroker.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(m.interBroker.tls.ClientConfig()))
	}
	if s := m.interBroker.SASL; s != nil {
		opts = append(opts, kgo.SASL(s.Client))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client of broker %s: %w", addr, err)
	}
	return cl, nil
}

// PeerDial is how the followers' fetchers reach a peer: the client id
// PeerClient sends and the inter-broker listener's TLS and SASL.
func (m *membership) PeerDial() replica.PeerDial {
	d := replica.PeerDial{ClientID: fmt.Sprintf("tripod-broker-%d", m.cfg.BrokerID)}
	if m.interBroker.tls != nil {
		d.TLS = m.interBroker.tls.ClientConfig()
	}
	if s := m.interBroker.SASL; s != nil {
		d.SASL = s.Client
	}
	return d
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

// createTopic creates a topic through the controller: in process
// when this broker runs it, else by a CreateTopics forwarded to it. A
// topic that exists already is no error.
func (m *membership) createTopic(ctx context.Context, spec controller.TopicSpec) error {
	if ctrl := m.Controller(); ctrl != nil {
		_, err := ctrl.CreateTopic(ctx, spec)
		if err != nil && kafkaerr.Controller.Error(err) != kerr.TopicAlreadyExists {
			return err
		}
		return nil
	}
	req := createtopics.Request(autoCreateWait, createtopics.Topic{
		Name: spec.Name, Partitions: int32(spec.Partitions), ReplicationFactor: int16(spec.ReplicationFactor), Configs: spec.Config})
	fctx, cancel := context.WithTimeout(ctx, autoCreateWait)
	defer cancel()
	kresp, err := m.AskController(fctx, req)
	if err != nil {
		return fmt.Errorf("forward creation of topic %s to the controller: %w", spec.Name, err)
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("forward creation of topic %s: %d topics in the answer", spec.Name, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && err != kerr.TopicAlreadyExists {
		return fmt.Errorf("create topic %s: %w", spec.Name, err)
	}
	return nil
}

// forwardToController sends req to the controller and returns its answer,
// again while no controller answers (none elected, or the one asked is no
// longer it), for up to forwardTimeout.
func (m *membership) forwardToController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		resp, err := m.AskController(ctx, req)
		if err == nil && !answeredNotController(resp) {
			return resp, nil
		}
		if err == nil {
			err = kerr.NotController
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-m.closing:
			t.Stop()
			return nil, fmt.Errorf("%w: the broker is closing", coord.ErrUnavailable)
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}
