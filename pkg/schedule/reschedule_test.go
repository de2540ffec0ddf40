package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// TestRescheduleJob moves a job's one-time schedule: the same name, the new time and the new
// input, everything else as ScheduleJob made it; a schedule that is gone is ErrNotFound, and a
// time in the past is refused before any call.
func TestRescheduleJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := newFake()
	c := newClient(t, fake, nil)
	env := testEnvelope("01JD0000000000000000000000")
	name, err := c.ScheduleJob(ctx, env, testNow.Add(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	env.Args = json.RawMessage(`{"to":"z@b.c"}`)
	moved, err := c.RescheduleJob(ctx, env, testNow.Add(2*time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	if moved != name {
		t.Fatalf("RescheduleJob returned %q, want the schedule's name %q", moved, name)
	}
	js, err := c.GetJob(ctx, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !js.RunAt.Equal(testNow.Add(2*time.Hour)) || string(js.Envelope.Args) != `{"to":"z@b.c"}` {
		t.Fatalf("after RescheduleJob: run at %s, args %s; want %s and the new args", js.RunAt, js.Envelope.Args, testNow.Add(2*time.Hour))
	}
	creates, updates, _ := fake.calls()
	if creates != 1 || updates != 1 {
		t.Fatalf("calls: %d creates, %d updates; want 1 and 1", creates, updates)
	}
	up := fake.updates[0]
	if up.ActionAfterCompletion != "DELETE" || aws.ToString(up.ScheduleExpressionTimezone) != "UTC" || up.FlexibleTimeWindow == nil || up.Target == nil {
		t.Fatalf("UpdateSchedule lost what ScheduleJob sets: %+v", up)
	}

	if _, err := c.RescheduleJob(ctx, testEnvelope("01JDGONE000000000000000000"), testNow.Add(time.Hour), ""); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("RescheduleJob of a missing schedule: %v, want ErrNotFound", err)
	}
	if _, err := c.RescheduleJob(ctx, env, testNow.Add(-time.Second), ""); !errors.Is(err, schedule.ErrInvalid) {
		t.Fatalf("RescheduleJob into the past: %v, want ErrInvalid", err)
	}
	if _, updates, _ := fake.calls(); updates != 2 {
		t.Fatalf("%d UpdateSchedule calls; the refused one must not call", updates)
	}
}
