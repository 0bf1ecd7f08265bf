package pagetest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sqscope/sqscope/internal/bpftest"
)

// ChromiumPath is the program of Debian's chromium, which make deps
// installs.
const ChromiumPath = "chromium"

// WindowWidth and WindowHeight are the browser window's size in CSS
// pixels, the size of a screenshot of the viewport (Tab.ScreenshotViewport).
const WindowWidth, WindowHeight = 1280, 900

// Browser is a headless Chromium the tests open pages in, driven over
// the DevTools protocol. It is closed when the test ends.
type Browser struct {
	ctx context.Context
}

// Chromium starts a headless Chromium for t. Without one it skips t,
// saying why, or fails it under SQSCOPE_REQUIRE_BPF=1 (CI), as the BPF
// tests do (internal/bpftest): a test CI should run is never skipped
// there.
func Chromium(t testing.TB) *Browser {
	t.Helper()
	path := bpftest.RequireTool(t, ChromiumPath, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless among them
		chromedp.ExecPath(path),
		chromedp.WindowSize(WindowWidth, WindowHeight),
		chromedp.DisableGPU,
		// a page of sqscope must not need the network: with none, a
		// request it would make fails and is seen, and nothing it does
		// waits on one
		chromedp.ProxyServer("127.0.0.1:9"),
	)
	if os.Geteuid() == 0 { // as in CI: Chromium's sandbox refuses root
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	// the browser lives as long as the context of its first run: no
	// timeout on it (chromedp bounds the start itself)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return &Browser{ctx: ctx}
}

// Tab is a page opened in the browser, and what it did while it loaded.
type Tab struct {
	ctx context.Context
	URL string

	mu       sync.Mutex
	problems []string // console errors and warnings, exceptions, errors logged
	requests []string // the URL of every request made
}

// Problems are the console errors and warnings, uncaught exceptions and
// errors the browser logged for the page so far.
func (tab *Tab) Problems() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.problems...)
}

// Requests are the URLs of every request the page made so far, the
// page's own first.
func (tab *Tab) Requests() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.requests...)
}

func (tab *Tab) add(to *[]string, s string) {
	tab.mu.Lock()
	*to = append(*to, s)
	tab.mu.Unlock()
}

func (tab *Tab) listen(ev any) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		tab.add(&tab.requests, e.Request.URL)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			tab.add(&tab.problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		tab.add(&tab.problems, fmt.Sprintf("exception at %d:%d: %s", d.LineNumber+1, d.ColumnNumber+1, msg))
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
			tab.add(&tab.problems, fmt.Sprintf("%s %s: %s (%s)", e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL))
		}
	}
}

// Load is how long a page took to open, on the page's own clock from the
// start of its navigation, and where the browser's time went.
type Load struct {
	Parsed time.Duration // to DOMContentLoaded's end: the HTML read, the script run
	Loaded time.Duration // to the load event's end
	Drawn  time.Duration // to the first frame painted after it: what a reader waits for

	Script, Style, Layout time.Duration // the browser's time running script, computing style, laying out
}

func (l Load) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }
	return fmt.Sprintf("drawn after %s (DOMContentLoaded %s, load %s; script %s, style %s, layout %s)",
		ms(l.Drawn), ms(l.Parsed), ms(l.Loaded), ms(l.Script), ms(l.Style), ms(l.Layout))
}

// Open opens the file at path in a new tab, listening to what it logs
// and requests from before it starts, waits until the frame after its
// load event is painted (within timeout) and says when each came.
func (b *Browser) Open(t testing.TB, path string, timeout time.Duration) (*Tab, Load) {
	t.Helper()
	return b.open(t, path, timeout, true)
}

// OpenWithoutScript opens the file at path as Open does, with the page's
// script disabled, as a reader who allows none sees it.
func (b *Browser) OpenWithoutScript(t testing.TB, path string, timeout time.Duration) *Tab {
	t.Helper()
	tab, _ := b.open(t, path, timeout, false)
	return tab
}

func (b *Browser) open(t testing.TB, path string, timeout time.Duration, script bool) (*Tab, Load) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	tab := &Tab{URL: (&url.URL{Scheme: "file", Path: abs}).String()}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithListener(tab.listen))
	t.Cleanup(cancel)
	tab.ctx = ctx
	if err := chromedp.Do(ctx); err != nil { // opens the tab, listening from its start
		t.Fatalf("opening a tab: %v", err)
	}
	run, cancelRun := context.WithTimeout(ctx, timeout)
	defer cancelRun()
	_, err = chromedp.Call(run, performance.Enable, performance.EnableParams{})
	if err == nil && !script {
		_, err = chromedp.Call(run, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
	}
	if err == nil {
		err = chromedp.Do(run, chromedp.Navigate(tab.URL)) // returns once the load event fired
	}
	var l Load
	if err == nil && script {
		l, err = measure(run)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s did not load within %v", path, timeout)
	}
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	return tab, l
}

// measure reads, once a page has loaded, when it was parsed, loaded and
// drawn, and the browser's time on its script, style and layout.
func measure(ctx context.Context) (Load, error) {
	// a frame's requestAnimationFrame runs before the frame is drawn, a
	// task it queues after
	ms, err := chromedp.Run(ctx, chromedp.Evaluate[[3]float64](`new Promise(function (done) {
  requestAnimationFrame(function () { setTimeout(function () {
    var n = performance.getEntriesByType("navigation")[0];
    done([n.domContentLoadedEventEnd, n.loadEventEnd, performance.now()]);
  }, 0); });
})`, chromedp.EvalAwaitPromise))
	if err != nil {
		return Load{}, err
	}
	m, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return Load{}, err
	}
	d := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
	l := Load{Parsed: d(ms[0]), Loaded: d(ms[1]), Drawn: d(ms[2])}
	for _, x := range m.Metrics {
		s := time.Duration(x.Value * float64(time.Second))
		switch x.Name {
		case "ScriptDuration":
			l.Script = s
		case "RecalcStyleDuration":
			l.Style = s
		case "LayoutDuration":
			l.Layout = s
		}
	}
	return l, nil
}

// Eval evaluates the expression js in tab's page and decodes its value
// (JSON) into a T; a promise is waited for.
func Eval[T any](t testing.TB, tab *Tab, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating in %s: %v\n%s", tab.URL, err, js)
	}
	return v
}

// Screenshot writes the page as a PNG to path: the whole page, or only
// the element sel selects when sel is not "".
func (tab *Tab) Screenshot(t testing.TB, path, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	shot := chromedp.FullScreenshot(100) // quality 100: PNG
	if sel != "" {
		shot = chromedp.Screenshot(sel)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", tab.URL, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ScreenshotViewport writes what the window shows, scrolled so that the
// element sel selects is at its top, as a PNG to path.
func (tab *Tab) ScreenshotViewport(t testing.TB, path, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	// the window's size, not what its frame leaves of it
	_, err := chromedp.Run(ctx, chromedp.EmulateViewport(WindowWidth, WindowHeight))
	found := false
	if err == nil {
		found, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(function () {
  var e = document.querySelector(%q);
  if (!e) return false;
  window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY);
  return true;
})()`, sel)))
	}
	if err == nil && !found {
		err = fmt.Errorf("no element %s", sel)
	}
	var png []byte
	if err == nil {
		png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	}
	if err != nil {
		t.Fatalf("screenshot of %s at %s: %v", tab.URL, sel, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
