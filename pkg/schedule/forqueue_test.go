package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/schedule"
)

func TestScheduleJobOnTargetsAnotherQueueOfTheStack(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, func(c *schedule.Config) { c.DeadLetterARN = testDLQ })
	ctx := context.Background()
	at := testNow.Add(2 * time.Hour)
	const critical = "arn:aws:sqs:us-east-1:123456789012:jobs-critical"
	if _, err := c.ScheduleJobOn(ctx, critical, testEnvelope("01JD0000000000000000000001"), at, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ScheduleJob(ctx, testEnvelope("01JD0000000000000000000002"), at, ""); err != nil {
		t.Fatal(err)
	}
	if len(fake.creates) != 2 {
		t.Fatalf("%d CreateSchedule calls, want 2", len(fake.creates))
	}
	on, plain := fake.creates[0].Target, fake.creates[1].Target
	if *on.Arn != critical || *on.RoleArn != testRole || *on.DeadLetterConfig.Arn != testDLQ {
		t.Errorf("ScheduleJobOn's target = %s (role %s, DLQ %s), want the critical queue with the client's role and DLQ", *on.Arn, *on.RoleArn, *on.DeadLetterConfig.Arn)
	}
	if *plain.Arn != testQueue {
		t.Errorf("ScheduleJob after ScheduleJobOn targets %s, want the client's own queue %s", *plain.Arn, testQueue)
	}
	// A FIFO target needs a group, whatever the client's own queue is.
	if _, err := c.ScheduleJobOn(ctx, testFIFOQueue, testEnvelope("01JD0000000000000000000003"), at, ""); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("ScheduleJobOn a FIFO queue without a group = %v, want ErrInvalid", err)
	}
	if _, err := c.ForQueue("https://sqs.us-east-1.amazonaws.com/123456789012/jobs"); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("ForQueue(a URL) = %v, want ErrInvalid", err)
	}
}

// TestRescheduleJobOnKeepsTheQueue: a schedule ScheduleJobOn made for another queue is moved by
// RescheduleJobOn with its target still that queue (UpdateSchedule replaces the target whole:
// RescheduleJob would send the job to the client's own queue), the client of that queue reads it
// back at its new time, and a bad ARN is refused before any call.
func TestRescheduleJobOnKeepsTheQueue(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, func(c *schedule.Config) { c.DeadLetterARN = testDLQ })
	ctx := context.Background()
	const critical = "arn:aws:sqs:us-east-1:123456789012:jobs-critical"
	env := testEnvelope("01JD0000000000000000000001")
	name, err := c.ScheduleJobOn(ctx, critical, env, testNow.Add(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := c.RescheduleJobOn(ctx, critical, env, testNow.Add(2*time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	if moved != name {
		t.Fatalf("RescheduleJobOn returned %q, want the schedule's name %q", moved, name)
	}
	if _, updates, _ := fake.calls(); updates != 1 {
		t.Fatalf("%d UpdateSchedule calls, want 1", updates)
	}
	if up := fake.updates[0].Target; *up.Arn != critical || *up.RoleArn != testRole || *up.DeadLetterConfig.Arn != testDLQ {
		t.Errorf("the moved schedule targets %s (role %s, DLQ %s), want the critical queue with the client's role and DLQ", *up.Arn, *up.RoleArn, *up.DeadLetterConfig.Arn)
	}
	on, err := c.ForQueue(critical)
	if err != nil {
		t.Fatal(err)
	}
	js, err := on.GetJob(ctx, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !js.RunAt.Equal(testNow.Add(2 * time.Hour)) {
		t.Errorf("the critical queue's client reads the job at %s, want %s", js.RunAt, testNow.Add(2*time.Hour))
	}
	if _, err := c.GetJob(ctx, env.ID); !errors.Is(err, schedule.ErrNotOwned) {
		t.Errorf("the default queue's client reads the moved job: %v, want ErrNotOwned (it targets another queue)", err)
	}
	if _, err := c.RescheduleJobOn(ctx, "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-critical", env, testNow.Add(3*time.Hour), ""); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("RescheduleJobOn(a URL) = %v, want ErrInvalid", err)
	}
	if _, updates, _ := fake.calls(); updates != 1 {
		t.Errorf("%d UpdateSchedule calls; the refused one must not call", updates)
	}
}
