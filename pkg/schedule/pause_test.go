package schedule_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// TestPauseResumeKeepEverythingElse: Pause and Resume change a recurring schedule's state and
// nothing else (its args, description, flexible window, target with its dead-letter queue and
// retry policy), unlike Upsert with Disabled; a schedule that is not the client's is left alone.
func TestPauseResumeKeepEverythingElse(t *testing.T) {
	api := kumoScheduler(t)
	ctx := context.Background()
	queue := "arn:aws:sqs:us-east-1:123456789012:" + awslocal.UniqueName("pause")
	c := newClient(t, api, func(c *schedule.Config) {
		c.QueueARN, c.Now = queue, time.Now
		c.DeadLetterARN = "arn:aws:sqs:us-east-1:123456789012:sched-dlq"
	})
	name := awslocal.UniqueName("nightly")
	r := nightly(name)
	r.FlexibleWindow, r.MaxAttempts, r.Description = 30*time.Minute, 4, "nightly report"
	if err := c.Upsert(ctx, r); err != nil {
		t.Fatal(err)
	}
	raw := func() *scheduler.GetScheduleOutput {
		t.Helper()
		out, err := api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(c.Group())})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := raw()
	paused, err := c.Pause(ctx, name)
	if err != nil || !paused.Disabled {
		t.Fatalf("Pause = %+v, %v", paused, err)
	}
	after := raw()
	if after.State != schedtypes.ScheduleStateDisabled {
		t.Fatalf("state after Pause = %s", after.State)
	}
	for _, o := range []*scheduler.GetScheduleOutput{before, after} {
		o.State, o.LastModificationDate, o.ResultMetadata = "", nil, before.ResultMetadata
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("Pause changed more than the state:\nbefore %+v\nafter  %+v", before, after)
	}
	got, err := c.Get(ctx, name)
	if err != nil || !got.Disabled || string(got.Args) != string(r.Args) || got.Description != r.Description || got.FlexibleWindow != r.FlexibleWindow || got.MaxAttempts != 4 {
		t.Errorf("Get after Pause = %+v, %v", got, err)
	}
	if again, err := c.Pause(ctx, name); err != nil || !again.Disabled {
		t.Errorf("Pause again = %+v, %v", again, err)
	}
	resumed, err := c.Resume(ctx, name)
	if err != nil || resumed.Disabled {
		t.Fatalf("Resume = %+v, %v", resumed, err)
	}
	if s := raw(); s.State != schedtypes.ScheduleStateEnabled || aws.ToString(s.Target.Input) != aws.ToString(before.Target.Input) {
		t.Errorf("after Resume: state %s, input %s", s.State, aws.ToString(s.Target.Input))
	}

	if _, err := c.Pause(ctx, "missing-one"); !errors.Is(err, schedule.ErrNotFound) || errors.Is(err, schedule.ErrNotOwned) {
		t.Errorf("Pause of a missing schedule = %v, want ErrNotFound", err)
	}
	other := awslocal.UniqueName("other")
	if _, err := api.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(other), GroupName: aws.String(c.Group()), ScheduleExpression: aws.String("rate(5 minutes)"),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target:             &schedtypes.Target{Arn: aws.String("arn:aws:sqs:us-east-1:123456789012:elsewhere"), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"), Input: aws.String(`{}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, other); !errors.Is(err, schedule.ErrNotOwned) {
		t.Errorf("Pause of another producer's schedule = %v, want ErrNotOwned", err)
	}
	out, err := api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(other), GroupName: aws.String(c.Group())})
	if err != nil || out.State == schedtypes.ScheduleStateDisabled {
		t.Errorf("another producer's schedule: state %s, %v; want it left alone", out.State, err)
	}
}
