package console

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	b.noProblems(t)
}
