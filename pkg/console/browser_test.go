package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// screenshotsEnv, set to a directory (docs/console from the repository's root), makes the
// browser test write screenshots of the main pages there.
const screenshotsEnv = "SQSWORKER_CONSOLE_SCREENSHOTS"

// chromium returns the browser's path, or skips the test (fails it under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("SQSWORKER_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found: install it with `apt-get install -y chromium` (Debian; .ci/run does), or set SQSWORKER_CHROMIUM to a Chrome or Chromium binary"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium for the test, with the console messages it saw.
type browser struct {
	t      *testing.T
	ctx    context.Context
	dir    string // the profile (user data) directory
	mu     sync.Mutex
	errors []string
	// drains counts the drain markers written (drain) and seen (the listener): the browser
	// reports a page's messages in order, so once the listener has seen a marker it has seen
	// every message written before it.
	drainsSent, drainsSeen int
}

// drainMarker starts the console.debug text drain writes.
const drainMarker = "sqsworker-console-test-drain-"

// newBrowser starts Chromium (path, from chromium). Start it after the servers it visits, so
// that its final drain, a cleanup, runs before theirs close them.
func newBrowser(t *testing.T, path string) *browser {
	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, dir: dir}
	// The first call starts the browser: without a timeout, which would stop the browser.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if n, ok := strings.CutPrefix(m.Text, drainMarker); ok && m.Type == chromedp.ConsoleDebug {
				k, _ := strconv.Atoi(n)
				b.mu.Lock()
				b.drainsSeen = max(b.drainsSeen, k)
				b.mu.Unlock()
				continue
			}
			switch {
			case m.IsException(), m.Type == chromedp.ConsoleType("error"), m.Type == chromedp.ConsoleType("warning"),
				m.Type == chromedp.ConsoleType("assert"):
				b.fail(fmt.Sprintf("%s (%s) %s at %s", m.Type, m.Source, m.Text, m.URL))
			}
		}
	}()
	// The last word: after the test, a blank page and a final drain report what came late.
	t.Cleanup(func() {
		if ctx.Err() != nil {
			return
		}
		b.do("blank page", chromedp.Navigate("about:blank"))
		b.drain()
		for _, e := range b.seen() {
			t.Errorf("after the last check: %s", e)
		}
	})
	return b
}

// drain waits until the listener has received every console message the page wrote so far: it
// writes a marker with console.debug and waits for it, as the browser reports messages in order.
func (b *browser) drain() {
	b.t.Helper()
	b.mu.Lock()
	b.drainsSent++
	n := b.drainsSent
	b.mu.Unlock()
	_ = eval[chromedp.Void](b, fmt.Sprintf(`console.debug(%q)`, drainMarker+strconv.Itoa(n)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		seen := b.drainsSeen
		b.mu.Unlock()
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the browser never reported drain marker %d", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *browser) fail(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, msg)
}

// seen returns the messages seen so far and forgets them.
func (b *browser) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.errors
	b.errors = nil
	return out
}

// check fails the test on any console error, exception or CSP violation the page wrote so far
// (drain makes sure every one has arrived).
func (b *browser) check(where string) {
	b.t.Helper()
	b.drain()
	for _, e := range b.seen() {
		b.t.Errorf("%s: %s", where, e)
	}
}

// expectOnly drains the messages and fails on any that does not contain one of the allowed
// texts (a refused request's status, which the browser logs as a failed resource load).
func (b *browser) expectOnly(where string, allowed ...string) {
	b.t.Helper()
	b.drain()
	for _, m := range b.seen() {
		ok := false
		for _, a := range allowed {
			ok = ok || strings.Contains(m, a)
		}
		if !ok {
			b.t.Errorf("%s: %s", where, m)
		}
	}
}

// do runs actions with a timeout.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// open loads a page and checks that nothing of the job data ran or became an element.
func (b *browser) open(url string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")))
	xss := eval[bool](b, `window.__xss !== undefined`)
	n := eval[int](b, `document.querySelectorAll('img').length + document.querySelectorAll('script:not([src])').length`)
	if xss || n > 0 {
		b.t.Errorf("%s: job data ran (window.__xss set: %v) or became elements (%d img or inline script)", url, xss, n)
	}
}

// text returns the text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// shot writes a screenshot of the page to the screenshot directory, when asked for.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestBrowserSeesViolations checks the checker: a page with an inline script under the
// console's Content-Security-Policy, and a console.error, are both reported, and a message the
// page writes after a check is reported by the next drain.
func TestBrowserSeesViolations(t *testing.T) {
	path := chromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>x</title><link rel="icon" href="data:,"><body><script>window.__xss=1</script>`)
	}))
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.do("open", chromedp.Navigate(srv.URL), chromedp.WaitReady(chromedp.CSS("body")))
	if eval[bool](b, `window.__xss !== undefined`) {
		t.Error("the inline script ran under the policy")
	}
	_ = eval[chromedp.Void](b, `console.error("probe")`)
	b.drain()
	got := b.seen()
	if !contains(got, "Content Security Policy") || !contains(got, "probe") {
		t.Errorf("the browser's messages %q lack the CSP violation or the console.error", got)
	}
	// A message written late (after a timer) is there at the next drain, not lost.
	_ = eval[chromedp.Void](b, `setTimeout(() => console.error("late probe"), 300)`)
	b.drain()
	early := b.seen()
	deadline := time.Now().Add(10 * time.Second)
	for !contains(early, "late probe") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		b.drain()
		early = append(early, b.seen()...)
	}
	if !contains(early, "late probe") {
		t.Errorf("the late console.error was never reported: %q", early)
	}
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestBrowserHostileJobs opens every page on jobs whose data is hostile, and fails on any
// console error, CSP violation, or job data that ran.
func TestBrowserHostileJobs(t *testing.T) {
	path := chromium(t)
	f := sharedHostile(t)
	c, _ := f.console(func(c *console.Config) { c.Refresh = time.Second; c.ShowArgs = true })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, c)) // the pages that peek at the DLQ need it
	r := f.ids["resize"]
	for _, p := range []string{"/", "/jobs?state=dead", "/jobs?state=retrying", "/job?id=" + r.ID, "/dlq", "/job?id=legacy-1", "/schedules", "/enqueue"} {
		b.open(srv.URL + p)
		b.check(p)
		checkEscaped(t, p+" as the browser shows it", eval[string](b, `document.documentElement.innerText`), false)
	}
	// The dead letter that is no job: its body, shown as text to a signed-in operator, with a
	// Delete and no Redrive.
	b.open(srv.URL + "/dlq")
	b.open(eval[string](b, `document.querySelector("a.message-link").href`))
	if body := b.text("#body"); !strings.Contains(body, "hello from a shell script") || !strings.Contains(body, `\u202e`) {
		t.Errorf("the dead letter that is no job shows %q", body)
	}
	if n := eval[int](b, `document.querySelectorAll("#delete-message").length + 10 * document.querySelectorAll("#redrive").length`); n != 1 {
		t.Errorf("the dead letter that is no job: want a Delete and no Redrive (got %d)", n)
	}
	b.check("the dead letter that is no job")
	b.open(srv.URL + "/job?id=legacy-1")
	if reason := b.text("#dl-reason"); reason != "unknown_kind" {
		t.Errorf("the dead letter without a record (from the Dead letters page's peek) says %q", reason)
	}
	// The overview refreshes itself and draws its charts from the JSON, without a reload.
	b.do("overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(chromedp.CSS(`body[data-refreshed]`)))
	first := eval[string](b, `document.body.getAttribute("data-refreshed")`)
	b.do("overview refresh", chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-refreshed") !== `+fmt.Sprintf("%q", first),
		chromedp.WithPollingTimeout(20*time.Second)))
	second := eval[string](b, `document.body.getAttribute("data-refreshed")`)
	bars := eval[int](b, `document.querySelectorAll('#rates svg rect.bar').length`)
	if first == second || bars == 0 {
		t.Errorf("the overview did not refresh (%q then %q) or drew no bar (%d)", first, second, bars)
	}
	if kinds := b.text("#rates"); !strings.Contains(kinds, "image.resize") {
		t.Errorf("the charts do not name the kinds: %q", kinds)
	}
	b.check("overview refresh")
}

// signInLink returns a one-time sign-in link of the console (its path).
func signInLink(t *testing.T, c *console.Console) string {
	t.Helper()
	link, err := c.SignInLink(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return link
}

// postForm submits a POST form built in the page (what a crafted page or a curious operator
// would send), with the given fields.
func postForm(b *browser, action string, fields map[string]string) {
	b.t.Helper()
	js := `(() => { const f = document.createElement("form"); f.method = "post"; f.action = ` + fmt.Sprintf("%q", action) + `;`
	for k, v := range fields {
		js += fmt.Sprintf(`{ const i = document.createElement("input"); i.type = "hidden"; i.name = %q; i.value = %q; f.appendChild(i); }`, k, v)
	}
	js += `document.body.appendChild(f); f.submit(); })()`
	_ = eval[chromedp.Void](b, js)
}

// TestBrowserRedriveAll drives the console as an operator would: the read-only console offers no
// action and refuses one posted anyway; without the token, the Dead letters page asks to sign in
// and an action is refused; after signing in, the pages show the jobs, the schedules and the
// enqueue form, a schedule is created from its form, and redrive all moves every dead letter
// back while the worker runs, until the DLQ is empty and the jobs succeeded.
func TestBrowserRedriveAll(t *testing.T) {
	path := chromium(t)
	f := newFixture(t, fixtureOptions{healable: true})
	c, _ := f.console(func(c *console.Config) { c.Refresh = time.Second; c.Emulator = true })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	ro, _ := f.console(func(c *console.Config) { c.ReadOnly = true; c.Token = "" })
	roSrv := httptest.NewServer(ro)
	t.Cleanup(roSrv.Close)
	b := newBrowser(t, path)
	dead := f.ids["resize"]
	stillDead := func(where string) {
		t.Helper()
		if st, _ := f.table.Get(context.Background(), dead.Kind, dead.Key); st.State != idempotency.StateDead {
			t.Fatalf("%s: a refused redrive moved the job: %s", where, st.State)
		}
	}

	// Read-only: no action anywhere, and one posted anyway is refused.
	for _, p := range []string{"/dlq", "/job?id=" + dead.ID, "/schedules", "/enqueue"} {
		b.open(roSrv.URL + p)
		if forms := eval[int](b, `document.querySelectorAll('form[method="post"]').length`); forms != 0 {
			t.Errorf("read-only %s has %d action forms", p, forms)
		}
	}
	if msg := b.text("main"); !strings.Contains(msg, "read-only: it does not enqueue") {
		t.Errorf("the read-only Enqueue page says %q", msg)
	}
	b.check("read-only")
	b.open(roSrv.URL + "/job?id=" + dead.ID)
	postForm(b, "/job/redrive", map[string]string{"id": dead.ID})
	b.do("the refused read-only redrive", chromedp.WaitVisible(chromedp.CSS("#page-error")))
	if msg := b.text("#page-error"); !strings.Contains(msg, "read-only") {
		t.Errorf("a redrive posted to the read-only console: the page says %q", msg)
	}
	b.expectOnly("read-only redrive", "403") // the browser logs the refused POST's 403
	stillDead("read-only")

	// Without the token: the Dead letters page asks to sign in, the dead job's page offers no
	// action but a sign-in link, and a redrive posted anyway is refused.
	b.open(srv.URL + "/dlq")
	if n := eval[int](b, `document.querySelectorAll('#signin-to-peek').length + document.querySelectorAll('#redrive-all').length * 10`); n != 1 {
		t.Errorf("the Dead letters page without the token: want a sign-in link and no Redrive all (got %d)", n)
	}
	b.expectOnly("dlq without the token", "401")
	b.open(srv.URL + "/job?id=" + dead.ID)
	if note := b.text("#signin-to-see"); !strings.Contains(note, "Sign in to see its dead letter") {
		t.Errorf("the dead job's page without the token says %q", note)
	}
	if forms := eval[int](b, `document.querySelectorAll('form[method="post"]').length`); forms != 0 {
		t.Errorf("the dead job's page offers %d action forms to a viewer who has not signed in", forms)
	}
	postForm(b, "/job/redrive", map[string]string{"id": dead.ID})
	b.do("the refused redrive", chromedp.WaitVisible(chromedp.CSS("#page-error")))
	if msg := b.text("#page-error"); !strings.Contains(msg, "needs the console's token") {
		t.Errorf("without the token the page says %q", msg)
	}
	b.expectOnly("redrive without the token", "401")
	stillDead("without the token")

	// Sign in with the one-time link the CLI prints, look around, take the screenshots.
	b.open(srv.URL + signInLink(t, c))
	if mode := b.text("#mode"); mode != "signed in" {
		t.Fatalf("after the token link: %q", mode)
	}
	b.do("charts", chromedp.WaitVisible(chromedp.CSS(`#rates svg`)))
	b.shot("overview")
	b.open(srv.URL + "/jobs?state=dead")
	if rows := b.text("#jobs tbody"); !strings.Contains(rows, "image.resize") || !strings.Contains(rows, "payment.refund") {
		t.Errorf("dead jobs: %q", rows)
	}
	b.shot("jobs")
	b.open(srv.URL + "/job?id=" + dead.ID)
	if reason := b.text("#dl-reason"); reason != "exhausted" {
		t.Errorf("the job's dead letter says %q", reason)
	}
	b.shot("job")
	b.open(srv.URL + "/schedules")
	if empty := b.text("#recurring-empty"); !strings.Contains(empty, "No recurring schedule") {
		t.Errorf("the Schedules page's recurring list says %q", empty)
	}
	if oneTime := b.text("#one-time tbody"); !strings.Contains(oneTime, f.ids["scheduled"].ID) || !strings.Contains(oneTime, "invoice.render") {
		t.Errorf("the delayed job is not among the one-time schedules: %q", oneTime)
	}
	// Create a recurring schedule from the form: it is listed with its next five runs (a rate
	// without a start date counts from its creation).
	b.do("create a schedule",
		chromedp.Click(chromedp.CSS("details summary")),
		chromedp.SendKeys(chromedp.CSS(`#schedule-form input[name="name"]`), "browser-rollup"),
		chromedp.SendKeys(chromedp.CSS(`#schedule-form input[name="expression"]`), "rate(15 minutes)"),
		chromedp.SendKeys(chromedp.CSS(`#schedule-form input[name="kind"]`), "email.send"),
		chromedp.Click(chromedp.CSS("#create-schedule")),
		chromedp.WaitVisible(chromedp.CSS("#recurring")),
	)
	if row := b.text("#recurring tbody"); !strings.Contains(row, "browser-rollup") || !strings.Contains(row, "rate(15 minutes)") {
		t.Errorf("the created schedule: %q", row)
	}
	if runs := eval[int](b, `document.querySelectorAll('#recurring .run').length`); runs != 5 {
		t.Errorf("the created rate schedule shows %d next runs, want 5", runs)
	}
	b.shot("schedules")
	b.open(srv.URL + "/enqueue")
	if fields := eval[string](b, `Array.from(document.querySelectorAll('#enqueue-form [name]')).map(e => e.name).join(",")`); fields != "csrf,kind,args,key,delay,group,max_attempts" {
		t.Errorf("the Enqueue form's fields: %s", fields)
	}
	if args := eval[string](b, `document.querySelector('#enqueue-form textarea[name="args"]').value`); args != "{}" {
		t.Errorf("the Enqueue form's args start as %q, want {}", args)
	}
	b.shot("enqueue")
	b.open(srv.URL + "/dlq")
	if rows := b.text("#dead-letters tbody"); strings.Count(rows, "Redrive") != 3 {
		t.Errorf("dead letters: %q", rows)
	}
	if note := b.text("#peek-note"); !strings.Contains(note, "receive count") {
		t.Errorf("the Dead letters page does not say what a peek does: %q", note)
	}
	// The purge button waits for the queue's name.
	b.do("purge guard", chromedp.SendKeys(chromedp.CSS("#purge-confirm"), "not-the-name"))
	if !eval[bool](b, `document.getElementById("purge").disabled`) {
		t.Error("the purge button is enabled without the queue's name")
	}
	b.shot("dead-letters")
	b.check("signed in")
	if err := f.sched.Delete(context.Background(), "browser-rollup"); err != nil {
		t.Error(err)
	}

	// Redrive all, with the worker running: the progress bar fills, the DLQ empties and the jobs
	// succeed.
	f.healed.Store(true)
	b.do("redrive all",
		chromedp.Click(chromedp.CSS("#redrive-all")),
		chromedp.WaitVisible(chromedp.CSS("#redrive-bar")),
		chromedp.WaitReady(chromedp.CSS(`body[data-redrive="finished"]`)),
	)
	moved, total := b.text("#redrive-moved"), b.text("#redrive-total")
	if moved != "3" || total != "3" {
		t.Errorf("the redrive moved %s of %s, want 3 of 3", moved, total)
	}
	value, maxv := eval[float64](b, `document.getElementById("redrive-bar").value`), eval[float64](b, `document.getElementById("redrive-bar").max`)
	if value != 3 || maxv != 3 {
		t.Errorf("the progress bar shows %v of %v", value, maxv)
	}
	b.shot("redrive")
	for _, what := range []string{"resize", "refund", "resize2"} {
		f.waitState(f.ids[what], idempotency.StateSucceeded)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.open(srv.URL + "/dlq")
		if eval[int](b, `document.querySelectorAll('#empty').length`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Dead letters page never said the DLQ is empty")
		}
		time.Sleep(300 * time.Millisecond)
	}
	b.open(srv.URL + "/job?id=" + dead.ID)
	if st := b.text("#state"); st != "succeeded" {
		t.Errorf("the redriven job is %q", st)
	}
	b.check("redrive")
}
