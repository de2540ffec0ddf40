package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// enqueueForm is the Enqueue page's form, as typed.
type enqueueForm struct {
	Kind, Args, Key, Delay, Group, MaxAttempts string
	FIFO                                       bool
	// Queue is the queue the form asks for ("": the kind's own); Queues are the stack's (none
	// for one queue); KindQueue says where Kind goes without one, when the producer says.
	Queue     string
	Queues    []string
	KindQueue string
}

// kindRouter is the optional part of the producer that says a kind's queue
// (*producer.Producer's QueueOf).
type kindRouter interface {
	QueueOf(kind string) (string, error)
}

// queueForm fills the form's queue choice: the stack's queues, and the queue Kind goes to.
func (c *Console) queueForm(f *enqueueForm) {
	if set := c.cfg.Queues; set != nil && set.Len() > 1 {
		f.Queues = set.Names()
	}
	if kr, ok := c.cfg.Producer.(kindRouter); ok && f.Kind != "" && jobs.ValidateKind(f.Kind) == nil {
		if q, err := kr.QueueOf(f.Kind); err == nil {
			f.KindQueue = q
		}
	}
}

// enqueuePage shows the form that enqueues a job.
func (c *Console) enqueuePage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "enqueue", "Enqueue")
	if c.cfg.Producer == nil {
		v.Error = "This console has no producer: it cannot enqueue (give Config.Producer)."
		v.Data = enqueueForm{}
		c.render(w, r, http.StatusOK, v)
		return
	}
	q := r.URL.Query()
	f := enqueueForm{Kind: q.Get("kind"), Args: "{}", FIFO: c.cfg.Producer.FIFO()}
	c.queueForm(&f)
	f.Kind, f.KindQueue = raw(f.Kind), raw(f.KindQueue)
	v.Data = f
	c.render(w, r, http.StatusOK, v)
}

// parseEnqueue checks the form as `sqsworker enqueue` checks its command line, before any AWS
// call, and returns the producer's options.
func parseEnqueue(f enqueueForm) ([]producer.Option, error) {
	if err := jobs.ValidateKind(f.Kind); err != nil {
		return nil, fmt.Errorf("kind: %v", err)
	}
	if err := producer.CheckArgsJSON("args", []byte(f.Args)); err != nil {
		return nil, err
	}
	var opts []producer.Option
	if f.Key != "" {
		opts = append(opts, producer.WithKey(f.Key))
	}
	if d := strings.TrimSpace(f.Delay); d != "" {
		delay, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("delay %q is not a duration, such as 30s, 20m or 48h", d)
		}
		if delay < 0 {
			return nil, fmt.Errorf("delay %v is negative", delay)
		}
		opts = append(opts, producer.WithDelay(delay))
	}
	if f.Group != "" {
		opts = append(opts, producer.WithGroupID(f.Group))
	} else if f.FIFO {
		return nil, errors.New("the queue is a FIFO queue: every job needs a message group")
	}
	if m := strings.TrimSpace(f.MaxAttempts); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("max attempts %q: must be a whole number, at least 1", m)
		}
		opts = append(opts, producer.WithMaxAttempts(n))
	}
	return opts, nil
}

// enqueueError words the producer's and the scheduler's errors for the form.
func enqueueError(err error) string {
	switch {
	case errors.Is(err, schedule.ErrInvalid):
		why := err.Error()
		if _, after, ok := strings.Cut(why, schedule.ErrInvalid.Error()+": "); ok {
			why = after
		}
		return "The delay goes through EventBridge Scheduler, which cannot take this job: " + why
	case errors.Is(err, producer.ErrNeedsScheduler):
		return "This delay needs EventBridge Scheduler (beyond 15 minutes, or any delay on a FIFO queue), and the console has no schedule client."
	case errors.Is(err, producer.ErrInvalid):
		return strings.TrimPrefix(err.Error(), "producer: ")
	}
	return "The enqueue failed: " + err.Error()
}

// enqueueAction enqueues the job of the form with the producer's EnqueueRaw.
func (c *Console) enqueueAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	if c.cfg.Producer == nil {
		al.fail(errors.New("no producer"))
		c.refuse(w, r, http.StatusNotFound, "This console has no producer: it cannot enqueue.")
		return
	}
	f := enqueueForm{
		Kind: strings.TrimSpace(r.PostFormValue("kind")), Args: r.PostFormValue("args"), Key: r.PostFormValue("key"),
		Delay: r.PostFormValue("delay"), Group: r.PostFormValue("group"), MaxAttempts: r.PostFormValue("max_attempts"),
		FIFO: c.cfg.Producer.FIFO(), Queue: r.PostFormValue("queue"),
	}
	al.add("kind", clip(f.Kind, 128))
	opts, err := parseEnqueue(f)
	if err == nil && f.Queue != "" {
		// A queue of the stack only: a name the set lacks is refused, never sent to the default.
		if set := c.cfg.Queues; set == nil {
			err = fmt.Errorf("queue %q: this console enqueues on one queue (give it Config.Queues)", clip(f.Queue, 80))
		} else if _, qerr := set.Get(f.Queue); qerr != nil {
			err = fmt.Errorf("queue %q: the stack has no such queue (its queues: %s)", clip(f.Queue, 80), strings.Join(set.Names(), ", "))
		} else {
			opts = append(opts, producer.WithQueue(f.Queue))
			al.add("queue", f.Queue)
		}
	}
	if err == nil {
		var res producer.Result
		res, err = c.cfg.Producer.EnqueueRaw(r.Context(), f.Kind, []byte(f.Args), opts...)
		if err == nil {
			al.add("job_id", res.ID, "key", clip(res.Key, 200))
			if res.StatusErr != nil {
				al.add("status_error", res.StatusErr.Error())
			}
			on := f.Queue
			if kr, ok := c.cfg.Producer.(kindRouter); ok && on == "" {
				on, _ = kr.QueueOf(f.Kind)
			}
			where := ""
			if on != "" && c.cfg.Queues != nil && c.cfg.Queues.Len() > 1 {
				where = " on queue " + clean(on)
			}
			done, text := "enqueued", "Enqueued job "+clip(res.ID, 200)+where+"."
			if res.Schedule != "" {
				done, text = "scheduled", "Scheduled job "+clip(res.ID, 200)+": the scheduler sends it when it is due."
				al.add("schedule", res.Schedule)
			}
			c.done(w, r, "/job", url.Values{"kind": {res.Kind}, "key": {res.Key}, "id": {res.ID}}, done, text)
			return
		}
		err = errors.New(enqueueError(err))
	}
	al.fail(err)
	v := c.newView(r, "enqueue", "Enqueue")
	v.Error = clean(err.Error())
	c.queueForm(&f)
	f.Kind, f.Args, f.Key, f.Delay, f.Group, f.MaxAttempts = raw(f.Kind), raw(f.Args), raw(f.Key), raw(f.Delay), raw(f.Group), raw(f.MaxAttempts)
	f.Queue, f.KindQueue = raw(f.Queue), raw(f.KindQueue)
	v.Data = f
	c.render(w, r, http.StatusBadRequest, v)
}

// cancelJobAction cancels a scheduled or queued job (producer.Cancel: its schedule is deleted
// and its record becomes cancelled).
func (c *Console) cancelJobAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	kind, key, id := r.PostFormValue("kind"), r.PostFormValue("key"), r.PostFormValue("id")
	al.add("job_id", clip(id, 200), "kind", clip(kind, 128), "key", clip(key, 200))
	if c.cfg.Producer == nil || c.cfg.Status == nil {
		al.fail(errors.New("no producer or job table"))
		c.refuse(w, r, http.StatusNotFound, "This console cannot cancel jobs (it needs the producer and the job table).")
		return
	}
	j, err := c.cfg.Status.Get(r.Context(), kind, key)
	switch {
	case errors.Is(err, status.ErrNotFound) || errors.Is(err, status.ErrInvalid):
		al.fail(err)
		c.refuse(w, r, http.StatusNotFound, "No such job in the job table.")
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, "Reading the job's record failed: "+clean(err.Error()))
		return
	case j.State != idempotency.StateScheduled && j.State != idempotency.StateQueued:
		al.fail(fmt.Errorf("job is %s", j.State))
		c.refuse(w, r, http.StatusConflict, fmt.Sprintf("The job is %s: only a scheduled or queued job can be cancelled here.", j.State))
		return
	}
	if err := c.cfg.Producer.Cancel(r.Context(), kind, key, j.JobID); err != nil {
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, "The cancel failed: "+clean(err.Error()))
		return
	}
	c.done(w, r, "/job", url.Values{"kind": {kind}, "key": {key}, "id": {j.JobID}}, "cancelled",
		"Cancelled job "+clip(j.JobID, 200)+": a delivery of it is acknowledged without running.")
}

// copyJobAction enqueues a new job with the kind, args and attempt budget of a job whose
// envelope the console can read (from its dead letter, or its one-time schedule).
func (c *Console) copyJobAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	id := r.PostFormValue("id")
	al.add("job_id", clip(id, 200))
	if c.cfg.Producer == nil || id == "" {
		al.fail(errors.New("no producer, or no job id"))
		c.refuse(w, r, http.StatusBadRequest, "This console cannot enqueue a copy of that job.")
		return
	}
	var env *jobs.Envelope
	group := ""
	if c.dlq != nil {
		t, ok := c.dlqOf(w, r, r.FormValue("queue"), al)
		if !ok {
			return
		}
		if m, err := t.api.Show(r.Context(), id); err == nil {
			if e, err := jobs.ParseEnvelope(m.Body); err == nil {
				env = &e
			}
		} else if !errors.Is(err, dlq.ErrNotFound) {
			al.fail(err)
			c.refuse(w, r, http.StatusBadGateway, "Reading the DLQ failed: "+clean(err.Error()))
			return
		}
	}
	if env == nil && c.cfg.Schedules != nil {
		if js, err := c.cfg.Schedules.GetJob(r.Context(), id); err == nil {
			env, group = &js.Envelope, js.GroupID
		}
	}
	if env == nil {
		al.fail(errors.New("envelope not found"))
		c.refuse(w, r, http.StatusNotFound, "The job's envelope is not in the DLQ or the scheduler any more: nothing to copy.")
		return
	}
	var opts []producer.Option
	if env.MaxAttempts > 0 {
		opts = append(opts, producer.WithMaxAttempts(env.MaxAttempts))
	}
	if c.cfg.Producer.FIFO() {
		if group == "" {
			group = env.Kind // as the redrive does for a dead letter without its group
		}
		opts = append(opts, producer.WithGroupID(group))
	}
	res, err := c.cfg.Producer.EnqueueRaw(r.Context(), env.Kind, env.Args, opts...)
	if err != nil {
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, clean(enqueueError(err)))
		return
	}
	al.add("copy_job_id", res.ID, "kind", res.Kind)
	c.done(w, r, "/job", url.Values{"kind": {res.Kind}, "key": {res.Key}, "id": {res.ID}}, "copied",
		"Enqueued a copy of the job as job "+clip(res.ID, 200)+".")
}
