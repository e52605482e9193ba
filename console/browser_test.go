package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
)

// env is the test binary's tripod binary and coordination servers.
var env *cluster.Env

func TestMain(m *testing.M) {
	cluster.RunTests(m, "tripod-console-test", func(e *cluster.Env) { env = e })
}

// startCluster runs a cluster of n broker processes on backend, as
// `tripod dev` does, until the test ends.
func startCluster(t testing.TB, backend string, n int, sets ...string) *cluster.Cluster {
	t.Helper()
	cfg, err := env.Configure(backend, n)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sets = append(cfg.Sets, sets...)
	return env.StartForTest(t, cfg)
}

// startConsole serves a console of c over HTTP until the test ends and
// returns its address.
func startConsole(t testing.TB, c *cluster.Cluster, opts ...kgo.Opt) (*Server, string) {
	t.Helper()
	s, err := New(Options{Client: append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, opts...)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
	})
	return s, hs.URL
}

// chromium returns the path of Debian's chromium, skipping the test when
// it is not installed (failing it when CI is "true").
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: install the Debian package `chromium` (make deps does)")
	}
	t.Skip("chromium not found: install the Debian package `chromium` to run the browser tests")
	return ""
}

// browser is a headless chromium tab with what its pages logged.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	// problems are the exceptions thrown and the errors logged to the
	// page's console, as text.
	problems []string
}

// newBrowser starts headless chromium, as root (--no-sandbox) and with
// nothing that reaches beyond loopback, and returns its first tab; the
// browser is closed when the test ends.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// listen records the tab's exceptions and console errors.
func (b *browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text += " " + d.Exception.Description
		}
		b.problem(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, text))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == "error" || ev.Type == "assert" {
			var args []string
			for _, a := range ev.Args {
				args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			b.problem("console." + string(ev.Type) + ": " + strings.Join(args, " "))
		}
	}
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// do runs actions in the tab, in order, within timeout.
func (b *browser) do(t testing.TB, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// run runs action in the tab within timeout and returns its value.
func run[T any](t testing.TB, b *browser, timeout time.Duration, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// noProblems fails t with every exception and console error the pages
// have had.
func (b *browser) noProblems(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("page: %s", p)
	}
}

// screenshotDir is where the browser tests write a screenshot of each
// page, for the docs (docs/console/).
var screenshotDir = filepath.Join("..", "docs", "console")

// screenshot writes a PNG of the whole page to screenshotDir/name.png.
func (b *browser) screenshot(t testing.TB, name string) {
	t.Helper()
	// Quality 100 is what makes chromedp write PNG (below it, JPEG).
	png := run(t, b, 30*time.Second, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
