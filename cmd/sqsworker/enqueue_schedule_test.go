package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// newUpStack creates a stack with `sqsworker up` on the emulator (queues, table and schedule
// group), with a fixed-length name as newStack's.
func newUpStack(t *testing.T, base string, fifo bool) string {
	t.Helper()
	name := fmt.Sprintf("cli-%s-%03d", base, stackSeq.Add(1))
	args := []string{"up", "--stack", name, "--endpoint", backend(t).URL}
	if fifo {
		args = append(args, "--fifo")
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("sqsworker %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return name
}

// queueARN reads a queue's ARN from the emulator.
func queueARN(t *testing.T, name string) (url, arn string) {
	t.Helper()
	client := sqs.NewFromConfig(backend(t).Config)
	ctx := context.Background()
	u, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(u.QueueUrl), attrs.Attributes["QueueArn"]
}

// queueCounts returns a queue's visible and delayed message counts.
func queueCounts(t *testing.T, url string) (visible, delayed string) {
	t.Helper()
	out, err := sqs.NewFromConfig(backend(t).Config).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesDelayed"]
}

// groupSchedules returns the names of the schedules in group, filtering by group here: the
// emulator's ListSchedules ignores the filter, and returns at most 100 schedules of the whole
// process (in no order, without a page token), so a listing that size may be incomplete.
func groupSchedules(t *testing.T, group string) []string {
	t.Helper()
	client := scheduler.NewFromConfig(backend(t).Config)
	var names []string
	var token *string
	for {
		page, err := client.ListSchedules(context.Background(), &scheduler.ListSchedulesInput{GroupName: aws.String(group), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Schedules) >= 100 && page.NextToken == nil {
			t.Fatalf("ListSchedules returned %d schedules and no page token: the emulator's cap, the listing may miss some", len(page.Schedules))
		}
		for _, s := range page.Schedules {
			if aws.ToString(s.GroupName) == group {
				names = append(names, aws.ToString(s.Name))
			}
		}
		if aws.ToString(page.NextToken) == "" {
			return names
		}
		token = page.NextToken
	}
}

// getSchedule reads one schedule of a group.
func getSchedule(t *testing.T, group, name string) *scheduler.GetScheduleOutput {
	t.Helper()
	s, err := scheduler.NewFromConfig(backend(t).Config).GetSchedule(context.Background(),
		&scheduler.GetScheduleInput{GroupName: aws.String(group), Name: aws.String(name)})
	if err != nil {
		t.Fatalf("get schedule %s in group %s: %v", name, group, err)
	}
	return s
}

// checkAtExpression checks that a one-time schedule's expression is due within a minute of want.
func checkAtExpression(t *testing.T, s *scheduler.GetScheduleOutput, want time.Time) {
	t.Helper()
	expr := aws.ToString(s.ScheduleExpression)
	at, err := time.Parse("at(2006-01-02T15:04:05)", expr)
	if err != nil || aws.ToString(s.ScheduleExpressionTimezone) != "UTC" {
		t.Fatalf("schedule expression %q (%v) in time zone %q, want at(…) in UTC", expr, err, aws.ToString(s.ScheduleExpressionTimezone))
	}
	if d := at.Sub(want).Abs(); d > time.Minute {
		t.Errorf("schedule is due at %s, %v away from %s", at, d, want.UTC())
	}
	if s.ActionAfterCompletion != schedtypes.ActionAfterCompletionDelete {
		t.Errorf("ActionAfterCompletion = %q, want DELETE", s.ActionAfterCompletion)
	}
}

// checkScheduledEnvelope checks that a schedule's target input is the envelope of the job.
func checkScheduledEnvelope(t *testing.T, s *scheduler.GetScheduleOutput, id, kind, args string) {
	t.Helper()
	env, err := jobs.ParseEnvelope(aws.ToString(s.Target.Input))
	if err != nil {
		t.Fatalf("schedule input %s: %v", aws.ToString(s.Target.Input), err)
	}
	if env.ID != id || env.Kind != kind || string(env.Args) != args {
		t.Errorf("scheduled envelope = id %s kind %s args %s, want %s %s %s", env.ID, env.Kind, env.Args, id, kind, args)
	}
}

// TestEnqueueDelayThroughScheduler: on a standard stack made by `up`, --delay 2h creates one
// one-time schedule carrying the job's envelope to the queue with the given role, sends nothing
// to the queue and records the job as scheduled; --delay 10m still uses DelaySeconds.
func TestEnqueueDelayThroughScheduler(t *testing.T) {
	t.Parallel()
	stack := newUpStack(t, "delay", false)
	const role = "arn:aws:iam::123456789012:role/service-role/myapp-scheduler"
	tr := newTranscript(t, stack)
	start := time.Now()
	out := tr.must("enqueue", "invoice.render", `{"order":42}`, "--delay", "2h", "--scheduler-role", role)
	id := strings.Fields(strings.Split(out, "\n")[1])[2]
	tr.must("status", id)
	out2 := tr.must("enqueue", "email.send", `{"to":"a@b.c"}`, "--delay", "10m", "-o", "json")
	// A job SQS would take but the scheduler would not: its envelope exceeds the 256 KB input limit.
	big := `{"blob":"` + strings.Repeat("x", 300*1024) + `"}`
	tr.run(big, "enqueue", "blob.store", "-", "--delay", "2h")
	tr.check("enqueue_scheduled")

	group := awslocal.ScheduleGroupName(stack)
	names := groupSchedules(t, group)
	if len(names) != 1 || names[0] != schedule.ScheduleName(id) {
		t.Fatalf("schedules in group %s = %q, want exactly [%s]", group, names, schedule.ScheduleName(id))
	}
	s := getSchedule(t, group, names[0])
	url, arn := queueARN(t, awslocal.QueueName(stack, false))
	if got := aws.ToString(s.Target.Arn); got != arn {
		t.Errorf("target = %s, want the queue %s", got, arn)
	}
	if got := aws.ToString(s.Target.RoleArn); got != role {
		t.Errorf("target role = %s, want %s", got, role)
	}
	if s.Target.DeadLetterConfig != nil {
		t.Errorf("DeadLetterConfig = %s, want none: the stack has no scheduler DLQ", aws.ToString(s.Target.DeadLetterConfig.Arn))
	}
	checkAtExpression(t, s, start.Add(2*time.Hour))
	checkScheduledEnvelope(t, s, id, "invoice.render", `{"order":42}`)

	// The 10m job made no schedule.
	var sqsDoc enqueueJSON
	if err := json.Unmarshal([]byte(out2), &sqsDoc); err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.NewFromConfig(backend(t).Config).GetSchedule(context.Background(), &scheduler.GetScheduleInput{
		GroupName: aws.String(group), Name: aws.String(schedule.ScheduleName(sqsDoc.JobID))}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("schedule of the 10m job: err = %v, want ResourceNotFoundException", err)
	}
	// Nothing of the 2h job on the queue; the 10m job waits there, delayed by SQS.
	if visible, delayed := queueCounts(t, url); visible != "0" || delayed != "1" {
		t.Errorf("queue holds %s visible and %s delayed messages, want 0 and 1 (the 10m job)", visible, delayed)
	}
	if sqsDoc.MessageID == "" || sqsDoc.Schedule != "" || !time.Time(sqsDoc.ScheduledAt).IsZero() {
		t.Errorf("--delay 10m: %+v, want a message id and no schedule", sqsDoc)
	}
}

// TestEnqueueFIFODelayThroughScheduler: on a FIFO stack, --group g --delay 30s goes through a
// one-time schedule with the message group, the local role and the stack's scheduler DLQ; the
// local dispatcher then fires it into the FIFO queue.
func TestEnqueueFIFODelayThroughScheduler(t *testing.T) {
	t.Parallel()
	stack := newUpStack(t, "fdelay", true)
	ctx := context.Background()
	client := sqs.NewFromConfig(backend(t).Config)
	if _, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(schedulerDLQName(stack))}); err != nil {
		t.Fatal(err)
	}
	_, dlqARN := queueARN(t, schedulerDLQName(stack))
	tr := newTranscript(t, stack)
	start := time.Now()
	out := tr.must("enqueue", "report.build", `{"month":"2026-11"}`, "--group", "g", "--delay", "30s", "-o", "json")
	var doc enqueueJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	tr.must("status", doc.JobID, "-o", "json")
	tr.check("enqueue_fifo_scheduled")

	group := awslocal.ScheduleGroupName(stack)
	if doc.Schedule != schedule.ScheduleName(doc.JobID) || doc.ScheduleGroup != group || doc.MessageID != "" || !doc.Recorded {
		t.Errorf("enqueue --output json = %+v", doc)
	}
	if d := time.Time(doc.ScheduledAt).Sub(start.Add(30 * time.Second)); d < 0 || d > time.Minute {
		t.Errorf("scheduled_at %s is not 30s after %s", time.Time(doc.ScheduledAt), start)
	}
	names := groupSchedules(t, group)
	if len(names) != 1 || names[0] != doc.Schedule {
		t.Fatalf("schedules in group %s = %q, want exactly [%s]", group, names, doc.Schedule)
	}
	s := getSchedule(t, group, doc.Schedule)
	url, arn := queueARN(t, awslocal.QueueName(stack, true))
	switch {
	case aws.ToString(s.Target.Arn) != arn:
		t.Errorf("target = %s, want the queue %s", aws.ToString(s.Target.Arn), arn)
	case aws.ToString(s.Target.RoleArn) != awslocal.SchedulerRoleARN(stack):
		t.Errorf("target role = %s, want the local role %s", aws.ToString(s.Target.RoleArn), awslocal.SchedulerRoleARN(stack))
	case s.Target.SqsParameters == nil || aws.ToString(s.Target.SqsParameters.MessageGroupId) != "g":
		t.Errorf("target SqsParameters = %+v, want message group g", s.Target.SqsParameters)
	case s.Target.DeadLetterConfig == nil || aws.ToString(s.Target.DeadLetterConfig.Arn) != dlqARN:
		t.Errorf("target DeadLetterConfig = %+v, want %s", s.Target.DeadLetterConfig, dlqARN)
	}
	checkAtExpression(t, s, start.Add(30*time.Second))
	checkScheduledEnvelope(t, s, doc.JobID, "report.build", `{"month":"2026-11"}`)
	if visible, delayed := queueCounts(t, url); visible != "0" || delayed != "0" {
		t.Errorf("queue holds %s visible and %s delayed messages before the schedule fires, want none", visible, delayed)
	}

	// Fire it as the local dispatcher does, on a clock two minutes ahead, and wait for the job.
	sch := scheduler.NewFromConfig(backend(t).Config)
	disp, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: sch, SQS: client, Group: group,
		Now: func() time.Time { return time.Now().Add(2 * time.Minute) }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := disp.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("dispatcher fired %d schedules (%v), want 1", n, err)
	}
	msg := receiveOne(t, url, 30*time.Second)
	// (The emulator does not report the MessageGroupId attribute; it refuses a FIFO send without one.)
	env, err := jobs.ParseEnvelope(aws.ToString(msg.Body))
	if err != nil || env.ID != doc.JobID || env.Kind != "report.build" {
		t.Errorf("fired message: envelope %+v (%v), want job %s", env, err, doc.JobID)
	}
}

// receiveOne waits up to timeout for a message on the queue, polling with long polls.
func receiveOne(t *testing.T, url string, timeout time.Duration) sqstypes.Message {
	t.Helper()
	client := sqs.NewFromConfig(backend(t).Config)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 1, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 1 {
			return out.Messages[0]
		}
	}
	t.Fatalf("no message on %s within %v", url, timeout)
	return sqstypes.Message{}
}

// TestEnqueueBadSchedulerRole: a malformed --scheduler-role is a usage error found before any
// AWS call (the endpoint listens nowhere: a call would fail with exit code 1).
func TestEnqueueBadSchedulerRole(t *testing.T) {
	t.Parallel()
	tests := []struct{ role, want string }{
		{"myapp-scheduler", `--scheduler-role "myapp-scheduler" is not an IAM role ARN: pass the role's ARN, not its name`},
		{"arn:aws:iam::12345:role/x", `account "12345" is not 12 digits`},
		{"arn:aws:iam::123456789012:user/x", `resource "user/x" is not role/<name>`},
		{"arn:aws:sqs:us-east-1:123456789012:q", `service "sqs" is not iam`},
		{"", "it is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"enqueue", "email.send", "{}", "--delay", "2h", "--scheduler-role", tt.role,
				"--stack", "s", "--endpoint", "http://127.0.0.1:1"}, &out, &errOut)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d (stderr: %s)", code, exitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) || !strings.Contains(errOut.String(), roleARNExample) {
				t.Errorf("stderr = %q, want it to contain %q and the shape %s", errOut.String(), tt.want, roleARNExample)
			}
		})
	}
}

// TestEnqueueNoSchedulerRoleOnAWS: on AWS, a delay that needs the scheduler, without the flag or
// the environment variable, is a usage error saying where the role is; no call is made (the
// credentials are fake and the queue is never looked up). Not parallel: it clears environment
// variables.
func TestEnqueueNoSchedulerRoleOnAWS(t *testing.T) {
	t.Setenv(schedulerRoleEnv, "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"enqueue", "email.send", "{}", "--delay", "16m", "--stack", "myapp", "--region", "us-east-1"}, &out, &errOut)
	if code != exitUsage {
		t.Fatalf("exit code = %d, want %d (stderr: %s)", code, exitUsage, errOut.String())
	}
	for _, want := range []string{"pass --scheduler-role ARN or set SQSWORKER_SCHEDULER_ROLE_ARN", "output SchedulerRoleArn",
		`aws cloudformation describe-stacks --stack-name myapp --query "Stacks[0].Outputs[?OutputKey=='SchedulerRoleArn'].OutputValue" --output text`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr = %q, want it to contain %q", errOut.String(), want)
		}
	}
}

// noCalls is a queueLookup that fails the test on any call.
type noCalls struct{ t *testing.T }

func (n noCalls) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	n.t.Error("GetQueueUrl called")
	return nil, errors.New("no calls")
}

func (n noCalls) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	n.t.Error("GetQueueAttributes called")
	return nil, errors.New("no calls")
}

// fakeQueues is a queueLookup over fixed queues: name → attributes (QueueArn, …).
type fakeQueues map[string]map[string]string

func (f fakeQueues) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	if _, ok := f[aws.ToString(in.QueueName)]; !ok {
		return nil, &sqstypes.QueueDoesNotExist{}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.eu-west-1.amazonaws.com/123456789012/" + aws.ToString(in.QueueName))}, nil
}

func (f fakeQueues) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	u := aws.ToString(in.QueueUrl)
	attrs, ok := f[u[strings.LastIndexByte(u, '/')+1:]]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

// TestResolveJobScheduling covers the AWS cases the emulator cannot show: the role's sources and
// the missing-role error (no call), the scheduler DLQ, and a FIFO queue without content-based
// deduplication.
func TestResolveJobScheduling(t *testing.T) {
	t.Parallel()
	const (
		role    = "arn:aws:iam::123456789012:role/myapp-scheduler"
		envRole = "arn:aws-us-gov:iam::123456789012:role/from-env"
		prefix  = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
		arnBase = "arn:aws:sqs:eu-west-1:123456789012:"
	)
	noEnv := func(string) string { return "" }
	withEnv := func(v string) func(string) string {
		return func(k string) string {
			if k == schedulerRoleEnv {
				return v
			}
			return ""
		}
	}
	std := schedulingTarget{Stack: "myapp", QueueName: "myapp-jobs", QueueURL: prefix + "myapp-jobs", Where: "AWS (eu-west-1)"}
	fifo := schedulingTarget{Stack: "myapp", QueueName: "myapp-jobs.fifo", QueueURL: prefix + "myapp-jobs.fifo", FIFO: true, Where: "AWS (eu-west-1)", Role: role}
	withDLQ := fakeQueues{
		"myapp-jobs":               {"QueueArn": arnBase + "myapp-jobs"},
		"myapp-jobs.fifo":          {"QueueArn": arnBase + "myapp-jobs.fifo", "ContentBasedDeduplication": "true"},
		"myapp-jobs-scheduler-dlq": {"QueueArn": arnBase + "myapp-jobs-scheduler-dlq"},
	}

	t.Run("no role on AWS", func(t *testing.T) {
		t.Parallel()
		_, err := resolveJobScheduling(context.Background(), noCalls{t}, std, noEnv)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--scheduler-role") || !strings.Contains(err.Error(), "describe-stacks --stack-name myapp") {
			t.Errorf("err = %v, want a usage error naming --scheduler-role and the stack output", err)
		}
	})
	t.Run("bad role in the environment", func(t *testing.T) {
		t.Parallel()
		_, err := resolveJobScheduling(context.Background(), noCalls{t}, std, withEnv("myapp-scheduler"))
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), `$SQSWORKER_SCHEDULER_ROLE_ARN "myapp-scheduler" is not an IAM role ARN`) {
			t.Errorf("err = %v, want a usage error naming the variable", err)
		}
	})
	t.Run("role from the environment, scheduler DLQ", func(t *testing.T) {
		t.Parallel()
		cfg, err := resolveJobScheduling(context.Background(), withDLQ, std, withEnv(envRole))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Group != "myapp-jobs" || cfg.QueueARN != arnBase+"myapp-jobs" || cfg.RoleARN != envRole || cfg.DeadLetterARN != arnBase+"myapp-jobs-scheduler-dlq" {
			t.Errorf("config = %+v, want group myapp-jobs, the queue's ARN, the role %s and the scheduler DLQ", cfg, envRole)
		}
	})
	t.Run("flag before environment, no scheduler DLQ", func(t *testing.T) {
		t.Parallel()
		target := std
		target.Role = role
		cfg, err := resolveJobScheduling(context.Background(), fakeQueues{"myapp-jobs": {"QueueArn": arnBase + "myapp-jobs"}}, target, withEnv(envRole))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.RoleARN != role || cfg.DeadLetterARN != "" {
			t.Errorf("config = %+v, want role %s and no DLQ", cfg, role)
		}
	})
	t.Run("local default role", func(t *testing.T) {
		t.Parallel()
		target := std
		target.Local = true
		cfg, err := resolveJobScheduling(context.Background(), fakeQueues{"myapp-jobs": {"QueueArn": arnBase + "myapp-jobs"}}, target, noEnv)
		if err != nil || cfg.RoleARN != awslocal.SchedulerRoleARN("myapp") {
			t.Errorf("config = %+v, %v; want the local role", cfg, err)
		}
	})
	t.Run("FIFO with content-based deduplication", func(t *testing.T) {
		t.Parallel()
		cfg, err := resolveJobScheduling(context.Background(), withDLQ, fifo, noEnv)
		if err != nil || cfg.QueueARN != arnBase+"myapp-jobs.fifo" || cfg.DeadLetterARN != arnBase+"myapp-jobs-scheduler-dlq" {
			t.Errorf("config = %+v, %v", cfg, err)
		}
	})
	t.Run("FIFO without content-based deduplication", func(t *testing.T) {
		t.Parallel()
		queues := fakeQueues{"myapp-jobs.fifo": {"QueueArn": arnBase + "myapp-jobs.fifo", "ContentBasedDeduplication": "false"}}
		_, err := resolveJobScheduling(context.Background(), queues, fifo, noEnv)
		if err == nil || !strings.Contains(err.Error(), "content-based deduplication off") {
			t.Errorf("err = %v, want the content-based deduplication error", err)
		}
		local := fifo
		local.Local = true // the local dispatcher sets a deduplication id itself
		if _, err := resolveJobScheduling(context.Background(), queues, local, noEnv); err != nil {
			t.Errorf("local: %v", err)
		}
	})
}

func TestCheckRoleARN(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"arn:aws:iam::123456789012:role/myapp-scheduler",
		"arn:aws:iam::123456789012:role/service-role/a/b/Name+=,.@_-1",
		"arn:aws-cn:iam::123456789012:role/x",
		"arn:aws-us-gov:iam::123456789012:role/x",
		"arn:aws:iam::000000000000:role/" + strings.Repeat("r", 64),
	} {
		if err := checkRoleARN("--scheduler-role", ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "myapp-scheduler", "arn:aws:iam::123456789012", "arn:aws:iam:us-east-1:123456789012:role/x",
		"arn:aws:iam::12345678901a:role/x", "arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:role/a b",
		"arn:aws:iam::123456789012:role/" + strings.Repeat("r", 65), "arn:gcp:iam::123456789012:role/x", "arn:aws-:iam::123456789012:role/x",
		"arn:aws:sts::123456789012:assumed-role/x/y", "ARN:aws:iam::123456789012:role/x",
	} {
		err := checkRoleARN("--scheduler-role", bad)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", bad, err)
		}
	}
}
