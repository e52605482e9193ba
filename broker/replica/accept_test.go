package replica

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// namedController is a Membership reduced to what the acceptance of a
// controller request reads: the controller and epoch the backend names,
// and this broker's epoch.
type namedController struct {
	named       coord.ControllerInfo
	brokerEpoch int64
}

func (n *namedController) CurrentEpoch() int64 { return n.brokerEpoch }
func (n *namedController) CheckBrokerEpoch(_ context.Context, epoch int64) bool {
	return epoch == n.brokerEpoch
}
func (n *namedController) Controller() *controller.Controller      { return nil }
func (n *namedController) BackendController() coord.ControllerInfo { return n.named }
func (n *namedController) AskController(context.Context, kmsg.Request) (kmsg.Response, error) {
	return nil, coord.ErrClosed
}
func (n *namedController) PeerAddr(cb coord.Broker) string { return cb.Addr() }
func (n *namedController) PeerClient(string, ...kgo.Opt) (*kgo.Client, error) {
	return nil, coord.ErrClosed
}
func (n *namedController) PeerDial() PeerDial { return PeerDial{} }

// TestAcceptController checks the rule by which a broker accepts a
// controller's request: a newer controller epoch only when the backend
// names that very controller at it, the accepted epoch only from the
// accepted controller, never an older epoch, and only for this
// incarnation of the broker.
func TestAcceptController(t *testing.T) {
	member := &namedController{named: coord.ControllerInfo{ID: 2, Epoch: 5}, brokerEpoch: 40}
	cfg := config.DefaultConfig()
	cfg.Coord.SessionTimeout = time.Second
	m := NewManager(&cfg, &LogDirs{}, nil, Deps{Logger: hclog.NewNullLogger(), Membership: member})
	ctx := context.Background()
	accept := func(id coord.BrokerID, epoch, brokerEpoch int64) int16 {
		m.stateMu.Lock()
		defer m.stateMu.Unlock()
		return m.acceptControllerLocked(ctx, id, epoch, brokerEpoch)
	}
	stale, staleBroker := kerr.StaleControllerEpoch.Code, kerr.StaleBrokerEpoch.Code
	for _, c := range []struct {
		name        string
		id          coord.BrokerID
		epoch       int64
		brokerEpoch int64
		want        int16
	}{
		{"a controller the backend does not name at its epoch", 3, 5, 40, stale},
		{"the backend's controller at an epoch the backend does not name", 2, 6, 40, stale},
		{"the backend's controller, to another incarnation of the broker", 2, 5, 39, staleBroker},
		{"the backend's controller at its epoch", 2, 5, 40, 0},
		{"the accepted controller again", 2, 5, 40, 0},
		{"another controller at the accepted epoch", 3, 5, 40, stale},
		{"an older epoch", 2, 4, 40, stale},
	} {
		if got := accept(c.id, c.epoch, c.brokerEpoch); got != c.want {
			t.Errorf("%s (controller %d, epoch %d, broker epoch %d): got %v, want %v",
				c.name, c.id, c.epoch, c.brokerEpoch, kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
		}
	}
	if id, epoch := m.AcceptedController(); id != 2 || epoch != 5 {
		t.Errorf("accepted controller: got %d at epoch %d, want 2 at epoch 5", id, epoch)
	}
}
