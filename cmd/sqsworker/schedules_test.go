package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
		{"unknown command", []string{"schedules", "rm", "x", "--stack", "s"}, `unknown schedules command "rm"`},
		{"put without name", []string{"schedules", "put", "--expression", "rate(1 hour)", "--kind", "a.b", "--stack", "s"}, "schedules put needs NAME"},
		{"put without stack", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b"}, "schedules put needs --stack NAME"},
		{"put without expression", []string{"schedules", "put", "n", "--kind", "a.b", "--stack", "s"}, "schedules put needs --expression"},
		{"put without kind", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--stack", "s"}, "schedules put needs --kind"},
		{"put bad cron", []string{"schedules", "put", "n", "--expression", "cron(0 2 * * * *)", "--kind", "a.b", "--stack", "s"},
			"--expression \"cron(0 2 * * * *)\": cron day-of-week: one of day-of-month and day-of-week must be `?`"},
		{"put zero rate", []string{"schedules", "put", "n", "--expression", "rate(0 hours)", "--kind", "a.b", "--stack", "s"}, "rate value: want a positive integer"},
		{"put unknown expression", []string{"schedules", "put", "n", "--expression", "every day", "--kind", "a.b", "--stack", "s"}, `--expression "every day":`},
		{"put bad kind", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "A", "--stack", "s"}, `--kind "A": character 'A' at 0 is not allowed`},
		{"put args array", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--args", "[1]", "--stack", "s"}, "--args is a JSON array"},
		{"put args not JSON", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--args", "{", "--stack", "s"}, "--args is not valid JSON"},
		{"put bad timezone", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--timezone", "Mars/Olympus", "--stack", "s"},
			`--timezone "Mars/Olympus" is not an IANA time zone name`},
		{"put local timezone", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--timezone", "Local", "--stack", "s"}, `--timezone "Local"`},
		{"put bad start", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--start", "2027-01-01", "--stack", "s"},
			`--start "2027-01-01" is not an RFC 3339 time`},
		{"put end before start", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--start", "2027-01-02T00:00:00Z",
			"--end", "2027-01-01T00:00:00Z", "--stack", "s"}, "--start 2027-01-02T00:00:00Z is not before the end, 2027-01-01T00:00:00Z"},
		{"put flexible window seconds", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--flexible-window", "30s", "--stack", "s"},
			"--flexible-window 30s: want whole minutes between 1m and 24h"},
		{"put max attempts 0", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--max-attempts", "0", "--stack", "s"}, "--max-attempts 0: must be at least 1"},
		{"put empty group", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--group", "", "--stack", "s"}, "--group is empty"},
		{"put job schedule name", []string{"schedules", "put", "sqsworker-job-1", "--expression", "rate(1 hour)", "--kind", "a.b", "--stack", "s"}, "one-time schedules of delayed jobs"},
		{"put bad role", []string{"schedules", "put", "n", "--expression", "rate(1 hour)", "--kind", "a.b", "--scheduler-role", "myrole", "--stack", "s"},
			`--scheduler-role "myrole" is not an IAM role ARN`},
		{"list without stack", []string{"schedules", "list"}, "schedules list needs --stack NAME"},
		{"list argument", []string{"schedules", "list", "x", "--stack", "s"}, `list takes no arguments, got ["x"]`},
		{"list bad output", []string{"schedules", "list", "--stack", "s", "-o", "yaml"}, `--output "yaml": want table or json`},
		{"show without name", []string{"schedules", "show", "--stack", "s"}, "schedules show needs NAME, missing NAME"},
		{"show two names", []string{"schedules", "show", "a", "b", "--stack", "s"}, "schedules show takes NAME, got 2 arguments"},
		{"show without stack", []string{"schedules", "show", "a"}, "schedules show needs --stack NAME"},
		{"show bad name", []string{"schedules", "show", "a b", "--stack", "s"}, `NAME "a b": character ' ' at 1 is not allowed`},
		{"show long name", []string{"schedules", "show", strings.Repeat("a", 65), "--stack", "s"}, `NAME "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"… is 65 characters long, the limit is 64`},
		{"show job schedule", []string{"schedules", "show", "sqsworker-job-1", "--stack", "s"}, "one-time schedules of delayed jobs"},
		{"delete without name", []string{"schedules", "delete", "--stack", "s"}, "schedules delete needs NAME"},
		{"delete empty name", []string{"schedules", "delete", "", "--stack", "s"}, "NAME is empty: want 1-64 characters of letters, digits, '-', '_' and '.'"},
		{"delete unknown flag", []string{"schedules", "delete", "a", "--force", "--stack", "s"}, "unknown flag: --force"},
	})
}

func TestSchedulesHelpHasExamples(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"schedules", "--help"}, {"schedules", "put", "--help"}, {"schedules", "list", "--help"},
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
		{schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC"}, time.Time{}}, // no start, no creation time: unknown
		{schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC", Created: start.Add(-5 * time.Minute)}, start.Add(55 * time.Minute)},
		{schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "UTC", Disabled: true}, time.Time{}},
		{schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "UTC", End: now.Add(time.Hour)}, time.Time{}},
	}
	for _, tt := range tests {
		if got := nextRun(tt.r, now); !got.Equal(tt.want) {
			t.Errorf("nextRun(%+v) = %s, want %s", tt.r, got, tt.want)
		}
	}
}

// TestSchedulesPutGolden: put creates a recurring schedule, a second put of the same name
// replaces it (idempotent), and a schedule of the group that is not a job schedule of the stack's
// queue is left alone. What put wrote is what schedule.Client reads back, with the role given and
// the stack's scheduler DLQ.
func TestSchedulesPutGolden(t *testing.T) {
	t.Parallel()
	stack, sc, sch := newScheduleStack(t)
	ctx := context.Background()
	b := backend(t)
	client := sqs.NewFromConfig(b.Config)
	// The stack's scheduler DLQ, as the CDK stack has one: put names it for undeliverable firings.
	dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awslocal.SchedulerDLQName(stack))})
	if err != nil {
		t.Fatal(err)
	}
	dlqAttrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
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
	const role = "arn:aws:iam::123456789012:role/digest-scheduler"

	tr := newTranscript(t, stack)
	tr.must("schedules", "put", "daily-digest", "--expression", "cron(0 9 * * ? *)", "--kind", "email.digest",
		"--args", `{"list": "all"}`, "--max-attempts", "3", "--description", "the morning digest", "--scheduler-role", role)
	tr.must("schedules", "put", "daily-digest", "--expression", "cron(0 8 * * ? *)", "--timezone", "Europe/Paris", "--kind", "email.digest",
		"--args", `{"list": "all"}`, "--max-attempts", "3", "--description", "the morning digest", "--scheduler-role", role)
	tr.must("schedules", "put", "hourly-sync", "--expression", "rate(1 hour)", "--kind", "crm.sync", "--flexible-window", "5m",
		"--disabled", "-o", "json")
	tr.run("", "schedules", "put", "other-target", "--expression", "rate(1 hour)", "--kind", "crm.sync")
	tr.must("schedules", "list")
	tr.check("schedules_put")

	got, err := sc.Get(ctx, "daily-digest")
	if err != nil {
		t.Fatal(err)
	}
	if got.Expression != "cron(0 8 * * ? *)" || got.Timezone != "Europe/Paris" || got.Kind != "email.digest" ||
		string(got.Args) != `{"list":"all"}` || got.MaxAttempts != 3 || got.Description != "the morning digest" || got.Disabled {
		t.Errorf("daily-digest = %+v", got)
	}
	raw, err := sch.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("daily-digest"), GroupName: aws.String(sc.Group())})
	if err != nil {
		t.Fatal(err)
	}
	if r := aws.ToString(raw.Target.RoleArn); r != role {
		t.Errorf("target role = %s, want --scheduler-role %s", r, role)
	}
	if raw.Target.DeadLetterConfig == nil || aws.ToString(raw.Target.DeadLetterConfig.Arn) != dlqAttrs.Attributes["QueueArn"] {
		t.Errorf("target dead-letter config = %+v, want the stack's scheduler DLQ %s", raw.Target.DeadLetterConfig, dlqAttrs.Attributes["QueueArn"])
	}
	hourly, err := sc.Get(ctx, "hourly-sync")
	if err != nil || !hourly.Disabled || hourly.FlexibleWindow != 5*time.Minute {
		t.Errorf("hourly-sync = %+v, %v", hourly, err)
	}
	other, err := sch.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("other-target"), GroupName: aws.String(sc.Group())})
	if err != nil || aws.ToString(other.ScheduleExpression) != "rate(5 minutes)" {
		t.Errorf("other-target was changed: %+v, %v", other, err)
	}
}

// TestSchedulesPutFIFOAndEmulatorGaps: a FIFO stack's schedules need --group; --start and --end
// are refused by the embedded emulator (a known gap), which put explains.
func TestSchedulesPutFIFOAndEmulatorGaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := backend(t)
	fifo := newStack(t, "sched-fifo", true)
	if _, err := awslocal.ProvisionScheduleGroup(ctx, scheduler.NewFromConfig(b.Config), fifo); err != nil {
		t.Fatal(err)
	}
	cli := func(stack string, args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(ctx, append(args, "--stack", stack, "--endpoint", b.URL), &out, &errOut)
		return out.String() + errOut.String(), code
	}
	out, code := cli(fifo, "schedules", "put", "tick", "--expression", "rate(1 hour)", "--kind", "a.b")
	if code != exitUsage || !strings.Contains(out, "FIFO queue: every job needs --group") {
		t.Errorf("FIFO without --group: exit %d: %s", code, out)
	}
	if out, code := cli(fifo, "schedules", "put", "tick", "--expression", "rate(1 hour)", "--kind", "a.b", "--group", "g1"); code != exitOK ||
		!regexp.MustCompile(`(?m)^message group +g1$`).MatchString(out) {
		t.Errorf("FIFO with --group: exit %d: %s", code, out)
	}
	std, _, _ := newScheduleStack(t)
	out, code = cli(std, "schedules", "put", "later", "--expression", "rate(1 hour)", "--kind", "a.b", "--start", "2030-01-01T00:00:00Z")
	if code != exitError || !strings.Contains(out, "the embedded emulator cannot take start or end dates") {
		t.Errorf("--start on the emulator: exit %d: %s", code, out)
	}
}

// TestSchedulesPauseResumeAndArgsFile: schedules put reads --args from a file or standard input
// as enqueue does; pause and resume change the state and keep the args, description and attempt
// budget (a put --disabled would replace them).
func TestSchedulesPauseResumeAndArgsFile(t *testing.T) {
	t.Parallel()
	stack, _, _ := newScheduleStack(t)
	file := filepath.Join(t.TempDir(), "weekly.json")
	if err := os.WriteFile(file, []byte(`{"period":"week","to":["ops@example.com"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(t, stack)
	show := func(name string) scheduleJSON {
		t.Helper()
		var j scheduleJSON
		if out := tr.must("schedules", "show", name, "-o", "json"); json.Unmarshal([]byte(out), &j) != nil {
			t.Fatalf("schedules show %s: %s", name, out)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, j.Args); err != nil {
			t.Fatal(err)
		}
		j.Args = c.Bytes()
		return j
	}
	tr.must("schedules", "put", "weekly", "--expression", "rate(7 days)", "--kind", "report.build", "--args", "@"+file,
		"--description", "the weekly report", "--max-attempts", "3")
	if j := show("weekly"); string(j.Args) != `{"period":"week","to":["ops@example.com"]}` {
		t.Fatalf("--args @FILE: args %s", j.Args)
	}
	if _, code := tr.run(`{"period":"day"}`, "schedules", "put", "daily", "--expression", "rate(1 day)", "--kind", "report.build", "--args", "-"); code != 0 {
		t.Fatalf("--args -: exit %d\n%s", code, tr.buf.String())
	}
	if j := show("daily"); string(j.Args) != `{"period":"day"}` {
		t.Fatalf("--args -: args %s", j.Args)
	}
	if _, code := tr.run("", "schedules", "put", "x", "--expression", "rate(1 day)", "--kind", "a.b", "--args", "@"+file+".missing"); code != exitUsage {
		t.Errorf("--args @missing: exit %d, want 2", code)
	}

	tr.must("schedules", "pause", "weekly")
	if j := show("weekly"); j.State != "disabled" || string(j.Args) != `{"period":"week","to":["ops@example.com"]}` ||
		j.Description != "the weekly report" || j.MaxAttempts != 3 || j.Expression != "rate(7 days)" {
		t.Errorf("after pause: %+v", j)
	}
	tr.must("schedules", "pause", "weekly") // already paused: nothing changes
	tr.must("schedules", "resume", "weekly", "-o", "json")
	if j := show("weekly"); j.State != "enabled" || string(j.Args) != `{"period":"week","to":["ops@example.com"]}` || j.MaxAttempts != 3 {
		t.Errorf("after resume: %+v", j)
	}
	if _, code := tr.run("", "schedules", "pause", "nope"); code != exitError || !strings.Contains(tr.buf.String(), `no recurring schedule "nope"`) {
		t.Errorf("pause of a missing schedule: exit %d\n%s", code, tr.buf.String())
	}
	if _, code := tr.run("", "schedules", "resume", "bad name!"); code != exitUsage {
		t.Errorf("resume of a bad name: exit %d, want 2", code)
	}
}
