package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
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
	Total     int
	From, To  int
	NextHref  string
	PrevHref  string
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
	list, err := c.cfg.Schedules.List(ctx)
	if err != nil {
		v.Error, code = "Listing the recurring schedules failed: "+clean(err.Error()), http.StatusBadGateway
	}
	now := c.cfg.Now()
	page, _ := strconv.Atoi(q.Get("page"))
	size := c.cfg.PageSize
	pages := max(1, (len(list)+size-1)/size)
	page = min(max(page, 1), pages)
	from, to := (page-1)*size, min(page*size, len(list))
	data.Total, data.From, data.To = len(list), from+1, to
	for _, s := range list[from:to] {
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
			case err == nil && expr.Kind() == schedule.KindRate && s.Start.IsZero():
				row.NextNote = "counted from its creation (a rate without a start date)"
			default:
				row.NextNote = "none left"
			}
		}
		data.Rows = append(data.Rows, row)
	}
	if page < pages {
		data.NextHref = c.link("/schedules", url.Values{"page": {strconv.Itoa(page + 1)}})
	}
	if page > 1 {
		data.PrevHref = c.link("/schedules", url.Values{"page": {strconv.Itoa(page - 1)}})
	}
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

// parseScheduleForm checks the create form before any AWS call, with the rules of
// `sqsworker schedules put` (the schedule client checks the rest).
func parseScheduleForm(f scheduleForm) (schedule.Recurring, error) {
	rec := schedule.Recurring{Name: f.Name, Timezone: f.Timezone, Kind: f.Kind, Disabled: f.Disabled, GroupID: f.Group, Description: f.Description}
	if rec.Name == "" {
		return rec, errors.New("name: a schedule needs a name, 1-64 characters of letters, digits, '-', '_' and '.'")
	}
	if strings.HasPrefix(rec.Name, "sqsworker-") {
		return rec, errors.New(`name: names starting with "sqsworker-" are one-time schedules of delayed jobs, not recurring schedules`)
	}
	expr, err := schedule.Parse(strings.TrimSpace(f.Expression))
	if err != nil {
		return rec, fmt.Errorf("expression: %v", strings.TrimPrefix(err.Error(), schedule.ErrInvalidExpression.Error()+" "))
	}
	rec.Expression = expr.String()
	if err := jobs.ValidateKind(rec.Kind); err != nil {
		return rec, fmt.Errorf("kind: %v", err)
	}
	args := f.Args
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	if err := producer.CheckArgsJSON("args", []byte(args)); err != nil {
		return rec, err
	}
	rec.Args = []byte(args)
	if rec.Timezone == "" {
		rec.Timezone = "UTC"
	}
	if rec.Timezone == "Local" {
		return rec, fmt.Errorf("time zone %q: want an IANA time zone name, such as UTC or Europe/Paris", rec.Timezone)
	}
	if _, err := time.LoadLocation(rec.Timezone); err != nil {
		return rec, fmt.Errorf("time zone %q is not an IANA time zone name (such as UTC or Europe/Paris)", rec.Timezone)
	}
	if m := strings.TrimSpace(f.MaxAttempts); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return rec, fmt.Errorf("max attempts %q: must be a whole number, at least 1", m)
		}
		rec.MaxAttempts = n
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
