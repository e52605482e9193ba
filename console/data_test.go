package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// waitFor polls js in the page until it is truthy, within timeout, and
// returns its value as text.
func waitFor(t *testing.T, b *browser, timeout time.Duration, js string) string {
	t.Helper()
	return run(t, b, timeout+5*time.Second, chromedp.Poll[string](js, chromedp.WithPollingTimeout(timeout)))
}

// getJSON gets url, checks its status and decodes its JSON body into v.
func getJSON(t *testing.T, url string, status int, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("GET %s: got status %d (%s), want %d", url, resp.StatusCode, body, status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// newTopic creates topic with partitions on c, replicated three times,
// and returns an admin client and a producer of it.
func newTopic(t *testing.T, ctx context.Context, c interface{ Bootstrap() []string }, topic string, partitions int32) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return adm, cl
}

// TestMessagesFindRecordBySubstring produces 2 000 records, one of which
// holds a needle in its value, and finds that record with the message
// browser's filter: the page shows it with its offset and says how far
// the scan got.
func TestMessagesFindRecordBySubstring(t *testing.T) {
	c := startCluster(t, "raft", 3)
	_, url := startConsole(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, needle, total, at = "payments", "needle-7f3a", 2000, 1234
	_, cl := newTopic(t, ctx, c, topic, 1)
	records := make([]*kgo.Record, total)
	for i := range records {
		value := fmt.Sprintf(`{"payment":%d,"amount":%d}`, i, i*7)
		if i == at {
			value = fmt.Sprintf(`{"payment":%d,"memo":"%s"}`, i, needle)
		}
		records[i] = &kgo.Record{Topic: topic, Key: []byte("p-" + strconv.Itoa(i)), Value: []byte(value),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("test")}}}
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	want := records[at].Offset

	// A filtered scan bounded to 500 records says where it stopped and
	// where to continue; continuing from there finds the needle.
	var page browseAnswer
	getJSON(t, url+"/api/messages?topic=payments&partition=0&q="+needle+"&scan=500", http.StatusOK, &page)
	if page.Scanned != 500 || page.ScannedFrom != total-1 || page.ScannedTo != total-500 || len(page.Records) != 0 ||
		page.StoppedBy != "scan" || page.Next == nil || *page.Next != total-501 {
		t.Errorf("scan bounded to 500 from the newest: got %d scanned at %d..%d, %d matches, stopped by %s, next %v; want 500 at %d..%d, none, scan, next %d",
			page.Scanned, page.ScannedFrom, page.ScannedTo, len(page.Records), page.StoppedBy, page.Next, total-1, total-500, total-501)
	}
	getJSON(t, url+fmt.Sprintf("/api/messages?topic=payments&partition=0&q=%s&scan=500&offset=%d", needle, total-501), http.StatusOK, &page)
	if len(page.Records) != 1 || page.Records[0].Offset != want {
		t.Errorf("scan continued from %d: got %d matches (%+v), want the record at %d", total-501, len(page.Records), page.Records, want)
	}
	// Oldest first from a time before every record reads from offset 0.
	getJSON(t, url+"/api/messages?topic=payments&partition=0&order=oldest&limit=3&time="+records[0].Timestamp.Add(-time.Hour).UTC().Format(time.RFC3339), http.StatusOK, &page)
	if len(page.Records) != 3 || page.Records[0].Offset != 0 || page.Records[2].Offset != 2 || page.Next == nil || *page.Next != 3 {
		t.Errorf("oldest first from an hour before: got %d records from %+v, next %v; want offsets 0..2, next 3", len(page.Records), page.Records, page.Next)
	}
	// Without a filter, newest first is the newest records.
	getJSON(t, url+"/api/messages?topic=payments&partition=0&limit=3", http.StatusOK, &page)
	if len(page.Records) != 3 || page.Records[0].Offset != total-1 || page.Records[2].Offset != total-3 || page.Next == nil || *page.Next != total-4 {
		t.Errorf("newest first, 3 records: got %+v, next %v; want offsets %d..%d, next %d", page.Records, page.Next, total-1, total-3, total-4)
	}
	// Bad parameters are refused, naming the parameter and its range.
	for _, bad := range []struct{ query, want string }{
		{"partition=0", "parameter topic"},
		{"topic=payments&partition=1", "parameter partition=1: topic payments has partitions 0 to 0"},
		{"topic=payments&partition=0&limit=501", "parameter limit=\"501\": want an integer from 1 to 500"},
		{"topic=payments&partition=0&order=sideways", "parameter order=\"sideways\": want newest or oldest"},
		{"topic=payments&partition=0&time=yesterday", "parameter time=\"yesterday\": want an RFC 3339 time"},
		{"topic=nope&partition=0", "topic nope: the cluster has no such topic"},
	} {
		var e apiError
		getJSON(t, url+"/api/messages?"+bad.query, http.StatusBadRequest, &e)
		if !strings.Contains(e.Error, bad.want) {
			t.Errorf("GET /api/messages?%s: got error %q, want it to say %q", bad.query, e.Error, bad.want)
		}
	}

	b := newBrowser(t)
	b.do(t, 20*time.Second,
		chromedp.Navigate(url+"/#/messages"),
		chromedp.WaitVisible(chromedp.CSS("#topic")),
		chromedp.SendKeys(chromedp.CSS("#topic"), topic),
		chromedp.SendKeys(chromedp.CSS("#filter"), needle),
		chromedp.Click(chromedp.CSS("#browse")),
	)
	got := waitFor(t, b, 20*time.Second, `(() => {
		const rows = [...document.querySelectorAll('table.messages tr[data-offset]')];
		return rows.length ? rows.map((r) => r.dataset.offset + ' ' + r.textContent).join('\n') : '';
	})()`)
	if lines := strings.Split(got, "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], strconv.FormatInt(want, 10)+" ") || !strings.Contains(lines[0], needle) {
		t.Errorf("rows found by %q: got %q, want one, at offset %d, holding the needle", needle, got, want)
	}
	summary := run(t, b, 10*time.Second, chromedp.Text(chromedp.CSS("#scan-summary")))
	wantSummary := fmt.Sprintf("scanned offsets %d..0 (%d records), 1 match; reached the end of the log", total-1, total)
	if !strings.Contains(summary, wantSummary) {
		t.Errorf("scan summary: got %q, want it to say %q", summary, wantSummary)
	}
	// The JSON view pretty-prints the value.
	b.do(t, 10*time.Second, chromedp.SetValue(chromedp.CSS("#view"), "json"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#view').dispatchEvent(new Event('change', {bubbles: true}))`))
	pretty := waitFor(t, b, 10*time.Second, `(() => {
		const pre = document.querySelectorAll('table.messages tr[data-offset] pre.payload')[1];
		return pre && pre.textContent.includes('\n') ? pre.textContent : '';
	})()`)
	if !strings.Contains(pretty, `"memo": "`+needle+`"`) {
		t.Errorf("value as JSON: got %q, want it pretty-printed", pretty)
	}
	b.screenshot(t, "messages")
	b.noProblems(t)
}

// TestMessagesProduceConfirmed produces a test record from the page:
// nothing is written until the user confirms in the dialog, and then
// franz-go reads back the record at the offset the page shows.
func TestMessagesProduceConfirmed(t *testing.T) {
	c := startCluster(t, "raft", 3)
	_, url := startConsole(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "greetings"
	adm, _ := newTopic(t, ctx, c, topic, 2)

	b := newBrowser(t)
	b.do(t, 20*time.Second,
		chromedp.Navigate(url+"/#/messages"),
		chromedp.WaitVisible(chromedp.CSS("#produce-topic")),
		chromedp.SendKeys(chromedp.CSS("#produce-topic"), topic),
		chromedp.SendKeys(chromedp.CSS("#produce-partition"), "1"),
		chromedp.SendKeys(chromedp.CSS("#produce-key"), "k1"),
		chromedp.SendKeys(chromedp.CSS("#produce-value"), "hello from the console"),
		chromedp.SendKeys(chromedp.CSS("#produce-headers"), "source=console"),
		chromedp.Click(chromedp.CSS("#produce")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-produce-confirm")),
	)
	// The dialog is open and nothing is written yet.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 1); o.Err != nil || o.Offset != 0 {
		t.Fatalf("log end offset of %s[1] before confirming: got %d (%v), want 0", topic, o.Offset, o.Err)
	}
	b.do(t, 10*time.Second, chromedp.Click(chromedp.CSS("#confirm-produce-confirm")))
	shown := waitFor(t, b, 20*time.Second, `document.querySelector('#produced')?.textContent || ''`)
	var offset int64 = -1
	if _, err := fmt.Sscanf(shown, "Written to "+topic+"[1] at offset %d.", &offset); err != nil {
		t.Fatalf("page after producing: got %q, want %q", shown, "Written to "+topic+"[1] at offset N.")
	}
	// The dialog closes once the answer is shown.
	waitFor(t, b, 5*time.Second, `document.querySelector('#confirm-produce').open ? '' : 'closed'`)

	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {1: kgo.NewOffset().At(offset)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	fetches := consumer.PollRecords(ctx, 1)
	if err := fetches.Err0(); err != nil {
		t.Fatalf("read back %s[1] at %d: %v", topic, offset, err)
	}
	recs := fetches.Records()
	if len(recs) != 1 {
		t.Fatalf("read back %s[1] at %d: got %d records, want 1", topic, offset, len(recs))
	}
	r := recs[0]
	if r.Offset != offset || string(r.Key) != "k1" || string(r.Value) != "hello from the console" ||
		len(r.Headers) != 1 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "console" {
		t.Errorf("record read back: got offset %d key %q value %q headers %v, want offset %d key \"k1\" value \"hello from the console\" headers [source=console]",
			r.Offset, r.Key, r.Value, r.Headers, offset)
	}
	b.noProblems(t)
}

// TestGroupResetOffsets resets an empty group's committed offsets to
// earliest from its page: the dry run shows the plan and changes
// nothing, and after the confirmation the page shows the new committed
// offsets, which kadm reads back from the cluster.
func TestGroupResetOffsets(t *testing.T) {
	c := startCluster(t, "raft", 3)
	_, url := startConsole(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, group = "orders", "billing"
	adm, cl := newTopic(t, ctx, c, topic, 2)
	var records []*kgo.Record
	for i := range 60 {
		records = append(records, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("order " + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// The group commits offsets and has no members: it is Empty.
	var commit kadm.Offsets
	commit.AddOffset(topic, 0, 20, -1)
	commit.AddOffset(topic, 1, 25, -1)
	if resps, err := adm.CommitOffsets(ctx, group, commit); err != nil || resps.Error() != nil {
		t.Fatalf("commit offsets of %s: %v %v", group, err, resps.Error())
	}
	committed := func() string {
		t.Helper()
		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, o := range fetched.Sorted() {
			parts = append(parts, fmt.Sprintf("%s[%d]=%d", o.Topic, o.Partition, o.At))
		}
		return strings.Join(parts, " ")
	}
	const before, after = "orders[0]=20 orders[1]=25", "orders[0]=0 orders[1]=0"
	b := newBrowser(t)
	// shown waits until the rows of table show want, as committed()
	// writes it, from the cells of class column.
	shown := func(table, column, want string) {
		t.Helper()
		js := `(() => {
			const got = [...document.querySelectorAll('` + table + ` tr[data-topic]')].map((r) =>
				r.dataset.topic + '[' + r.dataset.partition + ']=' + r.querySelector('` + column + `').textContent).join(' ');
			return got === ` + strconv.Quote(want) + ` ? got : '';
		})()`
		ctx, cancel := context.WithTimeout(b.ctx, 25*time.Second)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[string](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
			t.Fatalf("%s: want %s shown: %v; the page reads:\n%s", table, want, err, text)
		}
	}

	// The list shows the group, Empty, with its lag; its name links to
	// its page.
	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/groups"))
	row := waitFor(t, b, 20*time.Second, `(() => {
		const a = document.querySelector('table.groups a[href="#/groups/`+group+`"]');
		return a ? a.closest('tr').innerText : '';
	})()`)
	if fields := strings.Fields(row); len(fields) < 4 || fields[1] != "Empty" || fields[len(fields)-1] != "15" {
		t.Errorf("groups list row of %s: got %q, want it Empty with lag 15 (10 + 5)", group, row)
	}
	b.screenshot(t, "groups")
	b.do(t, 10*time.Second, chromedp.Click(chromedp.CSS(`table.groups a[href="#/groups/`+group+`"]`)))
	shown("#offsets", ".committed", before)

	// The dry run shows the plan and changes nothing.
	b.do(t, 10*time.Second, chromedp.Click(chromedp.CSS("#reset-dry-run")))
	shown("#reset-plan", ".new-offset", after)
	if got := committed(); got != before {
		t.Errorf("committed offsets after the dry run: got %s, want %s", got, before)
	}

	// An execute whose confirmed plan is not the plan now is refused.
	stale := `{"scenario":"to-earliest","execute":true,"confirmed":[{"topic":"orders","partition":0,"newOffset":7},{"topic":"orders","partition":1,"newOffset":0}]}`
	resp, err := http.Post(url+"/api/groups/"+group+"/reset-offsets", "application/json", strings.NewReader(stale))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "the plan changed since the dry run") {
		t.Errorf("execute of a plan that is not the plan now: got %d %s, want 409 saying the plan changed", resp.StatusCode, body)
	}
	if got := committed(); got != before {
		t.Errorf("committed offsets after the refused stale execute: got %s, want %s", got, before)
	}

	// Execute asks first; confirmed, it commits and the page shows it.
	b.do(t, 10*time.Second,
		chromedp.Click(chromedp.CSS("#reset-execute")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-reset-confirm")))
	if got := committed(); got != before {
		t.Errorf("committed offsets while the confirmation is open: got %s, want %s", got, before)
	}
	b.do(t, 10*time.Second, chromedp.Click(chromedp.CSS("#confirm-reset-confirm")))
	shown("#reset-done", ".new-offset", after)
	shown("#offsets", ".committed", after)
	if got := committed(); got != after {
		t.Errorf("committed offsets after the reset: got %s, want %s", got, after)
	}
	// With a member in the group, the page shows Kafka's refusal.
	member, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ClientID("billing-worker"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			member.PollFetches(pollCtx)
		}
	}()
	defer func() {
		stopPolling()
		<-polled
	}()
	b.do(t, 10*time.Second, chromedp.Navigate(url+"/#/groups/"+group))
	waitFor(t, b, 20*time.Second, `(() => {
		const cells = [...document.querySelectorAll('table.members td')];
		return cells.some((c) => c.textContent === 'billing-worker') ? 'joined' : '';
	})()`)
	b.do(t, 10*time.Second, chromedp.Click(chromedp.CSS("#reset-dry-run")))
	shown("#reset-plan", ".new-offset", after)
	b.do(t, 10*time.Second,
		chromedp.Click(chromedp.CSS("#reset-execute")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-reset-confirm")),
		chromedp.Click(chromedp.CSS("#confirm-reset-confirm")))
	refusal := waitFor(t, b, 20*time.Second, `document.querySelector('#reset-error')?.textContent || ''`)
	if !strings.Contains(refusal, "group has active members") || !strings.Contains(refusal, "only while a group is Empty") {
		t.Errorf("reset of a group with a member: the page says %q, want the refusal and that the group must be Empty", refusal)
	}
	if got := committed(); got != after {
		t.Errorf("committed offsets after the refused reset: got %s, want %s", got, after)
	}

	// The lag chart has two samples within a sampling interval or two.
	waitFor(t, b, 3*lagSampleInterval, `document.querySelector('.lag-chart svg polyline') ? 'drawn' : ''`)
	b.screenshot(t, "group")
	b.noProblems(t)
}
