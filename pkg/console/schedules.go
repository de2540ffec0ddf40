package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// scheduleRow is one recurring schedule, cleaned for display; NameValue is its name as the
// forms post it.
type scheduleRow struct {
	Name, NameValue, Expression, Timezone, State, Kind, Description, Args string
	Next                                                                  []when
	NextNote                                                              string
	Disabled                                                              bool
}

// jobScheduleRow is one one-time schedule of a delayed job.
type jobScheduleRow struct {
	JobID, JobIDFull, Kind, Key, Group, Href string
	RunAt                                    when
	Disabled                                 bool
}

// scheduleForm is the create form, as typed.
type scheduleForm struct {
	Name, Expression, Timezone, Kind, Args, Group, MaxAttempts, Description string
	Disabled                                                                bool
}

type schedulesData struct {
	Group     string
	Rows      []scheduleRow
	NextHref  string
	FirstHref string
	Paged     bool
	Jobs      []jobScheduleRow
	JobsNext  string
	JobsFirst string
	JobsError string
	JobsPaged bool
	Form      scheduleForm
	FIFO      bool
}

// nextRunsShown is how many next occurrences the Schedules page shows.
const nextRunsShown = 5

// schedulesPage lists the recurring schedules (a page at a time) and the one-time schedules of
// delayed jobs, with the create form.
func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request) {
	c.renderSchedules(w, r, http.StatusOK, scheduleForm{Timezone: "UTC", Args: "{}"}, "")
}

func (c *Console) renderSchedules(w http.ResponseWriter, r *http.Request, code int, form scheduleForm, formErr string) {
	v := c.newView(r, "schedules", "Schedules")
	if c.cfg.Schedules == nil {
		v.Error = "This console has no schedule client (give Config.Schedules; `sqsworker ui` uses the stack's schedule group <stack>-jobs when it exists)."
		v.Data = schedulesData{}
		c.render(w, r, http.StatusOK, v)
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	data := schedulesData{Group: clean(c.cfg.Schedules.Group()), Form: form, FIFO: c.cfg.Producer != nil && c.cfg.Producer.FIFO()}
	if formErr != "" {
		v.Error = formErr
	}
	// One page of ListSchedules at a time, and a GetSchedule for each schedule of the page only.
	rp, err := c.cfg.Schedules.ListPage(ctx, schedule.ListQuery{Limit: min(c.cfg.PageSize, 100), PageToken: q.Get("page")})
	if err != nil {
		v.Error, code = c.backendError("Listing the recurring schedules failed", err), http.StatusBadGateway
		if q.Get("page") != "" {
			v.Error += " (a page link from long ago may have expired: start again from the first page)"
		}
	}
	now := c.cfg.Now()
	for _, s := range rp.Schedules {
		row := scheduleRow{
			Name: clean(s.Name), NameValue: raw(s.Name), Expression: clean(s.Expression), Timezone: clean(s.Timezone), Kind: clean(s.Kind),
			Description: clip(s.Description, 120), State: "enabled", Disabled: s.Disabled,
		}
		if s.Disabled {
			row.State = "disabled"
		}
		if c.cfg.ShowArgs {
			row.Args = clip(string(s.Args), 200)
		}
		for _, t := range schedule.NextRuns(s, now, nextRunsShown) {
			row.Next = append(row.Next, c.when(t))
		}
		if len(row.Next) == 0 {
			switch expr, err := schedule.Parse(s.Expression); {
			case s.Disabled:
				row.NextNote = "none while disabled"
			case err == nil && expr.Kind() == schedule.KindRate && s.Start.IsZero() && s.Created.IsZero():
				row.NextNote = "unknown: a rate without a start date counts from its creation, which the scheduler did not say"
			default:
				row.NextNote = "none left"
			}
		}
		data.Rows = append(data.Rows, row)
	}
	if rp.NextPageToken != "" {
		data.NextHref = c.link("/schedules", url.Values{"page": {rp.NextPageToken}})
	}
	data.Paged, data.FirstHref = q.Get("page") != "", c.path("/schedules")
	jp, err := c.cfg.Schedules.ListJobs(ctx, schedule.JobListQuery{Limit: min(c.cfg.PageSize, 100), PageToken: q.Get("jobs")})
	if err != nil {
		if !unreachable(err) { // the page says it once
			data.JobsError = c.backendError("Listing the delayed jobs' schedules failed", err)
		} else if v.Error == "" {
			v.Error, code = c.unreachableMessage(), http.StatusBadGateway
		}
	}
	for _, js := range jp.Jobs {
		data.Jobs = append(data.Jobs, jobScheduleRow{
			JobID: clip(js.Envelope.ID, 80), JobIDFull: clean(js.Envelope.ID), Kind: clip(js.Envelope.Kind, 128), Key: clip(js.Envelope.EffectiveKey(), 60),
			RunAt: c.when(js.RunAt), Group: clip(js.GroupID, 60), Href: c.jobIDHref(js.Envelope.ID), Disabled: js.Disabled,
		})
	}
	if jp.NextPageToken != "" {
		data.JobsNext = c.link("/schedules", url.Values{"jobs": {jp.NextPageToken}})
	}
	data.JobsPaged = q.Get("jobs") != ""
	data.JobsFirst = c.path("/schedules")
	v.Data = data
	c.render(w, r, code, v)
}

// formLabels name the create form's fields, for schedule.CheckRecurring's errors.
var formLabels = map[string]string{
	"Name": "Name", "Expression": "Expression", "Timezone": "Time zone", "Start": "Start",
	"FlexibleWindow": "Flexible window", "Kind": "Kind", "Args": "Args", "MaxAttempts": "Max attempts",
	"GroupID": "Message group", "Description": "Description",
}

// parseScheduleForm reads the create form and checks it before any AWS call with
// schedule.CheckRecurring, the check of Upsert and of `sqsworker schedules put` (the schedule
// client checks the queue's part, a FIFO queue's message group).
func parseScheduleForm(f scheduleForm) (schedule.Recurring, error) {
	rec := schedule.Recurring{Name: f.Name, Expression: f.Expression, Timezone: f.Timezone, Kind: f.Kind, Args: []byte(f.Args),
		Disabled: f.Disabled, GroupID: f.Group, Description: f.Description}
	if m := strings.TrimSpace(f.MaxAttempts); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return rec, fmt.Errorf("Max attempts %q: must be a whole number, at least 1", m)
		}
		rec.MaxAttempts = n
	}
	if err := schedule.CheckRecurring(&rec); err != nil {
		var fe *schedule.FieldError
		if errors.As(err, &fe) {
			label := formLabels[fe.Field]
			if label == "" {
				label = fe.Field
			}
			return rec, fmt.Errorf("%s %s", label, fe.Problem)
		}
		return rec, err
	}
	return rec, nil
}

// scheduleActionError words the schedule client's errors.
func (c *Console) scheduleActionError(err error, name string) (int, string) {
	switch {
	case errors.Is(err, schedule.ErrNotOwned):
		return http.StatusConflict, fmt.Sprintf("Schedule %s is not a recurring job schedule of this queue: left alone.", clip(name, 64))
	case errors.Is(err, schedule.ErrNotFound):
		return http.StatusNotFound, fmt.Sprintf("There is no recurring schedule %s.", clip(name, 64))
	case errors.Is(err, schedule.ErrInvalid):
		return http.StatusBadRequest, clean(strings.TrimPrefix(err.Error(), schedule.ErrInvalid.Error()+": "))
	}
	return http.StatusBadGateway, c.backendError("The scheduler failed", err)
}

// createScheduleAction creates (or replaces) a recurring schedule.
func (c *Console) createScheduleAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	f := scheduleForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Expression: r.PostFormValue("expression"),
		Timezone: strings.TrimSpace(r.PostFormValue("timezone")), Kind: strings.TrimSpace(r.PostFormValue("kind")),
		Args: r.PostFormValue("args"), Group: r.PostFormValue("group"), MaxAttempts: r.PostFormValue("max_attempts"),
		Description: r.PostFormValue("description"), Disabled: r.PostFormValue("disabled") != "",
	}
	al.add("schedule", clip(f.Name, 64))
	if c.cfg.Schedules == nil {
		al.fail(errors.New("no schedule client"))
		c.refuse(w, r, http.StatusNotFound, "This console has no schedule client.")
		return
	}
	rec, err := parseScheduleForm(f)
	if err == nil {
		al.add("expression", rec.Expression, "kind", rec.Kind)
		err = c.cfg.Schedules.Upsert(r.Context(), rec)
		if err == nil {
			c.done(w, r, "/schedules", nil, "created", "Saved recurring schedule "+clip(rec.Name, 64)+".")
			return
		}
		code, msg := c.scheduleActionError(err, f.Name)
		al.fail(err)
		c.renderSchedules(w, r, code, rawForm(f), msg)
		return
	}
	al.fail(err)
	c.renderSchedules(w, r, http.StatusBadRequest, rawForm(f), clean(err.Error()))
}

// rawForm returns the form as typed, as valid UTF-8, to fill the form again (a form's value is
// what it posts back: never escaped for display).
func rawForm(f scheduleForm) scheduleForm {
	f.Name, f.Expression, f.Timezone, f.Kind = raw(f.Name), raw(f.Expression), raw(f.Timezone), raw(f.Kind)
	f.Args, f.Group, f.MaxAttempts, f.Description = raw(f.Args), raw(f.Group), raw(f.MaxAttempts), raw(f.Description)
	return f
}

func (c *Console) enableScheduleAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	c.setScheduleDisabled(w, r, al, false)
}

func (c *Console) disableScheduleAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	c.setScheduleDisabled(w, r, al, true)
}

// setScheduleDisabled reads the schedule, flips its state and writes it back (Upsert replaces
// every field, so the rest stays as read).
func (c *Console) setScheduleDisabled(w http.ResponseWriter, r *http.Request, al *actionLog, disabled bool) {
	name := r.PostFormValue("name")
	al.add("schedule", clip(name, 64))
	if c.cfg.Schedules == nil {
		al.fail(errors.New("no schedule client"))
		c.refuse(w, r, http.StatusNotFound, "This console has no schedule client.")
		return
	}
	rec, err := c.cfg.Schedules.Get(r.Context(), name)
	if err == nil {
		rec.Disabled = disabled
		err = c.cfg.Schedules.Upsert(r.Context(), rec)
	}
	if err != nil {
		al.fail(err)
		code, msg := c.scheduleActionError(err, name)
		c.refuse(w, r, code, msg)
		return
	}
	done, verb := "enabled", "Enabled"
	if disabled {
		done, verb = "disabled", "Disabled"
	}
	c.done(w, r, "/schedules", nil, done, verb+" recurring schedule "+clip(name, 64)+".")
}

func (c *Console) deleteScheduleAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	name := r.PostFormValue("name")
	al.add("schedule", clip(name, 64))
	if c.cfg.Schedules == nil {
		al.fail(errors.New("no schedule client"))
		c.refuse(w, r, http.StatusNotFound, "This console has no schedule client.")
		return
	}
	if err := c.cfg.Schedules.Delete(r.Context(), name); err != nil {
		al.fail(err)
		code, msg := c.scheduleActionError(err, name)
		c.refuse(w, r, code, msg)
		return
	}
	c.done(w, r, "/schedules", nil, "deleted", "Deleted recurring schedule "+clip(name, 64)+".")
}
