package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

const (
	testQueue     = "arn:aws:sqs:us-east-1:123456789012:jobs"
	testFIFOQueue = "arn:aws:sqs:us-east-1:123456789012:jobs.fifo"
	testRole      = "arn:aws:iam::123456789012:role/scheduler"
	testDLQ       = "arn:aws:sqs:us-east-1:123456789012:schedules-dlq"
)

var testNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// testCreated is the CreationDate the fake gives every schedule.
var testCreated = testNow.Add(-36 * time.Hour)

// fakeScheduler is an in-memory EventBridge Scheduler: it stores the standard shapes (with a
// CreationDate), returns AWS's typed errors and pages ListSchedules two at a time (fewer when
// MaxResults asks for fewer).
type fakeScheduler struct {
	mu        sync.Mutex
	schedules map[string]*scheduler.GetScheduleOutput // group/name
	creates   []*scheduler.CreateScheduleInput
	updates   []*scheduler.UpdateScheduleInput
	deletes   int
	gets      int
	lists     int
	failWith  error // returned by every call when set
}

func newFake() *fakeScheduler {
	return &fakeScheduler{schedules: map[string]*scheduler.GetScheduleOutput{}}
}

func group(g *string) string {
	if g == nil || *g == "" {
		return "default"
	}
	return *g
}

func (f *fakeScheduler) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, in)
	if f.failWith != nil {
		return nil, f.failWith
	}
	key := group(in.GroupName) + "/" + *in.Name
	if _, ok := f.schedules[key]; ok {
		return nil, &types.ConflictException{Message: aws.String("Schedule " + *in.Name + " already exists.")}
	}
	arn := "arn:aws:scheduler:us-east-1:123456789012:schedule/" + key
	f.schedules[key] = &scheduler.GetScheduleOutput{
		Arn: aws.String(arn), Name: in.Name, GroupName: aws.String(group(in.GroupName)),
		Description: in.Description, ScheduleExpression: in.ScheduleExpression,
		ScheduleExpressionTimezone: in.ScheduleExpressionTimezone, StartDate: in.StartDate, EndDate: in.EndDate,
		FlexibleTimeWindow: in.FlexibleTimeWindow, ActionAfterCompletion: in.ActionAfterCompletion,
		State: in.State, Target: in.Target, CreationDate: aws.Time(testCreated),
	}
	return &scheduler.CreateScheduleOutput{ScheduleArn: aws.String(arn)}, nil
}

func (f *fakeScheduler) UpdateSchedule(_ context.Context, in *scheduler.UpdateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, in)
	if f.failWith != nil {
		return nil, f.failWith
	}
	key := group(in.GroupName) + "/" + *in.Name
	s, ok := f.schedules[key]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Schedule " + *in.Name + " does not exist.")}
	}
	*s = scheduler.GetScheduleOutput{
		Arn: s.Arn, Name: in.Name, GroupName: s.GroupName,
		Description: in.Description, ScheduleExpression: in.ScheduleExpression,
		ScheduleExpressionTimezone: in.ScheduleExpressionTimezone, StartDate: in.StartDate, EndDate: in.EndDate,
		FlexibleTimeWindow: in.FlexibleTimeWindow, ActionAfterCompletion: in.ActionAfterCompletion,
		State: in.State, Target: in.Target, CreationDate: s.CreationDate,
	}
	return &scheduler.UpdateScheduleOutput{ScheduleArn: s.Arn}, nil
}

func (f *fakeScheduler) DeleteSchedule(_ context.Context, in *scheduler.DeleteScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes++
	if f.failWith != nil {
		return nil, f.failWith
	}
	key := group(in.GroupName) + "/" + *in.Name
	if _, ok := f.schedules[key]; !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Schedule " + *in.Name + " does not exist.")}
	}
	delete(f.schedules, key)
	return &scheduler.DeleteScheduleOutput{}, nil
}

func (f *fakeScheduler) GetSchedule(_ context.Context, in *scheduler.GetScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.failWith != nil {
		return nil, f.failWith
	}
	s, ok := f.schedules[group(in.GroupName)+"/"+*in.Name]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Schedule " + *in.Name + " does not exist.")}
	}
	out := *s
	return &out, nil
}

func (f *fakeScheduler) ListSchedules(_ context.Context, in *scheduler.ListSchedulesInput, _ ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.failWith != nil {
		return nil, f.failWith
	}
	n := 2
	if in.MaxResults != nil && int(*in.MaxResults) < n {
		n = int(*in.MaxResults)
	}
	var keys []string
	for k, s := range f.schedules {
		if in.GroupName == nil || *s.GroupName == *in.GroupName {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	start := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &start)
	}
	out := &scheduler.ListSchedulesOutput{}
	for i := start; i < len(keys) && i < start+n; i++ {
		s := f.schedules[keys[i]]
		out.Schedules = append(out.Schedules, types.ScheduleSummary{
			Arn: s.Arn, Name: s.Name, GroupName: s.GroupName, State: s.State,
			Target: &types.TargetSummary{Arn: s.Target.Arn},
		})
	}
	if start+n < len(keys) {
		out.NextToken = aws.String(fmt.Sprint(start + n))
	}
	return out, nil
}

func (f *fakeScheduler) calls() (creates, updates, deletes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.creates), len(f.updates), f.deletes
}

func newClient(t *testing.T, api schedule.SchedulerAPI, mod func(*schedule.Config)) *schedule.Client {
	t.Helper()
	cfg := schedule.Config{Scheduler: api, QueueARN: testQueue, RoleARN: testRole, Now: func() time.Time { return testNow }}
	if mod != nil {
		mod(&cfg)
	}
	c, err := schedule.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testEnvelope(id string) jobs.Envelope {
	return jobs.Envelope{
		V: 1, ID: id, Kind: "email.send", Args: json.RawMessage(`{"to":"a@b.c"}`),
		EnqueuedAt: testNow, MaxAttempts: 3,
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScheduleJobCreateScheduleInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mod     func(*schedule.Config)
		groupID string
		want    string
	}{{
		name: "standard queue, defaults",
		want: `{
  "FlexibleTimeWindow": {
    "Mode": "OFF",
    "MaximumWindowInMinutes": null
  },
  "Name": "sqsworker-job-01JD0000000000000000000000",
  "ScheduleExpression": "at(2026-11-29T12:30:01)",
  "Target": {
    "Arn": "arn:aws:sqs:us-east-1:123456789012:jobs",
    "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
    "DeadLetterConfig": null,
    "EcsParameters": null,
    "EventBridgeParameters": null,
    "Input": "{\"v\":1,\"id\":\"01JD0000000000000000000000\",\"kind\":\"email.send\",\"args\":{\"to\":\"a@b.c\"},\"enqueued_at\":\"2026-11-29T10:00:00.000Z\",\"max_attempts\":3}",
    "KinesisParameters": null,
    "RetryPolicy": {
      "MaximumEventAgeInSeconds": 86400,
      "MaximumRetryAttempts": 185
    },
    "SageMakerPipelineParameters": null,
    "SqsParameters": null
  },
  "ActionAfterCompletion": "DELETE",
  "ClientToken": null,
  "Description": "sqsworker delayed job, kind email.send",
  "EndDate": null,
  "GroupName": "default",
  "KmsKeyArn": null,
  "ScheduleExpressionTimezone": "UTC",
  "StartDate": null,
  "State": "ENABLED"
}`,
	}, {
		name: "FIFO queue, group, DLQ, retry policy",
		mod: func(c *schedule.Config) {
			c.QueueARN, c.Group, c.DeadLetterARN = testFIFOQueue, "jobs", testDLQ
			c.RetryMaxAttempts, c.MaxEventAge = 10, time.Hour
		},
		groupID: "customer-42",
		want: `{
  "FlexibleTimeWindow": {
    "Mode": "OFF",
    "MaximumWindowInMinutes": null
  },
  "Name": "sqsworker-job-01JD0000000000000000000000",
  "ScheduleExpression": "at(2026-11-29T12:30:01)",
  "Target": {
    "Arn": "arn:aws:sqs:us-east-1:123456789012:jobs.fifo",
    "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
    "DeadLetterConfig": {
      "Arn": "arn:aws:sqs:us-east-1:123456789012:schedules-dlq"
    },
    "EcsParameters": null,
    "EventBridgeParameters": null,
    "Input": "{\"v\":1,\"id\":\"01JD0000000000000000000000\",\"kind\":\"email.send\",\"args\":{\"to\":\"a@b.c\"},\"enqueued_at\":\"2026-11-29T10:00:00.000Z\",\"max_attempts\":3}",
    "KinesisParameters": null,
    "RetryPolicy": {
      "MaximumEventAgeInSeconds": 3600,
      "MaximumRetryAttempts": 10
    },
    "SageMakerPipelineParameters": null,
    "SqsParameters": {
      "MessageGroupId": "customer-42"
    }
  },
  "ActionAfterCompletion": "DELETE",
  "ClientToken": null,
  "Description": "sqsworker delayed job, kind email.send",
  "EndDate": null,
  "GroupName": "jobs",
  "KmsKeyArn": null,
  "ScheduleExpressionTimezone": "UTC",
  "StartDate": null,
  "State": "ENABLED"
}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			c := newClient(t, fake, tt.mod)
			// A fractional second rounds up: the job never runs early.
			at := time.Date(2026, 11, 29, 13, 30, 0, 500, time.FixedZone("CET", 3600))
			name, err := c.ScheduleJob(context.Background(), testEnvelope("01JD0000000000000000000000"), at, tt.groupID)
			if err != nil {
				t.Fatal(err)
			}
			if want := "sqsworker-job-01JD0000000000000000000000"; name != want {
				t.Errorf("name = %q, want %q", name, want)
			}
			if len(fake.creates) != 1 {
				t.Fatalf("%d CreateSchedule calls, want 1", len(fake.creates))
			}
			if got := mustJSON(t, fake.creates[0]); got != tt.want {
				t.Errorf("CreateScheduleInput:\n%s\nwant:\n%s", got, tt.want)
			}
			// The input is the envelope the producer would have sent.
			env, err := jobs.ParseEnvelope(*fake.creates[0].Target.Input)
			if err != nil || env.ID != "01JD0000000000000000000000" {
				t.Errorf("input does not parse back: %v %+v", err, env)
			}

			// Scheduling again is a no-op that reports the same name.
			name2, err := c.ScheduleJob(context.Background(), testEnvelope("01JD0000000000000000000000"), at.Add(time.Hour), tt.groupID)
			if err != nil || name2 != name {
				t.Errorf("second ScheduleJob = %q, %v; want %q, nil", name2, err, name)
			}
			if len(fake.schedules) != 1 {
				t.Errorf("%d schedules after a second ScheduleJob, want 1", len(fake.schedules))
			}
		})
	}
}

func TestScheduleJobRejectsBeforeCreating(t *testing.T) {
	t.Parallel()
	later := testNow.Add(time.Hour)
	big := testEnvelope("big")
	big.Args = json.RawMessage(`{"blob":"` + strings.Repeat("x", schedule.MaxInputBytes) + `"}`)
	notObject := testEnvelope("arr")
	notObject.Args = json.RawMessage(`[1,2]`)
	badJSON := testEnvelope("bad")
	badJSON.Args = json.RawMessage(`{"to":}`)
	noID := testEnvelope("")
	badKind := testEnvelope("k")
	badKind.Kind = "Email"
	tests := []struct {
		name    string
		env     jobs.Envelope
		at      time.Time
		fifo    bool
		groupID string
		want    string
	}{
		{"past", testEnvelope("a"), testNow.Add(-time.Minute), false, "", "not in the future"},
		{"now", testEnvelope("a"), testNow, false, "", "not in the future"},
		{"zero time", testEnvelope("a"), time.Time{}, false, "", "zero"},
		{"after 2199", testEnvelope("a"), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), false, "", "2199"},
		{"oversize input", big, later, false, "", "target input limit"},
		{"args not an object", notObject, later, false, "", "args must be a JSON object"},
		{"args not JSON", badJSON, later, false, "", "args are not valid JSON"},
		{"no id", noID, later, false, "", "id is empty"},
		{"bad kind", badKind, later, false, "", "not allowed"},
		{"FIFO without group", testEnvelope("a"), later, true, "", "message group id is required"},
		{"group id too long", testEnvelope("a"), later, false, strings.Repeat("g", 129), "limit is 128"},
		{"group id with a space", testEnvelope("a"), later, false, "a b", "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			c := newClient(t, fake, func(c *schedule.Config) {
				if tt.fifo {
					c.QueueARN = testFIFOQueue
				}
			})
			name, err := c.ScheduleJob(context.Background(), tt.env, tt.at, tt.groupID)
			if !errors.Is(err, schedule.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ScheduleJob = %q, %v; want an ErrInvalid saying %q", name, err, tt.want)
			}
			if n, _, _ := fake.calls(); n != 0 {
				t.Errorf("%d CreateSchedule calls, want none", n)
			}
		})
	}
}

func TestScheduleJobReturnsAPIErrors(t *testing.T) {
	t.Parallel()
	fake := newFake()
	fake.failWith = &types.ThrottlingException{Message: aws.String("slow down")}
	c := newClient(t, fake, nil)
	_, err := c.ScheduleJob(context.Background(), testEnvelope("x"), testNow.Add(time.Hour), "")
	var te *types.ThrottlingException
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "sqsworker-job-x") {
		t.Errorf("err = %v, want the ThrottlingException, naming the schedule", err)
	}
	if err := c.CancelJob(context.Background(), "x"); !errors.As(err, &te) {
		t.Errorf("CancelJob err = %v, want the ThrottlingException", err)
	}
}

func TestCancelJobIsIdempotent(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, nil)
	ctx := context.Background()
	if _, err := c.ScheduleJob(ctx, testEnvelope("job-1"), testNow.Add(time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.CancelJob(ctx, "job-1"); err != nil {
			t.Fatalf("CancelJob #%d: %v", i+1, err)
		}
	}
	if len(fake.schedules) != 0 {
		t.Errorf("%d schedules left", len(fake.schedules))
	}
	if err := c.CancelJob(ctx, ""); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("CancelJob(\"\") = %v, want ErrInvalid", err)
	}
}

func TestScheduleName(t *testing.T) {
	t.Parallel()
	if got, want := schedule.ScheduleName("01JD5Z"), "sqsworker-job-01JD5Z"; got != want {
		t.Errorf("ScheduleName = %q, want %q", got, want)
	}
	longest := strings.Repeat("a", 64-len(schedule.JobSchedulePrefix))
	if got := schedule.ScheduleName(longest); got != schedule.JobSchedulePrefix+longest {
		t.Errorf("a %d-character id: %q, want it kept", len(longest), got)
	}
	seen := map[string]string{}
	for _, id := range []string{"", longest + "a", "order/42", "order:42", "é", "a b", strings.Repeat("x", 1000), "order/43"} {
		name := schedule.ScheduleName(id)
		if !strings.HasPrefix(name, schedule.JobScheduleHashPrefix) || len(name) > schedule.MaxNameLength {
			t.Errorf("ScheduleName(%.20q) = %q, want a hashed name of at most 64 characters", id, name)
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				t.Errorf("ScheduleName(%.20q) = %q has %q", id, name, c)
			}
		}
		if name != schedule.ScheduleName(id) {
			t.Errorf("ScheduleName(%.20q) is not deterministic", id)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("ScheduleName(%.20q) = ScheduleName(%.20q)", id, other)
		}
		seen[name] = id
	}
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	fake := newFake()
	tests := []struct {
		name string
		mod  func(*schedule.Config)
		want string
	}{
		{"no scheduler", func(c *schedule.Config) { c.Scheduler = nil }, "Scheduler is required"},
		{"no queue", func(c *schedule.Config) { c.QueueARN = "" }, "QueueARN"},
		{"queue URL", func(c *schedule.Config) { c.QueueARN = "https://sqs.us-east-1.amazonaws.com/1/q" }, "QueueARN"},
		{"no role", func(c *schedule.Config) { c.RoleARN = "" }, "RoleARN"},
		{"bad DLQ", func(c *schedule.Config) { c.DeadLetterARN = "dlq" }, "DeadLetterARN"},
		{"bad group", func(c *schedule.Config) { c.Group = "my group" }, "Config.Group"},
		{"retries", func(c *schedule.Config) { c.RetryMaxAttempts = 186 }, "RetryMaxAttempts"},
		{"event age short", func(c *schedule.Config) { c.MaxEventAge = 30 * time.Second }, "MaxEventAge"},
		{"event age long", func(c *schedule.Config) { c.MaxEventAge = 25 * time.Hour }, "MaxEventAge"},
	}
	for _, tt := range tests {
		cfg := schedule.Config{Scheduler: fake, QueueARN: testQueue, RoleARN: testRole}
		tt.mod(&cfg)
		if _, err := schedule.NewClient(cfg); !errors.Is(err, schedule.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewClient err = %v, want ErrInvalid about %s", tt.name, err, tt.want)
		}
	}
	c := newClient(t, fake, func(c *schedule.Config) { c.RetryMaxAttempts = -1 })
	if _, err := c.ScheduleJob(context.Background(), testEnvelope("r"), testNow.Add(time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	if got := *fake.creates[0].Target.RetryPolicy.MaximumRetryAttempts; got != 0 {
		t.Errorf("RetryMaxAttempts -1 sent %d retries, want 0", got)
	}
}

// kumoScheduler returns the embedded emulator's Scheduler client.
func kumoScheduler(t *testing.T) *scheduler.Client {
	t.Helper()
	b := awslocaltest.Backend(t)
	return scheduler.NewFromConfig(b.Config)
}

func TestScheduleJobOnEmulator(t *testing.T) {
	t.Parallel()
	api := kumoScheduler(t)
	ctx := context.Background()
	queue := "arn:aws:sqs:us-east-1:123456789012:" + awslocal.UniqueName("sched") + ".fifo"
	c := newClient(t, api, func(c *schedule.Config) {
		c.QueueARN, c.DeadLetterARN, c.Now = queue, testDLQ, time.Now
	})
	id := jobs.NewID()
	env := testEnvelope(id)
	at := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	name, err := c.ScheduleJob(ctx, env, at, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if name2, err := c.ScheduleJob(ctx, env, at, "g1"); err != nil || name2 != name {
		t.Fatalf("second ScheduleJob = %q, %v; want %q, nil (ConflictException = already scheduled)", name2, err, name)
	}
	out, err := api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := env.MarshalJSON()
	checks := []struct{ what, got, want string }{
		{"expression", aws.ToString(out.ScheduleExpression), schedule.At(at, time.UTC)},
		{"timezone", aws.ToString(out.ScheduleExpressionTimezone), "UTC"},
		{"action after completion", string(out.ActionAfterCompletion), "DELETE"},
		{"state", string(out.State), "ENABLED"},
		{"flexible window", string(out.FlexibleTimeWindow.Mode), "OFF"},
		{"target", aws.ToString(out.Target.Arn), queue},
		{"role", aws.ToString(out.Target.RoleArn), testRole},
		{"input", aws.ToString(out.Target.Input), string(body)},
		{"group id", aws.ToString(out.Target.SqsParameters.MessageGroupId), "g1"},
		{"DLQ", aws.ToString(out.Target.DeadLetterConfig.Arn), testDLQ},
		{"retries", fmt.Sprint(aws.ToInt32(out.Target.RetryPolicy.MaximumRetryAttempts)), "185"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.what, ch.got, ch.want)
		}
	}
	for range 2 {
		if err := c.CancelJob(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	_, err = api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("GetSchedule after CancelJob: %v, want ResourceNotFoundException", err)
	}
}

// *Client is the worker's scheduler of re-sent copies, for one queue or several.
var _ worker.QueueScheduler = (*schedule.Client)(nil)
