package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// newScheduleStack provisions a stack with its schedule group and returns a schedule client
// for it.
func newScheduleStack(t *testing.T) (string, *schedule.Client, *scheduler.Client) {
	t.Helper()
	stack := newStack(t, "sched", false)
	b := backend(t)
	ctx := context.Background()
	sch := scheduler.NewFromConfig(b.Config)
	group, err := awslocal.ProvisionScheduleGroup(ctx, sch, stack)
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(b.Config)
	u, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := schedule.NewClient(schedule.Config{Scheduler: sch, Group: group,
		QueueARN: attrs.Attributes["QueueArn"], RoleARN: awslocal.SchedulerRoleARN(stack)})
	if err != nil {
		t.Fatal(err)
	}
	return stack, sc, sch
}

func TestSchedulesGolden(t *testing.T) {
	t.Parallel()
	stack, sc, sch := newScheduleStack(t)
	ctx := context.Background()
	for _, r := range []schedule.Recurring{
		{Name: "daily-digest", Expression: "cron(0 9 * * ? *)", Kind: "email.digest", Args: json.RawMessage(`{"list": "all"}`),
			MaxAttempts: 3, Description: "the morning digest"},
		// (The emulator rejects StartDate and EndDate: TestNextRun covers them.)
		{Name: "hourly-sync", Expression: "rate(1 hour)", Kind: "crm.sync", FlexibleWindow: 5 * time.Minute},
		{Name: "paused-report", Expression: "cron(0 12 1 * ? *)", Timezone: "America/New_York", Kind: "report.build",
			Disabled: true},
	} {
		if err := sc.Upsert(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A delayed job's one-time schedule, and another producer's schedule in the group: neither
	// is listed.
	env := jobs.Envelope{V: 1, ID: "job-later", Kind: "email.send", Args: json.RawMessage(`{}`), EnqueuedAt: time.Now()}
	if _, err := sc.ScheduleJob(ctx, env, time.Now().Add(time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := sch.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String("other-target"), GroupName: aws.String(sc.Group()), ScheduleExpression: aws.String("rate(5 minutes)"),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target: &schedtypes.Target{Arn: aws.String("arn:aws:sqs:us-east-1:000000000000:elsewhere"),
			RoleArn: aws.String(awslocal.SchedulerRoleARN(stack)), Input: aws.String(`{}`)},
	}); err != nil {
		t.Fatal(err)
	}

	tr := newTranscript(t, stack)
	tr.must("schedules", "list")
	out := tr.must("schedules", "list", "--output", "json")
	var doc schedulesListJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Schedules) != 3 {
		t.Fatalf("schedules list --output json: %v, %d schedules, want 3", err, len(doc.Schedules))
	}
	tr.must("schedules", "show", "daily-digest")
	tr.must("schedules", "show", "hourly-sync", "-o", "json")
	tr.must("schedules", "show", "paused-report")
	tr.run("", "schedules", "show", "nope")
	tr.run("", "schedules", "show", "other-target")
	tr.must("schedules", "delete", "hourly-sync")
	tr.run("", "schedules", "delete", "hourly-sync")
	tr.run("", "schedules", "delete", "other-target")
	tr.must("schedules", "list")
	tr.check("schedules")

	if _, err := sc.Get(ctx, "hourly-sync"); err == nil {
		t.Error("hourly-sync still exists after delete")
	}
	if _, err := sch.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("other-target"), GroupName: aws.String(sc.Group())}); err != nil {
		t.Errorf("other-target was deleted: %v", err)
	}
}

// TestSchedulesErrors: a stack without its schedule group, and one without schedules.
func TestSchedulesErrors(t *testing.T) {
	t.Parallel()
	noGroup := newStack(t, "nogroup", false)
	tr := newTranscript(t, noGroup)
	tr.run("", "schedules", "list")
	missing := fmt.Sprintf("cli-missing-%03d", stackSeq.Add(1))
	tr2 := newTranscript(t, missing)
	tr2.run("", "schedules", "show", "daily")
	empty, _, _ := newScheduleStack(t)
	tr3 := newTranscript(t, empty)
	tr3.must("schedules", "list")
	tr3.must("schedules", "list", "-o", "json")
	tr.buf.WriteString(tr2.norm.apply(tr2.buf.String()))
	tr.buf.WriteString(tr3.norm.apply(tr3.buf.String()))
	tr.check("schedules_errors")
}

func TestSchedulesUsageErrors(t *testing.T) {
	t.Parallel()
	checkUsageErrors(t, []usageCase{
		{"without command", []string{"schedules", "--stack", "s"}, "schedules needs a command: list, show or delete"},
		{"unknown command", []string{"schedules", "rm", "x", "--stack", "s"}, `unknown schedules command "rm"`},
		{"list without stack", []string{"schedules", "list"}, "schedules list needs --stack NAME"},
		{"list argument", []string{"schedules", "list", "x", "--stack", "s"}, `list takes no arguments, got ["x"]`},
		{"list bad output", []string{"schedules", "list", "--stack", "s", "-o", "yaml"}, `--output "yaml": want table or json`},
		{"show without name", []string{"schedules", "show", "--stack", "s"}, "schedules show needs NAME, missing NAME"},
		{"show two names", []string{"schedules", "show", "a", "b", "--stack", "s"}, "schedules show takes NAME, got 2 arguments"},
		{"show without stack", []string{"schedules", "show", "a"}, "schedules show needs --stack NAME"},
		{"show bad name", []string{"schedules", "show", "a b", "--stack", "s"}, `NAME "a b": character ' ' at 1 is not allowed`},
		{"show long name", []string{"schedules", "show", strings.Repeat("a", 65), "--stack", "s"}, "a schedule name is 1-64 characters"},
		{"show job schedule", []string{"schedules", "show", "sqsworker-job-1", "--stack", "s"}, "one-time schedules of delayed jobs"},
		{"delete without name", []string{"schedules", "delete", "--stack", "s"}, "schedules delete needs NAME"},
		{"delete empty name", []string{"schedules", "delete", "", "--stack", "s"}, `NAME "": a schedule name is 1-64 characters`},
		{"delete unknown flag", []string{"schedules", "delete", "a", "--force", "--stack", "s"}, "unknown flag: --force"},
	})
}

func TestSchedulesHelpHasExamples(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"schedules", "--help"}, {"schedules", "list", "--help"},
		{"schedules", "show", "--help"}, {"schedules", "delete", "--help"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		_, examples, ok := strings.Cut(out.String(), "Examples:\n")
		if !ok || !strings.Contains(examples, "sqsworker "+strings.Join(args[:len(args)-1], " ")) {
			t.Errorf("%v: help has no examples:\n%s", args, out.String())
		}
	}
}

func TestNextRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		r    schedule.Recurring
		want time.Time
	}{
		{schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "UTC"}, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)},
		{schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "Europe/Paris"}, time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
		{schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC", Start: start}, start.Add(time.Hour)},
		{schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC", Start: start.Add(48 * time.Hour)}, start.Add(48 * time.Hour)},
		{schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC"}, time.Time{}}, // counts from its creation
		{schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "UTC", Disabled: true}, time.Time{}},
		{schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "UTC", End: now.Add(time.Hour)}, time.Time{}},
	}
	for _, tt := range tests {
		if got := nextRun(tt.r, now); !got.Equal(tt.want) {
			t.Errorf("nextRun(%+v) = %s, want %s", tt.r, got, tt.want)
		}
	}
}
