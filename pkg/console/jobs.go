package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// listedStates are the states the Jobs page lists: those the by_status index holds, as the
// CLI's `jobs --status`.
var listedStates = []idempotency.State{idempotency.StateRetrying, idempotency.StateDead, idempotency.StateScheduled, idempotency.StateCancelled}

// emptyStates say what an empty listing means and what to do.
var emptyStates = map[idempotency.State]string{
	idempotency.StateRetrying:  "No job is waiting for a retry. A job whose attempt fails is listed here until its next attempt.",
	idempotency.StateDead:      "No dead job. Jobs the worker gives up on (attempts exhausted, cancelled, malformed, unknown kind) are listed here with the reason; redrive them from the Dead letters page.",
	idempotency.StateScheduled: "No scheduled job. Jobs enqueued with a delay beyond 15 minutes (or any delay on a FIFO queue) wait here until the scheduler sends them; enqueue one with a delay.",
	idempotency.StateCancelled: "No cancelled job. A scheduled or queued job can be cancelled from its page.",
}

// jobRow is one job of a listing, cleaned for display: clipped values, and the whole ones
// (JobIDFull, KeyFull) for the hover.
type jobRow struct {
	JobID, JobIDFull, Kind, Key, KeyFull, State, Reason, LastError, Href string
	Updated                                                              when
	Runs                                                                 int
}

func (c *Console) jobHref(kind, key string) string {
	return c.link("/job", url.Values{"kind": {kind}, "key": {key}})
}

func (c *Console) jobIDHref(id string) string {
	return c.link("/job", url.Values{"id": {id}})
}

func (c *Console) toRow(j status.Job) jobRow {
	return jobRow{
		JobID: clip(orDash(j.JobID), 80), JobIDFull: clean(j.JobID), Kind: clip(j.Kind, 128), Key: clip(j.Key, 60), KeyFull: clean(j.Key),
		State: clean(string(j.State)), Reason: clip(orDash(j.Reason), 40), Updated: c.when(j.UpdatedAt), LastError: clip(orDash(j.LastError), 120),
		Runs: j.Runs, Href: c.jobHref(j.Kind, j.Key),
	}
}

// jobsPage lists the jobs of one state, newest first, a page at a time.
func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "jobs", "Jobs")
	if c.cfg.Status == nil {
		v.Error = "This console has no job table: jobs cannot be listed (give Config.Status; `sqsworker ui` finds the stack's table <stack>-jobs)."
		v.Data = jobsData{}
		c.render(w, r, http.StatusOK, v)
		return
	}
	q := r.URL.Query()
	state := idempotency.State(q.Get("state"))
	if state == "" {
		state = idempotency.StateDead
	}
	kind := strings.TrimSpace(q.Get("kind"))
	data := jobsData{State: raw(string(state)), Kind: raw(kind), FirstHref: c.link("/jobs", url.Values{"state": {string(state)}, "kind": {kind}})}
	for _, s := range listedStates {
		qs := url.Values{"state": {string(s)}}
		if kind != "" {
			qs.Set("kind", kind)
		}
		data.Tabs = append(data.Tabs, tab{Label: clean(string(s)), Href: c.link("/jobs", qs), Active: s == state})
	}
	code := http.StatusOK
	switch {
	case !idempotency.StatusIndexed(state):
		v.Error, code = fmt.Sprintf("State %q is not listed: want retrying, dead, scheduled or cancelled (other states are not indexed; find such a job by id or by kind and key).", clip(string(state), 40)), http.StatusBadRequest
	case kind != "" && jobs.ValidateKind(kind) != nil:
		v.Error, code = "Kind: "+clean(jobs.ValidateKind(kind).Error()), http.StatusBadRequest
	default:
		page, err := c.cfg.Status.List(r.Context(), status.ListQuery{State: state, Kind: kind, Limit: c.cfg.PageSize, PageToken: q.Get("page")})
		var pe *status.PageTokenError
		switch {
		case errors.As(err, &pe):
			v.Error, code = "This page link is damaged or belongs to another listing: start again from the first page.", http.StatusBadRequest
		case err != nil:
			v.Error, code = c.backendError("Listing the jobs failed", err), http.StatusBadGateway
		default:
			for _, j := range page.Jobs {
				data.Rows = append(data.Rows, c.toRow(j))
			}
			if page.NextPageToken != "" {
				data.NextHref = c.link("/jobs", url.Values{"state": {string(state)}, "kind": {kind}, "page": {page.NextPageToken}})
			}
			data.Paged = q.Get("page") != ""
			data.Empty = emptyStates[state]
			if kind != "" {
				data.Empty = fmt.Sprintf("No %s job of kind %s. Clear the kind filter to see every kind.", state, clean(kind))
			}
		}
	}
	v.Data = data
	c.render(w, r, code, v)
}

type tab struct {
	Label, Href string
	Active      bool
}

type jobsData struct {
	State, Kind string
	Tabs        []tab
	Rows        []jobRow
	Empty       string
	NextHref    string
	FirstHref   string
	Paged       bool
}

// findJob looks a job up by id, or by KIND/KEY, and redirects to its page.
func (c *Console) findJob(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		c.redirect(w, r, "/jobs", nil)
		return
	}
	if kind, key, ok := strings.Cut(q, "/"); ok && jobs.ValidateKind(kind) == nil && key != "" {
		c.redirect(w, r, "/job", url.Values{"kind": {kind}, "key": {key}})
		return
	}
	c.redirect(w, r, "/job", url.Values{"id": {q}})
}

// jobData is the Job page.
type jobData struct {
	Query     string // what was looked up, for a not-found message
	Found     bool
	ID        string // the job id the actions post (raw)
	Kind, Key string // the job's kind and key the cancel posts (raw)
	Record    *recordView
	Envelope  *envelopeView
	Dead      *deadLetterView
	Scheduled *scheduledView
	// Control is the job control section (control.go): progress, a cancellation request, Stop.
	Control *controlView
	Long    *longJobView // a long job's cursor, continuations and run time (longjob.go)
	Notes   []string
	// SignInToSee: the DLQ was not read because the viewer has not signed in.
	SignInToSee bool
	CanRedrive  bool
	CanCancel   bool
	CanCopy     bool
	// CanDelete: its dead letter is no job (a body that is not an envelope): delete it, by
	// MessageID.
	CanDelete bool
	MessageID string
	// Queue is the queue parameter of the DLQ its dead letter was looked for in, for the forms
	// ("" for the default queue's); DLQName names that DLQ.
	Queue, DLQName string
	// OtherDLQs link to this page looking in the other queues' DLQs, when its dead letter is not
	// in this one.
	OtherDLQs []queueLink
}

type recordView struct {
	JobID, Kind, Key, State, Reason, LastError, Result string
	FirstRun, LastRun, Updated, Expires, LeaseUntil    when
	RunAt                                              when
	Runs                                               int
	Expired                                            bool
}

type envelopeView struct {
	ID, Kind, Key, Args         string
	EnqueuedAt, RunAt           when
	MaxAttempts, AttemptsBefore int
	Meta                        []kv
	ArgsBytes                   int
}

type kv struct{ Name, Value string }

// deadLetterView is a dead letter as a page shows it. Body is set when it may be shown: with
// Config.ShowArgs, or to a signed-in operator when the dead letter is no job (Malformed).
type deadLetterView struct {
	MessageID, Reason, Error, SourceQueue, Body string
	FailedAt, SentAt                            when
	Attempts, ReceiveCount, BodyBytes           int
	Attributes                                  []kv
	BodyIsEnvelope, Malformed, BodyCut          bool
	Href                                        string // the dead letter's own page
}

type scheduledView struct {
	Name, GroupID string
	RunAt         when
	Disabled      bool
}

// jobPage shows one job: its record, its envelope and its dead letter, with the actions that
// can work for it.
func (c *Console) jobPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "job", "Job")
	q := r.URL.Query()
	id, kind, key := strings.TrimSpace(q.Get("id")), q.Get("kind"), q.Get("key")
	data := jobData{Query: clip(orDash(id), 200)}
	if id == "" {
		data.Query = clip(kind+"/"+key, 200)
	}
	ctx := r.Context()
	code := http.StatusOK
	// The dead letter is looked for in the DLQ the link names (the Dead letters page of a queue
	// links its rows so), the default queue's without one; an unknown queue is refused.
	var t *dlqTarget
	if c.dlq != nil {
		var ok bool
		if t, ok = c.dlqOf(w, r, q.Get("queue"), nil); !ok {
			return
		}
		data.Queue, data.DLQName = raw(t.param()), clean(t.name)
	}
	var rec *status.Job
	if c.cfg.Status != nil {
		var j status.Job
		var err error
		switch {
		case kind != "" || key != "":
			if kerr := jobs.ValidateKind(kind); kerr != nil || key == "" {
				v.Error = "Look a job up by its id, or by its kind and key."
				v.Data = data
				c.render(w, r, http.StatusBadRequest, v)
				return
			}
			j, err = c.cfg.Status.Get(ctx, kind, key)
		case id != "":
			j, err = c.cfg.Status.GetByID(ctx, id)
		default:
			v.Error = "Look a job up by its id, or by its kind and key."
			v.Data = data
			c.render(w, r, http.StatusBadRequest, v)
			return
		}
		switch {
		case errors.Is(err, status.ErrNotFound):
		case err != nil:
			v.Error, code = c.backendError("Reading the job's record failed", err), http.StatusBadGateway
		default:
			rec = &j
		}
	}
	if rec != nil {
		data.Found, data.Record, data.Long = true, c.toRecordView(*rec), c.toLongJobView(*rec)
		id, kind, key = rec.JobID, rec.Kind, rec.Key
	}
	data.ID, data.Kind, data.Key = raw(id), raw(kind), raw(key)
	state := idempotency.State("")
	if rec != nil {
		state = rec.State
	}
	var env *jobs.Envelope
	var dead *dlq.Message
	// The envelope is not kept after the enqueue: it is found in the DLQ (dead jobs) and in the
	// scheduler (scheduled jobs). The DLQ is read for a dead record only, through the shared
	// peek (a peek is a receive of every message: see Config.PeekCacheFor); a job without a
	// record (a body that is no job, an unknown kind) is looked up in the last peek taken, the
	// one whose row linked here, without a new one.
	if id != "" && t != nil && (rec == nil || state == idempotency.StateDead) {
		if state == idempotency.StateDead && c.refuseCrossSite(w, r) {
			return
		}
		m, found, note, signIn := c.deadLetterOf(r, t, id, rec)
		data.SignInToSee = signIn
		if note != "" {
			data.Notes = append(data.Notes, note)
		}
		if found {
			data.Found, dead = true, &m
			data.Dead = c.toDeadLetterView(m, v.SignedIn)
			if e, err := jobs.ParseEnvelope(m.Body); err == nil {
				env = &e
			}
			if rec == nil {
				data.Kind = raw(m.Kind)
			}
		} else if rec != nil && !signIn {
			for _, o := range c.dlqs {
				if o != t {
					data.OtherDLQs = append(data.OtherDLQs, queueLink{Name: clean(o.label()), DLQ: clean(o.name), Href: c.deadJobHref(o, id)})
				}
			}
		}
	}
	if id != "" && c.cfg.Schedules != nil && (rec == nil || state == idempotency.StateScheduled) {
		js, err := c.cfg.Schedules.GetJob(ctx, id)
		switch {
		case errors.Is(err, schedule.ErrNotFound):
			// A long job asleep has no schedule under its id: its section says where its copy waits.
			if state == idempotency.StateScheduled && (data.Long == nil || !data.Long.Sleeping) {
				data.Notes = append(data.Notes, "Its one-time schedule is gone: it has fired (the job is on the queue) or was deleted.")
			}
		case err != nil:
			data.Notes = append(data.Notes, c.backendError("Reading its schedule failed", err))
		default:
			data.Found = true
			data.Scheduled = &scheduledView{Name: clean(js.Name), RunAt: c.when(js.RunAt), GroupID: clean(js.GroupID), Disabled: js.Disabled}
			if env == nil {
				env = &js.Envelope
			}
		}
	}
	if env != nil {
		data.Envelope = c.toEnvelopeView(*env)
	} else if data.Found && (dead == nil || !malformed(*dead)) {
		data.Notes = append(data.Notes, "Its envelope (args, meta) is not kept after the enqueue: it is shown while the job waits in the scheduler or lies in the DLQ.")
	}
	if !data.Found && code == http.StatusOK {
		code = http.StatusNotFound
		v.Error = "No job " + data.Query + " was found in the job table or the scheduler. A job id enqueued in the last second may not be indexed yet; look a key up as KIND/KEY. A dead letter without a record (a body that is not a job, an unknown kind) is found from the Dead letters page."
	}
	// Offered only where it can work: a dead letter the console has seen, that is a job, while no
	// purge is deleting it.
	purging := false
	if t != nil {
		_, purging = c.purging(t)
	}
	data.CanRedrive = dead != nil && dead.JobID != "" && !malformed(*dead) && !purging
	data.CanCancel = rec != nil && c.cfg.Producer != nil && (state == idempotency.StateScheduled || state == idempotency.StateQueued)
	data.CanCopy = env != nil && c.cfg.Producer != nil
	if rec != nil {
		data.Control = c.toControlView(*rec)
	}
	if dead != nil && malformed(*dead) && !purging {
		data.CanDelete, data.MessageID = true, raw(dead.MessageID)
	}
	if data.Found {
		v.Title = "Job " + clip(orDash(id), 60)
	}
	v.Data = data
	c.render(w, r, code, v)
}

// deadLetterOf finds the dead letter of job id for the job page: for a dead record, in the shared
// peek, else, when that peek stopped at PeekLimit (or early), with a scan of the DLQ (dlq.Show),
// at most one scan per PeekCacheFor; for a job without a record, in the last peek taken, without
// a new one. Nothing in the record (its time, ahead of this clock or not) makes the console peek
// sooner. note explains what was not found, or why the DLQ was not read; signIn says the viewer
// must sign in first.
func (c *Console) deadLetterOf(r *http.Request, t *dlqTarget, id string, rec *status.Job) (m dlq.Message, found bool, note string, signIn bool) {
	if !c.mayReadDLQ(r) {
		if rec == nil {
			return dlq.Message{}, false, "", false
		}
		return dlq.Message{}, false, "Its dead letter is shown to signed-in operators: reading the DLQ receives every message it shows (each one's receive count goes up by one, and it is hidden while the peek runs), so the console reads it for signed-in operators only.", true
	}
	if rec == nil {
		if sn := t.snaps.latest(); sn != nil {
			if m, ok := sn.find(id); ok {
				return m, true, "Its dead letter as peeked " + c.when(sn.taken).Rel + ".", false
			}
		}
		return dlq.Message{}, false, "", false
	}
	sn, err := c.sharedPeek(r.Context(), t)
	if sn == nil {
		return dlq.Message{}, false, c.backendError("Reading the DLQ failed", err), false
	}
	if m, ok := sn.find(id); ok {
		return m, true, "", false
	}
	if sn.full || sn.err != nil {
		if !c.scanAllowed(t) {
			return dlq.Message{}, false, fmt.Sprintf("The DLQ holds more than one peek reads (%d): the console looks for one job's dead letter in it at most once every %s, whoever asks. Reload in a moment.",
				c.cfg.PeekLimit, duration(c.cfg.PeekCacheFor)), false
		}
		m, err := t.api.Show(r.Context(), id)
		switch {
		case err == nil:
			return m, true, "", false
		case !errors.Is(err, dlq.ErrNotFound):
			return dlq.Message{}, false, c.backendError("Reading the DLQ failed", err), false
		}
	}
	if sn.started.Before(rec.UpdatedAt) {
		return dlq.Message{}, false, fmt.Sprintf("Its dead letter is not in the last peek of the DLQ, taken %s, before the job's record was last written (%s). "+
			"The console peeks at most once every %s, whoever asks: reload in a moment.",
			c.when(sn.taken).Rel, c.when(rec.UpdatedAt).Rel, duration(c.cfg.PeekCacheFor)), false
	}
	return dlq.Message{}, false, "Its dead letter is not in the DLQ (redriven, purged, or the record is older than the DLQ's retention).", false
}

// scanAllowed reports whether the job page may scan the DLQ for one job now (dlq.Show receives
// every message it passes): at most once per PeekCacheFor, whoever asks.
func (c *Console) scanAllowed(t *dlqTarget) bool {
	now := c.cfg.Now().UnixNano()
	for {
		last := t.lastScan.Load()
		if last != 0 && now-last < int64(c.cfg.PeekCacheFor) {
			return false
		}
		if t.lastScan.CompareAndSwap(last, now) {
			return true
		}
	}
}

func (c *Console) toRecordView(j status.Job) *recordView {
	rv := &recordView{
		JobID: clean(orDash(j.JobID)), Kind: clean(j.Kind), Key: clean(j.Key), State: clean(string(j.State)),
		Reason: clean(orDash(j.Reason)), LastError: cleanText(j.LastError), Result: cleanText(j.Result), Runs: j.Runs,
		FirstRun: c.when(j.FirstAttemptAt), LastRun: c.when(j.LastAttemptAt), Updated: c.when(j.UpdatedAt),
		Expires: c.when(j.ExpiresAt), Expired: j.Expired,
	}
	if j.State == idempotency.StateRunning {
		rv.LeaseUntil = c.when(j.LeaseUntil)
	}
	rv.RunAt = c.when(j.RunAt)
	return rv
}

func (c *Console) toEnvelopeView(e jobs.Envelope) *envelopeView {
	ev := &envelopeView{
		ID: clean(e.ID), Kind: clean(e.Kind), Key: clean(e.EffectiveKey()), EnqueuedAt: c.when(e.EnqueuedAt), RunAt: c.when(e.RunAt),
		MaxAttempts: e.MaxAttempts, AttemptsBefore: e.AttemptsBefore, ArgsBytes: len(e.Args),
	}
	if c.cfg.ShowArgs {
		ev.Args = cleanText(prettyJSON(e.Args))
	}
	for k, val := range e.Meta {
		ev.Meta = append(ev.Meta, kv{clean(k), clean(val)})
	}
	sort.Slice(ev.Meta, func(i, j int) bool { return ev.Meta[i].Name < ev.Meta[j].Name })
	return ev
}

// maxBodyShown is the most of a dead letter's body a page shows.
const maxBodyShown = 64 << 10

// toDeadLetterView returns a dead letter for a page; signedIn says whether the viewer signed in
// (the body of a dead letter that is no job is shown to them).
func (c *Console) toDeadLetterView(m dlq.Message, signedIn bool) *deadLetterView {
	dv := &deadLetterView{
		MessageID: clean(m.MessageID), Reason: clean(orDash(m.Reason)), FailedAt: c.when(m.FailedAt), SentAt: c.when(m.SentAt),
		Attempts: m.Attempts, ReceiveCount: m.ReceiveCount, BodyBytes: len(m.Body), Malformed: malformed(m),
		Href: c.link("/dlq/message", url.Values{"id": {m.MessageID}}),
	}
	if m.Failure != nil {
		dv.Error, dv.SourceQueue = cleanText(m.Failure.Error), clean(m.Failure.SourceQueue)
	}
	_, err := jobs.ParseEnvelope(m.Body)
	dv.BodyIsEnvelope = err == nil
	if c.cfg.ShowArgs || signedIn && dv.Malformed {
		body := m.Body
		if len(body) > maxBodyShown {
			body, dv.BodyCut = strings.ToValidUTF8(body[:maxBodyShown], ""), true
		}
		dv.Body = cleanText(prettyJSON([]byte(body)))
	}
	for name, val := range m.Attributes {
		if name == worker.FailureAttribute {
			continue // shown decoded above
		}
		dv.Attributes = append(dv.Attributes, kv{clean(name), clip(val, 500)})
	}
	sort.Slice(dv.Attributes, func(i, j int) bool { return dv.Attributes[i].Name < dv.Attributes[j].Name })
	return dv
}

// prettyJSON indents JSON, or returns the bytes as they are when they are not JSON.
func prettyJSON(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") == nil {
		return out.String()
	}
	return string(b)
}
