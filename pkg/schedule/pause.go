package schedule

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// Pause disables the recurring schedule name: no occurrence enqueues a job until [Client.Resume].
// Every other setting stays as it is (expression, time zone, start and end, flexible window,
// description, the target with its job template, dead-letter queue, retry policy and role, a KMS
// key): it reads the schedule (GetSchedule) and writes it back with only its state changed
// (UpdateSchedule, which replaces every field), whereas [Client.Upsert] with Disabled replaces
// the schedule with what a Recurring holds. A schedule already paused is not written. It returns
// the schedule as it now is. A schedule that does not exist gives an error wrapping
// [ErrNotFound]; one that is not this client's, [ErrNotOwned] (it is left alone).
func (c *Client) Pause(ctx context.Context, name string) (Recurring, error) {
	return c.setState(ctx, name, types.ScheduleStateDisabled)
}

// Resume enables the recurring schedule name again, keeping every other setting, as [Client.Pause]
// does. A schedule already enabled is not written.
func (c *Client) Resume(ctx context.Context, name string) (Recurring, error) {
	return c.setState(ctx, name, types.ScheduleStateEnabled)
}

func (c *Client) setState(ctx context.Context, name string, state types.ScheduleState) (Recurring, error) {
	if err := c.validateRecurringName(name); err != nil {
		return Recurring{}, err
	}
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
	disabled := state == types.ScheduleStateDisabled
	if r.Disabled == disabled {
		return r, nil
	}
	flex := out.FlexibleTimeWindow
	if flex == nil {
		flex = &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff} // required by UpdateSchedule
	}
	if _, err := c.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name:                       out.Name,
		GroupName:                  aws.String(c.group),
		ScheduleExpression:         out.ScheduleExpression,
		ScheduleExpressionTimezone: out.ScheduleExpressionTimezone,
		StartDate:                  out.StartDate,
		EndDate:                    out.EndDate,
		Description:                out.Description,
		FlexibleTimeWindow:         flex,
		ActionAfterCompletion:      out.ActionAfterCompletion,
		KmsKeyArn:                  out.KmsKeyArn,
		Target:                     out.Target,
		State:                      state,
	}); err != nil {
		if isNotFound(err) {
			return Recurring{}, fmt.Errorf("%w: recurring schedule %s in group %s", ErrNotFound, name, c.group)
		}
		return Recurring{}, fmt.Errorf("schedule: set recurring schedule %s %s: %w", name, state, err)
	}
	r.Disabled = disabled
	return r, nil
}
