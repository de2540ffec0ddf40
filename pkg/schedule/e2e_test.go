package schedule_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// The producer's scheduler interfaces: what it delays with, and what Cancel reads back.
var (
	_ producer.JobScheduler       = (*schedule.Client)(nil)
	_ producer.ScheduledJobReader = (*schedule.Client)(nil)
)

type reportArgs struct {
	Name string `json:"name"`
}

func (reportArgs) Kind() string { return "report.e2e" }

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// e2e is a queue, a schedule client and dispatcher on one fake clock, and a worker with the
// idempotency middleware that counts the runs of each job key.
type e2e struct {
	t      *testing.T
	sqs    *sqs.Client
	stack  *awslocal.Stack
	client *schedule.Client
	disp   *schedule.Dispatcher
	clock  *fakeClock
	h      *worker.Handler
	mu     sync.Mutex
	runs   map[string]int
	total  atomic.Int64
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	e := &e2e{t: t, sqs: sqs.NewFromConfig(b.Config), clock: &fakeClock{now: time.Now().UTC()}, runs: map[string]int{}}
	var err error
	if e.stack, err = awslocal.Provision(ctx, e.sqs, awslocal.StackOptions{Name: awslocal.UniqueName("sched")}); err != nil {
		t.Fatal(err)
	}
	sch := scheduler.NewFromConfig(b.Config)
	group, err := awslocal.ProvisionScheduleGroup(ctx, sch, e.stack.Name)
	if err != nil {
		t.Fatal(err)
	}
	if e.client, err = schedule.NewClient(schedule.Config{Scheduler: sch, Group: group, QueueARN: e.stack.QueueARN,
		RoleARN: "arn:aws:iam::000000000000:role/sqsworker-scheduler", Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	if e.disp, err = schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: sch, SQS: e.sqs, Group: group,
		Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	e.useStore(idempotency.NewMemoryStore())
	return e
}

// useStore (re)builds the worker with the idempotency middleware over store.
func (e *e2e) useStore(store idempotency.Store) {
	t := e.t
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[reportArgs](func(ctx context.Context, job *jobs.Job[reportArgs]) error {
		e.mu.Lock()
		e.runs[job.Key]++
		e.mu.Unlock()
		e.total.Add(1)
		return nil
	}))
	if e.h, err = worker.New(worker.Config{Registry: reg, SQS: e.sqs, QueueURL: e.stack.QueueURL, DLQURL: e.stack.DLQURL,
		Middleware: []worker.Middleware{mw}, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
}

func (e *e2e) tick() int {
	e.t.Helper()
	n, err := e.disp.Tick(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// drain receives what is on the queue and hands it to the worker, as Lambda would.
func (e *e2e) drain() []sqstypes.Message {
	e.t.Helper()
	var all []sqstypes.Message
	for {
		out, err := e.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.stack.QueueURL),
			MaxNumberOfMessages: 10, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		all = append(all, out.Messages...)
		e.handle(out.Messages)
	}
}

func (e *e2e) handle(msgs []sqstypes.Message) {
	e.t.Helper()
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: e.stack.QueueARN})
	}
	resp, err := e.h.HandleSQS(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("HandleSQS = %+v, %v", resp, err)
	}
}

func TestOneTimeScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	ctx := context.Background()
	prod, err := producer.New(producer.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL, Scheduler: e.client, Clock: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := prod.EnqueueIn(ctx, reportArgs{Name: "quarterly"}, 16*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res.Schedule == "" || res.MessageID != "" {
		t.Fatalf("result = %+v, want a schedule and no message yet", res)
	}
	if n := e.tick(); n != 0 || len(e.drain()) != 0 {
		t.Fatalf("fired %d before its time", n)
	}
	e.clock.Add(15 * time.Minute)
	if n := e.tick(); n != 0 {
		t.Fatalf("fired %d a minute early", n)
	}
	e.clock.Add(time.Minute + time.Second)
	if n := e.tick(); n != 1 {
		t.Fatalf("fired %d when due, want 1", n)
	}
	if n := e.tick(); n != 0 {
		t.Fatalf("fired again: %d", n)
	}
	msgs := e.drain()
	if len(msgs) != 1 || e.total.Load() != 1 || e.runs[res.ID] != 1 {
		t.Fatalf("received %d, ran %d (%v)", len(msgs), e.total.Load(), e.runs)
	}
	env, err := jobs.ParseEnvelope(aws.ToString(msgs[0].Body))
	if err != nil || env.ID != res.ID {
		t.Errorf("fired body %q: %+v, %v", aws.ToString(msgs[0].Body), env, err)
	}
	// ActionAfterCompletion DELETE: the schedule is gone, and cancelling it now is not an error.
	b, _ := awslocal.Shared()
	_, err = scheduler.NewFromConfig(b.Config).GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(res.Schedule), GroupName: aws.String(e.client.Group())})
	if err == nil {
		t.Errorf("the one-time schedule still exists after firing")
	}
	if err := e.client.CancelJob(ctx, res.ID); err != nil {
		t.Errorf("CancelJob after firing: %v", err)
	}
}

func TestRecurringScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	ctx := context.Background()
	name := "report-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if err := e.client.Upsert(ctx, schedule.Recurring{Name: name, Expression: "rate(1 minute)", Kind: "report.e2e",
		Args: []byte(`{"name":"minutely"}`)}); err != nil {
		t.Fatal(err)
	}
	e.tick() // the dispatcher first sees the schedule
	var fired []sqstypes.Message
	for range 2 {
		e.clock.Add(61 * time.Second)
		if n := e.tick(); n != 1 {
			t.Fatalf("fired %d in a minute, want 1", n)
		}
		fired = append(fired, e.drain()...)
	}
	if len(fired) != 2 || e.total.Load() != 2 {
		t.Fatalf("received %d, ran %d, want 2 distinct jobs", len(fired), e.total.Load())
	}
	keys := map[string]bool{}
	var first jobs.Envelope
	for i, m := range fired {
		env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		keys[env.Key] = true
		if i == 0 {
			first = env
		}
	}
	if len(keys) != 2 {
		t.Fatalf("keys %v: the two firings must be distinct jobs", keys)
	}
	// A redelivered firing, and the scheduler's retry of the same occurrence (another execution
	// id, same scheduled time), each run zero more times.
	e.handle(fired[:1])
	env := first
	env.ID = "another-execution-id"
	retry := string(env.AppendJSON(nil))
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.stack.QueueURL), MessageBody: aws.String(retry)}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if got := e.total.Load(); got != 2 || e.runs[first.Key] != 1 {
		t.Errorf("ran %d times in all (%v), want still 2: one run per occurrence", got, e.runs)
	}
	if err := e.client.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Get(ctx, name); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}
}

func TestCancelledScheduledJobNeverRuns(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	ctx := context.Background()
	b, _ := awslocal.Shared()
	ddb := b.DynamoDB()
	table, err := awslocal.ProvisionTable(ctx, ddb, e.stack.Name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := status.New(status.Config{Client: ddb, Table: table, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	e.useStore(store)
	prod, err := producer.New(producer.Config{SQS: e.sqs, QueueURL: e.stack.QueueURL, Scheduler: e.client, Status: st, Clock: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := prod.EnqueueIn(ctx, reportArgs{Name: "cancel-me"}, time.Hour)
	if err != nil || res.StatusErr != nil {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	if job, err := st.Get(ctx, "report.e2e", res.Key); err != nil || job.State != idempotency.StateScheduled {
		t.Fatalf("status after scheduling: %+v, %v", job, err)
	}
	// Keep a copy of what the schedule would send, as if it had already fired.
	env := jobs.Envelope{V: 1, ID: res.ID, Kind: "report.e2e", Args: []byte(`{"name":"cancel-me"}`)}
	if err := prod.Cancel(ctx, "report.e2e", "", res.ID); err != nil {
		t.Fatal(err)
	}
	if job, err := st.Get(ctx, "report.e2e", res.Key); err != nil || job.State != idempotency.StateCancelled {
		t.Fatalf("status after cancel: %+v, %v", job, err)
	}
	e.clock.Add(2 * time.Hour)
	if n := e.tick(); n != 0 {
		t.Fatalf("a cancelled schedule fired %d times", n)
	}
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.stack.QueueURL), MessageBody: aws.String(string(env.AppendJSON(nil)))}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if got := e.total.Load(); got != 0 {
		t.Errorf("the cancelled job ran %d times", got)
	}
}
