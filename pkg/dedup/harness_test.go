package dedup_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// exportArgs is the job of the tests.
type exportArgs struct {
	User string `json:"user"`
	N    int    `json:"n"`
}

func (exportArgs) Kind() string { return "report.export" }

// clock is a fake clock shared by everything a test builds.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// env is a stack on the embedded emulator: a queue, the job table, a schedule group and its
// dispatcher, a producer that records jobs as queued, an Enqueuer, and a worker with the
// idempotency middleware on the table whose runs it counts.
type env struct {
	t      testing.TB
	clock  *clock
	stack  *awslocal.Stack
	sqs    *sqs.Client
	ddb    *dynamodb.Client
	table  string
	status *status.Table
	prod   *producer.Producer
	sched  *schedule.Client
	disp   *schedule.Dispatcher
	enq    *dedup.Enqueuer
	h      *worker.Handler

	// With envOptions.named: the queue set (the default queue first, e.stack's), each queue's
	// stack and worker (by name), all with the routes' Routing.
	set      *queues.Set
	stacks   map[string]*awslocal.Stack
	handlers map[string]*worker.Handler

	mu        sync.Mutex
	runs      []exportArgs // the args of every run, in order
	ids       []string
	misrouted int // jobs the worker ran as misrouted (worker.Outcome.Misrouted)
}

type envOptions struct {
	fifo       bool
	noStatus   bool // a producer without Config.Status
	sqsWrapper func(producer.SQSAPI) producer.SQSAPI
	mod        func(*dedup.Config)
	// named, when set, makes the stack one of several queues (awslocal.ProvisionQueues): the
	// default queue and these, the producer one of the set with routes, and one worker per queue.
	named  []queues.Spec
	routes queues.Routes
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	e := &env{t: t, clock: &clock{now: time.Now().UTC().Truncate(time.Second)}}
	e.sqs = sqs.NewFromConfig(b.Config)
	e.ddb = dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	var err error
	name := awslocal.UniqueName("dedup")
	stackOpts := awslocal.StackOptions{Name: name, FIFO: o.fifo, ContentBasedDeduplication: o.fifo}
	if o.named == nil {
		if e.stack, err = awslocal.Provision(ctx, e.sqs, stackOpts); err != nil {
			t.Fatal(err)
		}
	} else {
		var stacks []*awslocal.Stack
		if e.set, stacks, err = awslocal.ProvisionQueues(ctx, e.sqs, stackOpts, o.named...); err != nil {
			t.Fatal(err)
		}
		e.stacks = map[string]*awslocal.Stack{}
		for i, q := range e.set.All() {
			e.stacks[q.Name] = stacks[i]
		}
		e.stack = e.stacks[queues.DefaultName]
	}
	if e.table, err = awslocal.ProvisionTable(ctx, e.ddb, name); err != nil {
		t.Fatal(err)
	}
	if e.status, err = status.New(status.Config{Client: e.ddb, Table: e.table, Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	sch := scheduler.NewFromConfig(b.Config)
	group, err := awslocal.ProvisionScheduleGroup(ctx, sch, name)
	if err != nil {
		t.Fatal(err)
	}
	if e.sched, err = schedule.NewClient(schedule.Config{Scheduler: sch, Group: group, QueueARN: e.stack.QueueARN,
		RoleARN: "arn:aws:iam::000000000000:role/sqsworker-scheduler", Now: e.clock.Now}); err != nil {
		t.Fatal(err)
	}
	if e.disp, err = schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: sch, SQS: e.sqs, Group: group,
		Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	var q producer.SQSAPI = e.sqs
	if o.sqsWrapper != nil {
		q = o.sqsWrapper(q)
	}
	pcfg := producer.Config{SQS: q, QueueURL: e.stack.QueueURL, Clock: e.clock.Now, MaxRetries: -1}
	if e.set != nil {
		pcfg.Queues, pcfg.Routes = e.set, o.routes
	}
	if !o.noStatus {
		pcfg.Status = e.status
	}
	if e.prod, err = producer.New(pcfg); err != nil {
		t.Fatal(err)
	}
	cfg := dedup.Config{Producer: e.prod, DynamoDB: e.ddb, Table: e.table, Jobs: e.status, Scheduler: e.sched,
		LocalScheduler: true, Now: e.clock.Now}
	if o.mod != nil {
		o.mod(&cfg)
	}
	if e.enq, err = dedup.New(cfg); err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: e.ddb, Table: e.table})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, ExpectRecords: !o.noStatus,
		Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[exportArgs](func(ctx context.Context, job *jobs.Job[exportArgs]) error {
		e.mu.Lock()
		e.runs = append(e.runs, job.Args)
		e.ids = append(e.ids, job.ID)
		e.mu.Unlock()
		return nil
	}))
	if e.set == nil {
		if e.h, err = worker.New(worker.Config{Registry: reg, SQS: e.sqs, QueueURL: e.stack.QueueURL, DLQURL: e.stack.DLQURL,
			Middleware: []worker.Middleware{mw}, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e.handlers = map[string]*worker.Handler{}
	for name, st := range e.stacks {
		if e.handlers[name], err = worker.New(worker.Config{Registry: reg, SQS: e.sqs, QueueURL: st.QueueURL, DLQURL: st.DLQURL,
			Middleware: []worker.Middleware{mw}, Routing: e.set.Routing(o.routes), OnBatch: e.countMisrouted, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
	}
	e.h = e.handlers[queues.DefaultName]
	return e
}

func (e *env) countMisrouted(_ context.Context, outcomes []worker.Outcome) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range outcomes {
		if o.Misrouted {
			e.misrouted++
		}
	}
}

// receive takes every message now visible on the queue (short polls until one comes back empty).
func (e *env) receive() []sqstypes.Message {
	e.t.Helper()
	return e.receiveFrom(e.stack)
}

// receiveFrom is receive on the queue of st.
func (e *env) receiveFrom(st *awslocal.Stack) []sqstypes.Message {
	e.t.Helper()
	var all []sqstypes.Message
	for {
		out, err := e.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURL),
			MaxNumberOfMessages: 10, VisibilityTimeout: 60, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		all = append(all, out.Messages...)
	}
}

// work hands messages to the worker, as Lambda would, and fails on any item failure.
func (e *env) work(msgs []sqstypes.Message) {
	e.t.Helper()
	e.workOn(e.h, e.stack, msgs)
}

// workOn hands messages of the queue of st to the worker h, as Lambda would.
func (e *env) workOn(h *worker.Handler, st *awslocal.Stack, msgs []sqstypes.Message) {
	e.t.Helper()
	if len(msgs) == 0 {
		return
	}
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: st.QueueARN})
	}
	resp, err := h.HandleSQS(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("worker: %v, failures %v", err, resp.BatchItemFailures)
	}
}

// envelopes parses the messages' bodies.
func envelopes(t *testing.T, msgs []sqstypes.Message) []jobs.Envelope {
	t.Helper()
	out := make([]jobs.Envelope, len(msgs))
	for i, m := range msgs {
		env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = env
	}
	return out
}

func argsOf(t *testing.T, env jobs.Envelope) exportArgs {
	t.Helper()
	var a exportArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *env) ran() ([]exportArgs, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]exportArgs(nil), e.runs...), append([]string(nil), e.ids...)
}

type producerSQS = producer.SQSAPI
