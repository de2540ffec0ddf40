package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

const qbase = "https://sqs.us-east-1.amazonaws.com/123456789012/shop-jobs"

type resetArgs struct {
	User string `json:"user"`
}

func (resetArgs) Kind() string { return "password.reset" }

type importArgs struct {
	File string `json:"file"`
}

func (importArgs) Kind() string { return "import.run" }

type shipArgs struct {
	Order string `json:"order"`
}

func (shipArgs) Kind() string { return "order.ship" }

// queueSQS is a fake SQS that records which queue each message went to.
type queueSQS struct {
	mu    sync.Mutex
	sent  []string // "<queue name> <kind>" per message, in order
	calls []string // "<queue name> <n>" per SendMessageBatch call
	fail  map[string]bool
}

func kindOfBody(body string) string {
	env, err := jobs.ParseEnvelope(body)
	if err != nil {
		return "?"
	}
	return env.Kind
}

func (f *queueSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := queues.NameOf(aws.ToString(in.QueueUrl))
	if f.fail[q] {
		return nil, fmt.Errorf("queue %s is down", q)
	}
	f.sent = append(f.sent, q+" "+kindOfBody(aws.ToString(in.MessageBody)))
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("m%d", len(f.sent)))}, nil
}

func (f *queueSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := queues.NameOf(aws.ToString(in.QueueUrl))
	f.calls = append(f.calls, fmt.Sprintf("%s %d", q, len(in.Entries)))
	if f.fail[q] {
		return nil, fmt.Errorf("queue %s is down", q)
	}
	for _, e := range in.Entries {
		f.sent = append(f.sent, q+" "+kindOfBody(aws.ToString(e.MessageBody)))
	}
	return succeedAll(len(f.calls), in), nil
}

func stackSet(t *testing.T, extra ...queues.Queue) *queues.Set {
	t.Helper()
	qs := append([]queues.Queue{
		{Name: "critical", URL: qbase + "-critical", ARN: "arn:aws:sqs:us-east-1:123456789012:shop-jobs-critical"},
		{Name: "default", URL: qbase},
		{Name: "bulk", URL: qbase + "-bulk"},
	}, extra...)
	s, err := queues.New(qs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stackRegistry() *jobs.Registry {
	reg := jobs.NewRegistry()
	nop := func(context.Context, *jobs.Job[resetArgs]) error { return nil }
	jobs.MustRegister(reg, jobs.WorkFunc[resetArgs](nop), jobs.WithQueue("critical"))
	jobs.MustRegister(reg, jobs.WorkFunc[importArgs](func(context.Context, *jobs.Job[importArgs]) error { return nil }), jobs.WithQueue("bulk"))
	jobs.MustRegister(reg, jobs.WorkFunc[emailArgs](func(context.Context, *jobs.Job[emailArgs]) error { return nil }))
	return reg
}

func routedProducer(t *testing.T, api SQSAPI, mod ...func(*Config)) *Producer {
	t.Helper()
	return newTestProducer(t, api, "", append([]func(*Config){func(c *Config) {
		c.Queues, c.Routes = stackSet(t), stackRegistry()
	}}, mod...)...)
}

func TestRoutedEnqueueSendsEachKindToItsQueue(t *testing.T) {
	t.Parallel()
	f := &queueSQS{}
	p := routedProducer(t, f)
	ctx := context.Background()
	for _, args := range []jobs.Args{resetArgs{"ada"}, importArgs{"a.csv"}, emailArgs{To: "b@c.d"}} {
		if _, err := p.Enqueue(ctx, args); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Enqueue(ctx, importArgs{"urgent.csv"}, WithQueue("critical")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueRaw(ctx, "import.run", []byte(`{"file":"raw.csv"}`)); err != nil {
		t.Fatal(err)
	}
	want := []string{"shop-jobs-critical password.reset", "shop-jobs-bulk import.run", "shop-jobs email.send",
		"shop-jobs-critical import.run", "shop-jobs-bulk import.run"}
	if got := strings.Join(f.sent, "|"); got != strings.Join(want, "|") {
		t.Errorf("sent\n %s\nwant\n %s", got, strings.Join(want, "|"))
	}
	if p.QueueURL() != qbase || p.FIFO() {
		t.Errorf("QueueURL() = %s, want the default queue's", p.QueueURL())
	}
}

func TestRoutedEnqueueRejectsUnknownQueuesAndMixedFIFO(t *testing.T) {
	t.Parallel()
	f := &queueSQS{}
	p := newTestProducer(t, f, "", func(c *Config) {
		c.Queues = stackSet(t, queues.Queue{Name: "orders", URL: qbase + "-orders.fifo"})
		c.Routes = queues.Routes{"order.ship": "orders", "password.reset": "critical"}
	})
	ctx := context.Background()
	_, err := p.Enqueue(ctx, emailArgs{To: "a@b.c"}, WithQueue("urgent"))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, queues.ErrUnknownQueue) {
		t.Errorf("WithQueue(urgent) = %v, want ErrInvalid and queues.ErrUnknownQueue", err)
	}
	mustContain(t, err, "producer: enqueue email.send", `"urgent"`, "critical, default, bulk, orders")
	_, err = p.Enqueue(ctx, shipArgs{"o-1"}, WithGroupID("o-1"), WithQueue("bulk"))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, queues.ErrMixedFIFO) {
		t.Errorf("a FIFO kind sent to a standard queue = %v, want ErrMixedFIFO", err)
	}
	mustContain(t, err, "kind order.ship goes to FIFO queue orders")
	if _, err := p.Enqueue(ctx, shipArgs{"o-1"}, WithGroupID("o-1")); err != nil {
		t.Errorf("the FIFO kind on its queue: %v", err)
	}
	if len(f.sent) != 1 || f.sent[0] != "shop-jobs-orders.fifo order.ship" {
		t.Errorf("sent %v, want only the valid job", f.sent)
	}
}

func TestNewRejectsBadRoutes(t *testing.T) {
	t.Parallel()
	set := stackSet(t)
	for _, tc := range []struct {
		name     string
		cfg      Config
		mentions []string
		is       error
	}{
		{"routes without queues", Config{SQS: &queueSQS{}, Routes: queues.Routes{"a": "bulk"}}, []string{"Config.Routes needs Config.Queues"}, nil},
		{"a kind routed to a missing queue", Config{SQS: &queueSQS{}, Queues: set, Routes: queues.Routes{"email.send": "urgent", "report.build": "bulk"}},
			[]string{`kind email.send is routed to queue "urgent"`}, queues.ErrUnknownQueue},
		{"a registered kind routed to a missing queue", Config{SQS: &queueSQS{}, Queues: mustQueues(t, queues.Queue{Name: "default", URL: qbase}), Routes: stackRegistry()},
			[]string{`kind import.run is routed to queue "bulk"`, `kind password.reset is routed to queue "critical"`}, queues.ErrUnknownQueue},
		{"QueueURL not the default", Config{SQS: &queueSQS{}, Queues: set, QueueURL: qbase + "-bulk"}, []string{"is not the default queue"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			mustContain(t, err, tc.mentions...)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}

func mustQueues(t *testing.T, qs ...queues.Queue) *queues.Set {
	t.Helper()
	s, err := queues.New(qs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOneQueueProducerAcceptsOnlyItsOwnQueueName(t *testing.T) {
	t.Parallel()
	f := &queueSQS{}
	p := newTestProducer(t, f, qbase)
	ctx := context.Background()
	if _, err := p.Enqueue(ctx, emailArgs{To: "a@b.c"}, WithQueue(queues.DefaultName)); err != nil {
		t.Errorf("WithQueue(default) on a producer of one queue: %v", err)
	}
	_, err := p.Enqueue(ctx, emailArgs{To: "a@b.c"}, WithQueue("bulk"))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, queues.ErrUnknownQueue) {
		t.Errorf("WithQueue(bulk) = %v, want ErrInvalid and ErrUnknownQueue", err)
	}
	mustContain(t, err, "sends to one queue, shop-jobs", "Config.Queues")
	if s := p.Queues(); s == nil || s.Len() != 1 || s.Default().URL != qbase {
		t.Errorf("Queues() = %v, want the one queue", s)
	}
	if got, err := p.ForQueue(""); err != nil || got != p {
		t.Errorf("ForQueue(\"\") = %v, %v; want itself", got, err)
	}
	if _, err := p.ForQueue("bulk"); !errors.Is(err, queues.ErrUnknownQueue) {
		t.Errorf("ForQueue(bulk) = %v, want ErrUnknownQueue", err)
	}
}

func TestRoutedEnqueueBatchSendsOneBatchPerQueueInOrder(t *testing.T) {
	t.Parallel()
	f := &queueSQS{}
	p := routedProducer(t, f)
	reqs := []Request{
		{Args: importArgs{"1"}},
		{Args: resetArgs{"a"}},
		{Args: emailArgs{To: "x@y.z"}, Options: []Option{WithQueue("nope")}},
		{Args: importArgs{"2"}},
		{Args: badKindArgs{}},
		{Args: resetArgs{"b"}, Options: []Option{WithMaxAttempts(0)}},
		{Args: emailArgs{To: "x@y.z"}, Options: []Option{WithQueue("bulk")}},
	}
	results, err := p.EnqueueBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.calls, ","); got != "shop-jobs-bulk 3,shop-jobs-critical 1" {
		t.Errorf("SendMessageBatch calls %s, want one per queue, in the order of their first job", got)
	}
	want := "shop-jobs-bulk import.run|shop-jobs-bulk import.run|shop-jobs-bulk email.send|shop-jobs-critical password.reset"
	if got := strings.Join(f.sent, "|"); got != want {
		t.Errorf("sent %s, want %s", got, want)
	}
	for i, ok := range []bool{true, true, false, true, false, false, true} {
		if (results[i].Err == nil) != ok || (results[i].MessageID != "") != ok {
			t.Errorf("result %d = %+v, want ok=%v", i, results[i], ok)
		}
	}
	// Errors name the job's position in the caller's slice, whichever queue it was for.
	mustContain(t, results[2].Err, "producer: job 2 (email.send)", `"nope"`)
	mustContain(t, results[4].Err, "producer: job 4")
	mustContain(t, results[5].Err, "producer: job 5 (password.reset)", "max attempts 0")
	if !errors.Is(results[2].Err, queues.ErrUnknownQueue) {
		t.Errorf("result 2: %v, want ErrUnknownQueue", results[2].Err)
	}
}

func TestRoutedEnqueueBatchFailsOnlyWhenNothingWasSent(t *testing.T) {
	t.Parallel()
	f := &queueSQS{fail: map[string]bool{"shop-jobs-bulk": true}}
	p := routedProducer(t, f)
	results, err := p.EnqueueBatch(context.Background(), []Request{{Args: importArgs{"1"}}, {Args: resetArgs{"a"}}})
	if err != nil {
		t.Errorf("one queue down, the other took its job: err = %v, want nil", err)
	}
	mustContain(t, results[0].Err, "producer: job 0 (import.run", "shop-jobs-bulk is down")
	if results[1].Err != nil {
		t.Errorf("result 1: %v", results[1].Err)
	}
	_, err = p.EnqueueBatch(context.Background(), []Request{{Args: importArgs{"1"}}, {Args: importArgs{"2"}}})
	mustContain(t, err, "no job sent", "shop-jobs-bulk is down")
}

func TestRoutedPrepareAndSendKeepEachJobsQueue(t *testing.T) {
	t.Parallel()
	f := &queueSQS{}
	p := routedProducer(t, f)
	ctx := context.Background()
	var msgs []Message
	for _, args := range []jobs.Args{resetArgs{"a"}, importArgs{"1"}, emailArgs{To: "q@r.s"}} {
		m, err := p.Prepare(ctx, args)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if msgs[0].QueueURL != qbase+"-critical" || msgs[1].QueueURL != qbase+"-bulk" || msgs[2].QueueURL != qbase {
		t.Errorf("prepared for %s, %s, %s; want each kind's queue", msgs[0].QueueURL, msgs[1].QueueURL, msgs[2].QueueURL)
	}
	old := msgs[2]
	old.QueueURL = "" // an outbox row written before the stack had several queues
	other := msgs[0]
	other.QueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/another-stack-jobs"
	local := msgs[1]
	local.QueueURL = "http://localhost:4566/000000000000/shop-jobs-bulk" // the same queue, another endpoint
	results, err := p.Send(ctx, append(msgs, old, other, local))
	if err != nil {
		t.Fatal(err)
	}
	want := "shop-jobs-critical password.reset|shop-jobs-bulk import.run|shop-jobs-bulk import.run|shop-jobs email.send|shop-jobs email.send"
	if got := strings.Join(f.sent, "|"); got != want {
		t.Errorf("sent %s, want %s", got, want)
	}
	mustContain(t, results[4].Err, "producer: message 4", "another-stack-jobs", "not one of this producer's queues")
	if !errors.Is(results[4].Err, queues.ErrUnknownQueue) {
		t.Errorf("result 4: %v, want ErrUnknownQueue", results[4].Err)
	}
	if local.QueueURL != "http://localhost:4566/000000000000/shop-jobs-bulk" {
		t.Error("Send changed the caller's message")
	}
	if _, err := p.Prepare(ctx, resetArgs{"a"}, WithQueue("nope")); !errors.Is(err, queues.ErrUnknownQueue) {
		t.Errorf("Prepare with an unknown queue = %v", err)
	}
}

// queueScheduler is a fakeScheduler that also schedules onto any queue.
type queueScheduler struct {
	fakeScheduler
	on []string // the queue ARN of each ScheduleJobOn
}

func (s *queueScheduler) ScheduleJobOn(ctx context.Context, queueARN string, env jobs.Envelope, runAt time.Time, group string) (string, error) {
	s.mu.Lock()
	s.on = append(s.on, queueARN)
	s.mu.Unlock()
	return s.ScheduleJob(ctx, env, runAt, group)
}

func TestRoutedDelayedJobsAreScheduledOntoTheirQueue(t *testing.T) {
	t.Parallel()
	sched := &queueScheduler{}
	p := routedProducer(t, &queueSQS{}, func(c *Config) {
		c.Scheduler = sched
		c.Queues = mustQueues(t, // bulk on an endpoint whose URL gives no ARN
			queues.Queue{Name: "critical", URL: qbase + "-critical"},
			queues.Queue{Name: "default", URL: qbase},
			queues.Queue{Name: "bulk", URL: "http://localhost:4566/000000000000/shop-jobs-bulk"})
	})
	ctx := context.Background()
	if _, err := p.Enqueue(ctx, resetArgs{"a"}, WithDelay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, emailArgs{To: "a@b.c"}, WithDelay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(sched.on) != 1 || sched.on[0] != "arn:aws:sqs:us-east-1:123456789012:shop-jobs-critical" || len(sched.scheduled) != 2 {
		t.Errorf("ScheduleJobOn %v, %d schedules; want critical's ARN once, and the default queue's job through ScheduleJob", sched.on, len(sched.scheduled))
	}
	_, err := p.Enqueue(ctx, importArgs{"big"}, WithDelay(time.Hour)) // bulk: no ARN
	if !errors.Is(err, ErrNeedsScheduler) {
		t.Errorf("a delay on a queue without an ARN = %v, want ErrNeedsScheduler", err)
	}
	plain := routedProducer(t, &queueSQS{}, func(c *Config) { c.Scheduler = &fakeScheduler{} })
	if _, err := plain.Enqueue(ctx, resetArgs{"a"}, WithDelay(time.Hour)); !errors.Is(err, ErrNeedsScheduler) {
		t.Errorf("a scheduler of one queue cannot serve critical: %v, want ErrNeedsScheduler", err)
	}
	if err := p.Cancel(ctx, "password.reset", "", "01J0000000000000000000000"); err != nil {
		t.Errorf("Cancel: %v", err)
	}
}

func TestForQueueAndPerQueue(t *testing.T) {
	t.Parallel()
	f := &queueSQS{}
	p := routedProducer(t, f)
	bulk, err := p.ForQueue("bulk")
	if err != nil || bulk.QueueURL() != qbase+"-bulk" {
		t.Fatalf("ForQueue(bulk) = %v, %v", bulk, err)
	}
	if _, err := bulk.Enqueue(context.Background(), resetArgs{"a"}); err != nil {
		t.Fatal(err)
	}
	if f.sent[0] != "shop-jobs-bulk password.reset" {
		t.Errorf("ForQueue's producer sent to %s, want bulk whatever the kind", f.sent[0])
	}
	if _, err := p.ForQueue("nope"); !errors.Is(err, queues.ErrUnknownQueue) {
		t.Errorf("ForQueue(nope) = %v", err)
	}
	var urls []string
	for _, l := range p.PerQueue() {
		urls = append(urls, queues.NameOf(l.QueueURL()))
	}
	if got := strings.Join(urls, ","); got != "shop-jobs,shop-jobs-critical,shop-jobs-bulk" {
		t.Errorf("PerQueue() = %s, want one per queue, the default first", got)
	}
	if p.Queues().Len() != 3 {
		t.Error("Queues() is not the set")
	}
}

// TestQueueOf: the queue a kind goes to without WithQueue: its route among the set, else the
// default queue; a producer of one queue names the default.
func TestQueueOf(t *testing.T) {
	t.Parallel()
	p := routedProducer(t, &queueSQS{})
	for _, tt := range []struct{ kind, want string }{
		{"password.reset", "critical"}, {"import.run", "bulk"}, {"email.send", queues.DefaultName}, {"not.registered", queues.DefaultName},
	} {
		if got, err := p.QueueOf(tt.kind); err != nil || got != tt.want {
			t.Errorf("QueueOf(%s) = %q, %v; want %q", tt.kind, got, err, tt.want)
		}
	}
	one := newTestProducer(t, &queueSQS{}, qbase)
	if got, err := one.QueueOf("import.run"); err != nil || got != queues.DefaultName {
		t.Errorf("a producer of one queue: QueueOf = %q, %v; want %q", got, err, queues.DefaultName)
	}
}
