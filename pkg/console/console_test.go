package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

var (
	hostileOnce sync.Once
	hostileFix  *fixture
)

// sharedHostile returns the fixture with hostile job data, made once for the read-only tests.
func sharedHostile(t *testing.T) *fixture {
	hostileOnce.Do(func() { hostileFix = newFixture(&onceTB{t}, fixtureOptions{hostile: true}) })
	if hostileFix == nil {
		t.Fatal("the shared fixture failed")
	}
	return hostileFix
}

// onceTB lets the shared fixture outlive the test that made it: its cleanups never run (the
// process's end stops the worker).
type onceTB struct{ *testing.T }

func (o *onceTB) Cleanup(func()) {}

// checkSafe fails when a page shows job data unescaped or is not valid UTF-8.
func checkSafe(t *testing.T, what, body string) {
	t.Helper()
	for _, bad := range []string{"<script>window.__xss", "<img src=x", `onerror="window`, "\xff"} {
		if strings.Contains(body, bad) {
			t.Errorf("%s: the page holds %q unescaped", what, bad)
		}
	}
	if !utf8.ValidString(body) {
		t.Errorf("%s: the page is not valid UTF-8", what)
	}
	if n := strings.Count(body, "<script"); n > 1 {
		t.Errorf("%s: %d script elements, want only the console's own", what, n)
	}
}

func TestPagesShowRealJobsEscaped(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(nil)
	cl := newClient(t, c)
	cl.signIn()    // the pages that peek at the DLQ need it
	cl.get("/dlq") // a peek: the job page of a dead letter without a record reads it
	jobURL := func(r jobRef) string {
		return "/job?" + url.Values{"kind": {r.Kind}, "key": {r.Key}}.Encode()
	}
	pages := []struct {
		path string
		code int
		want []string
	}{
		{"/", 200, []string{"Overview", f.stack.Name + "-jobs", f.stack.Name + "-jobs-dlq", "job table"}},
		{"/jobs?state=dead", 200, []string{"image.resize", "payment.refund", "exhausted", "cancelled", "&lt;script&gt;window.__xss=1&lt;/script&gt;"}},
		{"/jobs?state=retrying", 200, []string{"report.build", "warehouse timeout"}},
		{"/jobs?state=scheduled", 200, []string{"invoice.render", f.ids["scheduled"].ID}},
		{"/jobs?state=cancelled", 200, []string{"invoice.render", f.ids["cancelled"].ID}},
		{"/jobs?state=dead&kind=image.resize", 200, []string{f.ids["resize"].ID, f.ids["resize2"].ID}},
		{"/jobs?state=retrying&kind=email.send", 200, []string{"No retrying job of kind email.send"}},
		{"/jobs?state=running", 400, []string{"is not listed"}},
		{"/jobs?state=dead&page=garbage", 400, []string{"damaged"}},
		{jobURL(f.ids["resize"]), 200, []string{"Record", "dead", "exhausted", "Dead letter", "Envelope", "hidden (", "Redrive", "Enqueue a copy", "decode s3://photos/broken.jpg"}},
		{jobURL(f.ids["refund"]), 200, []string{"cancelled", "was already refunded"}},
		{jobURL(f.ids["succeeded"]), 200, []string{"succeeded", "not kept after the enqueue"}},
		{jobURL(f.ids["retrying"]), 200, []string{"retrying", "warehouse timeout", `id="stop" class="danger">Cancel<`}}, // a retrying job can be cancelled (control.go)
		{jobURL(f.ids["scheduled"]), 200, []string{"scheduled", "Schedule", "sqsworker-job-", "Cancel", "Enqueue a copy"}},
		{jobURL(f.ids["cancelled"]), 200, []string{"cancelled"}},
		{"/job?id=" + f.ids["resize"].ID, 200, []string{"exhausted"}},
		{"/job?id=legacy-1", 200, []string{"unknown_kind", "no worker is registered"}},
		{"/job?id=no-such-job", 404, []string{"No job no-such-job was found", "found from the Dead letters page"}},
		{"/dlq", 200, []string{"exhausted", "cancelled", "malformed", "unknown_kind", "payload_mismatch", "Redrive all", "Purge", "6 dead letters"}},
		{"/schedules", 200, []string{"No recurring schedule", f.ids["scheduled"].ID, "Delayed jobs"}},
		{"/enqueue", 200, []string{"Enqueue a job", `name="args"`}},
		{"/signin", 200, []string{"Sign in", `type="password"`}},
		{"/dlq/redrive", 200, []string{"No redrive has run"}},
		{"/nothing-here", 404, []string{"no such page"}},
	}
	for _, p := range pages {
		t.Run(p.path, func(t *testing.T) {
			code, body := cl.get(p.path)
			if code != p.code {
				t.Fatalf("GET %s: %d, want %d\n%s", p.path, code, p.code, body)
			}
			for _, w := range p.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: the page does not say %q", p.path, w)
				}
			}
			checkSafe(t, p.path, body)
		})
	}
	// Every response has the strict policy.
	resp, err := http.Get(cl.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

func TestArgsShownOnlyWithShowArgs(t *testing.T) {
	f := sharedHostile(t)
	path := "/job?" + url.Values{"kind": {"image.resize"}, "key": {f.ids["resize"].Key}}.Encode()
	hidden, _ := f.console(nil)
	hcl := newClient(t, hidden)
	hcl.signIn()
	_, body := hcl.get(path)
	if strings.Contains(body, "&#34;url&#34;:") || !strings.Contains(body, "hidden (") {
		t.Error("the args are shown without ShowArgs")
	}
	shown, _ := f.console(func(c *console.Config) { c.ShowArgs = true })
	scl := newClient(t, shown)
	scl.signIn()
	_, body = scl.get(path)
	if !strings.Contains(body, "&#34;url&#34;: &#34;s3://photos/broken.jpg &lt;script&gt;window.__xss=1&lt;/script&gt;") {
		t.Errorf("ShowArgs: the args are not shown, escaped:\n%s", body)
	}
	checkSafe(t, path, body)
	scl.get("/dlq")
	_, body = scl.get("/job?id=legacy-1")
	if !strings.Contains(body, "&#34;invoice&#34;: 7") {
		t.Errorf("ShowArgs: the dead letter's body is not shown:\n%s", body)
	}
}

func TestOverviewAPI(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(nil)
	code, body := newClient(t, c).get("/api/overview?window=24h")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var doc struct {
		Window string `json:"window"`
		Queues []struct {
			Name     string `json:"name"`
			Visible  *int   `json:"visible"`
			InFlight *int   `json:"in_flight"`
			Error    string `json:"error"`
		} `json:"queues"`
		Buckets int `json:"buckets"`
		Kinds   []struct {
			Kind         string    `json:"kind"`
			Succeeded    []float64 `json:"succeeded"`
			Retried      []float64 `json:"retried"`
			DeadLettered []float64 `json:"dead_lettered"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Window != "24h" || doc.Buckets != 24 || len(doc.Queues) != 2 {
		t.Fatalf("overview %+v", doc)
	}
	if q := doc.Queues[1]; q.Name != f.stack.Name+"-jobs-dlq" || q.Visible == nil || *q.Visible+*q.InFlight != 6 || q.Error != "" {
		t.Errorf("DLQ line %+v, want 6 messages", q)
	}
	total := map[string][3]float64{}
	for _, k := range doc.Kinds {
		var s [3]float64
		for i := range k.Succeeded {
			s[0] += k.Succeeded[i]
			s[1] += k.Retried[i]
			s[2] += k.DeadLettered[i]
		}
		total[k.Kind] = s
	}
	if total["image.resize"][2] != 2 || total["payment.refund"][2] != 1 || total["email.send"][0] != 1 || total["report.build"][1] != 1 {
		t.Errorf("per-kind totals (succeeded, retried, dead) %v", total)
	}
	if strings.Contains(body, "<") {
		t.Error("the JSON holds a raw '<'")
	}
}

func TestDLQPages(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(func(c *console.Config) { c.PageSize = 4 })
	cl := newClient(t, c)
	cl.signIn()
	_, first := cl.get("/dlq")
	if !strings.Contains(first, "Dead letters 1-4 of 6") || !strings.Contains(first, "next page") {
		t.Fatalf("first page:\n%s", first)
	}
	i := strings.Index(first, `href="/dlq?page=2&amp;snap=`)
	if i < 0 {
		t.Fatalf("no next link:\n%s", first)
	}
	next := first[i+len(`href="`):]
	next = strings.ReplaceAll(next[:strings.IndexByte(next, '"')], "&amp;", "&")
	_, second := cl.get(next)
	if !strings.Contains(second, "Dead letters 5-6 of 6") || !strings.Contains(second, "previous page") {
		t.Fatalf("second page:\n%s", second)
	}
	checkSafe(t, "dlq page 2", second)
}

func TestJobsPaging(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(func(c *console.Config) { c.PageSize = 2 })
	cl := newClient(t, c)
	seen := map[string]bool{}
	path := "/jobs?state=dead"
	for pages := 0; path != "" && pages < 10; pages++ {
		_, body := cl.get(path)
		for _, id := range []string{f.ids["resize"].ID, f.ids["resize2"].ID, f.ids["refund"].ID} {
			if strings.Contains(body, id) {
				seen[id] = true
			}
		}
		path = ""
		if i := strings.Index(body, `id="next"`); i >= 0 {
			j := strings.LastIndex(body[:i], `href="`)
			p := body[j+len(`href="`):]
			path = strings.ReplaceAll(p[:strings.IndexByte(p, '"')], "&amp;", "&")
		}
	}
	if len(seen) != 3 {
		t.Errorf("paging through the dead jobs 2 at a time saw %v, want 3 jobs", seen)
	}
}

func TestFindJob(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(nil)
	cl := newClient(t, c)
	r := f.ids["retrying"]
	for _, q := range []string{r.ID, r.Kind + "/" + r.Key} {
		code, body, _ := cl.follow("/find?" + url.Values{"q": {q}}.Encode())
		if code != 200 || !strings.Contains(body, "warehouse timeout") {
			t.Errorf("find %.40q: %d", q, code)
		}
	}
}

// fakeStatus returns records whose every field is hostile, invalid UTF-8 included.
type fakeStatus struct{ console.StatusAPI }

func (fakeStatus) List(context.Context, status.ListQuery) (status.Page, error) {
	return status.Page{Jobs: []status.Job{fakeJob()}}, nil
}
func (fakeStatus) Get(context.Context, string, string) (status.Job, error) { return fakeJob(), nil }
func (fakeStatus) GetByID(context.Context, string) (status.Job, error)     { return fakeJob(), nil }

func fakeJob() status.Job {
	h := hostileScript + hostileImg + hostileUTF8 + hostileBidi
	j := status.Job{}
	j.Kind, j.Key, j.JobID, j.State, j.Reason, j.LastError, j.Result = "x.y", h, h, idempotency.StateDead, h, h+hostileLong, h
	return j
}

func TestHostileRecordFromAnyStore(t *testing.T) {
	c, err := console.New(console.Config{Status: fakeStatus{}, Token: token, Title: hostileScript + hostileUTF8})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	for _, p := range []string{"/jobs?state=dead", "/job?kind=x.y&key=k", "/job?id=x"} {
		code, body := cl.get(p)
		if code != 200 {
			t.Fatalf("%s: %d\n%s", p, code, body)
		}
		checkSafe(t, p, body)
		if !strings.Contains(body, "bad\uFFFDutf8") {
			t.Errorf("%s: invalid UTF-8 is not replaced", p)
		}
	}
}

func TestPrefixAndHosts(t *testing.T) {
	c, err := console.New(console.Config{Status: fakeStatus{}, Token: token, Prefix: "/ops/jobs/", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	code, body := cl.get("/ops/jobs/jobs?state=dead")
	if code != 200 || !strings.Contains(body, `href="/ops/jobs/static/style.css"`) || !strings.Contains(body, `action="/ops/jobs/find"`) {
		t.Fatalf("mounted under a prefix: %d\n%s", code, body)
	}
	if code, _ := cl.get("/jobs?state=dead"); code != 404 {
		t.Errorf("outside the prefix: %d, want 404", code)
	}
	if code, body := cl.get("/ops/jobs/static/app.js"); code != 200 || !strings.Contains(body, "textContent") {
		t.Errorf("static asset: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, cl.srv.URL+"/ops/jobs/", nil)
	req.Host = "evil.example:8080"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %d, want 421", resp.StatusCode)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  console.Config
	}{
		{"no token", console.Config{}},
		{"short token", console.Config{Token: "short"}},
		{"relative prefix", console.Config{Token: token, Prefix: "ops"}},
		{"page size", console.Config{Token: token, PageSize: 5000}},
	} {
		if _, err := console.New(tc.cfg); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := console.New(console.Config{ReadOnly: true}); err != nil {
		t.Errorf("read-only without a token: %v", err)
	}
}

// TestSessionCookieSecure: the session cookie is Secure over TLS, and with Config.SecureCookie
// behind a proxy that terminates TLS (the console sees plain HTTP); X-Forwarded-Proto alone,
// which any client can send, does not make it Secure, nor does it keep it from being so.
func TestSessionCookieSecure(t *testing.T) {
	cookie := func(h *console.Console, tls bool, headers ...string) *http.Cookie {
		t.Helper()
		srv := httptest.NewUnstartedServer(h)
		if tls {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		defer srv.Close()
		link, err := h.SignInLink(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+link, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		hc := srv.Client()
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if strings.HasPrefix(c.Name, "sqsworker_console_") {
				return c
			}
		}
		t.Fatalf("no session cookie (status %d)", resp.StatusCode)
		return nil
	}
	plain, err := console.New(console.Config{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	secure, err := console.New(console.Config{Token: token, SecureCookie: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		h       *console.Console
		tls     bool
		headers []string
		want    bool
	}{
		{"plain HTTP", plain, false, nil, false},
		{"plain HTTP, X-Forwarded-Proto https", plain, false, []string{"X-Forwarded-Proto", "https"}, false},
		{"TLS", plain, true, nil, true},
		{"SecureCookie behind a TLS proxy", secure, false, []string{"X-Forwarded-Proto", "https"}, true},
		{"SecureCookie", secure, false, nil, true},
	} {
		c := cookie(tc.h, tc.tls, tc.headers...)
		if c.Secure != tc.want || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Errorf("%s: Secure %v HttpOnly %v SameSite %v, want Secure %v, HttpOnly, Strict", tc.name, c.Secure, c.HttpOnly, c.SameSite, tc.want)
		}
	}
}
