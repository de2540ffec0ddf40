package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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
	// unbounded. A rate counts its periods from Start, or from the schedule's creation.
	Start, End time.Time
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

// normalize validates r and fills its defaults (Timezone, Args compacted).
func (r *Recurring) normalize(c *Client) error {
	if err := validateName("recurring schedule name", r.Name); err != nil {
		return err
	}
	if strings.HasPrefix(r.Name, reservedPrefix) {
		return invalidf("recurring schedule name %q: the prefix %q is reserved for one-time job schedules", r.Name, reservedPrefix)
	}
	expr, err := Parse(r.Expression)
	if err != nil {
		return fmt.Errorf("%w: recurring schedule %s: %w", ErrInvalid, r.Name, err)
	}
	r.Expression = expr.String()
	if r.Timezone == "" {
		r.Timezone = "UTC"
	}
	if len(r.Timezone) > 50 {
		return invalidf("recurring schedule %s: time zone %.32q… is longer than 50 characters", r.Name, r.Timezone)
	}
	if _, err := time.LoadLocation(r.Timezone); err != nil || r.Timezone == "Local" {
		return invalidf("recurring schedule %s: time zone %q is not an IANA time zone name (e.g. Europe/Paris)", r.Name, r.Timezone)
	}
	if !r.Start.IsZero() && !r.End.IsZero() && !r.Start.Before(r.End) {
		return invalidf("recurring schedule %s: start %s is not before end %s", r.Name, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339))
	}
	if r.FlexibleWindow != 0 && (r.FlexibleWindow < time.Minute || r.FlexibleWindow > MaxFlexibleWindow || r.FlexibleWindow%time.Minute != 0) {
		return invalidf("recurring schedule %s: flexible window %s is not whole minutes between 1m and 24h", r.Name, r.FlexibleWindow)
	}
	if err := jobs.ValidateKind(r.Kind); err != nil {
		return fmt.Errorf("%w: recurring schedule %s: %w", ErrInvalid, r.Name, err)
	}
	if len(bytes.TrimSpace(r.Args)) == 0 {
		r.Args = json.RawMessage(`{}`)
	}
	var args bytes.Buffer
	if err := json.Compact(&args, r.Args); err != nil {
		return invalidf("recurring schedule %s: args are not valid JSON: %v", r.Name, err)
	}
	if args.Len() < 2 || args.Bytes()[0] != '{' {
		return invalidf("recurring schedule %s: args must be a JSON object, not %.40s", r.Name, args.String())
	}
	r.Args = args.Bytes()
	if r.MaxAttempts < 0 {
		return invalidf("recurring schedule %s: max attempts %d is negative", r.Name, r.MaxAttempts)
	}
	if err := c.validateGroupID(r.GroupID); err != nil {
		return fmt.Errorf("recurring schedule %s: %w", r.Name, err)
	}
	if n := len([]rune(r.Description)); n > MaxDescriptionLength {
		return invalidf("recurring schedule %s: description is %d characters long, the limit is %d", r.Name, n, MaxDescriptionLength)
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
	if len(input) > MaxInputBytes {
		return invalidf("recurring schedule %s: the job template is %d bytes, above EventBridge Scheduler's target input limit of %d bytes (256 KB)", r.Name, len(input), MaxInputBytes)
	}
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

func (c *Client) validateRecurringName(name string) error {
	if err := validateName("recurring schedule name", name); err != nil {
		return err
	}
	if strings.HasPrefix(name, reservedPrefix) {
		return invalidf("recurring schedule name %q: the prefix %q is reserved for one-time job schedules", name, reservedPrefix)
	}
	return nil
}

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
	if w := out.FlexibleTimeWindow; w != nil && w.Mode == types.FlexibleTimeWindowModeFlexible && w.MaximumWindowInMinutes != nil {
		r.FlexibleWindow = time.Duration(*w.MaximumWindowInMinutes) * time.Minute
	}
	if t.SqsParameters != nil {
		r.GroupID = aws.ToString(t.SqsParameters.MessageGroupId)
	}
	return r, true
}

// List returns the client's recurring schedules, sorted by name: the schedules of its group
// whose target is its queue and whose input is a recurring job template (one-time job
// schedules and other producers' schedules are left out). It reads each schedule (one
// GetSchedule per schedule of the queue).
func (c *Client) List(ctx context.Context) ([]Recurring, error) {
	var names []string
	p := scheduler.NewListSchedulesPaginator(c.api, &scheduler.ListSchedulesInput{GroupName: aws.String(c.group)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("schedule: list schedules of group %s: %w", c.group, err)
		}
		for _, s := range page.Schedules {
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
	}
	sort.Strings(names)
	list := make([]Recurring, 0, len(names))
	for _, name := range names {
		r, err := c.get(ctx, name)
		if errors.Is(err, ErrNotFound) { // deleted meanwhile, or not ours
			continue
		}
		if err != nil {
			return nil, err
		}
		list = append(list, r)
	}
	return list, nil
}
