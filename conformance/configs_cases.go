package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
)

// Sizes of the concurrent config writes.
const (
	configGoroutines = 6
	configRounds     = 4
)

// waitConfigsReady waits until every backend of c reads the config store
// (a fresh Raft cluster must elect a leader first).
func waitConfigsReady(t T, h Harness, c Cluster, n int) {
	t.Helper()
	for i := range n {
		waitUntil(t, startupBound(h), fmt.Sprintf("LoadConfigs through backend %d", i+1), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			_, err := c.Backend(i).LoadConfigs(ctx)
			if err == nil {
				return true, ""
			}
			if errors.Is(err, coord.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				return false, "last error: " + err.Error()
			}
			t.Fatalf("LoadConfigs through backend %d: got error %v, want nil (or ErrUnavailable while the cluster starts)", i+1, err)
			return false, ""
		})
	}
}

func loadConfigs(t T, be coord.Backend, what string) *coord.ConfigState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	s, err := be.LoadConfigs(ctx)
	if err != nil {
		t.Fatalf("%s: LoadConfigs: got error %v, want nil", what, err)
	}
	return s
}

func alterBrokerConfigs(t T, be coord.Backend, entity string, replace bool, alts ...coord.ConfigAlteration) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	got, err := be.AlterBrokerConfigs(ctx, entity, replace, alts)
	if err != nil {
		t.Fatalf("AlterBrokerConfigs(%s, replace %v, %v): got error %v, want nil", entity, replace, alts, err)
	}
	return got
}

func set(key, value string) coord.ConfigAlteration {
	return coord.ConfigAlteration{Op: coord.ConfigSet, Key: key, Value: value}
}

// describeConfigs formats a state's configs for failure messages.
func describeConfigs(s *coord.ConfigState) string {
	if s == nil {
		return "nil state"
	}
	return fmt.Sprintf("version %d, brokers %v, topics %v, quotas %v", s.Version, s.Brokers, s.Topics, s.Quotas)
}

// checkBrokerConfigs fails t unless s holds want for entity (nil: none).
func checkBrokerConfigs(t T, what string, s *coord.ConfigState, entity string, want map[string]string) {
	t.Helper()
	got, ok := s.Brokers[entity]
	if len(want) == 0 {
		if ok {
			t.Fatalf("%s: broker configs of %s: got %v, want no entry", what, entity, got)
		}
		return
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s: broker configs of %s: got %v, want %v", what, entity, got, want)
	}
}

// testBrokerConfigsLifecycle: the default and one broker's configs are
// set, changed by every op, replaced and removed; each write returns what
// it stored and a load reads it back; invalid input changes nothing.
func testBrokerConfigsLifecycle(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitConfigsReady(t, h, c, 2)
	be, other := c.Backend(0), c.Backend(1)
	if s := loadConfigs(t, be, "a fresh store"); len(s.Brokers) != 0 {
		t.Fatalf("a fresh store: broker configs: got %v, want none", s.Brokers)
	}
	steps := []struct {
		what    string
		entity  string
		replace bool
		alts    []coord.ConfigAlteration
		want    map[string]string
	}{
		{"set the default rate", coord.DefaultBrokerEntity, false,
			[]coord.ConfigAlteration{set("leader.replication.throttled.rate", "1000")},
			map[string]string{"leader.replication.throttled.rate": "1000"}},
		{"set broker 2's rates", "2", false,
			[]coord.ConfigAlteration{set("leader.replication.throttled.rate", "10"), set("follower.replication.throttled.rate", "20")},
			map[string]string{"leader.replication.throttled.rate": "10", "follower.replication.throttled.rate": "20"}},
		{"append to a list", "2", false,
			[]coord.ConfigAlteration{{Op: coord.ConfigAppend, Key: "log.cleanup.policy", Value: "delete"},
				{Op: coord.ConfigAppend, Key: "log.cleanup.policy", Value: "compact,delete"}},
			map[string]string{"leader.replication.throttled.rate": "10", "follower.replication.throttled.rate": "20", "log.cleanup.policy": "delete,compact"}},
		{"subtract from a list", "2", false,
			[]coord.ConfigAlteration{{Op: coord.ConfigSubtract, Key: "log.cleanup.policy", Value: "delete"}},
			map[string]string{"leader.replication.throttled.rate": "10", "follower.replication.throttled.rate": "20", "log.cleanup.policy": "compact"}},
		{"delete a key and one that is not there", "2", false,
			[]coord.ConfigAlteration{{Op: coord.ConfigDelete, Key: "follower.replication.throttled.rate"}, {Op: coord.ConfigDelete, Key: "log.retention.ms"}},
			map[string]string{"leader.replication.throttled.rate": "10", "log.cleanup.policy": "compact"}},
		{"replace broker 2's set", "2", true,
			[]coord.ConfigAlteration{set("follower.replication.throttled.rate", "30")},
			map[string]string{"follower.replication.throttled.rate": "30"}},
		{"replace the default with nothing", coord.DefaultBrokerEntity, true, nil, nil},
	}
	for _, step := range steps {
		got := alterBrokerConfigs(t, be, step.entity, step.replace, step.alts...)
		if !maps.Equal(got, step.want) {
			t.Fatalf("%s: AlterBrokerConfigs returned %v, want %v", step.what, got, step.want)
		}
		checkBrokerConfigs(t, step.what, loadConfigs(t, be, step.what), step.entity, step.want)
	}
	checkBrokerConfigs(t, "through the other backend", loadConfigs(t, other, "through the other backend"), "2",
		map[string]string{"follower.replication.throttled.rate": "30"})

	before := loadConfigs(t, be, "before the invalid writes")
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	for _, bad := range []struct {
		entity string
		alts   []coord.ConfigAlteration
	}{
		{"", []coord.ConfigAlteration{set("a", "b")}},
		{"-1", []coord.ConfigAlteration{set("a", "b")}},
		{"01", []coord.ConfigAlteration{set("a", "b")}},
		{"broker", []coord.ConfigAlteration{set("a", "b")}},
		{"2", []coord.ConfigAlteration{set("", "b")}},
		{"2", []coord.ConfigAlteration{set("a", "b"), {Op: 9, Key: "c"}}},
	} {
		_, err := be.AlterBrokerConfigs(ctx, bad.entity, false, bad.alts)
		if err == nil || errors.Is(err, coord.ErrUnavailable) {
			t.Fatalf("AlterBrokerConfigs(%q, %v): got %v, want a validation error", bad.entity, bad.alts, err)
		}
	}
	if after := loadConfigs(t, be, "after the invalid writes"); !after.SameContent(before) {
		t.Fatalf("invalid writes changed the store: got %s, want %s", describeConfigs(after), describeConfigs(before))
	}
}

// testConcurrentConfigWriters: goroutines on two backends each set their
// own keys of one entity at once; every key lands.
func testConcurrentConfigWriters(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitConfigsReady(t, h, c, 2)
	var wg sync.WaitGroup
	errs := make(chan error, configGoroutines*configRounds)
	want := map[string]string{}
	for g := range configGoroutines {
		for r := range configRounds {
			want[fmt.Sprintf("key.%d.%d", g, r)] = fmt.Sprint(g*100 + r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := c.Backend(g % 2)
			for r := range configRounds {
				ctx, cancel := context.WithTimeout(context.Background(), callBound)
				_, err := be.AlterBrokerConfigs(ctx, coord.DefaultBrokerEntity, false,
					[]coord.ConfigAlteration{set(fmt.Sprintf("key.%d.%d", g, r), fmt.Sprint(g*100+r))})
				cancel()
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a concurrent AlterBrokerConfigs: got %v, want nil", err)
	}
	checkBrokerConfigs(t, "after the concurrent writes", loadConfigs(t, c.Backend(1), "after the concurrent writes"),
		coord.DefaultBrokerEntity, want)
}

// configWatch collects the states of one WatchConfigs.
type configWatch struct {
	cancel context.CancelFunc
	ch     <-chan *coord.ConfigState
	last   *coord.ConfigState
}

func watchConfigs(t T, be coord.Backend, what string) *configWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := be.WatchConfigs(ctx)
	if err != nil {
		cancel()
		t.Fatalf("%s: got error %v, want nil", what, err)
	}
	return &configWatch{cancel: cancel, ch: ch}
}

// waitFor receives states until one holds want's configs, checking that
// Version never decreases.
func (w *configWatch) waitFor(t T, want *coord.ConfigState, what string) {
	t.Helper()
	deadline := time.NewTimer(callBound)
	defer deadline.Stop()
	for w.last == nil || !w.last.SameContent(want) {
		select {
		case s, ok := <-w.ch:
			if !ok {
				t.Fatalf("%s: the watch closed, last state %s", what, describeConfigs(w.last))
			}
			if w.last != nil && s.Version < w.last.Version {
				t.Fatalf("%s: version went back from %d to %d", what, w.last.Version, s.Version)
			}
			w.last = s
		case <-deadline.C:
			t.Fatalf("%s: got %s, want %s", what, describeConfigs(w.last), describeConfigs(want))
		}
	}
}

func (w *configWatch) stop(t T) {
	t.Helper()
	w.cancel()
	waitUntil(t, callBound, "the config watch to close", func() (bool, string) {
		for {
			select {
			case _, ok := <-w.ch:
				if !ok {
					return true, ""
				}
			default:
				return false, "still open"
			}
		}
	})
}

// testConfigWatchSeesEveryChange: watches on two backends see each broker
// config write and each topic config the controller commits (created,
// changed, deleted), and partition state changes alone send nothing new.
func testConfigWatchSeesEveryChange(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitConfigsReady(t, h, c, 2)
	w, ctl := controllerOf(t, h, c, 2)
	writer := c.Backend(0)
	watches := []*configWatch{watchConfigs(t, c.Backend(1), "WatchConfigs on backend 2"), watchConfigs(t, writer, "WatchConfigs on backend 1")}
	for _, cw := range watches {
		cw.waitFor(t, loadConfigs(t, writer, "before the changes"), "the first state")
	}
	orders := createTopicOp("orders", 2, 1, w.epoch)
	changedTopic := orders.Topic
	changedTopic.Config = map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}
	state := initialState("orders", 1, 1, w.epoch)
	state.LeaderEpoch, state.ISR = 1, []coord.BrokerID{1}
	for _, change := range []struct {
		what  string
		apply func()
	}{
		{"set the default", func() {
			alterBrokerConfigs(t, writer, coord.DefaultBrokerEntity, false, set("follower.replication.throttled.rate", "5"))
		}},
		{"create a topic with configs", func() { commit(t, ctl, w, "create orders", orders) }},
		{"change the topic's configs", func() { commit(t, ctl, w, "set orders", coord.SetTopic{Topic: changedTopic}) }},
		{"set broker 1's configs", func() {
			alterBrokerConfigs(t, c.Backend(1), "1", false, set("leader.replication.throttled.rate", "7"))
		}},
		{"delete the topic", func() { commit(t, ctl, w, "delete orders", coord.DeleteTopic{Name: "orders"}) }},
		{"remove the default", func() { alterBrokerConfigs(t, writer, coord.DefaultBrokerEntity, true) }},
	} {
		change.apply()
		want := loadConfigs(t, writer, "after "+change.what)
		for _, cw := range watches {
			cw.waitFor(t, want, "after "+change.what)
		}
		switch change.what {
		case "create a topic with configs":
			if !maps.Equal(want.Topics["orders"], orders.Topic.Config) {
				t.Fatalf("after %s: topic configs: got %v, want %v", change.what, want.Topics["orders"], orders.Topic.Config)
			}
		case "change the topic's configs":
			if !maps.Equal(want.Topics["orders"], changedTopic.Config) {
				t.Fatalf("after %s: topic configs: got %v, want %v", change.what, want.Topics["orders"], changedTopic.Config)
			}
			// A partition state change alone sends no new config state.
			commit(t, ctl, w, "a partition state", coord.SetPartition{State: state, ExpectedEpoch: 0})
			for _, cw := range watches {
				select {
				case s := <-cw.ch:
					if !s.SameContent(want) {
						t.Fatalf("after a partition state change: got %s, want %s", describeConfigs(s), describeConfigs(want))
					}
				default:
				}
			}
		case "delete the topic":
			if _, ok := want.Topics["orders"]; ok {
				t.Fatalf("after %s: topic configs of orders: got %v, want no entry", change.what, want.Topics["orders"])
			}
		}
	}
	for _, cw := range watches {
		cw.stop(t)
	}
}

// testConfigsSurviveRestart: broker configs written through two backends
// are there after every backend was closed and opened again in turn; a
// closed backend refuses the calls with ErrClosed.
func testConfigsSurviveRestart(t T, h Harness) {
	const n = 3
	c := h.NewCluster(t, n)
	waitConfigsReady(t, h, c, n)
	alterBrokerConfigs(t, c.Backend(0), coord.DefaultBrokerEntity, false, set("leader.replication.throttled.rate", "100"))
	alterBrokerConfigs(t, c.Backend(1), "3", false, set("follower.replication.throttled.rate", "200"))
	want := loadConfigs(t, c.Backend(2), "before the restarts")
	for i := range n {
		closed := c.Backend(i)
		c.Restart(t, i)
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		_, loadErr := closed.LoadConfigs(ctx)
		_, watchErr := closed.WatchConfigs(ctx)
		_, alterErr := closed.AlterBrokerConfigs(ctx, "1", false, []coord.ConfigAlteration{set("a", "b")})
		cancel()
		for _, err := range []error{loadErr, watchErr, alterErr} {
			if !errors.Is(err, coord.ErrClosed) {
				t.Fatalf("a closed backend's config call: got %v, want ErrClosed", err)
			}
		}
	}
	waitConfigsReady(t, h, c, n)
	for i := range n {
		got := loadConfigs(t, c.Backend(i), fmt.Sprintf("backend %d after the restarts", i+1))
		if !got.SameContent(want) {
			t.Fatalf("backend %d after the restarts: got %s, want %s", i+1, describeConfigs(got), describeConfigs(want))
		}
	}
	alterBrokerConfigs(t, c.Backend(2), "3", false, set("leader.replication.throttled.rate", "300"))
}
