package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the templates of templates/, each rendered inside layout.html.
var pageNames = []string{"overview", "jobs", "job", "dlq", "redrive", "schedules", "enqueue", "signin", "error", "flow"}

type pageSet struct{ t map[string]*template.Template }

func loadPages() (*pageSet, error) {
	funcs := template.FuncMap{
		"time": showTime,
		"plural": func(n int, word string) string {
			if n == 1 {
				return "1 " + word
			}
			return fmt.Sprintf("%d %ss", n, word)
		},
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	ps := &pageSet{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		ps.t[name] = t
	}
	return ps, nil
}

// staticHandler serves the embedded CSS and JavaScript.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		fsrv.ServeHTTP(w, r)
	})
}

// view is what every page template gets.
type view struct {
	Title    string // the page's title
	System   string // Config.Title
	Page     string // the template, and the active tab
	Prefix   string
	SignedIn bool
	ReadOnly bool
	// CanAct reports whether the page shows action forms (not read-only).
	CanAct   bool
	CSRF     string
	ShowArgs bool
	// Has* say which parts are configured (the tabs shown).
	HasStatus, HasDLQ, HasSchedules, HasProducer, HasQueues, HasFlow bool
	// Notice and Error are shown at the top of the page.
	Notice, Error string
	// Data is the page's own data.
	Data any
}

// newView starts a page's view.
func (c *Console) newView(r *http.Request, page, title string) *view {
	return &view{
		Title: title, System: clean(c.cfg.Title), Page: page, Prefix: c.cfg.Prefix,
		SignedIn: c.signedIn(r), ReadOnly: c.cfg.ReadOnly, CanAct: !c.cfg.ReadOnly, CSRF: c.csrf,
		ShowArgs:  c.cfg.ShowArgs,
		HasStatus: c.cfg.Status != nil, HasDLQ: c.cfg.DLQ != nil, HasSchedules: c.cfg.Schedules != nil,
		HasProducer: c.cfg.Producer != nil, HasQueues: c.cfg.SQS != nil, HasFlow: c.cfg.Flow != nil,
		Notice: notice(r.URL.Query()),
	}
}

// render executes the page into a buffer, then writes it: a template error never leaves half a
// page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, v *view) {
	t := c.pages.t[v.Page]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.log.Error("console: render", "page", v.Page, "error", err)
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// notFound renders the 404 page.
func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.refuse(w, r, http.StatusNotFound, "There is no such page in the console.")
}

// notices are the messages an action's redirect may ask a page to show (?done=CODE&id=…): a
// fixed set of sentences, so that a link cannot make the console say anything else.
var notices = map[string]string{
	"redriven":   "Redrove job %s: it is back on the job queue with a fresh attempt budget.",
	"cancelled":  "Cancelled job %s: a delivery of it is acknowledged without running.",
	"copied":     "Enqueued a copy of the job as job %s.",
	"enqueued":   "Enqueued job %s.",
	"scheduled":  "Scheduled job %s: the scheduler sends it when it is due.",
	"purged":     "Purged %s: SQS deletes its messages within 60 seconds.",
	"created":    "Saved recurring schedule %s.",
	"enabled":    "Enabled recurring schedule %s.",
	"disabled":   "Disabled recurring schedule %s.",
	"deleted":    "Deleted recurring schedule %s.",
	"signed-out": "Signed out%s.",
	// Flow control (flow.go).
	"kind-paused":     "Paused kind %s: workers defer its jobs from their next pause check (within seconds).",
	"kind-resumed":    "Resumed kind %s.",
	"kind-not-paused": "Kind %s was not paused.",
	"queue-paused":    "Paused queue %s: nothing is received until it is resumed.",
	"queue-resumed":   "Resumed queue %s.",
}

func notice(q url.Values) string {
	f, ok := notices[q.Get("done")]
	if !ok {
		return ""
	}
	return fmt.Sprintf(f, clip(q.Get("id"), 200))
}

// clean returns s as valid UTF-8 (invalid bytes become U+FFFD): job data may hold anything.
func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// clip returns the first line of s, cleaned, at most n runes, marking a cut with "…".
func clip(s string, n int) string {
	s = clean(s)
	cut := false
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s, cut = s[:i], true
	}
	if utf8.RuneCountInString(s) > n {
		s, cut = string([]rune(s)[:n-1]), true
	}
	if cut {
		s += "…"
	}
	return s
}

// showTime formats a time as the CLI does (UTC, milliseconds), "-" when zero.
func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(jobs.TimeLayout)
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// showAge formats a duration as "3m12s" (seconds precision), "-" when unknown.
func showAge(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	if d < time.Second {
		return "0s"
	}
	return d.Truncate(time.Second).String()
}

// link returns the console path p with the query.
func (c *Console) link(p string, q url.Values) string {
	if len(q) == 0 {
		return c.path(p)
	}
	return c.path(p) + "?" + q.Encode()
}

// redirect answers an action with a redirect to page p of the console (303: the browser GETs it).
func (c *Console) redirect(w http.ResponseWriter, r *http.Request, p string, q url.Values) {
	http.Redirect(w, r, c.link(p, q), http.StatusSeeOther)
}
