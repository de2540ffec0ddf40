package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

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
	if _, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awslocal.SchedulerDLQName(stack))}); err != nil {
		t.Fatal(err)
	}
	_, dlqARN := queueARN(t, awslocal.SchedulerDLQName(stack))
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

// cfnQueryVersion is the API version CloudFormation's Query protocol names in each request.
const cfnQueryVersion = "2010-05-15"

// fakeCloudFormation starts a server that answers DescribeStacks as CloudFormation does, with
// the Query protocol: a form-encoded POST (Action, Version, StackName), answered in XML. stacks
// maps a stack's name to its outputs (key → value); for any other name it answers what
// CloudFormation does, HTTP 400 and a ValidationError "Stack with id NAME does not exist". Each
// call is appended to log as "cloudformation:DescribeStacks NAME".
func fakeCloudFormation(t *testing.T, stacks map[string]map[string]string, log *callLog) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("CloudFormation request: %v", err)
		}
		name := r.PostForm.Get("StackName")
		log.add("cloudformation:" + r.PostForm.Get("Action") + " " + name)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
			r.PostForm.Get("Action") != "DescribeStacks" || r.PostForm.Get("Version") != cfnQueryVersion {
			t.Errorf("CloudFormation request %s %s (%s): %v, want a form-encoded POST of DescribeStacks, version %s",
				r.Method, r.URL, r.Header.Get("Content-Type"), r.PostForm, cfnQueryVersion)
		}
		// Signed for CloudFormation in the region given with --region.
		if auth := r.Header.Get("Authorization"); !strings.Contains(auth, "/us-east-1/cloudformation/aws4_request") {
			t.Errorf("CloudFormation request signed with %q, want a SigV4 signature for cloudformation in us-east-1", auth)
		}
		w.Header().Set("Content-Type", "text/xml")
		outputs, ok := stacks[name]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `<ErrorResponse xmlns="http://cloudformation.amazonaws.com/doc/%s/">
  <Error>
    <Type>Sender</Type>
    <Code>ValidationError</Code>
    <Message>Stack with id %s does not exist</Message>
  </Error>
  <RequestId>8f3c5cf4-1d7e-4a8e-9a55-0d1e2f3a4b5c</RequestId>
</ErrorResponse>
`, cfnQueryVersion, html.EscapeString(name))
			return
		}
		var members strings.Builder
		for k, v := range outputs {
			fmt.Fprintf(&members, `
          <member>
            <Description>an output</Description>
            <OutputKey>%s</OutputKey>
            <OutputValue>%s</OutputValue>
          </member>`, html.EscapeString(k), html.EscapeString(v))
		}
		fmt.Fprintf(w, `<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/%s/">
  <DescribeStacksResult>
    <Stacks>
      <member>
        <StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/%s/4a5b6c7d-0000-11f0-8000-0a1b2c3d4e5f</StackId>
        <StackName>%s</StackName>
        <CreationTime>2026-11-02T10:00:00.000Z</CreationTime>
        <StackStatus>UPDATE_COMPLETE</StackStatus>
        <Outputs>%s
        </Outputs>
      </member>
    </Stacks>
  </DescribeStacksResult>
  <ResponseMetadata>
    <RequestId>1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9</RequestId>
  </ResponseMetadata>
</DescribeStacksResponse>
`, cfnQueryVersion, name, html.EscapeString(name), members.String())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeSQS starts a server that answers every SQS call (the JSON protocol) as SQS does for a queue
// that does not exist, logging "sqs:OPERATION"; with fail, a call fails the test.
func fakeSQS(t *testing.T, log *callLog, fail bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
		log.add("sqs:" + op)
		if fail {
			t.Errorf("SQS %s called before the scheduler's role was known", op)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Query-Error", "AWS.SimpleQueueService.NonExistentQueue;Sender")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// callLog records the calls the fake servers receive, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(call string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call)
}

func (l *callLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.calls, ", ")
}

// TestEnqueueNoSchedulerRoleOnAWS: on AWS, a delay that needs the scheduler, without the flag or
// the environment variable, reads the role from the output SchedulerRoleArn of the CloudFormation
// stack named --stack, with one DescribeStacks call before the queue is looked up. The SDK's
// CloudFormation and SQS endpoints are local servers (AWS_ENDPOINT_URL_CLOUDFORMATION,
// AWS_ENDPOINT_URL_SQS: the SDK's service-specific endpoint variables), so nothing reaches AWS.
// A missing stack, a missing output and a value that is no role ARN are usage errors made
// before SQS is called; a role found lets the command go on to the queue. Not parallel: it sets
// environment variables.
func TestEnqueueNoSchedulerRoleOnAWS(t *testing.T) {
	const role = "arn:aws:iam::123456789012:role/myapp-JobsSchedulerRole1A2B3C4D-ZyXwVuTs"
	tests := []struct {
		name    string
		outputs map[string]string // the stack myapp's outputs; nil: no such stack
		sqsOK   bool              // SQS may be called (after the role is found)
		code    int
		want    []string
		calls   string
	}{
		{
			name: "no stack",
			code: exitUsage,
			want: []string{"needs the IAM role the scheduler assumes", "no CloudFormation stack named myapp was found on AWS (us-east-1)",
				"check --stack and --region, or pass --scheduler-role ARN or set SQSWORKER_SCHEDULER_ROLE_ARN", "Run 'sqsworker enqueue --help'"},
			calls: "cloudformation:DescribeStacks myapp",
		},
		{
			name:    "no output",
			outputs: map[string]string{"JobsQueueUrl9FF5FB1F": "https://sqs.us-east-1.amazonaws.com/123456789012/myapp-jobs"},
			code:    exitUsage,
			want: []string{"CloudFormation stack myapp (UPDATE_COMPLETE) has no output JobsSchedulerRoleArn", "deployed with scheduling disabled",
				"pass --scheduler-role ARN or set SQSWORKER_SCHEDULER_ROLE_ARN", "Run 'sqsworker enqueue --help'"},
			calls: "cloudformation:DescribeStacks myapp",
		},
		{
			name:    "not a role",
			outputs: map[string]string{"JobsSchedulerRoleArnA23EDD26": "myapp-scheduler"},
			code:    exitUsage,
			want:    []string{`output JobsSchedulerRoleArnA23EDD26 of CloudFormation stack myapp "myapp-scheduler" is not an IAM role ARN`, "pass --scheduler-role ARN"},
			calls:   "cloudformation:DescribeStacks myapp",
		},
		{
			// The role is read; the command goes on to the queue, which the fake SQS does not have.
			name: "role found",
			outputs: map[string]string{"JobsQueueUrl9FF5FB1F": "https://sqs.us-east-1.amazonaws.com/123456789012/myapp-jobs",
				"JobsSchedulerRoleArnA23EDD26": role},
			sqsOK: true,
			code:  exitError,
			want:  []string{"queue myapp-jobs not found on AWS (us-east-1)"},
			calls: "cloudformation:DescribeStacks myapp, sqs:GetQueueUrl, sqs:GetQueueUrl",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log callLog
			stacks := map[string]map[string]string{}
			if tt.outputs != nil {
				stacks["myapp"] = tt.outputs
			}
			t.Setenv(schedulerRoleEnv, "")
			t.Setenv("AWS_ENDPOINT_URL", "")
			t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "")
			t.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", fakeCloudFormation(t, stacks, &log).URL)
			t.Setenv("AWS_ENDPOINT_URL_SQS", fakeSQS(t, &log, !tt.sqsOK).URL)
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"enqueue", "email.send", "{}", "--delay", "16m", "--stack", "myapp", "--region", "us-east-1"}, &out, &errOut)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d (stderr: %s)", code, tt.code, errOut.String())
			}
			for _, want := range tt.want {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr = %q, want it to contain %q", errOut.String(), want)
				}
			}
			if got := log.String(); got != tt.calls {
				t.Errorf("calls = %s, want %s", got, tt.calls)
			}
		})
	}
}

// fakeStacks is a stackDescriber answering with one stack (or err), recording the names asked.
type fakeStacks struct {
	stack *cftypes.Stack // nil: an answer without stacks
	err   error
	asked []string
}

func (f *fakeStacks) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	f.asked = append(f.asked, aws.ToString(in.StackName))
	if f.err != nil {
		return nil, f.err
	}
	out := &cloudformation.DescribeStacksOutput{}
	if f.stack != nil {
		out.Stacks = []cftypes.Stack{*f.stack}
	}
	return out, nil
}

// stackWith returns a deployed stack myapp with the outputs given, as key, value pairs.
func stackWith(kv ...string) *cftypes.Stack {
	s := &cftypes.Stack{StackName: aws.String("myapp"), StackStatus: cftypes.StackStatusUpdateComplete}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Outputs = append(s.Outputs, cftypes.Output{OutputKey: aws.String(kv[i]), OutputValue: aws.String(kv[i+1])})
	}
	return s
}

// TestSchedulerRole: the role's sources in order (flag, environment, the emulator's local role,
// the CloudFormation stack's output), the one DescribeStacks call only when it is the source,
// and its errors, usage errors (exit 2) or not (exit 1).
func TestSchedulerRole(t *testing.T) {
	t.Parallel()
	const (
		flagRole  = "arn:aws:iam::123456789012:role/from-flag"
		envRole   = "arn:aws-us-gov:iam::123456789012:role/from-env"
		stackRole = "arn:aws:iam::123456789012:role/myapp-JobsSchedulerRole1A2B3C4D-ZyXwVuTs"
		cdkKey    = "JobsSchedulerRoleArnA23EDD26"
		queueURL  = "https://sqs.eu-west-1.amazonaws.com/123456789012/myapp-jobs"
		hintEnv   = "pass --scheduler-role ARN or set SQSWORKER_SCHEDULER_ROLE_ARN"
	)
	describeHint := `aws cloudformation describe-stacks --stack-name myapp --query "Stacks[0].Outputs[?contains(OutputKey, 'SchedulerRoleArn')].OutputValue" --output text`
	notFound := &smithy.GenericAPIError{Code: "ValidationError", Message: "Stack with id myapp does not exist", Fault: smithy.FaultClient}
	tests := []struct {
		name       string
		flag, env  string
		local      bool
		noCFN      bool // no CloudFormation client (an AWS host given as --endpoint)
		cfn        fakeStacks
		want       string // the role; "" for an error
		wantAsked  bool   // DescribeStacks was called (for myapp)
		wantUsage  bool
		wantErr    []string
		wantAPIErr string // the error code the error wraps
	}{
		{name: "output of the CDK construct", cfn: fakeStacks{stack: stackWith("JobsQueueUrl9FF5FB1F", queueURL, cdkKey, stackRole)},
			want: stackRole, wantAsked: true},
		{name: "output under its own name", cfn: fakeStacks{stack: stackWith("SchedulerRoleArn", stackRole)}, want: stackRole, wantAsked: true},
		{name: "output under the construct's fixed name", cfn: fakeStacks{stack: stackWith("JobsSchedulerRoleArn", stackRole)}, want: stackRole, wantAsked: true},
		{name: "flag wins", flag: flagRole, env: envRole, cfn: fakeStacks{stack: stackWith(cdkKey, stackRole)}, want: flagRole},
		{name: "environment wins", env: envRole, cfn: fakeStacks{stack: stackWith(cdkKey, stackRole)}, want: envRole},
		{name: "bad environment", env: "myapp-scheduler", cfn: fakeStacks{stack: stackWith(cdkKey, stackRole)},
			wantUsage: true, wantErr: []string{`$SQSWORKER_SCHEDULER_ROLE_ARN "myapp-scheduler" is not an IAM role ARN`}},
		{name: "emulator", local: true, cfn: fakeStacks{stack: stackWith(cdkKey, stackRole)}, want: awslocal.SchedulerRoleARN("myapp")},
		{name: "AWS endpoint without CloudFormation", noCFN: true,
			wantUsage: true, wantErr: []string{hintEnv, describeHint}},
		{name: "stack missing", cfn: fakeStacks{err: notFound}, wantAsked: true,
			wantUsage: true, wantErr: []string{"no CloudFormation stack named myapp was found on AWS (eu-west-1)", "check --stack and --region", hintEnv}},
		{name: "stack missing, StackNotFoundException", cfn: fakeStacks{err: &cftypes.StackNotFoundException{Message: aws.String("no such stack")}}, wantAsked: true,
			wantUsage: true, wantErr: []string{"no CloudFormation stack named myapp was found"}},
		{name: "no stack in the answer", cfn: fakeStacks{}, wantAsked: true,
			wantUsage: true, wantErr: []string{"no CloudFormation stack named myapp was found"}},
		{name: "output missing", cfn: fakeStacks{stack: stackWith("JobsQueueUrl9FF5FB1F", queueURL)}, wantAsked: true,
			wantUsage: true, wantErr: []string{"CloudFormation stack myapp (UPDATE_COMPLETE) has no output JobsSchedulerRoleArn", "scheduling disabled", hintEnv}},
		{name: "look-alike outputs", cfn: fakeStacks{stack: stackWith("SchedulerRoleArnBackup", stackRole, "JobsSchedulerRoleArnA23EDD2", stackRole,
			"JobsSchedulerRoleArna23edd26", stackRole, "JobsSchedulerRoleArnA23EDD26X", stackRole)}, wantAsked: true,
			wantUsage: true, wantErr: []string{"has no output JobsSchedulerRoleArn"}},
		{name: "two outputs", cfn: fakeStacks{stack: stackWith(cdkKey, stackRole, "OtherSchedulerRoleArn0123ABCD", stackRole)}, wantAsked: true,
			wantUsage: true, wantErr: []string{"has 2 outputs that may be it (" + cdkKey + ", OtherSchedulerRoleArn0123ABCD)", hintEnv}},
		{name: "bad ARN in the output", cfn: fakeStacks{stack: stackWith(cdkKey, "arn:aws:iam::123456789012:user/x")}, wantAsked: true,
			wantUsage: true, wantErr: []string{`output ` + cdkKey + ` of CloudFormation stack myapp "arn:aws:iam::123456789012:user/x" is not an IAM role ARN`, hintEnv}},
		{name: "access denied", cfn: fakeStacks{err: &smithy.GenericAPIError{Code: "AccessDenied",
			Message: "User: arn:aws:iam::123456789012:user/dev is not authorized to perform: cloudformation:DescribeStacks"}}, wantAsked: true,
			wantErr:    []string{"read the scheduler's role from CloudFormation stack myapp: ", "cloudformation:DescribeStacks", hintEnv, describeHint},
			wantAPIErr: "AccessDenied"},
		{name: "other validation error", cfn: fakeStacks{err: &smithy.GenericAPIError{Code: "ValidationError",
			Message: "1 validation error detected: Value 'my_app' at 'stackName' failed to satisfy constraint"}}, wantAsked: true,
			wantErr: []string{"read the scheduler's role from CloudFormation stack myapp", "failed to satisfy constraint", hintEnv}, wantAPIErr: "ValidationError"},
		{name: "network error", cfn: fakeStacks{err: errors.New("dial tcp: connection refused")}, wantAsked: true,
			wantErr: []string{"read the scheduler's role from CloudFormation stack myapp", "connection refused", hintEnv}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := schedulingTarget{Stack: "myapp", QueueName: "myapp-jobs", QueueURL: queueURL, Where: "AWS (eu-west-1)", Role: tt.flag, Local: tt.local}
			if tt.local {
				target.Where = "http://localhost:4566"
			}
			getenv := func(k string) string {
				if k == schedulerRoleEnv {
					return tt.env
				}
				t.Errorf("getenv(%q): only %s is a source", k, schedulerRoleEnv)
				return ""
			}
			var cfn stackDescriber = &tt.cfn
			if tt.noCFN {
				cfn = nil
			}
			got, err := schedulerRole(context.Background(), cfn, target, getenv)
			if wantAsked := strings.Join(tt.cfn.asked, ","); tt.wantAsked && wantAsked != "myapp" || !tt.wantAsked && wantAsked != "" {
				t.Errorf("DescribeStacks asked for %q, want %v", tt.cfn.asked, map[bool]string{true: "one call for myapp", false: "no call"}[tt.wantAsked])
			}
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Errorf("role = %q, %v; want %s", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("role = %q, want an error", got)
			}
			var ue *usageError
			if errors.As(err, &ue) != tt.wantUsage {
				t.Errorf("err = %v: usage error (exit 2) %v, want %v", err, !tt.wantUsage, tt.wantUsage)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
			}
			if code := apiErrorCode(err); code != tt.wantAPIErr {
				t.Errorf("API error code in the chain = %q, want %q", code, tt.wantAPIErr)
			}
		})
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

// TestResolveJobScheduling covers the AWS cases the emulator cannot show: the scheduler DLQ, and a
// FIFO queue without content-based deduplication (the role's sources are TestSchedulerRole's).
func TestResolveJobScheduling(t *testing.T) {
	t.Parallel()
	const (
		role    = "arn:aws:iam::123456789012:role/myapp-scheduler"
		prefix  = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
		arnBase = "arn:aws:sqs:eu-west-1:123456789012:"
	)
	std := schedulingTarget{Stack: "myapp", QueueName: "myapp-jobs", QueueURL: prefix + "myapp-jobs", Where: "AWS (eu-west-1)"}
	fifo := schedulingTarget{Stack: "myapp", QueueName: "myapp-jobs.fifo", QueueURL: prefix + "myapp-jobs.fifo", FIFO: true, Where: "AWS (eu-west-1)"}
	withDLQ := fakeQueues{
		"myapp-jobs":               {"QueueArn": arnBase + "myapp-jobs"},
		"myapp-jobs.fifo":          {"QueueArn": arnBase + "myapp-jobs.fifo", "ContentBasedDeduplication": "true"},
		"myapp-jobs-scheduler-dlq": {"QueueArn": arnBase + "myapp-jobs-scheduler-dlq"},
	}

	t.Run("scheduler DLQ", func(t *testing.T) {
		t.Parallel()
		cfg, err := resolveJobScheduling(context.Background(), withDLQ, std, role)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Group != "myapp-jobs" || cfg.QueueARN != arnBase+"myapp-jobs" || cfg.RoleARN != role || cfg.DeadLetterARN != arnBase+"myapp-jobs-scheduler-dlq" {
			t.Errorf("config = %+v, want group myapp-jobs, the queue's ARN, the role %s and the scheduler DLQ", cfg, role)
		}
	})
	t.Run("no scheduler DLQ", func(t *testing.T) {
		t.Parallel()
		cfg, err := resolveJobScheduling(context.Background(), fakeQueues{"myapp-jobs": {"QueueArn": arnBase + "myapp-jobs"}}, std, role)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.RoleARN != role || cfg.DeadLetterARN != "" {
			t.Errorf("config = %+v, want role %s and no DLQ", cfg, role)
		}
	})
	t.Run("FIFO with content-based deduplication", func(t *testing.T) {
		t.Parallel()
		cfg, err := resolveJobScheduling(context.Background(), withDLQ, fifo, role)
		if err != nil || cfg.QueueARN != arnBase+"myapp-jobs.fifo" || cfg.DeadLetterARN != arnBase+"myapp-jobs-scheduler-dlq" {
			t.Errorf("config = %+v, %v", cfg, err)
		}
	})
	t.Run("FIFO without content-based deduplication", func(t *testing.T) {
		t.Parallel()
		queues := fakeQueues{"myapp-jobs.fifo": {"QueueArn": arnBase + "myapp-jobs.fifo", "ContentBasedDeduplication": "false"}}
		_, err := resolveJobScheduling(context.Background(), queues, fifo, role)
		if err == nil || !strings.Contains(err.Error(), "content-based deduplication off") {
			t.Errorf("err = %v, want the content-based deduplication error", err)
		}
		local := fifo
		local.Local = true // the local dispatcher sets a deduplication id itself
		if _, err := resolveJobScheduling(context.Background(), queues, local, role); err != nil {
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

// TestEnqueueDelayPrintsVisibleAt: a delay SQS applies itself (DelaySeconds) is printed as the
// time the job becomes visible, in the table and in JSON; no delay prints none.
func TestEnqueueDelayPrintsVisibleAt(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "visible", false)
	tr := newTranscript(t, stack)
	before := time.Now()
	out := tr.must("enqueue", "email.send", `{}`, "--delay", "90500ms")
	after := time.Now()
	m := regexp.MustCompile(`(?m)^visible at  (\S+) \(SQS delivers it from then on; by this host's clock\)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no visible-at line:\n%s", out)
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	// DelaySeconds is whole seconds: 90.5 s is 91 s.
	if err != nil || at.Before(before.Add(91*time.Second).Truncate(time.Millisecond)) || at.After(after.Add(91*time.Second)) {
		t.Errorf("visible at %s (%v), want 91 s after the send, between %v and %v", m[1], err, before.Add(91*time.Second), after.Add(91*time.Second))
	}
	var doc enqueueJSON
	if err := json.Unmarshal([]byte(tr.must("enqueue", "email.send", `{}`, "--delay", "2s", "-o", "json")), &doc); err != nil ||
		time.Time(doc.VisibleAt).Before(after.Add(2*time.Second).Truncate(time.Millisecond)) {
		t.Errorf("--delay 2s -o json: visible_at %v, %v", time.Time(doc.VisibleAt), err)
	}
	if out := tr.must("enqueue", "email.send", `{}`); strings.Contains(out, "visible at") {
		t.Errorf("without --delay:\n%s", out)
	}
	if out := tr.must("enqueue", "email.send", `{}`, "-o", "json"); strings.Contains(out, "visible_at") {
		t.Errorf("without --delay, JSON:\n%s", out)
	}
}
