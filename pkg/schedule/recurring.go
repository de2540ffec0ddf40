package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Recurring is a recurring schedule that enqueues a job on every occurrence of Expression.
// The zero value of each optional field is its default.
type Recurring struct {
	// Name names the schedule in the client's group: 1-64 characters of [0-9a-zA-Z-_.], not
	// starting with "sqsworker-" (reserved for one-time job schedules). Required.
	Name string
	// Expression is a rate(…) or cron(…) expression (or at(…)) with EventBridge Scheduler's
	// syntax; see [Parse]. Required.
	Expression string
	// Timezone is the IANA time zone cron and at expressions are evaluated in. Defaults to "UTC".
	Timezone string
	// Start and End bound the occurrences (Scheduler's StartDate and EndDate); zero means
	// unbounded. A rate counts its periods from Start, or from the schedule's creation
	// (Created).
	Start, End time.Time
	// Created is when the schedule was created (Scheduler's CreationDate), as Get and List read
	// it back; Upsert ignores it. A rate without Start fires first at its creation and then
	// every period after it, so NextRuns counts such a rate from Created.
	Created time.Time
	// FlexibleWindow lets Scheduler fire up to this long after each occurrence (whole minutes,
	// 1m-24h), spreading the load. Defaults to 0: fire at the occurrence.
	FlexibleWindow time.Duration
	// Disabled keeps the schedule without firing it.
	Disabled bool
	// Kind is the kind of the job each occurrence enqueues. Required.
	Kind string
	// Args is the job's arguments, a JSON object. Defaults to {}.
	Args json.RawMessage
	// MaxAttempts, when above 0, overrides the kind's MaxAttempts for these jobs.
	MaxAttempts int
	// GroupID is the FIFO message group id of the jobs: required on a FIFO queue.
	GroupID string
	// Description is shown by the Scheduler console, at most 512 characters.
	Description string
}

// EventBridge Scheduler's context attributes: Scheduler replaces them in a target's input each
// time it invokes the target. See [ExpandInput].
const (
	// AttrScheduleARN becomes the schedule's ARN.
	AttrScheduleARN = "<aws.scheduler.schedule-arn>"
	// AttrScheduledTime becomes the occurrence's time, RFC 3339 in UTC with seconds
	// (2022-03-22T18:59:43Z); it is the same for every retry of that occurrence.
	AttrScheduledTime = "<aws.scheduler.scheduled-time>"
	// AttrExecutionID becomes an id unique to each attempted invocation (d32c5kddcf5bb8c3).
	AttrExecutionID = "<aws.scheduler.execution-id>"
	// AttrAttemptNumber becomes the attempt number of the invocation, from 1.
	AttrAttemptNumber = "<aws.scheduler.attempt-number>"
)

// ScheduledTimeLayout is how Scheduler writes AttrScheduledTime (time.Format layout, UTC).
const ScheduledTimeLayout = "2006-01-02T15:04:05Z07:00"

// MetaSchedule is the envelope meta key naming the recurring schedule that enqueued a job.
const MetaSchedule = "schedule"

// ExpandInput returns a schedule target's input as EventBridge Scheduler sends it when it
// invokes the target: template with each context attribute (AttrScheduleARN,
// AttrScheduledTime, AttrExecutionID, AttrAttemptNumber) replaced by its value. scheduledTime
// is written in UTC with seconds, as Scheduler does (2022-03-22T18:59:43Z).
//
// A local dispatcher firing schedules read back through the Scheduler API (where the backend
// stores schedules but never fires them) must send ExpandInput(target.Input, …) as the message
// body, with a fresh executionID for every attempt and the same scheduledTime for every retry
// of one occurrence, so that the recurring job's key (name@scheduled-time) stays the same and
// idempotency runs the occurrence once. A one-time job's input has no attribute and comes out
// unchanged. The input templates this package writes hold attributes only inside JSON
// strings, and every value is made of characters JSON strings hold unescaped, so the result
// is valid JSON, here as on AWS.
func ExpandInput(template, scheduleARN string, scheduledTime time.Time, executionID string, attempt int) string {
	if !strings.Contains(template, "<aws.scheduler.") {
		return template
	}
	return strings.NewReplacer(
		AttrScheduleARN, scheduleARN,
		AttrScheduledTime, scheduledTime.UTC().Format(ScheduledTimeLayout),
		AttrExecutionID, executionID,
		AttrAttemptNumber, strconv.Itoa(attempt),
	).Replace(template)
}

// recurringInput is the envelope template of a recurring schedule's target:
//
//	{"v":1,"id":"<aws.scheduler.execution-id>","kind":KIND,"args":ARGS,
//	 "key":"NAME@<aws.scheduler.scheduled-time>","enqueued_at":"<aws.scheduler.scheduled-time>",
//	 "max_attempts":N,"meta":{"schedule":NAME}}
//
// Every occurrence is a distinct job (its key holds the scheduled time); Scheduler's retries
// of one occurrence keep the key, so idempotency runs it once; the execution id, different
// on each attempt, is only the message's job id. max_attempts is omitted when 0.
func recurringInput(r *Recurring) string {
	var b strings.Builder
	b.Grow(200 + len(r.Args))
	// Name and kind were validated: their characters need no JSON escaping.
	b.WriteString(`{"v":1,"id":"` + AttrExecutionID + `","kind":"` + r.Kind + `","args":`)
	b.Write(r.Args)
	b.WriteString(`,"key":"` + r.Name + "@" + AttrScheduledTime + `","enqueued_at":"` + AttrScheduledTime + `"`)
	if r.MaxAttempts > 0 {
		b.WriteString(`,"max_attempts":` + strconv.Itoa(r.MaxAttempts))
	}
	b.WriteString(`,"meta":{"` + MetaSchedule + `":"` + r.Name + `"}}`)
	return b.String()
}

// templateFields are the fields of a recurring input template Get reads back.
type templateFields struct {
	V           int               `json:"v"`
	ID          string            `json:"id"`
	Kind        string            `json:"kind"`
	Args        json.RawMessage   `json:"args"`
	Key         string            `json:"key"`
	MaxAttempts int               `json:"max_attempts"`
	Meta        map[string]string `json:"meta"`
}

// parseRecurringInput reads a recurring schedule's template back; ok is false when input is
// not one (another producer's schedule, or a one-time job).
func parseRecurringInput(name, input string) (t templateFields, ok bool) {
	if err := json.Unmarshal([]byte(input), &t); err != nil {
		return t, false
	}
	return t, t.V == jobs.EnvelopeVersion && t.ID == AttrExecutionID && t.Meta[MetaSchedule] == name &&
		t.Key == name+"@"+AttrScheduledTime
}

// normalize validates r and fills its defaults (CheckRecurring), and checks its message group
// against the client's queue (required on a FIFO queue).
func (r *Recurring) normalize(c *Client) error {
	if err := CheckRecurring(r); err != nil {
		return err
	}
	if err := c.validateGroupID(r.GroupID); err != nil {
		return fmt.Errorf("recurring schedule %s: %w", r.Name, err)
	}
	return nil
}

// Upsert creates the recurring schedule r, or replaces it when a schedule of that name
// exists (UpdateSchedule replaces every field). r is validated first: the error then wraps
// [ErrInvalid] and nothing is sent. A schedule of that name that is not one of this client's
// recurring schedules is left alone: the error wraps [ErrNotOwned].
func (c *Client) Upsert(ctx context.Context, r Recurring) error {
	if err := r.normalize(c); err != nil {
		return err
	}
	input := recurringInput(&r)
	in := &scheduler.CreateScheduleInput{
		Name:                       aws.String(r.Name),
		GroupName:                  aws.String(c.group),
		ScheduleExpression:         aws.String(r.Expression),
		ScheduleExpressionTimezone: aws.String(r.Timezone),
		FlexibleTimeWindow:         flexibleWindow(r.FlexibleWindow),
		ActionAfterCompletion:      types.ActionAfterCompletionNone,
		State:                      types.ScheduleStateEnabled,
		Target:                     c.target(input, r.GroupID),
	}
	if r.Disabled {
		in.State = types.ScheduleStateDisabled
	}
	if r.Description != "" {
		in.Description = aws.String(r.Description)
	}
	if !r.Start.IsZero() {
		in.StartDate = aws.Time(r.Start.UTC())
	}
	if !r.End.IsZero() {
		in.EndDate = aws.Time(r.End.UTC())
	}
	for try := 0; ; try++ {
		_, err := c.api.CreateSchedule(ctx, in)
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("schedule: create recurring schedule %s: %w", r.Name, err)
		}
		if _, err := c.get(ctx, r.Name); err != nil {
			if errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotOwned) && try == 0 {
				continue // deleted meanwhile: create again
			}
			return err
		}
		_, err = c.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
			Name:                       in.Name,
			GroupName:                  in.GroupName,
			Description:                in.Description,
			ScheduleExpression:         in.ScheduleExpression,
			ScheduleExpressionTimezone: in.ScheduleExpressionTimezone,
			StartDate:                  in.StartDate,
			EndDate:                    in.EndDate,
			FlexibleTimeWindow:         in.FlexibleTimeWindow,
			ActionAfterCompletion:      in.ActionAfterCompletion,
			State:                      in.State,
			Target:                     in.Target,
		})
		if err != nil {
			return fmt.Errorf("schedule: update recurring schedule %s: %w", r.Name, err)
		}
		return nil
	}
}

func flexibleWindow(d time.Duration) *types.FlexibleTimeWindow {
	if d == 0 {
		return &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}
	}
	return &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeFlexible, MaximumWindowInMinutes: aws.Int32(int32(d / time.Minute))}
}

// Delete deletes the recurring schedule name. A schedule that does not exist gives an error
// wrapping [ErrNotFound]; one that is not this client's, [ErrNotOwned] (it is not deleted).
func (c *Client) Delete(ctx context.Context, name string) error {
	if err := c.validateRecurringName(name); err != nil {
		return err
	}
	if _, err := c.get(ctx, name); err != nil {
		return err
	}
	_, err := c.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(c.group)})
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("%w: recurring schedule %s in group %s", ErrNotFound, name, c.group)
		}
		return fmt.Errorf("schedule: delete recurring schedule %s: %w", name, err)
	}
	return nil
}

func (c *Client) validateRecurringName(name string) error { return CheckName(name) }

// Get reads the recurring schedule name back (decoding its target's job template). Defaults
// come back filled in (Timezone "UTC", Args at least {}). A schedule that does not exist gives
// an error wrapping [ErrNotFound]; one that exists but is not a recurring job schedule
// targeting this client's queue, an error wrapping both [ErrNotFound] and [ErrNotOwned].
func (c *Client) Get(ctx context.Context, name string) (Recurring, error) {
	if err := c.validateRecurringName(name); err != nil {
		return Recurring{}, err
	}
	return c.get(ctx, name)
}

func (c *Client) get(ctx context.Context, name string) (Recurring, error) {
	out, err := c.api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(c.group)})
	if err != nil {
		if isNotFound(err) {
			return Recurring{}, fmt.Errorf("%w: recurring schedule %s in group %s", ErrNotFound, name, c.group)
		}
		return Recurring{}, fmt.Errorf("schedule: get recurring schedule %s: %w", name, err)
	}
	r, ok := c.fromSchedule(out)
	if !ok {
		return Recurring{}, fmt.Errorf("%w: %w: %s in group %s is not a recurring job schedule targeting %s", ErrNotFound, ErrNotOwned, name, c.group, c.queueARN)
	}
	return r, nil
}

// fromSchedule converts a schedule to a Recurring; ok is false when it is not one of this
// client's recurring schedules.
func (c *Client) fromSchedule(out *scheduler.GetScheduleOutput) (Recurring, bool) {
	name := aws.ToString(out.Name)
	t := out.Target
	if t == nil || aws.ToString(t.Arn) != c.queueARN {
		return Recurring{}, false
	}
	tmpl, ok := parseRecurringInput(name, aws.ToString(t.Input))
	if !ok {
		return Recurring{}, false
	}
	r := Recurring{
		Name:        name,
		Expression:  aws.ToString(out.ScheduleExpression),
		Timezone:    aws.ToString(out.ScheduleExpressionTimezone),
		Disabled:    out.State == types.ScheduleStateDisabled,
		Kind:        tmpl.Kind,
		Args:        tmpl.Args,
		MaxAttempts: tmpl.MaxAttempts,
		Description: aws.ToString(out.Description),
	}
	if r.Timezone == "" {
		r.Timezone = "UTC"
	}
	if out.StartDate != nil {
		r.Start = out.StartDate.UTC()
	}
	if out.EndDate != nil {
		r.End = out.EndDate.UTC()
	}
	if out.CreationDate != nil {
		r.Created = out.CreationDate.UTC()
	}
	if w := out.FlexibleTimeWindow; w != nil && w.Mode == types.FlexibleTimeWindowModeFlexible && w.MaximumWindowInMinutes != nil {
		r.FlexibleWindow = time.Duration(*w.MaximumWindowInMinutes) * time.Minute
	}
	if t.SqsParameters != nil {
		r.GroupID = aws.ToString(t.SqsParameters.MessageGroupId)
	}
	return r, true
}

// ListQuery selects the page of recurring schedules ListPage returns.
type ListQuery struct {
	// Limit is the most schedules in the page, 1-100 (ListSchedules' largest page). Defaults to
	// 50.
	Limit int
	// PageToken continues a listing: the NextPageToken of the previous page. Empty for the first.
	PageToken string
}

// RecurringPage is one page of ListPage.
type RecurringPage struct {
	// Schedules are the page's recurring schedules, sorted by name within the page.
	Schedules []Recurring
	// NextPageToken continues the listing (Scheduler's NextToken); empty when there is nothing
	// more.
	NextPageToken string
}

// maxListCalls bounds the ListSchedules calls of one ListPage: a group full of one-time job
// schedules (which a page leaves out) yields a short page with a NextPageToken instead of a
// scan of the whole group.
const maxListCalls = 20

// getConcurrency is how many GetSchedule calls ListPage makes at a time.
const getConcurrency = 8

// ListPage returns one page of the client's recurring schedules: the schedules of its group
// whose target is its queue and whose input is a recurring job template (one-time job schedules
// and other producers' schedules are left out). It pages ListSchedules by its NextToken, asking
// each call for no more names than the page still needs, and reads only the page's schedules
// (one GetSchedule each). A page may hold fewer than Limit schedules, even none, and still have
// a NextPageToken: the group's one-time schedules of delayed jobs take room in ListSchedules'
// pages, and a schedule deleted between the two calls is left out.
//
// A backend that ignores MaxResults (the embedded emulator returns up to 100 schedules of any
// group, in no order, and no NextToken) gives one page of whatever it returns.
func (c *Client) ListPage(ctx context.Context, q ListQuery) (RecurringPage, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit < 1 || limit > 100:
		return RecurringPage{}, invalidf("ListQuery.Limit %d is outside 1-100", limit)
	}
	token := q.PageToken
	var names []string
	for calls := 0; ; calls++ {
		in := &scheduler.ListSchedulesInput{GroupName: aws.String(c.group), MaxResults: aws.Int32(int32(limit - len(names)))}
		if token != "" {
			in.NextToken = aws.String(token)
		}
		out, err := c.api.ListSchedules(ctx, in)
		if err != nil {
			return RecurringPage{}, fmt.Errorf("schedule: list schedules of group %s: %w", c.group, err)
		}
		for _, s := range out.Schedules {
			name := aws.ToString(s.Name)
			// Some backends ignore the group filter: check it again.
			if g := aws.ToString(s.GroupName); g != "" && g != c.group {
				continue
			}
			if s.Target != nil && aws.ToString(s.Target.Arn) != c.queueARN {
				continue
			}
			if strings.HasPrefix(name, reservedPrefix) || validateName("", name) != nil {
				continue
			}
			names = append(names, name)
		}
		token = aws.ToString(out.NextToken)
		if token == "" || len(names) >= limit || calls+1 >= maxListCalls {
			break
		}
	}
	sort.Strings(names)
	got := make([]Recurring, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, getConcurrency)
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got[i], errs[i] = c.get(ctx, name)
		})
	}
	wg.Wait()
	page := RecurringPage{Schedules: make([]Recurring, 0, len(names)), NextPageToken: token}
	for i := range names {
		switch {
		case errors.Is(errs[i], ErrNotFound): // deleted meanwhile, or not ours
		case errs[i] != nil:
			return RecurringPage{}, errs[i]
		default:
			page.Schedules = append(page.Schedules, got[i])
		}
	}
	return page, nil
}

// List returns every recurring schedule of the client, sorted by name: ListPage's pages, one
// after the other. It reads each schedule (one GetSchedule per schedule of the queue); to show
// a group with many schedules, page through it with ListPage.
func (c *Client) List(ctx context.Context) ([]Recurring, error) {
	var list []Recurring
	q := ListQuery{Limit: 100}
	for {
		page, err := c.ListPage(ctx, q)
		if err != nil {
			return nil, err
		}
		list = append(list, page.Schedules...)
		if page.NextPageToken == "" {
			break
		}
		if page.NextPageToken == q.PageToken {
			return nil, fmt.Errorf("schedule: list schedules of group %s: the backend returned the same NextToken twice", c.group)
		}
		q.PageToken = page.NextPageToken
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
}
