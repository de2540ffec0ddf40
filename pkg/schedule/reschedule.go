package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// RescheduleJob moves the one-time schedule of env.ID (ScheduleJob made it) to at and makes it
// send env instead of what it carried: one UpdateSchedule call, which replaces the whole
// schedule (time, target input, group id), as ScheduleJob would have created it. It is how a
// debounced job (pkg/dedup) is moved later with the newest args on every enqueue. It returns the
// schedule's name; an error wrapping ErrNotFound when there is no such schedule (it has fired
// and deleted itself, was cancelled, or was never created); and one wrapping ErrInvalid, with
// nothing sent, for what ScheduleJob would refuse (at not in the future, an envelope above
// MaxInputBytes).
//
// EventBridge Scheduler fires a schedule within the minute of its time ("between 1:00:00 and
// 1:00:59" for 1:00), so a schedule may already be firing when it is moved less than a minute
// before its time: a caller that must not lose an update stops moving a schedule that close
// to its time and creates a new one instead.
func (c *Client) RescheduleJob(ctx context.Context, env jobs.Envelope, at time.Time, groupID string) (string, error) {
	in, err := c.jobScheduleInput(env, at, groupID, false)
	if err != nil {
		return "", err
	}
	_, err = c.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name:                       in.Name,
		GroupName:                  in.GroupName,
		Description:                in.Description,
		ScheduleExpression:         in.ScheduleExpression,
		ScheduleExpressionTimezone: in.ScheduleExpressionTimezone,
		FlexibleTimeWindow:         in.FlexibleTimeWindow,
		ActionAfterCompletion:      in.ActionAfterCompletion,
		State:                      in.State,
		Target:                     in.Target,
	})
	if err != nil {
		if isNotFound(err) {
			return "", fmt.Errorf("%w: job schedule %s in group %s (fired, cancelled or never created)", ErrNotFound, *in.Name, c.group)
		}
		return "", fmt.Errorf("schedule: update schedule %s of job %s: %w", *in.Name, env.ID, err)
	}
	return *in.Name, nil
}

// RescheduleJobOn is RescheduleJob onto another queue of the stack, given by its ARN (see
// ForQueue): the schedule is replaced whole, its target included, so the job it sends goes to
// that queue. A debounced job of a kind routed to a named queue (pkg/dedup) is moved through it,
// as ScheduleJobOn created it.
func (c *Client) RescheduleJobOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, groupID string) (string, error) {
	cc, err := c.ForQueue(queueARN)
	if err != nil {
		return "", err
	}
	return cc.RescheduleJob(ctx, env, at, groupID)
}
