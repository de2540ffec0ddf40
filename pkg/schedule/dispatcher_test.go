package schedule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// dispTemplate is a schedule input using every context attribute.
const dispTemplate = `{"arn":"<aws.scheduler.schedule-arn>","t":"<aws.scheduler.scheduled-time>",` +
	`"id":"<aws.scheduler.execution-id>","n":<aws.scheduler.attempt-number>}`

type dispBody struct {
	ARN string `json:"arn"`
	T   string `json:"t"`
	ID  string `json:"id"`
	N   int    `json:"n"`
}

// dispClock is an injected clock the test moves by hand.
type dispClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *dispClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *dispClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// dispKumo is an embedded-emulator environment with its own schedule group (kumo ignores the
// ListSchedules group filter, so the Dispatcher filters; a unique group keeps the parallel
// tests apart).
type dispKumo struct {
	sqs   *sqs.Client
	sch   *scheduler.Client
	group string
}

func newDispKumo(t *testing.T) *dispKumo {
	t.Helper()
	b := awslocaltest.Backend(t)
	e := &dispKumo{sqs: sqs.NewFromConfig(b.Config), sch: scheduler.NewFromConfig(b.Config), group: awslocal.UniqueName("dispg")}
	if _, err := e.sch.CreateScheduleGroup(context.Background(), &scheduler.CreateScheduleGroupInput{Name: aws.String(e.group)}); err != nil {
		t.Fatal(err)
	}
	// kumo lists at most 100 schedules of all groups: leave none behind (runs after the
	// schedules' own cleanups).
	t.Cleanup(func() {
		_, _ = e.sch.DeleteScheduleGroup(context.Background(), &scheduler.DeleteScheduleGroupInput{Name: aws.String(e.group)})
	})
	return e
}

func (e *dispKumo) queue(t *testing.T, fifo, contentDedup bool) *awslocal.Stack {
	t.Helper()
	st, err := awslocal.Provision(context.Background(), e.sqs, awslocal.StackOptions{
		Name: awslocal.UniqueName("disp"), FIFO: fifo, ContentBasedDeduplication: contentDedup,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type dispSpec struct {
	expr, tz, action string
	target           schedtypes.Target
}

// create creates a schedule and returns its ARN and CreationDate.
func (e *dispKumo) create(t *testing.T, sp dispSpec) (name, arn string, created time.Time) {
	t.Helper()
	ctx := context.Background()
	name = awslocal.UniqueName("s")
	if sp.target.RoleArn == nil {
		sp.target.RoleArn = aws.String("arn:aws:iam::000000000000:role/scheduler")
	}
	if sp.target.Input == nil {
		sp.target.Input = aws.String(dispTemplate)
	}
	in := &scheduler.CreateScheduleInput{
		Name:               aws.String(name),
		GroupName:          aws.String(e.group),
		ScheduleExpression: aws.String(sp.expr),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target:             &sp.target,
	}
	if sp.tz != "" {
		in.ScheduleExpressionTimezone = aws.String(sp.tz)
	}
	if sp.action != "" {
		in.ActionAfterCompletion = schedtypes.ActionAfterCompletion(sp.action)
	}
	out, err := e.sch.CreateSchedule(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.sch.DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(e.group)})
	})
	got, err := e.sch.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(e.group)})
	if err != nil {
		t.Fatal(err)
	}
	return name, aws.ToString(out.ScheduleArn), aws.ToTime(got.CreationDate)
}

func (e *dispKumo) dispatcher(t *testing.T, clock *dispClock, state schedule.StateStore, sq schedule.DispatcherSQSAPI) *schedule.Dispatcher {
	t.Helper()
	if sq == nil {
		sq = e.sqs
	}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{
		Scheduler: e.sch, SQS: sq, Group: e.group, State: state, Now: clock.Now, Logger: dispLogger(t, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// receiveAll drains the queue's visible messages.
func dispReceiveAll(t *testing.T, client *sqs.Client, url string) []sqstypes.Message {
	t.Helper()
	var all []sqstypes.Message
	for {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 300,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		all = append(all, out.Messages...)
	}
}

func dispDecode(t *testing.T, m sqstypes.Message) dispBody {
	t.Helper()
	var b dispBody
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &b); err != nil {
		t.Fatalf("message body %q: %v", aws.ToString(m.Body), err)
	}
	return b
}

func dispLogger(t *testing.T, buf *dispBuffer) *slog.Logger {
	if buf == nil {
		buf = &dispBuffer{}
	}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type dispBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *dispBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *dispBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// tick runs one Tick at t and checks how many messages it sent.
func dispTick(t *testing.T, d *schedule.Dispatcher, clock *dispClock, at time.Time, want int) {
	t.Helper()
	clock.Set(at)
	n, err := d.Tick(context.Background())
	if err != nil {
		t.Fatalf("Tick at %s: %v", at.Format(time.RFC3339), err)
	}
	if n != want {
		t.Fatalf("Tick at %s fired %d, want %d", at.Format(time.RFC3339), n, want)
	}
}

func TestDispatcherAtFiresOnceWhenDueThenDeletes(t *testing.T) {
	t.Parallel()
	e := newDispKumo(t)
	q := e.queue(t, false, false)
	base := time.Now().UTC().Truncate(time.Second)
	due := base.Add(16 * time.Minute)
	name, arn, _ := e.create(t, dispSpec{
		expr: schedule.At(due, nil), action: "DELETE",
		target: schedtypes.Target{Arn: aws.String(q.QueueARN)},
	})
	clock := &dispClock{}
	d := e.dispatcher(t, clock, nil, nil)

	dispTick(t, d, clock, base, 0)
	dispTick(t, d, clock, due.Add(-time.Minute), 0)
	dispTick(t, d, clock, due.Add(-time.Second), 0) // never early
	dispTick(t, d, clock, due, 1)
	dispTick(t, d, clock, due.Add(5*time.Second), 0)
	dispTick(t, d, clock, due.Add(time.Hour), 0)

	_, err := e.sch.GetSchedule(context.Background(), &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(e.group)})
	var nf *schedtypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("GetSchedule after firing: %v, want ResourceNotFoundException (deleted)", err)
	}
	msgs := dispReceiveAll(t, e.sqs, q.QueueURL)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	b := dispDecode(t, msgs[0])
	if b.T != due.Format(time.RFC3339) || b.ARN != arn || b.N != 1 || b.ID == "" {
		t.Errorf("body %+v, want t=%s arn=%s n=1 and an execution id", b, due.Format(time.RFC3339), arn)
	}
}

func TestDispatcherRateFiresEveryOccurrence(t *testing.T) {
	t.Parallel()
	e := newDispKumo(t)
	q := e.queue(t, false, false)
	_, _, created := e.create(t, dispSpec{expr: "rate(1 minute)", target: schedtypes.Target{Arn: aws.String(q.QueueARN)}})
	clock := &dispClock{}
	d := e.dispatcher(t, clock, nil, nil)

	fired := 0
	for at := created.Add(time.Second); !at.After(created.Add(3*time.Minute + time.Second)); at = at.Add(5 * time.Second) {
		clock.Set(at)
		n, err := d.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fired += n
	}
	if fired != 3 {
		t.Fatalf("fired %d over 3 minutes, want 3", fired)
	}
	msgs := dispReceiveAll(t, e.sqs, q.QueueURL)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	times, ids := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		b := dispDecode(t, m)
		times[b.T], ids[b.ID] = true, true
	}
	for k := 1; k <= 3; k++ {
		if want := created.Add(time.Duration(k) * time.Minute).UTC().Format(time.RFC3339); !times[want] {
			t.Errorf("no message scheduled at %s; got %v", want, times)
		}
	}
	if len(ids) != 3 {
		t.Errorf("execution ids %v, want 3 distinct", ids)
	}
}

func TestDispatcherFileStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newDispKumo(t)
	q := e.queue(t, false, false)
	_, _, created := e.create(t, dispSpec{expr: "rate(1 minute)", target: schedtypes.Target{Arn: aws.String(q.QueueARN)}})
	once := created.Add(30 * time.Second).Truncate(time.Second)
	e.create(t, dispSpec{expr: schedule.At(once, nil), action: "NONE", target: schedtypes.Target{Arn: aws.String(q.QueueARN)}})
	path := filepath.Join(t.TempDir(), "state", "dispatcher.json")
	clock := &dispClock{}

	d1 := e.dispatcher(t, clock, schedule.FileState(path), nil)
	dispTick(t, d1, clock, created.Add(time.Second), 0)
	dispTick(t, d1, clock, created.Add(time.Minute+time.Second), 2) // at() and rate's first

	d2 := e.dispatcher(t, clock, schedule.FileState(path), nil) // a restart
	dispTick(t, d2, clock, created.Add(time.Minute+2*time.Second), 0)
	dispTick(t, d2, clock, created.Add(2*time.Minute+time.Second), 1)

	d3 := e.dispatcher(t, clock, schedule.FileState(path), nil)
	dispTick(t, d3, clock, created.Add(2*time.Minute+3*time.Second), 0)

	if msgs := dispReceiveAll(t, e.sqs, q.QueueURL); len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
}

func TestDispatcherCronInTimeZone(t *testing.T) {
	t.Parallel()
	e := newDispKumo(t)
	q := e.queue(t, false, false)
	name, _, _ := e.create(t, dispSpec{
		expr: "cron(30 9 * * ? *)", tz: "America/New_York",
		target: schedtypes.Target{Arn: aws.String(q.QueueARN)},
	})
	state := schedule.MemoryState()
	clock := &dispClock{}
	d := e.dispatcher(t, clock, state, nil)
	last := func() string {
		st, _, err := state.Get(context.Background(), schedule.StateKey{Group: e.group, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return st.LastFired.UTC().Format(time.RFC3339)
	}
	utc := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	// Friday 6 March 2026, EST (UTC-5): 09:30 New York is 14:30 UTC.
	dispTick(t, d, clock, utc("2026-03-06T09:29:00Z"), 0)
	dispTick(t, d, clock, utc("2026-03-06T09:31:00Z"), 0) // 09:30 UTC is not 09:30 New York
	dispTick(t, d, clock, utc("2026-03-06T14:29:59Z"), 0)
	dispTick(t, d, clock, utc("2026-03-06T14:30:00Z"), 1)
	dispTick(t, d, clock, utc("2026-03-06T14:35:00Z"), 0)
	// Stopped over the weekend (DST begins on Sunday 8 March): only the latest missed
	// occurrence, Sunday 09:30 EDT = 13:30 UTC, fires; Saturday's is skipped.
	dispTick(t, d, clock, utc("2026-03-09T13:29:59Z"), 1)
	if got := last(); got != "2026-03-08T13:30:00Z" {
		t.Errorf("caught up with %s, want 2026-03-08T13:30:00Z", got)
	}
	dispTick(t, d, clock, utc("2026-03-09T13:30:00Z"), 1)
	if got := last(); got != "2026-03-09T13:30:00Z" {
		t.Errorf("last fired %s, want 2026-03-09T13:30:00Z", got)
	}
	msgs := dispReceiveAll(t, e.sqs, q.QueueURL)
	got := map[string]bool{}
	for _, m := range msgs {
		got[dispDecode(t, m).T] = true
	}
	for _, want := range []string{"2026-03-06T14:30:00Z", "2026-03-08T13:30:00Z", "2026-03-09T13:30:00Z"} {
		if !got[want] {
			t.Errorf("no message scheduled at %s; got %v", want, got)
		}
	}
	if len(msgs) != 3 {
		t.Errorf("%d messages, want 3", len(msgs))
	}
}

func TestDispatcherFIFOTargetGetsGroupID(t *testing.T) {
	t.Parallel()
	for _, contentDedup := range []bool{true, false} {
		e := newDispKumo(t)
		q := e.queue(t, true, contentDedup)
		base := time.Now().UTC().Truncate(time.Second)
		due := base.Add(time.Minute)
		e.create(t, dispSpec{expr: schedule.At(due, nil), action: "DELETE", target: schedtypes.Target{
			Arn: aws.String(q.QueueARN), SqsParameters: &schedtypes.SqsParameters{MessageGroupId: aws.String("tenant-7")},
		}})
		clock := &dispClock{}
		rec := &dispWrapSQS{DispatcherSQSAPI: e.sqs}
		d := e.dispatcher(t, clock, nil, rec)
		dispTick(t, d, clock, base, 0)
		dispTick(t, d, clock, due, 1)
		if msgs := dispReceiveAll(t, e.sqs, q.QueueURL); len(msgs) != 1 {
			t.Fatalf("content-based dedup %v: %d messages, want 1", contentDedup, len(msgs))
		}
		if len(rec.sent) != 1 {
			t.Fatalf("content-based dedup %v: %d sends, want 1", contentDedup, len(rec.sent))
		}
		in := rec.sent[0]
		if g := aws.ToString(in.MessageGroupId); g != "tenant-7" {
			t.Errorf("content-based dedup %v: MessageGroupId %q, want tenant-7", contentDedup, g)
		}
		if id := aws.ToString(in.MessageDeduplicationId); len(id) == 0 || len(id) > 128 {
			t.Errorf("content-based dedup %v: MessageDeduplicationId %q, want 1-128 characters", contentDedup, id)
		}
	}
}

// dispWrapSQS records the sends that reach the real client and fails the next failures sends
// (kumo does not return the MessageGroupId attribute on receive, so the FIFO test reads the
// send).
type dispWrapSQS struct {
	schedule.DispatcherSQSAPI
	mu       sync.Mutex
	failures int
	sent     []*sqs.SendMessageInput
}

func (f *dispWrapSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	fail := f.failures > 0
	if fail {
		f.failures--
	} else {
		f.sent = append(f.sent, in)
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("injected send failure")
	}
	return f.DispatcherSQSAPI.SendMessage(ctx, in, opts...)
}

func TestDispatcherSendFailureRetriedWithoutDuplicates(t *testing.T) {
	t.Parallel()
	e := newDispKumo(t)
	q := e.queue(t, false, false)
	_, _, created := e.create(t, dispSpec{expr: "rate(1 minute)", target: schedtypes.Target{Arn: aws.String(q.QueueARN)}})
	clock := &dispClock{}
	failing := &dispWrapSQS{DispatcherSQSAPI: e.sqs}
	d := e.dispatcher(t, clock, nil, failing)

	dispTick(t, d, clock, created.Add(time.Second), 0)
	failing.mu.Lock()
	failing.failures = 1
	failing.mu.Unlock()
	clock.Set(created.Add(time.Minute + time.Second))
	if n, err := d.Tick(context.Background()); err == nil || n != 0 {
		t.Fatalf("Tick with a failing send: fired %d, err %v; want 0 and an error", n, err)
	}
	dispTick(t, d, clock, created.Add(time.Minute+6*time.Second), 1)
	dispTick(t, d, clock, created.Add(time.Minute+11*time.Second), 0)

	msgs := dispReceiveAll(t, e.sqs, q.QueueURL)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want exactly 1", len(msgs))
	}
	b := dispDecode(t, msgs[0])
	if want := created.Add(time.Minute).UTC().Format(time.RFC3339); b.T != want || b.N != 2 {
		t.Errorf("body %+v, want t=%s and attempt 2 (one failed send before)", b, want)
	}
}

// dispFakeScheduler is an in-memory Scheduler for what kumo lacks: StartDate and EndDate (its
// request decoding rejects the SDK's epoch-seconds timestamps) and injected failures.
type dispFakeScheduler struct {
	mu          sync.Mutex
	schedules   map[string]*scheduler.GetScheduleOutput // by group/name
	failDeletes int
	deleted     []string
	lists       int
	onList      func(n int)
}

func newDispFakeScheduler() *dispFakeScheduler {
	return &dispFakeScheduler{schedules: map[string]*scheduler.GetScheduleOutput{}}
}

func (f *dispFakeScheduler) put(s *scheduler.GetScheduleOutput) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.GroupName == nil {
		s.GroupName = aws.String("default")
	}
	if s.State == "" {
		s.State = schedtypes.ScheduleStateEnabled
	}
	if s.Arn == nil {
		s.Arn = aws.String("arn:aws:scheduler:us-east-1:000000000000:schedule/" + *s.GroupName + "/" + *s.Name)
	}
	if s.Target != nil && s.Target.Input == nil {
		s.Target.Input = aws.String(dispTemplate)
	}
	cp := *s
	f.schedules[*s.GroupName+"/"+*s.Name] = &cp
}

func (f *dispFakeScheduler) setState(group, name string, st schedtypes.ScheduleState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.schedules[group+"/"+name].State = st
}

func (f *dispFakeScheduler) has(group, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.schedules[group+"/"+name]
	return ok
}

func (f *dispFakeScheduler) ListSchedules(_ context.Context, in *scheduler.ListSchedulesInput, _ ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error) {
	f.mu.Lock()
	f.lists++
	n, onList := f.lists, f.onList
	out := &scheduler.ListSchedulesOutput{}
	for _, s := range f.schedules { // like kumo, ignore the group filter
		out.Schedules = append(out.Schedules, schedtypes.ScheduleSummary{
			Name: s.Name, GroupName: s.GroupName, State: s.State, Arn: s.Arn,
		})
	}
	f.mu.Unlock()
	if onList != nil {
		onList(n)
	}
	return out, nil
}

func (f *dispFakeScheduler) GetSchedule(_ context.Context, in *scheduler.GetScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.schedules[aws.ToString(in.GroupName)+"/"+aws.ToString(in.Name)]
	if !ok {
		return nil, &schedtypes.ResourceNotFoundException{Message: aws.String("not found")}
	}
	cp := *s
	return &cp, nil
}

func (f *dispFakeScheduler) DeleteSchedule(_ context.Context, in *scheduler.DeleteScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDeletes > 0 {
		f.failDeletes--
		return nil, errors.New("injected delete failure")
	}
	k := aws.ToString(in.GroupName) + "/" + aws.ToString(in.Name)
	if _, ok := f.schedules[k]; !ok {
		return nil, &schedtypes.ResourceNotFoundException{Message: aws.String("not found")}
	}
	delete(f.schedules, k)
	f.deleted = append(f.deleted, k)
	return &scheduler.DeleteScheduleOutput{}, nil
}

// dispFakeSQS records sends; queue URLs derive from the queue name.
type dispFakeSQS struct {
	mu    sync.Mutex
	sends []*sqs.SendMessageInput
}

func (f *dispFakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.local/" + aws.ToString(in.QueueOwnerAWSAccountId) + "/" + aws.ToString(in.QueueName))}, nil
}

func (f *dispFakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("m")}, nil
}

func (f *dispFakeSQS) count(queue string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, in := range f.sends {
		if strings.HasSuffix(aws.ToString(in.QueueUrl), "/"+queue) {
			n++
		}
	}
	return n
}

func dispQueueARN(name string) *string {
	return aws.String("arn:aws:sqs:us-east-1:000000000000:" + name)
}

func TestDispatcherDisabledAndDates(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	created := t0.Add(-time.Hour + 17*time.Second) // rate occurrences fall at :17 from creation
	fake := newDispFakeScheduler()
	add := func(name string, mut func(s *scheduler.GetScheduleOutput)) {
		s := &scheduler.GetScheduleOutput{
			Name: aws.String(name), ScheduleExpression: aws.String("rate(1 minute)"),
			CreationDate: aws.Time(created), Target: &schedtypes.Target{Arn: dispQueueARN(name)},
		}
		mut(s)
		fake.put(s)
	}
	add("off", func(s *scheduler.GetScheduleOutput) { s.State = schedtypes.ScheduleStateDisabled })
	add("ends", func(s *scheduler.GetScheduleOutput) {
		s.StartDate, s.EndDate = aws.Time(t0), aws.Time(t0.Add(2*time.Minute+30*time.Second))
		s.ActionAfterCompletion = schedtypes.ActionAfterCompletionDelete
	})
	add("later", func(s *scheduler.GetScheduleOutput) { s.StartDate = aws.Time(t0.Add(10*time.Minute + 30*time.Second)) })
	add("paused", func(s *scheduler.GetScheduleOutput) {})
	add("other-group", func(s *scheduler.GetScheduleOutput) { s.GroupName = aws.String("other") })

	sq := &dispFakeSQS{}
	state := schedule.MemoryState()
	clock := &dispClock{}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: fake, SQS: sq, State: state, Now: clock.Now, Logger: dispLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	lastFired := func(name string) time.Time {
		st, _, err := state.Get(context.Background(), schedule.StateKey{Group: "default", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return st.LastFired
	}
	fires := map[string][]int{} // seconds after t0 of the ticks that sent, per schedule
	for at := t0.Add(time.Second); !at.After(t0.Add(12 * time.Minute)); at = at.Add(5 * time.Second) {
		switch at {
		case t0.Add(2*time.Minute + 1*time.Second):
			fake.setState("default", "paused", schedtypes.ScheduleStateDisabled)
		case t0.Add(6*time.Minute + 21*time.Second):
			fake.setState("default", "paused", schedtypes.ScheduleStateEnabled)
		}
		before := map[string]int{}
		for _, n := range []string{"off", "ends", "later", "paused", "other-group"} {
			before[n] = sq.count(n)
		}
		clock.Set(at)
		if _, err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		for n, c := range before {
			if sq.count(n) > c {
				fires[n] = append(fires[n], int(at.Sub(t0)/time.Second))
			}
		}
	}
	same := func(a, b []int) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if len(fires["off"]) != 0 {
		t.Errorf("DISABLED schedule fired at +%v s", fires["off"])
	}
	if len(fires["other-group"]) != 0 {
		t.Errorf("a schedule of another group fired at +%v s", fires["other-group"])
	}
	if got, want := fires["ends"], []int{61, 121}; !same(got, want) {
		t.Errorf("schedule ending at +2m30s fired at +%v s, want +%v s", got, want)
	}
	if fake.has("default", "ends") {
		t.Error("recurring schedule with ActionAfterCompletion DELETE still exists after its EndDate")
	}
	// later: nothing before its StartDate (+630 s); occurrences counted from StartDate, not
	// from creation (whether StartDate itself is an occurrence is Expression.Next's rule).
	if got := fires["later"]; len(got) == 0 || got[0] < 630 || got[len(got)-1] != 691 {
		t.Errorf("schedule starting at +10m30s fired at +%v s, want from +631 s, last at +691 s", got)
	}
	if got, want := lastFired("later"), t0.Add(11*time.Minute+30*time.Second); !got.Equal(want) {
		t.Errorf("rate with StartDate last fired at %s, want %s (anchored at StartDate)", got, want)
	}
	// paused: occurrences at +17 s, +77 s, ... (from its creation); disabled from +121 s to
	// +381 s, it fires nothing for that time when enabled again, and resumes at +437 s.
	if got, want := fires["paused"], []int{21, 81, 441, 501, 561, 621, 681}; !same(got, want) {
		t.Errorf("paused schedule fired at +%v s, want +%v s", got, want)
	}
}

func TestDispatcherDeleteFailureDoesNotRefire(t *testing.T) {
	t.Parallel()
	fake := newDispFakeScheduler()
	due := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	fake.put(&scheduler.GetScheduleOutput{
		Name: aws.String("job-1"), ScheduleExpression: aws.String(schedule.At(due, nil)),
		CreationDate: aws.Time(due.Add(-time.Hour)), ActionAfterCompletion: schedtypes.ActionAfterCompletionDelete,
		Target: &schedtypes.Target{Arn: dispQueueARN("q")},
	})
	fake.failDeletes = 1
	sq := &dispFakeSQS{}
	clock := &dispClock{}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: fake, SQS: sq, Now: clock.Now, Logger: dispLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(due.Add(2 * time.Second))
	if n, err := d.Tick(context.Background()); n != 1 || err == nil {
		t.Fatalf("first Tick: fired %d, err %v; want 1 and the delete error", n, err)
	}
	if !fake.has("default", "job-1") {
		t.Fatal("schedule deleted although the delete failed")
	}
	dispTick(t, d, clock, due.Add(7*time.Second), 0)
	if fake.has("default", "job-1") {
		t.Error("delete not retried on the next tick")
	}
	if n := sq.count("q"); n != 1 {
		t.Errorf("sent %d times, want 1", n)
	}
}

func TestDispatcherSkipsNonSQSTargets(t *testing.T) {
	t.Parallel()
	fake := newDispFakeScheduler()
	created := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	fake.put(&scheduler.GetScheduleOutput{
		Name: aws.String("lambda"), ScheduleExpression: aws.String("rate(1 minute)"), CreationDate: aws.Time(created),
		Target: &schedtypes.Target{Arn: aws.String("arn:aws:lambda:us-east-1:000000000000:function:f")},
	})
	sq := &dispFakeSQS{}
	logs := &dispBuffer{}
	clock := &dispClock{}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: fake, SQS: sq, Now: clock.Now, Logger: dispLogger(t, logs)})
	if err != nil {
		t.Fatal(err)
	}
	dispTick(t, d, clock, created.Add(time.Second), 0)
	dispTick(t, d, clock, created.Add(time.Minute+time.Second), 0)
	dispTick(t, d, clock, created.Add(2*time.Minute+time.Second), 0)
	if got := strings.Count(logs.String(), "not an SQS queue"); got != 1 {
		t.Errorf("%d skip log lines, want 1:\n%s", got, logs)
	}
	if len(sq.sends) != 0 {
		t.Errorf("%d sends, want 0", len(sq.sends))
	}
}

func TestDispatcherRunTicksUntilCancelled(t *testing.T) {
	t.Parallel()
	fake := newDispFakeScheduler()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.onList = func(n int) {
		if n == 3 {
			cancel()
		}
	}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: fake, SQS: &dispFakeSQS{}, Interval: time.Millisecond, Logger: dispLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if fake.lists < 3 {
		t.Errorf("%d ticks, want at least 3", fake.lists)
	}
}

func TestNewDispatcherValidates(t *testing.T) {
	t.Parallel()
	if _, err := schedule.NewDispatcher(schedule.DispatcherConfig{SQS: &dispFakeSQS{}}); err == nil {
		t.Error("no error without Scheduler")
	}
	if _, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: newDispFakeScheduler()}); err == nil {
		t.Error("no error without SQS")
	}
	if _, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: newDispFakeScheduler(), SQS: &dispFakeSQS{}, Interval: -time.Second}); err == nil {
		t.Error("no error with a negative Interval")
	}
}
