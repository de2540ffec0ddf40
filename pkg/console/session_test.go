package console_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/console"
)

// sessionConsole is a console with a job table fake and a clock the test moves.
func sessionConsole(t *testing.T, tok string, now *atomic.Int64) *console.Console {
	t.Helper()
	c, err := console.New(console.Config{Status: fakeStatus{}, Token: tok, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func clockAt(t time.Time) *atomic.Int64 {
	var n atomic.Int64
	n.Store(t.UnixNano())
	return &n
}

// reply is what rawRequest got.
type reply struct {
	code     int
	cookies  []*http.Cookie
	body     string
	location string
}

// rawRequest sends a request with the given cookie header (name=value pairs) and other headers,
// without a jar and without following redirects.
func rawRequest(t *testing.T, method, u, cookie string, form url.Values, headers ...string) reply {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Cookies(), string(b), resp.Header.Get("Location")}
}

// signInCookie signs in with the form and returns the session cookie the console set.
func signInCookie(t *testing.T, srvURL, tok string) *http.Cookie {
	t.Helper()
	r := rawRequest(t, http.MethodPost, srvURL+"/signin", "", url.Values{"token": {tok}, "next": {"/"}})
	if r.code != http.StatusSeeOther {
		t.Fatalf("sign in: %d\n%s", r.code, r.body)
	}
	for _, c := range r.cookies {
		if strings.HasPrefix(c.Name, "sqsworker_console") && c.Value != "" {
			return c
		}
	}
	t.Fatalf("sign in set no session cookie: %v", r.cookies)
	return nil
}

// signedInWith reports whether a request with that cookie is signed in.
func signedInWith(t *testing.T, srvURL string, ck *http.Cookie, headers ...string) bool {
	t.Helper()
	return strings.Contains(rawRequest(t, http.MethodGet, srvURL+"/jobs?state=dead", ck.Name+"="+ck.Value, nil, headers...).body, `id="mode">signed in`)
}

// csrfOf reads the CSRF token of the page a cookie sees.
func csrfOf(t *testing.T, srvURL string, ck *http.Cookie) string {
	t.Helper()
	body := rawRequest(t, http.MethodGet, srvURL+"/enqueue", ck.Name+"="+ck.Value, nil).body
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no CSRF token for a signed-in page:\n%s", body)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// TestSessionCookies: each sign-in gets its own random session under a cookie named after the
// console's port (whatever the Host header says), with an expiry the server enforces too, and
// sign-out ends it on the server: a copy of the cookie is refused afterwards.
func TestSessionCookies(t *testing.T) {
	now := clockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	c := sessionConsole(t, token, now)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	a, b := signInCookie(t, srv.URL, token), signInCookie(t, srv.URL, token)
	if a.Value == b.Value {
		t.Errorf("two sign-ins got the same cookie value %q: a session must be random, not derived from the token", a.Value)
	}
	if want := "sqsworker_console_" + port; a.Name != want {
		t.Errorf("cookie name %q, want %q (the console's port in it)", a.Name, want)
	}
	if a.MaxAge <= 0 || a.MaxAge > int((12*time.Hour)/time.Second) || !a.HttpOnly || a.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie Max-Age %d, HttpOnly %v, SameSite %v: want an expiry within the default 12 h, HttpOnly, Strict", a.MaxAge, a.HttpOnly, a.SameSite)
	}
	if !signedInWith(t, srv.URL, a) || !signedInWith(t, srv.URL, b) {
		t.Fatal("the sessions are not signed in")
	}
	// A forged or guessed value signs nothing in.
	for _, v := range []string{"", "x", strings.Repeat("0", 64), a.Value + "0"} {
		if signedInWith(t, srv.URL, &http.Cookie{Name: a.Name, Value: v}) {
			t.Errorf("the cookie value %q is signed in", v)
		}
	}
	// Another Host header (another port) does not change the name the console reads.
	if signedInWith(t, srv.URL, &http.Cookie{Name: "sqsworker_console_1", Value: a.Value}, "Host", "127.0.0.1:1") {
		t.Error("a session cookie under another port's name is accepted when the Host header names that port")
	}
	if !signedInWith(t, srv.URL, a, "Host", "127.0.0.1:1") {
		t.Error("the console read its cookie's name from the Host header, not from its own port")
	}

	// Sign out a: its cookie is dropped, and a copy of it no longer works; b still does.
	r := rawRequest(t, http.MethodPost, srv.URL+"/signout", a.Name+"="+a.Value, url.Values{"csrf": {csrfOf(t, srv.URL, a)}})
	if r.code != http.StatusSeeOther {
		t.Fatalf("sign out: %d\n%s", r.code, r.body)
	}
	if len(r.cookies) != 1 || r.cookies[0].Name != a.Name || r.cookies[0].MaxAge >= 0 {
		t.Errorf("sign out did not drop the cookie: %v", r.cookies)
	}
	if signedInWith(t, srv.URL, a) {
		t.Error("a copy of the cookie still works after sign-out")
	}
	if !signedInWith(t, srv.URL, b) {
		t.Error("signing out one session ended another")
	}
	// Sign-out without the session's CSRF token ends nothing.
	if r := rawRequest(t, http.MethodPost, srv.URL+"/signout", b.Name+"="+b.Value, url.Values{}); r.code != http.StatusForbidden || !signedInWith(t, srv.URL, b) {
		t.Errorf("sign-out without the CSRF token: %d; want 403 and the session alive", r.code)
	}

	// The server ends a session at its expiry, whatever the browser keeps.
	now.Add(int64(12*time.Hour + time.Second))
	if signedInWith(t, srv.URL, b) {
		t.Error("a session outlived its 12 h on the server")
	}
}

// TestTwoConsolesOnOneHost: a browser sends a host's cookies to every port of it (RFC 6265;
// net/http/cookiejar does the same): two consoles on 127.0.0.1 keep their own sessions, and
// signing in or out of one does not sign the other out.
func TestTwoConsolesOnOneHost(t *testing.T) {
	now := clockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	const tokB = "another-token-0123456789abcdef"
	a, b := httptest.NewServer(sessionConsole(t, token, now)), httptest.NewServer(sessionConsole(t, tokB, now))
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(u string, form url.Values) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	page := func(u string) string {
		t.Helper()
		resp, err := browser.Get(u + "/enqueue")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	signedIn := func(u string) bool { return strings.Contains(page(u), `id="mode">signed in`) }
	if post(a.URL+"/signin", url.Values{"token": {token}}) != http.StatusSeeOther || post(b.URL+"/signin", url.Values{"token": {tokB}}) != http.StatusSeeOther {
		t.Fatal("sign in")
	}
	if !signedIn(a.URL) || !signedIn(b.URL) {
		t.Fatalf("after signing in to both: a %v, b %v; want both signed in", signedIn(a.URL), signedIn(b.URL))
	}
	if u, _ := url.Parse(a.URL); len(jar.Cookies(u)) != 2 {
		t.Errorf("the browser holds %d cookies for the host, want one per console", len(jar.Cookies(u)))
	}
	body := page(b.URL)
	csrfB := body[strings.Index(body, `name="csrf" value="`)+len(`name="csrf" value="`):]
	csrfB = csrfB[:strings.IndexByte(csrfB, '"')]
	if post(b.URL+"/signout", url.Values{"csrf": {csrfB}}) != http.StatusSeeOther {
		t.Fatal("sign out of b")
	}
	if !signedIn(a.URL) || signedIn(b.URL) {
		t.Errorf("after signing out of b: a %v, b %v; want a signed in, b not", signedIn(a.URL), signedIn(b.URL))
	}
}

// TestCSRFTokenPerSession: the CSRF token belongs to one session: another session's is refused,
// and pages for someone who has not signed in carry none.
func TestCSRFTokenPerSession(t *testing.T) {
	now := clockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(sessionConsole(t, token, now))
	t.Cleanup(srv.Close)
	a, b := signInCookie(t, srv.URL, token), signInCookie(t, srv.URL, token)
	csrfA, csrfB := csrfOf(t, srv.URL, a), csrfOf(t, srv.URL, b)
	if csrfA == csrfB {
		t.Fatalf("two sessions share the CSRF token %q", csrfA)
	}
	form := url.Values{"kind": {"x.y"}, "args": {"{}"}, "csrf": {csrfA}}
	if r := rawRequest(t, http.MethodPost, srv.URL+"/enqueue", b.Name+"="+b.Value, form); r.code != http.StatusForbidden {
		t.Errorf("session b posting session a's CSRF token: %d, want 403", r.code)
	}
	for _, p := range []string{"/", "/jobs?state=dead", "/job?id=x", "/enqueue", "/signin"} {
		if r := rawRequest(t, http.MethodGet, srv.URL+p, "", nil); strings.Contains(r.body, `name="csrf"`) {
			t.Errorf("%s carries a CSRF token for a viewer who has not signed in", p)
		}
	}
}

// TestSignInLinks: the token never signs in from a URL (a browser keeps every URL it opened in
// its history); a one-time link signs one browser in, once, before it expires.
func TestSignInLinks(t *testing.T) {
	now := clockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	c := sessionConsole(t, token, now)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	sessionOf := func(cookies []*http.Cookie) *http.Cookie {
		for _, ck := range cookies {
			if strings.HasPrefix(ck.Name, "sqsworker_console") && ck.Value != "" {
				return ck
			}
		}
		return nil
	}

	// The token in a URL: no session, and the redirect drops it.
	for _, p := range []string{"/?token=" + token, "/jobs?state=dead&token=" + token} {
		r := rawRequest(t, http.MethodGet, srv.URL+p, "", nil)
		if r.code != http.StatusSeeOther || strings.Contains(r.location, token) || !strings.HasPrefix(r.location, "/signin?") || sessionOf(r.cookies) != nil {
			t.Errorf("%s: %d to %q, session %v; want a redirect to the sign-in form without the token, and no session", p, r.code, r.location, sessionOf(r.cookies))
			continue
		}
		if form := rawRequest(t, http.MethodGet, srv.URL+r.location, "", nil); !strings.Contains(form.body, "does not take its token in a link") {
			t.Errorf("the sign-in form does not say why:\n%s", form.body)
		}
	}

	// A one-time link: once.
	link, err := c.SignInLink(time.Hour)
	if err != nil || !strings.HasPrefix(link, "/signin?code=") || strings.Contains(link, token) {
		t.Fatalf("SignInLink: %q, %v", link, err)
	}
	// A HEAD request (a link checker, a preview) uses nothing up.
	if r := rawRequest(t, http.MethodHead, srv.URL+link, "", nil); sessionOf(r.cookies) != nil {
		t.Error("a HEAD request of the link signed in")
	}
	r := rawRequest(t, http.MethodGet, srv.URL+link, "", nil)
	ck := sessionOf(r.cookies)
	if r.code != http.StatusSeeOther || ck == nil || !signedInWith(t, srv.URL, ck) {
		t.Fatalf("the one-time link: %d, session %v", r.code, ck)
	}
	r = rawRequest(t, http.MethodGet, srv.URL+link, "", nil)
	if r.code != http.StatusUnauthorized || sessionOf(r.cookies) != nil || !strings.Contains(r.body, "used already, or has expired") {
		t.Errorf("the link a second time: %d, session %v; want 401 and no session", r.code, sessionOf(r.cookies))
	}
	// Unused past its end: refused.
	late, err := c.SignInLink(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now.Add(int64(time.Minute))
	if r := rawRequest(t, http.MethodGet, srv.URL+late, "", nil); r.code != http.StatusUnauthorized || sessionOf(r.cookies) != nil {
		t.Errorf("an expired link: %d, session %v", r.code, sessionOf(r.cookies))
	}
	if _, err := c.SignInLink(48 * time.Hour); err == nil {
		t.Error("a link valid for 48 h was made")
	}
	ro, err := console.New(console.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.SignInLink(time.Minute); err == nil {
		t.Error("a read-only console made a sign-in link")
	}
}

// TestSignInRedirectsStayOnTheConsole: the page a sign-in goes back to (next) is a path of the
// console, never another host: every control character is refused (a browser drops a tab or a
// newline from a URL, so "/\t/evil.example" would become "//evil.example").
func TestSignInRedirectsStayOnTheConsole(t *testing.T) {
	now := clockAt(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(sessionConsole(t, token, now))
	t.Cleanup(srv.Close)
	for _, next := range []string{
		"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "/\x00/evil.example", "/\x0b/evil.example", "/\x7f/evil.example",
		"/\u00a0/evil.example", "/\u202e/evil.example", "//evil.example", "/\\evil.example", "\\\\evil.example",
		"https://evil.example/", "http:/evil.example", " /evil.example", "javascript:alert(1)", "evil.example",
	} {
		if r := rawRequest(t, http.MethodPost, srv.URL+"/signin", "", url.Values{"token": {token}, "next": {next}}); r.code != http.StatusSeeOther || r.location != "/" {
			t.Errorf("next %q: %d to %q, want the overview", next, r.code, r.location)
		}
		// The form that carries next is safe too.
		if r := rawRequest(t, http.MethodGet, srv.URL+"/signin?"+url.Values{"next": {next}}.Encode(), "", nil); !strings.Contains(r.body, `name="next" value="/"`) {
			t.Errorf("the sign-in form keeps next %q", next)
		}
	}
	// A path of the console is kept.
	if r := rawRequest(t, http.MethodPost, srv.URL+"/signin", "", url.Values{"token": {token}, "next": {"/jobs?state=dead"}}); r.location != "/jobs?state=dead" {
		t.Errorf("next /jobs?state=dead: redirected to %q", r.location)
	}
}

// TestNoticesCannotBeForged: a link's ?done=…&id=… makes the console say nothing of its own: a
// notice is left by an action, in the session that did it, and shown once.
func TestNoticesCannotBeForged(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(nil)
	cl := newClient(t, c)
	cl.signIn()
	const forged = "ATTACKER-TEXT call +1-555-0100"
	for _, p := range []string{
		"/?done=redriven&id=" + url.QueryEscape(forged),
		"/dlq?done=purged&id=" + url.QueryEscape(forged),
		"/job?id=" + f.ids["succeeded"].ID + "&done=cancelled&id=" + url.QueryEscape(forged),
		"/schedules?done=created&id=" + url.QueryEscape(forged),
		"/?done=" + url.QueryEscape(forged),
	} {
		if _, body := cl.get(p); strings.Contains(body, "ATTACKER-TEXT") || strings.Contains(body, `class="notice"`) {
			t.Errorf("%s: the page shows a notice, or the link's text", p)
		}
	}
	// A real action's notice: on the page its redirect shows, once, for its session only.
	code, loc, body := cl.post("/schedules/create", url.Values{"name": {"notice-test"}, "expression": {"rate(1 hour)"}, "kind": {"report.build"}, "csrf": {cl.csrf("/schedules")}})
	if code != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", code, body)
	}
	t.Cleanup(func() { _ = f.sched.Delete(t.Context(), "notice-test") })
	other := newClient(t, c)
	other.signIn()
	if _, body := other.get(loc); strings.Contains(body, `class="notice"`) {
		t.Error("another session sees the notice")
	}
	if _, body := cl.get(loc); !strings.Contains(body, "Saved recurring schedule notice-test.") {
		t.Errorf("the action's notice is not shown at %s", loc)
	}
	if _, body := cl.get(loc); strings.Contains(body, `class="notice"`) {
		t.Error("the notice is shown again on a reload")
	}
}
