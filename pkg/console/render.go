package console

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	template "github.com/DataDog/datadog-agent/pkg/template/html"

	"github.com/sqsworker/sqsworker/internal/termsafe"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the templates of templates/, each rendered inside layout.html.
var pageNames = []string{"overview", "jobs", "job", "dlq", "message", "redrive", "schedules", "enqueue", "signin", "error", "batches", "batch", "chain", "flow"}

// pagePartials are the templates of sections a page includes, each in a file of its own.
var pagePartials = map[string][]string{"job": {"templates/control.html", "templates/longjob.html"}}

type pageSet struct{ t map[string]*template.Template }

func loadPages() (*pageSet, error) {
	funcs := template.FuncMap{
		"duration": duration,
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
		files := append([]string{"templates/" + name + ".html"}, pagePartials[name]...)
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, files...)
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
	// CanAct reports whether the page shows action forms: signed in, not read-only.
	CanAct bool
	// CSRF is the session's CSRF token, for the forms; empty for anyone not signed in.
	CSRF     string
	ShowArgs bool
	// Has* say which parts are configured (the tabs shown).
	HasStatus, HasDLQ, HasSchedules, HasProducer, HasQueues, HasBatches, HasFlow bool
	// Notice and Error are shown at the top of the page.
	Notice, Error string
	// SignInHref is the sign-in page, back to this page afterwards.
	SignInHref string
	// Data is the page's own data.
	Data any
}

// newView starts a page's view.
func (c *Console) newView(r *http.Request, page, title string) *view {
	cl := c.caller(r)
	return &view{
		Title: title, System: clean(c.cfg.Title), Page: page, Prefix: c.cfg.Prefix,
		SignedIn: cl.signedIn(), ReadOnly: c.cfg.ReadOnly, CanAct: !c.cfg.ReadOnly && cl.signedIn(), CSRF: cl.csrf(),
		ShowArgs:  c.cfg.ShowArgs,
		HasStatus: c.cfg.Status != nil, HasDLQ: c.dlq != nil, HasSchedules: c.cfg.Schedules != nil,
		HasProducer: c.cfg.Producer != nil, HasQueues: c.cfg.SQS != nil, HasBatches: c.cfg.Batches != nil, HasFlow: c.cfg.Flow != nil,
		Notice:     c.notice(r, cl),
		SignInHref: c.signInHref(r),
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

// clean returns s for display on one line: valid UTF-8 (invalid bytes become U+FFFD), with every
// control character (C0, DEL, C1: tab and newline included) and every bidirectional control
// written as a visible escape, such as \x1b or \u202e. Job data may hold anything: a U+202E
// would reverse what follows it on the page, a newline would hide in HTML's whitespace.
func clean(s string) string { return escapeHidden(strings.ToValidUTF8(s, "\uFFFD"), false) }

// cleanText is clean for text shown as it is, in a <pre>: tabs and newlines stay.
func cleanText(s string) string { return escapeHidden(strings.ToValidUTF8(s, "\uFFFD"), true) }

// raw returns s as valid UTF-8 and nothing else changed: the value a form posts back, or a link
// carries (the escapes of clean would name another job).
func raw(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// hidden reports whether r is a character the console shows escaped: the same set the CLI
// escapes (termsafe.Unsafe: C0 and C1 controls, DEL, bidirectional controls, the line and
// paragraph separators), so both show hostile job data alike.
func hidden(r rune) bool { return termsafe.Unsafe(r) }

// escapeHidden writes every hidden character of s as an escape: \xNN below U+0080, \uNNNN
// above. keepLines keeps tabs and newlines.
func escapeHidden(s string, keepLines bool) string {
	i := strings.IndexFunc(s, func(r rune) bool { return hidden(r) && !(keepLines && (r == '\n' || r == '\t')) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		switch {
		case !hidden(r) || keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// clip returns the first line of s, at most n runes (cut before it is cleaned, so that no
// escape is cut in half), cleaned, marking a cut with "…".
func clip(s string, n int) string {
	s = raw(s)
	cut := false
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s, cut = s[:i], true
	}
	if utf8.RuneCountInString(s) > n {
		s, cut = string([]rune(s)[:n-1]), true
	}
	s = clean(s)
	if cut {
		s += "…"
	}
	return s
}

// showTime formats a time as the CLI does (UTC, milliseconds), "-" when zero: the JSON's times,
// and a <time>'s exact value.
func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(jobs.TimeLayout)
}

// when is a time as the pages show it: relative to the page's time ("3 min ago", "in 2 h"), with
// the exact time (UTC, milliseconds) in a <time> element's datetime and title (the template
// "time"). The zero when shows as "-".
type when struct{ ISO, Rel string }

// when returns t as the pages show it, relative to the console's clock.
func (c *Console) when(t time.Time) when {
	if t.IsZero() {
		return when{}
	}
	return when{ISO: showTime(t), Rel: relative(t, c.cfg.Now())}
}

// relative says how long ago t was (or how long until it), in the largest units that fit: "just
// now", "42 s ago", "3 min ago", "2 h 5 min ago", "3 days ago", "in 20 min"; a date beyond 60
// days.
func relative(t, now time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	if d < time.Second {
		return "just now"
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 10*time.Hour && d%time.Hour >= time.Minute:
		s = fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d/time.Hour))
	case d < 60*24*time.Hour:
		s = fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	default:
		return t.UTC().Format("2006-01-02")
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// duration says d in the units a person reads: "0.5 s", "5 s", "1 min 30 s", "2 h", "1 h 5 min".
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0 s"
	case d < time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
	}
	d = d.Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var parts []string
	if h > 0 {
		parts = append(parts, fmt.Sprintf("%d h", h))
	}
	if m > 0 {
		parts = append(parts, fmt.Sprintf("%d min", m))
	}
	if sec > 0 && h == 0 {
		parts = append(parts, fmt.Sprintf("%d s", sec))
	}
	if len(parts) == 0 {
		return "0 s"
	}
	return strings.Join(parts, " ")
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// showAge formats a duration as duration does (seconds precision), "-" when unknown.
func showAge(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	if d < time.Second {
		return "0 s"
	}
	return duration(d.Truncate(time.Second))
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
