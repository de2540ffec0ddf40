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

// scheduleRow is one recurring schedule, cleaned for display.
type scheduleRow struct {
	Name, Expression, Timezone, State, Kind, Description, Args string
	Next                                                       []string
	NextNote                                                   string
	Disabled                                                   bool
}

// jobScheduleRow is one one-time schedule of a delayed job.
type jobScheduleRow struct {
	JobID, Kind, Key, RunAt, Group, Href string
	Disabled                             bool
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
		v.Error, code = "Listing the recurring schedules failed: "+clean(err.Error()), http.StatusBadGateway
		if q.Get("page") != "" {
			v.Error += " (a page link from long ago may have expired: start again from the first page)"
		}
	}
	now := c.cfg.Now()
	for _, s := range rp.Schedules {
		row := scheduleRow{
			Name: clean(s.Name), Expression: clean(s.Expression), Timezone: clean(s.Timezone), Kind: clean(s.Kind),
			Description: clip(s.Description, 120), State: "enabled", Disabled: s.Disabled,
		}
		if s.Disabled {
			row.State = "disabled"
		}
		if c.cfg.ShowArgs {
			row.Args = clip(string(s.Args), 200)
		}
		for _, t := range schedule.NextRuns(s, now, nextRunsShown) {
			row.Next = append(row.Next, showTime(t))
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
		data.JobsError = "Listing the delayed jobs' schedules failed: " + clean(err.Error())
	}
	for _, js := range jp.Jobs {
		data.Jobs = append(data.Jobs, jobScheduleRow{
			JobID: clip(js.Envelope.ID, 80), Kind: clip(js.Envelope.Kind, 128), Key: clip(js.Envelope.EffectiveKey(), 60),
			RunAt: showTime(js.RunAt), Group: clip(js.GroupID, 60), Href: c.jobIDHref(js.Envelope.ID), Disabled: js.Disabled,
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
func scheduleActionError(err error, name string) (int, string) {
	switch {
	case errors.Is(err, schedule.ErrNotOwned):
		return http.StatusConflict, fmt.Sprintf("Schedule %s is not a recurring job schedule of this queue: left alone.", clip(name, 64))
	case errors.Is(err, schedule.ErrNotFound):
		return http.StatusNotFound, fmt.Sprintf("There is no recurring schedule %s.", clip(name, 64))
	case errors.Is(err, schedule.ErrInvalid):
		return http.StatusBadRequest, clean(strings.TrimPrefix(err.Error(), schedule.ErrInvalid.Error()+": "))
	}
	return http.StatusBadGateway, "The scheduler failed: " + clean(err.Error())
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
			c.redirect(w, r, "/schedules", url.Values{"done": {"created"}, "id": {rec.Name}})
			return
		}
		code, msg := scheduleActionError(err, f.Name)
		al.fail(err)
		c.renderSchedules(w, r, code, cleanForm(f), msg)
		return
	}
	al.fail(err)
	c.renderSchedules(w, r, http.StatusBadRequest, cleanForm(f), clean(err.Error()))
}

func cleanForm(f scheduleForm) scheduleForm {
	f.Name, f.Expression, f.Timezone, f.Kind = clean(f.Name), clean(f.Expression), clean(f.Timezone), clean(f.Kind)
	f.Args, f.Group, f.MaxAttempts, f.Description = clean(f.Args), clean(f.Group), clean(f.MaxAttempts), clean(f.Description)
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
		code, msg := scheduleActionError(err, name)
		c.refuse(w, r, code, msg)
		return
	}
	done := "enabled"
	if disabled {
		done = "disabled"
	}
	c.redirect(w, r, "/schedules", url.Values{"done": {done}, "id": {name}})
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
		code, msg := scheduleActionError(err, name)
		c.refuse(w, r, code, msg)
		return
	}
	c.redirect(w, r, "/schedules", url.Values{"done": {"deleted"}, "id": {name}})
}
