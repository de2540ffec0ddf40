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
