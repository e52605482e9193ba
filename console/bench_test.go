package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkPagesAtTenThousandPartitions measures how soon each page of
// the console shows its content on a cluster of 10 000 partitions (one
// topic of 9 000 and a hundred of 10), loaded afresh from a blank page,
// and how soon a search of the topics answers: issue 32's goal is every
// page interactive within a second. It reports each as ms/op metrics
// (cluster-ms, topics-ms, topic-ms, timeline-ms, messages-ms,
// groups-ms, search-ms); run it
// without the race detector:
//
//	go test -run '^$' -bench PagesAtTenThousandPartitions -benchtime 3x ./console/
func BenchmarkPagesAtTenThousandPartitions(bm *testing.B) {
	var t testing.TB = bm
	c := startCluster(t, "raft", 3)
	var small []string
	for i := range 100 {
		small = append(small, fmt.Sprintf("t%03d", i))
	}
	createTopics(t, c, 9000, 1, "wide")
	createTopics(t, c, 10, 1, small...)
	_, url := startConsole(t, c)

	b := newBrowser(t)
	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/cluster"))
	waitPage(t, b, 60*time.Second, "10 000 partitions in the cluster, each with a leader", `(() => {
		const card = (label) => [...document.querySelectorAll('.card')].find((c) => c.textContent.includes(label));
		const v = card('Topics / partitions'), u = card('Under-replicated / offline');
		return !!v && v.querySelector('.value').textContent === '101 / 10000'
			&& u.querySelector('.value').textContent === '0 / 0';
	})()`)

	shown := map[string]time.Duration{}
	for bm.Loop() {
		pagesAtScale(t, b, url, shown)
	}
	for name, d := range shown {
		bm.ReportMetric(float64(d.Milliseconds())/float64(bm.N), name+"-ms")
	}
	b.noProblems(t)
}

// visits counts the pages pagesAtScale loaded.
var visits int

// pagesAtScale loads each page of the console of the cluster
// BenchmarkPagesAtTenThousandPartitions makes, from a blank page, and a
// search, adding to shown how long each took to show its content.
//
// Each load asks a URL of its own (?visit=N), which the browser cannot
// answer from its back/forward cache: a page restored from there would
// show at once, measuring nothing.
func pagesAtScale(t testing.TB, b *browser, url string, shown map[string]time.Duration) {
	visit := func(hash string) string {
		visits++
		return fmt.Sprintf("%s/?visit=%d%s", url, visits, hash)
	}
	for _, page := range []struct{ name, hash, what, cond string }{
		{"cluster", "#/cluster", "the brokers", `document.querySelectorAll('#brokers tbody tr').length === 3`},
		{"topics", "#/topics", "the first 50 topics and a pager", `document.querySelectorAll('#topics tbody tr').length === 50
			&& !!document.querySelector('nav.pager')`},
		{"topic", "#/topics/wide", "the first 100 partitions, with their HW", `(() => {
			const rows = document.querySelectorAll('#partitions tbody tr');
			return rows.length === 100 && [...rows].every((r) => r.querySelector('.hw').textContent === '0');
		})()`},
		{"timeline", "#/timeline", "the timeline", `!!document.querySelector('.live.on')`},
		{"messages", "#/messages?topic=wide&partition=8999", "the browse of an empty partition",
			`!!document.querySelector('#scan-summary')`},
		{"groups", "#/groups", "the groups' table", `!!document.querySelector('table.groups')`},
	} {
		b.do(t, 10*time.Second, chromedp.Navigate("about:blank"))
		start := time.Now()
		b.do(t, 10*time.Second, chromedp.Navigate(visit(page.hash)))
		waitPage(t, b, 30*time.Second, page.hash+": "+page.what, page.cond)
		shown[page.name] += time.Since(start)
	}

	b.do(t, 10*time.Second, chromedp.Navigate("about:blank"), chromedp.Navigate(visit("#/topics")))
	waitPage(t, b, 10*time.Second, "the topics", `document.querySelectorAll('#topics tbody tr').length === 50`)
	start := time.Now()
	b.do(t, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#topic-search"), "t05"))
	waitPage(t, b, 30*time.Second, "the 10 topics named t05*", `(() => {
		const names = [...document.querySelectorAll('#topics tbody a')].map((a) => a.textContent);
		return names.length === 10 && names.every((n) => n.startsWith('t05'));
	})()`)
	shown["search"] += time.Since(start)
}
