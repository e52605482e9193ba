package console

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// waitPage waits, within timeout, until the JavaScript expression cond
// is true in the page, checking every 20 ms, and fails t with what
// otherwise.
func waitPage(t testing.TB, b *browser, timeout time.Duration, what, cond string) {
	t.Helper()
	timeout = max(timeout, time.Millisecond) // chromedp polls forever at 0
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText.slice(0, 3000)`))
		t.Fatalf("the page did not show %s within %v: %v; it shows:\n%s", what, timeout, err, shown)
	}
}

// partitionOf asks the cluster, through cl, for topic's partition 0:
// its leader and ISR, as any client sees them.
func partitionOf(ctx context.Context, cl *kgo.Client, topic string, partition int32) (leader int32, isr []int32, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, nil, err
	}
	for _, mt := range resp.Topics {
		for _, p := range mt.Partitions {
			if p.Partition == partition {
				return p.Leader, p.ISR, nil
			}
		}
	}
	return -1, nil, fmt.Errorf("no partition %s-%d in the metadata", topic, partition)
}

// decisionShown is how soon after the controller's decision, as clients
// see it, an open page must show it: issue 32's second. It holds under
// the race detector too (the page shows it within about 100 ms there).
const decisionShown = time.Second

// TestTopicPageFollowsAFailover is the console's promise: on three
// brokers, a topic of replication factor 3 with records in it, its page
// open. The leader of partition 0 is killed (SIGKILL); the test asks the
// cluster's metadata, as clients do, until it names a new leader: the
// controller's decision as clients see it. Within a second of that the
// page shows the new leader and the ISR without the killed broker,
// without a reload; the timeline shows the election, the ISR shrink and
// the failover with its times; the cluster page shows the broker gone.
// Restarted, the broker registers again and rejoins the ISR.
func TestTopicPageFollowsAFailover(t *testing.T) {
	c := startCluster(t, "raft", 3)
	_, url := startConsole(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const topic = "orders"
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if created, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, topic); err != nil || created.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, created.Err)
	}
	const perPartition = 20
	for p := range int32(3) {
		for i := range perPartition {
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "order %d", i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, p, err)
			}
		}
	}

	b := newBrowser(t)
	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/topics/"+topic))
	row := `document.querySelector('#partitions tr[data-partition="0"]')`
	// Every replica's LEO and the HW are the records produced, acks=all.
	waitPage(t, b, 20*time.Second, "partition 0 with 3 replicas in sync at LEO and HW 20", fmt.Sprintf(`(() => {
		const r = %s;
		return !!r && r.querySelector('.isr').textContent.split(',').length === 3
			&& r.querySelector('.hw').textContent === '%d'
			&& [...r.querySelectorAll('.log-leo')].every((e) => e.textContent === '%d');
	})()`, row, perPartition, perPartition))
	b.screenshot(t, "topic-before")

	leader, isr, err := partitionOf(ctx, cl, topic, 0)
	if err != nil || leader < 0 || len(isr) != 3 {
		t.Fatalf("partition 0 before the kill: leader %d, ISR %v, error %v; want a leader and 3 in sync", leader, isr, err)
	}
	if err := c.Broker(leader).Kill(); err != nil {
		t.Fatalf("kill broker %d: %v", leader, err)
	}
	killedAt := time.Now()

	// The controller's decision, as a client polling Metadata sees it.
	var newLeader int32
	var newISR []int32
	var decidedAt time.Time
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		l, isr, err := partitionOf(rctx, cl, topic, 0)
		rcancel()
		if err == nil && l >= 0 && l != leader {
			newLeader, newISR, decidedAt = l, isr, time.Now()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no new leader of %s-0 after broker %d was killed", topic, leader)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond): // the client's polling interval
		}
	}
	t.Logf("broker %d killed; Metadata named leader %d (ISR %v) %v later", leader, newLeader, newISR, decidedAt.Sub(killedAt))
	if slices.Contains(newISR, leader) {
		// The ISR shrinks with the election, as Kafka's controller does
		// when it fences a broker; what the page must show is that.
		t.Logf("the new ISR %v still holds the killed broker %d", newISR, leader)
	}
	waitPage(t, b, decisionShown-time.Since(decidedAt), "the new leader and the shrunk ISR after the decision", fmt.Sprintf(`(() => {
		const r = %s;
		if (!r) return false;
		const isr = r.querySelector('.isr').textContent.split(',').map((s) => s.trim());
		return r.querySelector('.leader').textContent === '%d' && isr.length === 2 && !isr.includes('%d')
			&& r.classList.contains('under-replicated');
	})()`, row, newLeader, leader))
	shownAt := time.Now()
	t.Logf("the page showed them %v after the decision", shownAt.Sub(decidedAt))
	if live := run(t, b, 5*time.Second, chromedp.Text(chromedp.CSS(".live"))); live != "live" {
		t.Errorf("live indicator: got %q, want live", live)
	}
	b.screenshot(t, "topic")

	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/timeline"))
	waitPage(t, b, 20*time.Second, "the election, the ISR shrink and the failover in the timeline", fmt.Sprintf(`(() => {
		const items = [...document.querySelectorAll('#timeline li')];
		const has = (kind, text) => items.some((li) => li.dataset.kind === kind && li.textContent.includes(text));
		return has('election', '%[1]s-0: leader broker %[2]d → broker %[3]d')
			&& has('isr', '%[1]s-0: ISR shrink, replica %[2]d out')
			&& has('failover', 'failover of broker %[2]d')
			&& has('broker', 'broker %[2]d gone');
	})()`, topic, leader, newLeader))
	b.screenshot(t, "timeline")

	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/cluster"))
	// This console was given no Options.Coordination: the page says how to
	// get the controller epoch and the service's health.
	waitPage(t, b, 20*time.Second, "the killed broker gone, a Raft quorum, and how to read the coordination service", fmt.Sprintf(`(() => {
		const r = document.querySelector('#brokers tr[data-broker="%d"]');
		return !!r && r.textContent.includes('gone') && !!document.querySelector('#quorum')
			&& document.querySelector('#backend').textContent === 'raft'
			&& document.querySelector('#coordination').textContent.includes('tripod serve --console-listen')
			&& document.querySelector('#controller-epoch').textContent.includes('not told to clients');
	})()`, leader))
	b.screenshot(t, "cluster")

	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/topics"))
	waitPage(t, b, 20*time.Second, "the topic listed under-replicated", fmt.Sprintf(`(() => {
		const a = [...document.querySelectorAll('#topics a')].find((a) => a.textContent === '%s');
		return !!a && a.closest('tr').classList.contains('under-replicated');
	})()`, topic))
	b.screenshot(t, "topics")

	// The killed broker, restarted, registers again and catches up: the
	// timeline shows it back and in the ISR of orders-0.
	if err := c.Broker(leader).Start(); err != nil {
		t.Fatalf("restart broker %d: %v", leader, err)
	}
	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/timeline"))
	waitPage(t, b, 60*time.Second, "the broker registered again and back in the ISR", fmt.Sprintf(`(() => {
		const items = [...document.querySelectorAll('#timeline li')];
		const has = (kind, text) => items.some((li) => li.dataset.kind === kind && li.textContent.includes(text));
		return has('broker', 'broker %[2]d registered') && has('isr', '%[1]s-0: ISR expand, replica %[2]d in');
	})()`, topic, leader))
	b.noProblems(t)
}

// createTopics creates topics of partitions partitions and replication
// factor rf on c.
func createTopics(t testing.TB, c *cluster.Cluster, partitions int32, rf int16, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, rf, nil, topics...)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	if err := resp.Error(); err != nil {
		t.Fatalf("create topics: %v", err)
	}
}
