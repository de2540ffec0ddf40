package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// A job delayed beyond SQS's 15 minutes becomes a one-time schedule that deletes itself after
// firing; scheduling it again is a no-op, and cancelling it twice is fine.
func ExampleClient_ScheduleJob() {
	b, err := awslocal.Shared() // the embedded emulator; scheduler.NewFromConfig(awsCfg) on AWS
	if err != nil {
		panic(err)
	}
	client, err := schedule.NewClient(schedule.Config{
		Scheduler: scheduler.NewFromConfig(b.Config),
		QueueARN:  "arn:aws:sqs:us-east-1:123456789012:" + awslocal.UniqueName("jobs"),
		RoleARN:   "arn:aws:iam::123456789012:role/sqsworker-scheduler",
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	env := jobs.Envelope{V: 1, ID: "01JD8ZQ3K5X1V2W3Y4Z5A6B7C8", Kind: "email.send", Args: json.RawMessage(`{"to":"a@b.c"}`)}
	name, err := client.ScheduleJob(ctx, env, time.Now().Add(48*time.Hour), "")
	fmt.Println(name, err)
	name, err = client.ScheduleJob(ctx, env, time.Now().Add(48*time.Hour), "")
	fmt.Println(name, err)
	fmt.Println(client.CancelJob(ctx, env.ID), client.CancelJob(ctx, env.ID))
	// Output:
	// sqsworker-job-01JD8ZQ3K5X1V2W3Y4Z5A6B7C8 <nil>
	// sqsworker-job-01JD8ZQ3K5X1V2W3Y4Z5A6B7C8 <nil>
	// <nil> <nil>
}

// A recurring schedule enqueues a job on every occurrence; each occurrence is a distinct job
// whose idempotency key holds the scheduled time.
func ExampleClient_Upsert() {
	b, err := awslocal.Shared()
	if err != nil {
		panic(err)
	}
	client, err := schedule.NewClient(schedule.Config{
		Scheduler: scheduler.NewFromConfig(b.Config),
		QueueARN:  "arn:aws:sqs:us-east-1:123456789012:" + awslocal.UniqueName("jobs"),
		RoleARN:   "arn:aws:iam::123456789012:role/sqsworker-scheduler",
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	name := awslocal.UniqueName("nightly-report")
	err = client.Upsert(ctx, schedule.Recurring{
		Name:       name,
		Expression: "cron(0 3 * * ? *)", // 03:00 every day
		Timezone:   "Europe/Paris",
		Kind:       "reports.nightly",
		Args:       json.RawMessage(`{"format":"pdf"}`),
	})
	if err != nil {
		panic(err)
	}
	r, err := client.Get(ctx, name)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Expression, r.Timezone, r.Kind, string(r.Args))
	fmt.Println(client.Delete(ctx, name))
	// Output:
	// cron(0 3 * * ? *) Europe/Paris reports.nightly {"format":"pdf"}
	// <nil>
}

// ExpandInput is what Scheduler does to a target's input when it fires: the job template of
// a recurring schedule becomes a job envelope.
func ExampleExpandInput() {
	template := `{"v":1,"id":"<aws.scheduler.execution-id>","kind":"reports.nightly","args":{},` +
		`"key":"nightly@<aws.scheduler.scheduled-time>","enqueued_at":"<aws.scheduler.scheduled-time>",` +
		`"meta":{"schedule":"nightly"}}`
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	body := schedule.ExpandInput(template, "arn:aws:scheduler:us-east-1:123456789012:schedule/default/nightly", at, "d32c5kddcf5bb8c3", 1)
	env, err := jobs.ParseEnvelope(body)
	fmt.Println(env.ID, env.Key, err)
	// Output:
	// d32c5kddcf5bb8c3 nightly@2026-11-30T02:00:00Z <nil>
}
