package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// JobSchedule is the one-time schedule of a delayed job (ScheduleJob made it), as read back.
type JobSchedule struct {
	// Name is the schedule's name (ScheduleName of the job id).
	Name string
	// Envelope is the job the schedule sends when it fires.
	Envelope jobs.Envelope
	// RunAt is when the schedule fires (its at() expression, in its time zone).
	RunAt time.Time
	// GroupID is the FIFO message group id of the job ("" on a standard queue).
	GroupID string
	// Disabled reports whether the schedule is disabled (it then never fires).
	Disabled bool
}

// JobListQuery selects the one-time job schedules ListJobs returns.
type JobListQuery struct {
	// Limit is the most schedules in the page, 1-100 (ListSchedules' largest page). Defaults to
	// 50.
	Limit int
	// PageToken continues a listing: the NextPageToken of the previous page. Empty for the first.
	PageToken string
}

// JobPage is one page of ListJobs.
type JobPage struct {
	// Jobs are the page's job schedules, in the order Scheduler lists them (by name).
	Jobs []JobSchedule
	// NextPageToken continues the listing; empty when there is nothing more.
	NextPageToken string
}

// jobNamePrefix is what the names of every one-time job schedule start with (both
// JobSchedulePrefix and JobScheduleHashPrefix).
const jobNamePrefix = "sqsworker-job"

// GetJob reads the one-time schedule of jobID back: the job it sends and when. It returns an
// error wrapping ErrNotFound when there is none (the job was never delayed through the
// scheduler, its schedule has fired, or it was cancelled), and one wrapping both ErrNotFound
// and ErrNotOwned when the schedule of that name does not target this client's queue or does
// not carry that job.
func (c *Client) GetJob(ctx context.Context, jobID string) (JobSchedule, error) {
	if jobID == "" {
		return JobSchedule{}, invalidf("job id is empty")
	}
	name := ScheduleName(jobID)
	js, err := c.getJob(ctx, name)
	if err != nil {
		return JobSchedule{}, err
	}
	if js.Envelope.ID != jobID {
		return JobSchedule{}, fmt.Errorf("%w: %w: schedule %s carries job %q, not %q", ErrNotFound, ErrNotOwned, name, js.Envelope.ID, jobID)
	}
	return js, nil
}

// ScheduledJob returns the job jobID's one-time schedule carries, and false when it has none
// (GetJob's ErrNotFound): producer.ScheduledJobReader, which producer.Cancel reads before it
// deletes the schedule.
func (c *Client) ScheduledJob(ctx context.Context, jobID string) (jobs.Envelope, bool, error) {
	js, err := c.GetJob(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		return jobs.Envelope{}, false, nil
	}
	if err != nil {
		return jobs.Envelope{}, false, err
	}
	return js.Envelope, true, nil
}

func (c *Client) getJob(ctx context.Context, name string) (JobSchedule, error) {
	out, err := c.api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(c.group)})
	if err != nil {
		if isNotFound(err) {
			return JobSchedule{}, fmt.Errorf("%w: job schedule %s in group %s", ErrNotFound, name, c.group)
		}
		return JobSchedule{}, fmt.Errorf("schedule: get job schedule %s: %w", name, err)
	}
	js, ok := c.jobFromSchedule(out)
	if !ok {
		return JobSchedule{}, fmt.Errorf("%w: %w: %s in group %s is not a job schedule targeting %s", ErrNotFound, ErrNotOwned, name, c.group, c.queueARN)
	}
	return js, nil
}

// jobFromSchedule converts a schedule to a JobSchedule; ok is false when it is not a one-time
// job schedule of this client's queue.
func (c *Client) jobFromSchedule(out *scheduler.GetScheduleOutput) (JobSchedule, bool) {
	name := aws.ToString(out.Name)
	t := out.Target
	if t == nil || aws.ToString(t.Arn) != c.queueARN || !strings.HasPrefix(name, jobNamePrefix) {
		return JobSchedule{}, false
	}
	env, err := jobs.ParseEnvelope(aws.ToString(t.Input))
	if err != nil {
		return JobSchedule{}, false
	}
	js := JobSchedule{Name: name, Envelope: env, Disabled: out.State == types.ScheduleStateDisabled}
	if expr, err := Parse(aws.ToString(out.ScheduleExpression)); err == nil && expr.Kind() == KindAt {
		loc, err := time.LoadLocation(aws.ToString(out.ScheduleExpressionTimezone))
		if err != nil || aws.ToString(out.ScheduleExpressionTimezone) == "" {
			loc = time.UTC
		}
		if at, ok := expr.Next(time.Time{}, loc, time.Time{}); ok {
			js.RunAt = at.UTC()
		}
	}
	// The job's schedule (ScheduleJob), or the schedule of a copy (ScheduleResend).
	if ScheduleName(env.ID) != name && (js.RunAt.IsZero() || ResendScheduleName(env.ID, js.RunAt) != name) {
		return JobSchedule{}, false
	}
	if t.SqsParameters != nil {
		js.GroupID = aws.ToString(t.SqsParameters.MessageGroupId)
	}
	return js, true
}

// ListJobs returns one page of the client's one-time job schedules (the delayed jobs waiting in
// the scheduler): the schedules of its group whose name is a job schedule's and whose target is
// its queue. It makes one ListSchedules call per page and one GetSchedule per schedule listed.
// A schedule deleted between the two calls (it fired) is left out, so a page may hold fewer
// than Limit schedules and still have a NextPageToken.
func (c *Client) ListJobs(ctx context.Context, q JobListQuery) (JobPage, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit < 1 || limit > 100:
		return JobPage{}, invalidf("JobListQuery.Limit %d is outside 1-100", limit)
	}
	in := &scheduler.ListSchedulesInput{
		GroupName:  aws.String(c.group),
		NamePrefix: aws.String(jobNamePrefix),
		MaxResults: aws.Int32(int32(limit)),
	}
	if q.PageToken != "" {
		in.NextToken = aws.String(q.PageToken)
	}
	out, err := c.api.ListSchedules(ctx, in)
	if err != nil {
		return JobPage{}, fmt.Errorf("schedule: list job schedules of group %s: %w", c.group, err)
	}
	page := JobPage{NextPageToken: aws.ToString(out.NextToken)}
	for _, s := range out.Schedules {
		name := aws.ToString(s.Name)
		// Some backends ignore the group and prefix filters: check them again.
		if g := aws.ToString(s.GroupName); g != "" && g != c.group || !strings.HasPrefix(name, jobNamePrefix) {
			continue
		}
		if s.Target != nil && aws.ToString(s.Target.Arn) != c.queueARN {
			continue
		}
		js, err := c.getJob(ctx, name)
		if errors.Is(err, ErrNotFound) { // fired meanwhile, or not ours
			continue
		}
		if err != nil {
			return JobPage{}, err
		}
		page.Jobs = append(page.Jobs, js)
	}
	return page, nil
}

// NextRuns returns up to n occurrences of the recurring schedule r after after, in order: none
// when it is disabled or has ended. Occurrences before r.Start are skipped; the first may be
// r.Start itself. A rate counts its periods from r.Start, else from r.Created (EventBridge
// Scheduler starts a rate without a start date at once, when it is created, as the local
// Dispatcher does); a rate with neither has no known occurrences.
func NextRuns(r Recurring, after time.Time, n int) []time.Time {
	if r.Disabled || n <= 0 {
		return nil
	}
	expr, err := Parse(r.Expression)
	if err != nil {
		return nil
	}
	anchor := r.Start
	if expr.Kind() == KindRate && anchor.IsZero() {
		if anchor = r.Created; anchor.IsZero() {
			return nil
		}
	}
	loc, err := time.LoadLocation(r.Timezone)
	if err != nil {
		loc = time.UTC
	}
	if r.Start.After(after) {
		after = r.Start.Add(-time.Nanosecond)
	}
	var out []time.Time
	for len(out) < n {
		next, ok := expr.Next(after, loc, anchor)
		if !ok || !r.End.IsZero() && !next.Before(r.End) {
			break
		}
		out = append(out, next)
		after = next
	}
	return out
}
