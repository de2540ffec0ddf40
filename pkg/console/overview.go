package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/queues"
)

// window is a chart window of the overview.
type window struct {
	Name    string
	Label   string
	Step    time.Duration
	Buckets int
}

var windows = []window{
	{Name: "1h", Label: "last hour", Step: 5 * time.Minute, Buckets: 12},
	{Name: "24h", Label: "last day", Step: time.Hour, Buckets: 24},
}

func windowOf(name string) window {
	for _, w := range windows {
		if w.Name == name {
			return w
		}
	}
	return windows[0]
}

// queueJSON is one queue's line of the overview.
type queueJSON struct {
	Role     string `json:"role"`
	Name     string `json:"name"`
	Visible  *int   `json:"visible"`
	InFlight *int   `json:"in_flight"`
	Delayed  *int   `json:"delayed"`
	// OldestAge is the age of the oldest message, such as "3m12s", or "-" when unknown.
	OldestAge string `json:"oldest_age"`
	Error     string `json:"error"`
	// Href is the Dead letters page of a DLQ row whose DLQ the console works on, else "".
	Href string `json:"href"`
}

// kindJSON is one kind's counts per bucket.
type kindJSON struct {
	Kind         string    `json:"kind"`
	Succeeded    []float64 `json:"succeeded"`
	Failed       []float64 `json:"failed"`
	Retried      []float64 `json:"retried"`
	DeadLettered []float64 `json:"dead_lettered"`
}

// overviewJSON is the document /api/overview returns, and what the overview page shows.
type overviewJSON struct {
	GeneratedAt string      `json:"generated_at"`
	Window      string      `json:"window"`
	WindowLabel string      `json:"window_label"`
	Start       string      `json:"start"`
	StepSeconds int         `json:"step_seconds"`
	Buckets     int         `json:"buckets"`
	Queues      []queueJSON `json:"queues"`
	RatesSource string      `json:"rates_source"`
	// RatesUnit is what one count is: "job" (each job once, by its latest state) or "attempt"
	// (each attempt, by its outcome).
	RatesUnit  string     `json:"rates_unit"`
	RatesError string     `json:"rates_error"`
	Kinds      []kindJSON `json:"kinds"`
	// Unreachable, when set, is the one sentence that says the backend does not answer and what
	// to check; the queues' and the rates' errors are then empty.
	Unreachable string `json:"unreachable"`
	// Approximate says the queues' visible and in-flight counts come from an emulator that does
	// not refresh them (Config.Emulator).
	Approximate bool `json:"approximate"`
	// RefreshMillis is how often the page refreshes itself; Refresh says it for a person.
	RefreshMillis int    `json:"refresh_ms"`
	Refresh       string `json:"refresh"`
}

// overview gathers the queues' depths and the rates, concurrently.
func (c *Console) overview(ctx context.Context, win window) overviewJSON {
	now := c.cfg.Now()
	start := now.Truncate(win.Step).Add(win.Step).Add(-time.Duration(win.Buckets) * win.Step)
	doc := overviewJSON{
		GeneratedAt: showTime(now), Window: win.Name, WindowLabel: win.Label, Start: start.UTC().Format(time.RFC3339),
		StepSeconds: int(win.Step / time.Second), Buckets: win.Buckets, Kinds: []kindJSON{},
		RefreshMillis: int(c.cfg.Refresh / time.Millisecond), Refresh: duration(c.cfg.Refresh), Approximate: c.cfg.Emulator,
	}
	var wg sync.WaitGroup
	lines := c.queueLines()
	doc.Queues = make([]queueJSON, len(lines))
	lineErrs := make([]error, len(lines))
	for i, l := range lines {
		wg.Go(func() { doc.Queues[i], lineErrs[i] = c.queueRowErr(ctx, l) })
	}
	var ratesErr error
	if c.cfg.Stats != nil {
		wg.Go(func() {
			r, err := c.cfg.Stats.Rates(ctx, RatesQuery{Start: start, Step: win.Step, Buckets: win.Buckets})
			if err != nil {
				ratesErr = err
				return
			}
			doc.RatesSource, doc.RatesUnit = clean(r.Source), r.Unit
			for _, k := range r.Kinds {
				doc.Kinds = append(doc.Kinds, kindJSON{Kind: clean(k.Kind), Succeeded: k.Succeeded, Failed: k.Failed,
					Retried: k.Retried, DeadLettered: k.DeadLettered})
			}
		})
	}
	wg.Wait()
	// An unreachable backend is said once, with what to check, instead of an SDK error per queue
	// and per chart.
	down := unreachable(ratesErr)
	for _, l := range lineErrs {
		down = down || unreachable(l)
	}
	if down {
		doc.Unreachable = c.unreachableMessage()
		for i := range doc.Queues {
			doc.Queues[i].Error = ""
		}
	} else if ratesErr != nil {
		doc.RatesError = c.backendError("Reading the charts failed", ratesErr)
	}
	if doc.RatesUnit == "" {
		doc.RatesUnit = "job"
	}
	return doc
}

// overviewQueue is one row of the overview's queue table: which queue, and whether Stats' oldest
// age applies to it (Stats knows the two queues of QueueURL and DLQURL only).
type overviewQueue struct {
	role      QueueRole
	label     string // the row's "queue" cell
	name, url string
	stats     bool
}

// queueLines returns the overview's rows: QueueURL's and DLQURL's, or with Config.Queues the
// rows of every queue of the set and of its DLQ.
func (c *Console) queueLines() []overviewQueue {
	var out []overviewQueue
	if set := c.cfg.Queues; set != nil && set.Len() > 0 {
		for _, q := range set.All() {
			main := q.URL == c.cfg.QueueURL || (c.cfg.QueueURL == "" && q.Name == set.Default().Name)
			out = append(out, overviewQueue{JobQueue, "job queue " + q.Name, q.SQSName(), q.URL, main})
			if q.DLQURL != "" {
				out = append(out, overviewQueue{DeadLetterQueue, "dead-letter queue " + q.Name, queues.NameOf(q.DLQURL), q.DLQURL, main})
			}
		}
		return out
	}
	if c.cfg.QueueURL != "" {
		out = append(out, overviewQueue{JobQueue, "job queue", c.queueName, c.cfg.QueueURL, true})
	}
	if c.cfg.DLQURL != "" {
		out = append(out, overviewQueue{DeadLetterQueue, "dead-letter queue", c.dlqName, c.cfg.DLQURL, true})
	}
	return out
}

// queueLine reads the depths of a job queue (role JobQueue) or a DLQ named name at url; Stats'
// oldest age is read for the queues of QueueURL and DLQURL only.
func (c *Console) queueLine(ctx context.Context, role QueueRole, url, name string) queueJSON {
	main := url == c.cfg.QueueURL || url == c.cfg.DLQURL
	q := overviewQueue{JobQueue, "job queue", name, url, main}
	if role == DeadLetterQueue {
		q = overviewQueue{DeadLetterQueue, "dead-letter queue", name, url, main}
	}
	line, _ := c.queueRowErr(ctx, q)
	return line
}

// queueRowErr reads one queue's depths (and, through Stats, its oldest message's age), with the
// first error it met.
func (c *Console) queueRowErr(ctx context.Context, q overviewQueue) (queueJSON, error) {
	var first error
	line := queueJSON{Role: clean(q.label), Name: clean(q.name), OldestAge: "-"}
	role, url := q.role, q.url
	if role == DeadLetterQueue {
		if t := c.dlqByURL(url); t != nil {
			line.Href = c.dlqLink(t, "/dlq", nil)
		}
	}
	if c.cfg.SQS != nil {
		out, err := c.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed},
		})
		if err != nil {
			first = err
			line.Error = c.backendError("Reading the queue failed", err)
		} else {
			num := func(name sqstypes.QueueAttributeName) *int {
				if n, err := strconv.Atoi(out.Attributes[string(name)]); err == nil {
					return &n
				}
				return nil
			}
			line.Visible = num(sqstypes.QueueAttributeNameApproximateNumberOfMessages)
			line.InFlight = num(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
			line.Delayed = num(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)
		}
	}
	if c.cfg.Stats != nil && q.stats {
		age, ok, err := c.cfg.Stats.OldestAge(ctx, role)
		if err != nil && line.Error == "" {
			first = err
			line.Error = c.backendError("Reading the oldest message's age failed", err)
		}
		line.OldestAge = showAge(age, ok)
	}
	return line, first
}

// overviewPage renders the overview; its script refreshes it from /api/overview.
func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request) {
	win := windowOf(r.URL.Query().Get("window"))
	v := c.newView(r, "overview", "Overview")
	doc := c.overview(r.Context(), win)
	type winLink struct {
		Label, Href string
		Active      bool
	}
	var links []winLink
	for _, w := range windows {
		links = append(links, winLink{Label: w.Label, Href: c.link("/", map[string][]string{"window": {w.Name}}), Active: w.Name == win.Name})
	}
	v.Data = struct {
		Doc      overviewJSON
		Windows  []winLink
		APIURL   string
		HasStats bool
		Step     string
	}{doc, links, c.link("/api/overview", map[string][]string{"window": {win.Name}}), c.cfg.Stats != nil, duration(win.Step)}
	c.render(w, r, http.StatusOK, v)
}

// overviewAPI returns the overview as JSON, for the page's refresh.
func (c *Console) overviewAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.overview(r.Context(), windowOf(r.URL.Query().Get("window"))))
}

// writeJSON writes v as JSON (encoding/json replaces invalid UTF-8 and escapes <, > and &).
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "console: encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
