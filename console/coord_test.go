package console

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/coord"
	_ "github.com/tripodmq/tripod/coord/etcd" // coordination.backend=etcd
)

// TestClusterPageReadsTheCoordinationService: a console given the etcd
// of a one-broker cluster as its Options.Coordination answers
// /api/cluster with the controller epoch and the service's latency, and
// the cluster page shows "epoch N" and the service answering; once the
// console's backend is closed, reads fail, and the cluster shows
// degraded, naming the service's error, the page the error with a bad
// badge.
func TestClusterPageReadsTheCoordinationService(t *testing.T) {
	cfg, err := env.Configure("etcd", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := env.StartForTest(t, cfg)
	ccfg := coord.DefaultConfig()
	ccfg.Backend, ccfg.EtcdEndpoints, ccfg.EtcdPrefix = "etcd", cfg.EtcdEndpoints, cfg.EtcdPrefix
	backend, err := coord.Open(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Client: []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, Coordination: backend})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
		backend.Close()
	})

	var cj clusterJSON
	deadline := time.Now().Add(30 * time.Second)
	for {
		cj = clusterJSON{}
		getAPI(t, hs.URL, "/api/cluster", &cj)
		if cj.ControllerEpoch != nil && *cj.ControllerEpoch >= 1 && cj.Coordination != nil && cj.Coordination.ControllerID == cj.ControllerID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/cluster: epoch %v, coordination %+v, controller %d; want an epoch and the service naming Metadata's controller",
				cj.ControllerEpoch, cj.Coordination, cj.ControllerID)
		}
		time.Sleep(50 * time.Millisecond) // the polling interval of the check
	}
	if cj.Coordination.Error != "" || cj.Coordination.LatencyMs <= 0 || cj.Health != "ok" {
		t.Errorf("/api/cluster: coordination %+v, health %s %q; want an answer with its latency, and ok", cj.Coordination, cj.Health, cj.Reasons)
	}

	b := newBrowser(t)
	b.do(t, 20*time.Second, chromedp.Navigate(hs.URL+"/#/cluster"))
	waitPage(t, b, 20*time.Second, "the controller epoch and the service answering", `(() => {
		const e = document.querySelector('#controller-epoch'), cv = document.querySelector('#coordination');
		return !!e && /^epoch [1-9][0-9]*$/.test(e.textContent) && !!cv && cv.textContent.includes('answered in')
			&& !!cv.querySelector('.badge.ok');
	})()`)
	b.screenshot(t, "cluster-etcd")

	backend.Close()
	waitPage(t, b, 20*time.Second, "the service's error, and the cluster degraded", `(() => {
		const cv = document.querySelector('#coordination');
		return !!cv && !!cv.querySelector('.badge.bad') && cv.textContent.includes('closed')
			&& document.querySelector('main').textContent.includes('the coordination service: ')
			&& document.querySelector('#controller-epoch').textContent.includes('did not answer');
	})()`)
	getAPI(t, hs.URL, "/api/cluster", &cj)
	if cj.Health != "degraded" || cj.ControllerEpoch != nil || !strings.Contains(strings.Join(cj.Reasons, "; "), "the coordination service: ") {
		t.Errorf("/api/cluster with the service closed: %s %q, epoch %v; want degraded naming the service", cj.Health, cj.Reasons, cj.ControllerEpoch)
	}
	b.noProblems(t)
}
