package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// dlqRow is one dead letter of the Dead letters page, for display. ID and MessageID are the
// whole values, for the forms; the other strings are cleaned (escaped, clipped).
type dlqRow struct {
	ID, MessageID                    string
	JobID, JobIDFull, Kind, Reason   string
	Error, Href, MessageHref         string
	FailedAt                         when
	Attempts                         int
	Malformed, CanRedrive, CanDelete bool
}

// snapshot is one peek of the DLQ, paged by the Dead letters page: SQS cannot list a queue, so
// the console reads up to PeekLimit dead letters at once (making them visible again) and pages
// through what it read. The job page finds a job's dead letter in it.
type snapshot struct {
	id      string
	started time.Time     // when the peek began
	taken   time.Time     // when it ended
	msgs    []dlq.Message // oldest first
	full    bool          // the peek stopped at PeekLimit
	err     error         // the peek stopped early (msgs holds what it read)
}

// find returns the dead letter of jobID in the snapshot.
func (sn *snapshot) find(jobID string) (dlq.Message, bool) {
	for _, m := range sn.msgs {
		if m.JobID == jobID {
			return m, true
		}
	}
	return dlq.Message{}, false
}

// findMessage returns the dead letter whose SQS message id is id.
func (sn *snapshot) findMessage(id string) (dlq.Message, bool) {
	for _, m := range sn.msgs {
		if m.MessageID == id {
			return m, true
		}
	}
	return dlq.Message{}, false
}

// snapshots keeps the last few peeks.
type snapshots struct {
	mu   sync.Mutex
	seq  int
	list []*snapshot
}

const keptSnapshots = 8

func (s *snapshots) add(sn *snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	sn.id = strconv.Itoa(s.seq)
	s.list = append(s.list, sn)
	if len(s.list) > keptSnapshots {
		s.list = s.list[len(s.list)-keptSnapshots:]
	}
}

func (s *snapshots) get(id string) *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sn := range s.list {
		if sn.id == id {
			return sn
		}
	}
	return nil
}

// latest returns the newest kept peek, or nil.
func (s *snapshots) latest() *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 0 {
		return nil
	}
	return s.list[len(s.list)-1]
}

// clear forgets every kept peek.
func (s *snapshots) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = nil
}

// peekTimeout bounds one peek of the DLQ.
const peekTimeout = 2 * time.Minute

// purgeTakes is how long SQS may take to delete a purged queue's messages.
const purgeTakes = 60 * time.Second

// sharedPeek returns a peek of the DLQ taken less than PeekCacheFor ago, taking one when there is
// none: every viewer shares one peek per PeekCacheFor, and concurrent viewers the one in
// progress. Nothing a request says (no record's time) makes it peek sooner; an action that
// changes the DLQ (a redrive, a purge, a delete) does (invalidatePeeks). A peek that stopped
// early is returned with its error.
func (c *Console) sharedPeek(ctx context.Context, t *dlqTarget) (*snapshot, error) {
	sn, err := t.peeks.get(ctx, struct{}{}, c.cfg.Now, c.cfg.PeekCacheFor, time.Time{}, peekTimeout, func(pctx context.Context) (*snapshot, error) {
		pctx, cancel := context.WithCancel(pctx)
		defer context.AfterFunc(c.ctx, cancel)() // Close stops a peek in progress
		defer cancel()
		sn, err := c.peek(pctx, t)
		if sn == nil {
			return nil, err
		}
		return sn, nil // sn.err says it stopped early
	})
	if err != nil {
		return nil, err
	}
	return sn, sn.err
}

// invalidatePeeks forgets every peek of t, after an action that changed that DLQ: the next view
// peeks again, and no page offers actions on what the action removed. The other queues' peeks
// stay.
func (c *Console) invalidatePeeks(t *dlqTarget) {
	t.peeks.forget(struct{}{})
	t.snaps.clear()
}

// purging reports whether a purge from this console may still be deleting the DLQ's messages
// (SQS takes up to 60 s), and since when.
func (c *Console) purging(t *dlqTarget) (time.Time, bool) {
	ns := t.purgedAt.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	at := time.Unix(0, ns)
	return at, c.cfg.Now().Before(at.Add(purgeTakes))
}

// peek takes a new snapshot of t.
func (c *Console) peek(ctx context.Context, t *dlqTarget) (*snapshot, error) {
	started := c.cfg.Now()
	msgs, err := t.api.Peek(ctx, c.cfg.PeekLimit)
	if err != nil && len(msgs) == 0 {
		return nil, err
	}
	// SQS returns a sample in no order: oldest first, as the CLI shows them.
	sort.SliceStable(msgs, func(a, b int) bool {
		if !msgs[a].SentAt.Equal(msgs[b].SentAt) {
			return msgs[a].SentAt.Before(msgs[b].SentAt)
		}
		if msgs[a].JobID != msgs[b].JobID {
			return msgs[a].JobID < msgs[b].JobID
		}
		return msgs[a].MessageID < msgs[b].MessageID
	})
	sn := &snapshot{started: started, taken: c.cfg.Now(), full: len(msgs) >= c.cfg.PeekLimit, msgs: msgs, err: err}
	t.snaps.add(sn)
	return sn, err
}

// malformed reports whether a dead letter is no job: its body is not an envelope, nor a pointer
// to one in S3. No redrive can heal it; it can be deleted.
func malformed(m dlq.Message) bool {
	if m.Payload != nil {
		return false
	}
	_, err := jobs.ParseEnvelope(m.Body)
	return err != nil
}

// toDLQRow returns a dead letter as the Dead letters page shows it; canAct says whether the page
// offers actions (signed in, not read-only, no purge under way).
func (c *Console) toDLQRow(t *dlqTarget, m dlq.Message, canAct bool) dlqRow {
	row := dlqRow{
		ID: raw(m.JobID), MessageID: raw(m.MessageID),
		JobID: clip(orDash(m.JobID), 80), JobIDFull: clean(m.JobID), Kind: clip(orDash(m.Kind), 128), Reason: clip(orDash(m.Reason), 40),
		FailedAt: c.when(m.FailedAt), Attempts: m.Attempts, Malformed: malformed(m),
		MessageHref: c.dlqLink(t, "/dlq/message", url.Values{"id": {m.MessageID}}),
	}
	if m.Failure != nil {
		row.Error = clip(m.Failure.Error, 160)
	}
	if m.JobID != "" {
		row.Href = c.deadJobHref(t, m.JobID)
	}
	row.CanRedrive = canAct && m.JobID != "" && !row.Malformed
	row.CanDelete = canAct && row.Malformed && m.MessageID != ""
	return row
}

type dlqData struct {
	Queue string
	// QueueParam names the DLQ's queue in the forms ("" for the default queue's).
	QueueParam string
	// Queues is the queue selector: a link per DLQ of the stack (none for one DLQ).
	Queues      []queueLink
	Depth       string
	Rows        []dlqRow
	Taken       when
	Total       int
	From, To    int
	Full        bool
	PeekLimit   int
	PeekEvery   string
	NextHref    string
	PrevHref    string
	FreshHref   string
	RedriveHref string
	Running     bool
	PurgeName   string
	NeedsSignIn bool
	InFlight    bool // the peek saw nothing, but the DLQ holds messages (in flight)
	Purging     bool // a purge from this console may still be deleting the messages
	PurgedAt    when
}

// refuseCrossSite answers a cross-site request for a page that would peek at the DLQ with 403:
// a page of another site (an <img> pointing here) must not make the console receive messages.
func (c *Console) refuseCrossSite(w http.ResponseWriter, r *http.Request) bool {
	if !crossSite(r) {
		return false
	}
	c.log.Warn("console page refused", "path", r.URL.Path, "remote", r.RemoteAddr, "why", "cross-site")
	c.refuse(w, r, http.StatusForbidden, "Cross-site requests for pages that read the DLQ are refused: open the console yourself.")
	return true
}

// signInHref is the sign-in page, back to r's page afterwards (the overview after a POST).
func (c *Console) signInHref(r *http.Request) string {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return c.path("/signin")
	}
	return c.link("/signin", url.Values{"next": {r.URL.RequestURI()}})
}

// dlqPage shows a page of a peek of the DLQ, with redrive and purge.
func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "dlq", "Dead letters")
	if c.cfg.DLQ == nil {
		v.Error = "This console has no dead-letter queue (give Config.DLQ)."
		v.Data = dlqData{}
		c.render(w, r, http.StatusOK, v)
		return
	}
	if c.refuseCrossSite(w, r) {
		return
	}
	q := r.URL.Query()
	t, ok := c.dlqOf(w, r, q.Get("queue"), nil)
	if !ok {
		return
	}
	if t.queue != "" && len(c.dlqs) > 1 {
		v.Title = "Dead letters of " + clip(clean(t.queue), 80)
	}
	data := dlqData{Queue: clean(t.name), QueueParam: raw(t.param()), Queues: c.dlqSelector(t, "/dlq"), PurgeName: raw(t.name),
		PeekLimit: c.cfg.PeekLimit, PeekEvery: duration(c.cfg.PeekCacheFor),
		FreshHref: c.dlqLink(t, "/dlq", nil), RedriveHref: c.dlqLink(t, "/dlq/redrive", nil), Running: t.redrive.running()}
	line := c.queueLine(r.Context(), DeadLetterQueue, t.url, t.name)
	if line.Visible != nil {
		data.Depth = strconv.Itoa(*line.Visible + deref(line.InFlight))
	}
	if at, ok := c.purging(t); ok {
		data.Purging, data.PurgedAt = true, c.when(at)
		v.CanAct = false
	}
	if !c.mayReadDLQ(r) {
		data.NeedsSignIn = true
		v.Error = "Reading the DLQ needs the console's token: a peek receives every message it shows (each one's receive count goes up by one, and it is hidden while the peek runs), so the console peeks for signed-in operators only."
		v.Data = data
		c.render(w, r, http.StatusUnauthorized, v)
		return
	}
	code := http.StatusOK
	sn := t.snaps.get(q.Get("snap"))
	if sn == nil && q.Get("snap") != "" {
		v.Notice = "That peek is no longer kept: this is a newer one."
	}
	if sn == nil {
		var err error
		sn, err = c.sharedPeek(r.Context(), t)
		if err != nil && sn == nil {
			v.Error, code = c.backendError("Peeking at the DLQ failed", err), http.StatusBadGateway
			v.Data = data
			c.render(w, r, code, v)
			return
		}
	}
	if sn.err != nil {
		v.Error = c.backendError("The peek stopped early", sn.err)
	}
	page, _ := strconv.Atoi(q.Get("page"))
	size := c.cfg.PageSize
	pages := max(1, (len(sn.msgs)+size-1)/size)
	page = min(max(page, 1), pages)
	from, to := (page-1)*size, min(page*size, len(sn.msgs))
	for _, m := range sn.msgs[from:to] {
		data.Rows = append(data.Rows, c.toDLQRow(t, m, v.CanAct))
	}
	data.Total, data.Full, data.Taken = len(sn.msgs), sn.full, c.when(sn.taken)
	data.From, data.To = from+1, to
	data.InFlight = len(sn.msgs) == 0 && data.Depth != "" && data.Depth != "0"
	if page < pages {
		data.NextHref = c.dlqLink(t, "/dlq", url.Values{"snap": {sn.id}, "page": {strconv.Itoa(page + 1)}})
	}
	if page > 1 {
		data.PrevHref = c.dlqLink(t, "/dlq", url.Values{"snap": {sn.id}, "page": {strconv.Itoa(page - 1)}})
	}
	v.Data = data
	c.render(w, r, code, v)
}

// messageData is the page of one dead letter found by its SQS message id.
type messageData struct {
	Found     bool
	ID        string // the message id, for the delete form
	Queue     string // the queue parameter, for the delete form ("" for the default queue)
	JobHref   string
	Dead      *deadLetterView
	Taken     when
	CanDelete bool
	DLQHref   string
}

// messagePage shows one dead letter of the last peek, by its SQS message id, without a new peek:
// the page of a dead letter that is no job (a body that is not an envelope has no job id), with
// its body for a signed-in operator, and the action that works for it: delete.
func (c *Console) messagePage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "message", "Dead letter")
	id := r.URL.Query().Get("id")
	data := messageData{ID: raw(id), DLQHref: c.path("/dlq")}
	v.Data = &data
	code := http.StatusOK
	var t *dlqTarget
	if c.dlq != nil {
		var ok bool
		if t, ok = c.dlqOf(w, r, r.URL.Query().Get("queue"), nil); !ok {
			return
		}
		data.Queue, data.DLQHref = raw(t.param()), c.dlqLink(t, "/dlq", nil)
	}
	switch {
	case c.dlq == nil:
		v.Error, code = "This console has no dead-letter queue (give Config.DLQ).", http.StatusNotFound
	case c.refuseCrossSite(w, r):
		return
	case !c.mayReadDLQ(r):
		v.Error, code = "Reading the DLQ needs the console's token: sign in.", http.StatusUnauthorized
	default:
		sn := t.snaps.latest()
		var m dlq.Message
		if sn != nil {
			m, data.Found = sn.findMessage(id)
		}
		if !data.Found {
			v.Error, code = "No dead letter "+clip(orDash(id), 100)+" in the last peek of "+clean(t.name)+": deleted, redriven, or peeked before. Open the Dead letters page for a new peek.", http.StatusNotFound
			break
		}
		data.Taken = c.when(sn.taken)
		data.Dead = c.toDeadLetterView(m, v.SignedIn)
		if m.JobID != "" {
			data.JobHref = c.deadJobHref(t, m.JobID)
		}
		_, purging := c.purging(t)
		data.CanDelete = v.CanAct && malformed(m) && !purging
		v.Title = "Dead letter " + clip(id, 60)
	}
	c.render(w, r, code, v)
}

// deleteMessageAction deletes one dead letter that is no job, by its SQS message id
// (dlq.DeleteMessage).
func (c *Console) deleteMessageAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	id := r.PostFormValue("message_id")
	al.add("message_id", clip(id, 200))
	t, ok := c.dlqOf(w, r, r.FormValue("queue"), al)
	if !ok {
		return
	}
	al.add("queue", t.name)
	if id == "" {
		al.fail(errors.New("no message id"))
		c.refuse(w, r, http.StatusBadRequest, "Which dead letter? The form has no message id.")
		return
	}
	_, err := t.api.DeleteMessage(r.Context(), id, dlq.DeleteOptions{}) // a dead letter that is no job has no object of its own
	c.invalidatePeeks(t)
	switch {
	case errors.Is(err, dlq.ErrNotFound):
		al.fail(err)
		c.refuse(w, r, http.StatusNotFound, fmt.Sprintf("Dead letter %s is not in %s (deleted already, redriven, or held by another reader for a moment).", clip(id, 200), clean(t.name)))
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, c.backendError("The delete failed", err))
		return
	}
	c.done(w, r, "/dlq", queueValues(t, nil), "deleted-message", "Deleted dead letter "+clip(id, 200)+" from "+clean(t.name)+".")
}

// redriveState is a redrive of the whole DLQ running (or finished) in the background.
type redriveState struct {
	Running    bool   `json:"running"`
	Started    string `json:"started"`
	Finished   string `json:"finished"`
	Moved      int    `json:"moved"`
	Total      int    `json:"total"`
	LeftBehind int    `json:"left_behind"`
	Method     string `json:"method"`
	TaskHandle string `json:"task_handle"`
	// TaskStatus is the move task's status (RUNNING … COMPLETED), "" for the fallback mover.
	TaskStatus string `json:"task_status"`
	// Attached: the move task was started earlier (SQS runs one per queue) and is followed.
	Attached bool   `json:"attached"`
	Error    string `json:"error"`
	Who      string `json:"-"`
}

// redriveRunner runs one redrive at a time.
type redriveRunner struct {
	mu  sync.Mutex
	cur *redriveState
}

func (rr *redriveRunner) running() bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.cur != nil && rr.cur.Running
}

func (rr *redriveRunner) state() (redriveState, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.cur == nil {
		return redriveState{}, false
	}
	return *rr.cur, true
}

// errRedriveRunning is start's error while a redrive runs.
var errRedriveRunning = errors.New("a redrive of the DLQ is already running")

// startRedrive starts a redrive of the whole DLQ in the background (dlq.RedriveAll, whose
// Progress callback feeds the progress bar) and, when SQS runs it as a move task, follows the
// task to its end (dlq.WaitMoveTask, whose Progress feeds the same bar). It stops when the
// console is closed; a move task goes on in SQS.
func (c *Console) startRedrive(t *dlqTarget, who string) error {
	rr := &t.redrive
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.cur != nil && rr.cur.Running {
		return errRedriveRunning
	}
	st := &redriveState{Running: true, Started: showTime(c.cfg.Now()), Who: who}
	rr.cur = st
	c.invalidatePeeks(t)
	c.wg.Go(func() {
		defer c.invalidatePeeks(t)
		res, err := t.api.RedriveAll(c.ctx, dlq.RedriveOptions{Progress: func(moved, total int) {
			rr.mu.Lock()
			st.Moved, st.Total = moved, max(total, moved)
			rr.mu.Unlock()
		}})
		if err == nil && res.Method == dlq.MethodMoveTask && res.TaskHandle != "" {
			rr.mu.Lock()
			st.Method, st.TaskHandle, st.TaskStatus, st.Attached, st.Total = res.Method, res.TaskHandle, dlq.MoveTaskRunning, res.Attached, res.Total
			rr.mu.Unlock()
			var task dlq.MoveTask
			task, err = t.api.WaitMoveTask(c.ctx, res.TaskHandle, dlq.WaitOptions{Progress: func(t dlq.MoveTask) {
				rr.mu.Lock()
				st.Moved, st.Total, st.TaskStatus = t.Moved, max(t.ToMove, t.Moved), t.Status
				rr.mu.Unlock()
			}})
			if task.Status != "" {
				res.Moved, res.Total = task.Moved, max(task.ToMove, task.Moved)
				rr.mu.Lock()
				st.TaskStatus = task.Status
				rr.mu.Unlock()
			}
		}
		rr.mu.Lock()
		st.Running, st.Finished = false, showTime(c.cfg.Now())
		st.Moved, st.Total, st.LeftBehind = res.Moved, max(res.Total, res.Moved), res.LeftBehind
		st.Method, st.TaskHandle = res.Method, res.TaskHandle
		if err != nil {
			st.Error = c.backendError("The redrive stopped", err)
		}
		rr.mu.Unlock()
		args := []any{"action", "dlq.redrive_all", "who", who, "queue", t.name, "moved", res.Moved, "total", res.Total,
			"left_behind", res.LeftBehind, "method", res.Method}
		if err != nil {
			c.log.Error("console redrive finished", append(args, "error", err.Error())...)
		} else {
			c.log.Info("console redrive finished", args...)
		}
	})
	return nil
}

// redrivePage shows the progress of the redrive of the whole DLQ; its script follows
// /api/redrive.
func (c *Console) redrivePage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "redrive", "Redrive")
	t, found := c.dlqOf(w, r, r.URL.Query().Get("queue"), nil)
	if !found {
		return
	}
	st, ok := t.redrive.state()
	started, _ := time.Parse(jobs.TimeLayout, st.Started)
	v.Data = struct {
		State   redriveState
		Started bool
		When    when
		APIURL  string
		DLQHref string
		From    string
		To      string
	}{st, ok, c.when(started), c.dlqLink(t, "/api/redrive", nil), c.dlqLink(t, "/dlq", nil), clean(t.name), clean(t.source)}
	c.render(w, r, http.StatusOK, v)
}

// redriveAPI returns the redrive's state as JSON.
func (c *Console) redriveAPI(w http.ResponseWriter, r *http.Request) {
	t := c.dlqFor(r.URL.Query().Get("queue"))
	if t == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such dead-letter queue"})
		return
	}
	st, ok := t.redrive.state()
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"running": false, "started": ""})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// redriveAllAction starts the redrive of the whole DLQ.
func (c *Console) redriveAllAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	t, ok := c.dlqOf(w, r, r.FormValue("queue"), al)
	if !ok {
		return
	}
	al.add("queue", t.name)
	if err := c.startRedrive(t, c.who(r, true)); err != nil {
		al.fail(err)
		c.refuse(w, r, http.StatusConflict, "A redrive of "+clean(t.name)+" is already running: follow it on the Redrive page.")
		return
	}
	c.redirect(w, r, "/dlq/redrive", queueValues(t, nil))
}

// redriveJobAction redrives one job's dead letter.
func (c *Console) redriveJobAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	id := r.PostFormValue("id")
	al.add("job_id", clip(id, 200))
	t, ok := c.dlqOf(w, r, r.FormValue("queue"), al)
	if !ok {
		return
	}
	al.add("queue", t.name)
	if id == "" {
		al.fail(errors.New("no job id"))
		c.refuse(w, r, http.StatusBadRequest, "Which job? The form has no job id.")
		return
	}
	err := t.api.RedriveJob(r.Context(), id, r.PostFormValue("keep_attempts") != "")
	c.invalidatePeeks(t)
	switch {
	case errors.Is(err, dlq.ErrNotFound):
		al.fail(err)
		c.refuse(w, r, http.StatusNotFound, fmt.Sprintf("Job %s has no dead letter in %s (redriven already, or purged).", clip(id, 200), clean(t.name)))
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, c.backendError("The redrive failed", err))
		return
	}
	c.done(w, r, "/job", queueValues(t, url.Values{"id": {id}}), "redriven",
		"Redrove job "+clip(id, 200)+": it is back on "+clean(t.source)+" with a fresh attempt budget.")
}

// purgeAction purges the DLQ, once the form repeats its name.
func (c *Console) purgeAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	t, ok := c.dlqOf(w, r, r.FormValue("queue"), al)
	if !ok {
		return
	}
	al.add("queue", t.name)
	confirm := r.PostFormValue("confirm")
	if confirm != t.name {
		al.fail(errors.New("confirmation is not the queue's name"))
		c.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("Nothing was purged: type the queue's name, %s, to confirm.", clean(t.name)))
		return
	}
	if _, ok := c.purging(t); ok {
		al.fail(errors.New("a purge is under way"))
		c.refuse(w, r, http.StatusConflict, "A purge of "+clean(t.name)+" is under way: SQS deletes its messages within 60 seconds, and allows one purge per queue every 60 seconds.")
		return
	}
	if err := t.api.Purge(r.Context(), confirm); err != nil {
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, c.backendError("The purge failed", err))
		return
	}
	t.purgedAt.Store(c.cfg.Now().UnixNano())
	c.invalidatePeeks(t)
	c.done(w, r, "/dlq", queueValues(t, nil), "purged", "Purged "+clean(t.name)+": SQS deletes its messages within 60 seconds.")
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// errNoDLQ is an action's failure on a console without a DLQ.
var errNoDLQ = errors.New("no DLQ")

// queueValues adds t's queue parameter to q (for the default queue's DLQ, none).
func queueValues(t *dlqTarget, q url.Values) url.Values {
	if t.param() == "" {
		return q
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("queue", t.param())
	return q
}
