package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestPagesLoad opens every page of the console against a live cluster
// and finds each drawn without an exception or a console error.
func TestPagesLoad(t *testing.T) {
	c := startCluster(t, "raft", 3)
	_, url := startConsole(t, c)
	createTopics(t, c, 3, 3, "orders")
	b := newBrowser(t)
	for _, page := range []struct{ hash, heading string }{
		{"#/cluster", "Cluster"},
		{"#/topics", "Topics"},
		{"#/topics/orders", "Topic orders"},
		{"#/timeline", "Timeline"},
		{"#/messages", "Messages"},
		{"#/groups", "Consumer groups"},
	} {
		b.do(t, 20*time.Second, chromedp.Navigate(url+"/"+page.hash))
		heading := run(t, b, 20*time.Second, chromedp.Text(chromedp.CSS("main h1")))
		if heading != page.heading {
			t.Errorf("%s: heading %q, want %q", page.hash, heading, page.heading)
		}
	}
	narrowAndKeyboard(t, b, url)
	b.noProblems(t)
}

// narrowAndKeyboard checks, on the cluster of TestPagesLoad, that every
// page is readable in a narrow window (420 px: no page wider than the
// window; wide tables scroll inside themselves) and that the console is
// usable from the keyboard: Tab reaches the navigation's links with a
// visible focus ring, and Enter follows them.
func narrowAndKeyboard(t *testing.T, b *browser, url string) {
	const narrow = 420 // px
	b.do(t, 10*time.Second, chromedp.EmulateViewport(narrow, 900))
	for _, page := range []struct{ hash, ready string }{
		{"#/cluster", "#brokers tbody tr"},
		{"#/topics", "#topics tbody tr"},
		{"#/topics/orders", "#partitions tbody tr"},
		{"#/timeline", ".live.on"},
		{"#/messages", "#browse"},
		{"#/groups", "table.groups"},
	} {
		b.do(t, 20*time.Second, chromedp.Navigate(url+"/"+page.hash))
		waitPage(t, b, 20*time.Second, page.hash+" drawn", fmt.Sprintf(`!!document.querySelector(%q)`, page.ready))
		overflow := run(t, b, 10*time.Second, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		if overflow > 0 {
			t.Errorf("%s at %d px: the page is %d px wider than the window", page.hash, narrow, overflow)
		}
	}
	b.screenshot(t, "groups-narrow")
	b.do(t, 10*time.Second, chromedp.EmulateReset())

	b.do(t, 20*time.Second, chromedp.Navigate(url+"/#/cluster"))
	waitPage(t, b, 20*time.Second, "the cluster page", `!!document.querySelector('#brokers tbody tr')`)
	const focused = `(() => {
		const e = document.activeElement;
		return e && e.tagName === 'A' && e.textContent === 'Topics'
			&& getComputedStyle(e).outlineStyle !== 'none';
	})()`
	reached := false
	for range 10 {
		b.do(t, 5*time.Second, chromedp.KeyEvent(kb.Tab))
		if run(t, b, 5*time.Second, chromedp.Evaluate[bool](focused)) {
			reached = true
			break
		}
	}
	if !reached {
		t.Fatal("ten presses of Tab did not focus the Topics link with a visible focus ring")
	}
	b.do(t, 5*time.Second, chromedp.KeyEvent(kb.Enter))
	waitPage(t, b, 10*time.Second, "the topics page after Enter on its link", `location.hash === '#/topics' && !!document.querySelector('#topics tbody tr')`)
}
